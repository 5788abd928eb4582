"""What needs a look (streamdissect.report.summary): each kind of finding read off tables made
for it, pointing at the section that shows it; none when nothing stands out."""

from __future__ import annotations

from streamdissect.report import findings
from streamdissect.report.data import ReportData
from streamdissect.tables import schema
from streamdissect.tables.convert import dataframe

C = "127.0.0.1:40000-127.0.0.1:5552"
T = 1_795_300_000 * 10**9


def data(**rows) -> ReportData:
    """Tables of the given rows (dicts), every other table empty."""
    tables = {name: dataframe(name, rows.get(name, [])) for name in schema.analysis_tables()}
    return ReportData(tables, "made")


def connection(**values) -> dict:
    return {"connection": C, "start_ns": T, "end_ns": T + 10**9, "frames_c2s": 10,
            "frames_s2c": 10, **values}  # fmt: skip


def test_each_finding_points_at_its_section():
    found = findings(data(
        connections=[connection(missed_heartbeat_gaps=2, closed_by="server",
                                close_reason="unknown frame")],
        stalls=[{"connection": C, "subscription_id": 0, "start_ns": T, "end_ns": T + 5 * 10**6,
                 "duration_ms": 5.0, "ended_by": "credit", "broker_had_more": True}],
        credit=[{"connection": C, "subscription_id": 0, "credit_errors": 1}],
        confirms=[{"connection": C, "publisher_id": 1, "published": 10, "confirmed": 6,
                   "errored": 2, "unconfirmed": 2,
                   "errors_by_code": '{"PUBLISHER_DOES_NOT_EXIST": 2}'}],
        errors=[{"command": "PublishError", "code": 18, "code_name": "PUBLISHER_DOES_NOT_EXIST",
                 "count": 2}],
        latency=[{"command": "Metadata", "calls": 3, "answered": 2, "open_requests": 1}],
        anomalies=[{"ts_ns": T, "connection": C, "kind": "gap"}] * 3,
        deliveries=[{"ts_ns": T, "connection": C, "subscription_id": 0, "crc_ok": False}],
    ))  # fmt: skip
    by_topic = {f.topic: f for f in found}
    expected = {"Credit stalls": "credit", "Credit errors": "errors",
                "Errored publishes": "confirms", "Unconfirmed publishes": "confirms",
                "Error codes": "errors", "Requests never answered": "latency",
                "Capture anomalies": "anomalies", "Missed heartbeats": "connections",
                "Closed by the broker": "connections", "Chunk CRC failures": "consumers"}  # fmt: skip
    assert {t: f.anchor for t, f in by_topic.items()} == expected
    assert "2 silences" in by_topic["Missed heartbeats"].text
    assert "PUBLISHER_DOES_NOT_EXIST ×2" in by_topic["Errored publishes"].text
    assert "Metadata ×1" in by_topic["Requests never answered"].text
    assert "gap ×3" in by_topic["Capture anomalies"].text
    assert "unknown frame" in by_topic["Closed by the broker"].text
    assert "broker had more to send in 1" in by_topic["Credit stalls"].text
    levels = [f.level for f in found]
    assert levels == sorted(levels, key=["problem", "look", "note", "fine"].index)


def test_nothing_stands_out():
    (finding,) = findings(data(connections=[connection(missed_heartbeat_gaps=0,
                                                       closed_by="client")]))  # fmt: skip
    assert finding.topic == "Nothing stands out" and finding.level == "fine"


def test_no_stream_traffic_and_damaged_frames_only():
    (none,) = findings(data())
    assert none.topic == "No Stream traffic"
    (damaged,) = findings(data(connections=[connection(frames_c2s=1, frames_s2c=0)],
                               anomalies=[{"ts_ns": T, "connection": C, "kind": "malformed"}]))
    assert damaged.topic == "No readable Stream traffic" and "malformed ×1" in damaged.text
