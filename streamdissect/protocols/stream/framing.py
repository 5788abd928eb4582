"""The Stream's framing: `size:u32` (not counting itself), `key:u16`, `version:u16`, body.

`StreamFramer` is framing.framer.Framer with the Stream's codec: frames decoded by
`decode_frame`, big Deliver frames kept as their head (frame header, committed chunk id, the
48-byte Osiris chunk header and the first entries: DELIVER_HEAD bytes), and resync after a gap
at a plausible frame start: size within the frame limit, a (key, version) the codec knows, a
body that decodes without Malformed, and the next frame's header plausible too when it is
there. `looks_like_stream` is the protocol's heuristic for a connection on another port.

A big Deliver record kept as its head has `chunk_payload=None` (so `crc_ok` is None and
`messages()` is empty) but `truncated=False`: the bytes were on the wire, we chose not to keep
them.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from functools import cache

from streamdissect.framing.framer import (
    DEFAULT_MAX_FRAME,
    DELIVER_HEAD,
    DELIVER_KEY,
    HEADER,
    NO,
    WAIT,
    YES,
    Framer,
)
from streamdissect.protocols.stream.codec import decode_frame
from streamdissect.protocols.stream.records import Malformed, Unknown
from streamdissect.protocols.stream.spec import BY_KEY, MESSAGES

_header = struct.Struct(">IHH").unpack_from
KNOWN = frozenset((m.key, v) for m in MESSAGES for v in m.versions)


@cache
def _candidates() -> re.Pattern[bytes]:
    """Candidate frame starts, found in C: a known (key, version) pair 4 bytes in; the
    lookahead makes overlapping candidates visible. Compiled at the first resync, not at
    import (~1 ms of every start, and most runs never resync)."""
    pairs = b"|".join(re.escape(struct.pack(">HH", k, v)) for k, v in sorted(KNOWN))
    return re.compile(b"(?=(?:" + pairs + b"))")


PEER_PROPERTIES_KEY = 0x0011
HEARTBEAT = b"\x00\x00\x00\x04\x00\x17\x00\x01"


def header_plausible(size: int, key: int, version: int, max_size: int) -> bool:
    return 4 <= size <= max_size and (key, version) in KNOWN


def frame_plausible(buf: bytes | bytearray, pos: int, max_size: int, final: bool) -> int:
    """YES, NO or WAIT (more bytes needed) for a frame starting at buf[pos]."""
    have = len(buf) - pos
    if have < HEADER:
        return WAIT
    size, key, version = _header(buf, pos)
    if not header_plausible(size, key, version, max_size):
        return NO
    end = pos + 4 + size
    if end > len(buf):
        # Judge what is there; a cut body that already breaks its layout is no frame.
        record = decode_frame(bytes(buf[pos:]), declared_size=size)
        if isinstance(record, Malformed) or (isinstance(record, Unknown) and record.key is None):
            return NO
        return YES if final else WAIT
    if isinstance(decode_frame(bytes(buf[pos:end])), (Malformed, Unknown)):
        return NO
    after = len(buf) - end
    if after < HEADER:  # the next header decides; at the buffer's end it may come later
        return YES if final else WAIT
    return YES if header_plausible(*_header(buf, end), max_size) else NO


def looks_like_stream(data: bytes) -> bool | None:
    """Heuristic for a connection on an unknown port: do these first bytes of a direction
    start Stream frames? None when there are too few bytes to tell."""
    if len(data) < HEADER:
        return None
    size, key, version = _header(data)
    if key == PEER_PROPERTIES_KEY and version == 1 and 8 <= size <= 64 * 1024:
        return True  # PeerProperties request: how every client starts
    if data[:8] == HEARTBEAT:
        return True
    verdict = frame_plausible(data, 0, DEFAULT_MAX_FRAME, final=True)
    return verdict == YES and 4 + size <= len(data)


def sent_by_server(data: bytes) -> bool:
    """Whether a direction whose first bytes start Stream frames is the server's (the first
    frame's key is one only the server sends)."""
    message = BY_KEY.get((data[4] << 8) | data[5])
    return message is not None and message.sender == "server"


class StreamFramer(Framer):
    """A direction of a Stream connection cut into records (framing.framer.Framer)."""

    HEAD_KEPT = DELIVER_HEAD
    KIND_BYTES = 6  # size and key
    __slots__ = ()

    def heads_only(self, buf: bytes | bytearray | memoryview, pos: int) -> bool:
        return (buf[pos + 4] << 8 | buf[pos + 5]) == DELIVER_KEY

    def _decode(self, offset: int, ts_ns: int, frame: bytes, size: int, cut: bool) -> None:
        record = decode_frame(frame, declared_size=size if cut else None)
        if isinstance(record, Malformed):
            self.report("malformed", ts_ns, offset, size + 4, record.reason)
        self.emit(offset, ts_ns, record)

    def _emit_head(self, offset: int, ts_ns: int, head: bytes, size: int) -> None:
        """A frame of which only the first bytes were kept (big Deliver, above the limit)."""
        record = decode_frame(head, declared_size=size)
        if isinstance(record, Malformed):  # (a head the codec can read is never malformed)
            self.report("malformed", ts_ns, offset, size + 4, record.reason)
        elif record.key == DELIVER_KEY and not isinstance(record, Unknown):
            record.truncated = False  # complete on the wire; we only chose not to keep it
            record.chunk_payload = None
        self.emit(offset, ts_ns, record)

    def frame_starts(self, buf: bytearray, start: int) -> Iterator[int]:
        return (match.start() - 4 for match in _candidates().finditer(buf, start + 4))

    def plausible(self, buf: bytes | bytearray, pos: int, max_size: int, final: bool) -> int:
        return frame_plausible(buf, pos, max_size, final)
