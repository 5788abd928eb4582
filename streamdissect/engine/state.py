"""The dissection state below both engines: connections, their framers, anomalies, events.

The engines (engine.stream, the reference; engine.bulk, for a plain pcap) and push mode feed
segments into it and drain `_out`; dissect.Dissector, on top, chooses the engine. Which
protocol a connection carries, and so which framer cuts its directions, comes from
protocols.registry: by server port, else by each protocol's heuristic on a direction's first
bytes.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from streamdissect.capture import ACK, SYN
from streamdissect.capture.segment import Segment
from streamdissect.engine.anomalies import Anomaly, AnomalyLog
from streamdissect.framing.events import FrameEvent
from streamdissect.framing.framer import DEFAULT_MAX_FRAME, DELIVER_KEEP_LIMIT, Framer
from streamdissect.framing.walk import PlainFrames
from streamdissect.protocols import registry
from streamdissect.protocols.base import FramerOptions, Protocol
from streamdissect.slotted import Slotted
from streamdissect.tcp import DEFAULT_OOO_CAP, FlowTable, NullSink, TcpConnection

CLASSIFY_BYTES = 64  # a direction's first bytes the protocol heuristic may look at


class ConnectionSummary(Slotted):
    """One row of the connections table (column names as in streamdissect.tables.schema):
    `tcp_end` fin, rst or open; `protocol` the name of the protocol it carries (None: not
    said)."""

    __slots__ = field_names = ("connection", "client", "server", "start_ns", "end_ns",
                               "frames_c2s", "frames_s2c", "bytes_c2s", "bytes_s2c", "tcp_end",
                               "protocol")  # fmt: skip

    def __init__(self, connection: str, client: str, server: str, start_ns: int, end_ns: int,
                 frames_c2s: int, frames_s2c: int, bytes_c2s: int, bytes_s2c: int, tcp_end: str,
                 protocol: str | None = None) -> None:  # fmt: skip
        self.connection, self.client, self.server = connection, client, server
        self.start_ns, self.end_ns = start_ns, end_ns
        self.frames_c2s, self.frames_s2c = frames_c2s, frames_s2c
        self.bytes_c2s, self.bytes_s2c = bytes_c2s, bytes_s2c
        self.tcp_end, self.protocol = tcp_end, protocol

    def as_dict(self) -> dict:
        """Its fields by name, in order (as dataclasses.asdict made them: rotated/ reads them)."""
        return {name: getattr(self, name) for name in self.field_names}

    def replaced(self, **changes: Any) -> ConnectionSummary:
        """A copy with `changes` made (as dataclasses.replace made it)."""
        return ConnectionSummary(**(self.as_dict() | changes))


def endpoint_text(address: bytes, port: int) -> str:
    ip = ipaddress.ip_address(address)
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


class Classifier:
    """Sink for a connection on an unknown port until its first bytes tell what it is."""

    __slots__ = ("buffer", "conn", "desynced", "dissector", "side", "ts_ns")

    def __init__(self, dissector: DissectionState, conn: TcpConnection, side: int) -> None:
        self.dissector = dissector
        self.conn = conn
        self.side = side
        self.buffer = bytearray()
        self.desynced = False
        self.ts_ns = 0

    def data(self, payload: memoryview, ts_ns: int) -> None:
        self.buffer += payload
        self.ts_ns = ts_ns
        head = bytes(self.buffer[:CLASSIFY_BYTES])
        undecided = False
        for protocol in self.dissector.protocols:  # the first that says yes
            verdict = protocol.looks_like(head)
            if verdict:
                self.dissector._classified(self.conn, self.side, protocol)
                return
            undecided = undecided or verdict is None
        if undecided and len(self.buffer) < CLASSIFY_BYTES:
            return
        self.dissector._classified(self.conn, self.side, None)

    def missing(self, length: int, ts_ns: int) -> None:
        self.dissector._classified(self.conn, self.side, None)

    def desync(self) -> None:
        self.desynced = True


class StreamConnection:
    """What the dissector keeps per TCP connection (TcpConnection.owner): a connection of
    one of the registered protocols, or one whose protocol is not known yet."""

    __slots__ = ("framers", "frames", "id", "order", "pending", "protocol", "server_side",
                 "stream", "tcp")  # fmt: skip

    def __init__(self, tcp: TcpConnection, server_side: int | None,
                 protocol: Protocol | None = None) -> None:  # fmt: skip
        self.tcp = tcp
        self.server_side = server_side
        self.protocol = protocol  # None until a heuristic tells
        self.id = ""
        self.framers: list[Framer] = []
        self.frames = [0, 0]  # by sending side
        self.pending: list[tuple] = []  # TCP anomalies held until the protocol is known
        self.stream = False  # dissected: its protocol is known and framers cut it
        self.order = 0  # packet number at which it began to be dissected

    def direction(self, side: int) -> str:
        return "s2c" if side == self.server_side else "c2s"


def single_threaded() -> bool:
    import threading

    return threading.active_count() == 1


class DissectionState:
    """What a run keeps: connections, their framers, the anomalies, and the output queue,
    shared by both engines (engine.stream, engine.bulk) and push mode. dissect.Dissector is
    this plus the choice of engine."""

    # What frames each direction instead of its protocol's framer: a subclass of it that
    # keeps more of each frame (the scapy layer keeps its bytes, which it dissects itself).
    # Set with `protocols` naming that one protocol, or a mapping protocol name -> its
    # class (rotated pieces keep their edges: rotated.facts.boundary_framers).
    framer_class: Callable[..., Framer] | Mapping[str, Callable[..., Framer]] | None = None

    def __init__(
        self,
        ports: Iterable[int] | Mapping[str, Iterable[int]] | None = None,
        heuristic: bool = True,
        max_frame: int | None = None,
        ooo_cap: int = DEFAULT_OOO_CAP,
        deliver_keep_limit: int | None = DELIVER_KEEP_LIMIT,
        on_read: Callable[[int], None] | None = None,
        engine: str = "auto",
        publish_messages: bool = True,
        helper_process: bool | None = False,
        columns: bool | str = False,
        hole_patience: int | None = None,
        protocols: Iterable[str] | None = None,
    ) -> None:
        """`ports`: the server ports of each protocol (protocols.registry.server_ports:
        None, each protocol's defaults; port numbers, the first protocol's, the Stream's);
        connections on other ports are recognised by the protocols' heuristics when
        `heuristic`. `protocols`: the names of the protocols to dissect (default: every
        registered one). `engine`: "stream" (packet by packet, the reference), "bulk" or
        "auto" (bulk for a single plain pcap file when every protocol dissected has a fast
        path, else stream); both give the same events.
        `publish_messages=False`: Publish records keep their ids and counts but not their
        message list (`messages` is None), which the bulk engine then never copies; ids
        that go up one by one are a `range` (equal as JSON, to_dict gives the list).
        `helper_process=True` (None: when this process has no other thread): the bulk engine
        finds record boundaries in a forked process
        (another CPU) while this one dissects.
        `columns=True` (frame_batches, the columnar analyses): the bulk engine gives the
        well-formed hot frames (engine.hot: Publish v1 of simple entries, PublishConfirm,
        Credit, Heartbeat, Deliver, each within the lowest frame limit) as engine.hot.HotFrames
        columns, in their place among the frame events, instead of FrameEvents (an anomaly
        among them comes after the run). `columns="lines"` (frames --format jsonl): anomalies
        in their place, cutting runs, and a Deliver's whole chunk header in the run.
        `columns="analysis"` (analysis.driver.analyze, when only its collectors read the
        events): as True, and a protocol's plain walk (made with this state) may give its
        hot frames as light records that only its own collectors read.
        `hole_patience` (push mode, for sources that show no pure ACKs): see FlowTable."""
        if engine not in ("auto", "bulk", "stream"):
            raise ValueError(f"unknown engine {engine!r}")
        self.engine = engine
        self.protocols = registry.chosen(protocols)
        self.port_protocols = registry.server_ports(self.protocols, ports)
        # The bulk engine's frame walk takes one fast path for the connections of the
        # protocols that have one (a protocol without: the plain walk, its framer decoding
        # every frame); two different ones: the exact per-packet engine reads every input.
        paths = {p.fast_path for p in self.protocols if p.fast_path is not None}
        self.fast_path: type | None = (paths.pop() if len(paths) == 1
                                       else None if paths else PlainFrames)  # fmt: skip
        self.ports = frozenset(self.port_protocols)
        self.protocol_of: dict[str, Protocol] = {}  # connection id -> its protocol
        self.heuristic = heuristic
        self.max_frame = max_frame or DEFAULT_MAX_FRAME
        self.fixed_max_frame = bool(max_frame)  # given: it, not the negotiated max, limits
        self.deliver_keep_limit = deliver_keep_limit
        self.ooo_cap = ooo_cap
        self.hole_patience = hole_patience
        self.on_read = on_read
        self.anomalies = AnomalyLog()
        self._streams: list[StreamConnection] = []
        self._id_uses: dict[str, int] = {}
        self._out: list[FrameEvent | Anomaly] = []
        self._row = 0  # number of the packet being handled (bulk engine: for ordering)
        self.anomalies_made = 0  # (the bulk engine looks for them only in blocks that made some)
        self._bulk = False
        self._flows: FlowTable | None = None  # set by the run (or the first push)
        self._frame_class = FrameEvent
        self.publish_messages = publish_messages
        self.columns = columns
        # None: only where forking is safe, a process with no other thread (a script; not a
        # notebook kernel nor a Spark worker, whose threads a fork would copy mid-lock)
        self.helper_process = single_threaded() if helper_process is None else helper_process

    # --- push mode: segments handed over one at a time (the scapy layer, live sources) ---

    def start_flows(self) -> FlowTable:
        """The run's table of TCP connections (every engine, and push mode, starts here)."""
        self._flows = FlowTable(
            self._tcp_report, self._new_connection, self.ooo_cap, self.hole_patience
        )
        return self._flows

    def push(self, segment: Segment, ts_ns: int) -> list[FrameEvent | Anomaly]:
        """Dissect one TCP segment (as `capture.tcp_segment` makes it) and return the frames
        and anomalies it completed, in order. The first call starts the run."""
        flows = self._flows if self._flows is not None else self.start_flows()
        flows.segment(segment, ts_ns)
        out = self._out[:]
        self._out.clear()
        return out

    def _finish(self, ts: int) -> Iterator[FrameEvent | Anomaly]:
        """Bulk engine: end of capture (the streaming loop does the same inline)."""
        self._streams.sort(key=lambda s: s.order)
        self._flows.finish(ts)
        for stream in self._streams:
            for framer in stream.framers:
                framer.finish(ts)
        out = self._out
        self.anomalies.extend(ev for ev in out if isinstance(ev, Anomaly))
        yield from out
        out.clear()

    def _file_anomaly(
        self, path: str, kind: str, ts_ns: int | None, offset: int, detail: str
    ) -> None:
        self._anomaly(ts_ns, None, None, kind, offset, 0, f"{path}: {detail}")

    # --- for the bulk engine (engine.bulk): what it reads and tells the state ----------

    @property
    def out(self) -> list[FrameEvent | Anomaly]:
        """The events made and not yet handed out (a list the engine drains)."""
        return self._out

    @property
    def frame_class(self) -> type:
        """The class of the frame events (FrameEvent's fields, in its order)."""
        return self._frame_class

    @property
    def flows(self) -> FlowTable | None:
        """The run's table of TCP connections (start_flows)."""
        return self._flows

    def at_row(self, row: int) -> None:
        """The packet of this number (in the capture) is handled now: connections it
        opens are ordered by it."""
        self._row = row

    def anomaly(self, ts_ns: int | None, kind: str, offset: int, length: int,
                detail: str) -> None:  # fmt: skip
        """A packet's anomaly (no connection: the packet is no TCP segment we can read)."""
        self._anomaly(ts_ns, None, None, kind, offset, length, detail)

    def file_anomaly(self, path: str, kind: str, ts_ns: int | None, offset: int,
                     detail: str) -> None:  # fmt: skip
        """A capture file's anomaly (a bad or cut record: the file is read no further)."""
        self._file_anomaly(path, kind, ts_ns, offset, detail)

    def finish_capture(self, ts_ns: int) -> Iterator[FrameEvent | Anomaly]:
        """End of capture: the events of every connection's end (holes, unframed bytes)."""
        return self._finish(ts_ns)

    # --- tables ----------------------------------------------------------------------

    @property
    def streams(self) -> list[StreamConnection]:
        """The Stream connections so far, in the order they were numbered."""
        return sorted(self._streams, key=lambda s: s.order)

    @property
    def connections(self) -> list[ConnectionSummary]:
        rows = []
        for s in self._streams:
            c2s = 1 - s.server_side
            conn = s.tcp
            rows.append(
                ConnectionSummary(
                    s.id,
                    endpoint_text(*conn.endpoints[c2s]),
                    endpoint_text(*conn.endpoints[s.server_side]),
                    conn.start_ns,
                    conn.end_ns,
                    s.frames[c2s],
                    s.frames[s.server_side],
                    conn.streams[c2s].offset,
                    conn.streams[s.server_side].offset,
                    conn.how_ended,
                    s.protocol.name,
                )
            )
        return rows

    # --- connections -----------------------------------------------------------------

    def _new_connection(self, conn: TcpConnection, flags: int) -> None:
        first, second = conn.endpoints
        if flags & (SYN | ACK) == SYN:
            syn_server: int | None = 1  # the receiver of a SYN is the server
        elif flags & (SYN | ACK) == SYN | ACK:
            syn_server = 0
        else:
            syn_server = None
        on_port = self.port_protocols.get(first[1]), self.port_protocols.get(second[1])
        if on_port != (None, None):
            if None not in on_port:
                server_side = syn_server if syn_server is not None else 1
            else:
                server_side = 1 if on_port[1] is not None else 0
            owner = StreamConnection(conn, server_side, on_port[server_side])
            conn.owner = owner
            self._become_stream(owner)
        elif self.heuristic:
            conn.owner = StreamConnection(conn, syn_server)
            for side, stream in enumerate(conn.streams):
                stream.sink = Classifier(self, conn, side)
        else:
            conn.ignored = True

    def _classified(self, conn: TcpConnection, side: int, protocol: Protocol | None) -> None:
        owner: StreamConnection = conn.owner
        if protocol is None:
            conn.ignored = True
            owner.pending = []
            for stream in conn.streams:
                stream.sink = NullSink()  # the rest of the current segment goes nowhere
            return
        owner.protocol = protocol
        if owner.server_side is None:
            sender_is_server = protocol.sent_by_server(bytes(conn.streams[side].sink.buffer))
            owner.server_side = side if sender_is_server else 1 - side
        classifiers = [stream.sink for stream in conn.streams]
        self._become_stream(owner)
        for classifier in classifiers:
            framer = owner.framers[classifier.side]
            if classifier.desynced:
                framer.desync()
            if classifier.buffer:
                framer.data(memoryview(bytes(classifier.buffer)), classifier.ts_ns)
        for args in owner.pending:
            self._tcp_report(*args)
        owner.pending = []

    def _become_stream(self, owner: StreamConnection) -> None:
        conn = owner.tcp
        client, server = conn.endpoints[1 - owner.server_side], conn.endpoints[owner.server_side]
        base = f"{endpoint_text(*client)}-{endpoint_text(*server)}"
        uses = self._id_uses[base] = self._id_uses.get(base, 0) + 1
        owner.id = base if uses == 1 else f"{base}#{uses}"
        owner.order = self._row
        owner.stream = True
        self.protocol_of[owner.id] = owner.protocol
        owner.framers.extend(self._framer(owner, side) for side in (0, 1))
        for side, stream in enumerate(conn.streams):
            stream.sink = owner.framers[side]
        self._streams.append(owner)

    def _framer(self, owner: StreamConnection, side: int) -> Framer:
        direction = owner.direction(side)
        connection = owner.id
        out = self._out
        frames = owner.frames

        def emit(offset: int, ts_ns: int, record: Any) -> None:
            frames[side] += 1
            out.append(FrameEvent(ts_ns, connection, direction, offset, record))

        # What a fast path needs to emit a record as emit does, without the protocol's own
        # rules for some frames (protocols.base.Protocol.framer).
        emit.lane = (frames, connection, direction)  # type: ignore[attr-defined]

        def report(kind: str, ts_ns: int, offset: int, length: int, detail: str) -> None:
            self._anomaly(ts_ns, connection, direction, kind, offset, length, detail)

        options = FramerOptions(self.max_frame, self.fixed_max_frame, self.deliver_keep_limit,
                                self.publish_messages)  # fmt: skip
        framer_class = self.framer_class
        if isinstance(framer_class, Mapping):  # (by protocol name)
            framer_class = framer_class.get(owner.protocol.name)
        return owner.protocol.framer(emit, report, options, owner.framers, framer_class)

    # --- anomalies -------------------------------------------------------------------

    def _tcp_report(
        self,
        conn: TcpConnection,
        side: int,
        kind: str,
        ts_ns: int,
        offset: int,
        length: int,
        detail: str,
    ) -> None:
        owner: StreamConnection = conn.owner
        if owner is None or conn.ignored:
            return
        if not owner.stream:
            owner.pending.append((conn, side, kind, ts_ns, offset, length, detail))
            return
        self._anomaly(ts_ns, owner.id, owner.direction(side), kind, offset, length, detail)

    def file_reporter(self, path: str):
        """Where a capture file's anomalies go: report(kind, ts_ns, offset, detail)."""
        return self._file_reporter(path)

    def _file_reporter(self, path: str):
        def report(kind: str, ts_ns: int | None, offset: int, detail: str) -> None:
            self._anomaly(ts_ns, None, None, kind, offset, 0, f"{path}: {detail}")

        return report

    def _anomaly(
        self,
        ts_ns: int | None,
        connection: str | None,
        direction: str | None,
        kind: str,
        offset: int | None,
        length: int,
        detail: str,
    ) -> None:
        anomaly = Anomaly(ts_ns, connection, direction, kind, offset, length, detail)
        self.anomalies_made += 1
        if not self._bulk:  # the bulk engine adds them once they are in order
            self.anomalies.append(anomaly)
        self._out.append(anomaly)
