"""RocketMQ's tables: one row a frame (`rocketmq_frames`), and its analyses' tables (analysis/:
calls and their latency per request code and server, errors, sends, pulls, consumer offsets,
clients, broker registrations). Its columns for header fields take their kinds from spec.py's
field types; pandas, Arrow/Parquet and Spark schemas derive from the lists (tables.columns),
as the Stream's do."""

from __future__ import annotations

import re

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.sections import REPORT_SECTIONS  # noqa: F401  (its home before)
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
    ("request_code", "int32", ("a response: the code of the request it answers (same "
                               "connection, other direction), when the capture had it")),
    ("flag", "int32"),
    ("language", "string"),
    ("version", "int32"),
    ("remark", "string"),
    *((column_name(f), _KIND[_FIELD_TYPES[f]]) for f in FIELD_COLUMNS),
    ("message_count", "int32", "messages of a send, a batch, a pull response"),
    ("msg_ids", "string", ("their ids (UNIQ_KEY, else the offset id), comma-separated; a "
                           "send response's msgId")),
    ("body_length", "int64"),
    ("body_error", "string", "why the body could not be read (a Malformed frame: why not)"),
    ("truncated", "bool", "bytes of the frame missing from the capture"),
    ("fields_json", "string", "every known header field, by name, as JSON"),
)

CONNECTIONS = _cols(
    ("connection", "string", "client_ip:port-server_ip:port[#n]"),
    ("client", "string"),
    ("server", "string", "the name server (9876) or broker (10911) ip:port"),
    ("start_ns", "int64", "its first TCP packet"),
    ("end_ns", "int64", "its last TCP packet"),
    ("first_command_ns", "int64"),
    ("last_command_ns", "int64"),
    ("frames_c2s", "int64"),
    ("frames_s2c", "int64"),
    ("bytes_c2s", "int64"),
    ("bytes_s2c", "int64"),
    ("requests_c2s", "int64", "requests the client asked (oneway ones apart)"),
    ("requests_s2c", "int64", "requests the server asked (NOTIFY_CONSUMER_IDS_CHANGED, ...)"),
    ("oneway", "int64", "oneway requests, both ways"),
    ("responses", "int64", "responses, both ways"),
    ("tcp_end", "string", "fin, rst or open"),
    ("status", "string", ("closed (FIN or RST: RocketMQ has no close command, a socket "
                          "closed is how a connection ends) or open at the capture's end")),
)

_CALL = (("connection", "string"), ("server", "string", "the connection's server ip:port"))
_PERCENTILES = (("min_ms", "float64"), ("p50_ms", "float64"), ("p75_ms", "float64"),
                ("p95_ms", "float64"), ("p99_ms", "float64"), ("max_ms", "float64"))

REQUESTS = _cols(
    *_CALL,
    ("direction", "string", "the request's: c2s asked by the client, s2c by the server"),
    ("opaque", "int64"),
    ("request_code", "int32"),
    ("request_name", "string"),
    ("topic", "string", "the request header's topic"),
    ("request_ts_ns", "int64"),
    ("response_ts_ns", "int64"),
    ("latency_ms", "float64"),
    ("code", "int32", "the response code"),
    ("code_name", "string"),
    ("remark", "string", "the response's remark"),
    ("status", "string", "answered, open, oneway, orphan_response or duplicate"),
)

LATENCY = _cols(
    ("request_code", "int32"),
    ("request_name", "string"),
    ("server", "string"),
    ("direction", "string", "the requests': c2s asked by clients, s2c by the server"),
    ("calls", "int64", "requests that expect a response"),
    ("answered", "int64"),
    ("open_requests", "int64", "never answered within the capture"),
    ("orphan_responses", "int64", "responses whose request the capture does not hold"),
    ("duplicate_ids", "int64", "a request reusing the opaque of one still open"),
    ("oneway", "int64", "oneway requests (no response expected)"),
    *_PERCENTILES,
)

ERRORS = _cols(
    ("request_code", "int32", "the request answered (None: not in the capture)"),
    ("request_name", "string"),
    ("code", "int32", "the non-zero response code"),
    ("code_name", "string"),
    ("topic", "string", "the request header's topic"),
    ("count", "int64"),
    ("remark", "string", "the first such response's remark"),
    ("first_ts_ns", "int64"),
)

SENDS = _cols(
    *_CALL,
    ("opaque", "int64"),
    ("request_name", "string", "SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE, ..."),
    ("batch_index", "int32", "the message's place in its request"),
    ("producer_group", "string"),
    ("topic", "string"),
    ("queue_id", "int32", "the response's queue (the request's when unanswered)"),
    ("queue_offset", "int64", "the response's queue offset (a batch: the first's plus the index)"),
    ("msg_id", "string", "the client's id (UNIQ_KEY)"),
    ("offset_msg_id", "string", "the broker's id (store host and commit log offset), answered"),
    ("tags", "string"),
    ("keys", "string"),
    ("size", "int64", "the body as the application sent it (inflated when compressed)"),
    ("wire_length", "int64", "the body's bytes on the wire"),
    ("compressed", "bool"),
    ("request_ts_ns", "int64"),
    ("response_ts_ns", "int64"),
    ("latency_ms", "float64"),
    ("code", "int32", "the response code"),
    ("status", "string", ("SEND_OK, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, "
                          "SLAVE_NOT_AVAILABLE, the error's code name, no_response or oneway")),
    ("remark", "string"),
)

PULLS = _cols(
    *_CALL,
    ("opaque", "int64"),
    ("consumer_group", "string"),
    ("topic", "string"),
    ("queue_id", "int32"),
    ("queue_offset", "int64", "the offset asked for"),
    ("max_msg_nums", "int32"),
    ("long_poll", "bool", "the suspend flag: the broker may hold the pull"),
    ("suspend_timeout_ms", "int64", "how long the client lets the broker hold it"),
    ("request_ts_ns", "int64"),
    ("response_ts_ns", "int64"),
    ("latency_ms", "float64"),
    ("held_ms", "float64", "a long poll: how long the broker held it (its latency)"),
    ("code", "int32"),
    ("code_name", "string", "SUCCESS (found), PULL_NOT_FOUND, PULL_OFFSET_MOVED, ..."),
    ("remark", "string", "the broker's GetMessageStatus: FOUND, OFFSET_OVERFLOW_ONE, ..."),
    ("messages", "int32", "messages returned"),
    ("bytes", "int64", "their bodies' bytes on the wire"),
    ("next_begin_offset", "int64"),
    ("min_offset", "int64"),
    ("max_offset", "int64"),
    ("suggested_broker_id", "int64", "suggestWhichBrokerId"),
)

OFFSETS = _cols(
    ("server", "string", "the broker"),
    ("consumer_group", "string"),
    ("topic", "string"),
    ("queue_id", "int32"),
    ("committed_offset", "int64", ("the last committed (UPDATE_CONSUMER_OFFSET, a pull's "
                                   "commitOffset with the commit flag)")),
    ("commits", "int64"),
    ("committed_ts_ns", "int64"),
    ("queried_offset", "int64", "the last QUERY_CONSUMER_OFFSET answer"),
    ("max_offset", "int64", "the last max offset the broker gave (pull or GET_MAX_OFFSET)"),
    ("max_offset_ts_ns", "int64"),
    ("lag", "int64", "max_offset - committed_offset, when the wire shows both"),
)

CLIENTS = _cols(
    ("server", "string"),
    ("client_id", "string"),
    ("connection", "string", "the last connection it spoke on"),
    ("language", "string"),
    ("version", "int32"),
    ("heartbeats", "int64"),
    ("first_heartbeat_ns", "int64"),
    ("last_heartbeat_ns", "int64"),
    ("producer_groups", "string", "comma-separated, as the heartbeats name them"),
    ("consumer_groups", "string"),
    ("subscriptions", "string", "topics the consumer groups subscribe to"),
    ("unregistered_ns", "int64", "its last UNREGISTER_CLIENT"),
    ("unregistered_groups", "string"),
)

BROKER_REGISTRATIONS = _cols(
    *_CALL,
    ("request_name", "string", "REGISTER_BROKER or UNREGISTER_BROKER"),
    ("cluster_name", "string"),
    ("broker_name", "string"),
    ("broker_addr", "string"),
    ("broker_id", "int64"),
    ("ha_server_addr", "string"),
    ("topics", "int32", "topics in the registration's topic configuration"),
    ("topic_names", "string", "comma-separated, sorted"),
    ("request_ts_ns", "int64"),
    ("response_ts_ns", "int64"),
    ("latency_ms", "float64"),
    ("code", "int32"),
    ("code_name", "string"),
    ("remark", "string"),
    ("master_addr", "string", "the name server's answer"),
)

TABLES = {"rocketmq_frames": FRAMES, "rocketmq_connections": CONNECTIONS,
          "rocketmq_requests": REQUESTS,
          "rocketmq_latency": LATENCY, "rocketmq_errors": ERRORS, "rocketmq_sends": SENDS,
          "rocketmq_pulls": PULLS, "rocketmq_offsets": OFFSETS, "rocketmq_clients": CLIENTS,
          "rocketmq_broker_registrations": BROKER_REGISTRATIONS}  # fmt: skip
