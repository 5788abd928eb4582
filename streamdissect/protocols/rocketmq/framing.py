"""RocketMQ's framing: `total:i32` (the bytes after it), then the header-length word, whose
high byte (0 JSON, 1 ROCKETMQ) and low 3 bytes (the header's length) say what the frame is.

`RocketMQFramer` is framing.framer.Framer with the codec: every frame kept whole (a pull
response is read message by message; the framer's `max_frame` bounds it), and resync after a
gap at a plausible frame start: a total length within the limit, a header-length word of a
known serialization whose length fits, a header that decodes (a JSON object with a code, or
a ROCKETMQ header whose lengths hold), and the next frame's head plausible too: the first
frame after a resync waits for it (or for a hole or the end), so where TCP cut the bytes
never changes what is found. `looks_like_rocketmq` is the heuristic for a
connection on a port no protocol claims.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from typing import Any

from streamdissect.framing.framer import DEFAULT_MAX_FRAME, HEADER, NO, WAIT, YES, Framer
from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.codec import JSON_START, decode_frame
from streamdissect.protocols.rocketmq.records import Malformed, RemotingCommand

_head = struct.Struct(">II").unpack_from
# where a frame may start: a JSON header's `{"` 8 bytes in (or the buffer's end there: the
# judge waits for it), or a ROCKETMQ header's word (its length under 64 KiB) 4 bytes in; the
# lookahead lets candidates overlap
_CANDIDATE = re.compile(
    rb"(?=[\x00-\xff]{4}(?:\x00[\x00-\xff]{3}(?:\{\"|\{\Z|\Z)|\x01\x00[\x00-\xff]{2}))", re.DOTALL)
BINARY_MIN = 2 + 1 + 2 + 4 + 4 + 4 + 4


def head_plausible(buf: bytes | bytearray, pos: int, max_size: int) -> bool:
    """The 8-byte head at buf[pos]: a total within the limit, a known serialization and a
    header length that fits in it."""
    total, word = _head(buf, pos)
    kind, length = word >> 24, word & spec.HEADER_LENGTH_MASK
    if not 4 <= total <= max_size or kind not in spec.SERIALIZE_NAMES or length > total - 4:
        return False
    return length >= 2 if kind == spec.JSON else length >= BINARY_MIN


def frame_plausible(buf: bytes | bytearray, pos: int, max_size: int, final: bool) -> int:
    """YES, NO or WAIT (more bytes needed) for a frame starting at buf[pos]."""
    if len(buf) - pos < HEADER:
        return WAIT
    if not head_plausible(buf, pos, max_size):
        return NO
    total, word = _head(buf, pos)
    if word >> 24 == spec.JSON:
        start = bytes(buf[pos + 8 : pos + 10])
        if start != JSON_START[: len(start)]:
            return NO
    header_end = pos + 8 + (word & spec.HEADER_LENGTH_MASK)
    if header_end > len(buf):
        return YES if final else WAIT
    end = pos + 4 + total
    piece = bytes(buf[pos : min(end, len(buf))])
    if isinstance(decode_frame(piece, declared_size=total), Malformed):
        return NO
    if end + HEADER > len(buf):  # the next frame's head decides; it may come later
        return YES if final else WAIT
    return YES if head_plausible(buf, end, max_size) else NO


def looks_like_rocketmq(data: bytes) -> bool | None:
    """Do these first bytes of a direction start RocketMQ frames? A plausible head and the
    start of a header: `{"` and, within the bytes there, a code key (JSON), or a ROCKETMQ
    header's fixed part with a known language and flag bits only; None: too few bytes."""
    if len(data) < HEADER + 2:
        return None
    if not head_plausible(data, 0, DEFAULT_MAX_FRAME * 2):
        return False
    word = _head(data, 0)[1]
    if word >> 24 == spec.JSON:
        if data[8:10] != JSON_START:
            return False
        if b'"code"' in data[8:] or b'"extFields"' in data[8:]:
            return True
        return None if len(data) < 64 else False
    if len(data) < HEADER + BINARY_MIN:
        return None
    language, flag = data[10], struct.unpack_from(">i", data, 17)[0]  # after code, version, opaque
    return language in spec.LANGUAGES and 0 <= flag <= 3


def sent_by_server(data: bytes) -> bool:
    """Whether a direction whose first bytes are RocketMQ frames is the server's: its first
    frame is a response (a server's own requests, NOTIFY_CONSUMER_IDS_CHANGED, come later)."""
    record = decode_frame(data[: 4 + _head(data, 0)[0]], declared_size=_head(data, 0)[0])
    return not isinstance(record, Malformed) and record.response


MAX_OPEN_CALLS = 65_536  # requests a direction remembers until answered (oldest forgotten)
# A dict keeps its largest table when emptied: a direction that once held more than
# GROWN_CALLS open requests (the bulk walk names a block's requests before its responses:
# 10,003 at once on the RocketMQ benchmark capture, ~295 KB) gets a fresh one sized to what
# is still open once that is SHRUNK_CALLS or fewer (long polls may stay open for good).
GROWN_CALLS = 1_024
SHRUNK_CALLS = 64


class OpenRequests:
    """A direction's requests not answered yet, by opaque: what names its peer's responses
    (`request_code`), bounded (the oldest forgotten past MAX_OPEN_CALLS), and its memory
    back after a burst is answered (GROWN_CALLS)."""

    __slots__ = ("calls", "grown")

    def __init__(self) -> None:
        self.calls: dict[int, int] = {}  # opaque -> request code, oldest first
        self.grown = False  # held more than GROWN_CALLS since its dict was made

    def asked(self, record: RemotingCommand) -> None:
        """A request of this direction: remembered until its response comes (oneway ones
        get none)."""
        if not record.oneway:
            calls = self.calls
            calls.pop(record.opaque, None)
            calls[record.opaque] = record.code
            if len(calls) > GROWN_CALLS:
                self.grown = True
                if len(calls) > MAX_OPEN_CALLS:
                    del calls[next(iter(calls))]

    def copy(self) -> OpenRequests:
        """(A framer's snapshot: the bulk engine may undo a block's walk.)"""
        other = OpenRequests()
        other.calls, other.grown = dict(self.calls), self.grown
        return other

    def answered(self, opaque: int) -> int | None:
        """The code of this direction's request that `opaque` answers, forgotten now."""
        calls = self.calls
        code = calls.pop(opaque, None)
        if self.grown and len(calls) <= SHRUNK_CALLS:
            self.calls = dict(calls)  # (a copy is sized to its items, in the same order)
            self.grown = False
        return code


def name_response(record: RemotingCommand, own: OpenRequests, peer: OpenRequests | None) -> None:
    """A command of a direction (`own`, its open requests; `peer`, the other direction's): a
    request is remembered, a response named by the request it answers (None: not seen)."""
    if not record.response:
        own.asked(record)
    elif peer is not None:
        record.request_code = peer.answered(record.opaque)


class RocketMQFramer(Framer):
    """A direction of a RocketMQ connection cut into records (framing.framer.Framer).
    `requests`: this direction's requests not answered yet, which its peer's responses are
    named by (protocol.RocketMQProtocol.framer)."""

    HEAD_KEPT = 64 * 1024  # (a frame above a negotiated max: RocketMQ negotiates none)
    __slots__ = ("connection_framers", "lane", "naming_deferred", "requests")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.requests = OpenRequests()
        # the connection's framers (this and its peer, once both are made), when the
        # protocol made it (RocketMQProtocol.framer)
        self.connection_framers: list = []
        # the bulk engine walks one direction of a block after the other: the commands are
        # named after both, in time order (plain_walk.RocketMQPlainWalk.end_connection)
        self.naming_deferred = False
        # the state's (frame counts, connection, direction), when the protocol made it: what
        # the plain walk emits a command with while naming is deferred (its emit then is the
        # state's alone)
        self.lane: tuple | None = None

    def name(self, record: RemotingCommand) -> None:
        """A command of this direction: a request remembered, a response named by its
        peer's request (name_response)."""
        framers = self.connection_framers
        if len(framers) == 2:  # (both made: the other one, without a generator)
            peer = framers[0] if framers[1] is self else framers[1]
        else:
            peer = next((f for f in framers if f is not self), None)
        name_response(record, self.requests, None if peer is None else peer.requests)

    def _decode(self, offset: int, ts_ns: int, frame: bytes, size: int, cut: bool) -> None:
        self.emit_decoded(offset, ts_ns, decode_frame(frame, declared_size=size if cut else None),
                          size)  # fmt: skip

    def _emit_head(self, offset: int, ts_ns: int, head: bytes, size: int) -> None:
        self.emit_decoded(offset, ts_ns, decode_frame(head, declared_size=size), size)

    def emit_decoded(self, offset: int, ts_ns: int, record: Any, size: int) -> None:
        """A frame's record (decoded here, or by the plain walk: plain_walk.py), reported
        when malformed, then emitted."""
        self._report_malformed(record, offset, ts_ns, size)
        self.emit(offset, ts_ns, record)

    def _report_malformed(self, record, offset: int, ts_ns: int, size: int) -> None:
        if isinstance(record, Malformed):
            self.report("malformed", ts_ns, offset, size + 4,
                        f"{record.reason} (at byte {record.offset} of the frame)")
        elif record.body_error is not None:
            self.report("malformed", ts_ns, offset, size + 4,
                        f"{record.code_name} opaque {record.opaque}: {record.body_error}"
                        f" (at byte {record.body_error_offset} of the frame)")

    def frame_starts(self, buf: bytearray, start: int) -> Iterator[int]:
        return (match.start() for match in _CANDIDATE.finditer(buf, start))

    def plausible(self, buf: bytes | bytearray, pos: int, max_size: int, final: bool) -> int:
        return frame_plausible(buf, pos, max_size, final)
