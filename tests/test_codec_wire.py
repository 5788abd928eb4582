"""Hand-written wire builders for the codec tests, independent of the codec itself.

Everything here follows the byte layouts of docs/protocol.md with plain
struct.pack, so the tests check the codec against the facts, not against itself.
"""

from __future__ import annotations

import struct
import zlib


def frame(key: int, version: int, body: bytes) -> bytes:
    return struct.pack(">IHH", len(body) + 4, key, version) + body


def s(text: str | None) -> bytes:
    if text is None:
        return b"\xff\xff"
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def b32(data: bytes | None) -> bytes:
    if data is None:
        return b"\xff\xff\xff\xff"
    return struct.pack(">i", len(data)) + data


def smap(pairs: dict[str, str]) -> bytes:
    return struct.pack(">i", len(pairs)) + b"".join(s(k) + s(v) for k, v in pairs.items())


def strings(items: list[str]) -> bytes:
    return struct.pack(">i", len(items)) + b"".join(s(x) for x in items)


def u8(v: int) -> bytes:
    return struct.pack(">B", v)


def u16(v: int) -> bytes:
    return struct.pack(">H", v)


def u32(v: int) -> bytes:
    return struct.pack(">I", v)


def u64(v: int) -> bytes:
    return struct.pack(">Q", v)


def simple_entry(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def sub_batch(compression: int, records: list[bytes], compressed: bytes | None = None) -> bytes:
    """Sub-batch entry: 1:1,compression:3,reserved:4, numRecords:u16, uncompressed:u32,
    length:u32, data (facts §3.3). `compressed` overrides the body (for bad data tests)."""
    plain = b"".join(struct.pack(">I", len(r)) + r for r in records)
    body = plain if compressed is None else compressed
    return struct.pack(">BHII", 0x80 | compression << 4, len(records), len(plain), len(body)) + body


def chunk(
    entries: list[bytes],
    num_records: int,
    *,
    chunk_id: int = 100,
    chunk_type: int = 0,
    timestamp: int = 1_700_000_000_000,
    epoch: int = 3,
    trailer: bytes = b"",
    send_trailer: bool = False,
    crc: int | None = None,
    bloom_size: int = 0,
) -> bytes:
    """An Osiris chunk as Deliver carries it: 48-byte header + data (+ trailer)."""
    data = b"".join(entries)
    header = struct.pack(
        ">BBHIqQQIIIB3s",
        0x50,
        chunk_type,
        len(entries),
        num_records,
        timestamp,
        epoch,
        chunk_id,
        zlib.crc32(data) if crc is None else crc,
        len(data),
        len(trailer),
        bloom_size,
        b"\x00\x00\x00",
    )
    return header + data + (trailer if send_trailer else b"")


def deliver(chunk_bytes: bytes, *, subscription_id: int = 1, committed: int | None = None) -> bytes:
    if committed is None:
        return frame(0x0008, 1, u8(subscription_id) + chunk_bytes)
    return frame(0x0008, 2, u8(subscription_id) + u64(committed) + chunk_bytes)


def tracking(kind: int, ident: str, data: bytes) -> bytes:
    raw = ident.encode()
    return struct.pack(">BB", kind, len(raw)) + raw + data


def test_the_protocol_notes_name_every_command_and_code():
    """docs/protocol.md (what the codec follows, in the project's words) lists every command
    key of the table and every response code the codes module names."""
    from pathlib import Path

    from streamdissect.protocols.stream.codes import ResponseCode
    from streamdissect.protocols.stream.spec import BY_KEY

    notes = (Path(__file__).parent.parent / "docs" / "protocol.md").read_text()
    for key, message in BY_KEY.items():
        if key < 0x8000:
            assert f"| 0x{key:04x} | {message.command} |" in notes, message.command
    for code in ResponseCode:
        assert f"| 0x{code.value:02x} |" in notes, code.name
