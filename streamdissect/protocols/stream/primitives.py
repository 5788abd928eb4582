"""Wire types of the Stream protocol, each able to compile itself into a reader and a writer.

A reader is `read(buf, pos, end) -> (value, new_pos)`; a writer is `write(out, value)`.
Readers check every length against `end` *before* slicing or allocating, so a hostile
count (2**31 elements with ten bytes left) fails fast instead of building a huge list.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from streamdissect.slotted import FrozenUnequal

Reader = Callable[[Any, int, int], tuple[Any, int]]
Writer = Callable[[bytearray, Any], None]

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")


class DecodeError(Exception):
    """Raised inside the codec only; decode_frame turns it into a Malformed/truncated record.

    `short` means the bytes ran out, which is truncation when the frame was cut by snaplen;
    then `count` is the element count of the list being read, when its count was whole,
    `partial` what of the field was whole (a list's whole elements) and `records` the records
    its elements hold at least, when they are records (a Publish's messages: sub-batches).
    """

    def __init__(self, reason: str, offset: int, short: bool = False,
                 count: int | None = None, partial: Any = None) -> None:  # fmt: skip
        super().__init__(reason)
        self.reason = reason
        self.offset = offset
        self.short = short
        self.count = count
        self.partial = partial
        self.records: int | None = None


def need(pos: int, n: int, end: int, what: str) -> None:
    if n > end - pos:
        raise DecodeError(f"{what}: needs {n} bytes, {end - pos} left", pos, short=True)


class WireType:
    """Base of every wire type. `min_size` bounds how many elements can fit in N bytes."""

    name: str = "?"
    column: str = "?"
    min_size: int = 0

    def reader(self) -> Reader:
        raise NotImplementedError

    def writer(self) -> Writer:
        raise NotImplementedError


class IntType(WireType):
    def __init__(self, name: str, fmt: str, column: str) -> None:
        self.name, self.fmt, self.column = name, fmt, column
        self.packer = struct.Struct(">" + fmt)
        self.min_size = self.packer.size

    @property
    def size(self) -> int:
        return self.packer.size

    def reader(self) -> Reader:
        unpack_from, size, name = self.packer.unpack_from, self.packer.size, self.name

        def read(buf: Any, pos: int, end: int) -> tuple[int, int]:
            if end - pos < size:
                raise DecodeError(f"{name}: needs {size} bytes, {end - pos} left", pos, True)
            return unpack_from(buf, pos)[0], pos + size

        return read

    def writer(self) -> Writer:
        pack = self.packer.pack

        def write(out: bytearray, value: int) -> None:
            out += pack(value)

        return write


U8 = IntType("u8", "B", "uint8")
U16 = IntType("u16", "H", "uint16")
U32 = IntType("u32", "I", "uint32")
U64 = IntType("u64", "Q", "uint64")
I8 = IntType("i8", "b", "int8")
INT16 = IntType("i16", "h", "int16")
INT32 = IntType("i32", "i", "int32")
INT64 = IntType("i64", "q", "int64")


class LengthPrefixedType(WireType):
    """A signed length (int16 for strings, int32 for bytes) then that many bytes; -1 is null
    (None). Strings keep invalid UTF-8 via surrogateescape so re-encoding is exact."""

    def __init__(self, name: str, column: str, length: struct.Struct, text: bool) -> None:
        self.name, self.column, self.length, self.text = name, column, length, text
        self.min_size = length.size

    def reader(self) -> Reader:
        unpack_from, width, name, text = (
            self.length.unpack_from,
            self.length.size,
            self.name,
            self.text,
        )

        def read(buf: Any, pos: int, end: int) -> tuple[Any, int]:
            need(pos, width, end, f"{name} length")
            n = unpack_from(buf, pos)[0]
            pos += width
            if n < 0:
                if n == -1:
                    return None, pos
                raise DecodeError(f"{name}: negative length {n}", pos - width)
            need(pos, n, end, name)
            raw = buf[pos : pos + n]
            return (str(raw, "utf-8", "surrogateescape") if text else bytes(raw)), pos + n

        return read

    def writer(self) -> Writer:
        pack, null, text = self.length.pack, self.length.pack(-1), self.text

        def write(out: bytearray, value: Any) -> None:
            if value is None:
                out += null
                return
            data = value.encode("utf-8", "surrogateescape") if text else value
            out += pack(len(data))
            out += data

        return write


STRING = LengthPrefixedType("string", "string", I16, text=True)
BYTES = LengthPrefixedType("bytes", "binary", I32, text=False)


def read_count(buf: Any, pos: int, end: int, min_size: int, what: str) -> tuple[int, int]:
    """An int32 element count, checked against the bytes left before anything is built."""
    need(pos, 4, end, f"{what} count")
    count = I32.unpack_from(buf, pos)[0]
    if count < 0:
        raise DecodeError(f"{what}: negative count {count}", pos)
    pos += 4
    if count * min_size > end - pos:
        raise DecodeError(
            f"{what}: count {count} cannot fit in {end - pos} bytes", pos - 4, short=True,
            count=count,
        )
    return count, pos


class StructType(FrozenUnequal, WireType):
    """A record inside an array; decoded as a dict with the given field names."""

    field_names = ("fields",)
    fields: tuple[tuple[str, WireType], ...]

    def __init__(self, fields: tuple[tuple[str, WireType], ...]) -> None:
        self._set(fields=fields)
        object.__setattr__(self, "min_size", sum(t.min_size for _, t in self.fields))
        inner = ",".join(f"{n}:{t.column}" for n, t in self.fields)
        object.__setattr__(self, "column", f"struct<{inner}>")
        object.__setattr__(self, "name", "struct")

    def reader(self) -> Reader:
        parts = tuple((n, t.reader()) for n, t in self.fields)

        def read(buf: Any, pos: int, end: int) -> tuple[dict[str, Any], int]:
            item = {}
            for name, read_field in parts:
                item[name], pos = read_field(buf, pos, end)
            return item, pos

        return read

    def writer(self) -> Writer:
        parts = tuple((n, t.writer()) for n, t in self.fields)

        def write(out: bytearray, value: dict[str, Any]) -> None:
            for name, write_field in parts:
                write_field(out, value[name])

        return write


class ArrayType(FrozenUnequal, WireType):
    """`count:i32` elements of one wire type."""

    field_names = ("element",)
    element: WireType

    def __init__(self, element: WireType) -> None:
        self._set(element=element)
        object.__setattr__(self, "column", f"list<{self.element.column}>")
        object.__setattr__(self, "name", f"[{self.element.name}]")
        object.__setattr__(self, "min_size", 4)

    def reader(self) -> Reader:
        read_element, min_size = self.element.reader(), max(self.element.min_size, 1)
        fixed = isinstance(self.element, IntType)
        fmt = self.element.fmt if fixed else ""  # type: ignore[attr-defined]

        def read(buf: Any, pos: int, end: int) -> tuple[list[Any], int]:
            cut = None  # why not every element is there: the frame ends first (snaplen)
            try:
                count, pos = read_count(buf, pos, end, min_size, "array")
            except DecodeError as exc:
                if exc.count is None:
                    raise
                cut, count, pos = exc, exc.count, pos + 4  # (then the elements that are whole)
            else:
                if fixed:  # one unpack for a run of integers
                    return (list(struct.unpack_from(f">{count}{fmt}", buf, pos)),
                            pos + count * min_size)  # fmt: skip
            items = []
            try:
                for _ in range(count):
                    item, pos = read_element(buf, pos, end)
                    items.append(item)
            except DecodeError as exc:
                if cut is None and not exc.short:
                    raise
                cut = cut or exc
            if cut is None:
                return items, pos
            cut.count, cut.partial = count, items
            raise cut

        return read

    def writer(self) -> Writer:
        write_element, pack = self.element.writer(), I32.pack

        def write(out: bytearray, value: list[Any]) -> None:
            out += pack(len(value))
            for item in value:
                write_element(out, item)

        return write


class MapType(FrozenUnequal, WireType):
    """int32 pair count + (key, value) pairs, decoded as a dict in wire order.

    A repeated key cannot be kept in a dict and would not re-encode to the same bytes, so
    it is reported as malformed rather than silently dropped.
    """

    field_names = ("key", "value")
    key: WireType
    value: WireType

    def __init__(self, key: WireType, value: WireType) -> None:
        self._set(key=key, value=value)
        object.__setattr__(self, "column", f"map<{self.key.column},{self.value.column}>")
        object.__setattr__(self, "name", "map")
        object.__setattr__(self, "min_size", 4)

    def reader(self) -> Reader:
        read_key, read_value = self.key.reader(), self.value.reader()
        pair_size = self.key.min_size + self.value.min_size

        def read(buf: Any, pos: int, end: int) -> tuple[dict[Any, Any], int]:
            count, pos = read_count(buf, pos, end, pair_size, "map")
            result: dict[Any, Any] = {}
            for _ in range(count):
                at = pos
                k, pos = read_key(buf, pos, end)
                v, pos = read_value(buf, pos, end)
                if k in result:
                    raise DecodeError(f"map: repeated key {k!r}", at)
                result[k] = v
            return result, pos

        return read

    def writer(self) -> Writer:
        write_key, write_value, pack = self.key.writer(), self.value.writer(), I32.pack

        def write(out: bytearray, value: dict[Any, Any]) -> None:
            out += pack(len(value))
            for k, v in value.items():
                write_key(out, k)
                write_value(out, v)

        return write


PROPERTIES = MapType(STRING, STRING)


class TrailingType(FrozenUnequal, WireType):
    """A last field the sender leaves out when empty: None means it was not on the wire."""

    field_names = ("inner",)
    inner: WireType

    def __init__(self, inner: WireType) -> None:
        self._set(inner=inner)
        object.__setattr__(self, "column", self.inner.column)
        object.__setattr__(self, "name", f"{self.inner.name}?")

    def reader(self) -> Reader:
        read_inner = self.inner.reader()

        def read(buf: Any, pos: int, end: int) -> tuple[Any, int]:
            if pos == end:
                return None, pos
            value, new_pos = read_inner(buf, pos, end)
            if value is None:  # a null here would re-encode as "absent"
                raise DecodeError("null in an optional trailing field", pos)
            return value, new_pos

        return read

    def writer(self) -> Writer:
        write_inner = self.inner.writer()

        def write(out: bytearray, value: Any) -> None:
            if value is not None:
                write_inner(out, value)

        return write


class OffsetValueType(WireType):
    """The value after an offset type: 8 bytes for types 4 (u64) and 5 (i64), else absent.

    `last_may_carry` is for a frame that ends with the offset spec (the ConsumerUpdate
    response): rstream always writes 8 bytes there, even for first/last/next (seen in
    captures/rstream-sac-4.0.pcap), so 8 trailing bytes are read (as i64) and kept.
    The codec passes the offset type read just before; see spec.OFFSET_SPEC.
    """

    name = "offset"
    column = "int64"
    min_size = 0

    def __init__(self, last_may_carry: bool = False) -> None:
        self.last_may_carry = last_may_carry


OFFSET_VALUE = OffsetValueType()
TRAILING_OFFSET_VALUE = OffsetValueType(last_may_carry=True)
