"""`analyze` figures against the client-side ground truth of every corpus capture."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import worsen

from streamdissect.analysis import analyze

CAPTURES = worsen.CAPTURES
TRUTHS = worsen.corpus_truths()


def test_corpus_is_present():
    assert len(TRUTHS) >= 10, "captures/ lost its ground truth files"


def load(truth_path: Path):
    truth = json.loads(truth_path.read_text())
    return truth, analyze(str(CAPTURES / truth["capture"]), ports=(5552, 5553))


def conn_id(analysis, client_port: int) -> str:
    ids = [c for c in analysis.connections["connection"] if f":{client_port}-" in c]
    assert len(ids) == 1, (client_port, list(analysis.connections["connection"]))
    return ids[0]


@pytest.fixture(scope="module", params=TRUTHS, ids=[t.name.split(".truth")[0] for t in TRUTHS])
def case(request):
    return load(request.param)


def test_publish_confirm_counts(case):
    truth, a = case
    for tc in truth["connections"]:
        cid = conn_id(a, tc["client_port"])
        rows = a.confirms[a.confirms.connection == cid]
        assert rows["published"].sum() == tc.get("publishing_ids", 0)
        assert rows["records_published"].sum() == tc.get("published", 0)
        assert rows["confirmed"].sum() == tc.get("confirmed", 0)
        errored = Counter()
        pairs = a.publishes[(a.publishes.connection == cid) & (a.publishes.outcome == "errored")]
        for code in pairs["code"]:
            errored[f"0x{code:02x}"] += 1
        assert dict(errored) == tc.get("errored", {})
        expected_unconfirmed = tc.get("publishing_ids", 0) - tc.get("confirmed", 0) - sum(
            tc.get("errored", {}).values())
        assert rows["unconfirmed"].sum() == expected_unconfirmed
        answered = a.publishes[(a.publishes.connection == cid)
                               & (a.publishes.outcome == "confirmed")]
        assert (answered["lag_ms"] >= 0).all()


def test_delivery_and_credit_counts(case):
    truth, a = case
    for tc in truth["connections"]:
        cid = conn_id(a, tc["client_port"])
        rows = a.credit[a.credit.connection == cid]
        assert rows["chunks_delivered"].sum() == tc.get("delivered_chunks", 0)
        assert rows["records_delivered"].sum() == tc.get("delivered_records", 0)
        assert rows["credits_granted"].sum() == tc.get("credits_granted", 0)
        known = rows.dropna(subset=["initial_credit"])
        initial = {str(int(r.subscription_id)): int(r.initial_credit) for r in known.itertuples()}
        assert initial == tc.get("initial_credit", {})
        lag = a.deliveries[a.deliveries.connection == cid]
        assert len(lag) == tc.get("delivered_chunks", 0)


def test_every_error_code(case):
    truth, a = case
    expected = Counter()
    for tc in truth["connections"]:
        for field in ("codes", "codes_c2s"):
            for code, n in tc.get(field, {}).items():
                if code != "0x01":
                    expected[code] += n
    seen = Counter()
    for row in a.errors.itertuples():
        seen[f"0x{row.code:02x}"] += row.count
    assert seen == expected


def test_close_and_heartbeats(case):
    truth, a = case
    for tc in truth["connections"]:
        cid = conn_id(a, tc["client_port"])
        row = a.connections.set_index("connection").loc[cid]
        closing = tc.get("closing_codes", {})
        if tc.get("client_close") == "protocol":
            assert row["closed_by"] == "client"
            assert row["close_code"] == closing["c2s"][0]
        elif "s2c" in closing:
            assert row["closed_by"] == "server"
            assert row["close_code"] == closing["s2c"][0]
        elif tc.get("client_close") == "tcp":
            assert row["closed_by"] == "TCP closed without Close"
        assert row["heartbeats_c2s"] == tc["frames"]["c2s"].get("0x0017 v1", 0)
        assert row["heartbeats_s2c"] == tc["frames"]["s2c"].get("0x0017 v1", 0)
        if "0x8015 v1" in tc["frames"]["s2c"]:  # opened: handshake measured
            assert row["handshake_ms"] > 0
            assert row["vhost"] == "/" and row["user"] == "guest"


def test_slow_consumer_stalls_coincide_with_its_sleeps():
    truth, a = load(CAPTURES / "rstream-slow-consumer-3.10.truth.json")
    sleeper = next(tc for tc in truth["connections"] if "sleeps_ns" in tc)
    cid = conn_id(a, sleeper["client_port"])
    stalls = a.stalls[(a.stalls.connection == cid) & (a.stalls.ended_by == "credit")]
    sleeps = sleeper["sleeps_ns"]
    assert len(stalls) == len(sleeps) > 10
    for (start, end), stall in zip(sleeps, stalls.itertuples()):
        # credit ran out before the client went to sleep; the Credit left after it woke
        assert stall.start_ns <= start and end <= stall.end_ns
        assert stall.duration_ms < (end - start) / 1e6 + 100
    assert stalls["broker_had_more"].all()


def test_analyze_cli_json_has_the_documented_keys():
    path = CAPTURES / "raw-errors-3.10.pcap"
    out = subprocess.run([sys.executable, "-m", "streamdissect.cli", "analyze", "--format",
                          "json", str(path)], capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    for key in ("connections", "latency", "confirms", "credit", "consumer_lag", "throughput",
                "errors", "anomalies"):
        assert key in doc
    assert {"connection", "client", "server", "start_ns", "end_ns", "handshake_ms", "user",
            "vhost", "frame_max", "heartbeat", "close_code", "closed_by"} <= set(
        doc["connections"][0])
    assert {"command", "calls", "answered", "open_requests", "orphan_responses", "min_ms",
            "p50_ms", "p75_ms", "p95_ms", "p99_ms", "max_ms"} <= set(doc["latency"][0])
    assert {"connection", "publisher_id", "published", "confirmed", "errored", "unconfirmed",
            "p50_ms", "p95_ms", "p99_ms", "max_ms"} <= set(doc["confirms"][0])
    assert {"connection", "subscription_id", "initial_credit", "credits_granted",
            "chunks_delivered", "records_delivered", "stalls", "stalled_ms_total"} <= set(
        doc["credit"][0])
    assert {"command", "code", "code_name", "count"} <= set(doc["errors"][0])
    errors = {(e["command"], e["code"]) for e in doc["errors"]}
    assert ("PublishError", 0x12) in errors
    assert ("Create", 0x05) in errors
    assert ("Credit", 0x04) in errors


def test_analyze_cli_unreadable_input_is_a_clear_error(tmp_path):
    bogus = tmp_path / "not-a-capture.pcap"
    bogus.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n")
    out = subprocess.run([sys.executable, "-m", "streamdissect.cli", "analyze", str(bogus)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 2
    assert "not a pcap or pcapng capture" in out.stderr
    assert "Traceback" not in out.stderr


def test_analyze_json_carries_peer_properties_as_objects():
    path = CAPTURES / "rbfly-publish-consume-3.10.pcap"
    out = subprocess.run([sys.executable, "-m", "streamdissect", "analyze", "--format", "json",
                          str(path)], capture_output=True, text=True, check=True)
    props = json.loads(out.stdout)["peer_properties"]
    assert len(props) == 1
    assert props[0]["server"]["product"] == "RabbitMQ"
    assert props[0]["server"]["version"].startswith("3.10.")
    assert props[0]["client"]  # rbfly announces itself
