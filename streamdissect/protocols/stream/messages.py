"""The messages a Publish or a Deliver carries, entry by entry, for people to read.

One walk serves every face that shows messages (`frames -V`, the message fields of `-Y`,
`frames --messages`, the messages table): a frame's entries (`frame_entries`), each a simple
entry or a sub-batch inflated within bounds, each holding its messages, decoded as AMQP 1.0
on first use. The chunk and sub-batch layouts are osiris.py's, the codecs compression.py's,
the sections amqp.py's: nothing here decodes them a second time. Damage (an entry past the
data, a sub-batch that does not inflate, a Publish cut short) is an entry with its `error`,
after the entries before it.

`message_fields` is a message as one JSON-able dict: what `-Y` names under `message.`, what
`frames --messages` prints and what the messages table holds.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from streamdissect.protocols.base import MessageReader
from streamdissect.protocols.stream import osiris
from streamdissect.protocols.stream.codes import ChunkType, CompressionType
from streamdissect.protocols.stream.compression import DEFAULT_MAX_DECOMPRESSED
from streamdissect.protocols.stream.primitives import DecodeError
from streamdissect.protocols.stream.publish import SubBatch
from streamdissect.protocols.view import DEFAULT_MAX_BODY, body_words, bytes_preview

# The AMQP properties that are timestamps (ms since the epoch): shown as wall-clock times
TIME_PROPERTIES = ("absolute_expiry_time", "creation_time")
# What `-Y` may name after `message.` (a message's dict keys)
MESSAGE_FIELDS = frozenset((
    "index", "publishing_id", "offset", "filter_value", "compression", "size", "format",
    "header", "delivery_annotations", "message_annotations", "properties",
    "application_properties", "body_kind", "body_size", "body", "body_encoding",
    "body_truncated", "footer", "error",
))  # fmt: skip


def compression_name(code: int | None) -> str | None:
    """A sub-batch's codec as people name it (none, gzip, snappy, lz4, zstd)."""
    if code is None:
        return None
    try:
        return CompressionType(code).name.lower()
    except ValueError:
        return f"unknown ({code})"


@dataclass(slots=True)
class Message:
    """One message: its place (publishing id or chunk offset), its bytes, its AMQP sections."""

    index: int  # within its frame, from 0
    data: Any  # bytes or memoryview: the message as the client wrote it
    publishing_id: int | None = None  # Publish
    offset: int | None = None  # Deliver: the chunk's first offset + the record's index
    filter_value: str | None = None  # Publish v2
    compression: int | None = None  # the sub-batch's codec; None: a simple entry
    _amqp: Any = None

    @property
    def amqp(self) -> Any:
        """The message decoded as AMQP 1.0 (amqp.AmqpMessage; is_amqp False for raw bytes)."""
        if self._amqp is None:
            from streamdissect.protocols.stream.amqp import decode_message

            self._amqp = decode_message(self.data)
        return self._amqp


@dataclass(slots=True)
class EntryView:
    """A data entry (Deliver) or a published message's entry (Publish), with its messages;
    `error`: the damage found at it (its messages, if any, are those before the damage)."""

    position: int | None  # byte offset in the chunk's data section (Deliver)
    sub_batch: bool
    compression: int | None
    num_records: int
    size: int  # bytes on the wire (a sub-batch: compressed)
    uncompressed_length: int | None = None
    publishing_id: int | None = None
    offset: int | None = None
    filter_value: str | None = None
    messages: list[Message] = field(default_factory=list)
    error: str | None = None


def frame_entries(record: Any, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
                  ) -> Iterator[EntryView]:  # fmt: skip
    """The entries of a Publish or Deliver record, in order, one at a time; nothing for any
    other frame. Its sub-batches inflate to `max_decompressed` bytes in all (a frame of
    small sub-batches each claiming the most is bounded as one is): one past it is an entry
    said not inflated."""
    command = getattr(record, "command", None)
    if command == "Deliver" and hasattr(record, "entries"):
        return _deliver_entries(record, [max_decompressed, max_decompressed])
    if command == "Publish" and getattr(record, "messages", None) is not None:
        return _publish_entries(record, [max_decompressed, max_decompressed])
    return iter(())


def frame_messages(record: Any, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
                   ) -> Iterator[Message]:  # fmt: skip
    for entry in frame_entries(record, max_decompressed):
        yield from entry.messages


def deliver_data_kept(record: Any) -> bool:
    """Whether a Deliver's chunk data is there to read (a big one may be kept as its head)."""
    return record.chunk is not None and record.chunk_payload is not None


def _deliver_entries(record: Any, budget: list[int]) -> Iterator[EntryView]:
    if not deliver_data_kept(record) or record.chunk["chunk_type"] != ChunkType.USER:
        return
    index = 0
    for entry in record.entries():
        if isinstance(entry, osiris.MalformedEntry):
            yield EntryView(entry.position, False, None, 0, 0, error=entry.reason)
            return
        view = EntryView(entry.position, entry.sub_batch,
                         entry.compression if entry.sub_batch else None, entry.num_records,
                         len(entry.data), entry.uncompressed_length if entry.sub_batch else None,
                         offset=entry.offset)  # fmt: skip
        if not entry.sub_batch:
            view.messages.append(Message(index, entry.data, offset=entry.offset))
            index += 1
        else:
            index = _inflate(view, entry, index, budget)
        yield view


def _inflate(view: EntryView, entry: osiris.Entry, index: int, budget: list[int]) -> int:
    """A sub-batch's records as view's messages (or its error); the next message index.
    `budget`: [inflated bytes the frame has left, its bound]."""
    if entry.uncompressed_length > budget[0]:
        view.error = (f"not inflated: its {entry.uncompressed_length} bytes would take the "
                      f"frame past {budget[1]} inflated bytes")  # fmt: skip
        return index
    records = osiris.sub_batch_records(entry, budget[0])
    if isinstance(records, osiris.MalformedEntry):
        view.error = records.reason
        return index
    budget[0] -= entry.uncompressed_length
    for record in records:
        view.messages.append(Message(index, record.data, publishing_id=view.publishing_id,
                                     offset=record.offset if view.publishing_id is None else None,
                                     filter_value=view.filter_value,
                                     compression=entry.compression))  # fmt: skip
        index += 1
    return index


def _publish_entries(record: Any, budget: list[int]) -> Iterator[EntryView]:
    index = 0
    messages = iter(record.messages)
    while True:
        try:
            published = next(messages)
        except StopIteration:
            return
        except (DecodeError, struct.error, IndexError, ValueError) as exc:
            # (a Publish cut short by the capture: the messages before the cut are shown)
            yield EntryView(None, False, None, 0, 0, error=f"message list cut short: {exc}")
            return
        entry = published.entry
        if isinstance(entry, SubBatch):
            view = EntryView(None, True, entry.compression, entry.num_records, len(entry.data),
                             entry.uncompressed_length, published.publishing_id,
                             filter_value=published.filter_value)  # fmt: skip
            as_entry = osiris.Entry(0, index, 0, True, entry.compression, entry.num_records,
                                    entry.uncompressed_length, memoryview(entry.data))  # fmt: skip
            index = _inflate(view, as_entry, index, budget)
        else:
            view = EntryView(None, False, None, 1, len(entry), None, published.publishing_id,
                             filter_value=published.filter_value)  # fmt: skip
            view.messages.append(Message(index, entry, published.publishing_id,
                                         filter_value=published.filter_value))  # fmt: skip
            index += 1
        yield view


# --- a message as a dict -----------------------------------------------------------------


class Body(NamedTuple):  # (a tuple: made for every message shown, at a tuple's cost)
    """A body as shown: `text` (printable UTF-8) or `hex`, cut at max_body bytes."""

    kind: str  # data, amqp_value, amqp_sequence, raw (not AMQP)
    size: int
    value: Any  # str (text or hex) for bytes; the decoded value for amqp_value/_sequence
    encoding: str | None  # "text" or "hex" for bytes; None for typed values
    truncated: bool


def body_bytes(message: Message) -> bytes | None:
    """The body as bytes: the data sections joined, or the whole message when it is not AMQP;
    None for typed bodies (amqp-value, amqp-sequence)."""
    return _body_bytes(message.amqp, message.data)


def _body_bytes(amqp: Any, data: Any) -> bytes | None:
    if not amqp.is_amqp:
        return bytes(data)
    if amqp.body_kind == "data":
        body = amqp.body
        if len(body) == 1 and body[0].__class__ is bytes:  # (the usual one: no copy)
            return body[0]
        return b"".join(part for part in body if isinstance(part, bytes))
    return None if amqp.body_kind else b""


def message_body(message: Message, max_body: int | None = DEFAULT_MAX_BODY) -> Body:
    """The message's body, bytes cut at `max_body` (None: whole)."""
    return amqp_body(message.amqp, message.data, max_body)


def amqp_body(amqp: Any, data: Any, max_body: int | None = DEFAULT_MAX_BODY) -> Body:
    """The body of a message decoded as `amqp` from `data` (message_body)."""
    raw = _body_bytes(amqp, data)
    kind = amqp.body_kind or "data"
    if raw is None:
        value = amqp.body[0] if kind == "amqp_value" and len(amqp.body) == 1 else amqp.body
        if isinstance(value, (str, bytes)) and max_body is not None:  # (a typed string is
            encoded = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
            if len(encoded) > max_body:  # cut as a data body is)
                cut = encoded[:max_body]
                value = cut.decode("utf-8", "ignore") if isinstance(value, str) else cut
                return Body(kind, amqp.body_size, value, None, True)
        return Body(kind, amqp.body_size, value, None, False)
    preview = bytes_preview(raw, max_body)
    return Body(kind, len(raw), preview.value, preview.encoding, preview.truncated)


def message_fields(message: Message, max_body: int | None = DEFAULT_MAX_BODY,
                   bodies: bool = True) -> dict[str, Any]:  # fmt: skip
    """The message as a JSON-able dict (MESSAGE_FIELDS): sections as to_json gives them,
    properties by name (timestamps in ms since the epoch), the body bounded by `max_body`
    bytes and left out (with its encoding) unless `bodies`."""
    from streamdissect.protocols.stream.amqp import to_json

    amqp = message.amqp
    fields: dict[str, Any] = {
        "index": message.index,
        "publishing_id": message.publishing_id,
        "offset": message.offset,
        "filter_value": message.filter_value,
        "compression": compression_name(message.compression),
        "size": len(message.data),
        "format": "amqp" if amqp.is_amqp else "raw",
        "header": to_json(amqp.header),
        "delivery_annotations": to_json(amqp.delivery_annotations),
        "message_annotations": to_json(amqp.message_annotations),
        "properties": None if amqp.properties is None else {
            name: to_json(value) for name, value in amqp.properties.items()
            if value is not None},
        "application_properties": to_json(amqp.application_properties),
        "body_kind": amqp.body_kind or "data",
        "body_size": amqp.body_size,
    }
    if bodies:
        body = message_body(message, max_body)
        fields |= {"body": to_json(body.value), "body_encoding": body.encoding,
                   "body_truncated": body.truncated}  # fmt: skip
    fields |= {"footer": to_json(amqp.footer), "error": amqp.error}
    return fields


# --- a message as a row: where it was, and its fields -------------------------------------


class MessageRows(MessageReader):
    """The Stream's messages (protocols.base.MessageReader): one row a message, from the
    frame events of a capture fed in order: the frame's place (number, time, connection,
    direction), who sent it (publisher and publishing id, or subscription and offset), the
    stream (from the connection's DeclarePublisher and Subscribe) and message_fields."""

    def __init__(self, max_body: int | None = DEFAULT_MAX_BODY, bodies: bool = True) -> None:
        super().__init__(max_body, bodies)
        self.frame = 0  # (feed's count)
        self.streams: dict[tuple[str, str, int], str] = {}  # (connection, kind, id) -> stream

    def feed(self, event: Any) -> list[dict[str, Any]]:
        """The rows of a frame event's messages (none for most frames), every frame fed
        counted to number them as `frames` does."""
        self.frame += 1
        return [self.row(event, message, self.frame) for message in self.messages(event)]

    def messages(self, event: Any) -> list[Message]:
        """A frame event's messages (none for most frames)."""
        record = event.record
        command = getattr(record, "command", None)
        if command in ("DeclarePublisher", "Subscribe") and not getattr(record, "response", True):
            kind = "publisher" if command == "DeclarePublisher" else "subscription"
            ident = getattr(record, f"{kind}_id", None)
            if ident is not None and isinstance(getattr(record, "stream", None), str):
                self.streams[(event.connection, kind, ident)] = record.stream
            return []
        if command not in ("Publish", "Deliver"):
            return []
        return list(frame_messages(record))

    def fields(self, message: Message, max_body: int | None) -> dict[str, Any]:
        return message_fields(message, max_body, self.bodies)

    def table_row(self, row: dict[str, Any]) -> dict[str, Any]:
        return table_row(row)

    def line(self, row: dict[str, Any]) -> str:
        return message_summary(row)

    def row(self, event: Any, message: Message, frame: int) -> dict[str, Any]:
        record = event.record
        publish = record.command == "Publish"
        kind = "publisher" if publish else "subscription"
        ident = getattr(record, f"{kind}_id", None)
        return {
            "ts_ns": event.ts_ns, "connection": event.connection, "direction": event.direction,
            "frame": frame, "stream_offset": event.stream_offset,
            "command": record.command, "version": record.version,
            "publisher_id": ident if publish else None,
            "subscription_id": None if publish else ident,
            "stream": self.streams.get((event.connection, kind, ident)),
            **message_fields(message, self.max_body, self.bodies),
        }  # fmt: skip


# A --messages row as the messages table has it (protocols/stream/tables.py MESSAGES)
PLACE_COLUMNS = ("ts_ns", "connection", "direction", "frame", "stream_offset", "command",
                 "version", "index", "publisher_id", "publishing_id", "filter_value",
                 "subscription_id", "offset", "stream", "compression", "size",
                 "format")  # fmt: skip
JSON_COLUMNS = ("header", "delivery_annotations", "message_annotations", "footer")


def text_map(value: Any) -> dict[str, str | None] | None:
    """A map section as the messages table's map of text (its to_json form: binary as hex):
    a string value as it is, any other as its JSON text (5, true, a list), null as null;
    a section that is no map (a broken message) is {"value": its JSON text}."""
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 for p in value):
        value = {_text(k): v for k, v in value}  # (a map with keys Python cannot hash)
    elif not isinstance(value, dict):
        value = {"value": value}
    return {str(k): None if v is None else _text(v) for k, v in value.items()}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def table_row(row: dict[str, Any]) -> dict[str, Any]:
    """A MessageRows row flattened for the messages table: the properties a column each (the
    timestamps as *_ms), the application properties a map of text (text_map), the other
    sections as JSON text, the body as its preview."""
    from streamdissect.protocols.stream.amqp import PROPERTY_FIELDS

    out = {"protocol": "stream", **{name: row[name] for name in PLACE_COLUMNS}}
    properties = row["properties"] or {}
    for name in PROPERTY_FIELDS:
        value = properties.get(name)  # (to_json's already: binary as hex, symbols as text)
        if name in TIME_PROPERTIES or name == "group_sequence":
            integer = isinstance(value, int) and not isinstance(value, bool)
            out[f"{name}_ms" if name in TIME_PROPERTIES else name] = value if integer else None
        else:
            out[name] = value if value is None or isinstance(value, str) else json.dumps(
                value, ensure_ascii=False, default=str)  # fmt: skip
    out["application_properties"] = text_map(row["application_properties"])
    for name in JSON_COLUMNS:
        value = row[name]
        out[name] = None if value is None else json.dumps(value, ensure_ascii=False,
                                                          default=str)  # fmt: skip
    body = row.get("body")
    out["body_preview"] = body if body is None or isinstance(body, str) else json.dumps(
        body, ensure_ascii=False, default=str)  # fmt: skip
    out |= {"body_kind": row["body_kind"], "body_size": row["body_size"],
            "body_encoding": row.get("body_encoding"), "body_truncated": row.get("body_truncated"),
            "error": row["error"]}  # fmt: skip
    return out


def message_summary(row: dict) -> str:
    """A message's text line (--messages in text): where it is, its size, the properties
    and application properties set, and its body as --messages has it."""
    place = (f"publishing_id={row['publishing_id']}" if row["command"] == "Publish"
             else f"offset={row['offset']}")  # fmt: skip
    parts = [f"{row['command']} message {row['index']} {place}"]
    if row["stream"] is not None:
        parts.append(f"stream={row['stream']}")
    if row["filter_value"] is not None:
        parts.append(f"filter_value={row['filter_value']}")
    if row["compression"] is not None:
        parts.append(f"compression={row['compression']}")
    parts.append(f"size={row['size']}")
    for name, value in (row["properties"] or {}).items():
        parts.append(f"{name}={json.dumps(value, ensure_ascii=False, default=str)}")
    if row["application_properties"] is not None:
        parts.append("application_properties=" + json.dumps(
            row["application_properties"], ensure_ascii=False, default=str))  # fmt: skip
    parts += body_words(row, f"{row['body_kind']}:{row['body_size']}")
    return " ".join(parts)
