"""A real client opening 8 connections at once to the 4.0 broker (rstream, one Producer per
asyncio task), recorded with tcpdump on lo: every connection starts with PeerProperties
corr id 1, 2, ... and their handshakes interleave. The plugin pairs each response with the
request of its own TCP connection, in tshark's two-pass (-2) and one-pass modes, pair by pair
as `analyze`'s requests table pairs them (the reference, held to truth files elsewhere)."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import worsen
from conftest import record_on_lo
from test_wireshark import latency_from_trees, streamdissect
from tshark_pdml import pdus

from streamdissect.analysis import analyze
from streamdissect.wireshark import generate

PORT, CONNECTIONS = 5553, 8
RECORDINGS = 3  # recordings tried for one whose handshakes interleave
# The broker's port named, as its users would: a client's ephemeral port that Wireshark gives
# to another dissector (34980 once in CI) hides the connection from the heuristic
# (test_wireshark_table.test_a_client_port_wireshark_gives_to_another_dissector).
PORTS_PREFERENCE = ("-o", f"rabbitmq_stream.ports:5552,{PORT}")
CLIENT = """
import asyncio, sys, uuid
from rstream import Producer

TOKEN, N, PORT = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

async def one(k, stream, go):
    async with Producer("127.0.0.1", PORT, username="guest", password="guest",
                        connection_name=f"{TOKEN}-{k}") as producer:
        await go.wait()
        await producer.send_wait(stream, b"hello %d" % k)

async def main():
    stream = "sd-concurrent-" + uuid.uuid4().hex[:8]
    async with Producer("127.0.0.1", PORT, username="guest", password="guest",
                        connection_name=f"{TOKEN}-admin") as admin:
        await admin.create_stream(stream)
        go = asyncio.Event()
        tasks = [asyncio.create_task(one(k, stream, go)) for k in range(N)]  # opened at once
        await asyncio.sleep(0.5)
        go.set()
        await asyncio.gather(*tasks)
        await admin.delete_stream(stream)

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("wireshark") / "rabbitmq_stream.lua"
    path.write_text(generate())
    return path


@pytest.fixture(scope="module")
def concurrent_capture(tmp_path_factory) -> Path:
    """The run's own connections (the broker may serve other runs too). On a loaded machine
    the client's tasks may each finish their handshake before the next one starts: then the
    capture is recorded again (at most RECORDINGS times), as what it is about is their
    interleaving, which the test below still requires."""
    folder = tmp_path_factory.mktemp("concurrent")
    for attempt in range(RECORDINGS):
        capture = record_own_connections(folder / f"raw{attempt}.pcap", folder / f"run{attempt}.pcap")
        if interleavings(frames_of(capture)):
            break
    return capture


def record_own_connections(raw: Path, out: Path) -> Path:
    token = f"sd-conc-{uuid.uuid4().hex[:8]}"
    record_on_lo(raw, CLIENT, token, str(CONNECTIONS), str(PORT), port=PORT, timeout=120)
    linktype, packets = worsen.read_pcap(raw)
    ours = set()
    for _, data, _ in packets:
        tcp = worsen.tcp_of(data)
        if tcp and tcp.flow[3] == PORT and token.encode() in data[tcp.payload_at:]:
            ours.add(tcp.flow[1])
    kept = [p for p in packets if (t := worsen.tcp_of(p[1])) and {t.flow[1], t.flow[3]} & ours]
    return worsen.write_pcap(out, linktype, kept)


def interleavings(rows: list[dict]) -> int:
    """PeerProperties requests sent while another connection's waited for its answer."""
    waiting, overlaps = set(), 0
    for row in rows:
        if row["command"] == "PeerProperties":
            if row["direction"] == "c2s":
                overlaps += bool(waiting)
                waiting.add(row["connection"])
            else:
                waiting.discard(row["connection"])
    return overlaps


def reference_pairs(capture: Path) -> Counter:
    answered = analyze(str(capture)).requests.query("status == 'answered'")
    return Counter(
        (r.connection, r.direction, r.command, None if pd.isna(r.correlation_id)
         else int(r.correlation_id), int(r.response_ts_ns) - int(r.request_ts_ns))
        for r in answered.itertuples()
    )  # fmt: skip


def frames_of(capture: Path) -> list[dict]:
    return [r for r in (json.loads(line) for line in
                        streamdissect("frames", "--format", "jsonl", str(capture)).splitlines())
            if r["command"] != "Anomaly"]  # fmt: skip


def test_the_handshakes_really_interleave(concurrent_capture):
    """The capture is what the test is about: at least 8 connections (rstream's Producer may
    open a second one to the stream's leader), and a PeerProperties request of one connection
    sent while another's (the same corr id) waits for its answer."""
    rows = frames_of(concurrent_capture)
    connections = {r["connection"] for r in rows}
    assert len(connections) >= CONNECTIONS
    assert interleavings(rows) >= 1


@pytest.mark.parametrize("two_pass", [True, False], ids=["two-pass", "one-pass"])
def test_each_response_is_paired_within_its_connection(plugin, concurrent_capture, two_pass):
    rows = frames_of(concurrent_capture)
    found = pdus(plugin, concurrent_capture, *PORTS_PREFERENCE, two_pass=two_pass)
    stats = latency_from_trees(rows, found)
    got = Counter((c, d, command, corr, ns) for command, s in stats.items()
                  for c, d, corr, ns in s["pairs"])  # fmt: skip
    expected = reference_pairs(concurrent_capture)
    peer = [k for k in expected if k[2] == "PeerProperties"]
    # every connection whose PeerProperties the capture holds answered (rstream may open one
    # more as the client ends, its answer not captured: CI recorded one) is a pair of corr 1
    answered = {r["connection"] for r in rows
                if r["command"] == "PeerProperties" and r["direction"] == "s2c"}  # fmt: skip
    assert len(answered) >= CONNECTIONS
    assert {k[0] for k in peer} == answered and len(peer) == len(answered)
    assert {k[3] for k in peer} == {1}
    assert got == expected
    assert sum(s["orphan_responses"] for s in stats.values()) == 0
    if two_pass:  # (one pass cannot know, at a request, the response still to come)
        assert sum(s["answered"] for s in stats.values()) == sum(expected.values())
