"""Columns mode: a block's hot frames, decoded together at the block's end (hot.decode).

Each walk's noted hot frames (hot_walk) become a HotNote: where their bytes are in the
block buffer, the row and time of the packet that completes each, their event slots. A
frame that crosses segments is copied to the patch area after the block's data (small ones
all at once; of a bigger Deliver its head, its chunk's CRC computed over the segments; of a
bigger Publish its head, its messages read where they are); past the area's room it is
kept aside for the record path. A frame hot.decode declines is decoded as a record, in its
place, which explains it.
"""

from __future__ import annotations

import zlib
from typing import Any, NamedTuple

import numpy as np

from streamdissect.framing.framer import DELIVER_HEAD, DELIVER_KEY, HEADER, Framer
from streamdissect.framing.walk import BlockEvents, LimitCheck
from streamdissect.protocols.stream import hot, hot_native, layouts, native
from streamdissect.protocols.stream.hot_walk import HotWalk
from streamdissect.slotted import Slotted
from streamdissect.tcp.vectorized import InOrder

_header = layouts.FRAME.struct().unpack_from
PATCH = 4 << 20  # room after a block for copies of the hot frames that cross segments
SMALL_COPY = 512  # crossing hot frames up to this size are copied whole, all at once
PUBLISH_HEAD = layouts.PUBLISH.size
_PUBLISH_HEAD = layouts.PUBLISH.dtype(hot.HEAD_BYTES)  # (viewing HEAD_BYTES-wide items)
_FRAME_HEAD = layouts.FRAME.dtype(hot.HEAD_BYTES)
_MESSAGE = hot.MESSAGE.itemsize


class BufferViews(NamedTuple):
    """A block buffer as items of the widths the readers gather (blocks.sliding): frame
    heads (HEAD_BYTES) and Publish message heads (id, entry word)."""

    frame_heads: np.ndarray
    messages: np.ndarray


class HotNote(Slotted):
    """The hot frames of one walk, until the block's end: stream offsets, sizes, positions
    in the block buffer (crossing ones: in its patch area), rows, times, event slots."""

    __slots__ = field_names = ("framer", "side", "offsets", "sizes", "at", "spilled", "crcs",
                               "messages", "row", "ts", "slot", "read")  # fmt: skip
    framer: Framer
    side: int
    offsets: np.ndarray
    sizes: np.ndarray
    at: np.ndarray
    spilled: dict  # frame number -> its bytes, past the patch area's room
    crcs: dict  # frame number -> CRC-32 of a crossing Deliver's chunk data
    messages: hot.MessagePositions  # where crossing Publish frames' messages are
    row: np.ndarray
    ts: np.ndarray
    slot: np.ndarray
    read: Any  # (a, b) -> the walk's stream bytes [a, b), for a declined crossing frame

    def __init__(self, framer: Framer, side: int, offsets: np.ndarray, sizes: np.ndarray,
                 at: np.ndarray, spilled: dict, crcs: dict, messages: hot.MessagePositions,
                 row: np.ndarray, ts: np.ndarray, slot: np.ndarray, read: Any) -> None:  # fmt: skip
        self.framer = framer
        self.side = side
        self.offsets = offsets
        self.sizes = sizes
        self.at = at
        self.spilled = spilled
        self.crcs = crcs
        self.messages = messages
        self.row = row
        self.ts = ts
        self.slot = slot
        self.read = read


class HotBlock:
    """The hot frames of a block: noted walk by walk, decoded at its end."""

    def __init__(self, patch_start: int, keep_limit: int | None, whole_chunk: bool) -> None:
        self.patch_start = patch_start  # where the patch area starts in a block buffer
        self.patch_used = 0
        self.keep_limit = keep_limit  # (the framers': Deliver CRCs are checked up to it)
        self.whole_chunk = whole_chunk  # (the frames jsonl: a Deliver's whole chunk header)
        self.notes: list[HotNote] = []
        self.buf: Any = None
        self.mv: Any = None
        self.views: Any = None

    def use(self, buf: Any, mv: memoryview, views: BufferViews) -> None:
        """The block buffer of the next block."""
        self.buf, self.mv, self.views = buf, mv, views

    def note(self, walk: HotWalk, segments: InOrder, check: LimitCheck) -> None:
        """The hot frames a walk noted: where their bytes are (the block buffer, or a copy
        for one that crosses segments), the row and time of the packet that completes each,
        their event slots."""
        so_a, lo_a, po_a = segments.so_a, segments.lo_a, segments.po_a
        offsets = np.frombuffer(walk.starts, dtype=np.int64)
        ends = np.empty_like(offsets)
        ends[:-1] = offsets[1:]
        counts = np.array([n for _, n in walk.runs], dtype=np.int64)
        ends[np.cumsum(counts) - 1] = walk.ends  # (each run's last frame)
        sizes = ends - offsets - 4
        seg = np.frombuffer(walk.segs, dtype=np.int64)  # (the segment each starts in)
        at = po_a[seg] + offsets - so_a[seg]
        note = HotNote(walk.framer, segments.side, offsets.copy(), sizes, at, {}, {}, hot.NO_MESSAGES,
                       None, None, None, segments.read)  # fmt: skip
        crossing = np.flatnonzero(ends > so_a[seg] + lo_a[seg])
        last = seg  # the segment of each frame's last byte: its first's, but for crossing ones
        if len(crossing):
            self._crossing(note, crossing, ends, seg, segments)
            last = seg.copy()
            last[crossing] = np.searchsorted(so_a, ends[crossing] - 1, side="right") - 1
        note.row, note.ts = segments.rows[last], segments.times[last]
        note.slot = np.concatenate([np.arange(s, s + n, dtype=np.int64) for s, n in walk.runs])
        if walk.big:  # (LimitCheck: the row of the packet that tells the size)
            big = np.asarray(walk.big, dtype=np.int64)
            told = segments.rows[np.searchsorted(so_a, offsets[big] + 3, side="right") - 1]
            check.big_runs.append((told, offsets[big], segments.side, sizes[big]))
        self.notes.append(note)

    def _crossing(self, note: HotNote, crossing: np.ndarray, ends: np.ndarray, seg: np.ndarray,
                  segments: InOrder) -> None:  # fmt: skip
        """The bytes of the frames that cross segments copied to the patch area: small ones
        all at once, whole (_patch); of a bigger Deliver its head, its chunk's CRC computed
        over the segments here; of a bigger Publish its head, its messages read where they
        are (_publish_messages). Past the area's room, kept aside for the record path."""
        offsets, at, read = note.offsets, note.at, segments.read
        keep_limit = note.framer.deliver_keep_limit
        wanted, keys = self._wanted_bytes(crossing, note, ends, seg, segments)
        small = np.flatnonzero(wanted <= SMALL_COPY)
        room = PATCH - self.patch_used - hot.PAD
        small = small[np.cumsum(wanted[small]) <= room]
        if len(small):
            frames = crossing[small]
            at[frames] = self._patch(offsets[frames], offsets[frames] + wanted[small], segments)
        big_publish = np.flatnonzero((keys == hot.PUBLISH_KEY) & (wanted > SMALL_COPY))
        if len(big_publish) and self.patch_used + PUBLISH_HEAD * len(big_publish) < room:
            done = self._publish_messages(crossing[big_publish], note, ends, segments)
            # (disjoint: no np.union1d, whose np.unique imports numpy.ma, ~0.015 s a run)
            small = np.sort(np.concatenate((small, big_publish[done])))
        crossing = np.delete(crossing, small)
        mv = self.mv
        for k, a, b in zip(crossing.tolist(), offsets[crossing].tolist(),
                           ends[crossing].tolist()):  # fmt: skip
            head = read(a, min(b, a + DELIVER_HEAD))
            key = _header(head)[1]
            if key == DELIVER_KEY and len(head) >= hot.HEAD_BYTES:
                if keep_limit is None or b - a - 4 <= keep_limit:
                    note.crcs[k] = self._chunk_crc(head, a, b, segments)
                copy = head
            else:
                copy = read(a, b)
            if self.patch_used + len(copy) + hot.PAD > PATCH:
                note.spilled[k] = read(a, b)  # (the record path takes the whole frame)
                continue
            where = self.patch_start + self.patch_used
            mv[where : where + len(copy)] = copy
            at[k] = where
            self.patch_used += len(copy)

    def _publish_messages(self, frames: np.ndarray, note: HotNote, ends: np.ndarray,
                          segments: InOrder) -> np.ndarray:  # fmt: skip
        """Big Publish frames across segments, read where they are: each one's head copied
        to the patch area (`note.at`), and, when it is a v1 Publish of simple entries of one
        size as its head says, where the (id, entry word) of each of its messages is (one
        cut by a segment boundary: copied to the patch area too) in `note.messages`. Which
        of `frames` were done so (the others are copied whole)."""
        so_a, lo_a, po_a = segments.so_a, segments.lo_a, segments.po_a
        starts = note.offsets[frames]
        lengths = ends[frames] - starts
        heads_at = self._patch(starts, starts + PUBLISH_HEAD, segments)
        h = self.views.frame_heads[heads_at].view(_PUBLISH_HEAD)
        count, word = h["count"].astype(np.int64), h["entry_word"].astype(np.int64)
        stride = _MESSAGE + word
        done = ((h["version"] == 1) & (count > 0) & (word < 0x80000000)
                & (hot.FIRST_ID + count * stride == lengths))  # fmt: skip
        if not done.any():
            return done
        mine = np.flatnonzero(done)
        count, stride = count[mine], stride[mine]
        message = hot.positions(starts[mine] + hot.FIRST_ID, count, stride)  # stream offsets
        seg = np.searchsorted(so_a, message, side="right") - 1
        where = po_a[seg] + message - so_a[seg]
        cut = np.flatnonzero(message + _MESSAGE > so_a[seg] + lo_a[seg])
        if len(cut):
            where[cut] = self._patch(message[cut], message[cut] + _MESSAGE, segments)
        note.at[frames[mine]] = heads_at[mine]
        note.messages = hot.MessagePositions(frames[mine], count, where)
        return done

    def _wanted_bytes(self, crossing: np.ndarray, note: HotNote, ends: np.ndarray,
                      seg: np.ndarray, segments: InOrder) -> tuple:  # fmt: skip
        """How many bytes of each crossing frame hot.decode reads (all of it, but a Deliver's
        head when its data is not kept, above keep_limit), and their keys; a frame whose
        header crosses too counts as big (the per-frame copy reads it), its key -1."""
        so_a, lo_a = segments.so_a, segments.lo_a
        offsets, keep_limit = note.offsets, note.framer.deliver_keep_limit
        lengths = ends[crossing] - offsets[crossing]
        header_inside = offsets[crossing] + HEADER <= so_a[seg[crossing]] + lo_a[seg[crossing]]
        wanted = np.where(header_inside, lengths, PATCH)
        at = np.where(header_inside, note.at[crossing], 0)
        keys = np.where(header_inside, self.views.frame_heads[at].view(_FRAME_HEAD)["key"]
                        .astype(np.int64), -1)  # fmt: skip
        if keep_limit is not None:
            head_only = (keys == DELIVER_KEY) & (lengths - 4 > keep_limit)
            wanted[head_only] = np.minimum(lengths[head_only], DELIVER_HEAD)
        return wanted, keys

    def _patch(self, starts: np.ndarray, ends: np.ndarray, segments: InOrder) -> np.ndarray:
        """The stream bytes [starts[i], ends[i]) of the walk, copied one after the other to
        the patch area with one gather (each range cut where its segments are); where each
        copy is."""
        so_a, lo_a, po_a = segments.so_a, segments.lo_a, segments.po_a
        lengths = ends - starts
        before = np.cumsum(lengths) - lengths  # (where each copy goes in the patch)
        first = self.patch_start + self.patch_used
        compiled = native.loaded
        if compiled is not None:  # (the same copies, range by range)
            compiled.copy_ranges(self.mv, segments.so, segments.lo, segments.po,
                                 np.ascontiguousarray(starts, dtype=np.int64),
                                 np.ascontiguousarray(ends, dtype=np.int64), first)  # fmt: skip
            self.patch_used += int(lengths.sum())
            return first + before
        first_seg = np.searchsorted(so_a, starts, side="right") - 1
        last_seg = np.searchsorted(so_a, ends - 1, side="right") - 1
        pieces = last_seg - first_seg + 1
        frame = np.repeat(np.arange(len(starts)), pieces)
        seg = first_seg[frame] + np.arange(len(frame)) - np.repeat(np.cumsum(pieces) - pieces,
                                                                   pieces)  # fmt: skip
        lo = np.maximum(starts[frame], so_a[seg])
        hi = np.minimum(ends[frame], so_a[seg] + lo_a[seg])
        size = hi - lo
        source = po_a[seg] + lo - so_a[seg]  # buffer position of each piece
        target = before[frame] + lo - starts[frame]  # its place in the patch
        total = int(lengths.sum())
        index = np.repeat(source - target, size) + np.arange(total, dtype=np.int64)
        patch = np.frombuffer(self.mv[first : first + total], dtype=np.uint8)
        patch[:] = np.frombuffer(self.buf, dtype=np.uint8)[index]
        self.patch_used += total
        return first + before

    def _chunk_crc(self, head: bytes, a: int, b: int, segments: InOrder) -> int:
        """CRC-32 of the chunk data of the Deliver at stream offsets [a, b), over the
        segments that hold it (no copy); hot.decode compares it with the header's."""
        need, layout = hot.DELIVER_HEADS.get(_header(head)[2], (None, None))
        if need is None:
            return 0  # (no v1/v2 Deliver: declined, the record path explains it)
        length = int(np.frombuffer(head, layout, count=1)["data_length"][0])
        so_a, lo_a, po_a = segments.so_a, segments.lo_a, segments.po_a
        lo, hi = a + need, min(b, a + need + length)
        crc = 0
        j = int(np.searchsorted(so_a, lo, side="right")) - 1
        mv = self.mv
        while lo < hi:
            seg_end = int(so_a[j] + lo_a[j])
            upto = min(hi, seg_end)
            at = int(po_a[j]) + lo - int(so_a[j])
            crc = zlib.crc32(mv[at : at + upto - lo], crc)
            lo = upto
            j += 1
        return crc

    def decode(self, events: BlockEvents) -> tuple[hot.HotFrames, np.ndarray] | None:
        """The block's hot frames decoded at once from the block buffer (crossing frames:
        from its patch area); a frame that fails a check, or was spilled, is decoded as a
        record, in its place. The accepted ones as one HotFrames in the block's order and
        their order keys (hot.in_order), which hot.place merges with the events; None when
        none is accepted."""
        notes, self.notes = self.notes, []
        self.patch_used = 0
        data = np.frombuffer(self.buf, dtype=np.uint8)
        starts = np.concatenate([note.at for note in notes])
        for note in notes:  # (decoded as records below)
            for k in note.spilled:
                note.at[k] = 0
        at = np.concatenate([note.at for note in notes])
        crcs, firsts, first = {}, [], 0
        for note in notes:
            crcs.update((first + k, crc) for k, crc in note.crcs.items())
            firsts.append(first)
            first += len(note.at)
        messages = hot.MessagePositions.joined(
            [(a, note.messages) for a, note in zip(firsts, notes)])  # fmt: skip
        compiled = native.loaded
        if compiled is not None:
            return self._decoded_in_order(compiled, notes, data, starts, at, crcs, messages,
                                          events)  # fmt: skip
        columns = hot.decode(data, at, self.keep_limit, crcs, self.whole_chunk, messages)
        chunks = []
        first = 0
        for note, good in zip(notes, self._kept(notes, columns.accepted, data, starts, events)):
            if good.any():
                _, connection, direction = note.framer.emit.lane
                chunks.append(hot.HotChunk(note.row[good], note.slot[good], note.ts[good],
                                           note.offsets[good], connection,
                                           hot.DIRECTIONS.index(direction),
                                           hot.select(columns, first, good)))  # fmt: skip
            first += len(note.at)
        return hot.in_order(chunks) if chunks else None

    @staticmethod
    def _kept(notes: list[HotNote], accepted: np.ndarray, data: np.ndarray, starts: np.ndarray,
              events: BlockEvents) -> list[np.ndarray]:  # fmt: skip
        """Each note's frames accepted (`accepted`: of all the notes' frames, in their order)
        and not spilled; the others decoded as records in their places, each note's kept
        frames counted on its lane."""
        kept_of = []
        first = 0
        for note in notes:
            n = len(note.at)
            good = accepted[first : first + n].copy()
            for k in note.spilled:
                good[k] = False
            frames, _, _ = note.framer.emit.lane
            for k in np.flatnonzero(~good).tolist():
                _record(note, k, data[int(starts[first + k]):], events)
            frames[note.side] += int(good.sum())
            kept_of.append(good)
            first += n
        return kept_of

    def _decoded_in_order(self, compiled: Any, notes: list[HotNote], data: np.ndarray,
                          starts: np.ndarray, at: np.ndarray, crcs: dict,
                          messages: hot.MessagePositions,
                          events: BlockEvents) -> tuple | None:  # fmt: skip
        """decode by the compiled loop, the frames taken in the block's order (their packet
        row, then event slot: what hot.in_order sorts them by) so that its columns come out
        in that order, not gathered again: hot.in_order's result (a HotFrames and its order
        keys, or None) for the chunks the Python decode makes (the ids' pool in another
        order: each frame's ids the same)."""
        order_key = hot.order_keys(np.concatenate([note.row for note in notes]),
                                   np.concatenate([note.slot for note in notes]))  # fmt: skip
        order = np.argsort(order_key, kind="stable")
        placed = np.empty_like(order)  # (each frame's place in that order)
        placed[order] = np.arange(len(order))
        columns = hot_native.decode(
            compiled, data, at.take(order), self.keep_limit,
            {int(placed[k]): crc for k, crc in crcs.items()}, self.whole_chunk,
            messages.renumbered(placed))  # fmt: skip
        kept_of = self._kept(notes, columns.accepted.take(placed), data, starts, events)
        names: dict[str, int] = {}  # (numbered in the notes' order, as hot.in_order does)
        numbers, directions = [], []
        for note, good in zip(notes, kept_of):
            _, connection, direction = note.framer.emit.lane
            number = names.setdefault(connection, len(names)) if good.any() else -1
            numbers.append(np.full(len(good), number, dtype=np.int64))
            directions.append(np.full(len(good), hot.DIRECTIONS.index(direction), dtype=np.int8))
        if not names:
            return None
        keep = np.concatenate(kept_of).take(order)
        rows = order if keep.all() else order[keep]

        def of_notes(parts: list) -> np.ndarray:
            return np.concatenate(parts).take(rows)

        c = columns if keep.all() else hot.select(columns, 0, keep)
        every = hot.HotFrames(
            of_notes([note.ts for note in notes]), of_notes(numbers), list(names),
            of_notes(directions), of_notes([note.offsets for note in notes]), c.key, c.version,
            c.size, c.fields, c.id_counts, c.id_starts, c.id_values, c.crc)  # fmt: skip
        return every, order_key.take(rows)


def _record(note: HotNote, k: int, data: np.ndarray, events: BlockEvents) -> None:
    """A hot frame hot.decode declined (or spilled), decoded as a record in its place (its
    bytes from data[0]): a big Deliver from its head, as the framer keeps it."""
    framer, size = note.framer, int(note.sizes[k])
    offset, ts = int(note.offsets[k]), int(note.ts[k])
    frame = note.spilled.get(k)
    if frame is None:  # (a crossing Deliver's or Publish's copy is its head)
        frame = data[: 4 + size].tobytes()
        if k in note.crcs or note.messages.holds(k):
            frame = note.read(offset, offset + 4 + size)
    keep_limit = framer.deliver_keep_limit
    if (keep_limit is not None and size > keep_limit
            and _header(frame)[1] == DELIVER_KEY):  # fmt: skip
        framer.emit_head(offset, ts, frame[: min(4 + size, DELIVER_HEAD)], size)
    else:
        framer.decode_whole(offset, ts, frame, size)
    events.place_out(int(note.row[k]), int(note.slot[k]))
