"""Every command and version, decoded from hand-built bytes and encoded back exactly."""

from __future__ import annotations

import json
import struct

import pytest
from test_codec_wire import (
    b32,
    chunk,
    deliver,
    frame,
    s,
    simple_entry,
    smap,
    strings,
    sub_batch,
    u8,
    u16,
    u32,
    u64,
)

from streamdissect.protocols.stream import (
    MESSAGES,
    Malformed,
    OffsetType,
    ResponseCode,
    Unknown,
    code_name,
    columns,
    decode_frame,
    encode_record,
    make_record,
    record_from_dict,
)

CORR = u32(42)
OK = u16(1)
ACK_BODY = CORR + OK
ACK_FIELDS = {"correlation_id": 42, "code": 1}

# (id, frame bytes, record class name, fields expected on the record)
CASES: list[tuple[str, bytes, str, dict]] = [
    ("declare_publisher", frame(0x0001, 1, CORR + u8(3) + s("ref") + s("orders")),
     "DeclarePublisher", {"correlation_id": 42, "publisher_id": 3,
                          "publisher_reference": "ref", "stream": "orders"}),
    ("declare_publisher_null_ref", frame(0x0001, 1, CORR + u8(3) + s(None) + s("orders")),
     "DeclarePublisher", {"publisher_reference": None}),
    ("declare_publisher_resp", frame(0x8001, 1, ACK_BODY), "DeclarePublisherResponse", ACK_FIELDS),
    ("publish_v1", frame(0x0002, 1, u8(7) + struct.pack(">i", 2) + u64(10) + simple_entry(b"a")
                         + u64(11) + sub_batch(0, [b"x", b"yy", b"zzz"])),
     "Publish", {"publisher_id": 7, "publishing_ids": [10, 11], "record_count": 4}),
    ("publish_v2", frame(0x0002, 2, u8(7) + struct.pack(">i", 2) + u64(5) + s("eu")
                         + simple_entry(b"hello") + u64(6) + s(None) + simple_entry(b"")),
     "Publish", {"publisher_id": 7, "publishing_ids": [5, 6], "record_count": 2, "version": 2}),
    ("publish_confirm", frame(0x0003, 1, u8(7) + struct.pack(">i", 3) + u64(1) + u64(2) + u64(3)),
     "PublishConfirm", {"publisher_id": 7, "publishing_ids": [1, 2, 3], "correlation_id": None}),
    ("publish_error", frame(0x0004, 1, u8(7) + struct.pack(">i", 1) + u64(9) + u16(0x12)),
     "PublishError", {"publisher_id": 7, "errors": [{"publishing_id": 9, "code": 0x12}]}),
    ("query_publisher_sequence", frame(0x0005, 1, CORR + s("ref") + s("orders")),
     "QueryPublisherSequence", {"publisher_reference": "ref", "stream": "orders"}),
    ("query_publisher_sequence_resp", frame(0x8005, 1, ACK_BODY + u64(99)),
     "QueryPublisherSequenceResponse", {**ACK_FIELDS, "sequence": 99}),
    ("delete_publisher", frame(0x0006, 1, CORR + u8(3)), "DeletePublisher", {"publisher_id": 3}),
    ("delete_publisher_resp", frame(0x8006, 1, ACK_BODY), "DeletePublisherResponse", ACK_FIELDS),
    ("subscribe_first_no_props",
     frame(0x0007, 1, CORR + u8(1) + s("orders") + u16(1) + u16(10)),
     "Subscribe", {"subscription_id": 1, "stream": "orders", "offset_type": 1, "offset": None,
                   "credit": 10, "properties": None}),
    ("subscribe_offset_props",
     frame(0x0007, 1, CORR + u8(1) + s("orders") + u16(4) + u64(1234) + u16(10)
           + smap({"single-active-consumer": "true", "name": "app"})),
     "Subscribe", {"offset_type": 4, "offset": 1234,
                   "properties": {"single-active-consumer": "true", "name": "app"}}),
    ("subscribe_timestamp_empty_props",
     frame(0x0007, 1, CORR + u8(1) + s("orders") + u16(5) + struct.pack(">q", -5) + u16(10)
           + smap({})),
     "Subscribe", {"offset_type": 5, "offset": -5, "properties": {}}),
    ("subscribe_resp", frame(0x8007, 1, ACK_BODY), "SubscribeResponse", ACK_FIELDS),
    ("deliver_v1", deliver(chunk([simple_entry(b"m1"), simple_entry(b"m2")], 2)),
     "Deliver", {"subscription_id": 1, "committed_chunk_id": None, "record_count": 2,
                 "entry_count": 2}),
    ("deliver_v2", deliver(chunk([sub_batch(0, [b"a", b"b", b"c"])], 3), committed=77),
     "Deliver", {"committed_chunk_id": 77, "record_count": 3, "entry_count": 1, "version": 2}),
    ("credit", frame(0x0009, 1, u8(2) + struct.pack(">h", 5)),
     "Credit", {"subscription_id": 2, "credit": 5}),
    ("credit_negative", frame(0x0009, 1, u8(2) + struct.pack(">h", -1)), "Credit", {"credit": -1}),
    ("credit_resp", frame(0x8009, 1, u16(0x04) + u8(2)),
     "CreditResponse", {"code": 4, "subscription_id": 2, "correlation_id": None}),
    ("store_offset", frame(0x000A, 1, s("app") + s("orders") + u64(500)),
     "StoreOffset", {"reference": "app", "stream": "orders", "offset": 500}),
    ("query_offset", frame(0x000B, 1, CORR + s("app") + s("orders")),
     "QueryOffset", {"reference": "app", "stream": "orders"}),
    ("query_offset_resp", frame(0x800B, 1, CORR + u16(0x13) + u64(0)),
     "QueryOffsetResponse", {"code": 0x13, "offset": 0}),
    ("unsubscribe", frame(0x000C, 1, CORR + u8(1)), "Unsubscribe", {"subscription_id": 1}),
    ("unsubscribe_resp", frame(0x800C, 1, ACK_BODY), "UnsubscribeResponse", ACK_FIELDS),
    ("create", frame(0x000D, 1, CORR + s("orders") + smap({"max-age": "1h"})),
     "Create", {"stream": "orders", "arguments": {"max-age": "1h"}}),
    ("create_resp", frame(0x800D, 1, CORR + u16(0x05)), "CreateResponse", {"code": 5}),
    ("delete", frame(0x000E, 1, CORR + s("orders")), "Delete", {"stream": "orders"}),
    ("delete_resp", frame(0x800E, 1, ACK_BODY), "DeleteResponse", ACK_FIELDS),
    ("metadata", frame(0x000F, 1, CORR + strings(["a", "b"])), "Metadata", {"streams": ["a", "b"]}),
    ("metadata_resp",
     frame(0x800F, 1, CORR + struct.pack(">i", 1) + u16(0) + s("host") + u32(5552)
           + struct.pack(">i", 2)
           + s("a") + u16(1) + u16(0) + struct.pack(">i", 2) + u16(1) + u16(2)
           + s("b") + u16(6) + u16(0xFFFF) + struct.pack(">i", 0)),
     "MetadataResponse",
     {"code": None, "brokers": [{"reference": 0, "host": "host", "port": 5552}],
      "stream_metadata": [
          {"stream": "a", "code": 1, "leader_reference": 0, "replicas_references": [1, 2]},
          {"stream": "b", "code": 6, "leader_reference": 0xFFFF, "replicas_references": []}]}),
    ("metadata_update", frame(0x0010, 1, u16(6) + s("orders")),
     "MetadataUpdate", {"code": 6, "stream": "orders", "correlation_id": None}),
    ("peer_properties", frame(0x0011, 1, CORR + smap({"product": "x"})),
     "PeerProperties", {"properties": {"product": "x"}}),
    ("peer_properties_resp", frame(0x8011, 1, ACK_BODY + smap({"version": "4.0"})),
     "PeerPropertiesResponse", {"properties": {"version": "4.0"}}),
    ("sasl_handshake", frame(0x0012, 1, CORR), "SaslHandshake", {"correlation_id": 42}),
    ("sasl_handshake_resp", frame(0x8012, 1, ACK_BODY + strings(["PLAIN", "AMQPLAIN"])),
     "SaslHandshakeResponse", {"mechanisms": ["PLAIN", "AMQPLAIN"]}),
    ("sasl_authenticate", frame(0x0013, 1, CORR + s("PLAIN") + b32(b"\x00guest\x00secret")),
     "SaslAuthenticate", {"mechanism": "PLAIN", "sasl_data": b"\x00guest\x00secret",
                          "username": "guest"}),
    ("sasl_authenticate_null", frame(0x0013, 1, CORR + s("EXTERNAL") + b32(None)),
     "SaslAuthenticate", {"sasl_data": None, "username": None}),
    ("sasl_authenticate_resp", frame(0x8013, 1, ACK_BODY),
     "SaslAuthenticateResponse", {"challenge": None}),
    ("sasl_authenticate_resp_challenge", frame(0x8013, 1, CORR + u16(0x0A) + b32(b"more")),
     "SaslAuthenticateResponse", {"code": 0x0A, "challenge": b"more"}),
    ("tune", frame(0x0014, 1, u32(1048576) + u32(60)),
     "Tune", {"frame_max": 1048576, "heartbeat": 60, "correlation_id": None, "code": None}),
    ("tune_reply_8014", frame(0x8014, 1, u32(1048576) + u32(60)),
     "TuneResponse", {"frame_max": 1048576, "heartbeat": 60, "code": None}),
    ("open", frame(0x0015, 1, CORR + s("/")), "Open", {"virtual_host": "/"}),
    ("open_resp_no_map", frame(0x8015, 1, ACK_BODY),
     "OpenResponse", {"connection_properties": None}),
    ("open_resp_map", frame(0x8015, 1, ACK_BODY + smap({"advertised_host": "h"})),
     "OpenResponse", {"connection_properties": {"advertised_host": "h"}}),
    ("close", frame(0x0016, 1, u32(1) + u16(0x0D) + s("unknown frame")),
     "Close", {"correlation_id": 1, "closing_code": 0x0D, "closing_reason": "unknown frame"}),
    ("close_resp", frame(0x8016, 1, ACK_BODY), "CloseResponse", ACK_FIELDS),
    ("heartbeat", b"\x00\x00\x00\x04\x00\x17\x00\x01", "Heartbeat", {"size": 4}),
    ("route", frame(0x0018, 1, CORR + s("key") + s("super")),
     "Route", {"routing_key": "key", "super_stream": "super"}),
    ("route_resp", frame(0x8018, 1, ACK_BODY + strings(["super-0"])),
     "RouteResponse", {"streams": ["super-0"]}),
    ("partitions", frame(0x0019, 1, CORR + s("super")), "Partitions", {"super_stream": "super"}),
    ("partitions_resp", frame(0x8019, 1, ACK_BODY + strings(["super-0", "super-1"])),
     "PartitionsResponse", {"streams": ["super-0", "super-1"]}),
    ("consumer_update", frame(0x001A, 1, CORR + u8(1) + u8(1)),
     "ConsumerUpdate", {"subscription_id": 1, "active": 1}),
    ("consumer_update_resp_none", frame(0x801A, 1, ACK_BODY + u16(0)),
     "ConsumerUpdateResponse", {"offset_type": 0, "offset": None}),
    # rstream writes 8 offset bytes even for "first" (captures/rstream-sac-4.0.pcap)
    ("consumer_update_resp_rstream_form", frame(0x801A, 1, ACK_BODY + u16(1) + u64(0)),
     "ConsumerUpdateResponse", {"offset_type": 1, "offset": 0}),
    ("consumer_update_resp_offset", frame(0x801A, 1, ACK_BODY + u16(4) + u64(88)),
     "ConsumerUpdateResponse", {"offset_type": 4, "offset": 88}),
    ("exchange_command_versions",
     frame(0x001B, 1, CORR + struct.pack(">i", 2) + u16(2) + u16(1) + u16(2)
           + u16(8) + u16(1) + u16(2)),
     "ExchangeCommandVersions",
     {"commands": [{"key": 2, "min_version": 1, "max_version": 2},
                   {"key": 8, "min_version": 1, "max_version": 2}]}),
    ("exchange_command_versions_resp",
     frame(0x801B, 1, ACK_BODY + struct.pack(">i", 1) + u16(2) + u16(1) + u16(2)),
     "ExchangeCommandVersionsResponse",
     {"commands": [{"key": 2, "min_version": 1, "max_version": 2}]}),
    ("stream_stats", frame(0x001C, 1, CORR + s("orders")), "StreamStats", {"stream": "orders"}),
    ("stream_stats_resp",
     frame(0x801C, 1, ACK_BODY + struct.pack(">i", 2) + s("first_chunk_id") + struct.pack(">q", 0)
           + s("committed_chunk_id") + struct.pack(">q", -1)),
     "StreamStatsResponse", {"statistics": {"first_chunk_id": 0, "committed_chunk_id": -1}}),
    ("create_super_stream",
     frame(0x001D, 1, CORR + s("super") + strings(["super-0", "super-1"]) + strings(["0", "1"])
           + smap({"max-age": "1d"})),
     "CreateSuperStream", {"super_stream": "super", "partitions": ["super-0", "super-1"],
                           "binding_keys": ["0", "1"], "arguments": {"max-age": "1d"}}),
    ("create_super_stream_resp", frame(0x801D, 1, ACK_BODY), "CreateSuperStreamResponse", ACK_FIELDS),
    ("delete_super_stream", frame(0x001E, 1, CORR + s("super")),
     "DeleteSuperStream", {"super_stream": "super"}),
    ("delete_super_stream_resp", frame(0x801E, 1, ACK_BODY), "DeleteSuperStreamResponse", ACK_FIELDS),
    ("resolve_offset_spec_no_props", frame(0x001F, 1, CORR + s("orders") + u16(2)),
     "ResolveOffsetSpec", {"stream": "orders", "offset_type": 2, "offset": None,
                           "properties": None}),
    ("resolve_offset_spec_props",
     frame(0x001F, 1, CORR + s("orders") + u16(5) + struct.pack(">q", 1700) + smap({"filter.0": "eu"})),
     "ResolveOffsetSpec", {"offset_type": 5, "offset": 1700, "properties": {"filter.0": "eu"}}),
    ("resolve_offset_spec_resp", frame(0x801F, 1, ACK_BODY + u16(4) + u64(12345)),
     "ResolveOffsetSpecResponse", {"offset_type": 4, "offset": 12345}),
]  # fmt: skip


@pytest.mark.parametrize(("frame_bytes", "class_name", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])  # fmt: skip
def test_decode_and_encode_back(frame_bytes: bytes, class_name: str, expected: dict) -> None:
    record = decode_frame(frame_bytes)
    assert type(record).__name__ == class_name, getattr(record, "reason", record)
    assert record.size == len(frame_bytes) - 4
    assert record.truncated is False
    for name, value in expected.items():
        assert getattr(record, name) == value, name
    assert encode_record(record) == frame_bytes
    as_dict = record.to_dict(show_secrets=True)
    json.dumps(as_dict)  # JSON-able
    assert record_from_dict(json.loads(json.dumps(as_dict))) == record


def test_every_table_entry_and_version_has_a_hand_built_case() -> None:
    seen = set()
    for _, frame_bytes, _, _ in CASES:
        key, version = struct.unpack_from(">HH", frame_bytes, 4)
        seen.add((key, version))
    wanted = {(m.key, v) for m in MESSAGES for v in m.versions}
    assert wanted - seen == set()
    assert {m.key & 0x7FFF for m in MESSAGES} == set(range(0x01, 0x20))


def test_heartbeat_from_make_record_matches_the_contract() -> None:
    assert encode_record(make_record("Heartbeat")) == b"\x00\x00\x00\x04\x00\x17\x00\x01"


def test_make_record_builds_frames_identical_to_hand_built_ones() -> None:
    record = make_record("Subscribe", correlation_id=42, subscription_id=1, stream="orders",
                         offset_type=OffsetType.OFFSET, offset=1234, credit=10,
                         properties={"single-active-consumer": "true", "name": "app"})  # fmt: skip
    assert encode_record(record) == {c[0]: c[1] for c in CASES}["subscribe_offset_props"]
    tune = make_record("Tune", response=True, frame_max=1048576, heartbeat=60)
    assert encode_record(tune)[4:6] == b"\x80\x14"
    with pytest.raises(TypeError):
        make_record("Credit", subscription_id=1, credit=1, bogus=3)


def test_publish_messages_are_lazy_and_complete() -> None:
    record = decode_frame({c[0]: c[1] for c in CASES}["publish_v1"])
    messages = list(record.messages)
    assert [m.publishing_id for m in messages] == [10, 11]
    assert messages[0].entry == b"a"
    assert messages[1].entry.num_records == 3 and messages[1].entry.compression == 0
    v2 = decode_frame({c[0]: c[1] for c in CASES}["publish_v2"])
    assert [m.filter_value for m in v2.messages] == ["eu", None]


def test_response_codes_and_offset_types_have_names_and_unknowns_stay_numbers() -> None:
    assert [c.value for c in ResponseCode] == list(range(0x01, 0x16))
    assert code_name(0x02) == "STREAM_DOES_NOT_EXIST"
    assert code_name(0x2A) == "unknown(0x2a)"
    assert code_name(None) is None
    assert OffsetType(5).name == "TIMESTAMP"
    record = decode_frame(frame(0x8007, 1, CORR + u16(0x2A)))
    assert record.code == 0x2A and record.code_name == "unknown(0x2a)"
    assert decode_frame(frame(0x8007, 1, ACK_BODY)).code_name == "OK"


def test_sasl_plain_password_is_redacted_unless_asked() -> None:
    record = decode_frame(frame(0x0013, 1, CORR + s("PLAIN") + b32(b"\x00guest\x00secret")))
    shown = record.to_dict()
    assert shown["username"] == "guest"
    assert bytes.fromhex(shown["sasl_data"]) == b"\x00guest\x00***"
    assert b"secret".hex() not in json.dumps(shown)
    assert bytes.fromhex(record.to_dict(show_secrets=True)["sasl_data"]) == b"\x00guest\x00secret"
    assert record.sasl_data == b"\x00guest\x00secret"  # the record itself keeps it
    other = decode_frame(frame(0x0013, 1, CORR + s("TOKEN") + b32(b"jwt.jwt.jwt")))
    assert bytes.fromhex(other.to_dict()["sasl_data"]) == b"***"


def test_unknown_key_and_unknown_version_are_kept_raw() -> None:
    for raw in (frame(0x0020, 1, b"abc"), frame(0x0007, 9, b"abc"), frame(0x7FFF, 1, b"")):
        record = decode_frame(raw)
        assert isinstance(record, Unknown) and record.raw == raw
        assert encode_record(record) == raw
        assert record_from_dict(record.to_dict()) == record


@pytest.mark.parametrize(("raw", "reason", "offset"), [
    (frame(0x0017, 1, b"x"), "trailing bytes", 8),
    (frame(0x8007, 1, ACK_BODY + b"\x00"), "trailing bytes", 14),
    (frame(0x0009, 1, u8(1)), "integer field", 9),
    (frame(0x000F, 1, CORR + struct.pack(">i", 2**31 - 1) + b"\x00" * 6), "cannot fit", 12),
    (frame(0x000F, 1, CORR + struct.pack(">i", -3)), "negative count", 12),
    (frame(0x000E, 1, CORR + struct.pack(">h", 50) + b"ab"), "string", 14),
    (frame(0x0011, 1, CORR + struct.pack(">i", 2) + s("a") + s("b") + s("a") + s("c")),
     "repeated key", 22),
    (deliver(b"\x41" + b"\x00" * 47), "bad chunk magic", 9),
])  # fmt: skip
def test_bad_layouts_become_malformed(raw: bytes, reason: str, offset: int) -> None:
    record = decode_frame(raw)
    assert isinstance(record, Malformed), record
    assert reason in record.reason
    assert record.offset == offset
    assert record.raw == raw and record.key == struct.unpack_from(">H", raw, 4)[0]
    assert encode_record(record) == raw
    assert record_from_dict(record.to_dict(show_secrets=True)) == record


def test_malformed_response_keeps_its_correlation_id() -> None:
    record = decode_frame(frame(0x8005, 1, ACK_BODY + b"\x01\x02"))
    assert isinstance(record, Malformed)
    assert record.correlation_id == 42 and record.code == 1


def test_truncated_frames_keep_the_header_fields_that_are_present() -> None:
    full = frame(0x8005, 1, ACK_BODY + u64(99))
    declared = len(full) - 4
    cut = decode_frame(full[:13], declared_size=declared)  # corr and one byte of the code
    assert cut.truncated and cut.correlation_id == 42 and cut.code is None
    assert decode_frame(full[:14], declared_size=declared).code == 1
    assert decode_frame(full[:14]).truncated  # the size field itself says more is due
    head_only = decode_frame(full[:6])
    assert isinstance(head_only, Unknown) and head_only.truncated
    with pytest.raises(ValueError):
        encode_record(cut)
    assert record_from_dict(cut.to_dict()) == cut


def test_truncated_deliver_keeps_the_chunk_header() -> None:
    full = deliver(chunk([simple_entry(b"m" * 1000)], 1, chunk_id=500), committed=400)
    cut = decode_frame(full[:200], declared_size=len(full) - 4)
    assert cut.truncated and cut.committed_chunk_id == 400
    assert cut.chunk["chunk_id"] == 500 and cut.record_count == 1
    assert cut.crc_ok is None
    # cut inside the chunk header (17 bytes of frame head, 13 of the header): the header
    # fields whose bytes are whole are kept, the first cut one and the rest are None
    header_cut = decode_frame(full[:30], declared_size=len(full) - 4)
    assert header_cut.truncated and header_cut.subscription_id == 1
    assert header_cut.chunk == {"magic_version": 0x50, "chunk_type": 0, "num_entries": 1,
                                "num_records": 1, "timestamp": None, "epoch": None,
                                "chunk_id": None, "crc": None, "data_length": None,
                                "trailer_length": None, "bloom_size": None, "reserved": None}
    assert header_cut.record_count == 1 and header_cut.cut == {"at": 30, "field": "chunk"}
    assert decode_frame(full[:17], declared_size=len(full) - 4).chunk is None  # (no field)


def test_columns_come_from_the_table() -> None:
    names = [name for name, _ in columns("Deliver")]
    for wanted in ("key", "command", "code_name", "subscription_id", "committed_chunk_id",
                   "chunk", "record_count", "crc_ok"):  # fmt: skip
        assert wanted in names
    assert dict(columns("Credit"))["credit"] == "int16"
    assert dict(columns("PublishConfirm"))["publishing_ids"] == "list<uint64>"
    for message in MESSAGES:
        cols = [n for n, _ in columns(message.command, message.response)]
        record = make_record_like(message)
        assert set(record.to_dict()) <= set(cols), message.class_name


def make_record_like(message):  # a decoded record of each message, from the hand-built cases
    for _, raw, _, _ in CASES:
        if struct.unpack_from(">H", raw, 4)[0] == message.key:
            return decode_frame(raw)
    raise AssertionError(message.class_name)


def test_nothing_raises_for_non_bytes_inputs() -> None:
    raw = frame(0x0009, 1, u8(1) + struct.pack(">h", 3))
    assert decode_frame(bytearray(raw)).credit == 3
    assert decode_frame(memoryview(raw)).credit == 3
    assert isinstance(decode_frame(b""), Malformed)
    assert isinstance(decode_frame(b"\x00\x00\x00\x00\x00"), Malformed)


def test_record_init_compiled_on_first_use_keeps_signature() -> None:
    from streamdissect.protocols.stream.records import record_class

    cls = record_class("QueryOffset", response=True)

    class Mine(cls):  # a user's subclass whose __init__ runs once
        calls = 0

        def __init__(self, *args, **kwargs):
            type(self).calls += 1
            super().__init__(*args, **kwargs)

    one = Mine(0x800B, 1, 12, 5, 1, False, 42)
    assert Mine.calls == 1 and one.offset == 42 and one.correlation_id == 5
    two = cls(0x800B, 1, 12, 5, 1, False, offset=42)
    assert two.offset == 42 and "offset" in str(__import__("inspect").signature(cls.__init__))


def test_the_compiled_table_finds_every_message_of_the_spec_when_asked():
    """COMPILED compiles a (key, version) at its first use: a lookup finds every one the
    table has, and nothing it has not."""
    from streamdissect.protocols.stream import codec, spec

    for message in spec.MESSAGES:
        for version in message.versions:
            found = codec.COMPILED.get((message.key, version))
            assert found is not None and found.message is message and found.version == version
            assert codec.COMPILED[(message.key, version)] is found
    assert codec.COMPILED.get((0x7FFF, 1)) is None and codec.COMPILED.get((0x0001, 99)) is None
    with pytest.raises(KeyError):
        codec.COMPILED[(0x0001, 99)]
