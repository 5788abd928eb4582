"""Columns mode, one direction's walk of a block: the hot frames noted, not decoded.

From where the frame walk (framing.walk) stands, the hot frames that follow (Publish,
PublishConfirm, Credit, Heartbeat, Deliver: hot.HOT_KEYS, whole within the block, within the
frame limit) have only their stream offsets noted, a run at a time, each run's place among
the block's events kept (None slots); hot_block decodes them at the block's end. The walk
takes the first other frame. Frames of one size and key one after the other are checked a
batch at a time (EqualRuns).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from itertools import repeat
from typing import Any

import numpy as np

from streamdissect.capture.packet_columns import PAYLOAD_HEAD
from streamdissect.framing.framer import HEADER, Framer
from streamdissect.framing.walk import Walk
from streamdissect.protocols.stream import layouts, native
from streamdissect.tcp.vectorized import InOrder

_size_key = layouts.SIZE_KEY.struct().unpack_from
FRAME_HEAD = layouts.FRAME.dtype(layouts.HEAD_BYTES)  # (viewing HEAD_BYTES-wide items)
SEGMENT_HEAD = layouts.FRAME.dtype(PAYLOAD_HEAD)  # (viewing packet_columns.Parsed.phead)
# Frames of one size and key walked one by one before EqualRuns is asked for more of them.
# A call costs ~25 us of numpy, a frame walked here ~1 us: the small-frame capture's Credits
# and PublishConfirms come in runs of a few, where asking after 4 missed 2,800 times (the
# walk 0.145 -> 0.105 s of CPU with 16; no change on the large-message capture).
FOLLOW_AFTER = 16
# Frames each filling its segment in a row before SegmentRuns is asked: its first question
# checks the walk's every segment (~0.5 ms), each next one is a lookup (16 -> 4: the
# small-frame capture's main process -40 M instructions, -1 %; no change on the other)
FILL_AFTER = 4


class HotWalk:
    """The hot frames of one direction's walk of a block: the keys taken, the stream offsets
    of the frames noted and the segment each starts in (`segs`: the walk knows it; a search
    per frame at the block's end cost more), their runs (first event slot, count) and where
    each ends; `big`: indexes into `starts` of frames above LimitCheck.low (within the frame
    limit)."""

    __slots__ = ("big", "ends", "equal", "events", "filling", "framer", "keys", "low", "mask",
                 "native", "runs", "segments", "segs", "starts")  # fmt: skip

    def __init__(self, keys: frozenset, segments: InOrder, framer: Framer, w: Walk,
                 frame_heads: np.ndarray) -> None:  # fmt: skip
        """`frame_heads`: the block buffer as HEAD_BYTES-wide items (blocks.sliding)."""
        self.keys = keys
        self.starts = array("q")
        self.segs = array("q")
        self.ends: list[int] = []
        self.big: list[int] = []
        self.runs: list[tuple[int, int]] = []
        self.segments = segments
        self.framer = framer
        self.events = w.events.items  # the block's (row, slot, event) items
        self.low = w.check.low
        self.equal = EqualRuns(segments, frame_heads, self.starts, self.segs)
        self.filling = SegmentRuns(segments, self.starts, self.segs, keys, self.low)
        self.native = native.loaded
        self.mask = _mask(keys) if self.native is not None else None

    def run(self, pos: int, jj: int) -> tuple[int, int]:
        """The hot frames from stream offset `pos` (segment jj) noted; where the walk goes on
        (the framer's offset moved there) and its segment."""
        if self.native is None:
            return self._run(pos, jj)
        segments, starts = self.segments, self.starts
        p, noted, segs, big = self.native.hot_run(
            segments.buf, segments.so, segments.lo, segments.po, segments.heads, segments.send,
            pos, jj,
            self.mask, self.low, self.framer.frame_limit)  # fmt: skip
        if p == pos:
            return pos, jj
        if big:
            first = len(starts)
            self.big += [first + k for k in big]
        starts.frombytes(noted)
        self.segs.frombytes(segs)
        return self._ran(p, len(noted) >> 3, jj)

    def _run(self, pos: int, jj: int) -> tuple[int, int]:
        """run, in Python (the reference of _native.hot_run)."""
        segments = self.segments
        buf, so, lo, po, read, send = (segments.buf, segments.so, segments.lo, segments.po,
                                       segments.read, segments.send)  # fmt: skip
        hot_keys, starts, low, equal, filling = (self.keys, self.starts, self.low, self.equal,
                                                 self.filling)  # fmt: skip
        note, note_seg = starts.append, self.segs.append
        last = len(so) - 1
        p = pos
        noted = len(starts)
        limit = self.framer.frame_limit  # (no hot frame changes it)
        j = jj
        seg_end = so[j] + lo[j]
        shift = po[j] - so[j]
        last_size = last_key = -1
        streak = filled = 0  # frames of one size and key; frames each filling its segment
        while True:
            if p + HEADER <= seg_end:
                size, key = _size_key(buf, shift + p)
            elif p + HEADER > send:
                break
            elif p >= seg_end:  # the next segment (they follow each other)
                j = j + 1 if p == seg_end and j < last else bisect_right(so, p, j) - 1
                seg_end = so[j] + lo[j]
                shift = po[j] - so[j]
                continue
            else:  # a header across two segments
                size, key = _size_key(read(p, p + HEADER))
            end = p + 4 + size
            if key in hot_keys and 4 <= size <= low and end <= send:
                note(p)
                note_seg(j)
                if end != seg_end or p + shift != po[j]:
                    filled = 0
                elif filled < FILL_AFTER - 1 or j == last:
                    filled += 1
                else:  # the FILL_AFTER-th frame in a row to fill its segment (SegmentRuns)
                    filled = 0
                    k = filling.follow(j + 1, end)
                    if k > j + 1:  # (segments j + 1 .. k - 1 noted: go on after them)
                        j = k - 1
                        shift = po[j] - so[j]
                        p = seg_end = so[j] + lo[j]
                        last_size = last_key = -1
                        continue
                if size != last_size or key != last_key:
                    last_size, last_key, streak = size, key, 0
                elif streak < FOLLOW_AFTER - 2:
                    streak += 1
                else:  # the FOLLOW_AFTER-th of a kind: more of them may follow (EqualRuns)
                    after = equal.follow(end, size, key, send)
                    streak = 0 if after == end else FOLLOW_AFTER - 2
                    end = after
                    if end >= seg_end:
                        j = bisect_right(so, end, j) - 1 if end < send else last
                        seg_end = so[j] + lo[j]
                        shift = po[j] - so[j]
                p = end
                continue
            if key not in hot_keys or size < 4 or end > send or size > limit:
                break
            self.big.append(len(starts))  # within this limit; LimitCheck learns of it
            note(p)
            note_seg(j)
            p = end
        if p == pos:
            return pos, jj
        return self._ran(p, len(starts) - noted, jj)

    def _ran(self, p: int, count: int, jj: int) -> tuple[int, int]:
        """A run of `count` hot frames up to `p` noted: its place among the events."""
        so = self.segments.so
        self.ends.append(p)  # (a run's frames follow each other: their sizes)
        self.runs.append((len(self.events), count))
        self.events.extend(repeat(None, count))  # their places among the events
        self.framer.offset = p
        return p, bisect_right(so, p - 1, jj) - 1


_masks: dict = {}


def _mask(keys: frozenset) -> bytes:
    """native.hot_mask of these keys, made once."""
    if keys not in _masks:
        _masks[keys] = native.hot_mask(keys)
    return _masks[keys]


class SegmentRuns:
    """Frames each filling one segment exactly, one segment after the other (a small-frame
    capture's PublishConfirms, Credits and Delivers: one frame a TCP segment, of any size).
    At the walk's first question, every segment of the walk is checked at once with numpy
    (from its first bytes as the packet parser read them): which hold one hot frame each (whole,
    4 <= size <= low) and start where the one before ends; each question is then a lookup
    (a question cost ~50 us of numpy calls a batch of segments at a time; the small-frame
    capture asks ~550 times)."""

    __slots__ = ("bad", "fills", "heads", "hot", "lo", "low", "segs", "so", "starts")

    def __init__(self, segments: InOrder, starts: array, segs: array, keys: frozenset,
                 low: int) -> None:  # fmt: skip
        self.so, self.lo = segments.so_a, segments.lo_a
        self.heads = segments.heads  # (each segment's first bytes)
        self.starts, self.segs = starts, segs
        self.hot = np.zeros(1 << 16, dtype=bool)  # by key: a hot frame's?
        self.hot[sorted(keys)] = True
        self.low = low
        self.fills = b""  # (at the first question) a segment holds one hot frame: 1, else 0
        self.bad: array | None = None  # segments that do not go on a run, in order

    def follow(self, j: int, p: int) -> int:
        """From segment j, where stream offset `p` (the last frame's end) should be: note the
        frames of the segments that each hold one hot frame (whole, 4 <= size <= low), each
        segment starting where the last ended; return the first segment that does not."""
        so = self.so
        if j >= len(so):
            return j
        if self.bad is None:
            self._check_all()
        if not self.fills[j] or so[j] != p:
            return j
        bad = self.bad
        k = bisect_right(bad, j)
        end = bad[k] if k < len(bad) else len(so)
        self.starts.frombytes(so[j:end].tobytes())
        self.segs.frombytes(np.arange(j, end, dtype=np.int64).tobytes())
        return end

    def _check_all(self) -> None:
        so, lo = self.so, self.lo
        head = self.heads.view(SEGMENT_HEAD)
        size = head["size"].astype(np.int64)
        fills = ((size + 4 == lo) & (size >= 4) & (size <= self.low)
                 & self.hot[head["key"]])  # fmt: skip
        goes_on = fills.copy()  # (fills, and starts where the segment before ends)
        goes_on[1:] &= so[1:] == so[:-1] + lo[:-1]
        self.fills = fills.view(np.uint8).tobytes()
        self.bad = array("q", np.flatnonzero(~goes_on).astype(np.int64).tobytes())


class EqualRuns:
    """Frames of one size and key one after the other (a client's Publish of one message
    each, a consumer's Credits) checked a batch at a time with numpy, not walked one by one:
    their headers gathered from where their offsets say they are. The batch grows while the
    frames keep coming, and starts small again after a miss."""

    __slots__ = ("batch", "heads", "lo", "po", "read", "segs", "so", "starts")

    def __init__(self, segments: InOrder, heads: np.ndarray, starts: array, segs: array) -> None:
        self.so, self.lo, self.po = segments.so_a, segments.lo_a, segments.po_a
        self.heads = heads  # the block buffer as HEAD_BYTES-wide items (blocks.sliding)
        self.starts, self.segs = starts, segs
        self.read: Any = segments.read  # (a header across two segments)
        self.batch = 8

    def follow(self, p: int, size: int, key: int, send: int) -> int:
        """From stream offset `p`, where a frame like the last might start: note those that
        do (whole before `send`) and return where they end."""
        step = 4 + size
        while True:
            n = min(self.batch, (send - p) // step)
            if n <= 0:
                return p
            at = p + step * np.arange(n, dtype=np.int64)
            seg = np.searchsorted(self.so, at, side="right") - 1
            within = at - self.so[seg]
            head = self.heads[self.po[seg] + within].view(FRAME_HEAD)
            same = (head["size"] == size) & (head["key"] == key)
            for k in np.flatnonzero(within + HEADER > self.lo[seg]).tolist():  # (few)
                a = int(at[k])
                same[k] = _size_key(self.read(a, a + HEADER)) == (size, key)
            m = n if same.all() else int(np.argmin(same))
            if m:
                self.starts.frombytes(at[:m].tobytes())
                self.segs.frombytes(seg[:m].astype(np.int64).tobytes())
                p += m * step
            if m < n:
                self.batch = 8
                return p
            self.batch = min(self.batch * 4, 4096)
