"""The scapy layer builds and reads what the codec builds and reads, for every command,
direction and version of the protocol table; show(), summary(), ls() read as a user expects."""

from __future__ import annotations

import io
import zlib
from contextlib import redirect_stdout
from typing import Any

import pytest
from scapy.all import ls
from scapy.packet import Padding

from streamdissect.protocols.stream import (
    MESSAGES,
    decode_frame,
    encode_record,
    make_record,
    osiris,
    primitives,
)
from streamdissect.protocols.stream.publish import SubBatch
from streamdissect.protocols.stream.spec import CHUNK_HEADER, PUBLISH_MESSAGES, REST
from streamdissect.scapy import (
    BODY_CLASSES,
    Deliver,
    PublishedMessage,
    SaslAuthenticate,
    StreamFrame,
    StreamMalformed,
    StreamUnknown,
    Subscribe,
    conf,
)

CASES = [(m, v) for m in MESSAGES for v in m.versions]
ENTRY = b"\x00\x00\x00\x05hello"  # one simple data entry
CHUNK_DATA = ENTRY + b"\x00\x00\x00\x02hi"


def sample(wire: Any, name: str) -> Any:
    """A value of each wire type that is not the default, so a dropped field shows."""
    if name == "offset_type":
        return 4  # an offset: the 8-byte value is on the wire too
    if isinstance(wire, primitives.IntType):
        return {"B": 7, "H": 300, "I": 70000, "Q": 2**40 + 3, "h": -2, "i": -5, "q": -(2**33)}[
            wire.fmt
        ]
    if isinstance(wire, primitives.OffsetValueType):
        return 123456
    if isinstance(wire, primitives.TrailingType):
        return sample(wire.inner, name)
    if wire is primitives.STRING:
        return f"{name}-é"
    if wire is primitives.BYTES:
        return b"\x00user\x00secret" if name == "sasl_data" else b"\x01\x02"
    if isinstance(wire, primitives.ArrayType):
        return [sample(wire.element, name), sample(wire.element, name)]
    if isinstance(wire, primitives.StructType):
        return {n: sample(t, n) for n, t in wire.fields}
    if isinstance(wire, primitives.MapType):
        return {"k1": sample(wire.value, "v"), "k2": sample(wire.value, "w")}
    raise AssertionError(f"no sample for {wire!r}")


def chunk_header(data: bytes, chunk_id: int = 40) -> dict[str, int]:
    return dict(zip(osiris.HEADER_FIELDS, (0x50, 0, 2, 2, 1_700_000_000_000, 3, chunk_id,
                                           zlib.crc32(data), len(data), 0, 0, 0)))  # fmt: skip


def values(message: Any, version: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(codec keyword arguments, scapy keyword arguments) for the same frame."""
    codec: dict[str, Any] = {}
    scapy: dict[str, Any] = {}
    if message.correlation_id:
        codec["correlation_id"] = scapy["correlation_id"] = 4242
    if message.code:
        codec["code"] = scapy["code"] = 0x13
    for field in message.fields_for(version):
        if field.type is CHUNK_HEADER:
            header = chunk_header(CHUNK_DATA)
            codec["chunk"] = header
            scapy.update(header)
        elif field.type is REST:
            codec[field.name] = scapy[field.name] = CHUNK_DATA
        elif field.type is PUBLISH_MESSAGES:
            filters = ("blue", None) if version >= 2 else (None, None)
            entries = (b"body-one", SubBatch(1, 3, 40, b"\x1f\x8b-gzip", 0))
            codec["messages"] = [(10 + i, f, e) for i, (f, e) in enumerate(zip(filters, entries))]
            scapy["messages"] = [
                PublishedMessage(publishing_id=10 + i, entry=e, **({"filter_value": f} if f else {}))
                for i, (f, e) in enumerate(zip(filters, entries))
            ]
        else:
            codec[field.name] = scapy[field.name] = sample(field.type, field.name)
    return codec, scapy


def case_id(case: tuple) -> str:
    message, version = case
    return f"{message.class_name}-v{version}"


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_crafted_packet_builds_to_the_codecs_bytes(case):
    message, version = case
    codec, scapy = values(message, version)
    record = make_record(message.command, response=message.response, version=version, **codec)
    expected = encode_record(record)
    body_class = BODY_CLASSES[message.key]
    crafted = StreamFrame(version=version) / body_class(**scapy)
    assert bytes(crafted) == expected
    # the key comes with the body's class when stacked; the size is computed when built
    assert crafted.key == message.key and crafted.size is None
    built = StreamFrame(bytes(crafted))
    assert (built.size, built.key, built.version) == (len(expected) - 4, message.key, version)


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_codec_bytes_dissect_to_the_records_fields_and_back(case):
    message, version = case
    codec, _ = values(message, version)
    record = make_record(message.command, response=message.response, version=version, **codec)
    data = encode_record(record)
    frame = StreamFrame(data)
    body = frame.payload
    assert type(body) is BODY_CLASSES[message.key]
    assert frame.to_record() == record
    assert bytes(frame) == data
    for name in ("correlation_id", "code"):
        if getattr(record, name) is not None:
            assert getattr(body, name) == getattr(record, name)
    for field in message.fields_for(version):
        if field.type is CHUNK_HEADER:
            assert {n: getattr(body, n) for n in osiris.HEADER_FIELDS} == record.chunk
        elif field.type is PUBLISH_MESSAGES:
            got = [(m.publishing_id, m.filter_value, m.entry) for m in body.messages]
            assert got == [tuple(m) for m in record.messages]
        elif field.type is REST:
            assert bytes(body.chunk_payload) == bytes(record.chunk_payload)
        else:
            assert getattr(body, field.name) == getattr(record, field.name), field.name
    # records both ways
    assert bytes(StreamFrame.from_record(record)) == data
    assert bytes(StreamFrame(record)) == data
    assert body.to_record() == record


def test_every_command_of_the_table_has_a_class_and_a_name():
    assert set(BODY_CLASSES) == {m.key for m in MESSAGES}
    for message in MESSAGES:
        cls = BODY_CLASSES[message.key]
        assert cls.__name__ == message.class_name and cls.message is message
        gated = {f.name for f in message.fields if f.since > 1}
        assert gated <= set(cls.gated)


def test_version_follows_the_fields_that_are_set():
    v2 = StreamFrame() / Deliver(committed_chunk_id=9, chunk_payload=CHUNK_DATA)
    assert StreamFrame(bytes(v2)).version == 2
    assert StreamFrame(bytes(v2)).payload.committed_chunk_id == 9
    v1 = StreamFrame() / Deliver(chunk_payload=CHUNK_DATA)
    assert StreamFrame(bytes(v1)).version == 1
    publish_v2 = StreamFrame() / BODY_CLASSES[0x0002](
        messages=[PublishedMessage(publishing_id=1, filter_value="red", entry=b"x")]
    )
    record = StreamFrame(bytes(publish_v2)).to_record()
    assert record.version == 2 and [m.filter_value for m in record.messages] == ["red"]


def test_deliver_counts_lengths_and_crc_are_computed():
    frame = StreamFrame(bytes(StreamFrame() / Deliver(chunk_id=77, chunk_payload=CHUNK_DATA)))
    record = frame.to_record()
    assert record.chunk["num_entries"] == 2 and record.chunk["num_records"] == 2
    assert record.chunk["data_length"] == len(CHUNK_DATA) and record.crc_ok is True
    assert [bytes(m.data) for m in record.messages()] == [b"hello", b"hi"]


def test_several_frames_in_one_buffer_chain_and_a_partial_one_is_padding():
    credit = encode_record(make_record("Credit", subscription_id=1, credit=3))
    heartbeat = encode_record(make_record("Heartbeat"))
    frame = StreamFrame(credit + heartbeat + heartbeat[:5])
    assert [f.payload.__class__.__name__ for f in frame.frames()] == ["Credit", "Heartbeat"]
    assert bytes(frame[Padding]) == heartbeat[:5]
    assert bytes(frame) == credit + heartbeat + heartbeat[:5]


@pytest.mark.parametrize(
    "data, kind, reason",
    [
        (b"\x00\x00\x00\x0c\x00\x09\x00\x01\x00\x05\x00\x00\x00\x00\x00\x00", StreamMalformed,
         "trailing bytes"),
        (b"\x00\x00\x00\x08\x00\x11\x00\x01\x00\x00\x00\x01", StreamMalformed, "map count"),
        (b"\x00\x00\x00\x04\x00\x63\x00\x01", StreamUnknown, None),
        (b"\xff\xff\xff\xf0\x00\x08\x00\x01" + b"\x00" * 64, StreamMalformed, "absurd"),
        (b"\x00\x00\x00\x00\x00\x17\x00\x01", StreamMalformed, None),
    ],
)
def test_bad_frames_are_marked_with_the_codecs_reason(data, kind, reason):
    frame = StreamFrame(data)
    body = frame.payload
    assert isinstance(body, kind)
    if reason:
        assert reason in body.reason
    assert bytes(frame) == data  # the bytes stay as they were
    frame.summary()  # and showing it does not raise
    frame.show(dump=True)


def test_a_few_bytes_are_a_truncated_frame_not_an_exception():
    for data in (b"", b"\x00", b"\x00\x00\x00\x30\x00"):
        frame = StreamFrame(data)
        frame.summary()


def test_show_ls_and_summary_read_well():
    out = io.StringIO()
    with redirect_stdout(out):
        ls(Subscribe)
    listing = out.getvalue()
    for line in ("correlation_id", "subscription_id", "stream", "offset_type", "credit"):
        assert line in listing
    assert "= ('10')" in listing.split("credit")[1].splitlines()[0]  # a Subscribe's credit
    packet = StreamFrame() / Subscribe(subscription_id=2, stream="orders", offset_type=4, offset=7)
    shown = packet.show2(dump=True)
    assert "offset_type= OFFSET" in shown and "key       = Subscribe" in shown
    response = StreamFrame(encode_record(make_record("Subscribe", response=True, code=2)))
    assert "code      = STREAM_DOES_NOT_EXIST" in response.show(dump=True)
    assert packet.summary() == "Subscribe v1 corr=1 subscription_id=2 stream=orders credit=10 size=29"


def test_sasl_passwords_are_masked_unless_asked():
    packet = StreamFrame(bytes(StreamFrame() / SaslAuthenticate(sasl_data=b"\x00bob\x00hunter2")))
    for text in (packet.show(dump=True), packet.summary(), repr(packet)):
        assert "hunter2" not in text
    assert "bob" in packet.show(dump=True)
    assert packet.payload.sasl_data == b"\x00bob\x00hunter2"  # the value itself is real
    conf.show_secrets = True
    try:
        assert "hunter2" in packet.show(dump=True)
    finally:
        conf.show_secrets = False


def test_the_codec_rejects_what_scapy_would_misread():
    # A Publish whose count is larger than what fits: malformed, not a scapy loop.
    frame = StreamFrame(b"\x00\x00\x00\x09\x00\x02\x00\x01\x01\x7f\xff\xff\xff")
    assert isinstance(frame.payload, StreamMalformed)
    assert "cannot fit" in frame.payload.reason
    assert decode_frame(bytes(frame)).reason == frame.payload.reason


def test_tcp_reassemble_on_a_contiguous_stream_gives_one_whole_frame_at_a_time():
    credit = encode_record(make_record("Credit", subscription_id=1, credit=3))
    heartbeat = encode_record(make_record("Heartbeat"))
    assert StreamFrame.tcp_reassemble(credit[:6], {}) is None  # more bytes needed
    first = StreamFrame.tcp_reassemble(credit + heartbeat[:3], {})
    assert bytes(first.frame_bytes()) == credit and bytes(first[Padding]) == heartbeat[:3]
    garbage = StreamFrame.tcp_reassemble(b"\xff\xff\xff\xff" + b"x" * 20, {}, {})
    assert isinstance(garbage.payload, StreamMalformed) and "absurd" in garbage.payload.reason


# --- lists longer than scapy's conf.max_list_count (100) ---------------------------------

MANY = 1000  # items in each list below: ten times scapy's default limit


def many(wire: Any, name: str) -> Any:
    """A value of `wire` whose lists (and maps) hold MANY items."""
    if isinstance(wire, primitives.TrailingType):
        return many(wire.inner, name)
    if isinstance(wire, primitives.ArrayType):
        return [sample(wire.element, name) for _ in range(MANY)]
    if isinstance(wire, primitives.MapType):
        return {f"k{i}": sample(wire.value, "v") for i in range(MANY)}
    return sample(wire, name)


LIST_CASES = [(m, v) for m, v in CASES
              if any(f.type is PUBLISH_MESSAGES or many(f.type, f.name) != sample(f.type, f.name)
                     for f in m.fields_for(v) if f.type not in (CHUNK_HEADER, REST))]  # fmt: skip


@pytest.mark.parametrize("case", LIST_CASES, ids=[case_id(c) for c in LIST_CASES])
def test_lists_of_a_thousand_items_dissect_whole(case):
    """Every list and map of the table, and Publish's messages, with 1,000 items: read
    whole by StreamFrame (scapy's own limit would stop at 100), the user's conf untouched."""
    from scapy.config import conf as scapy_conf

    message, version = case
    codec, _ = values(message, version)
    for field in message.fields_for(version):
        if field.type is PUBLISH_MESSAGES:
            codec["messages"] = [(i, "f" if version >= 2 else None, b"m%d" % i)
                                 for i in range(MANY)]  # fmt: skip
        elif field.type not in (CHUNK_HEADER, REST):
            codec[field.name] = many(field.type, field.name)
    record = make_record(message.command, response=message.response, version=version, **codec)
    data = encode_record(record)
    assert scapy_conf.max_list_count == 100
    frame = StreamFrame(data)
    assert type(frame.payload) is BODY_CLASSES[message.key], getattr(frame.payload, "reason", "")
    assert frame.to_record() == record and bytes(frame) == data
    for field in message.fields_for(version):
        if field.type is PUBLISH_MESSAGES:
            assert [m.publishing_id for m in frame.payload.messages] == list(range(MANY))
        elif field.type not in (CHUNK_HEADER, REST):
            assert getattr(frame.payload, field.name) == getattr(record, field.name)


def publish_bytes(count: int, messages: list[bytes], version: int = 1) -> bytes:
    """A Publish frame's bytes, written here by hand: publisher id 7, the count as given,
    then the messages."""
    import struct

    body = struct.pack(">Bi", 7, count) + b"".join(messages)
    return struct.pack(">IHH", 4 + len(body), 0x0002, version) + body


def message_bytes(publishing_id: int, body: bytes) -> bytes:
    import struct

    return struct.pack(">QI", publishing_id, len(body)) + body


@pytest.mark.parametrize("count", [100, 101, 10_000])
def test_publish_counts_at_and_past_scapys_limit(count):
    """The smallest messages (12 bytes: id and an empty entry): every count the bytes hold."""
    data = publish_bytes(count, [message_bytes(i, b"") for i in range(count)])
    frame = StreamFrame(data)
    assert type(frame.payload).__name__ == "Publish"
    assert frame.payload.message_count == count == len(frame.payload.messages)
    assert frame.payload.messages[-1].publishing_id == count - 1
    assert bytes(frame) == data


@pytest.mark.parametrize("count", [101, 2**31 - 1])
def test_a_count_one_message_past_the_bytes_is_malformed_not_read(count):
    """A hostile count stays bounded by the frame: 100 messages with a count past them, or
    a count of 2**31 - 1 in a small frame, are malformed (nothing built), as the codec says."""
    data = publish_bytes(count, [message_bytes(i, b"") for i in range(100)])
    frame = StreamFrame(data)
    assert isinstance(frame.payload, StreamMalformed)
    assert decode_frame(data).reason == frame.payload.reason
    from streamdissect.scapy import Publish

    with pytest.raises(primitives.DecodeError):  # the body class alone: the same bound
        Publish(data[8:])


def test_a_deliver_chunk_of_a_thousand_entries_dissects_whole():
    entries = b"".join(b"\x00\x00\x00\x03m%02d" % (i % 100) for i in range(MANY))
    frame = StreamFrame(bytes(StreamFrame() / Deliver(chunk_id=5, chunk_payload=entries)))
    assert type(frame.payload) is Deliver
    assert frame.payload.num_entries == frame.payload.num_records == MANY
    record = frame.to_record()
    assert record.crc_ok and len(list(record.messages())) == MANY
