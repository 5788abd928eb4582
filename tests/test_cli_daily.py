"""The command line for daily use: captures from standard input (as they arrive), -c, and
the display filter (-Y) over every kind of field, with clear errors for bad expressions."""

from __future__ import annotations

import json
import os
import select
import struct
import subprocess
import sys

import pytest
import worsen

from streamdissect.cli._display_filter import FilterError, compile_filter

CAPTURES = worsen.corpus_captures()
CLI = [sys.executable, "-m", "streamdissect.cli"]


def run(args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], input=stdin, capture_output=True, check=False)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_standard_input_equals_the_file(path, tmp_path):
    """`cat CAPTURE | streamdissect frames -` (and analyze -) print what the file run prints,
    for the plain pcap, a pcapng copy and a gzip'd one."""
    pcapng = worsen.to_pcapng(path, tmp_path / "c.pcapng")
    gz = worsen.gzip_copy(path, tmp_path / "c.pcap.gz")
    ports = ["--port", "5552", "--port", "5553"]
    for args in (["frames"], ["frames", "--format", "jsonl"], ["analyze", "--format", "json"]):
        expected = run([*args, *ports, str(path)])
        assert expected.returncode == 0 and expected.stdout
        for source in (path, pcapng, gz):
            piped = run([*args, *ports, "-"], stdin=source.read_bytes())
            assert piped.returncode == 0, piped.stderr
            assert piped.stdout == expected.stdout, (args, source.name)


def test_frames_come_out_as_the_packets_arrive():
    """A pipe that stays open: each frame is printed as soon as its packets are in, not when
    the input ends (what `tcpdump -U -w - | streamdissect frames -` needs)."""
    linktype, packets = worsen.read_pcap(worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap")
    head = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)

    def record(packet) -> bytes:
        ts, data, length = packet
        return struct.pack("<IIII", ts // 10**9, ts % 10**9 // 1000, len(data), length) + data

    proc = subprocess.Popen([*CLI, "frames", "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        proc.stdin.write(head + b"".join(record(p) for p in packets[:40]))
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        assert ready, "no frame printed while the input stays open"
        first = proc.stdout.readline().decode()
        assert "PeerProperties" in first or "SaslHandshake" in first
        proc.stdin.write(b"".join(record(p) for p in packets[40:]))
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        assert ready, "the next packets' frames not printed while the input stays open"
    finally:
        proc.stdin.close()
        rest = proc.stdout.read().decode()
        proc.wait(timeout=30)
    whole = run(["frames", str(worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap")])
    assert first + rest == whole.stdout.decode()


def test_count_stops_after_n_frames():
    path = str(worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap")
    every = run(["frames", path]).stdout.decode().splitlines()
    assert run(["frames", "-c", "7", path]).stdout.decode().splitlines() == every[:7]
    lines = run(["frames", "--format", "jsonl", "-c", "3", path]).stdout.decode().splitlines()
    assert [json.loads(line)["command"] for line in lines] == ["PeerProperties",
                                                               "PeerProperties", "SaslHandshake"]
    bad = run(["frames", "-c", "0", path])
    assert bad.returncode == 2 and b"Traceback" not in bad.stderr


FRAME = {"ts_ns": 1795308251144356000, "connection": "127.0.0.1:55740-127.0.0.1:5553",
         "direction": "s2c", "command": "Deliver", "response": False, "code": None,
         "subscription_id": 1, "publishing_ids": [4, 5], "crc_ok": True, "size": 94,
         "chunk": {"chunk_id": 40, "num_records": 3}, "stream": "orders-1"}  # fmt: skip


@pytest.mark.parametrize(("expression", "selected"), [
    ('command == "Deliver" and subscription_id == 1', True),
    ('command == "Deliver" && subscription_id == 2', False),
    ('code != 1', True),  # (no code: null, which is not 1)
    ("code == null", True),
    ('connection contains ":5553"', True),
    ('connection contains ":5552"', False),
    ("response", False),
    ("not response", True),
    ("!response || size > 1000", True),
    ("ts_ns > 1795308251144355999 and ts_ns <= 1795308251144356000", True),
    ("size >= 0x5e and size < 95.5", True),
    ("crc_ok == true", True),
    ("crc_ok == 1", False),  # (a boolean is not a number)
    ("publishing_ids contains 5", True),
    ("chunk.chunk_id == 40 and chunk.num_records > 2", True),
    ("chunk.missing == null", True),
    ('stream matches "^orders-[0-9]+$"', True),
    ('stream > "a" and stream < "p"', True),
    ("(subscription_id == 2 or subscription_id == 1) and not (crc_ok == false)", True),
    ("correlation_id", False),  # (a field the frame does not have)
    ('direction == "c2s" or (command == "Deliver" and size == 94)', True),
])  # fmt: skip
def test_display_filter_over_every_kind_of_field(expression, selected):
    fields = frozenset(FRAME) | {"correlation_id"}
    assert compile_filter(expression, fields)(FRAME) is selected


@pytest.mark.parametrize(("expression", "at", "says"), [
    ("", 0, "empty filter"),
    ("commandd == 1", 0, "unknown field 'commandd'"),
    ('command == "Deliver" and', 24, "expected a field name"),
    ("size >", 6, "expected a value after >"),
    ("(size == 1", 10, "expected ')'"),
    ("size == 1)", 9, "unexpected ')'"),
    ("size = 1", 5, "unexpected '='"),
    ('stream matches "("', 15, "bad regular expression"),
    ("size == 1 size", 10, "unexpected 'size'"),
    ("size contains true", 14, "contains takes"),
])  # fmt: skip
def test_bad_filters_say_what_and_where(expression, at, says):
    with pytest.raises(FilterError) as error:
        compile_filter(expression, frozenset({"size", "command", "stream"}))
    assert error.value.position == at and says in str(error.value)


def test_filter_selects_the_same_frames_in_text_and_jsonl():
    path = str(worsen.CAPTURES / "raw-errors-3.10.pcap")
    expression = 'response and code != 1 or command == "Anomaly"'
    jsonl = [json.loads(line) for line in
             run(["frames", "--format", "jsonl", "-Y", expression, path]).stdout.splitlines()]
    text = run(["frames", "-Y", expression, path])
    every = [json.loads(line) for line in
             run(["frames", "--format", "jsonl", path]).stdout.splitlines()]
    expected = [row for row in every if (row.get("response") and row.get("code") != 1)
                or row["command"] == "Anomaly"]  # fmt: skip
    assert jsonl == expected and len(jsonl) > 5
    frames = [row for row in expected if row["command"] != "Anomaly"]
    lines = text.stdout.decode().splitlines()
    assert len(lines) == len(frames)
    assert all(f" {row['command']}Response " in line or row["command"] in line
               for row, line in zip(frames, lines))  # fmt: skip
    numbers = [int(line.split()[0]) for line in lines]  # the capture's frame numbers
    assert numbers == sorted(numbers) and numbers[-1] > len(lines)


def test_bad_filter_on_the_command_line_is_a_clear_error():
    out = run(["frames", "-Y", "size >>", str(worsen.CAPTURES / "raw-errors-3.10.pcap")])
    assert out.returncode == 2 and b"Traceback" not in out.stderr
    assert b"bad display filter" in out.stderr and b"^" in out.stderr


def test_empty_standard_input_is_a_clear_error():
    out = run(["frames", "-"], stdin=b"")
    assert out.returncode == 2 and b"Traceback" not in out.stderr and b"-:" in out.stderr


def test_analyze_text_shows_wall_clock_times_and_json_keeps_nanoseconds():
    path = str(worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap")
    text = run(["analyze", path]).stdout.decode()
    assert "2026-11-22 00:44:11.144356" in text  # the first stall, UTC
    assert not any(len(word) >= 18 and word.isdigit() for word in text.split())
    local = subprocess.run([*CLI, "analyze", "--local", path], capture_output=True, check=True,
                           env={**os.environ, "TZ": "Asia/Kolkata"}).stdout
    assert b"2026-11-22 06:14:11.144356+0530" in local
    report = json.loads(run(["analyze", "--format", "json", path]).stdout)
    assert report["connections"][0]["start_ns"] > 10**18


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_exports_read_back_with_the_schema_dtypes(tmp_path, fmt):
    """`analyze --format csv|parquet -o DIR`: one file (one Parquet dataset) a table, which
    read_table (and plain pandas) read back: the schema's columns and dtypes, the values of
    analyze()'s tables."""
    import pandas as pd

    from streamdissect.analysis import analyze
    from streamdissect.tables import schema
    from streamdissect.tables.export import read_table

    path = str(worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap")
    out = run(["analyze", "--format", fmt, "-o", str(tmp_path), path])
    assert out.returncode == 0, out.stderr
    written = out.stdout.decode().split()
    tables = list(schema.analysis_tables())
    assert len(written) == len(tables)
    expected = analyze(path)
    for table in tables:
        where = tmp_path / (f"{table}.csv" if fmt == "csv" else table)
        got = read_table(str(where), table)
        assert {n: str(d) for n, d in got.dtypes.items()} == schema.pandas_dtypes(table)
        pd.testing.assert_frame_equal(got.astype(object), getattr(expected, table).astype(object))
        plain = pd.read_csv(where) if fmt == "csv" else pd.read_parquet(where)
        assert list(plain.columns) == schema.column_names(table) and len(plain) == len(got)
    assert len(read_table(str(tmp_path / ("stalls.csv" if fmt == "csv" else "stalls")),
                          "stalls")) == 39  # fmt: skip


def test_file_formats_need_a_directory():
    out = run(["analyze", "--format", "csv", str(worsen.CAPTURES / "raw-errors-3.10.pcap")])
    assert out.returncode == 2 and b"-o DIR" in out.stderr and b"Traceback" not in out.stderr


def test_analyze_count_reads_the_first_n_frames():
    path = str(worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap")
    report = json.loads(run(["analyze", "-c", "20", "--format", "json", path]).stdout)
    assert sum(c["frames_c2s"] + c["frames_s2c"] for c in report["connections"]) == 20
    whole = json.loads(run(["analyze", "--format", "json", path]).stdout)
    assert sum(c["frames_c2s"] + c["frames_s2c"] for c in whole["connections"]) == 205


ROCKETMQ_CAPTURES = sorted((worsen.CAPTURES / "rocketmq").glob("*.pcap"))


def jsonl_rows(path, *options: str) -> list[dict]:
    out = run(["frames", "--format", "jsonl", "--port", "5552", "--port", "5553", *options,
               str(path)])  # fmt: skip
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_the_fields_a_path_may_go_under_are_those_that_hold_fields():
    """What -Y lets a dotted path go under (the Stream table's lists, maps and structs, what
    the RocketMQ protocol says of its fields, `message.`) against every jsonl line of the
    real captures, Stream and RocketMQ: a field seen holding a map or a list is one of
    them, and one of them is never seen holding a single value."""
    from streamdissect.cli.frames import filter_containers, filter_fields

    containers = filter_containers()
    seen: dict[str, set] = {}
    for path in [*CAPTURES, *ROCKETMQ_CAPTURES]:
        for row in jsonl_rows(path, "--payloads"):
            for name, value in row.items():
                seen.setdefault(name, set()).add(isinstance(value, (dict, list)))
    holding = {name for name, kinds in seen.items() if True in kinds}
    single = {name for name, kinds in seen.items() if False in kinds}
    assert holding <= containers <= filter_fields()
    # (a RocketMQ JSON body may be a map or a list: json_extra, body_json; a value may be null)
    assert not (single & containers) - {"body_json"}, single & containers
    assert {"properties", "chunk", "streams", "ext", "fields", "msg_ids", "messages"} <= holding


@pytest.mark.parametrize(("capture", "expression", "field"), [
    ("rocketmq/rmq-errors.pcap", "flag.response", "flag"),
    ("rocketmq/rmq-errors.pcap", "code.x == 1", "code"),
    ("rocketmq/rmq-java-json.pcap", 'opaque == 1 or remark.text contains "x"', "remark"),
    ("rstream-publish-confirm-3.10.pcap", 'command.name == "Deliver"', "command"),
    ("rstream-publish-confirm-3.10.pcap", "size.x", "size"),
])  # fmt: skip
def test_a_path_under_a_field_of_one_value_is_an_error(capture, expression, field):
    """A dotted path under a field that holds one value (a number, a text, true/false)
    names nothing: a filter error that says which field, as Wireshark says a field is
    unknown, not an empty output with exit 0."""
    out = run(["frames", "-Y", expression, str(worsen.CAPTURES / capture)])
    assert out.returncode == 2 and b"Traceback" not in out.stderr and not out.stdout
    assert f"'{field}' has no fields".encode() in out.stderr, out.stderr


@pytest.mark.parametrize(("capture", "expression", "wanted"), [
    ("rstream-publish-confirm-3.10.pcap", 'properties.product == "RabbitMQ"',
     lambda row: (row.get("properties") or {}).get("product") == "RabbitMQ"),
    ("rocketmq/rmq-errors.pcap", "fields.topic",
     lambda row: bool((row.get("fields") or {}).get("topic"))),
    ("rocketmq/rmq-java-json.pcap", 'ext.topic matches "^Sd"',
     lambda row: str((row.get("ext") or {}).get("topic", "")).startswith("Sd")),
])  # fmt: skip
def test_a_path_under_a_map_still_selects(capture, expression, wanted):
    """Paths under the fields that hold maps select what the same test over each jsonl line
    selects (and some frames, on these captures)."""
    path = worsen.CAPTURES / capture
    expected = [row for row in jsonl_rows(path) if wanted(row)]
    assert expected and jsonl_rows(path, "-Y", expression) == expected
