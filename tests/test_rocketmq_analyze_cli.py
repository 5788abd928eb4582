"""`streamdissect analyze` on RocketMQ captures: its RocketMQ sections in text and JSON,
the CSV/Parquet export of its tables, and a capture of both protocols whose Stream sections
are the Stream capture's own. Expected values come from the captures' truth files (the
clients' traces and results), never from streamdissect; a Stream capture's report without
RocketMQ sections is held byte for byte by test_columns_report and test_analysis_*."""

from __future__ import annotations

import json
import subprocess
import sys

import worsen
from rocketmq_support import CAPTURES, truth

from streamdissect.tables import schema
from streamdissect.tables.export import read_table

CLI = [sys.executable, "-m", "streamdissect"]
STREAM_CAPTURE = worsen.CAPTURES / "rstream-publish-confirm-3.10.pcap"


def analyze(*args: str) -> str:
    done = subprocess.run(
        [*CLI, "analyze", *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def sections(text: str) -> dict[str, str]:
    """The text report's sections by title."""
    out = {}
    for part in text.split("\n\n"):
        title, _, body = part.partition("\n")
        out[title] = body
    return out


def test_text_report_has_a_section_per_rocketmq_table_with_rows():
    shown = sections(analyze(str(CAPTURES / "rmq-errors.pcap")))
    assert {"RocketMQ request latency (ms)", "RocketMQ errors", "RocketMQ sends",
            "RocketMQ pulls", "RocketMQ consumer offsets and lag"} <= shown.keys()  # fmt: skip
    # no heartbeat or broker registration in this capture: no section for them
    assert not {"RocketMQ clients", "RocketMQ broker registrations"} & shown.keys()
    errors = shown["RocketMQ errors"]
    raw = next(c["report"] for c in truth("rmq-errors")["clients"] if c["kind"] == "raw")
    got = [f for f in raw["frames"] if f["dir"] == "s->c response" and f["code"]]
    assert got
    for response in got:  # each error's remark, its first line
        assert response["remark"].splitlines()[0].strip() in errors


STREAM_TITLES = {"Connections", "Request latency (ms)", "Publish confirms", "Credit",
                 "Credit stalls", "Consumer lag (per subscription)",
                 "Throughput (per second of capture)", "Errors"}  # fmt: skip


def test_a_rocketmq_capture_is_not_given_the_stream_sections():
    shown = sections(analyze(str(CAPTURES / "rmq-long-poll.pcap")))
    assert not STREAM_TITLES & shown.keys()
    assert "PULL_MESSAGE" in shown["RocketMQ request latency (ms)"]
    assert "Anomalies" in shown  # (every protocol's)


def test_a_capture_of_no_protocol_says_none_under_the_stream_sections(tmp_path):
    link, _ = worsen.read_pcap(STREAM_CAPTURE)
    empty = worsen.write_pcap(tmp_path / "empty.pcap", link, [])
    shown = sections(analyze(str(empty)))
    assert STREAM_TITLES <= shown.keys()
    assert all(shown[title].endswith("(none)") for title in STREAM_TITLES)


def test_json_report_carries_the_rocketmq_tables():
    report = json.loads(analyze("--format", "json", str(CAPTURES / "rmq-java-rocketmq-batch.pcap")))
    producer = next(c["report"] for c in truth("rmq-java-rocketmq-batch")["clients"]
                    if c["report"].get("role") == "producer")  # fmt: skip
    sent = [i for s in producer["sends"] for i in s["msgId"].split(",")]
    assert [r["msg_id"] for r in report["rocketmq_sends"]] == sent
    assert list(report["rocketmq_sends"][0]) == schema.column_names("rocketmq_sends")
    assert report["latency"] == [] and report["errors"] == []  # (the Stream's: none)
    assert list(report)[-1] == "anomalies"
    assert "rocketmq_broker_registrations" not in report  # (no rows: no key)


def test_export_writes_the_rocketmq_tables(tmp_path):
    written = analyze("--format", "csv", "-o", str(tmp_path), str(CAPTURES / "rmq-long-poll.pcap"))
    names = {line.rsplit("/", 1)[1][: -len(".csv")] for line in written.splitlines()}
    assert names == {*schema.analysis_tables(), *schema.analysis_tables("rocketmq")}
    pulls = read_table(str(tmp_path / "rocketmq_pulls.csv"), "rocketmq_pulls")
    consumer = next(c["report"] for c in truth("rmq-long-poll")["clients"]
                    if c["report"]["role"] == "consumer")  # fmt: skip
    asked = [f for f in consumer["frames"] if f["dir"] == "c->s request" and f["code"] == 11]
    assert list(pulls["opaque"]) == [f["opaque"] for f in asked]
    assert list(pulls["queue_offset"]) == [f["header"]["queueOffset"] for f in asked]


def test_export_of_a_stream_capture_has_no_rocketmq_table(tmp_path):
    written = analyze("--format", "csv", "-o", str(tmp_path), str(STREAM_CAPTURE))
    assert "rocketmq" not in written


def test_a_capture_of_both_protocols_reports_each_as_alone(tmp_path):
    link, stream_packets = worsen.read_pcap(STREAM_CAPTURE)
    _, rmq = worsen.read_pcap(CAPTURES / "rmq-errors.pcap")
    mixed = worsen.write_pcap(tmp_path / "mixed.pcap", link,
                              sorted(stream_packets + rmq, key=lambda p: p[0]))  # fmt: skip
    both = sections(analyze(str(mixed)))
    stream_alone = sections(analyze(str(STREAM_CAPTURE)))
    rmq_alone = sections(analyze(str(CAPTURES / "rmq-errors.pcap")))
    for title, body in stream_alone.items():
        if title != "Connections":
            assert both[title] == body, title  # (the connections are both captures')
    for title, body in rmq_alone.items():
        if title.startswith("RocketMQ"):
            assert both[title] == body, title
