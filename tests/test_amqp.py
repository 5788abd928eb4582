"""AMQP 1.0 message payloads, built by hand from the type table (facts §4)."""

from __future__ import annotations

import struct
import uuid

from streamdissect.protocols.stream import decode_amqp_message, looks_like_amqp
from streamdissect.protocols.stream.amqp import MAX_DEPTH, Opaque


def described(code: int, value: bytes) -> bytes:
    return b"\x00\x53" + bytes([code]) + value


def str8(text: str) -> bytes:
    raw = text.encode()
    return b"\xa1" + bytes([len(raw)]) + raw


def sym8(text: str) -> bytes:
    return b"\xa3" + bytes([len(text)]) + text.encode()


def vbin8(data: bytes) -> bytes:
    return b"\xa0" + bytes([len(data)]) + data


def list8(*items: bytes) -> bytes:
    body = bytes([len(items)]) + b"".join(items)
    return b"\xc0" + bytes([len(body)]) + body


def map8(*items: bytes) -> bytes:
    body = bytes([len(items)]) + b"".join(items)
    return b"\xc1" + bytes([len(body)]) + body


def list32(*items: bytes) -> bytes:
    body = struct.pack(">I", len(items)) + b"".join(items)
    return b"\xd0" + struct.pack(">I", len(body)) + body


MESSAGE_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")
FULL_MESSAGE = (
    described(0x70, list8(b"\x41", b"\x50\x04", b"\x70" + struct.pack(">I", 1000)))
    + described(0x71, map8(sym8("x-trace"), str8("t1")))
    + described(0x72, map8(sym8("x-stream-filter-value"), str8("eu")))
    + described(0x73, list32(
        b"\x98" + MESSAGE_ID.bytes,  # message-id
        vbin8(b"user"),  # user-id
        str8("queue"),  # to
        b"\x40",  # subject
        b"\x40",  # reply-to
        b"\x80" + struct.pack(">Q", 77),  # correlation-id as ulong
        sym8("application/json"),  # content-type
        b"\x40",  # content-encoding
        b"\x40",  # absolute-expiry-time
        b"\x83" + struct.pack(">q", 1_700_000_000_123),  # creation-time
    ))
    + described(0x74, map8(str8("tenant"), str8("acme"), str8("retries"), b"\x54\xff"))
    + described(0x75, vbin8(b'{"a": 1}'))
    + described(0x75, vbin8(b"more"))
    + described(0x78, map8(sym8("sig"), vbin8(b"\x01\x02")))
)  # fmt: skip


def test_every_section_of_a_full_message() -> None:
    message = decode_amqp_message(FULL_MESSAGE)
    assert message.is_amqp and message.error is None
    assert message.header == {"durable": True, "priority": 4, "ttl": 1000}
    assert message.delivery_annotations == {"x-trace": "t1"}
    assert message.message_annotations == {"x-stream-filter-value": "eu"}
    assert message.message_id == MESSAGE_ID
    assert message.correlation_id == 77
    assert message.content_type == "application/json"
    assert message.creation_time == 1_700_000_000_123
    assert message.properties["user_id"] == b"user" and message.properties["to"] == "queue"
    assert message.application_properties == {"tenant": "acme", "retries": -1}
    assert message.body_kind == "data" and message.body == [b'{"a": 1}', b"more"]
    assert message.body_size == 12
    assert message.footer == {"sig": b"\x01\x02"}
    summary = message.summary()
    assert summary["message_id"] == str(MESSAGE_ID)
    assert summary["application_properties"] == {"tenant": "acme", "retries": -1}


def test_amqp_value_and_sequence_bodies() -> None:
    value = decode_amqp_message(described(0x77, str8("héllo")))
    assert value.body_kind == "amqp_value" and value.body == ["héllo"] and value.body_size == 6
    seq = decode_amqp_message(described(0x76, list8(b"\x52\x01", b"\x52\x02")))
    assert seq.body_kind == "amqp_sequence" and seq.body == [[1, 2]]


def test_symbolic_and_ulong_descriptors() -> None:
    symbolic = b"\x00" + sym8("amqp:data:binary") + vbin8(b"x")
    assert decode_amqp_message(symbolic).body == [b"x"]
    ulong = b"\x00\x80" + struct.pack(">Q", 0x75) + vbin8(b"y")
    assert decode_amqp_message(ulong).body == [b"y"]


def test_arrays_and_scalar_types() -> None:
    array = b"\xe0" + bytes([1 + 1 + 3 * 4]) + b"\x03\x71" + struct.pack(">iii", 1, -2, 3)
    values = list8(array, b"\x82" + struct.pack(">d", 1.5), b"\x73" + struct.pack(">I", 0x263A),
                   b"\x61\xff\xfe", b"\x56\x01", b"\x44", b"\x45")  # fmt: skip
    message = decode_amqp_message(described(0x77, values))
    assert message.body == [[[1, -2, 3], 1.5, "☺", -2, True, 0, []]]


def test_unknown_type_codes_are_skipped_by_width_category() -> None:
    # 0x74 decimal32 (4 bytes), 0x94 decimal128 (16), 0x4f (0), 0xa7 (1-byte size), 0xf7 (4-byte)
    values = list8(b"\x74abcd", b"\x94" + b"z" * 16, b"\x4f", b"\xa7\x02hi",
                   b"\xf7" + struct.pack(">I", 3) + b"xyz", b"\x52\x07")  # fmt: skip
    message = decode_amqp_message(described(0x77, values))
    assert message.error is None
    body = message.body[0]
    assert body[0] == Opaque(0x74, b"abcd") and body[2] == Opaque(0x4F, b"")
    assert body[4] == Opaque(0xF7, b"xyz") and body[5] == 7


def test_raw_payloads_are_reported_as_such() -> None:
    for raw in (b"hello world", b"", b"\x00\x53\x10abc", b"{json}"):
        message = decode_amqp_message(raw)
        assert not message.is_amqp and message.body_kind == "raw" and message.body_size == len(raw)
    assert looks_like_amqp(FULL_MESSAGE)


def test_nesting_depth_is_bounded() -> None:
    value = b"\x40"
    for _ in range(MAX_DEPTH + 5):
        value = list32(value)
    message = decode_amqp_message(described(0x77, value))
    assert message.error is not None and "deep" in message.error


def test_lengths_are_checked_and_errors_keep_earlier_sections() -> None:
    broken = described(0x74, map8(str8("k"), str8("v"))) + described(0x75, b"\xb0\x7f\xff\xff\xff")
    message = decode_amqp_message(broken)
    assert message.application_properties == {"k": "v"}
    assert message.error is not None and "needs" in message.error
    huge_count = described(0x77, b"\xd0" + struct.pack(">II", 8, 2**31) + b"\x40" * 4)
    assert "cannot fit" in decode_amqp_message(huge_count).error
    odd_map = described(0x74, b"\xc1\x03\x01\x40\x40")
    assert decode_amqp_message(odd_map).error is not None


def test_every_prefix_and_byte_flip_is_handled() -> None:
    for cut in range(len(FULL_MESSAGE)):
        decode_amqp_message(FULL_MESSAGE[:cut])
    for at in range(len(FULL_MESSAGE)):
        for value in (0x00, 0x7F, 0xFF, 0xB0, 0xD1):
            decode_amqp_message(FULL_MESSAGE[:at] + bytes([value]) + FULL_MESSAGE[at + 1 :])
