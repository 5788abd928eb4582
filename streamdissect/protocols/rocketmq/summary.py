"""A RocketMQ frame as one line of text and as one flat JSON object: what `streamdissect
frames` would print for it (text, jsonl), the way protocols/stream/summary.py does for the
Stream. The command line does not call these yet (its frames face is the Stream's; see
README, RocketMQ remoting).

Text: the code's name and number, `response`/`oneway`, the opaque, then the fields a reader
scans for (topic, queue, group, offsets, message count and ids, remark), the serialization
when it is ROCKETMQ, and the size:

    SEND_MESSAGE_V2(310) opaque=8 topic=T queueId=2 producerGroup=PG msgs=1 msgId=FD00...
    SUCCESS(0) response to=SEND_MESSAGE_V2 opaque=8 queueId=2 queueOffset=0 msgId=7F00...
    PULL_NOT_FOUND(19) response to=PULL_MESSAGE opaque=105 remark="OFFSET_OVERFLOW_ONE" ...
"""

from __future__ import annotations

from typing import Any

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.records import Malformed, RemotingCommand

# named fields a line shows, in this order (requests' and responses')
LINE_FIELDS = ("topic", "queueId", "consumerGroup", "producerGroup", "queueOffset",
               "commitOffset", "maxMsgNums", "suspendTimeoutMillis", "nextBeginOffset",
               "minOffset", "maxOffset", "offset", "brokerName", "brokerAddr",
               "clientID")  # fmt: skip
MSG_IDS_SHOWN = 3


def msg_ids(record: RemotingCommand) -> list[str]:
    """The message ids a frame carries: its messages' (UNIQ_KEY, else the offset id), or a
    send response's msgId (comma-joined for a batch)."""
    if record.messages:
        return [m.msg_id for m in record.messages if m.msg_id]
    text = record.fields.get("msgId") if record.response else None
    return text.split(",") if text else []


def frame_summary(record: RemotingCommand | Malformed) -> str:
    if isinstance(record, Malformed):
        return f"Malformed {record.reason} size={record.size}"
    name = record.code_name
    parts = [name if name.startswith("unknown(") else f"{name}({record.code})"]
    parts += [word for word, on in (("response", record.response), ("oneway", record.oneway))
              if on]  # fmt: skip
    if record.request_code is not None:
        parts.append(f"to={spec.request_name(record.request_code)}")
    parts.append(f"opaque={record.opaque}")
    if record.serialize_type != spec.JSON:
        parts.append(record.serialize_name)
    if record.remark:
        parts.append(f"remark={_quoted(record.remark)}")
    parts += [f"{name}={record.fields[name]}" for name in LINE_FIELDS if name in record.fields]
    if record.messages is not None:
        parts.append(f"msgs={len(record.messages)}")
    ids = msg_ids(record)
    if ids:
        shown = ",".join(ids[:MSG_IDS_SHOWN]) + (",..." if len(ids) > MSG_IDS_SHOWN else "")
        parts.append(f"msgId={shown}")
    if record.body_error:
        parts.append(f"body_error={_quoted(record.body_error)}")
    parts.append(f"size={record.size}")
    if record.truncated:
        parts.append("[truncated]")
    return " ".join(parts)


def _quoted(text: str, most: int = 80) -> str:
    line = text.splitlines()[0] if text else ""
    return '"' + (line[:most] + "..." if len(line) > most else line) + '"'


# every top-level key frame_fields gives (what a display filter may name)
FIELD_NAMES = frozenset((
    "size", "serialize_type", "header_length", "code", "code_name", "response", "oneway",
    "language", "version", "opaque", "flag", "remark", "ext", "fields", "body_length",
    "truncated", "request_code", "request_name", "messages", "body_json", "body_text",
    "body_error", "body_error_offset", "json_extra", "body", "topic", "queue_id", "msg_ids",
    "message_count", "malformed", "offset", "raw",
))  # fmt: skip
# those whose values hold fields of their own (maps and lists: the ext fields as sent and as
# named, the messages, a JSON body, the JSON header's other keys, the message ids)
CONTAINER_FIELDS = frozenset(("ext", "fields", "messages", "body_json", "json_extra", "msg_ids"))


def frame_fields(record: RemotingCommand | Malformed, payloads: bool = False) -> dict[str, Any]:
    """The record as one flat JSON-able object (a jsonl line's own fields): the envelope
    and header, the named fields, topic, queue and message ids at the top, the messages
    (without bodies unless `payloads`)."""
    if isinstance(record, Malformed):
        return {"code_name": "Malformed", **record.to_dict(payloads)}
    out = record.to_dict(payloads)
    out.update(topic=record.topic, queue_id=record.queue_id, msg_ids=msg_ids(record),
               message_count=None if record.messages is None else len(record.messages))
    return out
