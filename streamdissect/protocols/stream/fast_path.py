"""The RabbitMQ Stream fast path in the bulk engine's frame walk (framing.walk.FastPath).

Per direction's walk: small hot frames (Credit, PublishConfirm, Heartbeat) and big Deliver
heads made into records straight from the walk by the codec's fast paths (a whole frame is
exactly what decode_frame would hand them, so the record is the same, without three calls of
checks per frame; anything a fast path declines goes the usual way, which explains it);
without message lists, Publish frames read together after the walk (publish_batch); in
columns mode, the hot frames noted (hot_walk) and decoded as columns at the block's end
(hot_block), in their places among the block's events (hot.place).
"""

from __future__ import annotations

from typing import Any

from streamdissect.capture.blocks import sliding
from streamdissect.framing.framer import Framer
from streamdissect.framing.walk import BlockEvents, Walk
from streamdissect.protocols.stream import hot
from streamdissect.protocols.stream.codec import FAST_PATHS, decode_deliver_head
from streamdissect.protocols.stream.hot_block import PATCH, BufferViews, HotBlock
from streamdissect.protocols.stream.hot_walk import HotWalk
from streamdissect.protocols.stream.publish_batch import publishes
from streamdissect.protocols.stream.records import Malformed
from streamdissect.tcp.vectorized import InOrder

_DIRECT = {key: FAST_PATHS[key] for key in (hot.CONFIRM_KEY, hot.CREDIT_KEY, hot.HEARTBEAT_KEY)}
_DELIVER_HEAD = FAST_PATHS[hot.DELIVER_KEY]  # (frame, size, version, head=True): a Deliver's head
_PUBLISH = frozenset((hot.PUBLISH_KEY,))


def record(key: int, frame: bytes, size: int, version: int) -> Any:
    """A small hot frame's record by its codec fast path (_DIRECT), or None: decode_frame
    then makes the record, or the Malformed one that explains it."""
    fast = _DIRECT.get(key)
    if fast is None:
        return None
    try:
        return fast(frame, size, version)
    except Exception:  # noqa: BLE001 - decode_frame makes the Malformed record
        return None


def head_record(head: bytes, size: int, version: int) -> Any:
    """A Deliver's record from its head (the header read from the frame: decode_deliver_head's
    checks hold), or None when it is malformed (the framer reports it with its record)."""
    found = _DELIVER_HEAD(head, size, version, True) or decode_deliver_head(head, size)
    return None if found.__class__ is Malformed else found


class StreamFastPath:
    """The fast path of one bulk run (one file): its options from the dissection state, and
    the block being walked (its buffer, the hot frames noted)."""

    ROOM = PATCH  # bytes a block buffer keeps after its data (and PAD) for copies

    def __init__(self, state: Any, patch_start: int) -> None:
        """`patch_start`: where that room starts in a block buffer."""
        self.columns = state.columns  # True, "lines" (the frames jsonl) or False
        self.heads = not state.publish_messages  # Publish read together after the walk
        self.hot_keys = hot.HOT_KEYS if self.heads else hot.HOT_KEYS - _PUBLISH
        self.hot = HotBlock(patch_start, state.deliver_keep_limit, self.columns == "lines")

    @staticmethod
    def views(memory: Any, at: int, size: int) -> BufferViews:
        """What the readers gather from a block buffer memory[at : at + size]."""
        return BufferViews(sliding(memory, at, size, hot.HEAD_BYTES),
                           sliding(memory, at, size, hot.MESSAGE.itemsize))  # fmt: skip

    def use(self, buf: Any, mv: memoryview, views: BufferViews) -> None:
        """The buffer of the next block."""
        self.hot.use(buf, mv, views)

    def direction(self, framer: Framer, segments: InOrder, w: Walk, pos: int) -> StreamDirection:
        return StreamDirection(self, framer, segments, w, pos)

    def mark(self) -> int:
        """Where the block's notes are (to undo a connection's walk)."""
        return len(self.hot.notes)

    def undo(self, mark: int) -> None:
        del self.hot.notes[mark:]

    def end_block(self, events: BlockEvents) -> list:
        """The block's events in order, its hot frames as HotFrames among them (a declined
        one's record goes to its place)."""
        if not self.hot.notes:
            return events.ordered()
        placed = self.hot.decode(events)
        items = events.sorted_items()
        if placed is None:
            return [ev for _, _, ev in items]
        return hot.place(*placed, items, None if self.columns == "lines" else events.frame_class)


class StreamDirection:
    """The fast path of one direction's walk of a block (framing.walk.FastPath)."""

    __slots__ = ("deferred", "deferred_items", "fast", "framer", "run", "segments", "w", "walk")
    record = staticmethod(record)
    head_record = staticmethod(head_record)

    def __init__(self, fast: StreamFastPath, framer: Framer, segments: InOrder, w: Walk,
                 pos: int) -> None:  # fmt: skip
        self.fast, self.framer, self.segments, self.w = fast, framer, segments, w
        self.deferred = _PUBLISH if fast.heads else frozenset()
        self.deferred_items: list = []
        self.walk = None
        if fast.columns and getattr(framer.emit, "lane", None) is not None and pos < segments.send:
            self.walk = HotWalk(fast.hot_keys, segments, framer, w, fast.hot.views.frame_heads)
        self.run = None if self.walk is None else self.walk.run

    def finish(self) -> None:
        hot_block = self.fast.hot
        if self.deferred_items:
            publishes(self.framer, self.deferred_items, self.segments, hot_block.views,
                      self.w.events)  # fmt: skip
        if self.walk is not None and self.walk.starts:
            hot_block.note(self.walk, self.segments, self.w.check)

