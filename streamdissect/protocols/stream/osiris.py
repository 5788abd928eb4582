"""Osiris chunks as carried by Deliver: the 48-byte header, data entries, tracking data.

Layouts from facts §3. Everything past the header is read lazily from a memoryview: the
codec never walks entries (counting uses the header's num_records), and walking entries
never decompresses; only `iter_records` inflates sub-batches, within bounds.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import Any

from streamdissect.protocols.stream.codes import ChunkType
from streamdissect.protocols.stream.compression import (
    DEFAULT_MAX_DECOMPRESSED,
    DecompressionError,
    decompress,
)
from streamdissect.slotted import Slotted

HEADER_SIZE = 48
# reserved is 3 bytes on the wire: read as u16 + u8 so the whole header is one unpack
HEADER = struct.Struct(">BBHIqQQIIIBHB")
HEADER_FIELDS = (
    "magic_version", "chunk_type", "num_entries", "num_records", "timestamp", "epoch",
    "chunk_id", "crc", "data_length", "trailer_length", "bloom_size", "reserved",
)  # fmt: skip
SIMPLE_SIZE = struct.Struct(">I")
MIN_ENTRY_SIZE = 4  # a simple entry's size field; a sub-batch header takes 11
MAX_SUB_BATCH_RECORDS = 0xFFFF  # num_records is a u16
SUB_BATCH = struct.Struct(">BHII")  # flags, num_records, uncompressed_length, length
TRACKING_ID = struct.Struct(">BB")
U64 = struct.Struct(">Q")
I64 = struct.Struct(">q")


def header_from_tuple(values: tuple[int, ...]) -> dict[str, int]:
    """The 13 values unpacked with HEADER as the 12 named header fields."""
    *head, reserved_high, reserved_low = values
    header = dict(zip(HEADER_FIELDS, head))
    header["reserved"] = (reserved_high << 8) | reserved_low
    return header


def parse_header(buf: Any, pos: int = 0) -> dict[str, int]:
    return header_from_tuple(HEADER.unpack_from(buf, pos))


def parse_cut_header(buf: Any, pos: int, end: int) -> dict[str, int | None]:
    """A header whose bytes stop at `end` (a frame cut by the capture): every field whose
    bytes are whole, in wire order; the first one cut and those after it None."""
    header: dict[str, int | None] = dict.fromkeys(HEADER_FIELDS)
    for name, size in zip(HEADER_FIELDS, _FIELD_SIZES):
        if end - pos < size:
            break
        value = int.from_bytes(buf[pos : pos + size], "big")
        header[name] = value - (1 << 64) if name == "timestamp" and value >> 63 else value
        pos += size
    return header


# each header field's bytes, as HEADER lays them out (reserved: its u16 and u8 as one)
_FIELD_SIZES = [struct.calcsize(">" + f) for f in HEADER.format[1:-2]] + [3]


def pack_header(header: dict[str, int]) -> bytes:
    values = [header[name] for name in HEADER_FIELDS[:-1]]
    reserved = header["reserved"]
    return HEADER.pack(*values, reserved >> 8, reserved & 0xFF)


def crc_matches(header: dict[str, int], payload: Any) -> bool | None:
    """CRC-32 of the data section against the header; None when the data is incomplete."""
    length = header["data_length"]
    if len(payload) < length:
        return None
    return zlib.crc32(payload[:length]) == header["crc"]


class Entry(Slotted):
    """One data entry: a simple entry (one record) or a sub-batch (num_records records)."""

    __slots__ = field_names = ("position", "index", "offset", "sub_batch", "compression",
                               "num_records", "uncompressed_length", "data")  # fmt: skip
    position: int  # byte offset within the data section
    index: int  # index of its first record within the chunk
    offset: int  # chunk_id + index
    sub_batch: bool
    compression: int  # 0 for simple entries
    num_records: int
    uncompressed_length: int
    data: memoryview

    def __init__(self, position: int, index: int, offset: int, sub_batch: bool,
                 compression: int, num_records: int, uncompressed_length: int,
                 data: memoryview) -> None:  # fmt: skip
        self.position, self.index, self.offset, self.sub_batch = position, index, offset, sub_batch
        self.compression, self.num_records = compression, num_records
        self.uncompressed_length, self.data = uncompressed_length, data


class MalformedEntry(Slotted):
    """An entry of a chunk that could not be read: where, and why."""

    __slots__ = field_names = ("position", "reason", "kind")
    position: int
    reason: str
    kind: str  # "decompression_cap" when a decompression bound was hit

    def __init__(self, position: int, reason: str, kind: str = "malformed") -> None:
        self.position, self.reason, self.kind = position, reason, kind


class OsirisRecord(Slotted):
    """One record of a chunk's entry: its offset and its bytes."""

    __slots__ = field_names = ("offset", "data")
    offset: int
    data: bytes | memoryview

    def __init__(self, offset: int, data: bytes | memoryview) -> None:
        self.offset, self.data = offset, data


class TrackingEntry(Slotted):
    """A tracking chunk's entry: a writer's sequence, a consumer's offset or a timestamp."""

    __slots__ = field_names = ("type", "id", "value", "chunk_id")
    type: int  # 0 sequence, 1 offset, 2 timestamp (codes.TrackingType)
    id: str
    value: int
    chunk_id: int | None  # snapshot sequence entries only

    def __init__(self, type: int, id: str, value: int, chunk_id: int | None = None) -> None:
        self.type, self.id, self.value, self.chunk_id = type, id, value, chunk_id


def iter_entries(data: Any, chunk_id: int) -> Iterator[Entry | MalformedEntry]:
    """Walk the data section entry by entry; stops at the first malformed entry."""
    view = memoryview(data)
    pos, index, end = 0, 0, len(view)
    while pos < end:
        first = view[pos]
        if first & 0x80 == 0:
            if end - pos < 4:
                yield MalformedEntry(pos, "simple entry header cut short")
                return
            size = SIMPLE_SIZE.unpack_from(view, pos)[0]
            if size > end - pos - 4:
                yield MalformedEntry(pos, f"simple entry size {size} exceeds the data left")
                return
            yield Entry(
                pos, index, chunk_id + index, False, 0, 1, size, view[pos + 4 : pos + 4 + size]
            )
            pos += 4 + size
            index += 1
            continue
        if end - pos < SUB_BATCH.size:
            yield MalformedEntry(pos, "sub-batch header cut short")
            return
        flags, num_records, uncompressed, length = SUB_BATCH.unpack_from(view, pos)
        start = pos + SUB_BATCH.size
        if length > end - start:
            yield MalformedEntry(pos, f"sub-batch length {length} exceeds the data left")
            return
        compression = (flags & 0x70) >> 4
        yield Entry(pos, index, chunk_id + index, True, compression, num_records, uncompressed,
                    view[start : start + length])  # fmt: skip
        pos = start + length
        index += num_records


def sub_batch_records(
    entry: Entry, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> list[OsirisRecord] | MalformedEntry:
    """Inflate a sub-batch (bounded) and split its `size:u32 + bytes` records."""
    try:
        body = decompress(
            entry.compression, entry.data, entry.uncompressed_length, max_decompressed
        )
    except DecompressionError as exc:
        return MalformedEntry(entry.position, str(exc), exc.kind)
    records, pos = [], 0
    for i in range(entry.num_records):
        if len(body) - pos < 4:
            return MalformedEntry(entry.position, f"sub-batch record {i} header cut short")
        size = SIMPLE_SIZE.unpack_from(body, pos)[0]
        if size > len(body) - pos - 4:
            return MalformedEntry(entry.position, f"sub-batch record {i} size {size} too large")
        records.append(OsirisRecord(entry.offset + i, body[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    if pos != len(body):
        return MalformedEntry(entry.position, "trailing bytes in sub-batch")
    return records


def iter_records(
    data: Any, chunk_id: int, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> Iterator[OsirisRecord | MalformedEntry]:
    """Every record of the data section with its offset; malformed entries are yielded, not raised."""
    for entry in iter_entries(data, chunk_id):
        if isinstance(entry, MalformedEntry):
            yield entry
        elif not entry.sub_batch:
            yield OsirisRecord(entry.offset, entry.data)
        else:
            records = sub_batch_records(entry, max_decompressed)
            if isinstance(records, MalformedEntry):
                yield records
            else:
                yield from records


def parse_tracking(data: Any, snapshot: bool) -> list[TrackingEntry] | MalformedEntry:
    """Tracking blocks `type:u8, idSize:u8, id, data` (facts §3.4).

    Data is 8 bytes, except sequence entries of a snapshot, which carry chunkId + seq.
    """
    view, pos, entries = memoryview(data), 0, []
    while pos < len(view):
        if len(view) - pos < 2:
            return MalformedEntry(pos, "tracking entry header cut short")
        kind, id_size = TRACKING_ID.unpack_from(view, pos)
        value_size = 16 if snapshot and kind == 0 else 8
        start = pos + 2 + id_size
        if start + value_size > len(view):
            return MalformedEntry(pos, "tracking entry cut short")
        tracking_id = str(view[pos + 2 : start], "utf-8", "replace")
        chunk_id = None
        if value_size == 16:
            chunk_id = U64.unpack_from(view, start)[0]
            start += 8
        unpack = I64 if kind == 2 else U64
        entries.append(
            TrackingEntry(kind, tracking_id, unpack.unpack_from(view, start)[0], chunk_id)
        )
        pos = start + 8
    return entries


def chunk_tracking(header: dict[str, int], payload: Any) -> list[TrackingEntry] | MalformedEntry:
    """Tracking entries of a chunk: the single entry of a tracking chunk (types 1, 2), or the
    trailer of a user chunk when the server sent it (chunk_selector=all)."""
    data_length = header["data_length"]
    chunk_type = header["chunk_type"]
    if chunk_type in (ChunkType.TRACKING_DELTA, ChunkType.TRACKING_SNAPSHOT):
        entries = list(iter_entries(memoryview(payload)[:data_length], header["chunk_id"]))
        found: list[TrackingEntry] = []
        for entry in entries:
            if isinstance(entry, MalformedEntry):
                return entry
            parsed = parse_tracking(entry.data, chunk_type == ChunkType.TRACKING_SNAPSHOT)
            if isinstance(parsed, MalformedEntry):
                return parsed
            found += parsed
        return found
    trailer = memoryview(payload)[data_length:]
    if header["trailer_length"] and len(trailer) == header["trailer_length"]:
        return parse_tracking(trailer, snapshot=False)
    return []
