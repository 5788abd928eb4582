"""THE protocol table: one entry per (command, direction), in the spirit of Kafka's schemas.

Everything else derives from it: the compiled decoders and encoders (codec.py), the record
classes (records.py), the dict/JSON names and the column list for Arrow/Spark (`columns`).
Layouts follow docs/protocol.md §1.5 (the server's real encoder), which
corrects the .adoc reference in a few places (SaslHandshake request, Metadata response,
omitted trailing maps, CreditResponse without correlation id, signed credit).
Adding a command is one `_pair(...)` line here plus a test with real bytes.
"""

from __future__ import annotations

from typing import NamedTuple

from streamdissect.protocols.stream.codes import RESPONSE_BIT
from streamdissect.protocols.stream.primitives import (
    BYTES,
    INT16,
    INT64,
    OFFSET_VALUE,
    PROPERTIES,
    STRING,
    TRAILING_OFFSET_VALUE,
    U8,
    U16,
    U32,
    U64,
    ArrayType,
    MapType,
    StructType,
    TrailingType,
    WireType,
)
from streamdissect.slotted import Frozen


class PublishMessagesType(WireType):
    """Publish's `count:i32` + messages; decoded by a hand-written hot path in codec.py. A v1
    message starts with its publishing id and its entry's first word (`message_head`: a
    simple entry's 0:1,size:31; a sub-batch sets the top bit)."""

    name = "publish_messages"
    column = "list<struct<publishing_id:uint64,filter_value:string,entry:binary>>"
    min_size = 4
    message_head = (("publishing_id", U64), ("entry_word", U32))


class ChunkHeaderType(WireType):
    """The 48-byte Osiris chunk header (facts §3.1), decoded as a dict of its fields."""

    name = "chunk_header"
    column = (
        "struct<magic_version:uint8,chunk_type:uint8,num_entries:uint16,num_records:uint32,"
        "timestamp:int64,epoch:uint64,chunk_id:uint64,crc:uint32,data_length:uint32,"
        "trailer_length:uint32,bloom_size:uint8,reserved:uint32>"
    )
    min_size = 48


class RestType(WireType):
    """All remaining bytes of the frame (the Osiris chunk after its header)."""

    name = "rest"
    column = "binary"
    min_size = 0


PUBLISH_MESSAGES = PublishMessagesType()
CHUNK_HEADER = ChunkHeaderType()
REST = RestType()
BOOL = type("BoolColumn", (WireType,), {"name": "bool", "column": "bool"})()


class Field(Frozen):
    """A body field of a message: its name, wire type, and the first version with it."""

    __slots__ = field_names = ("name", "type", "since")
    name: str
    type: WireType
    since: int  # first version that carries the field (version-gated fields)

    def __init__(self, name: str, type: WireType, since: int = 1) -> None:
        self._set(name=name, type=type, since=since)


class Message(Frozen):
    """One direction of one command."""

    __slots__ = field_names = ("command", "key", "response", "sender", "correlation_id", "code",
                               "versions", "fields", "derived", "class_name")  # fmt: skip
    command: str
    key: int  # as on the wire, response bit included
    response: bool
    sender: str  # "client", "server" or "either"
    correlation_id: bool
    code: bool
    versions: tuple[int, ...]
    fields: tuple[Field, ...]
    derived: tuple[Field, ...]  # computed from the wire fields, never encoded
    class_name: str

    def __init__(self, command: str, key: int, response: bool, sender: str,
                 correlation_id: bool, code: bool, versions: tuple[int, ...],
                 fields: tuple[Field, ...], derived: tuple[Field, ...] = (),
                 class_name: str = "") -> None:  # fmt: skip
        self._set(command=command, key=key, response=response, sender=sender,
                  correlation_id=correlation_id, code=code, versions=versions, fields=fields,
                  derived=derived, class_name=class_name)  # fmt: skip

    def fields_for(self, version: int) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.since <= version)


class _Side(NamedTuple):
    """One direction of a command as `_pair` takes it (spec.Message's fields). A named
    tuple: a frozen dataclass's six methods were made (source compiled) at every start for
    the ~60 uses of this table's building."""

    fields: tuple[Field, ...] = ()
    corr: bool = True
    code: bool = False
    sender: str = "client"
    derived: tuple[Field, ...] = ()
    versions: tuple[int, ...] = (1,)


def _f(spec: str, wire_type: WireType, since: int = 1) -> Field:
    return Field(spec, wire_type, since)


OFFSET_SPEC = (_f("offset_type", U16), _f("offset", OFFSET_VALUE))
LAST_OFFSET_SPEC = (_f("offset_type", U16), _f("offset", TRAILING_OFFSET_VALUE))
STREAMS = _f("streams", ArrayType(STRING))
ACK = _Side(code=True, sender="server")  # a response that is corr + code only

MESSAGES: list[Message] = []


def _pair(key: int, command: str, request: _Side | None, response: _Side | None) -> None:
    for side, is_response in ((request, False), (response, True)):
        if side is None:
            continue
        MESSAGES.append(
            Message(
                command=command,
                key=key | (RESPONSE_BIT if is_response else 0),
                response=is_response,
                sender=side.sender,
                correlation_id=side.corr,
                code=side.code,
                versions=side.versions,
                fields=side.fields,
                derived=side.derived,
                class_name=command + ("Response" if is_response else ""),
            )
        )


def _req(*fields: Field, corr: bool = True, sender: str = "client", **kw: object) -> _Side:
    return _Side(fields=fields, corr=corr, sender=sender, **kw)  # type: ignore[arg-type]


def _resp(*fields: Field, corr: bool = True, code: bool = True, **kw: object) -> _Side:
    return _Side(fields=fields, corr=corr, code=code, sender="server", **kw)  # type: ignore[arg-type]


_pair(
    0x01,
    "DeclarePublisher",
    _req(_f("publisher_id", U8), _f("publisher_reference", STRING), _f("stream", STRING)),
    ACK,
)
_pair(
    0x02,
    "Publish",
    _req(
        _f("publisher_id", U8),
        _f("messages", PUBLISH_MESSAGES),
        corr=False,
        versions=(1, 2),
        derived=(_f("publishing_ids", ArrayType(U64)), _f("record_count", U32)),
    ),
    None,
)
_pair(
    0x03,
    "PublishConfirm",
    _req(_f("publisher_id", U8), _f("publishing_ids", ArrayType(U64)), corr=False, sender="server"),
    None,
)
_pair(
    0x04,
    "PublishError",
    _req(
        _f("publisher_id", U8),
        _f("errors", ArrayType(StructType((("publishing_id", U64), ("code", U16))))),
        corr=False,
        sender="server",
    ),
    None,
)
_pair(
    0x05,
    "QueryPublisherSequence",
    _req(_f("publisher_reference", STRING), _f("stream", STRING)),
    _resp(_f("sequence", U64)),
)
_pair(0x06, "DeletePublisher", _req(_f("publisher_id", U8)), ACK)
_pair(
    0x07,
    "Subscribe",
    _req(
        _f("subscription_id", U8),
        _f("stream", STRING),
        *OFFSET_SPEC,
        _f("credit", U16),
        _f("properties", TrailingType(PROPERTIES)),
    ),
    ACK,
)
_pair(
    0x08,
    "Deliver",
    _req(
        _f("subscription_id", U8),
        _f("committed_chunk_id", U64, since=2),
        _f("chunk", CHUNK_HEADER),
        _f("chunk_payload", REST),
        corr=False,
        sender="server",
        versions=(1, 2),
        derived=(_f("record_count", U32), _f("entry_count", U16), _f("crc_ok", BOOL)),
    ),
    None,
)
_pair(
    0x09,
    "Credit",
    _req(_f("subscription_id", U8), _f("credit", INT16), corr=False),
    # only sent on error, and without a correlation id (facts §1.5)
    _resp(_f("subscription_id", U8), corr=False),
)
_pair(
    0x0A,
    "StoreOffset",
    _req(_f("reference", STRING), _f("stream", STRING), _f("offset", U64), corr=False),
    None,
)
_pair(
    0x0B,
    "QueryOffset",
    _req(_f("reference", STRING), _f("stream", STRING)),
    _resp(_f("offset", U64)),
)
_pair(0x0C, "Unsubscribe", _req(_f("subscription_id", U8)), ACK)
_pair(0x0D, "Create", _req(_f("stream", STRING), _f("arguments", PROPERTIES)), ACK)
_pair(0x0E, "Delete", _req(_f("stream", STRING)), ACK)
_pair(
    0x0F,
    "Metadata",
    _req(STREAMS),
    _resp(
        _f("brokers", ArrayType(StructType((("reference", U16), ("host", STRING), ("port", U32))))),
        _f(
            "stream_metadata",
            ArrayType(
                StructType(
                    (
                        ("stream", STRING),
                        ("code", U16),
                        ("leader_reference", U16),
                        ("replicas_references", ArrayType(U16)),
                    )
                )
            ),
        ),
        code=False,
    ),
)
_pair(
    0x10,
    "MetadataUpdate",
    _Side(fields=(_f("stream", STRING),), corr=False, code=True, sender="server"),
    None,
)
_pair(
    0x11, "PeerProperties", _req(_f("properties", PROPERTIES)), _resp(_f("properties", PROPERTIES))
)
_pair(
    0x12,
    "SaslHandshake",
    _req(),  # the real request has no mechanism field (facts §1.5)
    _resp(_f("mechanisms", ArrayType(STRING))),
)
_pair(
    0x13,
    "SaslAuthenticate",
    _req(_f("mechanism", STRING), _f("sasl_data", BYTES), derived=(_f("username", STRING),)),
    _resp(_f("challenge", TrailingType(BYTES))),
)
# The server sends 0x0014; clients echo it as 0x0014 (rstream) or 0x8014 (Java).
_pair(
    0x14,
    "Tune",
    _req(_f("frame_max", U32), _f("heartbeat", U32), corr=False, sender="either"),
    _Side(fields=(_f("frame_max", U32), _f("heartbeat", U32)), corr=False, sender="client"),
)
_pair(
    0x15,
    "Open",
    _req(_f("virtual_host", STRING)),
    _resp(_f("connection_properties", TrailingType(PROPERTIES))),
)
_pair(
    0x16,
    "Close",
    _req(_f("closing_code", U16), _f("closing_reason", STRING), sender="either"),
    _Side(code=True, sender="either"),
)
_pair(0x17, "Heartbeat", _req(corr=False, sender="either"), None)
_pair(0x18, "Route", _req(_f("routing_key", STRING), _f("super_stream", STRING)), _resp(STREAMS))
_pair(0x19, "Partitions", _req(_f("super_stream", STRING)), _resp(STREAMS))
# The server asks (request), the client answers with where to start (response).
_pair(
    0x1A,
    "ConsumerUpdate",
    _req(_f("subscription_id", U8), _f("active", U8), sender="server"),
    _Side(fields=LAST_OFFSET_SPEC, code=True, sender="client"),
)
_COMMAND_VERSIONS = _f(
    "commands", ArrayType(StructType((("key", U16), ("min_version", U16), ("max_version", U16))))
)
_pair(0x1B, "ExchangeCommandVersions", _req(_COMMAND_VERSIONS), _resp(_COMMAND_VERSIONS))
_pair(
    0x1C, "StreamStats", _req(_f("stream", STRING)), _resp(_f("statistics", MapType(STRING, INT64)))
)
_pair(
    0x1D,
    "CreateSuperStream",
    _req(
        _f("super_stream", STRING),
        _f("partitions", ArrayType(STRING)),
        _f("binding_keys", ArrayType(STRING)),
        _f("arguments", PROPERTIES),
    ),
    ACK,
)
_pair(0x1E, "DeleteSuperStream", _req(_f("super_stream", STRING)), ACK)
_pair(
    0x1F,
    "ResolveOffsetSpec",
    _req(_f("stream", STRING), *OFFSET_SPEC, _f("properties", TrailingType(PROPERTIES))),
    # the response always carries a u64 offset (type 4 today), whatever the type
    _resp(_f("offset_type", U16), _f("offset", U64)),
)

BY_KEY: dict[int, Message] = {m.key: m for m in MESSAGES}
BY_NAME: dict[tuple[str, bool], Message] = {(m.command, m.response): m for m in MESSAGES}
COMMANDS: tuple[str, ...] = tuple(dict.fromkeys(m.command for m in MESSAGES))

COMMON_COLUMNS: tuple[tuple[str, str], ...] = (
    ("key", "uint16"),
    ("command", "string"),
    ("response", "bool"),
    ("version", "uint16"),
    ("size", "uint32"),
    ("correlation_id", "uint32"),
    ("code", "uint16"),
    ("code_name", "string"),
    ("truncated", "bool"),
)


def message_spec(command: str, response: bool = False) -> Message:
    return BY_NAME[(command, response)]


def columns(command: str, response: bool = False) -> list[tuple[str, str]]:
    """(name, type) of every column of a command's records, in to_dict order.

    Types are Arrow-like strings: uint8..uint64, int16, int64, string, binary, bool,
    list<T>, map<K,V>, struct<name:T,...>. Later faces build Arrow/Spark schemas from this.
    """
    message = message_spec(command, response)
    body = [(f.name, f.type.column) for f in message.fields + message.derived]
    return list(COMMON_COLUMNS) + list(dict.fromkeys(body))


def all_columns() -> dict[tuple[str, bool], list[tuple[str, str]]]:
    """Columns for every (command, response) in the table."""
    return {(m.command, m.response): columns(m.command, m.response) for m in MESSAGES}


def container_fields() -> frozenset[str]:
    """The fields of the table whose values hold fields of their own: its lists, maps and
    structs (`properties`, `streams`, `chunk`...); every other field is one value."""
    return frozenset(name for named in all_columns().values() for name, column in named
                     if column.startswith(("list<", "map<", "struct<")))  # fmt: skip
