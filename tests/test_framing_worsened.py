"""Made-worse copies of a real capture give the original's frames (done-when tests)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import worsen
from frame_rows import frame_rows

from streamdissect.engine.dissect import Anomaly, Dissector

Frame = tuple[str, str, int, str]  # connection, direction, stream offset, record as JSON


def run(path: Path) -> tuple[list[Frame], list[Anomaly], Dissector]:
    dissector = Dissector()
    frames, anomalies = frame_rows(dissector.run(str(path)))
    return frames, anomalies, dissector


def header_of(frame: Frame) -> tuple:
    record = json.loads(frame[3])
    return frame[:3] + (record["key"], record["version"], record["size"])


@pytest.mark.parametrize(
    "transform, kind",
    [
        (worsen.reorder, "out_of_order"),
        (worsen.duplicate, "retransmission"),
        (lambda p: worsen.duplicate(worsen.reorder(p)), "out_of_order"),
    ],
)
def test_reordered_and_duplicated_give_every_frame_once(
    real, real_frames, tmp_path, transform, kind
):
    (_, linktype, packets), original = real, real_frames
    frames, anomalies, _ = run(worsen.write_pcap(tmp_path / "w.pcap", linktype, transform(packets)))
    assert frames == original or Counter(frames) == Counter(original)
    kinds = {a.kind for a in anomalies}
    assert kind in kinds and not kinds & {"gap", "resync", "malformed"}


def test_pcapng_and_gzip_copies_give_identical_output(real, real_frames, tmp_path):
    path, original = real.path, real_frames
    ng = worsen.to_pcapng(path, tmp_path / "x.pcapng")
    for copy in (
        ng,
        worsen.gzip_copy(path, tmp_path / "x.pcap.gz"),
        worsen.gzip_copy(ng, tmp_path / "x.pcapng.gz"),
    ):
        frames, anomalies, _ = run(copy)
        assert frames == original and anomalies == []


def stream_starts(packets: list[worsen.Packet]) -> dict[tuple, int]:
    """Sequence number of stream offset 0 per (src port, dst port): the SYN's + 1."""
    return {
        (t.flow[1], t.flow[3]): t.seq + 1
        for _, d, _ in packets
        if (t := worsen.tcp_of(d)) and t.flags & 0x02
    }


def direction_key(frame: Frame) -> tuple[int, int]:
    client, server = frame[0].split("#")[0].split("-")
    ports = int(client.rsplit(":", 1)[1]), int(server.rsplit(":", 1)[1])
    return ports if frame[1] == "c2s" else ports[::-1]


def test_midstream_start_gives_every_frame_after_the_cut(real, real_frames, tmp_path):
    (_, linktype, packets), original = real, real_frames
    cut = len(packets) // 3
    kept = worsen.midstream(packets, cut)
    # where each direction's stream now begins, in the original's offsets
    first_seq: dict[tuple, int] = {}
    for _, data, _ in kept:
        t = worsen.tcp_of(data)
        first_seq.setdefault((t.flow[1], t.flow[3]), t.seq + (1 if t.flags & 0x02 else 0))
    starts = stream_starts(packets)
    shift = {k: (first_seq[k] - starts[k]) % 2**32 for k in first_seq}
    frames, anomalies, _ = run(worsen.write_pcap(tmp_path / "m.pcap", linktype, kept))
    expected = []
    for frame in original:
        key = direction_key(frame)
        if key in shift and frame[2] >= shift[key]:
            expected.append((frame[0], frame[1], frame[2] - shift[key], frame[3]))
    assert len(expected) > len(original) // 3
    assert all(f in set(frames) for f in expected)
    # nothing invented: every frame found is one of the original's
    assert {(c, d, r) for c, d, _, r in frames} <= {(c, d, r) for c, d, _, r in original}
    kinds = Counter(a.kind for a in anomalies)
    assert kinds["midstream_start"] >= 1


def test_dropped_segment_gives_every_frame_not_touching_the_hole(real, real_frames, tmp_path):
    (_, linktype, packets), original = real, real_frames
    segments = worsen.data_segments(packets)
    victim = segments[len(segments) // 2]
    t = worsen.tcp_of(packets[victim][1])
    start = (t.seq - stream_starts(packets)[(t.flow[1], t.flow[3])]) % 2**32
    hole = (start, start + t.payload_len)
    frames, anomalies, _ = run(
        worsen.write_pcap(tmp_path / "d.pcap", linktype, worsen.drop(packets, {victim}))
    )

    def touches(frame: Frame) -> bool:
        size = json.loads(frame[3])["size"]
        return (
            direction_key(frame) == (t.flow[1], t.flow[3])
            and frame[2] < hole[1]
            and frame[2] + 4 + size > hole[0]
        )

    expected = [f for f in original if not touches(f)]
    assert all(f in set(frames) for f in expected)
    assert all(not touches(f) or json.loads(f[3])["truncated"] for f in frames)
    gaps = [(a.stream_offset, a.length) for a in anomalies if a.kind == "gap"]
    assert gaps == [(hole[0], hole[1] - hole[0])]


def test_snaplen_96_gives_every_captured_frame_header_marked_truncated(real, real_frames, tmp_path):
    (_, linktype, packets), original = real, real_frames
    snapped = worsen.snaplen(packets, 96)
    starts = stream_starts(packets)
    captured: dict[tuple, list[tuple[int, int]]] = {}
    for _, data, _ in packets:
        t = worsen.tcp_of(data)
        if t.payload_len:
            offset = (t.seq - starts[(t.flow[1], t.flow[3])]) % 2**32
            captured.setdefault((t.flow[1], t.flow[3]), []).append(
                (offset, offset + max(0, 96 - t.payload_at))
            )
    frames, anomalies, _ = run(worsen.write_pcap(tmp_path / "s.pcap", linktype, snapped))
    got = {header_of(f): json.loads(f[3]) for f in frames}

    def header_captured(frame: Frame) -> bool:
        return any(a <= frame[2] and frame[2] + 8 <= b for a, b in captured[direction_key(frame)])

    expected = [f for f in original if header_captured(f)]
    assert len(expected) > len(original) // 2
    for frame in expected:
        record = got[header_of(frame)]
        whole = frame[2] + 4 + json.loads(frame[3])["size"] <= max(
            b for a, b in captured[direction_key(frame)] if a <= frame[2]
        )
        assert record["truncated"] is (not whole)
    assert not {a.kind for a in anomalies} & {"gap", "malformed"}
