"""What one piece of a rotated capture set says at its edges, for stitching (stitch.py).

A piece (one file of `tcpdump -C/-G/-W`) is dissected on its own, in parallel with the
others. A connection that carries on from the previous piece starts mid-stream: its framer
does not know where frames begin, skips to a plausible frame start, and the frames across
the cut are lost on both sides. `BoundaryFramer` keeps what is needed to get them back:
- the head: what a direction fed its framer from a mid-stream start until the framer found
  a frame start (bounded by HEAD_LIMIT), and where that was;
- the end state: the framer as the piece left it (a frame in progress, the negotiated
  limit), taken before the end of capture is reported.
With the TCP sequence numbers at both edges (`SideFacts`), stitch.py continues the previous
piece's framer over the next piece's head, exactly as one run over both files would.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from streamdissect.framing.framer import DEFAULT_MAX_FRAME, HEADER, Framer
from streamdissect.protocols.stream.framing import StreamFramer

# A mid-stream direction's bytes kept until its framer syncs: one frame at the largest.
HEAD_LIMIT = DEFAULT_MAX_FRAME + HEADER
# Framer slots that make its state (the rest are its callbacks).
STATE_SLOTS = tuple(s for s in Framer.__slots__ if s not in ("emit", "report"))
OFFSET_SLOTS = ("offset", "rbuf_start")  # stream offsets (cur_start too, when >= 0)


class _Boundary:
    """What a boundary framer adds to its protocol's framer (boundary_class makes the class):
    it keeps its head (after a mid-stream start) and its end state.

    The head is every call the framer took from the mid-stream start until it found a
    frame start, that call included: frames decoded in the same call as the resync carry
    that call's time, not the time of the packet that completed them, so they are decoded
    again across the cut. `head_sync` is where the first frame started; `head_state` what
    the framer was once the head was taken (synced or not, offset, frame in progress)."""

    plain: type[Framer]  # the protocol's framer class it extends

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.plain.__init__(self, *args, **kwargs)
        self.head: list[tuple[bytes | int, int]] | None = None  # (bytes or a missing count, ts)
        self.head_bytes = 0
        self.head_overflow = False
        self.head_sync: int | None = None  # stream offset of the first frame after the head
        self.head_state: tuple[bool, int, int] | None = None  # (synced, offset, cur_start)
        self.end_state: dict | None = None
        self.tail: tuple[int, int] | None = None  # see finish
        self.finish_ts: int | None = None  # the end of the piece, as finish was told it

    def desync(self) -> None:
        if self.head is None and self.offset == 0 and self.synced and self.cur_start < 0:
            self.head = []  # a mid-stream start: keep what comes until a frame start is found
        self.plain.desync(self)

    def _heading(self) -> bool:
        return self.head is not None and self.head_state is None and not self.synced

    def _keep(self, item: bytes | int, ts_ns: int, size: int) -> None:
        if self.head_overflow:
            return
        self.head_bytes += size
        if self.head_bytes > HEAD_LIMIT:
            self.head_overflow = True
            self.head = []
        else:
            self.head.append((item, ts_ns))

    def _taken(self) -> None:
        if self.head_sync is not None:  # the call that found a frame start ends the head
            self.head_state = (self.synced, self.offset, self.cur_start)

    def data(self, view: memoryview, ts_ns: int) -> None:
        if self._heading():
            self._keep(bytes(view), ts_ns, len(view))
            self.plain.data(self, view, ts_ns)
            self._taken()
        else:
            self.plain.data(self, view, ts_ns)

    def missing(self, length: int, ts_ns: int) -> None:
        if self._heading():
            self._keep(length, ts_ns, 0)
            self.plain.missing(self, length, ts_ns)
            self._taken()
        else:
            self.plain.missing(self, length, ts_ns)

    def _synced_at(self, pos: int, ts_ns: int) -> None:
        if self.head is not None and self.head_sync is None:
            self.head_sync = self.rbuf_start + pos
        self.plain._synced_at(self, pos, ts_ns)

    def finish(self, ts_ns: int) -> None:
        """The end state, taken before the end of capture is reported; and, when the end
        came while looking for a frame start, where what the end decides begins: the
        resync it reports, and the frames from a candidate it takes without the next
        frame's head (`tail`: their stream offsets). When a later piece carries the
        connection on, one run would have read on instead: stitch.py drops them."""
        self.end_state = framer_state(self)
        self.finish_ts = ts_ns
        if not self.synced and self.rbuf:
            self.tail = (self.rbuf_start - self.skipped, self.rbuf_start)
        self.plain.finish(self, ts_ns)


_BOUNDARY_SLOTS = ("end_state", "head", "head_bytes", "head_overflow", "head_state",
                   "head_sync", "tail", "finish_ts")  # fmt: skip
_BOUNDARY_CLASSES: dict[type, type] = {}


def boundary_class(framer_class: type[Framer]) -> type[Framer]:
    """The protocol's framer class that keeps its head and end state (made once a class)."""
    made = _BOUNDARY_CLASSES.get(framer_class)
    if made is None:
        methods = {name: value for name, value in vars(_Boundary).items()
                   if callable(value) and name not in ("__getattribute__",)}  # fmt: skip
        made = _BOUNDARY_CLASSES[framer_class] = type(
            f"Boundary{framer_class.__name__}", (framer_class,),
            {**methods, "__slots__": _BOUNDARY_SLOTS, "plain": framer_class,
             "__doc__": _Boundary.__doc__, "__module__": __name__})  # fmt: skip
    return made


# the Stream's
BoundaryFramer = boundary_class(StreamFramer)


def framer_state(framer: Framer) -> dict:
    """A framer's state as plain values (copies: the bulk engine's buffers are reused), with
    its protocol's framer class."""
    state = {name: getattr(framer, name) for name in STATE_SLOTS}
    state["cur_parts"] = [bytes(p) for p in framer.cur_parts]
    state["rbuf"] = bytes(framer.rbuf)
    state["framer_class"] = getattr(type(framer), "plain", type(framer))
    return state


def restore_framer(state: dict, shift: int, emit: Any, report: Any) -> Framer:
    """A framer of its protocol in `state`, its stream offsets moved by `shift`."""
    framer = state["framer_class"](emit, report, state["max_frame"],
                                   state["deliver_keep_limit"], state["fixed_max_frame"])
    for name in STATE_SLOTS:
        setattr(framer, name, state[name])
    framer.cur_parts = list(state["cur_parts"])
    framer.rbuf = bytearray(state["rbuf"])
    for name in OFFSET_SLOTS:
        setattr(framer, name, getattr(framer, name) + shift)
    if framer.cur_start >= 0:
        framer.cur_start += shift
    return framer


@dataclass(slots=True)
class SideFacts:
    """One direction of a connection in one piece."""

    started: bool  # any segment of this direction in the piece
    syn: bool  # its SYN is in the piece
    first_seq: int  # TCP sequence number of the piece's stream offset 0
    end_seq: int  # of the next byte owed (a FIN after it takes one more number)
    fin: bool  # its FIN is in the piece
    end_offset: int  # stream offset reached
    head: list | None  # see BoundaryFramer
    head_sync: int | None
    head_state: tuple[bool, int, int] | None
    head_overflow: bool
    end_state: dict | None
    tail: tuple[int, int] | None = None  # see _Boundary.finish


@dataclass(slots=True)
class PartFacts:
    """One connection of one piece: a part of a connection of the whole set."""

    local_id: str  # its id in the piece's own tables
    client: str
    server: str
    start_ns: int
    end_ns: int
    tcp_end: str  # fin, rst or open
    closed: bool  # both FINs or a RST seen: nothing of it can follow in a later piece
    sides: dict[str, SideFacts]  # by direction, c2s and s2c
    protocol: str | None = None  # the name of the protocol it carries

    @property
    def base(self) -> str:
        return f"{self.client}-{self.server}"

    @property
    def midstream(self) -> bool:
        """The client's SYN is not in this piece: the part may carry on an earlier one (its
        SYN-ACK may still be here, the SYN being the last packet of the previous file)."""
        return not self.sides["c2s"].syn


@dataclass(slots=True)
class PieceFacts:
    """A piece: its connections in the order the dissector numbered them."""

    path: str
    first_ns: int | None  # first connection seen (None: no Stream connection)
    last_frame_ns: int | None  # time of its last frame, in frame order
    parts: list[PartFacts] = field(default_factory=list)
    end_ns: int | None = None  # its last packet's time (what its framers' finish was told)


def piece_facts(dissector: Any, path: str, last_frame_ns: int | None) -> PieceFacts:
    """The facts of a finished run whose framers were BoundaryFramers."""
    from streamdissect.engine.dissect import endpoint_text

    parts = []
    for stream in dissector.streams:
        conn = stream.tcp
        sides = {}
        for side in (0, 1):
            reassembler = conn.streams[side]
            framer = stream.framers[side]
            sides[stream.direction(side)] = SideFacts(
                started=reassembler.started,
                syn=reassembler.isn is not None,
                first_seq=(reassembler.next_seq - reassembler.offset) & 0xFFFFFFFF,
                end_seq=reassembler.next_seq,
                fin=conn.fin[side],
                end_offset=reassembler.offset,
                head=getattr(framer, "head", None),
                head_sync=getattr(framer, "head_sync", None),
                head_state=getattr(framer, "head_state", None),
                head_overflow=getattr(framer, "head_overflow", False),
                end_state=getattr(framer, "end_state", None) or framer_state(framer),
                tail=getattr(framer, "tail", None),
            )
        client, server = (conn.endpoints[1 - stream.server_side],
                          conn.endpoints[stream.server_side])  # fmt: skip
        parts.append(PartFacts(stream.id, endpoint_text(*client), endpoint_text(*server),
                               conn.start_ns, conn.end_ns, conn.how_ended, conn.ended,
                               sides, stream.protocol.name))  # fmt: skip
    first = min((p.start_ns for p in parts), default=None)
    ends = [f.finish_ts for s in dissector.streams for f in s.framers
            if getattr(f, "finish_ts", None) is not None]  # fmt: skip
    return PieceFacts(path, first, last_frame_ns, parts, max(ends, default=None))


def watch_last_frame(events: Iterator[Any], seen: list) -> Iterator[Any]:
    """Pass the events on; seen[0] is the time of the last frame so far."""
    from streamdissect.engine.state import FrameEvent
    from streamdissect.protocols.stream.hot import HotFrames

    for event in events:
        cls = event.__class__
        if cls is FrameEvent:
            seen[0] = event.ts_ns
        elif cls is HotFrames and len(event):
            seen[0] = int(event.ts_ns[-1])
        yield event


def boundary_framers(limits: dict[tuple[str, str], int] | None = None) -> dict[str, Any]:
    """Each registered protocol's boundary framer class (what `Dissector.framer_class` takes
    by protocol name); `limits`: the (connection, direction) that know a negotiated frame max
    from the start (carried from an earlier piece: stitch.Plan.limits), for what they report
    of frames above it."""
    from streamdissect.protocols.registry import PROTOCOLS

    made = {p.name: boundary_class(p.framer_class) for p in PROTOCOLS}
    if not limits:
        return made

    def limited(cls: type[Framer]) -> Any:
        def make(emit: Any, report: Any, *args: Any) -> Framer:
            framer = cls(emit, report, *args)
            lane = getattr(emit, "lane", None)  # (frames, connection, direction)
            limit = limits.get((lane[1], lane[2])) if lane is not None else None
            if limit is not None:
                resync_max = framer.resync_max
                framer.negotiated_frame_max(limit)
                # (the mid-stream start resyncs as in the piece's own run: the frames the
                # plan took from that run must be the frames found again)
                framer.resync_max = resync_max
            return framer

        return make

    return {name: limited(cls) for name, cls in made.items()}


def analyze_piece(path: str, limits: dict[tuple[str, str], int] | None = None,
                  replays: dict | None = None, **options: Any) -> tuple[Any, PieceFacts]:  # fmt: skip
    """`analysis.analyze` of one file, and its edge facts. `limits`: see `boundary_framers`.
    `replays`, when given, is filled with the replay table builder (Protocol.replay_columns)
    of each protocol analysed per server (Protocol.analysed_per_server) whose frames the
    file has, holding them: the Spark job analyses those per server."""
    from streamdissect.analysis.driver import analyze

    kept: dict[str, Any] = {}

    def prepare(dissector: Any) -> None:
        dissector.framer_class = boundary_framers(limits)
        kept["dissector"] = dissector

    seen: list = [None]

    def watch(events: Iterator[Any]) -> Iterator[Any]:
        events = watch_last_frame(events, seen)
        return events if replays is None else _replayed(events, kept["dissector"], replays)

    analysis = analyze(path, on_dissector=prepare, watch=watch, **options)
    return analysis, piece_facts(kept["dissector"], path, seen[0])


def _replayed(events: Iterator[Any], dissector: Any, replays: dict) -> Iterator[Any]:
    """Pass the events on, each frame of a protocol analysed per server into its replay."""
    from streamdissect.engine.state import FrameEvent

    protocol_of = dissector.protocol_of
    for event in events:
        if event.__class__ is FrameEvent:
            carried = protocol_of.get(event.connection)
            if carried is not None and carried.analysed_per_server:
                builder = replays.get(carried.name)
                if builder is None:
                    builder = replays[carried.name] = carried.replay_columns()
                builder.add(event)
        yield event
