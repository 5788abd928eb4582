"""The scapy classes, generated from the protocol table (protocol/spec.py).

`StreamFrame` is the frame header (size, key, version); its payload is one class per command
and direction (`Subscribe`, `SubscribeResponse`, `Deliver`, ...) holding the correlation id,
the code and every body field of every version, version-gated fields as ConditionalFields on
the frame's version. A frame whose bytes do not fit its layout is a `StreamMalformed`
payload (with the codec's reason and offset), a key or version the table does not know a
`StreamUnknown`: dissection never raises.

The codec decides what a frame is (decode_frame); scapy then reads the fields of frames the
codec accepted, with fields that are the codec's own readers and writers where the value is
not a plain integer. So the two never disagree about where a frame is malformed, and the
bytes round-trip exactly.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum
from typing import Any, ClassVar

from scapy.config import conf as scapy_conf
from scapy.fields import (
    ByteEnumField,
    ConditionalField,
    Field,
    FieldLenField,
    IntField,
    LongField,
    PacketListField,
    ShortEnumField,
    ShortField,
    StrField,
    ThreeBytesField,
    XByteField,
    XIntField,
    XShortEnumField,
)
from scapy.layers.inet import TCP
from scapy.packet import NoPayload, Packet, bind_layers

from streamdissect.protocols.stream import osiris
from streamdissect.protocols.stream.codec import FRAME_HEADER, decode_frame, encode_record
from streamdissect.protocols.stream.codes import (
    ChunkType,
    CompressionType,
    OffsetType,
    ResponseCode,
)
from streamdissect.protocols.stream.framing import header_plausible
from streamdissect.protocols.stream.primitives import (
    BYTES,
    STRING,
    DecodeError,
    IntType,
    OffsetValueType,
    TrailingType,
)
from streamdissect.protocols.stream.publish import entry_end, filter_end, read_entry, write_entry
from streamdissect.protocols.stream.records import Malformed, Record, Unknown
from streamdissect.protocols.stream.spec import (
    CHUNK_HEADER,
    MESSAGES,
    PUBLISH_MESSAGES,
    REST,
    Message,
)
from streamdissect.protocols.stream.spec import Field as SpecField
from streamdissect.protocols.stream.summary import frame_summary
from streamdissect.scapy.fields import (
    INT_FIELDS,
    ChunkPayloadField,
    ComputedIntField,
    MetaField,
    OffsetValueField,
    SaslDataField,
    StreamBytesField,
    StreamStringField,
    int_field,
    wire_value_field,
)
from streamdissect.scapy.settings import conf

RESPONSE_BIT = 0x8000
ARROWS = {"client": "→", "server": "←"}  # as `streamdissect frames` shows c2s / s2c


def _names(enum: type[IntEnum]) -> dict[int, str]:
    return {member.value: member.name for member in enum}


KEY_NAMES = {m.key: m.class_name for m in MESSAGES}
ENUMS: dict[str, dict[int, str]] = {
    "code": _names(ResponseCode),
    "closing_code": _names(ResponseCode),
    "offset_type": _names(OffsetType),
    "chunk_type": _names(ChunkType),
}
# What a crafted packet holds when a field is not given: what real clients send most.
CRAFTING_DEFAULTS: dict[str, Any] = {
    "correlation_id": 1,
    "code": 1,  # OK
    "closing_code": 1,
    "offset_type": 1,  # FIRST
    "frame_max": 1048576,
    "heartbeat": 60,
    "virtual_host": "/",
    "mechanism": "PLAIN",
    "active": 1,
    "magic_version": 0x50,  # Osiris chunk format 5, version 0
    "epoch": 1,
}
COMMAND_DEFAULTS: dict[tuple[str, str], Any] = {
    ("Subscribe", "credit"): 10,
    ("Credit", "credit"): 1,
    ("ResolveOffsetSpec", "offset_type"): 1,
}


def crafting_default(command: str, name: str, wire: Any) -> Any:
    if (command, name) in COMMAND_DEFAULTS:
        return COMMAND_DEFAULTS[(command, name)]
    if name in CRAFTING_DEFAULTS:
        return CRAFTING_DEFAULTS[name]
    if isinstance(wire, (TrailingType, OffsetValueType)):
        return None
    if isinstance(wire, IntType):
        return 0
    if wire is STRING:
        return ""
    if wire is BYTES:
        return b""
    if wire.column.startswith("list<"):
        return []
    if wire.column.startswith("map<"):
        return {}
    return None


# ---------------------------------------------------------------------------------------
# The frame header


class ShownWhen(ConditionalField):
    """A ConditionalField that only hides from show(): its value reads as it is (0, [])."""

    def i2h(self, pkt: Any, val: Any) -> Any:
        return self.fld.i2h(pkt, val)


def _meta(name: str, default: Any, always: bool = False) -> Field:
    """A MetaField shown only when the capture set something (a crafted frame shows none):
    `always`, whenever the frame came from a capture; else when it is not the default."""
    if always:
        return ShownWhen(MetaField(name, default), lambda pkt: pkt.fields.get("sender") is not None)
    return ShownWhen(
        MetaField(name, default), lambda pkt: pkt.fields.get(name) not in (None, 0, [])
    )


class StreamFrame(Packet):
    """One RabbitMQ Stream frame: size (not counting itself), key, version; the body is
    the payload. Left unset, size, key and version are computed when built (the version:
    the lowest one that carries every field that was set)."""

    name = "RabbitMQ Stream"
    fields_desc = [
        IntField("size", None),
        XShortEnumField("key", None, KEY_NAMES),
        ShortField("version", None),
        # What the capture tells, never on the wire (see fields.MetaField):
        _meta("sender", None),  # "client" or "server"
        _meta("stream_offset", None, always=True),  # of the size field in its direction's stream
        _meta("gap_before", 0),  # bytes since the previous frame not framed (gaps, resync)
        _meta("anomalies", []),  # what the TCP layer and the framer met since then
        _meta("cut_header", None),  # the bytes of a header cut short (fewer than 8)
    ]
    show_summary = False

    def __init__(self, _pkt: Any = b"", *args: Any, **kwargs: Any) -> None:
        if isinstance(_pkt, (Record, Malformed, Unknown)):
            _pkt = _record_bytes(_pkt)
        super().__init__(_pkt, *args, **kwargs)

    @classmethod
    def from_record(cls, record: Record | Malformed | Unknown) -> StreamFrame:
        """The frame of a codec record (what `decode_frame` or `streamdissect.engine.dissect`
        gives), as scapy packets."""
        return cls(_record_bytes(record))

    # (scapy's reassembly hook, `tcp_reassemble`, is given to the class by bind.py: see
    # reassembly.py)

    # --- dissection --------------------------------------------------------------------

    def do_dissect(self, s: bytes) -> bytes:
        if len(s) >= FRAME_HEADER.size:
            return super().do_dissect(s)
        self.fields["cut_header"] = s  # fewer bytes than a header: kept as they are
        self.explicit = 1
        return b""

    def extract_padding(self, s: bytes) -> tuple[bytes, None]:
        return s, None  # do_dissect_payload splits the body from what follows

    def do_dissect_payload(self, s: bytes) -> None:
        size = self.size
        if size is None:  # a cut header (see do_dissect)
            return
        body_length = max(size - 4, 0) if size is not None and size <= conf.max_frame else len(s)
        body, rest = s[:body_length], s[body_length:]
        self.add_payload(self._dissect_body(body))
        if rest:
            if complete_frame_at(rest):
                nxt: Packet = StreamFrame(rest, _internal=1, _underlayer=self.lastlayer())
            else:
                nxt = scapy_conf.padding_layer(rest, _internal=1)
            self.add_payload(nxt)

    def _dissect_body(self, body: bytes) -> Packet:
        header = FRAME_HEADER.pack(self.size or 0, self.key or 0, self.version or 0)
        if self.size is not None and self.size > conf.max_frame:
            reason = f"absurd frame length {self.size} (limit {conf.max_frame})"
            return StreamMalformed(body, _internal=1, _underlayer=self, reason=reason, offset=0)
        short = self.size is not None and len(body) < self.size - 4
        record = decode_frame(header + body, declared_size=self.size if short else None)
        if isinstance(record, Malformed):
            return StreamMalformed(
                body, _internal=1, _underlayer=self, reason=record.reason, offset=record.offset
            )
        body_class = BODY_CLASSES.get(self.key) if isinstance(record, Record) else None
        if body_class is None:
            return StreamUnknown(body, _internal=1, _underlayer=self)
        if record.truncated:  # the bytes stop inside the body: kept as they are
            return StreamTruncated(body, _internal=1, _underlayer=self)
        try:
            return body_class(body, _internal=1, _underlayer=self)
        except (DecodeError, struct.error, IndexError, ValueError) as exc:
            reason = f"scapy layer could not read what the codec read: {exc!r}"
            return StreamMalformed(body, _internal=1, _underlayer=self, reason=reason, offset=8)

    # --- building ----------------------------------------------------------------------

    def _header(self, body_length: int) -> bytes:
        body = self.payload
        size = self.size if self.size is not None else body_length + 4
        key = self.key
        if key is None:
            message = getattr(body, "message", None)
            key = message.key if message is not None else 0
        version = self.version
        if version is None:
            version = body.natural_version() if isinstance(body, FrameBody) else 1
        return FRAME_HEADER.pack(size, key, version)

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        if self.cut_header is not None:
            return bytes(self.cut_header)
        body = self.payload
        body_length = len(body.self_build()) if isinstance(body, FrameBody) else len(pay)
        return self._header(body_length) + pkt[FRAME_HEADER.size :] + pay

    def frame_bytes(self) -> bytes:
        """This frame's bytes alone (not those of the frames chained after it)."""
        if self.cut_header is not None:
            return bytes(self.cut_header)
        body = self.payload
        data = body.self_build() if isinstance(body, FrameBody) else b""
        return self._header(len(data)) + data

    # --- codec ---------------------------------------------------------------------------

    def to_record(self) -> Record | Malformed | Unknown:
        """This frame as a codec record (what the analyses take)."""
        data = self.frame_bytes()
        if len(data) < FRAME_HEADER.size:
            return decode_frame(data)
        size = FRAME_HEADER.unpack_from(data)[0]
        short = len(data) - 4 < size
        return decode_frame(data, declared_size=size if short else None)

    def frames(self) -> list[StreamFrame]:
        """This frame and those chained after it (one TCP segment can end several)."""
        found, layer = [], self
        while layer is not None and not isinstance(layer, NoPayload):
            if isinstance(layer, StreamFrame):
                found.append(layer)
            layer = layer.payload
        return found

    # --- request/response pairing (sr1, sr) ------------------------------------------------

    def _command_and_corr(self) -> tuple[int, int | None]:
        key = self.key
        if key is None:
            message = getattr(self.payload, "message", None)
            key = message.key if message is not None else 0
        corr = getattr(self.payload, "correlation_id", None) if self._has_corr() else None
        return key, corr

    def _has_corr(self) -> bool:
        message = getattr(self.payload, "message", None)
        return message is not None and message.correlation_id

    def hashret(self) -> bytes:
        key, corr = self._command_and_corr()
        return struct.pack(">HI", key & ~RESPONSE_BIT, corr or 0)

    def answers(self, other: Packet) -> int:
        """A response answers the request of the same command and correlation id; a Tune
        answers a Tune (the two sides' offers)."""
        if not isinstance(other, StreamFrame):
            return 0
        asked, asked_corr = other._command_and_corr()
        for frame in self.frames():
            key, corr = frame._command_and_corr()
            if key & ~RESPONSE_BIT != asked & ~RESPONSE_BIT:
                continue
            if key & ~RESPONSE_BIT == 0x0014:  # Tune: no correlation id, either side offers
                return 1
            if key & RESPONSE_BIT and not asked & RESPONSE_BIT and corr == asked_corr:
                return 1
        return 0

    def mysummary(self) -> str:
        if self.cut_header is not None:
            return f"RabbitMQ Stream [a frame cut after {len(self.cut_header)} bytes]"
        return ""


def _record_bytes(record: Record | Malformed | Unknown) -> bytes:
    if isinstance(record, Record) and record.truncated:
        raise ValueError("a truncated record cannot make a frame: its bytes are not all known")
    return encode_record(record)


def complete_frame_at(data: bytes) -> bool:
    """Does `data` start with a whole, plausible frame (then it is dissected as the next
    frame; else it stays Padding, which is how scapy's StreamSocket knows what to keep)?"""
    if len(data) < 8:
        return False
    size, key, version = FRAME_HEADER.unpack_from(data)
    return header_plausible(size, key, version, conf.max_frame) and len(data) >= 4 + size


# ---------------------------------------------------------------------------------------
# Bodies


class FrameBody(Packet):
    """A frame's body; the class knows its command (`message`, the table's entry)."""

    message: ClassVar[Message | None] = None
    gated: ClassVar[dict[str, int]] = {}  # field name -> first version carrying it

    def natural_version(self) -> int:
        """The lowest version that carries every field set on this packet."""
        message = self.message
        if message is None:
            return 1
        needed = max(
            (self.gated.get(name, 1) for name, value in self.fields.items() if value is not None),
            default=1,
        )
        return min((v for v in message.versions if v >= needed), default=message.versions[-1])

    def frame_version(self) -> int:
        frame = self.underlayer
        if isinstance(frame, StreamFrame) and frame.version is not None:
            return frame.version
        return self.natural_version()

    def to_record(self) -> Record | Malformed | Unknown:
        frame = self.underlayer
        if isinstance(frame, StreamFrame):
            return frame.to_record()
        return (StreamFrame() / self.copy()).to_record()

    def mysummary(self) -> tuple[str, list[type[Packet]]]:
        frame = self.underlayer
        text = frame_summary(self.to_record(), show_secrets=conf.show_secrets)
        if isinstance(frame, StreamFrame):
            if frame.sender in ARROWS:
                text = f"{ARROWS[frame.sender]} {text}"
            if frame.gap_before:
                text += f" [{frame.gap_before} bytes not framed before it]"
        return text, [TCP, *SUMMARISED]


class StreamMalformed(FrameBody):
    """A frame body that does not fit its command's layout: the bytes as they are, and the
    codec's reason and offset (within the frame, the size field at 0)."""

    name = "RabbitMQ Stream malformed frame"
    fields_desc = [StrField("load", b""), MetaField("reason", ""), MetaField("offset", None)]


class StreamUnknown(FrameBody):
    """A frame of a key or version the protocol table does not know."""

    name = "RabbitMQ Stream unknown frame"
    fields_desc = [StrField("load", b"")]


class StreamTruncated(FrameBody):
    """The known first bytes of a frame whose end is missing (snaplen, lost segments)."""

    name = "RabbitMQ Stream truncated frame"
    fields_desc = [StrField("load", b"")]


class StreamSegment(Packet):
    """A TCP segment that ended no frame (the middle of a large one, or bytes skipped while
    resynchronising): Wireshark's "TCP segment of a reassembled PDU"."""

    name = "RabbitMQ Stream segment"
    fields_desc = [
        StrField("load", b""),
        MetaField("sender", None),
        MetaField("anomalies", []),
    ]

    def mysummary(self) -> tuple[str, list[type[Packet]]]:
        arrow = ARROWS.get(self.sender, "")
        return f"{arrow} [segment of a frame, {len(self.load)} bytes]".strip(), [TCP]


# --- Publish messages and Deliver's chunk header ---------------------------------------------


class PublishEntryField(Field[Any, bytes]):
    """A published message's entry: bytes (a simple entry) or a protocol.publish.SubBatch,
    read and written by the codec's own entry functions."""

    __slots__ = ()

    def __init__(self, name: str, default: Any) -> None:
        Field.__init__(self, name, default, fmt="B")

    def getfield(self, pkt: Any, s: bytes) -> tuple[bytes, Any]:
        entry, stop = read_entry(s, 0, len(s))
        return s[stop:], entry

    def addfield(self, pkt: Any, s: bytes, val: Any) -> bytes:
        out = bytearray()
        write_entry(out, b"" if val is None else val)
        return s + bytes(out)

    def i2m(self, pkt: Any, x: Any) -> Any:
        return x

    def m2i(self, pkt: Any, x: Any) -> Any:
        return x

    def any2i(self, pkt: Any, x: Any) -> Any:
        return x.encode() if isinstance(x, str) else x

    def i2repr(self, pkt: Any, x: Any) -> str:
        if isinstance(x, (bytes, bytearray)) and len(x) > 32:
            return f"<{len(x)} bytes: {bytes(x[:24]).hex()}...>"
        if hasattr(x, "compression"):
            name = CompressionType(x.compression).name if x.compression < 5 else x.compression
            return (
                f"SubBatch({name}, {x.num_records} records, "
                f"{len(x.data)} -> {x.uncompressed_length} bytes)"
            )
        return repr(x)


def _message_version(pkt: Packet) -> int:
    parent = pkt.parent
    if isinstance(parent, FrameBody):
        return parent.frame_version()
    return 2 if pkt.fields.get("filter_value") is not None else 1


class PublishedMessage(Packet):
    """One message of a Publish frame; `filter_value` is on the wire from Publish v2 on."""

    name = "RabbitMQ Stream published message"
    fields_desc = [
        LongField("publishing_id", 0),
        ConditionalField(
            StreamStringField("filter_value", None), lambda pkt: _message_version(pkt) >= 2
        ),
        PublishEntryField("entry", b""),
    ]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s


def _chunk_entries(pkt: Packet) -> list[Any]:
    data = bytes(pkt.chunk_payload or b"")[: _data_length(pkt)]
    return [
        e
        for e in osiris.iter_entries(memoryview(data), pkt.chunk_id or 0)
        if isinstance(e, osiris.Entry)
    ]


def _data_length(pkt: Packet) -> int:
    if pkt.data_length is not None:
        return pkt.data_length
    return max(len(pkt.chunk_payload or b"") - (pkt.trailer_length or 0), 0)


CHUNK_FIELD_DEFAULTS = {"num_entries": None, "num_records": None, "data_length": None, "crc": None}
CHUNK_COMPUTED = {
    "num_entries": lambda pkt: len(_chunk_entries(pkt)),
    "num_records": lambda pkt: sum(e.num_records for e in _chunk_entries(pkt)),
    "data_length": _data_length,
    "crc": lambda pkt: zlib.crc32(bytes(pkt.chunk_payload or b"")[: _data_length(pkt)]),
}
HEX_FIELDS: dict[str, type[Field]] = {"magic_version": XByteField, "crc": XIntField}


def chunk_header_fields() -> list[Field]:
    """The 48-byte Osiris chunk header as one field each, from osiris.HEADER's layout;
    counts, lengths and the CRC are computed from chunk_payload when left unset."""
    fields: list[Field] = []
    for name, fmt in zip(osiris.HEADER_FIELDS[:-1], osiris.HEADER.format[1:]):
        default = CHUNK_FIELD_DEFAULTS.get(name, CRAFTING_DEFAULTS.get(name, 0))
        if name in ENUMS:
            field: Field = ByteEnumField(name, default, ENUMS[name])
        elif name in HEX_FIELDS:
            field = HEX_FIELDS[name](name, default)
        else:
            field = INT_FIELDS[fmt](name, default)
        if name in CHUNK_COMPUTED:
            field = ComputedIntField(field, CHUNK_COMPUTED[name])
        fields.append(field)
    fields.append(ThreeBytesField(osiris.HEADER_FIELDS[-1], 0))  # reserved: 3 bytes
    return fields


# --- generation ------------------------------------------------------------------------------


class MessageListField(PacketListField):
    """Publish's messages: as many as the count says and the frame's bytes hold, not scapy's
    `conf.max_list_count` (100): batches of thousands are what clients send. The count is
    checked against the bytes before anything is built (as in the codec: a hostile count
    stays bounded by the frame), then each message is cut out where the codec's walk says it
    ends and dissected on its own bytes (scapy's loop would copy the rest of the frame for
    every message: quadratic on a batch of thousands)."""

    __slots__ = ()

    def getfield(self, pkt: Any, s: bytes) -> tuple[bytes, list[Packet]]:
        version = pkt.frame_version() if isinstance(pkt, FrameBody) else 1
        messages, pos = [], 0
        for end in message_ends(s, self.count_from(pkt) or 0, version):
            messages.append(PublishedMessage(s[pos:end], _parent=pkt))
            pos = end
        return s[pos:], messages


def message_ends(s: bytes, count: int, version: int) -> list[int]:
    """Where each of `count` published messages ends in `s`, walked as the codec walks them
    (protocol/publish.py); DecodeError when the count or a message does not fit."""
    if count < 0:
        raise DecodeError(f"publish: negative message count {count}", 0)
    if count * (12 if version == 1 else 14) > len(s):
        raise DecodeError(f"publish: {count} messages cannot fit", 0, True)
    ends, pos, end = [], 0, len(s)
    for _ in range(count):
        if end - pos < 8:
            raise DecodeError("publish message cut short", pos, True)
        at = pos + 8 if version == 1 else filter_end(s, pos + 8, end)
        pos = entry_end(s, at, end)[0]
        ends.append(pos)
    return ends


def _publish_fields() -> list[Field]:
    return [
        FieldLenField("message_count", None, count_of="messages", fmt="!i"),
        # (max_count: the count field's own range; the bytes bound the list, see above)
        MessageListField(
            "messages",
            [],
            PublishedMessage,
            count_from=lambda pkt: pkt.message_count,
            max_count=2**31,
        ),
    ]


def _body_fields(message: Message, field: SpecField) -> list[Field]:
    wire, name, command = field.type, field.name, message.command
    default = crafting_default(command, name, wire)
    if wire is CHUNK_HEADER:
        return chunk_header_fields()
    if wire is PUBLISH_MESSAGES:
        return _publish_fields()
    if wire is REST:
        return [ChunkPayloadField(name, b"")]
    if isinstance(wire, OffsetValueType):
        return [OffsetValueField(name, default, "offset_type", wire.last_may_carry)]
    if isinstance(wire, IntType):
        if name in ENUMS:
            enum_class = ShortEnumField if wire.size == 2 else ByteEnumField
            return [enum_class(name, default, ENUMS[name])]
        return [int_field(name, wire, default)]
    if name == "sasl_data":
        return [SaslDataField(name, default)]
    if wire is STRING:
        return [StreamStringField(name, default)]
    if wire is BYTES:
        return [StreamBytesField(name, default)]
    return [wire_value_field(name, default, wire)]


def _gate(field: Field, since: int) -> Field:
    return ConditionalField(field, lambda pkt: pkt.frame_version() >= since)


def _make_body_class(message: Message) -> type[FrameBody]:
    fields: list[Field] = []
    if message.correlation_id:
        fields.append(IntField("correlation_id", CRAFTING_DEFAULTS["correlation_id"]))
    if message.code:
        fields.append(ShortEnumField("code", CRAFTING_DEFAULTS["code"], ENUMS["code"]))
    gated = {}
    for spec_field in message.fields:
        for field in _body_fields(message, spec_field):
            if spec_field.since > 1:
                gated[field.name] = spec_field.since
                field = _gate(field, spec_field.since)
            fields.append(field)
    versions = ", ".join(f"v{v}" for v in message.versions)
    return type(
        message.class_name,
        (FrameBody,),
        {
            "__module__": __name__,
            "__doc__": f"RabbitMQ Stream {message.class_name} (key 0x{message.key:04x}, {versions}),"
            " generated from protocol/spec.py.",
            "name": f"RabbitMQ Stream {message.class_name}",
            "fields_desc": fields,
            "message": message,
            "gated": gated,
        },
    )


def _publish_natural_version(self: FrameBody) -> int:
    messages = self.fields.get("messages") or []
    if any(m.fields.get("filter_value") is not None for m in messages):
        return 2
    return FrameBody.natural_version(self)


BODY_CLASSES: dict[int, type[FrameBody]] = {m.key: _make_body_class(m) for m in MESSAGES}
BODY_CLASSES[0x0002].natural_version = _publish_natural_version  # type: ignore[method-assign]
SUMMARISED: list[type[Packet]] = [
    *BODY_CLASSES.values(),
    StreamMalformed,
    StreamUnknown,
    StreamTruncated,
]
for _key, _cls in BODY_CLASSES.items():
    bind_layers(StreamFrame, _cls, key=_key)  # the key is filled in when stacking
globals().update({cls.__name__: cls for cls in BODY_CLASSES.values()})
