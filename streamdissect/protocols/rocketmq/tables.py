"""RocketMQ's tables: one row a frame (`rocketmq_frames`). Its columns for header fields take
their kinds from spec.py's field types; pandas, Arrow/Parquet and Spark schemas derive from
the list (tables.columns), as the Stream's do."""

from __future__ import annotations

import re

from streamdissect.protocols.rocketmq import spec
from streamdissect.tables.columns import columns as _cols

# the header fields that get a column of their own (the others are in `fields_json`)
FIELD_COLUMNS = ("topic", "queueId", "consumerGroup", "producerGroup", "sysFlag",
                 "queueOffset", "commitOffset", "maxMsgNums", "suspendTimeoutMillis",
                 "nextBeginOffset", "minOffset", "maxOffset", "offset", "brokerName",
                 "clusterName", "brokerAddr", "clientID")  # fmt: skip
_KIND = {spec.STR: "string", spec.INT: "int64", spec.BOOL: "bool"}
_FIELD_TYPES = {f.name: f.type for h in (*spec.REQUEST_HEADERS.values(), spec.RESPONSE_HEADER)
                for f in h.fields}  # fmt: skip


def column_name(field: str) -> str:
    """A header field's column: snake case (queueId -> queue_id, clientID -> client_id)."""
    return re.sub(r"(?<=[a-z])([A-Z])", r"_\1", field).lower()


FRAMES = _cols(
    ("ts_ns", "int64", "capture time of the packet that completed the frame"),
    ("connection", "string", "client_ip:port-server_ip:port[#n]"),
    ("direction", "string", "c2s or s2c"),
    ("stream_offset", "int64", "byte offset of the frame in its direction's TCP stream"),
    ("size", "int64", "the total length field: the frame's bytes after it"),
    ("serialize_type", "string", "JSON or ROCKETMQ"),
    ("code", "int32", "request code (a request) or response code (a response)"),
    ("code_name", "string"),
    ("response", "bool"),
    ("oneway", "bool"),
    ("opaque", "int64", "the call's number: a response carries its request's"),
    ("request_code", "int32", "a response: the code of the request it answers (same "
                              "connection, other direction), when the capture had it"),
    ("flag", "int32"),
    ("language", "string"),
    ("version", "int32"),
    ("remark", "string"),
    *((column_name(f), _KIND[_FIELD_TYPES[f]]) for f in FIELD_COLUMNS),
    ("message_count", "int32", "messages of a send, a batch, a pull response"),
    ("msg_ids", "string", "their ids (UNIQ_KEY, else the offset id), comma-separated; a "
                          "send response's msgId"),
    ("body_length", "int64"),
    ("body_error", "string", "why the body could not be read (a Malformed frame: why not)"),
    ("truncated", "bool", "bytes of the frame missing from the capture"),
    ("fields_json", "string", "every known header field, by name, as JSON"),
)

TABLES = {"rocketmq_frames": FRAMES}
