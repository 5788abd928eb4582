"""TCP reassembly: order, retransmissions, overlaps, gaps, wraparound, caps, port reuse."""

from __future__ import annotations

from pathlib import Path

import pytest
import worsen

from streamdissect.capture import ACK, FIN, RST, SYN, open_capture, tcp_segment
from streamdissect.tcp import FlowTable, TcpConnection

CLIENT, SERVER = (b"\x0a\x00\x00\x01", 40000), (b"\x0a\x00\x00\x02", 5552)


class Recorder:
    """A sink that keeps the stream, with '?' for bytes known to be missing."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.desynced = False

    def data(self, payload, ts_ns):
        self.parts.append(bytes(payload))

    def missing(self, length, ts_ns):
        self.parts.append(b"?" * length)

    def desync(self):
        self.desynced = True

    @property
    def stream(self) -> bytes:
        return b"".join(self.parts)


class Harness:
    def __init__(self, ooo_cap: int = 1 << 20) -> None:
        self.anomalies: list[tuple] = []
        self.sinks: dict[tuple[int, int], Recorder] = {}
        self.table = FlowTable(self._report, self._new, ooo_cap=ooo_cap)

    def _report(self, conn, side, kind, ts, offset, length, detail):
        self.anomalies.append((self.table.connections.index(conn), side, kind, offset, length))

    def _new(self, conn: TcpConnection, flags: int) -> None:
        number = len(self.table.connections) - 1
        for side, stream in enumerate(conn.streams):
            stream.sink = self.sinks[(number, side)] = Recorder()

    def send(self, src, dst, seq, data=b"", flags=ACK, ack=0, wire_len=None, ts=0):
        seg = (
            src[0],
            src[1],
            dst[0],
            dst[1],
            seq & 0xFFFFFFFF,
            ack & 0xFFFFFFFF,
            flags,
            memoryview(data),
            len(data) if wire_len is None else wire_len,
        )
        self.table.segment(seg, ts)

    def kinds(self) -> list[str]:
        return [a[2] for a in self.anomalies]


def handshake(h: Harness, isn_c: int = 1000, isn_s: int = 5000) -> None:
    h.send(CLIENT, SERVER, isn_c, flags=SYN)
    h.send(SERVER, CLIENT, isn_s, flags=SYN | ACK, ack=isn_c + 1)
    h.send(CLIENT, SERVER, isn_c + 1, ack=isn_s + 1)


def test_in_order_and_out_of_order_give_the_stream_once():
    h = Harness()
    handshake(h)
    h.send(CLIENT, SERVER, 1001, b"aaaa")
    h.send(CLIENT, SERVER, 1009, b"cccc")  # ahead
    h.send(CLIENT, SERVER, 1005, b"bbbb")  # fills the hole
    h.send(CLIENT, SERVER, 1005, b"bbbb")  # retransmission
    h.send(CLIENT, SERVER, 1011, b"ccdddd")  # overlap: 2 old, 4 new
    h.table.finish(0)
    assert h.sinks[(0, 0)].stream == b"aaaabbbbccccdddd"
    assert h.kinds() == ["out_of_order", "retransmission", "overlap"]
    assert h.anomalies[0][3:] == (8, 4) and h.anomalies[1][3:] == (4, 4)


def test_sequence_wraparound():
    h = Harness()
    handshake(h, isn_c=0xFFFFFFF8)
    h.send(CLIENT, SERVER, 0xFFFFFFF9, b"12345678")  # crosses 2**32
    h.send(CLIENT, SERVER, 0x00000005, b"cd")  # ahead after the wrap
    h.send(CLIENT, SERVER, 0x00000001, b"abcd")
    assert h.sinks[(0, 0)].stream == b"12345678abcdcd"
    assert h.kinds() == ["out_of_order"]


def test_gap_at_end_of_capture_and_acked_hole():
    h = Harness()
    handshake(h)
    h.send(CLIENT, SERVER, 1001, b"aaaa")
    h.send(CLIENT, SERVER, 1009, b"cccc")  # 1005..1008 never captured
    h.table.finish(0)
    assert h.sinks[(0, 0)].stream == b"aaaa????cccc"
    assert ("gap", 4, 4) in [(a[2], a[3], a[4]) for a in h.anomalies]

    h = Harness()
    handshake(h)
    h.send(CLIENT, SERVER, 1001, b"aaaa")
    h.send(CLIENT, SERVER, 1009, b"cccc")
    for _ in range(10):  # the server acknowledges the hole: the capture missed it
        h.send(SERVER, CLIENT, 5001, ack=1013)
    assert h.sinks[(0, 0)].stream == b"aaaa????cccc"
    assert h.kinds() == ["out_of_order", "gap"]


def test_midstream_start_and_snaplen_bytes():
    h = Harness()
    h.send(CLIENT, SERVER, 77777, b"abc", wire_len=10)  # 7 bytes cut by the snaplen
    h.send(CLIENT, SERVER, 77787, b"xyz")
    assert h.sinks[(0, 0)].stream == b"abc???????xyz"
    assert h.sinks[(0, 0)].desynced
    # the cut segment is said once the next whole one comes: 7 bytes from stream offset 3
    assert h.anomalies == [(0, 0, "midstream_start", 0, 0), (0, 0, "not_captured", 3, 7)]


def test_adjacent_cut_segments_are_one_not_captured_anomaly_per_run():
    h = Harness()
    handshake(h)
    for n in range(1000):  # 1000 segments of 100 bytes, 30 of each captured
        h.send(CLIENT, SERVER, 1001 + n * 100, b"x" * 30, wire_len=100)
    assert h.kinds() == []  # the run is open: said when it ends
    h.send(CLIENT, SERVER, 101001, b"whole")  # a whole segment ends the run
    h.send(CLIENT, SERVER, 101006, b"y", wire_len=10)  # a new run, said at the end
    h.table.finish(0)
    assert h.anomalies == [(0, 0, "not_captured", 30, 70_000), (0, 0, "not_captured", 100_006, 9)]


def test_out_of_order_cap_declares_the_hole_a_gap():
    h = Harness(ooo_cap=100)
    handshake(h)
    for n in range(5):
        h.send(CLIENT, SERVER, 1011 + n * 30, b"x" * 30)
    assert "ooo_cap" in h.kinds() and "gap" in h.kinds()
    assert h.sinks[(0, 0)].stream == b"?" * 10 + b"x" * 150


def test_port_reuse_fin_rst_and_new_isn():
    h = Harness()
    handshake(h, 1000)
    h.send(CLIENT, SERVER, 1001, b"one")
    h.send(CLIENT, SERVER, 1000, flags=SYN)  # SYN retransmitted: same connection
    h.send(CLIENT, SERVER, 1004, flags=FIN | ACK)
    h.send(SERVER, CLIENT, 5001, flags=FIN | ACK)
    handshake(h, 9000, 7000)  # same four-tuple after FIN both ways
    h.send(CLIENT, SERVER, 9001, b"two")
    h.send(CLIENT, SERVER, 9004, flags=RST)
    handshake(h, 9000, 7000)  # after RST, even with the same ISN
    handshake(h, 12345, 7000)  # a different ISN without any close
    conns = h.table.connections
    assert len(conns) == 4
    assert [c.how_ended for c in conns] == ["fin", "rst", "open", "open"]
    assert h.sinks[(0, 0)].stream == b"one" and h.sinks[(1, 0)].stream == b"two"


def streams_of(path: Path) -> tuple[dict, list[str]]:
    h = Harness()
    for ts, lt, data, _, _ in open_capture(str(path)):
        seg = tcp_segment(lt, data)
        if seg:
            h.table.segment(seg, ts)
    h.table.finish(0)
    return {k: r.stream for k, r in h.sinks.items()}, h.kinds()


@pytest.mark.parametrize(
    "transform, expected_kind",
    [(worsen.reorder, "out_of_order"), (worsen.duplicate, "retransmission")],
)
def test_worsened_real_capture_gives_the_same_streams(real, tmp_path, transform, expected_kind):
    path, linktype, packets = real
    original, kinds = streams_of(path)
    assert "gap" not in kinds and any(original.values())
    worse = worsen.write_pcap(tmp_path / "w.pcap", linktype, transform(packets))
    streams, kinds = streams_of(worse)
    assert streams == original
    assert expected_kind in kinds and "gap" not in kinds
