"""RocketMQ's connections table (`rocketmq_connections`): each connection's frames and calls
as the clients traced them (captures/rocketmq/*.truth.json), a connection ended by its
socket's FIN `closed` (RocketMQ has no close command: the Stream's "TCP closed without
Close" is no RocketMQ notion), one still open at the capture's end `open`; the Stream's
connections table lists the Stream's connections only; the HTML report counts each
protocol's frames."""

from __future__ import annotations

import collections
import json

import worsen
from reportlib import make_report
from rocketmq_support import CAPTURES, DIRECTIONS, both_protocols, client_port
from test_rocketmq_analysis import FULLY_TRACED, traced_frames

from streamdissect.analysis.driver import analyze
from streamdissect.protocols.rocketmq import spec
from streamdissect.tables import schema

STREAM_CAPTURE = worsen.CAPTURES / "raw-errors-3.10.pcap"


COUNTED = ("frames_c2s", "frames_s2c", "requests_c2s", "requests_s2c", "oneway", "responses")


def traced_counts(name: str) -> collections.Counter:
    """(client port, column) -> what the clients traced: frames each way, requests each way
    (oneway ones apart), responses."""
    counted: collections.Counter = collections.Counter()
    for f in traced_frames(name):
        direction, response = DIRECTIONS[f["dir"]]
        counted[f["clientPort"], "frames_" + direction] += 1
        kind = ("responses" if response else "oneway" if f["flag"] & spec.ONEWAY_FLAG
                else "requests_" + direction)  # fmt: skip
        counted[f["clientPort"], kind] += 1
    return counted


def test_each_traced_connection_has_its_frames_and_calls():
    for name in FULLY_TRACED:
        rows = {client_port(r["connection"]): r
                for r in analyze(str(CAPTURES / f"{name}.pcap")).rows("rocketmq_connections")}
        assert set(rows) == {f["clientPort"] for f in traced_frames(name)}, name
        counted = traced_counts(name)
        for port, row in rows.items():
            for column in COUNTED:
                assert row[column] == counted[port, column], (name, port, column)
            # every client closed its sockets before the recording stopped
            assert (row["tcp_end"], row["status"]) == ("fin", "closed"), (name, port)
            assert row["start_ns"] <= row["first_command_ns"] <= row["last_command_ns"] \
                <= row["end_ns"]  # fmt: skip
            assert row["client"] == row["connection"].split("-")[0]
            assert row["server"].endswith((":9876", ":10911"))


def test_a_connection_still_open_at_the_end_is_open(tmp_path):
    """The capture cut before any FIN: every connection is open, not closed."""
    linktype, packets = worsen.read_pcap(CAPTURES / "rmq-java-json.pcap")
    segments = [worsen.tcp_of(data) for _, data, _n in packets]
    first_fin = next(k for k, tcp in enumerate(segments) if tcp and tcp.flags & 0x05)
    path = worsen.write_pcap(tmp_path / "cut.pcap", linktype, packets[:first_fin])
    rows = analyze(str(path)).rows("rocketmq_connections")
    assert rows and {(r["tcp_end"], r["status"]) for r in rows} == {("open", "open")}


def test_the_table_converts_to_its_schema():
    frame = analyze(str(CAPTURES / "rmq-long-poll.pcap")).frame("rocketmq_connections")
    assert list(frame.columns) == schema.column_names("rocketmq_connections")
    assert len(frame) == 4


def test_a_capture_of_both_lists_each_protocols_connections_apart(tmp_path):
    path = both_protocols(tmp_path / "both.pcap", STREAM_CAPTURE, CAPTURES / "rmq-errors.pcap")
    both = analyze(str(path))
    stream_alone = analyze(str(STREAM_CAPTURE)).rows("connections")
    rocketmq_alone = analyze(str(CAPTURES / "rmq-errors.pcap")).rows("rocketmq_connections")
    assert [r["connection"] for r in both.rows("connections")] == \
        [r["connection"] for r in stream_alone]  # fmt: skip
    assert [r["closed_by"] for r in both.rows("connections")] == \
        [r["closed_by"] for r in stream_alone]  # fmt: skip
    assert [r["connection"] for r in both.rows("rocketmq_connections")] == \
        [r["connection"] for r in rocketmq_alone]  # fmt: skip
    assert not analyze(str(CAPTURES / "rmq-errors.pcap")).rows("connections")


def test_the_analyze_report_has_a_rocketmq_connections_section(tmp_path):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "streamdissect", "analyze", "--format", "json",
                          str(CAPTURES / "rmq-errors.pcap")], capture_output=True, text=True,
                         check=True)  # fmt: skip
    report = json.loads(run.stdout)
    assert report["connections"] == []
    assert {r["status"] for r in report["rocketmq_connections"]} == {"closed"}
    text = subprocess.run([sys.executable, "-m", "streamdissect", "analyze",
                           str(CAPTURES / "rmq-errors.pcap")], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
    assert "RocketMQ connections" in text and "TCP closed without Close" not in text


def stream_frames(truth: dict) -> int:
    return sum(n for c in truth["connections"] for side in c["frames"].values()
               for n in side.values())  # fmt: skip


def test_the_html_header_counts_each_protocols_frames(tmp_path):
    path = both_protocols(tmp_path / "both.pcap", STREAM_CAPTURE, CAPTURES / "rmq-errors.pcap")
    page, _ = make_report(tmp_path, str(path))
    stream = stream_frames(json.loads(STREAM_CAPTURE.with_suffix(".truth.json").read_text()))
    rocketmq = len(traced_frames("rmq-errors"))
    assert f"{stream:,} RabbitMQ Stream frames · {rocketmq:,} RocketMQ remoting frames" in page.text
