"""Publish's message list (facts §1.5): a cheap scan for ids and counts, a lazy view for the rest.

The hot path reads 8 + 4 bytes per message (publishing id, entry header) and jumps over the
bodies; message objects are only built when someone iterates `record.messages`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from streamdissect.protocols.stream.primitives import DecodeError
from streamdissect.slotted import Slotted

ID_AND_SIZE = struct.Struct(">QI")  # publishing id, then a simple entry's 0:1,size:31
ID = struct.Struct(">Q")
U32 = struct.Struct(">I")
U16 = struct.Struct(">H")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
SUB_BATCH_REST = struct.Struct(">HII")  # after the flags byte: num_records, uncompressed, length


class SubBatch(NamedTuple):
    compression: int
    num_records: int
    uncompressed_length: int
    data: bytes
    flags_low: int = 0  # the 4 reserved bits, kept so that re-encoding is exact


class PublishedMessage(NamedTuple):
    publishing_id: int
    filter_value: str | None  # Publish v2 only; None also means "no filter" (-1)
    entry: bytes | SubBatch


def entry_end(buf: Any, pos: int, end: int) -> tuple[int, int]:
    """(end of the entry starting at pos, records in it)."""
    if end - pos < 4:
        raise DecodeError("publish entry header cut short", pos, True)
    word = U32.unpack_from(buf, pos)[0]
    if word & 0x80000000 == 0:
        stop = pos + 4 + word
        if stop > end:
            raise DecodeError(f"publish entry size {word} exceeds the frame", pos, True)
        return stop, 1
    if end - pos < 11:
        raise DecodeError("sub-batch header cut short", pos, True)
    num_records, _, length = SUB_BATCH_REST.unpack_from(buf, pos + 1)
    stop = pos + 11 + length
    if stop > end:
        raise DecodeError(f"sub-batch length {length} exceeds the frame", pos, True)
    return stop, num_records


def entry_records(buf: Any, pos: int, end: int) -> int | None:
    """The records of the entry starting at pos, as far as its first bytes say (a cut
    frame's): a simple entry's 1, a sub-batch's num_records (its 3 first bytes); None when
    they are cut."""
    if end - pos < 1:
        return None
    if buf[pos] & 0x80 == 0:
        return 1
    return U16.unpack_from(buf, pos + 1)[0] if end - pos >= 3 else None


def filter_end(buf: Any, pos: int, end: int) -> int:
    if end - pos < 2:
        raise DecodeError("filter value length cut short", pos, True)
    n = I16.unpack_from(buf, pos)[0]
    if n < -1:
        raise DecodeError(f"filter value: negative length {n}", pos)
    stop = pos + 2 + max(n, 0)
    if stop > end:
        raise DecodeError("filter value exceeds the frame", pos, True)
    return stop


def read_entry(buf: Any, pos: int, end: int) -> tuple[bytes | SubBatch, int]:
    """One entry: a simple entry's bytes or a SubBatch, and where it ends."""
    stop, _ = entry_end(buf, pos, end)
    first = buf[pos]
    if first & 0x80 == 0:
        return bytes(buf[pos + 4 : stop]), stop
    num_records, uncompressed, _ = SUB_BATCH_REST.unpack_from(buf, pos + 1)
    entry = SubBatch((first & 0x70) >> 4, num_records, uncompressed, bytes(buf[pos + 11 : stop]),
                     first & 0x0F)  # fmt: skip
    return entry, stop


def write_entry(out: bytearray, entry: bytes | SubBatch) -> None:
    """The inverse of read_entry."""
    if isinstance(entry, SubBatch):
        out.append(0x80 | (entry.compression << 4) | entry.flags_low)
        out += SUB_BATCH_REST.pack(entry.num_records, entry.uncompressed_length, len(entry.data))
        out += entry.data
    else:
        out += U32.pack(len(entry)) + entry


def scan(buf: Any, pos: int, end: int, version: int, ids: list[int]) -> tuple[int, int, int]:
    """Walk `count:i32` + messages, appending publishing ids to `ids` (kept on failure).

    Returns (message count, record count, position after the last message).
    """
    if end - pos < 4:
        raise DecodeError("publish count cut short", pos, True)
    count = I32.unpack_from(buf, pos)[0]
    if count < 0:
        raise DecodeError(f"publish: negative message count {count}", pos)
    pos += 4
    per_message = 12 if version == 1 else 14
    if count * per_message > end - pos:
        raise DecodeError(f"publish: {count} messages cannot fit", pos - 4, True)
    records = 0
    append = ids.append
    if version == 1:
        unpack_from = ID_AND_SIZE.unpack_from
        for _ in range(count):
            if end - pos < 12:
                raise DecodeError("publish message cut short", pos, True)
            publishing_id, word = unpack_from(buf, pos)
            if word & 0x80000000 == 0 and pos + 12 + word <= end:  # the common simple entry
                append(publishing_id)
                pos += 12 + word
                records += 1
                continue
            append(publishing_id)
            pos, n = entry_end(buf, pos + 8, end)
            records += n
        return count, records, pos
    for _ in range(count):
        if end - pos < 8:
            raise DecodeError("publish message cut short", pos, True)
        append(ID.unpack_from(buf, pos)[0])
        pos, n = entry_end(buf, filter_end(buf, pos + 8, end), end)
        records += n
    return count, records, pos


class CutMessages(NamedTuple):
    """What a cut Publish's messages field holds until its record is built: the count its
    header says, the publishing ids whose bytes are whole, and the records it holds at least
    (those of the messages whose entry header is whole, a sub-batch's its num_records, and
    one for each message past them: exact when every entry header is whole)."""

    count: int
    ids: list[int]
    records: int


def whole_ids(buf: Any, pos: int, end: int, version: int) -> CutMessages | None:
    """A Publish cut by the capture: (its message count, the publishing ids whose bytes are
    whole, up to the first message that is not, its records at least), or None when its
    count is cut too."""
    if end - pos < 4:
        return None
    count = I32.unpack_from(buf, pos)[0]
    ids: list[int] = []
    records = 0
    pos += 4
    while len(ids) < count and end - pos >= 8:  # (a message takes 12 bytes at least)
        ids.append(ID.unpack_from(buf, pos)[0])
        if version == 1 and end - pos >= 12:  # (the usual cut: a simple entry past the end)
            word = U32.unpack_from(buf, pos + 8)[0]
            if word & 0x80000000 == 0 and pos + 12 + word > end:
                records += 1
                break
        try:
            entry = filter_end(buf, pos + 8, end) if version >= 2 else pos + 8
        except DecodeError:
            records += 1  # (its entry not reached: one record at least)
            break
        n = entry_records(buf, entry, end)
        records += 1 if n is None else n
        try:
            pos, _ = entry_end(buf, entry, end)
        except DecodeError:
            break
    return CutMessages(count, ids, records + max(count - len(ids), 0))


class PublishMessages(Slotted):
    """The messages of one Publish frame, decoded on iteration (a lazy, re-iterable view)."""

    __slots__ = field_names = ("data", "version")
    data: Any  # bytes or memoryview: the count field and every message
    version: int

    def __init__(self, data: Any, version: int) -> None:
        self.data = data
        self.version = version

    def __iter__(self) -> Iterator[PublishedMessage]:
        buf, version = self.data, self.version
        count = I32.unpack_from(buf, 0)[0]
        pos = 4
        for _ in range(count):
            publishing_id = ID.unpack_from(buf, pos)[0]
            pos += 8
            filter_value = None
            if version >= 2:
                n = I16.unpack_from(buf, pos)[0]
                pos += 2
                if n >= 0:
                    filter_value = str(buf[pos : pos + n], "utf-8", "surrogateescape")
                    pos += n
            entry, pos = read_entry(buf, pos, len(buf))
            yield PublishedMessage(publishing_id, filter_value, entry)

    def __len__(self) -> int:
        return I32.unpack_from(self.data, 0)[0]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PublishMessages):
            return self.version == other.version and bytes(self.data) == bytes(other.data)
        if isinstance(other, list):
            return list(self) == other
        return NotImplemented

    def __repr__(self) -> str:
        return f"PublishMessages(count={len(self)}, bytes={len(self.data)})"

    def to_list(self) -> list[dict[str, Any]]:
        """JSON-able form: entry is hex for a simple entry, a dict for a sub-batch."""
        result = []
        for message in self:
            entry = message.entry
            as_json: Any
            if isinstance(entry, SubBatch):
                as_json = entry._asdict() | {"data": entry.data.hex()}
            else:
                as_json = entry.hex()
            result.append({"publishing_id": message.publishing_id,
                           "filter_value": message.filter_value, "entry": as_json})  # fmt: skip
        return result


def _as_message(item: Any) -> PublishedMessage:
    """Accept PublishedMessage, a (id, filter, entry) tuple or a to_list() dict."""
    if isinstance(item, dict):
        entry = item["entry"]
        if isinstance(entry, str):
            entry = bytes.fromhex(entry)
        elif isinstance(entry, dict):
            entry = SubBatch(**(entry | {"data": bytes.fromhex(entry["data"])}))
        return PublishedMessage(item["publishing_id"], item.get("filter_value"), entry)
    publishing_id, filter_value, entry = item
    if isinstance(entry, tuple) and not isinstance(entry, SubBatch):
        entry = SubBatch(*entry)
    return PublishedMessage(publishing_id, filter_value, entry)


def encode_messages(messages: Iterable[Any], version: int) -> bytes:
    """`count:i32` + messages, the inverse of PublishMessages."""
    if isinstance(messages, PublishMessages) and messages.version == version:
        return bytes(messages.data)
    items = [_as_message(m) for m in messages]
    out = bytearray(I32.pack(len(items)))
    for publishing_id, filter_value, entry in items:
        out += ID.pack(publishing_id)
        if version >= 2:
            if filter_value is None:
                out += b"\xff\xff"
            else:
                raw = filter_value.encode("utf-8", "surrogateescape")
                out += I16.pack(len(raw)) + raw
        write_entry(out, entry)
    return bytes(out)


def id_run(ids: Any) -> Any:
    """Publishing ids first, first + 1, ... (what clients send) as a range (two ints, not
    one per message); any others as they are."""
    if ids.__class__ is list and ids:
        first, n = ids[0], len(ids)
        if ids[-1] - first == n - 1 and ids == list(range(first, first + n)):
            return range(first, first + n)
    return ids
