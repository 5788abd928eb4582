"""Per-direction framer of a length-prefixed protocol: ordered stream bytes in, decoded
frames out (I/O-free).

A frame is `size:u32` (the bytes after it), then at least 4 bytes that say what the frame is
(HEADER: the bytes the framer reads before judging a frame), then the rest. `Framer` cuts a
direction's bytes into frames and keeps sync; a protocol subclasses it with its codec
(protocols/stream/framing.py: StreamFramer): how a frame is decoded (`_decode`,
`_emit_head`), which kind of frame is kept as its head only when big (`heads_only`), and
what a plausible frame start is after a gap (`frame_starts`, `plausible`). The framer is fed
by the TCP reassembler (see tcp.StreamSink): `data()` for captured bytes, `missing()` for
bytes that were on the wire but not in the capture (snaplen, gaps), `desync()` when the
stream starts in the middle.

Limits (each one hit is an anomaly, never silence):
- `max_frame` (`--max-frame`, default 8 MiB): a size field above it is taken as garbage:
  anomaly `frame_too_large`, then resync.
- the negotiated frame max (the protocol tells it, `negotiated_frame_max`; 0 means none): a
  larger frame is still framed (sync is kept), reported as anomaly `frame_too_large`, and,
  unless `max_frame` was given explicitly (`fixed_max_frame`), only its first HEAD_KEPT bytes
  are kept: the record is decoded from them (`truncated=True`). A kind of frame the protocol
  keeps as its head (`heads_only`) follows `deliver_keep_limit` instead.

Memory: a frame is buffered only up to its own size, never beyond those limits. Big frames of
the kind `heads_only` names (the Stream's Deliver) are counted, not kept: only their first
HEAD_KEPT bytes are, so a 1 MiB chunk spanning 20 segments is never concatenated. Every other
frame is kept whole, because its fields need the whole body. Pass `deliver_keep_limit=None`
to keep every frame whole.

Losing sync (a stream starting mid-way, missing bytes where a frame header should be, an
absurd size) switches to resync: the framer looks for a plausible frame start (the
protocol's `frame_starts` and `plausible`) and reports what it skipped.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import ClassVar

DEFAULT_MAX_FRAME = 8 * 1024 * 1024
DELIVER_KEEP_LIMIT = 64 * 1024  # default of `deliver_keep_limit`
# A negotiated frame max below this is not taken as a buffering limit (no client asks for
# less; a hostile Tune must not make every later frame head-only).
MIN_NEGOTIATED_FRAME_MAX = 1024
HEADER = 8
# The Stream's, still taken from here by engine/bulk.py until its split takes them from
# protocols/stream/framing.py (issue 23): they then move there.
DELIVER_KEY = 0x0008
DELIVER_HEAD = 256  # v2 prefix (17) + chunk header (48) + room for the codec to look ahead

_u32 = struct.Struct(">I").unpack_from

# (stream offset of the frame, ts_ns of the packet completing it, record)
Emit = Callable[[int, int, object], None]
# (kind, ts_ns, stream offset, length, detail)
Report = Callable[[str, int, int, int, str], None]

YES, NO, WAIT = 1, 0, 2


class Framer:
    """The length-prefixed framing of one direction; a protocol's subclass gives the rest
    (the methods and class attributes below that say "the protocol's")."""

    # The protocol's: bytes kept of a frame kept as its head (big, or above the negotiated
    # max), and the bytes of a frame that say whether `heads_only` applies.
    HEAD_KEPT: ClassVar[int]
    KIND_BYTES: ClassVar[int] = HEADER

    __slots__ = (
        "cur_cut",
        "cur_have",
        "cur_head_only",
        "cur_keep",
        "cur_kept",
        "cur_parts",
        "cur_start",
        "cur_total",
        "deliver_keep_limit",
        "emit",
        "fixed_max_frame",
        "frame_limit",
        "max_frame",
        "negotiated",
        "offset",
        "rbuf",
        "rbuf_start",
        "rbuf_ts",
        "report",
        "resync_max",
        "scan_from",
        "skipped",
        "synced",
    )

    def __init__(
        self,
        emit: Emit,
        report: Report,
        max_frame: int = DEFAULT_MAX_FRAME,
        deliver_keep_limit: int | None = DELIVER_KEEP_LIMIT,
        fixed_max_frame: bool = False,
    ) -> None:
        self.emit = emit
        self.report = report
        self.max_frame = max_frame  # a frame claiming more is absurd
        self.fixed_max_frame = fixed_max_frame  # given by the user: kept whole up to it
        self.negotiated: int | None = None  # the protocol's frame max (size field included)
        # A size above this needs a look: above max_frame (absurd) or the negotiated max.
        self.frame_limit = max_frame
        self.resync_max = max_frame  # plausibility bound; the negotiated frame_max once seen
        self.deliver_keep_limit = deliver_keep_limit
        self.offset = 0  # stream offset of the next byte fed
        self.synced = True
        self._reset_frame()
        self.rbuf = bytearray()  # unsynced bytes, from stream offset rbuf_start
        self.rbuf_start = 0
        self.rbuf_ts = 0  # the time of the packet that brought rbuf's last bytes
        self.skipped = 0  # bytes passed over since sync was lost
        self.scan_from = 0

    def _reset_frame(self) -> None:
        self.cur_start = -1  # -1: at a frame boundary
        self.cur_total = 0  # 4 + size once the size field is known
        self.cur_keep = HEADER  # bytes to keep of this frame
        self.cur_parts: list[bytes] = []
        self.cur_kept = 0
        self.cur_have = 0  # bytes of this frame seen so far, captured or missing
        self.cur_cut = False  # some of its bytes are missing
        # decoded from its first bytes (_emit_head), as data() does; None: not known yet
        self.cur_head_only: bool | None = False

    def negotiated_frame_max(self, frame_max: int) -> None:
        if frame_max > 0:
            self.resync_max = min(frame_max, self.max_frame)
        if frame_max >= MIN_NEGOTIATED_FRAME_MAX:
            self.negotiated = frame_max
            self.frame_limit = min(frame_max - 4, self.max_frame)
        else:
            self.negotiated = None
            self.frame_limit = self.max_frame

    # --- sink interface --------------------------------------------------------------

    def desync(self) -> None:
        if self.synced:
            self._lose_sync(self.offset)

    def data(self, view: memoryview, ts_ns: int) -> None:
        if not self.synced:
            self._resync_data(view, ts_ns)
            return
        n = len(view)
        if self.cur_start >= 0:
            used = self._continue(view, ts_ns)
            if used == n or not self.synced:
                return
            view = view[used:]
            n -= used
        pos = 0
        base = self.offset
        frame_limit = self.frame_limit
        keep_limit = self.deliver_keep_limit
        while n - pos >= HEADER:
            size = _u32(view, pos)[0]
            too_large = False
            if size > frame_limit or size < 4:
                if size > self.max_frame or size < 4:
                    self.offset = base + pos
                    self._absurd(size, ts_ns)
                    self._resync_data(view[pos:], ts_ns)
                    return
                too_large = True
            end = pos + 4 + size
            if end > n:
                break  # _learn_size reports it once the frame is underway
            if too_large:
                too_large = self._above_negotiated(base + pos, size, self.heads_only(view, pos), ts_ns)
            if too_large or (keep_limit is not None and size > keep_limit and self.heads_only(view, pos)):
                self._emit_head(base + pos, ts_ns, bytes(view[pos : min(end, pos + self.HEAD_KEPT)]), size)
            else:
                self._decode(base + pos, ts_ns, bytes(view[pos:end]), size, False)
            pos = end
        self.offset = base + pos
        if pos < n:
            self._start_frame(view, pos, ts_ns)

    def missing(self, length: int, ts_ns: int) -> None:
        if not self.synced:
            self._resync_missing(length, ts_ns)
            return
        if self.cur_start >= 0 and self.cur_have >= 4:
            # The size is known, so the frame's end is too: sync survives missing bytes
            # inside it.
            remaining = self.cur_total - self.cur_have
            used = min(remaining, length)
            self.cur_have += used
            self.cur_cut = True
            self.offset += used
            length -= used
            if self.cur_have == self.cur_total:
                self._finish_frame(ts_ns)
            if not length:
                return
        already = 0
        if self.cur_start >= 0:  # missing bytes where the size field should end
            already = self.offset - self.cur_start
            self.report(
                "truncated",
                ts_ns,
                self.cur_start,
                self.cur_have,
                "frame size field cut by missing bytes",
            )
        self._reset_frame()
        self._lose_sync(self.offset)
        self.skipped = already
        self._resync_missing(length, ts_ns)

    # --- synced helpers ------------------------------------------------------------

    def _start_frame(self, view: memoryview, pos: int, ts_ns: int) -> None:
        self.cur_start = self.offset
        self.cur_parts = []
        self.cur_kept = self.cur_have = 0
        self.cur_total = 0
        self.cur_keep = HEADER
        self.cur_cut = False
        self._continue(view[pos:], ts_ns)

    def _continue(self, view: memoryview, ts_ns: int) -> int:
        """Add the start of `view` to the frame in progress; how many bytes it took."""
        n = len(view)
        pos = 0
        if self.cur_have < HEADER:
            take = min(HEADER - self.cur_have, n)
            self.cur_parts.append(bytes(view[:take]))
            self.cur_have += take
            self.cur_kept += take
            pos = take
            if self.cur_have >= 4 and not self.cur_total and not self._learn_size(ts_ns):
                rest = view[pos:]
                self.offset += pos
                self._resync_data(rest, ts_ns)
                return n
            if self.cur_head_only is None and self.cur_have >= self.KIND_BYTES:
                self._decide_keep(ts_ns)
        take = min(self.cur_total - self.cur_have, n - pos) if self.cur_total else 0
        if take:
            if not self.cur_cut and self.cur_kept < self.cur_keep:
                keep = min(take, self.cur_keep - self.cur_kept)
                self.cur_parts.append(bytes(view[pos : pos + keep]))
                self.cur_kept += keep
            self.cur_have += take
            pos += take
        self.offset += pos
        if self.cur_total and self.cur_have == self.cur_total:
            self._finish_frame(ts_ns)
        return pos

    def _learn_size(self, ts_ns: int) -> bool:
        """The size field is complete: check it and decide how much of the frame to keep."""
        head = b"".join(self.cur_parts)
        self.cur_parts = [head]
        size = _u32(head)[0]
        if size > self.max_frame or size < 4:
            self.offset = self.cur_start
            start_bytes = head
            self._reset_frame()
            self._absurd(size, ts_ns)
            self.rbuf += start_bytes  # resync starts at the bad frame's first byte
            return False
        self.cur_total = 4 + size
        if len(head) >= self.KIND_BYTES:
            self._decide_keep(ts_ns)
        else:  # the key is in the next bytes: decided when they come, before any body byte
            self.cur_head_only = None
        return True

    def _decide_keep(self, ts_ns: int) -> None:
        """The kind is known: keep the whole frame, or only its head (a kind `heads_only`
        names above deliver_keep_limit, a frame above the negotiated max)."""
        head = b"".join(self.cur_parts)
        self.cur_parts = [head]
        size = self.cur_total - 4
        own_rule = self.heads_only(head, 0)
        head_only = (
            own_rule
            and self.deliver_keep_limit is not None
            and size > self.deliver_keep_limit
        )
        if size > self.frame_limit and self._above_negotiated(self.cur_start, size, own_rule, ts_ns):
            head_only = True
        self.cur_keep = self.HEAD_KEPT if head_only else self.cur_total
        self.cur_head_only = head_only

    def _finish_frame(self, ts_ns: int) -> None:
        frame = b"".join(self.cur_parts)
        size = self.cur_total - 4
        start = self.cur_start
        if len(frame) < HEADER:
            self.report(
                "truncated", ts_ns, start, self.cur_total, "frame key/version cut by missing bytes"
            )
        elif (self.cur_head_only or self.cur_kept < self.cur_total) and not self.cur_cut:
            # (a head-only frame of at most HEAD_KEPT bytes is whole, and still a head, as
            # when data() finds it in one piece)
            self._emit_head(start, ts_ns, frame, size)
        else:
            self._decode(start, ts_ns, frame, size, self.cur_cut)
        self._reset_frame()

    # --- the protocol's ----------------------------------------------------------------

    def heads_only(self, buf: bytes | bytearray | memoryview, pos: int) -> bool:
        """Whether the frame starting at buf[pos] (KIND_BYTES there) is of a kind kept as its
        head above deliver_keep_limit, whatever the frame limit says."""
        return False

    def _decode(self, offset: int, ts_ns: int, frame: bytes, size: int, cut: bool) -> None:
        """Decode a whole frame (`cut`: bytes of it were missing), report it when malformed,
        and emit its record."""
        raise NotImplementedError

    def _emit_head(self, offset: int, ts_ns: int, head: bytes, size: int) -> None:
        """A frame of which only the first bytes were kept: decode and emit them."""
        raise NotImplementedError

    def frame_starts(self, buf: bytearray, start: int) -> Iterator[int]:
        """Where a frame may start in buf, from `start` on, in order (resync candidates)."""
        raise NotImplementedError

    def plausible(self, buf: bytes | bytearray, pos: int, max_size: int, final: bool) -> int:
        """YES, NO or WAIT (more bytes needed) for a frame starting at buf[pos]; `final`: no
        more bytes come before a hole or the end."""
        raise NotImplementedError

    # --- limits ------------------------------------------------------------------------

    def _above_negotiated(self, offset: int, size: int, own_rule: bool, ts_ns: int) -> bool:
        """A frame above the negotiated frame max (but within max_frame): report it; True
        when only its head is to be kept. A kind `heads_only` names keeps its own rule
        (deliver_keep_limit: Stream brokers before 4.3.5 send whole chunks whatever the
        frame max)."""
        head_only = not self.fixed_max_frame and not own_rule
        self.report(
            "frame_too_large",
            ts_ns,
            offset,
            4 + size,
            f"frame of {4 + size} bytes above the negotiated frame max {self.negotiated}"
            + ("; only its first bytes are kept" if head_only else ""),
        )
        return head_only

    def _absurd(self, size: int, ts_ns: int) -> None:
        self.report(
            "frame_too_large",
            ts_ns,
            self.offset,
            size,
            f"absurd frame length {size} (limit {self.max_frame}, --max-frame)",
        )
        self._lose_sync(self.offset)

    def finish(self, ts_ns: int) -> None:
        """End of capture: say what was left unframed."""
        if not self.synced and self.rbuf:
            # a candidate waiting for the next header: taken now, its frames carry the time
            # of the packet that brought their bytes, not the end of the capture (or of a
            # file of a rotated set: the next file's run would read on)
            self._scan(self.rbuf_ts, final=True)
        if self.cur_start >= 0:
            self.report(
                "truncated",
                ts_ns,
                self.cur_start,
                self.cur_have,
                f"capture ended inside a frame of {self.cur_total or '?'} bytes",
            )
            self._reset_frame()
        elif not self.synced and self.skipped + len(self.rbuf):
            self.report(
                "resync",
                ts_ns,
                self.rbuf_start - self.skipped,
                self.skipped + len(self.rbuf),
                "capture ended before a frame start",
            )

    # --- for a walk that finds frame boundaries itself (framing.walk) -----------------

    def ready_for_walk(self, stream_offset: int) -> bool:
        """Can a walk over in-order bytes take over at this stream offset: in sync there,
        and any frame in progress whole so far, its header known."""
        return (
            self.synced
            and not self.cur_cut
            and (self.cur_start < 0 or self.cur_have >= HEADER)
            and self.offset == stream_offset
        )

    def frame_in_progress(self) -> tuple[int, int, int] | None:
        """(stream offset, bytes with the size field, bytes still to keep) of the frame
        begun and not yet complete, or None at a frame boundary."""
        if self.cur_start < 0:
            return None
        return self.cur_start, self.cur_total, self.cur_keep - self.cur_kept

    def continue_frame(self, kept: bytes | None, upto: int) -> None:
        """The frame in progress goes on to stream offset `upto`; `kept`: those bytes of it
        it keeps (None: it keeps no more)."""
        if kept is not None:
            self.cur_parts.append(kept)
            self.cur_kept += len(kept)
        self.cur_have += upto - self.offset
        self.offset = upto

    def complete_frame(self, ts_ns: int) -> None:
        """The frame in progress is whole: decode and emit it."""
        self._finish_frame(ts_ns)

    def begin_frame(self, start: int, total: int, head_only: bool, kept: bytes,
                    upto: int) -> None:  # fmt: skip
        """A frame of `total` bytes (size field included) starts at stream offset `start`
        and goes on past `upto`, the end of the bytes seen: `kept`, its first bytes (all of
        them, or its head when `head_only`)."""
        self.cur_start = start
        self.cur_total = total
        self.cur_keep = DELIVER_HEAD if head_only else total
        self.cur_parts = [kept]
        self.cur_kept = len(kept)
        self.cur_have = upto - start
        self.cur_cut = False
        self.cur_head_only = head_only
        self.offset = upto

    def decode_whole(self, offset: int, ts_ns: int, frame: bytes, size: int) -> None:
        """A whole frame found by the walk: decoded, reported when malformed, emitted."""
        self._decode(offset, ts_ns, frame, size, False)

    def emit_head(self, offset: int, ts_ns: int, head: bytes, size: int) -> None:
        """A frame of which the walk keeps only its first bytes (a big Deliver)."""
        self._emit_head(offset, ts_ns, head, size)

    def snapshot(self) -> list:
        """Everything the framer keeps (a subclass's too), to go back to with restore()."""
        return [(name, _copied(getattr(self, name))) for name in _slots(type(self))]

    def restore(self, snapshot: list) -> None:
        for name, value in snapshot:
            setattr(self, name, _copied(value))

    # --- resync ----------------------------------------------------------------------

    def _lose_sync(self, offset: int) -> None:
        self.synced = False
        self.rbuf = bytearray()
        self.rbuf_start = offset
        self.skipped = 0
        self.scan_from = 0

    def _resync_data(self, view: memoryview, ts_ns: int) -> None:
        if self.synced:  # e.g. called after _learn_size gave up
            self._lose_sync(self.offset)
        self.rbuf += view
        self.rbuf_ts = ts_ns
        self.offset = self.rbuf_start + len(self.rbuf)
        self._scan(ts_ns, final=False)

    def _resync_missing(self, length: int, ts_ns: int) -> None:
        # No more bytes come before the hole: a candidate waiting for them is judged on what
        # is there (with a small snaplen nothing more of it will ever be seen).
        if self.rbuf:
            self._scan(ts_ns, final=True)
            if self.synced:
                self.missing(length, ts_ns)
                return
        self.skipped += len(self.rbuf) + length
        self.rbuf_start += len(self.rbuf) + length
        self.rbuf = bytearray()
        self.scan_from = 0
        self.offset = self.rbuf_start

    def _scan(self, ts_ns: int, final: bool) -> None:
        buf = self.rbuf
        for pos in self.frame_starts(buf, self.scan_from):
            verdict = self.plausible(buf, pos, self.resync_max, final)
            if verdict == YES:
                self._synced_at(pos, ts_ns)
                return
            if verdict == WAIT:
                self.scan_from = pos
                self._bound_buffer(ts_ns)
                return
        # No candidate: keep only a tail that could hold the start of a header.
        drop = max(len(buf) - (HEADER - 1), 0)
        if drop:
            del buf[:drop]
            self.rbuf_start += drop
            self.skipped += drop
        self.scan_from = 0

    def _bound_buffer(self, ts_ns: int) -> None:
        """A candidate waits for its body: never more than the frame limit."""
        if len(self.rbuf) - self.scan_from > self.resync_max + HEADER:
            self.scan_from += 1
            self._scan(ts_ns, final=False)

    def _synced_at(self, pos: int, ts_ns: int) -> None:
        skipped = self.skipped + pos
        offset = self.rbuf_start + pos
        if skipped:
            self.report(
                "resync",
                ts_ns,
                offset - skipped,
                skipped,
                f"skipped {skipped} bytes to a plausible frame start",
            )
        rest = memoryview(bytes(self.rbuf[pos:]))
        self.synced = True
        self.rbuf = bytearray()
        self.offset = offset
        self._reset_frame()
        if rest:
            self.data(rest, ts_ns)


def _slots(cls: type) -> tuple[str, ...]:
    """Every slot of a class and its bases (a framer may be a subclass: rotated.facts)."""
    names = _SLOTS.get(cls)
    if names is None:
        names = _SLOTS[cls] = tuple(dict.fromkeys(
            n for c in reversed(cls.__mro__) for n in getattr(c, "__slots__", ())))  # fmt: skip
    return names


_SLOTS: dict[type, tuple[str, ...]] = {}


def _copied(value: object) -> object:
    """A copy of what a framer changes in place (its parts list, its resync buffer, a
    protocol's own state with a `copy` method: RocketMQ's open requests)."""
    cls = value.__class__
    copies = _COPIES.get(cls)
    if copies is None:
        copies = _COPIES[cls] = hasattr(cls, "copy")
    return value.copy() if copies else value


# Whether values of a class are copied (a snapshot is taken for each connection of each
# block: a failed hasattr a plain value, its AttributeError made and dropped, cost ~2 us)
_COPIES: dict[type, bool] = {}
