"""Frames walked straight over one direction's in-order segments of a block (the bulk engine).

The framer (framing.framer) is fed byte runs and copies what it keeps; this walk finds the
frame boundaries over the segments themselves and copies only what a record needs (the whole
frame; a big Deliver's head), through the framer's public walk interface, so that the two
hand over at any frame. A protocol's fast path (FastPath) may take frames off the walk: hot
frames noted for decoding as columns at the block's end, frames read together after the
walk, small frames made into records without the framer's checks. Odd sizes and lost sync
go to the framer itself, byte run by byte run, from there to the block's end.

A Tune changes the frame limit while a direction is walked: the walk reads it live, and
notes (LimitCheck) where a Tune of one direction could have mattered to the other,
which was walked on its own clock: the caller then undoes the connection's block and does
it again packet by packet.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Callable
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, NamedTuple, Protocol

from streamdissect.framing.framer import (
    DELIVER_HEAD,
    DELIVER_KEY,
    HEADER,
    MIN_NEGOTIATED_FRAME_MAX,
    Framer,
)
from streamdissect.slotted import Slotted
from streamdissect.tcp.vectorized import InOrder

_event_of = itemgetter(2)  # (row, slot, event) -> event
_header = struct.Struct(">IHH").unpack_from  # a frame's size, key, version (framing.framer)
_header_bytes = struct.Struct(">IHH").pack
MIN_LIMIT = MIN_NEGOTIATED_FRAME_MAX - 4  # no negotiated limit is lower


class LimitCheck:
    """Did a Tune walked in one direction change the frame limit under the other one?"""

    __slots__ = ("big", "big_runs", "changes", "initial", "low", "tail")

    def __init__(self, framer: Framer) -> None:
        """`framer`: either of the connection's (the frame limit holds both ways)."""
        self.initial = framer.frame_limit
        self.low = min(MIN_LIMIT, framer.max_frame)  # frames up to it are within every limit
        self.big: list[tuple] = []  # (row that tells the size, offset, side, size)
        # the same of many frames at once, as arrays (rows, offsets, side, sizes): read only
        # when a Tune changed the limit, which is rare
        self.big_runs: list[tuple] = []
        self.changes: list[tuple] = []  # (row of the Tune, offset, side, new limit)
        self.tail = False  # exact code ran on its own clock

    def wrong(self) -> bool:
        if self.tail:
            return True
        if len({side for _, _, side, _ in self.changes}) > 1:
            # Tunes of both directions (an offer and its answer): each direction's walk set
            # the limit on its own clock, so the one left is not the later one in time
            return True
        changes = sorted(self.changes)
        runs = (zip(rows.tolist(), offsets.tolist(), repeat(side), sizes.tolist())
                for rows, offsets, side, sizes in self.big_runs)  # fmt: skip
        for row, pos, side, size in chain(self.big, *runs):
            limit = self.initial
            for crow, cpos, cside, new in changes:
                if crow < row or (crow == row and cside == side and cpos < pos):
                    limit = new
            if size > limit:  # walked as within the limit: it was not
                return True
        return False


class BlockEvents(Slotted):
    """A block's events as the walks make them, (packet row, slot, event) each, sorted at
    the block's end (the slot orders a row's events); a frame taken off the walk keeps its
    slot with None in it. What the framer emits goes to the state's queue `out` first.
    `join`, when a walk sets it: what the block's events in order become at its end (a
    protocol's consecutive hot frames as one event: plain_walk's runs for the analyses)."""

    __slots__ = field_names = ("out", "at_row", "frame_class", "items", "join")
    out: list
    at_row: Callable[[int], None]  # the state is told which packet row is handled
    frame_class: type  # the state's frame event (ts_ns, connection, direction, offset, record)
    items: list
    join: Callable[[list], list] | None

    def __init__(self, out: list, at_row: Callable[[int], None], frame_class: type,
                 items: list | None = None,
                 join: Callable[[list], list] | None = None) -> None:  # fmt: skip
        self.out = out
        self.at_row = at_row
        self.frame_class = frame_class
        self.items = [] if items is None else items
        self.join = join

    def tag(self, row: int) -> None:
        """What the framer just put in `out`, as made by the packet of this row."""
        out = self.out
        if out:
            items = self.items
            for ev in out:
                items.append((row, len(items), ev))
            out.clear()

    def sorted_items(self) -> list:
        """The items, sorted, but the slots of frames taken off as columns (None)."""
        items = [item for item in self.items if item is not None]
        items.sort()
        return items

    def ordered(self) -> list:
        """The events in the order the streaming engine gives them (no slot left empty)."""
        self.items.sort()
        return list(map(_event_of, self.items))  # (a third of the comprehension's time)

    def place_out(self, row: int, slot: int) -> None:
        """What the framer just put in `out`, for a frame taken off the walk: in its slot
        (a malformed report comes with its record: both kept, in order)."""
        items = self.items
        for k, ev in enumerate(self.out):
            if k == 0:
                items[slot] = (row, slot, ev)
            else:
                items.append((row, slot + k / 1024, ev))
        self.out.clear()


class FastPath(Protocol):
    """What a protocol's fast path does in one direction's walk (protocols.stream.fast_path
    for RabbitMQ Stream)."""

    run: Callable[[int, int], tuple[int, int]] | None  # (pos, segment) -> after a run of hot frames
    deferred: frozenset[int]  # keys of frames read together after the walk
    deferred_items: list  # (start, end, size, ts_ns, row, slot, buffer position, segment end)

    def record(self, key: int, frame: bytes, size: int, version: int) -> Any:
        """A whole frame's record when the fast path makes it, else None."""

    def head_record(self, head: bytes, size: int, version: int) -> Any:
        """A big Deliver's record from its head, else None (the framer reports it)."""

    def finish(self) -> None:
        """The walk is done (or stopped): the deferred frames, the hot frames noted."""


class PlainFrames:
    """No fast path: the framer decodes every frame. (A protocol's fast path for a whole
    bulk run offers what this does: engine.bulk uses it, or protocols.stream.fast_path.)"""

    ROOM = 0  # bytes a block buffer keeps after its data for the fast path
    run = None
    deferred: frozenset[int] = frozenset()

    def __init__(self, state: Any = None, patch_start: int = 0) -> None:
        self.deferred_items: list = []

    @staticmethod
    def views(memory: Any, at: int, size: int) -> None:
        """What the fast path gathers from a block buffer memory[at : at + size]."""
        return

    def use(self, buf: Any, mv: memoryview | None, views: Any) -> None:
        """The buffer of the next block."""

    def direction(self, framer: Framer, segments: InOrder, w: Walk, pos: int) -> PlainFrames:
        """The fast path of one direction's walk."""
        return self

    def begin_connection(self, owner: Any) -> None:
        """A connection's block is walked now, one direction after the other (`owner`:
        engine.state.StreamConnection)."""

    def end_connection(self, owner: Any, items: list, start: int) -> None:
        """Both directions of the connection's block walked: its events are `items[start:]`
        (BlockEvents.items: (row, slot, event), None for a slot not filled), in time order
        once sorted."""

    def mark(self) -> int:
        """Where the block's notes are (to undo a connection's walk)."""
        return 0

    def undo(self, mark: int) -> None:
        pass

    def end_block(self, events: BlockEvents) -> list:
        """The block's events in order."""
        return events.ordered()

    @staticmethod
    def record(key: int, frame: bytes, size: int, version: int) -> None:
        return None

    @staticmethod
    def head_record(head: bytes, size: int, version: int) -> None:
        return None

    def finish(self) -> None:
        pass


class Walk(NamedTuple):
    """One connection's walk of a block: its events, its LimitCheck, and the protocol's
    fast path for the block (`direction(framer, segments, walk, pos)` -> a FastPath)."""

    events: BlockEvents
    check: LimitCheck
    fast: Any


def walk(framer: Framer, segments: InOrder, w: Walk) -> None:
    """The frames of one direction's in-order segments of a block."""
    pos = _resume(framer, segments, w)
    if pos is None:
        return
    fast = w.fast.direction(framer, segments, w, pos)
    try:
        _frames(framer, segments, w, fast, pos)
    finally:
        fast.finish()


def _resume(framer: Framer, segments: InOrder, w: Walk) -> int | None:
    """A frame begun in an earlier block goes on; where the walk goes on (None: the frame
    goes on past these segments)."""
    pos = framer.offset
    begun = framer.frame_in_progress()
    if begun is None:
        return pos
    start, total, keep = begun
    send = segments.send
    stop = start + total
    upto = min(stop, send)
    framer.continue_frame(segments.read(pos, min(pos + keep, upto)) if keep > 0 else None, upto)
    if stop > send:
        return None
    j = bisect_right(segments.so, stop - 1) - 1  # the segment that completes it
    limit = framer.frame_limit
    framer.complete_frame(segments.time_of(j))
    if framer.frame_limit != limit:
        w.check.changes.append((segments.row_of(j), start, segments.side, framer.frame_limit))
    w.events.tag(segments.row_of(j))
    return stop


def _frames(framer: Framer, segments: InOrder, w: Walk, fast: FastPath, pos: int) -> None:
    """The walk proper, frame by frame from `pos` (a run of hot frames at a time)."""
    buf, mv, so, lo, po = segments.buf, segments.mv, segments.so, segments.lo, segments.po
    send, read, io, to, side = (segments.send, segments.read, segments.row_of,
                                segments.time_of, segments.side)  # fmt: skip
    events, out = w.events.items, w.events.out
    check = w.check
    low, bigs, changes = check.low, check.big, check.changes
    emit, keep_limit = framer.emit, framer.deliver_keep_limit
    # the state's count and event, made here for records that are neither Publish nor Tune
    lane = getattr(emit, "lane", None)
    if lane is not None:
        counts, connection, direction = lane
        make = w.events.frame_class
    run, deferred, defer = fast.run, fast.deferred, fast.deferred_items.append
    fast_record, head_record = fast.record, fast.head_record
    jj = 0
    while pos < send:
        if run is not None and not out:
            pos, jj = run(pos, jj)
            if pos >= send:
                break
        j = jj  # the segment the last frame ended in
        if send - pos < HEADER:
            _exact_tail(framer, pos, segments, w)
            return
        seg_end = so[j] + lo[j]
        if not so[j] <= pos < seg_end:
            # Clients and brokers end a segment with a frame: this one starts the next
            # (in-order segments follow each other without a gap or an overlap).
            j = j + 1 if pos == seg_end else bisect_right(so, pos, j) - 1
            seg_end = so[j] + lo[j]
        at = po[j] + pos - so[j]
        if pos + HEADER <= seg_end:
            size, key, version = _header(buf, at)
        else:
            size, key, version = _header(read(pos, pos + HEADER))
        limit = framer.frame_limit  # live: a Tune just walked changes it
        if size > low:  # its fate depends on the limit at the packet that tells its size
            k = j if pos + 4 <= seg_end else bisect_right(so, pos + 3) - 1
            bigs.append((io(k), pos, side, size))
        if size > limit or size < 4:  # absurd, or above the negotiated max
            _exact_tail(framer, pos, segments, w)
            return
        end = pos + 4 + size
        # (kept as its head: a big frame of the kind its protocol keeps so; the key alone
        # would take a RocketMQ JSON header of 0x80000 bytes and more for a Deliver)
        big = (key == DELIVER_KEY and keep_limit is not None and size > keep_limit
               and framer.heads_only(_header_bytes(size, key, version), 0))  # fmt: skip
        if end > send:  # continues in a later block (or never ends)
            framer.begin_frame(pos, 4 + size, big,
                               read(pos, min(send, pos + (DELIVER_HEAD if big else 4 + size))),
                               send)  # fmt: skip
            return
        jj = j if end <= seg_end else bisect_right(so, end - 1, j) - 1  # completes it
        framer.offset = end
        row = io(jj)
        ts = to(jj)
        if key in deferred:  # read after the walk; its place in the order is kept
            defer((pos, end, size, ts, row, len(events), at, seg_end))
            events.append(None)
            pos = end
            continue
        if big:
            stop = min(end, pos + DELIVER_HEAD)
            head = bytes(mv[at : at + stop - pos]) if stop <= seg_end else read(pos, stop)
            record = head_record(head, size, version)
            if record is None:  # reported with its malformed record, as the framer does
                framer.emit_head(pos, ts, head, size)
        else:
            frame = bytes(mv[at : at + 4 + size]) if jj == j else read(pos, end)
            record = fast_record(key, frame, size, version)
            if record is None:
                framer.decode_whole(pos, ts, frame, size)
                if framer.frame_limit != limit:  # a Tune
                    changes.append((row, pos, side, framer.frame_limit))
        if record is not None:  # a Deliver's head or a small hot frame: not Publish, Tune
            if lane is None or out:
                emit(pos, ts, record)
            else:
                counts[side] += 1
                events.append((row, len(events), make(ts, connection, direction, pos, record)))
                pos = end
                continue
        for ev in out:
            events.append((row, len(events), ev))
        out.clear()
        pos = end
    framer.offset = pos


def _exact_tail(framer: Framer, pos: int, segments: InOrder, w: Walk) -> None:
    """From `pos` on, the segments fed to the framer itself (odd sizes, resync)."""
    w.check.tail = True
    so, lo, po, mv = segments.so, segments.lo, segments.po, segments.mv
    framer.offset = pos
    first = bisect_right(so, pos) - 1
    at = pos - so[first]
    for j in range(first, len(so)):
        row = segments.row_of(j)
        w.events.at_row(row)
        framer.data(mv[po[j] + at : po[j] + lo[j]], segments.time_of(j))
        w.events.tag(row)
        at = 0
