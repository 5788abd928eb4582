"""Captures taken with a snap length (tcpdump -s 96, -s 128): the bytes the capture did not
keep are said (anomaly not_captured, one a run of cut segments), never silent.

The expected figures come from the packets themselves (tests/worsen.py's own reader: each
segment's captured and wire payload lengths), never from the code under test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import worsen

from streamdissect.engine.dissect import Dissector
from streamdissect.engine.anomalies import Anomaly

SNAP_LENGTHS = (96, 128)
CORPUS = worsen.corpus_captures()


def cut_copy(path: Path, snap: int, folder: Path) -> tuple[Path, list]:
    linktype, packets = worsen.read_pcap(path)
    cut = worsen.snaplen(packets, snap)
    return worsen.write_pcap(folder / f"{path.stem}-s{snap}.pcap", linktype, cut), packets


def cut_per_direction(packets: list, snap: int) -> dict[tuple[int, int], tuple[int, int, int]]:
    """(sender port, receiver port) -> (runs, segments cut, payload bytes not kept) at
    `snap`; a run: data segments of the direction cut one after the other, ended by a whole
    one (the corpus has no reordering, so capture order is stream order)."""
    out: dict[tuple[int, int], tuple[int, int, int]] = {}
    in_run: dict[tuple[int, int], bool] = {}
    for _, data, _ in packets:
        t = worsen.tcp_of(data)
        if t is None or not t.payload_len:
            continue
        key = (t.flow[1], t.flow[3])
        kept = max(0, min(snap, len(data)) - t.payload_at)
        if kept < t.payload_len:
            runs, n, lost = out.get(key, (0, 0, 0))
            out[key] = (runs + (not in_run.get(key)), n + 1, lost + t.payload_len - kept)
        in_run[key] = kept < t.payload_len
    return out


def said_per_direction(anomalies: list[Anomaly]) -> dict[tuple[int, int], tuple[int, int, int]]:
    """The same, from the not_captured anomalies (segments read from their detail)."""
    out: dict[tuple[int, int], tuple[int, int, int]] = {}
    for a in anomalies:
        if a.kind != "not_captured":
            continue
        client, server = (int(side.rsplit(":", 1)[1]) for side in a.connection.split("#")[0]
                          .split("-"))  # fmt: skip
        key = (client, server) if a.direction == "c2s" else (server, client)
        segments = int(re.search(r"of (\d+) segments?", a.detail).group(1))
        runs, n, lost = out.get(key, (0, 0, 0))
        out[key] = (runs + 1, n + segments, lost + a.length)
    return out


@pytest.mark.parametrize("snap", SNAP_LENGTHS)
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_every_cut_byte_is_said_per_direction(path, snap, tmp_path):
    cut, packets = cut_copy(path, snap, tmp_path)
    expected = cut_per_direction(packets, snap)
    assert expected, "the snap length cut nothing: the test would prove nothing"
    for engine in ("stream", "bulk"):
        dissector = Dissector(engine=engine)
        anomalies = [ev for ev in dissector.run(str(cut)) if isinstance(ev, Anomaly)]
        assert said_per_direction(anomalies) == expected, engine


def test_a_long_run_of_cut_segments_is_one_anomaly(tmp_path):
    """A thousand cut segments of one direction, nothing whole between them: one row."""
    head = worsen.eth_tcp(40000, 5552, 1000, 0, 0x02, b"")
    packets = [(1, head, len(head))]
    seq = 1001
    for n in range(1000):
        frame = worsen.eth_tcp(40000, 5552, seq, 0, 0x18, b"\x00\x00\x00\x64" + b"x" * 100)
        packets.append((2 + n, frame[:96], len(frame)))
        seq += 104
    path = worsen.write_pcap(tmp_path / "run.pcap", worsen.ETHERNET, packets)
    for engine in ("stream", "bulk"):
        anomalies = [a for a in Dissector(engine=engine).run(str(path))
                     if isinstance(a, Anomaly) and a.kind == "not_captured"]  # fmt: skip
        assert len(anomalies) == 1, engine
        (a,) = anomalies
        # Ethernet 14 + IPv4 20 + TCP 20: 42 of each segment's 104 payload bytes kept
        assert (a.stream_offset, a.length) == (42, 1000 * (104 - 42)), engine
        assert "1000 segments" in a.detail


def test_analyze_and_jsonl_show_it(tmp_path, capsys):
    from streamdissect.cli import main

    cut, _ = cut_copy(worsen.CAPTURES / "rstream-consume-credit-3.10.pcap", 96, tmp_path)
    assert main(["analyze", str(cut)]) in (0, None)
    text = capsys.readouterr().out
    anomalies = text.split("Anomalies\n=========\n", 1)[1]
    assert "(none)" not in anomalies.split("\n\n")[0] and "not_captured" in anomalies
    assert main(["frames", "--format", "jsonl", str(cut)]) in (0, None)
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    said = [r for r in rows if r["command"] == "Anomaly" and r["kind"] == "not_captured"]
    assert said and all(r["length"] > 0 and r["stream_offset"] >= 0 for r in said)
