"""`streamdissect compare` of the shipped 4.0 captures against the real brokers: against the
4.0 broker they came from, no protocol difference (what differs is state: their streams are
gone); against 3.10, the real differences: the server version, the command versions (Deliver
v2 needs ExchangeCommandVersions, which 3.10 lacks) and what 3.10 refuses
(ExchangeCommandVersions and StreamStats arrived in 3.11: docs/protocol.md §2), and its
Route/Partitions answers without the response bit. Writes only with --allow-writes, and
never on the capture's streams."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import worsen
from probe_support import CA, no_traceback, run, streams, uri

CAPTURES_4_0 = [path for path in worsen.corpus_captures() if path.stem.endswith("-4.0")]
DELIVER_V2 = worsen.CAPTURES / "raw-deliver-v2-4.0.pcap"
RBFLY = worsen.CAPTURES / "rbfly-filter-4.0.pcap"


def compare(capture: Path, *args: str) -> tuple[int, dict]:
    result = run("compare", str(capture), *args, "--format", "json")
    assert result.returncode in (0, 1), result.stderr
    no_traceback(result)
    return result.returncode, json.loads(result.stdout)


def differences(report: dict, kind: str) -> set[tuple]:
    return {(d["command"], d["field"], json.dumps(d["captured"]), json.dumps(d["live"]))
            for d in report["differences"] if d["kind"] == kind}  # fmt: skip


def test_there_are_4_0_captures():
    assert len(CAPTURES_4_0) >= 6


@pytest.mark.parametrize("capture", CAPTURES_4_0, ids=lambda p: p.stem)
def test_against_the_broker_it_came_from_no_protocol_difference(capture):
    code, report = compare(capture, uri(5553))
    assert code == 0
    assert report["summary"]["protocol"] == 0, differences(report, "protocol")
    assert report["summary"]["server"] == 0, differences(report, "server")
    assert report["server"]["captured"] == report["server"]["live"]
    assert report["server"]["live"]["version"].startswith("4.0.")
    assert report["tune"]["captured"] == [report["tune"]["live"]]
    assert report["capabilities"]["refused_live"] == []
    assert not [c for c in report["capabilities"]["used_in_capture"] if c["ok"] is False]
    # the capture's streams were deleted when it was made: state, not protocol
    assert report["summary"]["state"] > 0
    assert {d["live"] for d in report["differences"]} & {"STREAM_DOES_NOT_EXIST"}
    replayed = {r["command"] for r in report["requests"]}
    assert {"PeerProperties", "SaslHandshake"} <= replayed


def test_against_3_10_the_real_differences():
    code, report = compare(DELIVER_V2, uri(5552))
    assert code == 1
    server = differences(report, "server")
    assert ("PeerProperties", "properties.version", '"4.0.5"', '"3.10.8"') in server
    protocol = differences(report, "protocol")
    refused = '"refused (the broker closes the connection on it)"'
    assert ("ExchangeCommandVersions", "response", '"OK"', refused) in protocol
    assert ("StreamStats", "response", '"OK"', refused) in protocol
    assert ("Deliver", "versions", '"v2"', '"1 only (no ExchangeCommandVersions)"') in protocol
    assert ("Route", "key", '"0x8018"',
            '"answered with key 0x0018, without the response bit"') in protocol  # fmt: skip
    assert ("Partitions", "key", '"0x8019"',
            '"answered with key 0x0019, without the response bit"') in protocol  # fmt: skip
    assert ("SaslHandshake", "mechanisms", '["AMQPLAIN", "ANONYMOUS", "PLAIN"]',
            '["AMQPLAIN", "PLAIN"]') in protocol  # (ANONYMOUS came in 4.0)  # fmt: skip
    caps = report["capabilities"]
    assert caps["live_command_versions"] == "not supported"
    assert caps["refused_live"] == ["ExchangeCommandVersions", "StreamStats"]
    captured_offer = {r["command"]: r["max_version"] for r in caps["captured_command_versions"]}
    assert captured_offer["Publish"] == 2
    assert report["server"]["captured"]["version"] == "4.0.5"
    assert report["server"]["live"]["version"] == "3.10.8"
    assert report["connections"] == 3  # (reconnected after each refusal)


def test_json_keys():
    _, report = compare(DELIVER_V2, uri(5552))
    for key in ("differences", "capabilities", "latency", "summary", "server", "tune"):
        assert key in report
    for row in report["differences"]:
        assert {"command", "field", "captured", "live", "kind", "count"} <= set(row)
    rows = {r["command"]: r for r in report["latency"]}
    for row in rows.values():
        assert {"command", "captured_p50_ms", "live_p50_ms"} <= set(row)
    assert rows["QueryOffset"]["captured_samples"] == rows["QueryOffset"]["live_samples"] == 2
    assert rows["QueryOffset"]["captured_p50_ms"] > 0 and rows["QueryOffset"]["live_p50_ms"] > 0
    assert rows["StreamStats"]["live_p50_ms"] is None  # (refused)


def test_text_report():
    result = run("compare", str(DELIVER_V2), uri(5552))
    assert result.returncode == 1
    out = result.stdout
    assert "server: captured RabbitMQ 4.0.5, live RabbitMQ 3.10.8" in out
    assert "refused by the live broker: ExchangeCommandVersions, StreamStats" in out
    assert "(the live broker has no ExchangeCommandVersions)" in out


def test_over_tls_against_3_10():
    code, report = compare(CAPTURES_4_0[0], uri(5551, tls=True), "--cafile", str(CA))
    assert code == 1
    assert report["server"]["live"]["version"] == "3.10.8"
    assert report["target"].startswith("rabbitmq-stream+tls://guest@127.0.0.1:5551")


def test_without_writes_no_stream_is_made():
    before = streams("4.0")
    compare(RBFLY, uri(5553))
    after = streams("4.0")
    assert not {s for s in after - before if s.startswith(("streamdissect-probe", "sd-rbfly"))}


def test_allow_writes_replays_on_a_temporary_stream_only():
    result = run("compare", str(RBFLY), uri(5553), "--allow-writes", "--messages", "5",
                 "--format", "json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    writes = report["writes"]
    assert writes["stream"].startswith("streamdissect-probe-")
    assert (writes["confirmed"], writes["delivered"], writes["deleted"]) == (5, 5, True)
    [row] = [r for r in report["latency"] if r["command"] == "Publish→PublishConfirm"]
    truth = json.loads(RBFLY.with_suffix(".truth.json").read_text())  # (the client's count)
    assert row["captured_samples"] == sum(c["confirmed"] for c in truth["connections"])
    assert row["live_samples"] == 5
    assert row["captured_p50_ms"] > 0 and row["live_p50_ms"] > 0
    left = streams("4.0")
    assert writes["stream"] not in left
    assert "sd-rbfly-75a83ab7" not in left  # (the capture's stream was not made again)


def test_bad_capture_and_closed_port():
    result = run("compare", "/nonexistent.pcap", uri(5553))
    assert result.returncode == 2 and "error" in result.stderr
    no_traceback(result)
    result = run("compare", str(DELIVER_V2), uri(1), "--timeout", "2")
    assert result.returncode == 3
    assert "error: connect: connection refused by 127.0.0.1:1" in result.stderr
    no_traceback(result)
