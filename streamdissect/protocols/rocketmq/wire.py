"""The small pieces of RocketMQ's message encoding: the properties string, the body CRC, the
offset message id, and zlib bodies inflated within a limit (a chunk at a time, nothing kept
while the size is found)."""

from __future__ import annotations

import struct
import zlib

from streamdissect.protocols.rocketmq import spec

INFLATE_CHUNK = 64 * 1024


def parse_properties(text: str) -> dict[str, str]:
    """`name \\x01 value` pairs, each ended by `\\x02`; an item without a \\x01 is skipped,
    as RocketMQ's own parser does."""
    out: dict[str, str] = {}
    for item in text.split(spec.PROPERTY_SEPARATOR):
        name, sep, value = item.partition(spec.NAME_VALUE_SEPARATOR)
        if sep:
            out[name] = value
    return out


def format_properties(properties: dict[str, str]) -> str:
    return "".join(f"{k}{spec.NAME_VALUE_SEPARATOR}{v}{spec.PROPERTY_SEPARATOR}"
                   for k, v in properties.items())  # fmt: skip


def body_crc(body: bytes) -> int:
    """The stored body CRC: CRC-32 of the body as stored, its top bit cleared."""
    return zlib.crc32(body) & 0x7FFFFFFF


def offset_msg_id(host: bytes, port: int, physical_offset: int) -> str:
    """The broker's message id: store host address, port (4 bytes), commit log offset (8
    bytes), in upper-case hex."""
    return (host + struct.pack(">iq", port, physical_offset)).hex().upper()


def inflated_length(data: bytes, limit: int = spec.MAX_INFLATED) -> tuple[int | None, str | None]:
    """The size a zlib body inflates to, found a chunk at a time (nothing kept); or why it
    cannot be had (not zlib, cut short, over `limit`)."""
    inflater = zlib.decompressobj()
    total = 0
    pending = data
    try:
        while True:
            out = inflater.decompress(pending, INFLATE_CHUNK)
            total += len(out)
            if total > limit:
                return None, f"body inflates beyond {limit} bytes"
            pending = inflater.unconsumed_tail
            if not pending and len(out) < INFLATE_CHUNK:
                break
    except zlib.error as e:
        return None, f"body does not inflate: {e}"
    if not inflater.eof:
        return None, "compressed body cut short"
    return total, None


def inflate(data: bytes, limit: int = spec.MAX_INFLATED) -> bytes:
    """The inflated body (ValueError when it cannot be had within `limit`)."""
    _, error = inflated_length(data, limit)
    if error is not None:
        raise ValueError(error)
    return zlib.decompress(data)
