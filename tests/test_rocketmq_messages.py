"""RocketMQ's messages, shown as the Stream's are: `frames -V` (header and each message of
a send, a batch or a pull response, compressed bodies inflated, CRCs checked, damage in
place), message fields in `-Y`, `--messages` and the messages table. Expected values are
what the clients sent and received (tests/rocketmq_sent.py: the truth files and the kit's
clients' own body functions), never what the code under test printed."""

from __future__ import annotations

import json
import re
import struct
import zlib

import pandas as pd
import pytest
from rocketmq_sent import received, sent
from rocketmq_support import CAPTURES, DIRECTIONS, client_port, truth
from test_protocol_seam import mixed, with_toy  # noqa: F401  (fixtures: the seam test's toy)

from streamdissect.analysis import messages_table
from streamdissect.cli import main
from streamdissect.engine.dissect import Dissector, FrameEvent
from streamdissect.protocols.rocketmq import decode_frame, encode_command, make_command, spec
from streamdissect.protocols.rocketmq.protocol import ROCKETMQ
from streamdissect.tables import schema

WITH_SENDS = [name for name in ("rmq-java-json", "rmq-java-rocketmq-batch", "rmq-java-compressed",
                                "rmq-cpp", "rmq-js", "rmq-long-poll", "rmq-broker-stop")]  # fmt: skip
WITH_PULLS = [name for name in WITH_SENDS if received(name)]
FRAME_LINE = re.compile(r"\s*(\d+)\s+\S+ (\S+) (→|←) ")


def path(name: str) -> str:
    return str(CAPTURES / f"{name}.pcap")


def table(name: str, **options) -> pd.DataFrame:
    return messages_table(path(name), **options)


def plain(value):
    return None if pd.isna(value) else value


def preview_bytes(row) -> bytes:
    preview = row["body_preview"]
    return bytes.fromhex(preview) if row["body_encoding"] == "hex" else preview.encode()


def run(capsys, *args: str) -> str:
    assert main(["frames", *args]) == 0
    return capsys.readouterr().out


def blocks(text: str) -> list[tuple[int, str, list[str]]]:
    """-V text as (the client's port, c2s/s2c, the lines under the frame's line)."""
    out = []
    for line in text.splitlines():
        head = FRAME_LINE.match(line)
        if head and not line.startswith("    " * 2):
            direction = "c2s" if head.group(3) == "→" else "s2c"
            out.append((client_port(head.group(2)), direction, []))
        elif out and line.strip():
            out[-1][2].append(line.strip())
    return out


def call_of(lines: list[str]) -> tuple[int, bool]:
    """A frame's opaque and whether it is a response (both sides number their requests)."""
    opaque = int(next(line for line in lines if line.startswith("opaque: ")).split()[1])
    flag = next(line for line in lines if line.startswith("flag: 0x"))
    return opaque, "(response" in flag


# --- the messages table -----------------------------------------------------------------


@pytest.mark.parametrize("name", WITH_SENDS)
def test_the_table_holds_what_the_producers_sent(name):
    rows = table(name, max_body=None)
    assert list(rows.columns) == schema.column_names("messages")
    assert dict(rows.dtypes.astype(str)) == schema.pandas_dtypes("messages")
    assert (rows["protocol"] == "rocketmq").all()
    sends = rows[rows["direction"] == "c2s"]
    clients = sent(name)
    assert [(t, plain(g), plain(k)) for t, g, k in zip(sends["topic"], sends["tags"],
                                                       sends["keys"])] == \
        [(m.topic, m.tags, m.keys) for m in clients]  # fmt: skip
    assert [preview_bytes(row) for _, row in sends.iterrows()] == [m.body for m in clients]
    assert list(sends["body_size"]) == [len(m.body) for m in clients]
    assert [i for m, i in zip(clients, sends["msg_id"]) if m.msg_id] == \
        [m.msg_id for m in clients if m.msg_id]  # fmt: skip
    for m, (_, row) in zip(clients, sends.iterrows()):
        if m.compressed is not None:  # (the Java client says whether it compressed)
            assert (plain(row["compression"]) == "zlib") == m.compressed
            assert (row["size"] != row["body_size"]) == m.compressed  # (inflated)
    assert not sends["body_truncated"].any() and sends["error"].isna().all()
    assert set(sends["command"]) <= {"SEND_MESSAGE", "SEND_MESSAGE_V2", "SEND_BATCH_MESSAGE"}


@pytest.mark.parametrize("name", WITH_PULLS)
def test_the_table_holds_what_the_consumers_received(name):
    rows = table(name, max_body=None)
    pulled = rows[rows["direction"] == "s2c"]
    got = received(name)

    def key(topic, queue, offset):
        return topic, int(queue), int(offset)

    assert sorted(key(r["topic"], r["queue_id"], r["offset"]) for _, r in pulled.iterrows()) \
        == sorted(key(g["topic"], g["queueId"], g["queueOffset"]) for g in got)  # fmt: skip
    by_place = {key(r["topic"], r["queue_id"], r["offset"]): r for _, r in pulled.iterrows()}
    for g in got:
        row = by_place[key(g["topic"], g["queueId"], g["queueOffset"])]
        assert g["msgId"] in (row["msg_id"], row["offset_msg_id"])
        if "offsetMsgId" in g:
            assert row["offset_msg_id"] == g["offsetMsgId"]
        assert (row["tags"], row["keys"]) == (g["tags"], g["keys"])
        assert preview_bytes(row) == g["body"] and row["body_size"] == g["bodyLength"]
        assert bool(row["crc_ok"]) and row["command"] == "PULL_MESSAGE"
        assert row["born_timestamp_ms"] <= row["store_timestamp_ms"]


def test_bodies_are_cut_at_max_body_or_left_out():
    name = "rmq-java-compressed"
    short = table(name, max_body=10)
    clients = sent(name)
    sends = short[short["direction"] == "c2s"]
    assert [preview_bytes(r) for _, r in sends.iterrows()] == [m.body[:10] for m in clients]
    assert short["body_truncated"].all()
    none = table(name, bodies=False)
    assert none["body_preview"].isna().all() and none["body_encoding"].isna().all()
    assert list(none[none["direction"] == "c2s"]["body_size"]) == [len(m.body) for m in clients]


def test_frames_messages_jsonl_lines_are_the_table_rows(capsys):
    name = "rmq-java-rocketmq-batch"
    lines = [json.loads(line) for line in run(capsys, "--format", "jsonl", "--messages",
                                              path(name)).splitlines()]  # fmt: skip
    rows = table(name)
    for column in ("frame", "command", "index", "topic", "queue_id", "msg_id", "tags", "keys",
                   "size", "body_size"):  # fmt: skip
        assert [line[column] for line in lines] == [plain(v) for v in rows[column]]
    assert [line["properties"] for line in lines] == [dict(p) for p in rows["properties"]]
    sends = [line for line in lines if line["direction"] == "c2s"]
    assert [line["body"].encode() for line in sends] == [m.body for m in sent(name)]
    assert [line["properties"]["UNIQ_KEY"] for line in sends] == [m.msg_id for m in sent(name)]
    # -c counts messages, -Y selects them
    first = run(capsys, "--format", "jsonl", "--messages", "-c", "2", path(name))
    assert [json.loads(line)["keys"] for line in first.splitlines()] == ["bk-0", "bk-1"]
    some = run(capsys, "--format", "jsonl", "--messages", "-Y", 'message.keys == "bk-2"',
               path(name))  # fmt: skip
    assert [(json.loads(line)["direction"]) for line in some.splitlines()] == ["c2s", "s2c"]


def test_frames_messages_text_lines(capsys):
    name = "rmq-cpp"
    text = run(capsys, "--messages", path(name))
    for m in sent(name):
        (line,) = [line for line in text.splitlines() if f"msgId={m.msg_id}" in line and "→" in line]
        assert f"topic={m.topic}" in line and f"tags={m.tags}" in line and f"keys={m.keys}" in line
        assert json.dumps(m.body.decode()) in line


# --- frames -V ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["rmq-java-json", "rmq-java-rocketmq-batch", "rmq-js"])
def test_verbose_shows_each_frame_as_the_clients_traced_it(name, capsys):
    """Every frame of the clients' traces: its code (named), language, version, opaque, flag,
    remark and ext fields under its line."""
    shown = {(port, direction, *call_of(lines)): lines
             for port, direction, lines in blocks(run(capsys, "-V", path(name)))
             if any(line.startswith("opaque: ") for line in lines)}  # fmt: skip
    traced = 0
    for client in truth(name)["clients"]:
        for f in client["report"].get("frames") or ():
            direction, response = DIRECTIONS[f["dir"]]
            lines = shown[(f["clientPort"], direction, f["opaque"], response)]
            names = spec.response_name if response else spec.request_name
            assert f"code: {f['code']} ({names(f['code'])}, a " \
                   f"{'response' if response else 'request'} code)" in lines  # fmt: skip
            # (the flag's response bit: the traces' oneway bits are not the wire's, the Java
            # client's taken before it marks a request oneway, ali-ons' its own idea)
            flag = next(line for line in lines if line.startswith("flag: 0x"))
            assert ("(response" in flag) == response == bool(int(flag.split()[1], 16) & 1)
            if "language" in f:
                assert f'language: "{f["language"]}"' in lines
                assert f"version: {f['version']}" in lines
            assert f"remark: {json.dumps(f.get('remark'), ensure_ascii=False)}" in lines
            for key, value in f["header"].items():  # (the ext fields as the client sent them)
                if f["dir"] == "s->c request" and key == "ReqT":
                    continue  # (the Java consumer's own hook adds it once it has read one)
                if isinstance(value, str):
                    assert f"{key}: {json.dumps(value, ensure_ascii=False)}" in lines
            traced += 1
    assert traced == sum(len(c["report"].get("frames") or ()) for c in truth(name)["clients"])


@pytest.mark.parametrize("name", ["rmq-java-json", "rmq-java-rocketmq-batch", "rmq-cpp"])
def test_verbose_shows_each_message_sent_and_pulled(name, capsys):
    text = run(capsys, "-V", path(name))
    lines = [line.strip() for line in text.splitlines()]
    for m in sent(name):
        assert lines.count(f'msgId: "{m.msg_id}"') == 1 + sum(
            g["msgId"] == m.msg_id for g in received(name))  # fmt: skip
        body_line = f"body ({len(m.body)} bytes, text): {json.dumps(m.body.decode())}"
        assert lines.count(body_line) == 1 + sum(g["msgId"] == m.msg_id for g in received(name))
    for g in received(name):
        assert f'keys: "{g["keys"]}"' in lines and f'tags: "{g["tags"]}"' in lines
        assert f"UNIQ_KEY: {json.dumps(g['msgId'])}" in lines or f'msgId: "{g["msgId"]}"' in lines
    stored = [line for line in lines if line.startswith("bodyCRC: ")]
    assert len(stored) == len(received(name))
    assert all(line.endswith("(matches the body)") for line in stored)


def _body_shown(lines: list[str], at: int) -> bytes:
    """The body under the line at `at`: its text, or its hex dump's bytes."""
    head = lines[at]
    if ", text" in head:
        return json.loads(head.split("): ", 1)[1]).encode()
    dump = []
    for line in lines[at + 1 :]:
        if not re.match(r"[0-9a-f]{4}  ", line):
            break
        dump.append(bytes.fromhex(line[6:53]))
    return b"".join(dump)


def test_verbose_inflates_compressed_large_messages(capsys):
    """The Java client compressed its 60,000-byte text and 120,000-byte random bodies: each
    send and each pulled copy shows the inflated body (its first --max-body bytes)."""
    name = "rmq-java-compressed"
    clients = sent(name)
    assert all(m.compressed for m in clients)
    for max_body in (256, 16):
        lines = [line.strip() for line in run(capsys, "-V", "--max-body", str(max_body),
                                              path(name)).splitlines()]  # fmt: skip
        heads = [i for i, line in enumerate(lines) if line.startswith("body (")
                 and "on the wire (zlib)" in line]  # fmt: skip
        assert len(heads) == len(clients) + len(received(name))
        shown = [(lines[i], _body_shown(lines, i)) for i in heads]
        for m in clients:
            copies = [head for head, body in shown if body == m.body[:max_body]]
            assert len(copies) == 2  # (the send and the pulled copy)
            assert all(head.startswith(f"body ({len(m.body)} bytes, ") for head in copies)
            assert all(f"first {max_body} shown" in head for head in copies)
    hidden = run(capsys, "-V", "--no-bodies", path(name))
    for m in clients:
        assert f"body ({len(m.body)} bytes, " in hidden
    assert hidden.count("left out (--no-bodies)") == len(clients) + len(received(name))


# --- -Y over message fields --------------------------------------------------------------


def selected(capsys, name: str, expression: str) -> list[tuple[str, int]]:
    out = run(capsys, "--format", "jsonl", "-Y", expression, path(name))
    return sorted((row["direction"], row["opaque"]) for row in map(json.loads, out.splitlines()))


def _pull_frames(name: str) -> list[dict]:
    return [f for c in truth(name)["clients"] for f in c["report"].get("frames") or ()
            if f.get("messages")]  # fmt: skip


@pytest.mark.parametrize("name", ["rmq-java-json", "rmq-java-rocketmq-batch"])
def test_message_fields_select_the_frames_that_carry_them(name, capsys):
    """A frame is selected when any of its messages is: the send of a key and the pull
    responses whose messages the consumer's trace lists with it."""
    producer = next(c for c in truth(name)["clients"] if c["name"] == "producer")["report"]
    sends = [f for f in producer["frames"] if f["code"] in (310, 320)]
    keys_sent = [(f["opaque"], send["keys"]) for f, send in zip(sends, producer["sends"],
                                                                strict=True)]  # fmt: skip
    for m in sent(name):
        send = [("c2s", opaque) for opaque, keys in keys_sent if m.keys in keys]
        pulls = [("s2c", f["opaque"]) for f in _pull_frames(name)
                 if any(x["keys"] == m.keys for x in f["messages"])]  # fmt: skip
        expected = sorted(send + pulls)
        assert len(send) == 1 and expected
        assert selected(capsys, name, f'message.keys == "{m.keys}"') == expected
        assert selected(capsys, name, f'message.properties.UNIQ_KEY == "{m.msg_id}"') == expected
        assert selected(capsys, name, f'message.body contains "{m.body[:7].decode()}"') \
            == expected  # fmt: skip
    tagged = sorted({("c2s", f["opaque"]) for f, send in zip(sends, producer["sends"])
                     if "TagB" in send["tags"]}
                    | {("s2c", f["opaque"]) for f in _pull_frames(name)
                       if any(x["tags"] == "TagB" for x in f["messages"])})  # fmt: skip
    assert selected(capsys, name, 'message.tags == "TagB"') == tagged
    everything = selected(capsys, name, "message")
    assert len(everything) == len(sends) + len(_pull_frames(name))
    assert selected(capsys, name, 'message.topic == "nope"') == []


# --- damage -------------------------------------------------------------------------------


def _frames_of(name: str) -> list[bytes]:
    """A capture's frames as on the wire (the framer keeps each)."""
    kept = []

    class Keeping(ROCKETMQ.framer_class):
        __slots__ = ()

        def _decode(self, offset, ts_ns, frame, size, cut):
            kept.append(bytes(frame))
            super()._decode(offset, ts_ns, frame, size, cut)

    dissector = Dissector(engine="stream", protocols=["rocketmq"])
    dissector.framer_class = Keeping
    list(dissector.run(path(name)))
    return kept


def _pull_with(name: str, count: int) -> tuple[bytes, object]:
    for frame in _frames_of(name):
        record = decode_frame(frame)
        if getattr(record, "response", False) and len(record.messages or ()) >= count:
            return frame, record
    raise AssertionError(f"no pull response of {count} messages or more in {name}")


def view(record) -> list[str]:
    return [line.strip() for line in ROCKETMQ.frame_view(record)[1].splitlines()]


def rows_of(record) -> list[dict]:
    reader = ROCKETMQ.message_reader()
    event = FrameEvent(0, "127.0.0.1:1-127.0.0.1:10911", "s2c", 0, record)
    return [reader.row(event, held, 1) for held in reader.messages(event)]


def test_a_damaged_body_is_said_where_it_is_the_rest_shown():
    """A pulled message whose body bytes changed: its CRC does not match (said in -V, the
    row's crc_ok and the --messages line); a second message that lies about its size: the
    body's error after the first message, which is shown whole."""
    name = "rmq-java-rocketmq-batch"
    frame, record = _pull_with(name, 2)
    body_at = len(frame) - len(record.body)
    first = record.messages[0]
    keys = [m.keys for m in record.messages]
    # a byte inside the first message's body changed
    at = record.body.index(first.body) + 3
    hurt = bytearray(frame)
    hurt[body_at + at] ^= 0x20
    damaged = decode_frame(bytes(hurt))
    lines = view(damaged)
    assert sum(line.endswith("(does NOT match the body)") for line in lines) == 1
    assert sum(line.endswith("(matches the body)") for line in lines) == len(keys) - 1
    assert [row["crc_ok"] for row in rows_of(damaged)] == [False] + [True] * (len(keys) - 1)
    assert [row["keys"] for row in rows_of(damaged)] == keys
    reader = ROCKETMQ.message_reader()
    assert "[body CRC does NOT match]" in reader.line(rows_of(damaged)[0])
    # the second message says it is 1 MB long
    second_at = body_at + first.total_size
    lie = bytearray(frame)
    struct.pack_into(">i", lie, second_at, 1 << 20)
    cut = decode_frame(bytes(lie))
    lines = view(cut)
    assert "messages: 1" in lines and f'keys: "{keys[0]}"' in lines
    (damage,) = [line for line in lines if line.startswith("[damaged]")]
    assert damage.startswith(f"[damaged] at byte {second_at}: ")
    assert "(the messages before it are shown)" in damage
    assert [row["keys"] for row in rows_of(cut)] == keys[:1]


def test_a_compressed_body_that_does_not_inflate_is_said_so():
    name = "rmq-java-compressed"
    frame, record = next((f, r) for f, r in ((f, decode_frame(f)) for f in _frames_of(name))
                         if not r.response and r.messages)  # fmt: skip
    hurt = bytearray(frame)
    start = len(frame) - len(record.body)
    hurt[start + 2 : start + 40] = bytes(38)  # (the deflate stream's first blocks zeroed)
    damaged = decode_frame(bytes(hurt))
    lines = view(damaged)
    (said,) = [line for line in lines if line.startswith("[damaged] body ")]
    assert f"{len(record.body)} bytes, not inflated: " in said
    (row,) = rows_of(damaged)
    assert row["error"] is not None and row["keys"] == record.messages[0].keys
    assert row["body"] == damaged.messages[0].body[:256].hex()  # (the bytes as they are)


def test_a_body_past_the_inflation_limit_is_not_inflated():
    """A send whose zlib body inflates past the codec's limit (spec.MAX_INFLATED): refused,
    said so, the topic and properties still shown."""
    bomb = zlib.compress(bytes(spec.MAX_INFLATED + 1))
    record = decode_frame(encode_command(make_command(
        310, fields={"producerGroup": "P", "topic": "T", "queueId": 1, "sysFlag": 1,
                     "properties": "TAGS\x01t\x02KEYS\x01k\x02"}, body=bomb)))  # fmt: skip
    lines = view(record)
    assert f"beyond {spec.MAX_INFLATED} bytes" in " ".join(lines)
    assert 'tags: "t"' in lines and 'keys: "k"' in lines
    (row,) = rows_of(record)
    assert f"beyond {spec.MAX_INFLATED} bytes" in row["error"] and row["topic"] == "T"


# --- both protocols in one capture ------------------------------------------------------


def test_one_table_for_both_protocols_frames_numbered_as_frames_does(tmp_path, capsys):
    """A Stream capture and a RocketMQ one interleaved in one file: one messages table with
    each protocol's rows, each row's frame number the one `frames` gives its frame; each
    protocol's rows as its capture alone gives them."""
    import worsen
    from messages_truth import CAPTURES as STREAM_CAPTURES

    stream = STREAM_CAPTURES / "rbfly-publish-consume-3.10.pcap"
    linktype, stream_packets = worsen.read_pcap(stream)
    _, rocketmq_packets = worsen.read_pcap(path("rmq-java-json"))
    shift = stream_packets[0][0] - rocketmq_packets[0][0]
    both = sorted(stream_packets + [(ts + shift + 1, d, n) for ts, d, n in rocketmq_packets],
                  key=lambda p: p[0])  # fmt: skip
    interleaved = str(worsen.write_pcap(tmp_path / "both.pcap", linktype, both))
    rows = messages_table(interleaved)
    assert set(rows["protocol"]) == {"stream", "rocketmq"}
    numbered = {}
    for line in run(capsys, "--format", "jsonl", interleaved).splitlines():
        row = json.loads(line)
        if row.get("command") != "Anomaly":
            numbered[len(numbered) + 1] = (row["connection"], row["stream_offset"])
    assert [numbered[f] for f in rows["frame"]] == \
        list(zip(rows["connection"], rows["stream_offset"]))  # fmt: skip
    for protocol, alone in (("stream", messages_table(str(stream))), ("rocketmq",
                                                                     table("rmq-java-json"))):
        theirs = rows[rows["protocol"] == protocol]
        for column in ("command", "index", "msg_id", "tags", "keys", "publishing_id", "offset",
                       "body_preview", "body_size"):  # fmt: skip
            assert [plain(v) for v in theirs[column]] == [plain(v) for v in alone[column]]
    assert [bytes(m.body) for m in sent("rmq-java-json")] == [
        r.encode() for r in rows[(rows["protocol"] == "rocketmq")
                                 & (rows["direction"] == "c2s")]["body_preview"]]  # fmt: skip


def test_verbose_jsonl_and_the_analyze_report_carry_the_messages(capsys):
    """`frames -V --format jsonl`: each frame with messages has them decoded; `analyze
    --messages` names each message's topic, tags and keys."""
    name = "rmq-js"
    lines = [json.loads(line) for line in run(capsys, "-V", "--format", "jsonl",
                                              path(name)).splitlines()]  # fmt: skip
    decoded = [(line["direction"], m) for line in lines for m in line.get("decoded_messages", ())]
    sends = [m for direction, m in decoded if direction == "c2s"]
    assert [(m["tags"], m["keys"], m["body"].encode()) for m in sends] == \
        [(m.tags, m.keys, m.body) for m in sent(name)]  # fmt: skip
    pulled = sorted((m["keys"], m["body"].encode()) for d, m in decoded if d == "s2c")
    assert pulled == sorted((g["keys"], g["body"]) for g in received(name))
    assert main(["analyze", "--messages", path(name)]) == 0
    report = capsys.readouterr().out.split("Messages (the first 50)", 1)[1].splitlines()
    for m in sent(name):
        assert sum(m.topic in line and f" {m.tags} {m.keys} " in line for line in report) == 2


@pytest.mark.parametrize("name", sorted(p.stem for p in CAPTURES.glob("*.pcap")))
def test_every_recorded_frame_has_its_tree(name, capsys):
    """Each capture under -V: every frame's line, as without -V, with its tree under it."""
    plain_lines = run(capsys, path(name)).splitlines()
    verbose = run(capsys, "-V", path(name))
    assert [line for line in verbose.splitlines() if FRAME_LINE.match(line)] == plain_lines
    assert all(len(lines) >= 3 for _, _, lines in blocks(verbose))


def test_a_protocol_that_gives_no_messages_adds_no_rows(with_toy, mixed):  # noqa: F811 (fixtures)
    """The seam's base MessageReader: a protocol that says nothing of messages (the seam
    test's toy) adds no row; the Stream's rows are those of its capture alone."""
    from test_protocol_seam import STREAM_CAPTURE

    rows, alone = messages_table(str(mixed)), messages_table(str(STREAM_CAPTURE))
    assert len(rows) == len(alone) > 0 and set(rows["protocol"]) == {"stream"}
    for column in ("connection", "command", "publishing_id", "offset", "body_preview"):
        assert [plain(v) for v in rows[column]] == [plain(v) for v in alone[column]]


@pytest.mark.parametrize("name", ["rmq-java-json", "rmq-java-rocketmq-batch"])
def test_born_times_are_the_producers_and_the_brokers(name):
    """A sent message's born time is its send's header's (as the Java client's trace
    recorded it); a pulled one's is stored with it, the same."""
    producer = next(c for c in truth(name)["clients"] if c["name"] == "producer")["report"]
    frames = [f for f in producer["frames"] if f["code"] in (310, 320)]
    born = [f["header"].get("g", f["header"].get("bornTimestamp")) for f, send
            in zip(frames, producer["sends"], strict=True) for _ in range(send["messages"])]
    rows = table(name)
    sends = rows[rows["direction"] == "c2s"]
    assert list(sends["born_timestamp_ms"]) == born
    by_id = dict(zip(sends["msg_id"], sends["born_timestamp_ms"]))
    pulled = rows[rows["direction"] == "s2c"]
    assert len(pulled) and all(by_id[i] == b for i, b in zip(pulled["msg_id"],
                                                             pulled["born_timestamp_ms"]))


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_analyze_writes_rocketmqs_messages(fmt, tmp_path, capsys):
    from streamdissect.tables.export import read_table

    name = "rmq-java-rocketmq-batch"
    out = tmp_path / "m"
    assert main(["analyze", "--messages", "--format", fmt, "-o", str(out), path(name)]) == 0
    (written,) = [line for line in capsys.readouterr().out.splitlines() if "messages" in line]
    back = read_table(written if fmt == "csv" else str(out / "messages"), "messages")
    pd.testing.assert_frame_equal(back, table(name), check_dtype=False)
    sends = back[back["direction"] == "c2s"]
    assert [b.encode() for b in sends["body_preview"]] == [m.body for m in sent(name)]
    assert [dict(p)["KEYS"] for p in sends["properties"]] == [m.keys for m in sent(name)]


def test_a_frame_whose_header_does_not_read_is_said_so_under_verbose():
    """A real send whose JSON header is no JSON: the tree says where reading stopped and
    why, and shows the bytes kept (no message is made up)."""
    frame = next(f for f in _frames_of("rmq-java-json") if b'"code":310' in f)
    broken = bytearray(frame)
    broken[8] = ord("x")  # (the header's opening brace)
    record = decode_frame(bytes(broken))
    lines = view(record)
    (said,) = [line for line in lines if line.startswith("[malformed] at byte ")]
    assert record.reason in said and f"at byte {record.offset}:" in said
    assert not any(line.startswith("message ") for line in lines)
    assert rows_of(record) == []
