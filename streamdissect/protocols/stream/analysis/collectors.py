"""The Stream protocol's collectors as one set: which collector sees which frame, in what
order, and which tables each makes. analysis.driver feeds a capture's events to it.

A frame given as a record goes to the lifecycle (every frame), to request pairing (calls),
to the errors table (frames with a code) and to its command's collectors; hot frames as
columns (HotFrames) go to each collector's `on_hot`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from streamdissect.analysis.fields import get
from streamdissect.protocols.stream.analysis.confirms import ConfirmCollector
from streamdissect.protocols.stream.analysis.consumption import (
    DeliveryCollector,
    ThroughputCollector,
)
from streamdissect.protocols.stream.analysis.credit import AT_ONCE_MS, CreditCollector
from streamdissect.protocols.stream.analysis.errors import ErrorCollector
from streamdissect.protocols.stream.analysis.latency import NOT_CALLS, LatencyCollector
from streamdissect.protocols.stream.analysis.lifecycle import LifecycleCollector
from streamdissect.protocols.stream.hot import HotFrames
from streamdissect.protocols.stream.records import RECORD_CLASSES
from streamdissect.slotted import Slotted

# The collector (attribute of Collectors) that makes each table.
MADE_BY = {"connections": "lifecycle", "requests": "latency", "latency": "latency",
           "publishes": "confirms", "confirms": "confirms", "backlog": "confirms",
           "credit": "credit", "stalls": "credit", "credit_balance": "credit",
           "deliveries": "deliveries", "throughput": "throughput",
           "errors": "errors"}  # fmt: skip
_ONE_COMMAND = frozenset(RECORD_CLASSES.values())  # (not Malformed, Unknown, dicts)


class Collectors(Slotted):
    """The Stream's collectors of one run."""

    field_names = ("latency", "confirms", "credit", "deliveries", "throughput", "lifecycle",
                   "errors", "hot_class", "active", "_by_command")  # fmt: skip
    latency: LatencyCollector
    confirms: ConfirmCollector
    credit: CreditCollector
    deliveries: DeliveryCollector  # (its rows as columns, spilled past a few MiB: a Deliver a row)
    throughput: ThroughputCollector
    lifecycle: LifecycleCollector
    errors: ErrorCollector
    hot_class: type  # the fast path's columns event: the driver gives it to the collectors' on_hot
    active: tuple | None  # the collectors fed (None: all); the others are left empty
    _by_command: dict

    def __init__(self, latency: LatencyCollector | None = None,
                 confirms: ConfirmCollector | None = None, credit: CreditCollector | None = None,
                 deliveries: DeliveryCollector | None = None,
                 throughput: ThroughputCollector | None = None,
                 lifecycle: LifecycleCollector | None = None, errors: ErrorCollector | None = None,
                 hot_class: type = HotFrames, active: tuple | None = None,
                 _by_command: dict | None = None) -> None:  # fmt: skip
        self.latency = LatencyCollector() if latency is None else latency
        self.confirms = ConfirmCollector() if confirms is None else confirms
        self.credit = CreditCollector() if credit is None else credit
        self.deliveries = DeliveryCollector(compact=True) if deliveries is None else deliveries
        self.throughput = ThroughputCollector() if throughput is None else throughput
        self.lifecycle = LifecycleCollector() if lifecycle is None else lifecycle
        self.errors = ErrorCollector() if errors is None else errors
        self.hot_class, self.active = hot_class, active
        self._by_command = {} if _by_command is None else _by_command

    @classmethod
    def made(cls, at_once_ms: float = AT_ONCE_MS, report_only: bool = False,
             tables: Collection[str] | None = None) -> Collectors:  # fmt: skip
        """The set for one capture. `report_only`: keep only what the analyze report shows
        (no per-id publishes table, no backlog series, no credit balance series, no Deliver
        CRC check). `tables`: feed only the collectors these tables need."""
        c = cls(credit=CreditCollector(at_once_ms=at_once_ms, keep_balance=not report_only))
        if report_only:
            c.confirms = ConfirmCollector(keep_pairs=False, keep_backlog=False)
            c.deliveries = DeliveryCollector(crc=False, compact=True)
        if tables is not None:
            c.active = tuple({MADE_BY[t]: getattr(c, MADE_BY[t]) for t in tables
                                  if t in MADE_BY and getattr(c, MADE_BY[t]) is not None
                              }.values())  # fmt: skip
        return c

    def _fed(self, handlers: tuple) -> tuple:
        if self.active is None:
            return handlers
        return tuple(h for h in handlers if any(h.__self__ is c for c in self.active))

    def dispatch_table(self) -> dict[str, tuple]:
        c = self
        return {
            "Publish": (c.confirms.on_publish, c.throughput.on_publish),
            "PublishConfirm": (c.confirms.on_confirm, c.throughput.on_confirm),
            "PublishError": (c.confirms.on_error, c.errors.on_publish_error),
            "DeclarePublisher": (c.confirms.on_declare,),
            "Deliver": (c.credit.on_deliver, c.deliveries.on_deliver, c.throughput.on_deliver),
            "Credit": (c.credit.on_credit,),
            "Subscribe": (c.credit.on_subscribe,),
            "Unsubscribe": (c.credit.on_unsubscribe,),
            "Heartbeat": (c.lifecycle.on_heartbeat,),
            "PeerProperties": (c.lifecycle.on_peer_properties,),
            "SaslAuthenticate": (c.lifecycle.on_sasl_authenticate,),
            "Tune": (c.lifecycle.on_tune,),
            "Open": (c.lifecycle.on_open,),
            "Close": (c.lifecycle.on_close,),
        }

    def handlers(self, record: object) -> tuple[tuple, bool]:
        """(what to call for a frame of this record, in order; whether every record of its
        class gets the same). In order: on_any, latency (unless NOT_CALLS), the errors
        collector (it skips OK codes itself; a record class whose frames have no code field
        never reaches it), the command's collectors."""
        cls = record.__class__
        command = record.command
        spec = getattr(cls, "spec", None) if cls in _ONE_COMMAND else None
        coded = spec is None or bool(spec.code)
        handlers = self._by_command.get((command, coded))
        if handlers is None:
            calls = (self.lifecycle.on_any,)
            if command is not None and command not in NOT_CALLS:
                calls += (self.latency.on_frame,)
            if coded:
                calls += (self.errors.on_response,)
            calls += self.dispatch_table().get(command, ())
            handlers = self._by_command[(command, coded)] = self._fed(calls)
        return handlers, cls in _ONE_COMMAND

    def hot_handlers(self) -> tuple[Callable, ...]:
        """What takes hot frames as columns (HotFrames): latency and errors see none (no hot
        frame is a call or has a code)."""
        c = self
        return self._fed((c.lifecycle.on_hot, c.throughput.on_hot, c.confirms.on_hot,
                          c.credit.on_hot, c.deliveries.on_hot))  # fmt: skip

    def finish(self, tcp_connections: list, end_ns: int) -> None:
        """The capture is over: subscriptions of connections TCP closed end there, the others
        at `end_ns`; ids still outstanding are unconfirmed."""
        for conn in tcp_connections:
            if get(conn, "tcp_end") in ("fin", "rst") and get(conn, "end_ns") is not None:
                self.credit.end_connection(get(conn, "connection"), get(conn, "end_ns"))
        self.credit.finish(end_ns)
        self.confirms.finish()

    def sources(self, tcp_connections: list) -> dict[str, Callable]:
        """Each table's rows (dicts or tuples in schema order), made when called."""
        c = self
        return {
            "connections": lambda: c.lifecycle.rows(tcp_connections),
            "requests": lambda: c.latency.rows,
            "latency": c.latency.summary,
            "publishes": lambda: c.confirms.pairs,
            "confirms": c.confirms.summary,
            "backlog": lambda: c.confirms.backlog,
            "credit": lambda: c.credit.summary(stall_lists=False),
            "stalls": c.credit.stall_rows,
            "credit_balance": c.credit.balance_rows,
            "deliveries": lambda: c.deliveries.rows,
            "throughput": c.throughput.rows,
            "errors": c.errors.rows,
        }
