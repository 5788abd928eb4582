"""The RocketMQ codec both ways on the recorded frames and on crafted ones, and bad input:
header length above the total, negative and 2 GB lengths, invalid JSON, truncated ROCKETMQ
ext fields, a zlib bomb, pull and batch bodies whose messages lie about their sizes, and
random damage to every real frame: a Malformed record (or a body error) with its reason,
never an exception, never memory beyond the frame's bytes."""

from __future__ import annotations

import random
import struct
import tracemalloc
import zlib

import pytest
from rocketmq_support import recorded_frames

from streamdissect.framing.framer import DEFAULT_MAX_FRAME
from streamdissect.protocols.rocketmq import decode_frame, encode_command, make_command, spec
from streamdissect.protocols.rocketmq.framing import RocketMQFramer
from streamdissect.protocols.rocketmq.records import Malformed, RemotingCommand


@pytest.fixture(scope="module")
def real_frames() -> list[bytes]:
    """Every frame of every recorded capture, as on the wire."""
    return [frame for _, frame in recorded_frames()]


def _same(a: RemotingCommand, b: RemotingCommand) -> bool:
    """Equal but for the envelope's sizes (a JSON header may be written another way)."""
    return {**a.to_dict(True), "size": 0, "header_length": 0} == {
        **b.to_dict(True), "size": 0, "header_length": 0}


def test_every_real_frame_round_trips(real_frames):
    """Each frame is written back byte for byte: a ROCKETMQ header has one way to be
    written, a JSON one keeps its keys' order and what follows it (the C++ client's
    newline); and a record made again from those bytes is the same."""
    assert len(real_frames) > 300
    serializations = set()
    for frame in real_frames:
        record = decode_frame(frame)
        assert encode_command(record) == frame
        record.json_keys = record.json_tail = None  # as fastjson would write it
        assert _same(decode_frame(encode_command(record)), record)
        serializations.add((record.serialize_type, record.language))
    assert serializations == {(spec.JSON, "JAVA"), (spec.JSON, "CPP"), (spec.JSON, "PYTHON"),
                              (spec.ROCKETMQ, "JAVA")}


@pytest.mark.parametrize("serialize_type", [spec.JSON, spec.ROCKETMQ])
def test_a_crafted_send_round_trips_in_both_serializations(serialize_type):
    properties = "TAGS\x01TagA\x02KEYS\x01k-1\x02UNIQ_KEY\x01ABCDEF\x02"
    fields = {"producerGroup": "PG", "topic": "T1", "defaultTopic": "TBW102",
              "defaultTopicQueueNums": 4, "queueId": 3, "sysFlag": 0, "bornTimestamp": 17,
              "flag": 0, "properties": properties, "reconsumeTimes": 0, "unitMode": False,
              "batch": False, "brokerName": "broker-a"}  # fmt: skip
    send = make_command(310, opaque=7, fields=fields, body=b"hello",
                        serialize_type=serialize_type, language="PYTHON", version=409)
    frame = encode_command(send)
    back = decode_frame(frame)
    assert back.fields == fields and back.serialize_type == serialize_type
    assert set(back.ext) == set("abcdefghijkmn")  # SEND_MESSAGE_V2's short keys (l: unset)
    assert (back.code_name, back.opaque, back.language, back.version) == (
        "SEND_MESSAGE_V2", 7, "PYTHON", 409)
    (message,) = back.messages
    assert (message.topic, message.queue_id, message.tags, message.keys, message.msg_id,
            message.body) == ("T1", 3, "TagA", "k-1", "ABCDEF", b"hello")  # fmt: skip
    assert encode_command(back) == frame
    assert frame[4] == serialize_type  # the high byte of the header-length word


def test_a_response_and_a_oneway_request():
    answer = make_command(0, response=True, opaque=9, remark="OFFSET_OVERFLOW_ONE",
                          fields={"nextBeginOffset": 5, "minOffset": 0, "maxOffset": 5})
    assert answer.response and not answer.oneway and answer.code_name == "SUCCESS"
    assert answer.messages == [] and answer.fields["nextBeginOffset"] == 5  # a pull's, empty
    assert make_command(11, response=True).code_name == "SLAVE_NOT_AVAILABLE"
    assert make_command(17, response=True).code_name == "TOPIC_NOT_EXIST"
    assert make_command(17).code_name == "UPDATE_AND_CREATE_TOPIC"
    oneway = make_command(15, oneway=True, serialize_type=spec.ROCKETMQ,
                          fields={"consumerGroup": "G", "topic": "T", "queueId": 1,
                                  "commitOffset": 42})  # fmt: skip
    assert oneway.oneway and not oneway.response and oneway.fields["commitOffset"] == 42
    assert make_command(4242).code_name == "unknown(4242)"
    with pytest.raises(ValueError, match="no header field"):
        make_command(105, fields={"nonsense": 1})
    with pytest.raises(ValueError, match="not writable as a ROCKETMQ header"):
        make_command(200050, serialize_type=spec.ROCKETMQ)  # (RocketMQ 5's POP_MESSAGE)
    with pytest.raises(ValueError, match="not writable as a ROCKETMQ header"):
        make_command(105, language="COBOL", serialize_type=spec.ROCKETMQ)
    assert make_command(200050).code == 200050  # JSON holds any int


def test_json_values_may_be_numbers_or_booleans():
    header = (b'{"code":310,"flag":0,"language":"GO","opaque":3,"version":317,'
              b'"extFields":{"b":"T","e":2,"k":true,"f":"0"}}')
    frame = struct.pack(">ii", 4 + len(header), len(header)) + header
    record = decode_frame(frame)
    assert record.fields == {"topic": "T", "queueId": 2, "unitMode": True, "sysFlag": 0}


def test_fastjson_bodies_with_bare_integer_keys():
    body = b'{"offsetTable":{"T@G":{0:12,1:3}},"note":"{0: stays text"}'
    record = make_command(43, response=True, body=body)
    assert record.body_json == {"offsetTable": {"T@G": {"0": 12, "1": 3}}, "note": "{0: stays text"}
    broken = make_command(43, response=True, body=b'{"a":')
    assert broken.body_json is None and broken.body_text == '{"a":'


def _malformed(frame: bytes, reason: str) -> Malformed:
    record = decode_frame(frame)
    assert isinstance(record, Malformed) and reason in record.reason, record
    return record


def test_bad_envelopes_are_malformed():
    _malformed(struct.pack(">ii", 10, 100) + b"x" * 6, "header length 100 above")
    _malformed(struct.pack(">Ii", 0xFFFFFFF0, 4) + b"{}", "negative total length")
    _malformed(struct.pack(">Ii", 0x80000000, 4) + b"{}", "negative total length")
    _malformed(struct.pack(">ii", 8, 0x05000004) + b"abcd", "unknown header serialization 5")
    _malformed(struct.pack(">ii", 12, 8) + b'{"code":', "header is not JSON")
    _malformed(struct.pack(">ii", 8, 4) + b"[1] ", "not an object")
    _malformed(struct.pack(">ii", 16, 12) + b'{"code":"x"}', "code is not an integer")
    _malformed(struct.pack(">ii", 6, 2) + b"{}", "has no code")
    # (a null flag: no command whose response bit cannot be read, where a crash was)
    _malformed(struct.pack(">ii", 27, 23) + b'{"code":10,"flag":null}', "flag is not an integer")
    _malformed(b"\x00\x00", "shorter than its 8-byte head")


def _binary_frame(**fields) -> bytearray:
    return bytearray(encode_command(make_command(
        30, serialize_type=spec.ROCKETMQ, fields=fields or {"topic": "T", "queueId": 1})))


def test_truncated_rocketmq_ext_fields_are_malformed():
    frame = _binary_frame()
    ext_at = 8 + 17  # code..flag, remark length 0: the ext length
    struct.pack_into(">i", frame, ext_at, 1000)
    _malformed(bytes(frame), "ext fields length 1000 beyond the header")
    frame = _binary_frame()
    struct.pack_into(">h", frame, ext_at + 4, 500)  # the first key's length
    _malformed(bytes(frame), "ext key length 500 beyond")
    frame = _binary_frame()
    struct.pack_into(">i", frame, ext_at + 4 + 2 + len("topic"), 99)  # its value's length
    _malformed(bytes(frame), "ext value length 99 beyond")
    frame = _binary_frame()
    struct.pack_into(">i", frame, 8 + 13, 1 << 30)  # the remark's length
    _malformed(bytes(frame), "remark length")
    short = struct.pack(">ii", 12, 0x01000008) + b"\x00" * 8
    _malformed(short, "under its fixed")


def test_a_zlib_bomb_is_refused_within_the_limit():
    bomb = zlib.compress(b"\x00" * (spec.MAX_INFLATED + 1024 * 1024), 9)
    frame = encode_command(make_command(310, fields={"topic": "T", "sysFlag": 1}, body=bomb))
    tracemalloc.start()
    record = decode_frame(frame)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "inflates beyond" in record.body_error and record.messages[0].inflated_length is None
    assert peak < 1024 * 1024  # chunks of 64 KiB, never the inflated body
    with pytest.raises(ValueError, match="inflates beyond"):
        record.messages[0].inflated()
    fine = decode_frame(encode_command(make_command(
        310, fields={"topic": "T", "sysFlag": 1}, body=zlib.compress(b"abc" * 5000))))
    assert fine.body_error is None and fine.messages[0].inflated() == b"abc" * 5000
    cut = decode_frame(encode_command(make_command(
        310, fields={"topic": "T", "sysFlag": 1}, body=zlib.compress(b"abc" * 5000)[:20])))
    assert "cut short" in cut.body_error
    junk = decode_frame(encode_command(make_command(
        310, fields={"topic": "T", "sysFlag": 1}, body=b"not zlib at all")))
    assert "does not inflate" in junk.body_error


def test_compression_types():
    """4.9.8's Java client marks zlib bodies 0x300 (sysFlag 769); 0 means zlib too; LZ4 and
    ZSTD bodies (RocketMQ 5) are named, not inflated, and not taken for broken zlib."""
    body = zlib.compress(b"x" * 10_000)
    for sys_flag, kind in ((0x301, "zlib"), (0x1, "zlib"), (0x101, "lz4"), (0x201, "zstd")):
        record = make_command(310, fields={"topic": "T", "sysFlag": sys_flag}, body=body)
        (message,) = record.messages
        assert message.compression == kind and record.body_error is None
        if kind == "zlib":
            assert message.inflated_length == 10_000 and message.inflated() == b"x" * 10_000
        else:
            assert message.inflated_length is None
            with pytest.raises(ValueError, match="not inflated"):
                message.inflated()


def _first(real_frames, want) -> bytes:
    return next(f for f in real_frames if want(decode_frame(f)))


def _lie(frame: bytes, at: int, value: int, fmt: str = ">i") -> RemotingCommand:
    damaged = bytearray(frame)
    struct.pack_into(fmt, damaged, at, value)
    record = decode_frame(bytes(damaged))
    assert isinstance(record, RemotingCommand) and record.body_error, record
    return record


def test_pull_bodies_whose_messages_lie_about_their_sizes(real_frames):
    frame = _first(real_frames, lambda r: r.response and r.messages and len(r.messages) >= 2)
    record = decode_frame(frame)
    body_at = 4 + record.size - len(record.body)
    first = record.messages[0].total_size
    assert "says 2147483647 bytes" in _lie(frame, body_at, 2**31 - 1).body_error
    assert "says -5 bytes" in _lie(frame, body_at, -5).body_error
    second = _lie(frame, body_at + first, first + 7)  # the second message's size
    assert len(second.messages) == 1 and second.body_error_offset >= body_at + first
    # a body length (after the head, the hosts, store time, reconsume, prepared offset)
    body_length_at = body_at + 4 * 5 + 8 * 2 + 4 + 8 + 8 + 8 + 8 + 4 + 8
    lied = _lie(frame, body_length_at, 1 << 20)
    assert "message body of 1048576 bytes" in lied.body_error
    assert "unknown magic" in _lie(frame, body_at + 4, 0x12345678).body_error


def test_batch_bodies_that_lie(real_frames):
    frame = _first(real_frames, lambda r: not r.response and r.code == 320)
    record = decode_frame(frame)
    assert len(record.messages) == 4
    body_at = 4 + record.size - len(record.body)
    assert "says 99999 bytes" in _lie(frame, body_at, 99999).body_error
    assert "batch item body" in _lie(frame, body_at + 16, 5000).body_error


def test_random_damage_never_raises(real_frames):
    rng = random.Random(26)
    count = 0
    for frame in real_frames[::3]:
        for _ in range(20):
            damaged = bytearray(frame)
            for _ in range(rng.randint(1, 4)):
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            cut = rng.choice((len(damaged), rng.randrange(len(damaged) + 1)))
            record = decode_frame(bytes(damaged[:cut]))
            assert isinstance(record, (RemotingCommand, Malformed))
            count += 1
    assert count > 2000


def test_the_framer_survives_absurd_lengths():
    events, anomalies = [], []
    framer = RocketMQFramer(lambda *e: events.append(e), lambda *a: anomalies.append(a))
    good = encode_command(make_command(105, fields={"topic": "T"}))
    garbage = struct.pack(">Ii", 0x80000000, 4) + b"\xff" * (1 << 20)
    framer.data(memoryview(garbage + good), 1)
    framer.finish(1)  # (the frame after the resync waits for the next head, or the end)
    assert [a[0] for a in anomalies] == ["frame_too_large", "resync"]
    assert len(events) == 1 and events[0][2].code_name == "GET_ROUTEINFO_BY_TOPIC"
    assert len(framer.rbuf) < 64 and framer.max_frame == DEFAULT_MAX_FRAME


def _framed(*pieces: bytes) -> list:
    out: list = []
    framer = RocketMQFramer(lambda offset, ts, record: out.append((offset, record.to_dict())),
                            lambda *anomaly: out.append(anomaly[:1] + anomaly[2:4]))
    framer.desync()  # joined mid-stream, as the TCP layer says when it saw no SYN
    for piece in pieces:
        framer.data(memoryview(piece), 1)
    framer.finish(1)
    return out


@pytest.mark.parametrize("skip", [5, 9, 150])
def test_resync_does_not_depend_on_where_tcp_cut_the_bytes(real_frames, skip):
    """A direction joined mid-frame: the framer resyncs to the same frame start, reports the
    same skipped bytes and the same frames, wherever the bytes are split in two (the fuzz
    campaign's stream target found a candidate frame head split from its `{"`, and a next
    frame's head not yet there, judged differently)."""
    stream = b"".join([f for f in real_frames if len(f) < 300][:8])[skip:]
    whole = _framed(stream)
    assert whole[0][0] == "resync" and len(whole) > 2
    for cut in range(1, min(len(stream), 700)):
        assert _framed(stream[:cut], stream[cut:]) == whole, cut
