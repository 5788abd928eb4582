"""RocketMQ's messages for people (protocols.base.MessageReader): the messages of a
SEND_MESSAGE, SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE request and of a pull response, each as
one JSON-able dict (`message_fields`: what `-Y` names under `message.`, what `frames
--messages` prints, what the messages table holds).

The messages are the codec's (messages.py: a send's one, a batch's items, a pull body's
stored messages); here a compressed body is inflated (within spec.MAX_INFLATED, wire.py)
and shown as text when it is printable UTF-8, else as hex, cut at `max_body` bytes.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from streamdissect.protocols.base import MessageReader
from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.records import Message, RemotingCommand
from streamdissect.protocols.view import DEFAULT_MAX_BODY, body_words, bytes_preview

# What `-Y` may name after `message.` (message_fields' keys)
MESSAGE_FIELDS = frozenset((
    "index", "topic", "queue_id", "queue_offset", "msg_id", "offset_msg_id", "tags", "keys",
    "properties", "flag", "sys_flag", "compression", "size", "body_size", "body",
    "body_encoding", "body_truncated", "body_crc", "crc_ok", "born_timestamp", "born_host",
    "store_timestamp", "store_host", "reconsume_times", "physical_offset",
    "prepared_transaction_offset", "error",
))  # fmt: skip
# the stored message's own fields, as message_fields names them
STORED = ("body_crc", "crc_ok", "born_host",
          "store_timestamp", "store_host", "reconsume_times", "physical_offset",
          "prepared_transaction_offset")  # fmt: skip


class Held(NamedTuple):
    """A message in its frame: its place (from 0), the codec's Message, and when the
    producer made it (a stored message's own; a sent one's from its frame's header)."""

    index: int
    message: Message
    born_timestamp: int | None = None


def frame_messages(record: Any) -> list[Held]:
    """The messages a frame carries (none for a frame without: most frames)."""
    if record.__class__ is not RemotingCommand or not record.messages:
        return []
    sent_born = record.fields.get("bornTimestamp")
    return [Held(i, m, sent_born if m.born_timestamp is None else m.born_timestamp)
            for i, m in enumerate(record.messages)]  # fmt: skip


def body_of(message: Message) -> tuple[bytes, str | None]:
    """The body as the application sees it (a compressed one inflated), or the bytes on the
    wire and why they could not be inflated."""
    try:
        return message.inflated(), None
    except ValueError as e:
        return message.body, str(e)


def message_fields(held: Held, max_body: int | None = DEFAULT_MAX_BODY,
                   bodies: bool = True) -> dict[str, Any]:  # fmt: skip
    """A message as a JSON-able dict (MESSAGE_FIELDS): its place, topic and queue, ids,
    tags, keys and properties, the stored fields of a pulled one (null for a sent one),
    the body inflated and cut at `max_body` bytes (None: whole), left out unless `bodies`
    (its size is still said)."""
    m = held.message
    if bodies:
        body, error = body_of(m)
        body_size = len(body)
    else:  # (the size the codec found; nothing inflated)
        error = m.inflate_error
        body_size = m.inflated_length if m.inflated_length is not None else len(m.body)
    fields: dict[str, Any] = {
        "index": held.index, "topic": m.topic, "queue_id": m.queue_id,
        "queue_offset": m.queue_offset,
        "msg_id": m.msg_id, "offset_msg_id": m.offset_msg_id, "tags": m.tags, "keys": m.keys,
        "properties": dict(m.properties), "flag": m.flag, "sys_flag": m.sys_flag,
        "compression": m.compression, "size": len(m.body), "body_size": body_size,
        **{name: getattr(m, name) for name in STORED},
        "born_timestamp": held.born_timestamp,
    }  # fmt: skip
    if bodies:
        preview = bytes_preview(body, max_body)
        fields |= {"body": preview.value, "body_encoding": preview.encoding,
                   "body_truncated": preview.truncated}  # fmt: skip
    fields["error"] = error
    return fields


def command_of(record: RemotingCommand) -> str:
    """What a message row names its frame by: the request (a response's: the request it
    answers, when the capture had it, else its own code's name)."""
    if record.response and record.request_code is not None:
        return spec.request_name(record.request_code)
    return record.code_name


class RocketMQMessages(MessageReader):
    """RocketMQ's MessageReader: rows with the frame's place, the request, the message's
    fields; its text line; its messages table row."""

    def messages(self, event: Any) -> list[Held]:
        return frame_messages(event.record)

    def fields(self, message: Held, max_body: int | None) -> dict[str, Any]:
        return message_fields(message, max_body, self.bodies)

    def row(self, event: Any, message: Held, frame: int) -> dict[str, Any]:
        record = event.record
        return {
            "ts_ns": event.ts_ns, "connection": event.connection, "direction": event.direction,
            "frame": frame, "stream_offset": event.stream_offset,
            "command": command_of(record), "code": record.code, "response": record.response,
            "opaque": record.opaque, "version": record.version,
            **message_fields(message, self.max_body, self.bodies),
        }  # fmt: skip

    def line(self, row: dict[str, Any]) -> str:
        """`SEND_MESSAGE_V2 message 0 topic=T queue=3 msgId=... tags=TagA keys=k size=128
        properties={...} body=128 "msg-0 ..."` (a pulled one: its queue offset too)."""
        parts = [f"{row['command']} message {row['index']} topic={row['topic']}",
                 f"queue={row['queue_id']}"]  # fmt: skip
        if row["queue_offset"] is not None:
            parts.append(f"offset={row['queue_offset']}")
        parts += [f"{name}={row[key]}" for name, key in (("msgId", "msg_id"), ("tags", "tags"),
                                                         ("keys", "keys")) if row[key]]  # fmt: skip
        if row["compression"] is not None:
            parts.append(f"compression={row['compression']}")
        if row["crc_ok"] is False:
            parts.append("[body CRC does NOT match]")
        parts.append(f"size={row['size']}")
        parts.append("properties=" + json.dumps(row["properties"], ensure_ascii=False))
        return " ".join(parts + body_words(row, str(row["body_size"])))

    def table_row(self, row: dict[str, Any]) -> dict[str, Any]:
        """The row in the messages table's columns (tables/messages.py): the properties as
        a map of text, the queue offset as `offset`, the body as its preview."""
        out = {name: row[name] for name in (
            "ts_ns", "connection", "direction", "frame", "stream_offset", "command", "version",
            "index", "topic", "queue_id", "msg_id", "offset_msg_id", "tags", "keys",
            "compression", "size", "crc_ok", "body_size", "error")}  # fmt: skip
        out |= {"protocol": "rocketmq", "offset": row["queue_offset"], "body_kind": "data",
                "properties": dict(row["properties"]),
                "born_timestamp_ms": row["born_timestamp"],
                "store_timestamp_ms": row["store_timestamp"],
                "body_preview": row.get("body"), "body_encoding": row.get("body_encoding"),
                "body_truncated": row.get("body_truncated")}  # fmt: skip
        return out
