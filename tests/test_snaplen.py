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

from streamdissect.analysis import analyze
from streamdissect.engine.anomalies import Anomaly
from streamdissect.engine.dissect import Dissector

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
    # its Publish frames (1,633 bytes) and PublishConfirms are cut: said where it counts them
    confirms = text.split("Publish confirms\n================\n", 1)[1].split("\n\n")[0]
    assert "cut_frames" in confirms.splitlines()[0] and "lower bounds" in confirms
    # its Subscribe (stream name, offset, credit: 41 bytes) is cut before the credit: the
    # stall count (0) is no fact, and the Credit section says so
    credit = text.split("Credit\n======\n", 1)[1].split("\n\n")[0]
    assert "cut_frames" in credit.splitlines()[0] and "lower bounds" in credit
    assert main(["frames", "--format", "jsonl", str(cut)]) in (0, None)
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    said = [r for r in rows if r["command"] == "Anomaly" and r["kind"] == "not_captured"]
    assert said and all(r["length"] > 0 and r["stream_offset"] >= 0 for r in said)


# truth figure -> (analysis table, column); the truth is what the clients counted
FIGURES = {"published": ("confirms", "records_published"), "confirmed": ("confirms", "confirmed"),
           "delivered_records": ("credit", "records_delivered"),
           "delivered_chunks": ("credit", "chunks_delivered")}  # fmt: skip
# Captures whose frames each begin a TCP segment (one frame a write): with Ethernet 14 +
# IPv4 20 + TCP 32 (timestamps) header bytes, -s 96 keeps 30 bytes of each segment's
# payload, -s 128 62: a Publish's head (13 bytes: size, key, version, publisher id,
# message count), a PublishConfirm's (13: ... id count) and a Deliver v1's chunk header up
# to its record count (17) and timestamp (25) survive, so every count is the truth's.
WHOLE_HEADS = ("rstream-publish-confirm-3.10", "rstream-consume-credit-3.10",
               "rstream-slow-consumer-3.10", "rbfly-publish-consume-3.10")  # fmt: skip


def figures(analysis, client_port: int) -> dict[str, int]:
    out = {}
    for figure, (table, column) in FIGURES.items():
        df = getattr(analysis, table)
        mine = df[df.connection.str.contains(f":{client_port}-", regex=False)]
        out[figure] = int(mine[column].sum())
    return out


def truths(path: Path) -> list[tuple[int, dict[str, int]]]:
    truth = json.loads(path.with_suffix(".truth.json").read_text())
    out = []
    for c in truth["connections"]:
        want = {f: c[f] for f in FIGURES if c.get(f)}
        if want:
            out.append((c["client_port"], want))
    return out


@pytest.mark.parametrize("snap", SNAP_LENGTHS)
@pytest.mark.parametrize("name", WHOLE_HEADS)
def test_counts_from_cut_headers_are_the_truths(name, snap, tmp_path):
    path = worsen.CAPTURES / f"{name}.pcap"
    cut, _ = cut_copy(path, snap, tmp_path)
    analysis = analyze(str(cut))
    expected = truths(path)
    assert expected
    for port, want in expected:
        got = figures(analysis, port)
        assert {f: got[f] for f in want} == want, port
    kinds = set(analysis.anomalies["kind"])
    assert "not_captured" in kinds and not kinds & {"malformed", "resync", "gap"}


@pytest.mark.parametrize("snap", SNAP_LENGTHS)
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_cut_figures_are_the_truths_or_lower_bounds_that_say_so(path, snap, tmp_path):
    """Where a count's inputs were cut away (frames packed after the first in a segment,
    sub-batches' records) the figure is less than the truth, never more, and the analysis
    says why: the row's cut_frames, or the bytes not captured on that connection."""
    cut, _ = cut_copy(path, snap, tmp_path)
    analysis = analyze(str(cut))
    said = analysis.anomalies[analysis.anomalies["kind"] == "not_captured"]
    for port, want in truths(path):
        got = figures(analysis, port)
        for figure, value in want.items():
            if got[figure] == value:
                continue
            assert got[figure] < value, (port, figure)
            table = getattr(analysis, FIGURES[figure][0])
            mine = table[table.connection.str.contains(f":{port}-", regex=False)]
            cut_rows = "cut_frames" in mine and mine["cut_frames"].sum() > 0
            assert cut_rows or said.connection.str.contains(f":{port}-", regex=False).any()


def test_a_cut_publish_and_confirm_keep_their_counts_and_whole_ids():
    from streamdissect.protocols.stream.codec import decode_frame, encode_record, make_record

    publish = encode_record(make_record("Publish", publisher_id=3, messages=[
        (100 + n, None, b"m" * 50) for n in range(10)]))  # fmt: skip
    cut = decode_frame(publish[:30], declared_size=len(publish) - 4)
    assert cut.truncated and cut.publisher_id == 3 and cut.publishing_ids == [100]
    assert cut.record_count is None  # (its entries past the cut may be sub-batches)
    # (10 simple entries: 10 records at least, the 9 past the cut one each)
    assert cut.cut == {"at": 30, "field": "messages", "count": 10, "records": 10}
    confirm = encode_record(make_record("PublishConfirm", publisher_id=3,
                                        publishing_ids=list(range(100, 110))))  # fmt: skip
    cut = decode_frame(confirm[:40], declared_size=len(confirm) - 4)
    # 13 bytes of head, then 27 bytes: 3 whole ids
    assert cut.publishing_ids == [100, 101, 102] and cut.cut["count"] == 10
    assert cut.to_dict()["cut"] == {"at": 40, "field": "publishing_ids", "count": 10}
    assert decode_frame(confirm[:11], declared_size=len(confirm) - 4).cut == {
        "at": 11, "field": "publishing_ids"}  # (its count cut too: none said)


def test_a_cut_publish_of_sub_batches_counts_their_records():
    """A sub-batch's records are its header's num_records, read from its 3 first bytes:
    a Publish cut in its second sub-batch's data holds 10 + 5 records, and one at least
    for each message past the cut (here 1)."""
    from streamdissect.protocols.stream.codec import decode_frame, encode_record, make_record
    from streamdissect.protocols.stream.publish import SubBatch

    publish = encode_record(make_record("Publish", publisher_id=1, messages=[
        (7, None, SubBatch(0, 10, 40, b"r" * 40)), (8, None, SubBatch(0, 5, 20, b"s" * 20)),
        (9, None, b"simple")]))  # fmt: skip
    # 13 bytes of head; the first entry 8 + 11 + 40 = 59 bytes; the second's id and 3 bytes
    cut = decode_frame(publish[:13 + 59 + 8 + 3], declared_size=len(publish) - 4)
    assert cut.truncated and cut.publishing_ids == [7, 8] and cut.record_count is None
    assert cut.cut == {"at": 83, "field": "messages", "count": 3, "records": 16}
    # its second sub-batch's count cut too: that message is one record at least
    cut = decode_frame(publish[:13 + 59 + 8 + 2], declared_size=len(publish) - 4)
    assert cut.cut["records"] == 12


@pytest.mark.parametrize("snap", SNAP_LENGTHS)
def test_cut_sub_batches_count_records_not_messages(snap, tmp_path):
    """rstream's sub-entry capture (6 Publish frames, each one sub-batch of 10 records) cut
    at the snap length: its confirms and throughput count the truth's 60 records published,
    not the 6 messages (publishing ids) the frames' headers count."""
    path = worsen.CAPTURES / "rstream-sub-entry-3.10.pcap"
    cut, _ = cut_copy(path, snap, tmp_path)
    analysis = analyze(str(cut))
    [(port, want)] = [(p, w) for p, w in truths(path) if "published" in w]
    assert want["published"] == 60
    confirms = analysis.confirms[analysis.confirms.connection.str.contains(f":{port}-")]
    assert confirms.cut_frames.sum() >= 6  # (every Publish is cut: the test is of cut ones)
    got = figures(analysis, port)
    assert {f: got[f] for f in want} == want
    assert confirms.published.sum() == 6  # (its publishing ids: one a sub-batch)
    assert analysis.throughput.published_msgs.sum() == 60
