"""RocketMQ in the bulk engine's plain walk (framing.walk.PlainFrames, Protocol.plain_walk).

The walk finds a direction's frames; the JSON ones are taken off it (their places among the
block's events kept) and read together when the direction's walk is done: their headers
parsed by one call for every TOGETHER frames (codec.json_headers), each record then made by
decode_frame from its parsed header and emitted in its slot as the framer would emit it (a
clean command straight, with the state's count, while its naming waits for the connection's
end_connection; a malformed one reported and emitted by the framer), in the frames' order
(a framer class that overrides `_decode`, to watch its frames, has every frame its own
way). A header that cannot be read with the others (no `{"` start, a `null` in it, a block
that does not parse) is read alone, as the framer reads it. Nothing changes but the cost:
the events are the framer's (tests/test_rocketmq_plain_walk.py holds it, on the recorded
captures and made-worse copies). For the analyses alone (the state's `columns` "analysis"),
the hot frames are emitted as light records instead (hot.py), which end_connection names
too, a response that its request's collectors do not read light made a command there.
"""

from __future__ import annotations

import struct
from array import array
from itertools import chain
from typing import Any

from streamdissect.framing.events import FrameEvent
from streamdissect.framing.walk import PlainFrames
from streamdissect.protocols.rocketmq import framing, native, spec
from streamdissect.protocols.rocketmq.codec import (
    JSON_START,
    NOT_PARSED,
    decode_frame,
    json_headers,
)
from streamdissect.protocols.rocketmq.framing import OpenRequests, RocketMQFramer
from streamdissect.protocols.rocketmq.hot import (
    SEND_CODES,
    HotAnswer,
    HotPull,
    HotPulled,
    HotRun,
    HotSend,
    hot_record,
    joined_runs,
)
from streamdissect.protocols.rocketmq.records import RemotingCommand
from streamdissect.tcp.vectorized import InOrder

_word = struct.Struct(">I").unpack_from
# The walk's key of a frame is the high half of its header-length word: 0, a JSON header
# under 64 KiB (a longer one, or a ROCKETMQ header, goes the framer's way at once).
_JSON_SMALL = frozenset((spec.JSON << 8,))
# Frames whose headers are parsed by one call: the parsed headers live until their frames are
# decoded, so a few dozen at a time (a block's thousands at once would be scanned and
# promoted by the garbage collector before they are freed)
TOGETHER = 64
_HOT = (HotSend, HotAnswer, HotPulled, HotPull)


class RocketMQPlainWalk(PlainFrames):
    """The plain walk of RocketMQ connections, for one bulk run (`state`: the dissection's;
    its `columns` "analysis": the hot frames read as light records, hot.py)."""

    def __init__(self, state: Any = None, patch_start: int = 0) -> None:
        super().__init__(state, patch_start)
        self.hot = getattr(state, "columns", None) == "analysis"

    def direction(self, framer: Any, segments: Any, w: Any, pos: int) -> Any:
        if type(framer)._decode is not RocketMQFramer._decode:
            # a framer class that watches the frames it decodes: every frame its way
            return super().direction(framer, segments, w, pos)
        # (light records only where the connection's block is named in time order here)
        return RocketMQDirection(framer, segments, w,
                                 self.hot and type(framer) is RocketMQFramer)  # fmt: skip


    @staticmethod
    def begin_connection(owner: Any) -> None:
        for framer in owner.framers:
            framer.naming_deferred = True

    @staticmethod
    def end_connection(owner: Any, items: list, start: int) -> None:
        """The block's commands of the connection named in time order, as the reference
        engine names them frame by frame (a direction walked first would name its
        responses before the other direction's requests of the same block are seen):
        a request remembered by its direction, a response named by the other's
        (framing.name_response, for both framers at once)."""
        framers = owner.framers
        for framer in framers:
            framer.naming_deferred = False
        if any(type(f).name is not RocketMQFramer.name or f.connection_framers is not framers
               for f in framers):  # fmt: skip
            side = {owner.direction(0): 0, owner.direction(1): 1}
            for row, slot, event in in_time_order(items, start):
                record = getattr(event, "record", None)
                if record.__class__ in _HOT:  # (named by the framer's own way: as commands)
                    record = as_command(items, row, slot, event, record.command())
                if record.__class__ is RemotingCommand:
                    framers[side[event.direction]].name(record)
            return
        own = {owner.direction(k): framers[k].requests for k in (0, 1)}
        peer = {owner.direction(k): framers[1 - k].requests for k in (0, 1)}
        in_order = in_time_order(items, start)
        if not compiled_named(in_order, own, peer, items):
            named_in_order(in_order, own, peer, items)


def as_command(items: list, row: int, slot: int, event: Any, command: Any) -> Any:
    """`command` made the record of the (row, slot, event) item of the block's `items`, in
    place of its light record: a light record that is its own event (hot.OwnEvent) then
    replaced in its slot by a frame event of the command."""
    if event.record is event:
        items[slot] = (row, slot, FrameEvent(event.ts_ns, event.connection, event.direction,
                                             event.stream_offset, command))  # fmt: skip
    else:
        event.record = command
    return command


def in_time_order(items: list, start: int) -> list:
    """The items from `start` on in time order, None dropped (a slot not filled): sorted by
    the compiled sort when it is loaded and can (native.py), else Python's."""
    compiled = native.loaded
    ordered = None if compiled is None else compiled.in_time_order(items, start)
    return sorted(filter(None, items[start:])) if ordered is None else ordered


# The records end_connection names (the compiled loop's classes, in this order)
_NAMED = (RemotingCommand, HotSend, HotPull, HotAnswer, HotPulled)


def named_in_order(in_order: list, own: dict, peer: dict, items: list | None = None) -> None:
    """A block's (row, slot, event) items of a connection, in time order, named: a
    request remembered by its direction's open requests (`own`, by direction), a response
    named by the other's (`peer`), a light answer made a command where its request's
    collectors do not read it light (`as_command`: in the block's `items`, the slots the
    items are in). A light record that is its own event (the compiled reader's) lets its
    frame go once named: only the naming asks its `command()`, and the frame is freed
    while it is warm, not with the block's other objects. (The reference for the compiled
    loop: named.)"""
    for row, slot, event in in_order:
        record = getattr(event, "record", None)
        cls = record.__class__
        if cls is RemotingCommand or cls is HotSend or cls is HotPull:
            if record.flag & spec.RESPONSE_FLAG:
                record.request_code = peer[event.direction].answered(record.opaque)
            else:
                own[event.direction].asked(record)
        elif cls is HotAnswer or cls is HotPulled:
            record.request_code = code = peer[event.direction].answered(record.opaque)
            if code not in record.light_for:  # (light only for its request's collectors)
                as_command(items, row, slot, event, record.command())
                continue
        if event is record:  # (a light record its own event: its frame let go once named)
            record.frame = None


def compiled_named(in_order: list, own: dict, peer: dict, items: list | None = None) -> bool:
    """named_in_order by the compiled loop (_native_naming.c), with framing's bounds as
    they are now; False (nothing done) when it is not loaded (native.py) or a direction's
    open requests are not plain OpenRequests."""
    compiled = native.loaded
    if compiled is None or any(r.__class__ is not OpenRequests
                               for r in chain(own.values(), peer.values())):  # fmt: skip
        return False
    compiled.named(in_order, own, peer, _NAMED,
                   (framing.MAX_OPEN_CALLS, framing.GROWN_CALLS, framing.SHRUNK_CALLS),
                   (spec.RESPONSE_FLAG, spec.ONEWAY_FLAG),
                   *(() if items is None else (items,)))  # fmt: skip
    return True


class RocketMQDirection:
    """One direction's walk of a block: its JSON frames noted, then read together (a run
    of them noted by the compiled walk when it is loaded: native.py)."""

    __slots__ = ("check", "deferred_items", "events", "framer", "hot", "segments")
    deferred = _JSON_SMALL
    record = staticmethod(PlainFrames.record)
    head_record = staticmethod(PlainFrames.head_record)

    def __init__(self, framer: Any, segments: Any, w: Any, hot: bool = False) -> None:
        self.framer, self.segments, self.events, self.check = framer, segments, w.events, w.check
        # (packed when the compiled reader is loaded: 8 int64 a frame, not a tuple of 8 ints)
        self.deferred_items: Any = [] if native.loaded is None else _Packed("q")
        self.hot = hot  # light records for the hot frames (hot.py)
        if hot:  # (their runs one event each, at the block's end)
            w.events.join = joined

    @property
    def run(self) -> Any:
        """The walk's fast run (None: frame by frame). (A property: the bound method kept
        on the instance would be a cycle holding the block's segments until a collection.)"""
        return None if native.loaded is None else self._compiled_run

    def _compiled_run(self, pos: int, jj: int) -> tuple[int, int]:
        """walk._frames' loop over the run of deferred frames from `pos` (_native.json_run:
        each noted as the loop notes it, up to the first frame the loop must take)."""
        segments, items = self.segments, self.events.items
        pos, jj, run = native.loaded.json_run(
            segments.buf, segments.so, segments.lo, segments.po, segments.row_of.__self__,
            segments.time_of.__self__, segments.send, pos, jj, self.check.low,
            self.framer.frame_limit, len(items))  # fmt: skip
        if run:
            self.deferred_items.frombytes(run)
            items += [None] * (len(run) // _PACKED_ITEM)
            self.framer.offset = pos
        return pos, jj

    def finish(self) -> None:
        items = self.deferred_items
        if not items:
            return
        framer, events = self.framer, self.events
        if framer.lane is not None and framer.naming_deferred and (
                type(framer).emit_decoded is RocketMQFramer.emit_decoded):  # fmt: skip
            # what emit_decoded does for a command read whole (nothing to report; the
            # protocol's naming deferred: the state's emit alone), without its calls
            lane = (*framer.lane, self.segments.side, events.frame_class, events.items)
        else:
            lane = None
        step = 8 if items.__class__ is _Packed else 1  # (a frame's items)
        for first in range(0, len(items), TOGETHER * step):
            self._read(items[first : first + TOGETHER * step], lane)

    def _read(self, items: Any, lane: tuple | None) -> None:
        """These deferred frames (a list of 8-tuples, or packed: 8 int64 each) decoded
        (their headers parsed together) and emitted in their slots (the compiled reader's
        light records placed by it, native.py)."""
        compiled, segments = native.loaded, self.segments
        if compiled is not None:
            if items.__class__ is list:  # (walked before the reader was loaded: tests)
                items = array("q", chain.from_iterable(items))
            # (a frame across segments joined from them there, as InOrder.read joins it)
            joinable = (segments.so, segments.lo, segments.po) if (
                type(segments).read is InOrder.read) else ()  # fmt: skip
            frames = compiled.frames_of(segments.mv, items, segments.read, *joinable)
            items = _Unpacked(items)
        else:
            if items.__class__ is not list:  # (packed, and the reader since unloaded: tests)
                items = list(_Unpacked(items))
            mv, read = segments.mv, segments.read
            frames = [bytes(mv[at : at + end - start]) if end <= seg_end else read(start, end)
                      for start, end, _size, _ts, _row, _slot, at, seg_end in items]  # fmt: skip
        framer, place_out = self.framer, self.events.place_out
        light = left = None
        if lane is not None:
            counts, connection, direction, side, make, slots = lane
            if self.hot:  # (the connection's block named at its end: responses too)
                light = hot_record
                scanned = compiled_records(frames)
                if scanned is not None:  # (their events made and placed; the others here)
                    left = compiled.place(scanned, items.packed, make, connection, direction,
                                          slots)  # fmt: skip
                    counts[side] += len(items) - len(left)
        headers = _parsed_headers(frames, left)
        for k in range(len(items)) if left is None else left:
            start, _end, size, ts, row, slot, _at, _seg_end = items[k]
            frame, parsed = frames[k], headers[k]
            if light is not None:
                record = light(frame, parsed)
                if record is not None:
                    counts[side] += 1
                    slots[slot] = (row, slot, make(ts, connection, direction, start, record))
                    continue
            record = decode_frame(frame, parsed_header=parsed)
            if lane is not None and record.__class__ is RemotingCommand and (
                    record.body_error is None):  # fmt: skip
                counts[side] += 1
                slots[slot] = (row, slot, make(ts, connection, direction, start, record))
            else:
                framer.emit_decoded(start, ts, record, size)
                place_out(row, slot)


class _Packed(array):
    """A direction's deferred frames packed (json_run's), 8 int64 a frame: the walk's
    `append` of a frame's 8-tuple extends it by its 8 ints."""

    __slots__ = ()
    append = array.extend


_PACKED_ITEM = 8 * 8  # (bytes a frame in json_run's packed run)


class _Unpacked:
    """Packed items read as 8-tuples, by index (only the frames left to Python are)."""

    __slots__ = ("packed",)

    def __init__(self, packed: array) -> None:
        self.packed = packed

    def __len__(self) -> int:
        return len(self.packed) // 8

    def __getitem__(self, k: int) -> tuple:
        if not 0 <= k < len(self.packed) // 8:
            raise IndexError(k)
        return tuple(self.packed[8 * k : 8 * k + 8])


def joined(events: list) -> list:
    """A block's events, its runs of light sends and answers to sends one HotRun each
    (hot.joined_runs; compiled, when loaded: native.py)."""
    compiled = native.loaded
    if compiled is None:
        return joined_runs(events)
    return compiled.joined(events, HotSend, HotAnswer, SEND_CODES, HotRun)


def compiled_records(frames: list[bytes]) -> list | None:
    """Each frame's light record as the compiled reader makes it from the header's text
    (None where it declines: hot_record's way), or None when it is not loaded (native.py)."""
    compiled = native.loaded
    return None if compiled is None else compiled.hot_records(frames, *_HOT)


def _parsed_headers(frames: list[bytes], only: list | None = None) -> list:
    """Each frame's JSON header's value, read together (NOT_PARSED: to be read alone); with
    `only`, those frames' alone (the others NOT_PARSED)."""
    out = [NOT_PARSED] * len(frames)
    together, headers = [], []
    for k in range(len(frames)) if only is None else only:
        frame = frames[k]
        length = _word(frame, 4)[0] & spec.HEADER_LENGTH_MASK
        if length > len(frame) - 8:
            continue  # (malformed: decode_frame says why)
        header = frame[8 : 8 + length]
        if header[:2] == JSON_START and b"null" not in header:
            together.append(k)
            headers.append(header)
    values = json_headers(headers)
    if values is not None:
        for k, value in zip(together, values):
            out[k] = value
    return out
