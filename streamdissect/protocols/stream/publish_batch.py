"""Publish frames of one direction's walk of a block, read together without copying their
messages (the bulk engine without message lists, `publish_messages=False`).

v1 frames whose messages all have one simple-entry size are checked and their publishing
ids read with numpy gathers; any other goes through the codec. Each frame's record goes to
the place the walk kept for it.
"""

from __future__ import annotations

from operator import itemgetter
from typing import NamedTuple

import numpy as np

from streamdissect.framing.framer import Framer
from streamdissect.framing.walk import BlockEvents
from streamdissect.protocols.stream import hot, layouts
from streamdissect.protocols.stream.hot_block import BufferViews
from streamdissect.protocols.stream.records import record_class
from streamdissect.tcp.vectorized import InOrder

PUBLISH = record_class("Publish")
PUBLISH_HEAD = layouts.PUBLISH.size
_PUBLISH_HEAD = layouts.PUBLISH.dtype(hot.HEAD_BYTES)  # (viewing HEAD_BYTES-wide items)
_publish_head = layouts.PUBLISH.struct().unpack_from
_message_head = layouts.MESSAGE.struct().unpack
_MESSAGE = hot.MESSAGE


def publishes(framer: Framer, items: list, segments: InOrder, views: BufferViews,
              events: BlockEvents) -> None:  # fmt: skip
    """The walk's Publish frames (`items`: start, end, size, ts_ns, row, event slot, buffer
    position, end of the segment it starts in), each one's record in its slot."""
    n = len(items)
    pos, size, at, seg_end = (np.fromiter(map(itemgetter(k), items), np.int64, n)
                              for k in (0, 2, 6, 7))  # fmt: skip
    # The heads (up to the first message's entry word), read for all at once where the
    # segment holds them, one by one where they cross into the next.
    h = views.frame_heads[at].view(_PUBLISH_HEAD)
    version, publisher = h["version"].astype(np.int64), h["publisher_id"].astype(np.int64)
    count, word = h["count"].astype(np.int64), h["entry_word"].astype(np.int64)
    whole = size + 4 >= PUBLISH_HEAD
    for k in np.flatnonzero(whole & (pos + PUBLISH_HEAD > seg_end)).tolist():
        a = int(pos[k])
        _, _, version[k], publisher[k], count[k], _, word[k] = _publish_head(
            segments.read(a, a + PUBLISH_HEAD), 0)
    stride = _MESSAGE.itemsize + word
    ok = (whole & (version == 1) & (count > 0) & (word < 0x80000000)
          & (hot.FIRST_ID + count * stride == 4 + size))  # fmt: skip
    ok_frames = np.flatnonzero(ok)
    messages = _Messages(count[ok_frames], stride[ok_frames], pos[ok_frames] + hot.FIRST_ID)
    ids_of = messages.ids(ok_frames.tolist(), segments, views)
    emit = framer.emit
    for k, (item, pid, n_ids) in enumerate(zip(items, publisher.tolist(), count.tolist())):
        start, end, frame_size, ts, row, slot = item[:6]
        ids = ids_of.get(k)
        if ids is not None:
            emit(start, ts, PUBLISH(hot.PUBLISH_KEY, 1, frame_size, None, None, False, pid, None,
                                    ids, n_ids))  # fmt: skip
        else:
            framer.decode_whole(start, ts, segments.read(start, end), frame_size)
        events.place_out(row, slot)


class _Messages(NamedTuple):
    """The messages of some v1 Publish frames as their heads say: how many, how far apart
    (all alike), where the first starts (stream offset)."""

    counts: np.ndarray
    strides: np.ndarray
    firsts: np.ndarray

    def ids(self, frames: list[int], segments: InOrder,
            views: BufferViews) -> dict[int, list | range]:  # fmt: skip
        """The publishing ids of each frame (number in `frames` -> ids) whose messages are
        all simple entries of the size the first one says; a range when they go up one by
        one, as emit makes of such a list: no Python int per message."""
        counts, strides = self.counts, self.strides
        ids_of: dict[int, list | range] = {}
        if not len(counts):
            return ids_of
        total = int(counts.sum())
        frame_of = np.repeat(np.arange(len(counts)), counts)
        starts_of = np.cumsum(counts) - counts
        index = np.arange(total, dtype=np.int64) - starts_of[frame_of]
        at = self.firsts[frame_of] + index * strides[frame_of]  # stream offsets of messages
        ids, words = _message_heads(at, segments, views)
        bad_frames = set(frame_of[words + _MESSAGE.itemsize != strides[frame_of]].tolist())
        steps = (ids[1:] - ids[:-1] != 1) | (ids[1:] < ids[:-1])  # (u64: no wrap)
        broken = set(frame_of[1:][steps & (frame_of[1:] == frame_of[:-1])].tolist())
        firsts_of = ids[starts_of].tolist()
        starts_list = starts_of.tolist()
        for f, (k, n_ids) in enumerate(zip(frames, counts.tolist())):
            if f in bad_frames:
                continue
            if f in broken:
                first = starts_list[f]
                ids_of[k] = ids[first : first + n_ids].tolist()
            else:
                ids_of[k] = range(firsts_of[f], firsts_of[f] + n_ids)
        return ids_of


def _message_heads(at: np.ndarray, segments: InOrder, views: BufferViews) -> tuple:
    """(publishing ids, entry words) of the messages at stream offsets `at`: gathered where
    a segment holds them, read one by one where they are cut by a segment boundary."""
    so_a, lo_a, po_a = segments.so_a, segments.lo_a, segments.po_a
    seg = np.searchsorted(so_a, at, side="right") - 1
    within = at - so_a[seg]
    inside = within + _MESSAGE.itemsize <= lo_a[seg]
    bufpos = po_a[seg] + within
    bufpos[~inside] = 0
    fields = views.messages[bufpos].view(_MESSAGE)  # (id, entry word) of each message
    ids = fields["publishing_id"].astype(np.uint64)
    words = fields["entry_word"].astype(np.int64)
    for k in np.flatnonzero(~inside).tolist():  # (few)
        a = int(at[k])
        ids[k], words[k] = _message_head(segments.read(a, a + _MESSAGE.itemsize))
    return ids, words
