"""`frames -V`: every frame as a tree, each message's AMQP sections, against what the clients
set (tests/messages_truth.py, from the scenarios' own code); sub-batches of every codec; a
1 MB body cut; damage said in place with what came before it; --no-bodies."""

from __future__ import annotations

import gzip
import json
import re
import struct
from pathlib import Path

import lz4.frame
import pytest
import snappy
import worsen
import zstandard
from messages_truth import CAPTURES, WITH_MESSAGES, published, stored, truth
from test_codec_wire import chunk, deliver, simple_entry, sub_batch

from streamdissect.cli import main
from streamdissect.protocols.stream import decode_frame, encode_record, make_record
from streamdissect.protocols.stream.codes import CompressionType
from streamdissect.protocols.stream.publish import SubBatch
from streamdissect.protocols.stream.verbose import frame_tree

FRAME_LINE = re.compile(r"^\s*(\d+)\s+\S+\s+\S+ ([→←]) (\w+)")
BODY_LINE = re.compile(r"^\s*body \((\w+), (\d+) bytes, (text|binary)[^)]*\):(?: (.*))?$")


def verbose(capsys, *args: str) -> str:
    assert main(["frames", "-V", *args]) == 0
    return capsys.readouterr().out


def message_blocks(text: str) -> list[dict]:
    """The messages of a -V output, each with its frame's number, direction and command, its
    body text and its application properties, read off the tree's lines."""
    messages: list[dict] = []
    frame: dict = {}
    section = None
    for line in text.splitlines():
        head = FRAME_LINE.match(line)
        if head:
            frame = {"frame": int(head[1]), "direction": head[2], "command": head[3]}
            continue
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if re.match(r"message \d+", stripped):
            messages.append({**frame, "indent": indent, "line": stripped,
                             "application_properties": None, "body": None})  # fmt: skip
            section = None
            continue
        if not messages or indent <= messages[-1]["indent"]:
            section = None
            continue
        message = messages[-1]
        if indent == message["indent"] + 4:
            section = stripped.rstrip(":")
            body = BODY_LINE.match(line)
            if body and body[3] == "text":
                message["body"] = json.loads(body[4]).encode()
            if section == "application_properties":
                message["application_properties"] = {}
        elif section == "application_properties" and indent == message["indent"] + 8:
            key, value = stripped.split(": ", 1)
            message["application_properties"][key] = json.loads(value)
    return messages


@pytest.mark.parametrize("capture", WITH_MESSAGES)
def test_every_message_shows_what_its_client_set(capture, capsys):
    """Publish: the clients' messages in the order sent (body, application properties, the
    filter value of a Publish v2, AMQP or raw); Deliver: the message stored at each offset."""
    sent = published(capture)
    published_count = sum(c.get("published", 0) for c in truth(capture)["connections"])
    assert len(sent) == published_count  # (the scenario's messages, as the truth counts them)
    text = verbose(capsys, str(CAPTURES / f"{capture}.pcap"))
    blocks = message_blocks(text)
    out = [b for b in blocks if b["command"] == "Publish"]
    assert [b["body"] for b in out] == [s.body for s in sent]
    assert [b["application_properties"] for b in out] == [s.application_properties for s in sent]
    for block, message in zip(out, sent, strict=True):
        assert ("not AMQP 1.0" in block["line"]) == (not message.amqp)
    entries = re.findall(r"publishing id \d+: (simple|sub-batch).*?(?:, filter value (.+))?$",
                         text, re.MULTILINE)  # fmt: skip
    filter_values = [json.loads(value) if value else None for _, value in entries]
    if all(kind == "simple" for kind, _ in entries):  # (an entry a message)
        assert filter_values == [s.filter_value for s in sent]
    else:
        assert set(filter_values) == {s.filter_value for s in sent} == {None}
    kept = stored(capture)
    delivered = [b for b in blocks if b["command"] == "Deliver"]
    deliver_frames = sum(n for c in truth(capture)["connections"]
                         for key, n in c["frames"].get("s2c", {}).items() if key[:6] == "0x0008")
    assert bool(delivered) == bool(deliver_frames)
    for block in delivered:
        offset = int(re.search(r"offset (\d+)", block["line"])[1])
        assert block["body"] == kept[offset].body
        assert block["application_properties"] == kept[offset].application_properties
    delivered_records = sum(c.get("delivered_records", 0) for c in truth(capture)["connections"])
    if delivered_records:
        assert len(delivered) == delivered_records


def test_sub_batches_of_the_capture_are_inflated_and_named(capsys):
    """rstream-sub-entry: 3 gzip sub-batches and 3 uncompressed ones of 10 each, both ways."""
    text = verbose(capsys, str(CAPTURES / "rstream-sub-entry-3.10.pcap"))
    publish = re.findall(r"publishing id \d+: sub-batch, (\w+), (\d+) records", text)
    assert sorted(publish) == [("gzip", "10")] * 3 + [("none", "10")] * 3
    delivered = re.findall(r"entry at byte \d+: sub-batch, (\w+), (\d+) records", text)
    assert sorted(set(delivered)) == [("gzip", "10"), ("none", "10")]


# --- frames built here (codecs and sections no capture has) --------------------------------

CODECS = {
    CompressionType.NONE: lambda data: data,
    CompressionType.GZIP: gzip.compress,
    CompressionType.SNAPPY: lambda data: snappy.StreamCompressor().compress(data),
    CompressionType.LZ4: lz4.frame.compress,
    CompressionType.ZSTD: lambda data: zstandard.ZstdCompressor().compress(data),
}


def rstream_message(**sections) -> bytes:
    """A message as rstream (a real client) encodes it."""
    from rstream import AMQPMessage

    return bytes(AMQPMessage(**sections))


@pytest.mark.parametrize("codec", list(CODECS))
def test_sub_batches_of_every_codec(codec):
    records = [rstream_message(body=b"record %d" % i, application_properties={"i": i})
               for i in range(4)]  # fmt: skip
    plain = b"".join(struct.pack(">I", len(r)) + r for r in records)
    entry = sub_batch(codec, records, CODECS[codec](plain))
    record = decode_frame(deliver(chunk([simple_entry(records[0]), entry], 5, chunk_id=40)))
    tree = frame_tree(record)
    name = CompressionType(codec).name.lower()
    assert f"sub-batch, {name}, 4 records, {len(entry) - 11} bytes ({len(plain)} uncompressed)" \
        ", offset 41..44" in tree  # fmt: skip
    for i in range(4):
        assert f'message {i + 1}, offset {41 + i}: {len(records[i])} bytes, AMQP 1.0' in tree
        assert f'body (data, {len(b"record %d" % i)} bytes, text): "record {i}"' in tree
    # the same sub-batch in a Publish
    publish = make_record("Publish", publisher_id=2, messages=[
        {"publishing_id": 9, "filter_value": None,
         "entry": SubBatch(codec, 4, len(plain), CODECS[codec](plain))}])  # fmt: skip
    tree = frame_tree(decode_frame(encode_record(publish)))
    assert f"publishing id 9: sub-batch, {name}, 4 records" in tree
    assert tree.count("body (data") == 4


def test_every_section_a_client_sets_is_shown_with_its_value():
    """rstream's encoder writes every section; each value is shown where it belongs, the
    timestamps as wall-clock times, and a Publish v2's filter value."""
    from rstream._pyamqp.message import Header, Properties

    message = rstream_message(
        header=Header(durable=True, priority=7, ttl=60000, first_acquirer=False,
                      delivery_count=2),
        delivery_annotations={b"x-opt-trace": "abc"},
        message_annotations={b"x-stream-filter-value": "emea"},
        properties=Properties(message_id="order-17", user_id=b"guest", to="/queues/x",
                              subject="order", reply_to="replies", correlation_id="corr-9",
                              content_type="application/json", content_encoding="utf-8",
                              absolute_expiry_time=1795308300000,
                              creation_time=1795308251144, group_id="g1", group_sequence=3,
                              reply_to_group_id="rg"),
        application_properties={"region": "eu", "n": 5, "ok": True},
        body=b'{"error": "timeout"}', footer={b"x-crc": 1234})  # fmt: skip
    publish = make_record("Publish", version=2, publisher_id=1, messages=[
        {"publishing_id": 5, "filter_value": "emea", "entry": message}])  # fmt: skip
    tree = frame_tree(decode_frame(encode_record(publish)))
    expected = [
        f'publishing id 5: simple, {len(message)} bytes, filter value "emea"',
        "header:", "durable: true", "priority: 7", "ttl: 60000", "first_acquirer: false",
        "delivery_count: 2",
        "delivery_annotations:", 'x-opt-trace: "abc"',
        "message_annotations:", 'x-stream-filter-value: "emea"',
        "properties:", 'message_id: "order-17"', "user_id: binary 6775657374",
        'to: "/queues/x"', 'subject: "order"', 'reply_to: "replies"',
        'correlation_id: "corr-9"', 'content_type: symbol "application/json"',
        'content_encoding: symbol "utf-8"',
        "absolute_expiry_time: 2026-11-22 00:45:00.000 UTC (1795308300000 ms)",
        "creation_time: 2026-11-22 00:44:11.144 UTC (1795308251144 ms)",
        'group_id: "g1"', "group_sequence: 3", 'reply_to_group_id: "rg"',
        "application_properties:", 'region: "eu"', "n: 5", "ok: true",
        'body (data, 20 bytes, text): "{\\"error\\": \\"timeout\\"}"',
        "footer:", "x-crc: 1234",
    ]  # fmt: skip
    lines = [line.strip() for line in tree.splitlines()]
    for want in expected:
        assert want in lines, want


def test_typed_bodies_are_shown_with_their_types():
    value = rstream_message(value={"a": [1, 2]})
    sequence = rstream_message(sequence=[1, "two", 3.5])
    text = rstream_message(value="plain words")
    publish = make_record("Publish", publisher_id=1, messages=[
        {"publishing_id": i, "filter_value": None, "entry": m}
        for i, m in enumerate((value, sequence, text))])  # fmt: skip
    lines = [line.strip() for line in frame_tree(decode_frame(encode_record(publish))).splitlines()]
    for want in ("body (amqp_value, map):", "a: list of 2", "[0]: 1", "[1]: 2",
                 "body (amqp_sequence, list):", '[1]: "two"', "[2]: 3.5",
                 'body (amqp_value, string): "plain words"'):  # fmt: skip
        assert want in lines, want


def one_connection(path: Path, frames: list[tuple[bytes, bool]]) -> Path:
    """A capture of one connection to 5552 carrying `frames` (bytes, sent by the server)."""
    ts = 1_700_000_000 * 10**9
    packets = [(ts, worsen.eth_tcp(40000, 5552, 999, 0, 0x02, b""), 54),
               (ts + 1000, worsen.eth_tcp(5552, 40000, 4999, 1000, 0x12, b""), 54)]  # fmt: skip
    seq = {False: 1000, True: 5000}
    for frame, by_server in frames:
        ports = (5552, 40000) if by_server else (40000, 5552)
        for at in range(0, len(frame), 60000):  # (segments a TCP packet can hold)
            part = frame[at : at + 60000]
            data = worsen.eth_tcp(*ports, seq[by_server], seq[not by_server], 0x18, part)
            packets.append((ts + 2000 + len(packets), data, len(data)))
            seq[by_server] += len(part)
    return worsen.write_pcap(path, 1, packets)


def test_a_one_megabyte_body_is_cut(tmp_path, capsys):
    """A 1 MB body in a Publish and in a Deliver (above the 64 KiB a Deliver is otherwise kept
    to): the size said, the first --max-body bytes shown, no line of the megabyte."""
    big = b"A" * 1_000_000
    message = rstream_message(body=big)
    publish = encode_record(make_record("Publish", publisher_id=1, messages=[
        {"publishing_id": 1, "filter_value": None, "entry": message}]))  # fmt: skip
    path = one_connection(tmp_path / "big.pcap", [
        (publish, False), (deliver(chunk([simple_entry(message)], 1, chunk_id=0)), True)])
    text = verbose(capsys, str(path))
    shown = f'body (data, 1000000 bytes, text, first 256 shown): "{"A" * 256}"'
    assert [line.strip() for line in text.splitlines()].count(shown) == 2
    assert max(map(len, text.splitlines())) < 1000
    text = verbose(capsys, "--max-body", "10", str(path))
    assert text.count('body (data, 1000000 bytes, text, first 10 shown): "AAAAAAAAAA"') == 2
    binary = rstream_message(body=bytes(range(256)) * 4000)
    record = decode_frame(deliver(chunk([simple_entry(binary)], 1)))
    tree = frame_tree(record, max_body=32)
    assert "body (data, 1024000 bytes, binary, first 32 shown):" in tree
    assert "0010  10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f  ................" in tree
    assert "0020" not in tree


def test_a_damaged_chunk_shows_the_damage_and_the_entries_before_it():
    good = [rstream_message(body=b"first"), rstream_message(body=b"second")]
    broken_size = struct.pack(">I", 10_000) + b"third, cut"
    record = decode_frame(deliver(chunk([simple_entry(m) for m in good] + [broken_size], 3)))
    lines = [line.strip() for line in frame_tree(record).splitlines()]
    assert 'body (data, 5 bytes, text): "first"' in lines
    assert 'body (data, 6 bytes, text): "second"' in lines
    at = 2 * 4 + len(good[0]) + len(good[1])
    assert f"entry at byte {at}: [damaged] simple entry size 10000 exceeds the data left" in lines
    # a sub-batch that does not inflate, between good entries
    bad = sub_batch(CompressionType.GZIP, [b"x"], b"not gzip at all")
    record = decode_frame(deliver(chunk([simple_entry(good[0]), bad, simple_entry(good[1])], 3)))
    tree = frame_tree(record)
    assert "sub-batch, gzip, 1 records" in tree and "[damaged] gzip:" in tree
    assert tree.index('"first"') < tree.index("[damaged] gzip:") < tree.index('"second"')
    # a message whose sections break after its properties: the properties shown, then why
    message = rstream_message(application_properties={"region": "eu"}, body=b"whole")
    cut = message[: message.index(b"\x00Su") + 5]  # (the data section claims more bytes)
    tree = frame_tree(decode_frame(deliver(chunk([simple_entry(cut)], 1))))
    assert 'region: "eu"' in tree and "[damaged] type 0xa0: needs" in tree


def test_no_bodies_leaves_every_body_out(capsys):
    text = verbose(capsys, "--no-bodies", str(CAPTURES / "rbfly-publish-consume-3.10.pcap"))
    assert "streamdissect-msg-" not in text
    assert text.count("body (data, 64 bytes): left out (--no-bodies)") == 55 * 2
    assert text.count('region: "emea"') > 0  # (the other sections are shown)


def test_other_frames_show_every_field_and_secrets_stay_hidden(capsys):
    text = verbose(capsys, str(CAPTURES / "rstream-auth-failure-3.10.pcap"))
    assert "wrong-secret-pw" not in text
    assert "mechanism: \"PLAIN\"" in text and "code: 0x08 (AUTHENTICATION_FAILURE)" in text
    text = verbose(capsys, str(CAPTURES / "raw-deliver-v2-4.0.pcap"))
    assert "committed_chunk_id:" in text and "crc: 0x" in text and "(matches the data)" in text


def test_message_options_that_do_not_go_together(capsys):
    path = str(CAPTURES / "raw-errors-3.10.pcap")
    assert main(["frames", "--format", "jsonl", "--payloads", "--no-bodies", path]) == 2
    assert main(["frames", "-V", "--max-body", "-1", path]) == 2
    assert "streamdissect:" in capsys.readouterr().err


def test_malformed_and_unknown_frames_show_their_reason_and_bytes():
    """A Publish whose message list breaks is a Malformed record: its reason, where, and
    its bytes (a hex dump cut at --max-body) instead of messages."""
    body = struct.pack(">BiQI", 1, 1, 1, 99) + b"body"  # (an entry of 99 bytes: 4 are there)
    frame = struct.pack(">IHH", 4 + len(body), 0x0002, 1) + body
    record = decode_frame(frame)
    lines = [line.strip() for line in frame_tree(record, max_body=16).splitlines()]
    assert type(record).__name__ == "Malformed"
    assert 'command: "Publish"' in lines and "malformed: true" in lines
    assert any(line.startswith("reason: ") for line in lines)
    assert f"raw: {len(frame)} bytes" in lines and "... " + f"{len(frame) - 16} more bytes" in lines
    unknown = decode_frame(struct.pack(">IHH", 6, 0x0077, 1) + b"ab")
    lines = [line.strip() for line in frame_tree(unknown).splitlines()]
    assert "key: 0x0077 (unknown)" in lines and "unknown: true" in lines


def test_a_frame_inflates_a_bounded_amount_in_all():
    """Sub-batches that each claim little but add up: past the frame's bound of inflated
    bytes (max_decompressed) an entry is said not inflated; the ones before are shown."""
    records = [b"r" * 1000] * 300  # (300 KB a sub-batch, gzip'd to a few hundred bytes)
    plain = b"".join(struct.pack(">I", len(r)) + r for r in records)
    entry = sub_batch(CompressionType.GZIP, records, gzip.compress(plain))
    record = decode_frame(deliver(chunk([entry] * 4, 1200)))
    tree = frame_tree(record, max_decompressed=700_000, bodies=False)
    assert tree.count("body (raw, 1000 bytes): left out") == 600  # (two sub-batches)
    assert tree.count(f"[damaged] not inflated: its {len(plain)} bytes would take the frame "
                      "past 700000 inflated bytes") == 2  # fmt: skip
    assert "data: 4 entries, 600 messages" in tree


def test_rocketmq_frames_show_their_fields_as_a_tree(capsys):
    """A RocketMQ connection under -V: each frame's line and its fields as a tree (its own
    protocol's: tests/test_rocketmq_messages.py); each send's tags, keys and message id as
    the Java client reported them."""
    capture = CAPTURES / "rocketmq" / "rmq-java-json.pcap"
    report = json.loads(capture.with_suffix(".truth.json").read_text())["clients"][0]["report"]
    text = verbose(capsys, str(capture))
    lines = [line.strip() for line in text.splitlines()]
    assert f'topic: "{report["topic"]}"' in lines
    for send in report["sends"]:
        assert f'UNIQ_KEY: "{send["msgId"]}"' in lines
        assert all(f'TAGS: "{tag}"' in lines for tag in send["tags"])
        assert all(f'KEYS: "{key}"' in lines for key in send["keys"])
    # (RocketMQ's request code, not named as a Stream code)
    assert "code: 310 (SEND_MESSAGE_V2, a request code)" in lines


def test_common_head_as_each_field_writes_it():
    """-V writes a record's common fields from a memo of their lines (by class and values):
    the memo's text equals the lines the fields give one by one, on every frame of the
    corpus, at two depths; and a record's dict starts with the common columns."""
    from streamdissect.engine.dissect import Dissector, FrameEvent
    from streamdissect.protocols.stream import verbose
    from streamdissect.protocols.stream.records import COMMON_COLUMNS, Record

    seen = 0
    for path in sorted(Path("captures").glob("*.pcap")):
        for event in Dissector(publish_messages=True, columns=False).run([str(path)]):
            if event.__class__ is not FrameEvent or not isinstance(event.record, Record):
                continue
            record = event.record
            assert tuple(record.common_dict()) == COMMON_COLUMNS
            for depth in (1, 3):
                verbose.HEADS.clear()
                first = frame_tree(record, depth=depth)
                assert frame_tree(record, depth=depth) == first  # (from the memo)
                tree = verbose.Tree(None, False)
                for name in COMMON_COLUMNS:
                    tree.add(depth, f"{name}: {verbose._annotated(name, getattr(record, name))}")
                assert first.startswith("\n".join(tree.lines) + "\n")
            seen += 1
    assert seen > 1000
