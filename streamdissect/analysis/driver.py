"""One pass over a capture's frames feeding every analysis; results as pandas tables.

The collectors see each frame once, dispatched by command name, so adding an analysis costs
only the frames it cares about.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from streamdissect.analysis.fields import get
from streamdissect.engine.anomalies import Anomaly, AnomalyLog
from streamdissect.protocols.stream.analysis.confirms import ConfirmCollector
from streamdissect.protocols.stream.analysis.consumption import (
    DeliveryCollector,
    ThroughputCollector,
)
from streamdissect.protocols.stream.analysis.credit import AT_ONCE_MS, CreditCollector
from streamdissect.protocols.stream.analysis.errors import ErrorCollector
from streamdissect.protocols.stream.analysis.latency import NOT_CALLS, LatencyCollector
from streamdissect.protocols.stream.analysis.lifecycle import LifecycleCollector
from streamdissect.protocols.stream.analysis.runs import RunAnalysis
from streamdissect.protocols.stream.hot import HotFrames
from streamdissect.protocols.stream.records import RECORD_CLASSES
from streamdissect.tables.convert import dataframe

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Collectors:
    latency: LatencyCollector = field(default_factory=LatencyCollector)
    confirms: ConfirmCollector = field(default_factory=ConfirmCollector)
    credit: CreditCollector = field(default_factory=CreditCollector)
    deliveries: DeliveryCollector = field(default_factory=DeliveryCollector)
    throughput: ThroughputCollector = field(default_factory=ThroughputCollector)
    lifecycle: LifecycleCollector = field(default_factory=LifecycleCollector)
    errors: ErrorCollector = field(default_factory=ErrorCollector)

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


class Analysis:
    """What one capture (or a rotated set read as one) says; every table a DataFrame."""

    def __init__(self, collectors: Collectors, tcp_connections: list, anomalies: list,
                 first_ns: int | None, last_ns: int | None) -> None:
        self._c = collectors
        self._tcp_connections = tcp_connections
        self._anomalies = anomalies
        self.first_ns = first_ns
        self.last_ns = last_ns

    def rows(self, table: str) -> list:
        """The rows behind a table (dicts or tuples in schema order), without pandas."""
        c = self._c
        sources = {
            "connections": lambda: c.lifecycle.rows(self._tcp_connections),
            "requests": lambda: c.latency.rows,
            "latency": c.latency.summary,
            "publishes": lambda: c.confirms.pairs,
            "confirms": c.confirms.summary,
            "backlog": lambda: c.confirms.backlog,
            "credit": self.credit_rows,
            "stalls": c.credit.stall_rows,
            "credit_balance": c.credit.balance_rows,
            "deliveries": lambda: c.deliveries.rows,
            "throughput": c.throughput.rows,
            "errors": c.errors.rows,
            "anomalies": lambda: [_anomaly_row(a) for a in self._anomalies],
        }
        if table not in sources:
            raise KeyError(table)
        return sources[table]()

    def credit_rows(self) -> list[dict]:
        """Credit summary rows with each subscription's stalls as a list (for JSON)."""
        return self._c.credit.summary()

    def _frame(self, table: str) -> pd.DataFrame:
        return dataframe(table, self.rows(table))

    def arrow(self, table: str) -> Any:
        """The table as a pyarrow.Table (the DataFrame's values, made without pandas)."""
        from streamdissect.tables.convert import arrow_table

        return arrow_table(table, self.rows(table))

    connections = cached_property(lambda self: self._frame("connections"))
    requests = cached_property(lambda self: self._frame("requests"))
    latency = cached_property(lambda self: self._frame("latency"))
    publishes = cached_property(lambda self: self._frame("publishes"))
    confirms = cached_property(lambda self: self._frame("confirms"))
    backlog = cached_property(lambda self: self._frame("backlog"))
    credit = cached_property(lambda self: self._frame("credit"))
    stalls = cached_property(lambda self: self._frame("stalls"))
    credit_balance = cached_property(lambda self: self._frame("credit_balance"))
    deliveries = cached_property(lambda self: self._frame("deliveries"))
    throughput = cached_property(lambda self: self._frame("throughput"))
    errors = cached_property(lambda self: self._frame("errors"))
    anomalies = cached_property(lambda self: self._frame("anomalies"))


def _anomaly_row(a) -> dict:
    if a.__class__ is Anomaly:  # (the dissector's own: plain attributes)
        return {"ts_ns": a.ts_ns, "connection": a.connection, "direction": a.direction,
                "kind": a.kind, "stream_offset": a.stream_offset, "length": a.length,
                "detail": None if a.detail is None else str(a.detail)}  # fmt: skip
    return {
        "ts_ns": get(a, "ts_ns"),
        "connection": get(a, "connection"),
        "direction": get(a, "direction"),
        "kind": get(a, "kind"),
        "stream_offset": get(a, "stream_offset"),
        "length": get(a, "length"),
        "detail": None if get(a, "detail") is None else str(get(a, "detail")),
    }


class _DictRecord:
    """A record given as a mapping, read like a record object (absent fields are None)."""

    __slots__ = ("_d",)

    def __init__(self, d: dict) -> None:
        self._d = d

    def __getattr__(self, name: str):
        return self._d.get(name)


_ONE_COMMAND = frozenset(RECORD_CLASSES.values())  # (not Malformed, Unknown, dicts)


@dataclass(slots=True)
class _Event:
    ts_ns: int
    connection: str
    direction: str
    record: object


def analyze_events(events: Iterable, tcp_connections_after=list,
                   at_once_ms: float = AT_ONCE_MS, report_only: bool = False) -> Analysis:
    """Feed frame events (objects with ts_ns, connection, direction, record) and anomalies.

    `report_only`: keep only what the analyze report shows (no per-id publishes table, no
    backlog series, no credit balance series, no Deliver CRC check), which is what keeps a
    large capture quick."""
    collectors = Collectors(credit=CreditCollector(at_once_ms=at_once_ms,
                                                   keep_balance=not report_only))
    if report_only:
        collectors.confirms = ConfirmCollector(keep_pairs=False, keep_backlog=False)
        collectors.deliveries = DeliveryCollector(crc=False, compact=True)
    dispatch = collectors.dispatch_table()
    on_any = collectors.lifecycle.on_any
    on_call = collectors.latency.on_frame
    on_code = collectors.errors.on_response
    anomalies = AnomalyLog()
    first_ns = last_ns = None
    # (command, has a code field) -> what to call, in order: on_any, latency (unless
    # NOT_CALLS), the errors collector (it skips OK codes itself), the command's collectors
    handlers_of: dict = {}
    # The same by record class, for the classes of one command: their `command` is a
    # property, and this skips it once per frame.
    handlers_of_class: dict = {}
    on_run = RunAnalysis(collectors)
    for ev in events:
        if ev.__class__ is HotFrames:  # hot frames as columns (Dissector `columns`)
            on_run(ev)
            last_ns = int(ev.ts_ns[-1])
            if first_ns is None:
                first_ns = int(ev.ts_ns[0])
            continue
        rec = getattr(ev, "record", None)
        if rec is None:
            anomalies.append(ev)
            continue
        cls = rec.__class__
        handlers = handlers_of_class.get(cls)
        if handlers is None:
            if isinstance(rec, dict):  # collectors read fields as attributes
                ev = _Event(ev.ts_ns, ev.connection, ev.direction, _DictRecord(rec))
                rec = ev.record
            command = rec.command
            # a record class whose frames have no code field never reaches the errors table
            spec = getattr(cls, "spec", None) if cls in _ONE_COMMAND else None
            coded = spec is None or bool(spec.code)
            handlers = handlers_of.get((command, coded))
            if handlers is None:
                calls = (on_any,) if command is None or command in NOT_CALLS else (on_any, on_call)
                handlers = handlers_of[(command, coded)] = (
                    *calls, *((on_code,) if coded else ()), *dispatch.get(command, ()))
            if cls in _ONE_COMMAND:
                handlers_of_class[cls] = handlers
        last_ns = ev.ts_ns
        if first_ns is None:
            first_ns = last_ns
        for handler in handlers:
            handler(ev)
    tcp_connections = tcp_connections_after()
    for conn in tcp_connections:
        if get(conn, "tcp_end") in ("fin", "rst") and get(conn, "end_ns") is not None:
            collectors.credit.end_connection(get(conn, "connection"), get(conn, "end_ns"))
    collectors.credit.finish(last_ns or 0)
    collectors.confirms.finish()
    return Analysis(collectors, tcp_connections, anomalies, first_ns, last_ns)


def analyze(paths: str | Sequence[str], ports: Sequence[int] = (5552,), heuristic: bool = True,
            max_frame: int | None = None, at_once_ms: float = AT_ONCE_MS,
            on_read=None, report_only: bool = False, engine: str = "auto",
            helper_process: bool | None = None, watch=None, on_dissector=None) -> Analysis:
    """Read a capture (several paths: one capture in time order) and run every analysis.
    `on_read(n)` is told how many file bytes were read (a progress bar). `report_only`: see
    analyze_events. `engine`, `helper_process` (by default only in a process with no other
    thread): see dissect.Dissector. `watch(events)`: an iterator over the events that passes
    them on (a running summary sees them go by). `on_dissector(dissector)`: called before the
    run (rotated.facts sets its framers and reads their edges afterwards)."""
    from streamdissect.engine.dissect import Dissector
    from streamdissect.framing.framer import DELIVER_KEEP_LIMIT

    if isinstance(paths, str):
        paths = [paths]
    # No analysis reads a Publish's message list: the bulk engine then never copies it.
    # The report never checks a chunk's CRC: then no Deliver body is kept either.
    dissector = Dissector(ports=ports, heuristic=heuristic, max_frame=max_frame,
                          on_read=on_read, engine=engine, publish_messages=False,
                          helper_process=helper_process, columns=True,
                          deliver_keep_limit=0 if report_only else DELIVER_KEEP_LIMIT)
    if on_dissector is not None:
        on_dissector(dissector)
    events = dissector.run(paths)
    return analyze_events(
        events if watch is None else watch(events),
        tcp_connections_after=lambda: list(dissector.connections),
        at_once_ms=at_once_ms,
        report_only=report_only,
    )
