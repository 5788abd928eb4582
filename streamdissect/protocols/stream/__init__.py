"""The RabbitMQ Stream codec: frames in, typed records out, and back (I/O-free, like h11)."""

from streamdissect.protocols.stream.codec import (
    decode_frame,
    encode_record,
    make_record,
    record_from_dict,
)
from streamdissect.protocols.stream.codes import (
    ChunkType,
    CommandKey,
    CompressionType,
    OffsetType,
    ResponseCode,
    TrackingType,
    code_name,
    offset_type_name,
)
from streamdissect.protocols.stream.compression import (
    DEFAULT_MAX_DECOMPRESSED,
    DecompressionError,
    decompress,
)
from streamdissect.protocols.stream.osiris import (
    Entry,
    MalformedEntry,
    OsirisRecord,
    TrackingEntry,
)
from streamdissect.protocols.stream.publish import PublishedMessage, PublishMessages, SubBatch
from streamdissect.protocols.stream.records import (
    RECORD_CLASSES,
    Malformed,
    Record,
    Unknown,
    record_class,
)
from streamdissect.protocols.stream.spec import (
    COMMANDS,
    MESSAGES,
    Message,
    all_columns,
    columns,
    message_spec,
)

__all__ = [
    "COMMANDS",
    "DEFAULT_MAX_DECOMPRESSED",
    "MESSAGES",
    "RECORD_CLASSES",
    "AmqpMessage",
    "ChunkType",
    "CommandKey",
    "CompressionType",
    "DecompressionError",
    "Entry",
    "Malformed",
    "MalformedEntry",
    "Message",
    "OffsetType",
    "OsirisRecord",
    "PublishMessages",
    "PublishedMessage",
    "Record",
    "ResponseCode",
    "SubBatch",
    "TrackingEntry",
    "TrackingType",
    "Unknown",
    "all_columns",
    "code_name",
    "columns",
    "decode_amqp_message",
    "decode_frame",
    "decompress",
    "encode_record",
    "looks_like_amqp",
    "make_record",
    "message_spec",
    "offset_type_name",
    "record_class",
    "record_from_dict",
]  # fmt: skip

# AMQP 1.0 decoding is asked for, never needed to dissect: imported on first use.
_AMQP_NAMES = {"AmqpMessage": "AmqpMessage", "looks_like_amqp": "looks_like_amqp",
               "decode_amqp_message": "decode_message"}  # fmt: skip


def __getattr__(name: str):
    if name in _AMQP_NAMES:
        from streamdissect.protocols.stream import amqp

        return getattr(amqp, _AMQP_NAMES[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
