"""The RocketMQ captures made worse (tests/worsen.py): reordered and duplicated segments give
the same frames; a lost segment costs the frames it held and the framer finds its way back
(resync) to decode every frame after it; a small snaplen gives cut records, never an
exception; a capture that starts late finds the frames that start after its first bytes."""

from __future__ import annotations

import pytest
import worsen
from rocketmq_support import CAPTURES, NAMES, dissect, own_fields

from streamdissect.protocols.rocketmq.records import Malformed, RemotingCommand


def _frames(path) -> list:
    """Each frame by connection, direction and offset (segments swapped in time may change
    which direction's frame comes out first, not the frames)."""
    frames, _anomalies = dissect(path)
    return sorted(((e.connection, e.direction, e.stream_offset, own_fields(e.record))
                   for e in frames), key=lambda f: f[:3])  # fmt: skip


def _write(tmp_path, name: str, change) -> object:
    link, packets = worsen.read_pcap(CAPTURES / f"{name}.pcap")
    return worsen.write_pcap(tmp_path / f"{name}-worse.pcap", link, change(packets))


@pytest.mark.parametrize("name", NAMES)
def test_reordered_and_duplicated_segments_change_nothing(tmp_path, name):
    same = _frames(CAPTURES / f"{name}.pcap")
    worse = _write(tmp_path, name, lambda p: worsen.duplicate(worsen.reorder(p)))
    assert _frames(worse) == same and same


def test_a_lost_segment_costs_its_frames_only(tmp_path):
    """The biggest segment (of a big send or pull response, in the compressed capture) is lost: the
    frames with bytes in it are cut or lost, the framer keeps or finds sync, and every other
    frame is decoded as before."""
    name = "rmq-java-compressed"
    link, packets = worsen.read_pcap(CAPTURES / f"{name}.pcap")
    biggest = max(worsen.data_segments(packets), key=lambda i: len(packets[i][1]))
    lost = worsen.tcp_of(packets[biggest][1])
    isn = next(t.seq for _, d, _ in packets if (t := worsen.tcp_of(d)).flow == lost.flow
               and t.flags & 0x02)  # fmt: skip
    start = (lost.seq - isn - 1) % 2**32
    end = start + lost.payload_len
    worse = worsen.write_pcap(tmp_path / "lost.pcap", link, worsen.drop(packets, {biggest}))
    before, after = _frames(CAPTURES / f"{name}.pcap"), _frames(worse)
    from_server = lost.flow[1] in (9876, 10911)
    port, side = (lost.flow[3], "s2c") if from_server else (lost.flow[1], "c2s")

    def touched(frame) -> bool:
        connection, direction, offset, record = frame
        return (f":{port}-" in connection and direction == side
                and offset < end and offset + 4 + record["size"] > start)

    hit = [f for f in before if touched(f)]
    assert hit and [f for f in before if not touched(f)] == [f for f in after if not touched(f)]
    assert all(f[3]["truncated"] for f in after if touched(f))
    _, anomalies = dissect(worse)
    kinds = {a.kind for a in anomalies}
    assert "gap" in kinds and kinds <= {"gap", "out_of_order", "truncated", "resync"}


@pytest.mark.parametrize("name", NAMES)
def test_a_small_snaplen_gives_cut_records(tmp_path, name):
    worse = _write(tmp_path, name, lambda p: worsen.snaplen(p, 96))
    frames, anomalies = dissect(worse)
    assert frames or anomalies
    for e in frames:
        assert isinstance(e.record, (RemotingCommand, Malformed))


@pytest.mark.parametrize("name", NAMES)
def test_a_capture_that_starts_late(tmp_path, name):
    skip = 5
    worse = _write(tmp_path, name, lambda p: worsen.midstream(p, skip))
    late = _frames(worse)
    whole = _frames(CAPTURES / f"{name}.pcap")
    # every frame found is one of the whole capture's (by its bytes' offset, once sync is
    # found the offsets are the stream's own)
    whole_records = [r for *_, r in whole]
    assert late and all(r in whole_records for *_, r in late)
    assert len(late) >= len(whole) // 2
