"""Enumerations of the wire's numeric codes, and names for values we do not know.

Unknown values stay plain ints everywhere in the codec: a capture from a newer broker must
still decode, so nothing here raises on an unfamiliar number.
"""

from __future__ import annotations

from enum import IntEnum

RESPONSE_BIT = 0x8000


class CommandKey(IntEnum):
    """Command ids (the low 15 bits of the wire key)."""

    DECLARE_PUBLISHER = 0x0001
    PUBLISH = 0x0002
    PUBLISH_CONFIRM = 0x0003
    PUBLISH_ERROR = 0x0004
    QUERY_PUBLISHER_SEQUENCE = 0x0005
    DELETE_PUBLISHER = 0x0006
    SUBSCRIBE = 0x0007
    DELIVER = 0x0008
    CREDIT = 0x0009
    STORE_OFFSET = 0x000A
    QUERY_OFFSET = 0x000B
    UNSUBSCRIBE = 0x000C
    CREATE = 0x000D
    DELETE = 0x000E
    METADATA = 0x000F
    METADATA_UPDATE = 0x0010
    PEER_PROPERTIES = 0x0011
    SASL_HANDSHAKE = 0x0012
    SASL_AUTHENTICATE = 0x0013
    TUNE = 0x0014
    OPEN = 0x0015
    CLOSE = 0x0016
    HEARTBEAT = 0x0017
    ROUTE = 0x0018
    PARTITIONS = 0x0019
    CONSUMER_UPDATE = 0x001A
    EXCHANGE_COMMAND_VERSIONS = 0x001B
    STREAM_STATS = 0x001C
    CREATE_SUPER_STREAM = 0x001D
    DELETE_SUPER_STREAM = 0x001E
    RESOLVE_OFFSET_SPEC = 0x001F


class ResponseCode(IntEnum):
    OK = 0x01
    STREAM_DOES_NOT_EXIST = 0x02
    SUBSCRIPTION_ID_ALREADY_EXISTS = 0x03
    SUBSCRIPTION_ID_DOES_NOT_EXIST = 0x04
    STREAM_ALREADY_EXISTS = 0x05
    STREAM_NOT_AVAILABLE = 0x06
    SASL_MECHANISM_NOT_SUPPORTED = 0x07
    AUTHENTICATION_FAILURE = 0x08
    SASL_ERROR = 0x09
    SASL_CHALLENGE = 0x0A
    SASL_AUTHENTICATION_FAILURE_LOOPBACK = 0x0B
    VIRTUAL_HOST_ACCESS_FAILURE = 0x0C
    UNKNOWN_FRAME = 0x0D
    FRAME_TOO_LARGE = 0x0E
    INTERNAL_ERROR = 0x0F
    ACCESS_REFUSED = 0x10
    PRECONDITION_FAILED = 0x11
    PUBLISHER_DOES_NOT_EXIST = 0x12
    NO_OFFSET = 0x13
    SASL_CANNOT_CHANGE_MECHANISM = 0x14
    SASL_CANNOT_CHANGE_USERNAME = 0x15


class OffsetType(IntEnum):
    NONE = 0  # only in ConsumerUpdate responses
    FIRST = 1
    LAST = 2
    NEXT = 3
    OFFSET = 4
    TIMESTAMP = 5


class CompressionType(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class ChunkType(IntEnum):
    USER = 0
    TRACKING_DELTA = 1
    TRACKING_SNAPSHOT = 2


class TrackingType(IntEnum):
    SEQUENCE = 0
    OFFSET = 1
    TIMESTAMP = 2


def enum_name(enum: type[IntEnum], value: int | None) -> str | None:
    """The member name for `value`, or "unknown(0x..)"; None stays None."""
    if value is None:
        return None
    try:
        return enum(value).name
    except ValueError:
        return f"unknown(0x{value:02x})"


def code_name(code: int | None) -> str | None:
    """Name of a response code, e.g. 0x02 -> "STREAM_DOES_NOT_EXIST", 0x2a -> "unknown(0x2a)"."""
    return enum_name(ResponseCode, code)


def offset_type_name(offset_type: int | None) -> str | None:
    return enum_name(OffsetType, offset_type)
