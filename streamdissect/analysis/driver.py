"""One pass over a capture's frames feeding every analysis; results as pandas tables.

The collectors see each frame once, dispatched by command name, so adding an analysis costs
only the frames it cares about; hot frames as columns (HotFrames) go to each collector's
`on_hot`. Which collector sees which frame is the protocol's (Collectors).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from streamdissect.analysis.fields import get
from streamdissect.analysis.messages import MessageRun
from streamdissect.engine.anomalies import Anomaly, AnomalyLog
from streamdissect.engine.gc_setting import bulk_gc
from streamdissect.protocols import registry
from streamdissect.slotted import Unequal
from streamdissect.tables.convert import dataframe

if TYPE_CHECKING:
    import pandas as pd


class Analysis:
    """What one capture (or a rotated set read as one) says; every table a DataFrame."""

    def __init__(self, collectors: Any, tcp_connections: list, anomalies: list,
                 first_ns: int | None, last_ns: int | None, others: tuple = (),
                 protocol: str | None = None, *, messages: list | None = None) -> None:  # fmt: skip
        self._c = collectors
        self._protocol = protocol  # (the name of the protocol of `collectors`)
        self._messages = messages or []  # the messages table's rows (when asked for)
        # the analyses of the other protocols the capture carried: (name, collectors)
        self._others = others
        self._tcp_connections = tcp_connections
        self._anomalies = anomalies
        self.first_ns = first_ns
        self.last_ns = last_ns

    def rows(self, table: str) -> list:
        """The rows behind a table (dicts or tuples in schema order), without pandas."""
        sources = {}
        for name, other in self._others:
            sources.update(other.sources(own_connections(self._tcp_connections, name)))
        sources.update(self._c.sources(own_connections(self._tcp_connections, self._protocol)))
        sources["anomalies"] = lambda: [_anomaly_row(a) for a in self._anomalies]
        sources["messages"] = lambda: self._messages
        if table not in sources:
            raise KeyError(table)
        return sources[table]()

    @property
    def tcp_connections(self) -> list:
        """The dissector's connection summaries (engine.state.ConnectionSummary)."""
        return self._tcp_connections

    def add_anomaly(self, anomaly: Any) -> None:
        """An anomaly of the capture itself, not of its bytes (a live capture tool's drops),
        into the anomalies table."""
        self._anomalies.append(anomaly)
        self.__dict__.pop("anomalies", None)  # (the DataFrame, when it was made already)

    def other_tables(self) -> list[str]:
        """The tables of the other protocols' analyses this capture gave (their traffic was
        in it), in their protocols' order."""
        return [table for name, other in self._others
                for table in other.sources(own_connections(self._tcp_connections, name))]

    def frame(self, table: str) -> pd.DataFrame:
        """Any table as a DataFrame (one with an attribute of its name is made once)."""
        if isinstance(type(self).__dict__.get(table), cached_property):
            return getattr(self, table)
        return self._frame(table)

    def credit_rows(self, stall_lists: bool = True) -> list[dict]:
        """Credit summary rows with each subscription's stalls as a list of dicts (for
        JSON); `stall_lists` off: as a sequence of rows in the stalls table's column order,
        read when asked (a long capture's stalls are never all dicts at once)."""
        return self._c.credit.summary(stall_lists)

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
    messages = cached_property(lambda self: self._frame("messages"))  # (analyze(messages=True))
    anomalies = cached_property(lambda self: self._frame("anomalies"))


def own_connections(tcp_connections: list, protocol: str | None) -> list:
    """The connections (engine.state.ConnectionSummary) of one protocol (by name): each
    protocol's tables list its own; a summary that names none is the default protocol's."""
    name = registry.protocol(protocol).name
    default = registry.protocol().name
    return [t for t in tcp_connections
            if (getattr(t, "protocol", None) or default) == name]  # fmt: skip


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


class _Event(Unequal):
    """A frame event as the collectors take it."""

    __slots__ = field_names = ("ts_ns", "connection", "direction", "record")

    def __init__(self, ts_ns: int, connection: str, direction: str, record: object) -> None:
        self.ts_ns, self.connection, self.direction, self.record = ts_ns, connection, direction, record


@bulk_gc()
def analyze_events(events: Iterable, tcp_connections_after=list,
                   at_once_ms: float | None = None, report_only: bool = False,
                   tables: Collection[str] | None = None, end_ns: int | None = None,
                   protocol: str | None = None,
                   protocol_of: Callable[[str], Any] | None = None,
                   messages: dict | None = None) -> Analysis:
    """Feed frame events (objects with ts_ns, connection, direction, record; HotFrames; a
    run of frames as one event, its record itself, with its first frame's `first_ts_ns`)
    and anomalies.

    `report_only`: keep only what the analyze report shows (no per-id publishes table, no
    backlog series, no credit balance series, no Deliver CRC check), which is what keeps a
    large capture quick. `tables`: make only these (the others are empty). `end_ns`: the
    capture's end, where stalls still open end (by default the last frame's time).
    `protocol`: whose analyses (protocols.registry; None, the default protocol);
    `at_once_ms` None: its own default. `protocol_of(connection)`, when given: the protocol
    a frame's connection carries; the frames of another protocol's connections go to that
    protocol's analyses (made at its first frame; none for a protocol that gives none), and
    their tables are the result's too (a record class is one protocol's: decided once a
    class). `messages` ({"max_body": N, "bodies": bool}): make the messages table too, from
    the records' messages of every protocol (frames as columns have none)."""
    analysed = registry.protocol(protocol)
    collectors = analysed.analysis(at_once_ms=at_once_ms, report_only=report_only,
                                   tables=tables)  # fmt: skip
    message_run = None if messages is None else MessageRun(
        messages["max_body"], messages["bodies"], protocol_of)  # fmt: skip
    others: dict = {}  # another protocol -> its collectors (None: it gives no analyses)
    hot_class = collectors.hot_class
    anomalies = AnomalyLog()
    first_ns = last_ns = None
    # what to call for a record of a class whose records all get the same calls
    handlers_of_class: dict = {}
    on_hot = collectors.hot_handlers()
    for ev in events:
        if ev.__class__ is hot_class:  # hot frames as columns (Dissector `columns`)
            for handler in on_hot:
                handler(ev)
            last_ns = int(ev.ts_ns[-1])
            if first_ns is None:
                first_ns = int(ev.ts_ns[0])
            continue
        rec = getattr(ev, "record", None)
        if rec is None:
            anomalies.append(ev)
            continue
        if message_run is not None:
            message_run.on_frame(ev)
        cls = rec.__class__
        handlers = handlers_of_class.get(cls)
        if handlers is None:
            if isinstance(rec, dict):  # collectors read fields as attributes
                ev = _Event(ev.ts_ns, ev.connection, ev.direction, _DictRecord(rec))
                rec = ev.record
            carried = analysed if protocol_of is None else protocol_of(ev.connection)
            if carried is analysed or carried is None:
                handlers, same_for_class = collectors.handlers(rec)
            else:
                theirs = _analyses_of(carried, others, report_only, tables)
                handlers, same_for_class = ((), True) if theirs is None else theirs.handlers(rec)
            if same_for_class:
                handlers_of_class[cls] = handlers
        last_ns = ev.ts_ns
        if first_ns is None:  # (a run of frames as one event: its first frame's time)
            first_ns = getattr(ev, "first_ts_ns", last_ns)
        for handler in handlers:
            handler(ev)
    tcp_connections = tcp_connections_after()
    end = end_ns if end_ns is not None else last_ns or 0
    collectors.finish(own_connections(tcp_connections, analysed.name), end)
    made = tuple((p.name, c) for p, c in others.items() if c is not None)
    for name, theirs in made:
        theirs.finish(own_connections(tcp_connections, name), end)
    return Analysis(collectors, tcp_connections, anomalies, first_ns, last_ns, made,
                    analysed.name, messages=None if message_run is None else message_run.table)  # fmt: skip


def _analyses_of(protocol: Any, others: dict, report_only: bool,
                 tables: Collection[str] | None) -> Any:  # fmt: skip
    """Another protocol's collectors for this run, made once (None: it gives no analyses)."""
    if protocol not in others:
        try:
            others[protocol] = protocol.analysis(report_only=report_only, tables=tables)
        except NotImplementedError:
            others[protocol] = None
    return others[protocol]


@bulk_gc()
def analyze(paths: str | Sequence[str], ports: Sequence[int] | None = None, heuristic: bool = True,
            max_frame: int | None = None, at_once_ms: float | None = None,
            on_read=None, report_only: bool = False, engine: str = "auto",
            helper_process: bool | None = None, watch=None, on_dissector=None,
            messages: bool = False, max_body: int | None = 256, bodies: bool = True,
            ) -> Analysis:  # fmt: skip
    """Read a capture (several paths: one capture in time order) and run every analysis.
    `messages`: the messages table too (a.messages: every message of every frame that
    carries messages, each protocol's MessageReader's, bodies cut at `max_body` bytes, left
    out without `bodies`), which reads every frame as a record, with its messages (slower
    than the analyses alone).
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
    # The messages table reads the messages: Publish lists and whole Delivers, as records.
    keep = None if messages else 0 if report_only else DELIVER_KEEP_LIMIT
    # The frames as the analyses read them (hot frames as columns or light records), when
    # nothing else reads the events (a watcher, a set's framers read records) or messages
    columns = False if messages else True if watch or on_dissector else "analysis"
    dissector = Dissector(ports=ports, heuristic=heuristic, max_frame=max_frame,
                          on_read=on_read, engine=engine, publish_messages=messages,
                          helper_process=helper_process, columns=columns,
                          deliver_keep_limit=keep)
    if on_dissector is not None:
        on_dissector(dissector)
    events = dissector.run(paths)
    return analyze_events(
        events if watch is None else watch(events),
        tcp_connections_after=lambda: list(dissector.connections),
        at_once_ms=at_once_ms,
        report_only=report_only,
        protocol_of=dissector.protocol_of.get,
        messages={"max_body": max_body, "bodies": bodies} if messages else None,
    )
