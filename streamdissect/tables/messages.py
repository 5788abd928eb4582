"""The messages table: one row a message of every protocol that carries messages, one
schema for all (each protocol's MessageReader.table_row fills the columns that mean
something for it; the others are null). Made only when asked for (analyze(messages=True),
messages_table(), `analyze --messages`): it reads every frame as a record, with its
messages.

The Stream's rows: Publish and Deliver messages, their AMQP 1.0 properties a column each.
RocketMQ's: the messages of SEND_MESSAGE(_V2), SEND_BATCH_MESSAGE and pull responses, with
topic, queue, ids, tags, keys and the properties map.
"""

from __future__ import annotations

from streamdissect.tables.columns import columns as _cols

MESSAGES = _cols(
    ("protocol", "string", "the connection's protocol: stream or rocketmq"),
    ("ts_ns", "int64", "capture time of the frame that carried the message"),
    ("connection", "string"),
    ("direction", "string", "c2s (Publish, a RocketMQ send) or s2c (Deliver, a pull's)"),
    ("frame", "int64", "the frame's number in the capture, as `frames` numbers it"),
    ("stream_offset", "int64", "byte offset of the frame in its direction's TCP stream"),
    ("command", "string", ("Publish or Deliver; RocketMQ: the request (SEND_MESSAGE_V2, "
                           "SEND_BATCH_MESSAGE, PULL_MESSAGE for a pull's response)")),
    ("version", "int32", "the frame's version (RocketMQ: its header's)"),
    ("index", "int64", "the message's place in its frame, from 0"),
    ("publisher_id", "int32", "Publish"),
    ("publishing_id", "uint64", "Publish (a sub-batch's messages share one)"),
    ("filter_value", "string", "Publish v2"),
    ("subscription_id", "int32", "Deliver"),
    ("offset", "uint64", ("Deliver: the message's offset in the stream; RocketMQ: in its "
                          "queue (a pulled message)")),
    ("stream", "string", "from the connection's DeclarePublisher or Subscribe, if captured"),
    ("topic", "string", "RocketMQ"),
    ("queue_id", "int32", "RocketMQ"),
    ("msg_id", "string", "RocketMQ: the client's id (UNIQ_KEY), else the broker's"),
    ("offset_msg_id", "string", ("RocketMQ: the broker's id (store host and commit log "
                                 "offset; a pulled message)")),
    ("tags", "string", "RocketMQ"),
    ("keys", "string", "RocketMQ"),
    ("compression", "string", ("the sub-batch's codec (none, gzip, snappy, lz4, zstd); "
                               "null for a simple entry; RocketMQ: zlib, lz4, zstd or null")),
    ("size", "int64", ("the message's bytes as its client encoded them (RocketMQ: the body "
                       "on the wire, compressed when it is)")),
    ("format", "string", "amqp (AMQP 1.0 sections) or raw (bytes as they are)"),
    ("message_id", "string", "AMQP properties, as text (a binary id as hex)"),
    ("user_id", "string"),
    ("to", "string"),
    ("subject", "string"),
    ("reply_to", "string"),
    ("correlation_id", "string"),
    ("content_type", "string"),
    ("content_encoding", "string"),
    ("absolute_expiry_time_ms", "int64", "ms since the epoch"),
    ("creation_time_ms", "int64", "ms since the epoch"),
    ("group_id", "string"),
    ("group_sequence", "int64"),
    ("reply_to_group_id", "string"),
    ("application_properties", "map<string,string>",
     ("name -> value: a string as it is, any other value as its JSON text (CSV: the map as a "
       "JSON object)")),
    ("header", "string", "JSON object: durable, priority, ttl, first_acquirer, delivery_count"),
    ("delivery_annotations", "string", "JSON object"),
    ("message_annotations", "string", "JSON object"),
    ("footer", "string", "JSON object"),
    ("properties", "map<string,string>", ("RocketMQ: the message's properties (TAGS, KEYS, "
                                         "UNIQ_KEY, the user's), name -> value")),
    ("born_timestamp_ms", "int64", "RocketMQ: when the producer made it (ms since the epoch)"),
    ("store_timestamp_ms", "int64", "RocketMQ: when the broker stored it (a pulled message)"),
    ("crc_ok", "bool", "RocketMQ: the stored body CRC matches (a pulled message)"),
    ("body_kind", "string", "data, amqp_value, amqp_sequence or raw (RocketMQ: data)"),
    ("body_size", "int64", "RocketMQ: inflated when the body was compressed"),
    ("body_preview", "string", ("the body's first bytes: text, or hex (body_encoding); "
                                "null with bodies left out")),
    ("body_encoding", "string", "text or hex (data and raw bodies); null for typed ones"),
    ("body_truncated", "bool", "the preview is cut"),
    ("error", "string", ("where the message's sections stopped decoding (RocketMQ: its body "
                         "did not inflate)")),
)
