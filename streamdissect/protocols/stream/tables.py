"""The Stream's tables: one row a frame (`frames`), and the analyses' tables.

pandas, Arrow/Parquet and Spark schemas are all derived from these lists (tables.columns), so
a notebook written against the pandas tables runs unchanged on the Parquet the Spark jobs
write. The pipeline finds them by name through tables/schema.py.
"""

from __future__ import annotations

from streamdissect.tables.columns import Column
from streamdissect.tables.columns import columns as _cols

FRAMES = _cols(
    ("ts_ns", "int64", "capture time of the packet that completed the frame"),
    ("connection", "string", "client_ip:port-server_ip:port[#n]"),
    ("direction", "string", "c2s or s2c"),
    ("stream_offset", "int64", "byte offset of the frame in its direction's TCP stream"),
    ("key", "int32", "command key as on the wire, response bit included"),
    ("command", "string"),
    ("response", "bool"),
    ("version", "int32"),
    ("size", "int64", "frame length without the 4-byte size field"),
    ("correlation_id", "int64"),
    ("code", "int32"),
    ("code_name", "string"),
    ("truncated", "bool", "cut short by the capture's snaplen"),
    ("publisher_id", "int32"),
    ("subscription_id", "int32"),
    ("stream", "string"),
    ("record_count", "int64", "messages in Publish/Deliver (sub-batches count their records)"),
    ("credit", "int64"),
    ("publishing_ids", "list<uint64>", "Publish, PublishConfirm"),
    ("committed_chunk_id", "uint64", "Deliver v2"),
    ("chunk_id", "uint64", "Deliver: the chunk's first offset"),
    ("chunk_timestamp_ms", "int64", "Deliver: broker clock"),
    ("num_entries", "int64", "Deliver: data entries in the chunk"),
    ("chunk_type", "int32", "Deliver: 0 user data, 1 tracking delta, 2 tracking snapshot"),
    ("crc_ok", "bool", "Deliver: the chunk's CRC (None when its data was not kept)"),
    ("offset_type", "int32", "Subscribe, ResolveOffsetSpec, ConsumerUpdate response"),
    ("offset", "int64"),
    ("frame_max", "int64", "Tune"),
    ("heartbeat", "int64", "Tune"),
    ("fields", "string", "the record's other fields as JSON (payload bytes left out)"),
)

CONNECTIONS = _cols(
    ("connection", "string"),
    ("client", "string"),
    ("server", "string"),
    ("start_ns", "int64"),
    ("end_ns", "int64"),
    ("frames_c2s", "int64"),
    ("frames_s2c", "int64"),
    ("bytes_c2s", "int64"),
    ("bytes_s2c", "int64"),
    ("handshake_ms", "float64", "first frame to the Open response"),
    ("sasl_mechanism", "string"),
    ("user", "string", "SASL PLAIN user; the password is never kept"),
    ("vhost", "string"),
    ("frame_max", "int64", "negotiated (client's Tune reply), else the server's offer"),
    ("heartbeat", "int64", "negotiated heartbeat in seconds"),
    ("heartbeats_c2s", "int64"),
    ("heartbeats_s2c", "int64"),
    ("missed_heartbeat_gaps", "int64", "silences longer than 2 heartbeat intervals"),
    ("client_properties", "string", "JSON"),
    ("server_properties", "string", "JSON"),
    ("close_code", "int32"),
    ("close_reason", "string"),
    ("closed_by", "string", "client, server, or 'TCP closed without Close'"),
    ("tcp_end", "string", "fin, rst or open"),
)

REQUESTS = _cols(
    ("connection", "string"),
    ("command", "string"),
    ("direction", "string", "direction of the request"),
    ("correlation_id", "int64"),
    ("request_ts_ns", "int64"),
    ("response_ts_ns", "int64"),
    ("latency_ms", "float64"),
    ("code", "int32"),
    ("code_name", "string"),
    ("status", "string", "answered, open, orphan_response or duplicate"),
)

LATENCY = _cols(
    ("command", "string"),
    ("calls", "int64"),
    ("answered", "int64"),
    ("open_requests", "int64"),
    ("orphan_responses", "int64"),
    ("duplicate_ids", "int64"),
    ("min_ms", "float64"),
    ("p50_ms", "float64"),
    ("p75_ms", "float64"),
    ("p95_ms", "float64"),
    ("p99_ms", "float64"),
    ("max_ms", "float64"),
)

PUBLISHES = _cols(
    ("connection", "string"),
    ("publisher_id", "int32"),
    ("publishing_id", "uint64"),
    ("publish_ts_ns", "int64"),
    ("outcome_ts_ns", "int64"),
    ("lag_ms", "float64"),
    ("outcome", "string", "confirmed, errored or unconfirmed"),
    ("code", "int32", "PublishError code"),
)

CONFIRMS = _cols(
    ("connection", "string"),
    ("publisher_id", "int32"),
    ("published", "int64", "publishing ids sent"),
    ("records_published", "int64", "messages, sub-batches counted by their records"),
    ("confirmed", "int64"),
    ("errored", "int64"),
    ("unconfirmed", "int64", "never confirmed nor errored within the capture"),
    ("unmatched_confirms", "int64", "confirms for ids published before the capture began"),
    ("cut_frames", "int64",
     ("Publish/PublishConfirm frames cut by the capture (snap length): "
      "counted from their headers, their cut ids unpaired; the row's figures are lower bounds")),
    ("errors_by_code", "string", "JSON {code_name: count}"),
    ("p50_ms", "float64"),
    ("p75_ms", "float64"),
    ("p95_ms", "float64"),
    ("p99_ms", "float64"),
    ("max_ms", "float64"),
)

BACKLOG = _cols(
    ("ts_ns", "int64"),
    ("connection", "string"),
    ("publisher_id", "int32"),
    ("outstanding", "int64", "publishing ids awaiting confirm after this frame"),
)

CREDIT = _cols(
    ("connection", "string"),
    ("subscription_id", "int32"),
    ("stream", "string"),
    ("initial_credit", "int64"),
    ("credits_granted", "int64", "sum of Credit frames after Subscribe"),
    ("credit_frames", "int64"),
    ("chunks_delivered", "int64"),
    ("records_delivered", "int64"),
    ("credit_errors", "int64"),
    ("final_credit", "int64"),
    ("stall_count", "int64"),
    ("stalled_ms_total", "float64"),
    ("cut_frames", "int64",
     ("Subscribe/Deliver frames cut by the capture (snap length): counts "
      "from their headers; a cut Subscribe's credit unknown, so no stalls; lower bounds")),
)

STALLS = _cols(
    ("connection", "string"),
    ("subscription_id", "int32"),
    ("start_ns", "int64", "the Deliver that used the last credit"),
    ("end_ns", "int64", "the Credit that restored it (capture end if never)"),
    ("duration_ms", "float64"),
    ("ended_by", "string", "credit, unsubscribe, connection_end or capture_end"),
    ("broker_had_more", "bool", "next Deliver came at once, or committed chunk id was ahead"),
)

CREDIT_BALANCE = _cols(
    ("ts_ns", "int64", "the Subscribe, Credit or Deliver that set it"),
    ("connection", "string"),
    ("subscription_id", "int32"),
    ("balance", "int64", "credit left after that frame: chunks the broker may still send"),
)

DELIVERIES = _cols(
    ("ts_ns", "int64"),
    ("connection", "string"),
    ("subscription_id", "int32"),
    ("chunk_first_offset", "uint64"),
    ("num_records", "int64"),
    ("num_entries", "int64"),
    ("chunk_type", "int32"),
    ("chunk_timestamp_ms", "int64", "broker clock"),
    ("committed_chunk_id", "uint64", "Deliver v2 only"),
    ("lag", "int64", "committed_chunk_id - chunk_first_offset (Deliver v2 only)"),
    ("delivery_latency_ms", "float64", "capture time - chunk timestamp (two clocks)"),
    ("size", "int64"),
    ("crc_ok", "bool"),
)

THROUGHPUT = _cols(
    ("second_ns", "int64", "start of the one-second bucket"),
    ("published_msgs", "int64"),
    ("published_bytes", "int64"),
    ("confirmed_msgs", "int64"),
    ("delivered_msgs", "int64"),
    ("delivered_bytes", "int64"),
)

ERRORS = _cols(
    ("command", "string", "the request's name; PublishError; Credit; MetadataUpdate"),
    ("code", "int32"),
    ("code_name", "string"),
    ("count", "int64"),
)

TABLES: dict[str, tuple[Column, ...]] = {
    "frames": FRAMES,
    "connections": CONNECTIONS,
    "requests": REQUESTS,
    "latency": LATENCY,
    "publishes": PUBLISHES,
    "confirms": CONFIRMS,
    "backlog": BACKLOG,
    "credit": CREDIT,
    "stalls": STALLS,
    "credit_balance": CREDIT_BALANCE,
    "deliveries": DELIVERIES,
    "throughput": THROUGHPUT,
    "errors": ERRORS,
}
