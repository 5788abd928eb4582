"""scapy fields over the codec's wire types (protocol/primitives.py).

Integers map onto scapy's own integer fields (so enums, `fuzz()` and `ls()` work as usual);
everything else (strings, bytes, arrays, maps, optional trailing fields) is read and written
by the codec's own reader and writer, so the layer's values are exactly the codec records'
values (str, bytes, list, dict) and the bytes round-trip exactly.
"""

from __future__ import annotations

import copy
import reprlib
import struct
from collections.abc import Callable
from typing import Any

from scapy.fields import (
    ByteField,
    Field,
    IntField,
    LongField,
    ShortField,
    SignedIntField,
    SignedLongField,
    SignedShortField,
    StrField,
)

from streamdissect.protocols.stream.primitives import (
    BYTES,
    STRING,
    DecodeError,
    IntType,
    LengthPrefixedType,
    WireType,
)
from streamdissect.protocols.stream.records import redact_sasl

INT_FIELDS: dict[str, type[Field]] = {
    "B": ByteField,
    "H": ShortField,
    "I": IntField,
    "Q": LongField,
    "h": SignedShortField,
    "i": SignedIntField,
    "q": SignedLongField,
}


class _WireOrderRepr(reprlib.Repr):
    """reprlib, but maps keep wire order (reprlib sorts their keys)."""

    def repr_dict(self, x: dict, level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        items = [
            f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}"
            for k, v in list(x.items())[: self.maxdict]
        ]
        more = ", ..." if len(x) > self.maxdict else ""
        return "{" + ", ".join(items) + more + "}"


_short_repr = _WireOrderRepr()
_short_repr.maxstring = 80
_short_repr.maxother = 80
_short_repr.maxlist = 12
_short_repr.maxdict = 12
_short_repr.maxlevel = 4


def int_field(name: str, wire_type: IntType, default: int | None) -> Field:
    return INT_FIELDS[wire_type.fmt](name, default)


class WireValueField(Field[Any, bytes]):
    """A field the codec's wire type reads and writes; a DecodeError while dissecting
    propagates, and the frame layer then marks the frame malformed (see layers.py)."""

    __slots__ = ("_read", "_write", "wire_type")
    ismutable = True
    islist = 1  # a list value is one value (scapy would make a packet per element)

    def __init__(self, name: str, default: Any, wire_type: WireType) -> None:
        Field.__init__(self, name, default, fmt="B")
        self.wire_type = wire_type
        self._read = wire_type.reader()
        self._write = wire_type.writer()

    def getfield(self, pkt: Any, s: bytes) -> tuple[bytes, Any]:
        value, pos = self._read(s, 0, len(s))
        return s[pos:], value

    def addfield(self, pkt: Any, s: bytes, val: Any) -> bytes:
        out = bytearray()
        self._write(out, self.any2i(pkt, val))
        return s + bytes(out)

    def i2len(self, pkt: Any, x: Any) -> int:
        out = bytearray()
        self._write(out, x)
        return len(out)

    def i2m(self, pkt: Any, x: Any) -> Any:
        return x

    def m2i(self, pkt: Any, x: Any) -> Any:
        return x

    def i2repr(self, pkt: Any, x: Any) -> str:
        return _short_repr.repr(x)

    def do_copy(self, x: Any) -> Any:
        return copy.deepcopy(x)

    def randval(self) -> Any:
        return self.default


_KIND_CLASSES: dict[str, type[WireValueField]] = {}


def wire_value_field(name: str, default: Any, wire_type: WireType) -> WireValueField:
    """A WireValueField whose class name says its wire type in ls(): ArrayField, MapField,
    OptionalMapField (a trailing field the sender may leave out)..."""
    kind = _kind(wire_type)
    cls = _KIND_CLASSES.get(kind)
    if cls is None:
        cls = _KIND_CLASSES[kind] = type(kind, (WireValueField,), {"__slots__": ()})
    return cls(name, default, wire_type)


def _kind(wire_type: WireType) -> str:
    inner = getattr(wire_type, "inner", None)
    if inner is not None:
        return "Optional" + _kind(inner)
    return {"string": "StreamStringField", "bytes": "StreamBytesField", "map": "MapField",
            "struct": "StructField"}.get(wire_type.name, "ArrayField" if wire_type.name.startswith(
                "[") else "WireValueField")  # fmt: skip


class StreamStringField(WireValueField):
    """int16 length + UTF-8 (None is the null string, length -1)."""

    def __init__(self, name: str, default: str | None = "") -> None:
        super().__init__(name, default, STRING)

    def any2i(self, pkt: Any, x: Any) -> Any:
        if isinstance(x, (bytes, bytearray)):
            return bytes(x).decode("utf-8", "surrogateescape")
        return x


class StreamBytesField(WireValueField):
    """int32 length + bytes (None is null, length -1)."""

    def __init__(
        self, name: str, default: bytes | None = b"", wire_type: LengthPrefixedType = BYTES
    ) -> None:
        super().__init__(name, default, wire_type)

    def any2i(self, pkt: Any, x: Any) -> Any:
        return x.encode("utf-8", "surrogateescape") if isinstance(x, str) else x


class SaslDataField(StreamBytesField):
    """SaslAuthenticate's data: PLAIN passwords are masked when shown (show(), summary(),
    repr) unless `streamdissect.scapy.conf.show_secrets` is set; `pkt.sasl_data` and the
    built bytes are always the real ones."""

    def i2repr(self, pkt: Any, x: Any) -> str:
        from streamdissect.scapy.settings import conf

        if x is None or conf.show_secrets:
            return repr(x)
        return repr(redact_sasl(getattr(pkt, "mechanism", None), x))


class OffsetValueField(Field[Any, bytes]):
    """The 8 bytes after an offset type: u64 for type 4 (offset), i64 for 5 (timestamp),
    absent for the others. `last_may_carry`: at the end of a frame 8 bytes are read whatever
    the type (rstream writes them in ConsumerUpdate responses; see primitives.py)."""

    __slots__ = ("last_may_carry", "type_field")
    U64 = struct.Struct(">Q")
    I64 = struct.Struct(">q")

    def __init__(
        self, name: str, default: int | None, type_field: str, last_may_carry: bool = False
    ) -> None:
        Field.__init__(self, name, default, fmt="Q")
        self.type_field = type_field
        self.last_may_carry = last_may_carry

    def _packer(self, pkt: Any) -> struct.Struct:
        return self.U64 if getattr(pkt, self.type_field) == 4 else self.I64

    def _present(self, pkt: Any, s: bytes | None, value: Any) -> bool:
        if getattr(pkt, self.type_field) in (4, 5):
            return True
        if not self.last_may_carry:
            return False
        return value is not None if s is None else len(s) > 0

    def getfield(self, pkt: Any, s: bytes) -> tuple[bytes, Any]:
        if not self._present(pkt, s, None):
            return s, None
        if len(s) < 8:
            raise DecodeError("offset: needs 8 bytes", 0, True)
        return s[8:], self._packer(pkt).unpack_from(s)[0]

    def addfield(self, pkt: Any, s: bytes, val: Any) -> bytes:
        if not self._present(pkt, None, val):
            return s
        return s + self._packer(pkt).pack(val or 0)

    def i2len(self, pkt: Any, x: Any) -> int:
        return 8 if self._present(pkt, None, x) else 0


class ComputedIntField(Field[int, int]):
    """An integer scapy fills in at build time when left unset (None), from the packet."""

    __slots__ = ("compute", "inner")

    def __init__(self, inner: Field, compute: Callable[[Any], int]) -> None:
        Field.__init__(self, inner.name, inner.default, inner.fmt)
        self.inner = inner
        self.compute = compute

    def i2m(self, pkt: Any, x: Any) -> int:
        return self.compute(pkt) if x is None and pkt is not None else self.inner.i2m(pkt, x)

    def addfield(self, pkt: Any, s: bytes, val: Any) -> bytes:
        return self.inner.addfield(pkt, s, self.i2m(pkt, val))

    def getfield(self, pkt: Any, s: bytes) -> tuple[bytes, int]:
        return self.inner.getfield(pkt, s)

    def i2repr(self, pkt: Any, x: Any) -> str:
        return self.inner.i2repr(pkt, x)


class ChunkPayloadField(StrField):
    """The bytes of a Deliver's chunk after its header (data entries, then any trailer); shown
    shortened."""

    def i2repr(self, pkt: Any, x: Any) -> str:
        if x is None:
            return "None"
        x = bytes(x)
        return repr(x) if len(x) <= 32 else f"<{len(x)} bytes: {x[:24].hex()}...>"


class MetaField(Field[Any, bytes]):
    """What the capture tells about a frame but the frame's bytes do not (the gap before it,
    the anomalies met since the previous frame of its direction...): shown by show() and
    kept by copy(), never on the wire."""

    __slots__ = ()
    ismutable = True
    islist = 1  # a list value is one value (scapy would make a packet per element)

    def __init__(self, name: str, default: Any) -> None:
        Field.__init__(self, name, default, fmt="B")

    def addfield(self, pkt: Any, s: bytes, val: Any) -> bytes:
        return s

    def getfield(self, pkt: Any, s: bytes) -> tuple[bytes, Any]:
        return s, copy.copy(self.default)

    def i2len(self, pkt: Any, x: Any) -> int:
        return 0

    def i2m(self, pkt: Any, x: Any) -> Any:
        return x

    def i2repr(self, pkt: Any, x: Any) -> str:
        return _short_repr.repr(x)

    def do_copy(self, x: Any) -> Any:
        return copy.copy(x)

    def randval(self) -> Any:
        return self.default
