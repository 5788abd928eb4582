"""RocketMQ remoting records: a decoded command (`RemotingCommand`), a stored or sent message
(`Message`), and a frame whose header could not be read (`Malformed`).

A command whose header reads but whose body does not (a pull body whose messages lie about
their sizes, a zlib bomb, a batch cut short) is a RemotingCommand with `body_error` set (and
`body_error_offset`): its code, opaque and fields stay known. The framer reports both kinds
as the anomaly `malformed`.
"""

from __future__ import annotations

from typing import Any

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.wire import inflate, parse_properties
from streamdissect.slotted import Slotted


class Message(Slotted):
    """A message in a body: a stored one (pull response: every field), or a sent one (a
    SEND_MESSAGE body, a SEND_BATCH_MESSAGE item: the fields that travel). (Made by
    position by messages.sent_message, slot by slot by messages._lazy_message.)"""

    field_names = ("body", "properties", "topic", "queue_id", "flag", "sys_flag",
                   "total_size", "magic", "body_crc", "crc_ok", "queue_offset",
                   "physical_offset", "born_timestamp", "born_host",
                   "store_timestamp", "store_host", "reconsume_times",
                   "prepared_transaction_offset", "offset_msg_id",
                   "inflated_length", "inflate_error")  # fmt: skip
    __slots__ = (*field_names, "_source")  # (_source: no field: not in repr nor ==)
    body: bytes  # as on the wire (compressed when `compressed`)
    properties: dict[str, str]
    topic: str | None
    queue_id: int | None
    flag: int | None
    sys_flag: int | None
    # stored messages only
    total_size: int | None
    magic: int | None
    body_crc: int | None
    crc_ok: bool | None
    queue_offset: int | None
    physical_offset: int | None
    born_timestamp: int | None
    born_host: str | None
    store_timestamp: int | None
    store_host: str | None
    reconsume_times: int | None
    prepared_transaction_offset: int | None
    offset_msg_id: str | None  # store host, port and commit log offset, as hex
    # a compressed body: its inflated size, or why it could not be inflated
    inflated_length: int | None
    inflate_error: str | None
    # a stored message read without its LAZY fields: (the reader, its arguments), which
    # reads them when one is first asked for (messages.stored_message(..., lazy=True))
    _source: Any

    def __init__(self, body: bytes, properties: dict[str, str], topic: str | None = None,
                 queue_id: int | None = None, flag: int | None = None,
                 sys_flag: int | None = None, total_size: int | None = None,
                 magic: int | None = None, body_crc: int | None = None,
                 crc_ok: bool | None = None, queue_offset: int | None = None,
                 physical_offset: int | None = None, born_timestamp: int | None = None,
                 born_host: str | None = None, store_timestamp: int | None = None,
                 store_host: str | None = None, reconsume_times: int | None = None,
                 prepared_transaction_offset: int | None = None,
                 offset_msg_id: str | None = None, inflated_length: int | None = None,
                 inflate_error: str | None = None, _source: Any = None) -> None:  # fmt: skip
        self.body = body
        self.properties = properties
        self.topic = topic
        self.queue_id = queue_id
        self.flag = flag
        self.sys_flag = sys_flag
        self.total_size = total_size
        self.magic = magic
        self.body_crc = body_crc
        self.crc_ok = crc_ok
        self.queue_offset = queue_offset
        self.physical_offset = physical_offset
        self.born_timestamp = born_timestamp
        self.born_host = born_host
        self.store_timestamp = store_timestamp
        self.store_host = store_host
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset
        self.offset_msg_id = offset_msg_id
        self.inflated_length = inflated_length
        self.inflate_error = inflate_error
        self._source = _source

    def __getattr__(self, name: str) -> Any:
        """(Only for a slot not set: a LAZY field of a stored message read lazily.)"""
        source = self._source if name in LAZY else None  # (name first: no recursion)
        if source is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        whole = source[0](*source[1:])
        for lazy in LAZY:
            setattr(self, lazy, getattr(whole, lazy))
        self._source = None
        return getattr(self, name)

    @property
    def compressed(self) -> bool:
        return bool((self.sys_flag or 0) & spec.SYSFLAG_COMPRESSED)

    @property
    def msg_id(self) -> str | None:
        """The client's message id (UNIQ_KEY), else the offset message id."""
        return self.properties.get(spec.UNIQ_KEY) or self.offset_msg_id

    @property
    def tags(self) -> str | None:
        return self.properties.get(spec.TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(spec.KEYS)

    @property
    def compression(self) -> str | None:
        """How a compressed body is compressed (zlib, lz4, zstd), None when it is not."""
        if not self.compressed:
            return None
        kind = (self.sys_flag or 0) & spec.SYSFLAG_COMPRESSION_MASK
        return spec.COMPRESSION_TYPES.get(kind, f"unknown({kind:#x})")

    def inflated(self) -> bytes:
        """The body as the application sees it (inflated when zlib-compressed, within
        spec.MAX_INFLATED; ValueError beyond it, when it does not inflate, or for another
        compression)."""
        if self.compression not in (None, "zlib"):
            raise ValueError(f"{self.compression} bodies are not inflated here")
        return inflate(self.body) if self.compressed else self.body

    def to_dict(self, payloads: bool = False, show_secrets: bool = False) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in _MESSAGE_FIELDS}
        out.update(msg_id=self.msg_id, tags=self.tags, keys=self.keys,
                   compressed=self.compressed, body_length=len(self.body))  # fmt: skip
        if payloads:
            out["body"] = self.body.hex()
        return out


_MESSAGE_FIELDS = tuple(f for f in Message.__slots__ if f not in ("body", "_source"))
# a stored message's fields no analysis reads, made when first asked for (a pull response
# of 32 messages is decoded for its count and sizes: these cost half of each message)
LAZY = ("properties", "topic", "crc_ok", "born_host", "store_host", "offset_msg_id")


# to_dict(show_secrets=...) as the Stream's records take it (the faces ask both the same
# way); RocketMQ's frames carry no password (ACL sends an access key and a signature only).


_RESPONSE_FLAG, _ONEWAY_FLAG = spec.RESPONSE_FLAG, spec.ONEWAY_FLAG


class RemotingCommand(Slotted):
    """One frame: the envelope, the header, the body and what the body was read as. (The
    codec makes it by position, codec.decode_frame: a field added goes there too.)"""

    __slots__ = field_names = ("size", "serialize_type", "header_length", "code", "language",
                               "version", "opaque", "flag", "remark", "ext", "body", "fields",
                               "messages", "body_json", "body_text", "body_error",
                               "body_error_offset", "truncated", "request_code", "json_extra",
                               "json_keys", "json_tail")  # fmt: skip
    size: int  # the total length field (what follows it)
    serialize_type: int  # spec.JSON or spec.ROCKETMQ
    header_length: int
    code: int
    language: str | int | None  # the language's name (a number the table does not name)
    version: int | None
    opaque: int
    flag: int
    remark: str | None
    ext: dict[str, Any]  # the ext fields as on the wire (keys and values as sent)
    body: bytes
    fields: dict[str, Any]  # the known ones, named and typed
    messages: list[Message] | None  # a send's, a batch's, a pull response's
    body_json: Any  # a fastjson body, parsed
    body_text: str | None  # a fastjson body that did not parse, as text
    body_error: str | None  # why the body could not be read
    body_error_offset: int | None  # where in the frame
    truncated: bool  # bytes of the frame are missing (snaplen, gap, kept head)
    request_code: int | None  # a response: its request's code, when the capture had it
    json_extra: dict[str, Any] | None  # JSON header keys beyond the known ones
    json_keys: tuple[str, ...] | None  # a JSON header's keys in their order
    json_tail: str | None  # blanks after a JSON header (the C++ client's newline)

    def __init__(self, size: int, serialize_type: int, header_length: int, code: int,
                 language: str | int | None, version: int | None, opaque: int, flag: int,
                 remark: str | None, ext: dict[str, Any], body: bytes,
                 fields: dict[str, Any] | None = None, messages: list[Message] | None = None,
                 body_json: Any = None, body_text: str | None = None,
                 body_error: str | None = None, body_error_offset: int | None = None,
                 truncated: bool = False, request_code: int | None = None,
                 json_extra: dict[str, Any] | None = None,
                 json_keys: tuple[str, ...] | None = None,
                 json_tail: str | None = None) -> None:  # fmt: skip
        self.size = size
        self.serialize_type = serialize_type
        self.header_length = header_length
        self.code = code
        self.language = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext = ext
        self.body = body
        self.fields = {} if fields is None else fields
        self.messages = messages
        self.body_json = body_json
        self.body_text = body_text
        self.body_error = body_error
        self.body_error_offset = body_error_offset
        self.truncated = truncated
        self.request_code = request_code
        self.json_extra = json_extra
        self.json_keys = json_keys
        self.json_tail = json_tail

    @property
    def response(self) -> bool:  # (read for every frame by the analyses: no call in it)
        return self.flag & _RESPONSE_FLAG != 0

    @property
    def oneway(self) -> bool:
        return self.flag & _ONEWAY_FLAG != 0

    @property
    def code_name(self) -> str:
        """The request code's name for a request, the response code's for a response."""
        return spec.response_name(self.code) if self.response else spec.request_name(self.code)

    @property
    def serialize_name(self) -> str:
        return spec.SERIALIZE_NAMES.get(self.serialize_type, str(self.serialize_type))

    @property
    def topic(self) -> str | None:
        return self.fields.get("topic")

    @property
    def queue_id(self) -> int | None:
        return self.fields.get("queueId")

    @property
    def properties(self) -> dict[str, str] | None:
        """A send header's message properties as a map."""
        text = self.fields.get("properties")
        return None if text is None else parse_properties(text)

    def to_dict(self, payloads: bool = False, show_secrets: bool = False) -> dict[str, Any]:
        out = {"size": self.size, "serialize_type": self.serialize_name,
               "header_length": self.header_length, "code": self.code,
               "code_name": self.code_name, "response": self.response, "oneway": self.oneway,
               "language": self.language, "version": self.version, "opaque": self.opaque,
               "flag": self.flag, "remark": self.remark, "ext": self.ext,
               "fields": self.fields, "body_length": len(self.body),
               "truncated": self.truncated}  # fmt: skip
        if self.request_code is not None:
            out["request_code"] = self.request_code
            out["request_name"] = spec.request_name(self.request_code)
        if self.messages is not None:
            out["messages"] = [m.to_dict(payloads) for m in self.messages]
        for name in ("body_json", "body_text", "body_error", "body_error_offset", "json_extra"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if payloads:
            out["body"] = self.body.hex()
        return out


class Malformed(Slotted):
    """A frame whose envelope or header could not be read."""

    __slots__ = field_names = ("size", "reason", "offset", "raw", "truncated")
    size: int | None
    reason: str
    offset: int  # in the frame, where reading stopped
    raw: bytes  # the frame's first bytes (at most spec.MALFORMED_KEPT)
    truncated: bool

    def __init__(self, size: int | None, reason: str, offset: int, raw: bytes,
                 truncated: bool = False) -> None:  # fmt: skip
        self.size = size
        self.reason = reason
        self.offset = offset
        self.raw = raw
        self.truncated = truncated

    def to_dict(self, payloads: bool = False, show_secrets: bool = False) -> dict[str, Any]:
        return {"size": self.size, "malformed": self.reason, "offset": self.offset,
                "truncated": self.truncated, "raw": self.raw.hex()}  # fmt: skip
