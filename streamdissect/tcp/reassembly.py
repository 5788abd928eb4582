"""One direction of a TCP connection: segments in, ordered stream bytes out.

I/O-free: the caller feeds segments; bytes go to a sink, anomalies to a report callback.
Stream offsets are 0 at the first byte after the SYN (or at the first sequence number seen
when the capture started late) and never wrap, whatever the 32-bit sequence numbers do.

In-order segments, the common case, go straight to the sink without a copy. Only
out-of-order data is copied and kept, up to a cap.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Protocol

from streamdissect.capture.segment import FIN, SYN

SEQ_MASK = 0xFFFFFFFF
HALF_SEQ_SPACE = 1 << 31
DEFAULT_OOO_CAP = 4 * 1024 * 1024
# A hole the peer has acknowledged was sent, so the capture missed it. Capture order can
# still put an ACK a little before the data it acknowledges, so wait this many more packets
# of the connection before calling the hole a gap.
ACKED_HOLE_PATIENCE = 8

# (kind, ts_ns, stream offset, length, detail)
Report = Callable[[str, int, int, int, str], None]


class StreamSink(Protocol):
    """Where ordered bytes go (the framer)."""

    def data(self, payload: memoryview, ts_ns: int) -> None: ...

    def missing(self, length: int, ts_ns: int) -> None:
        """`length` bytes were on the wire but their content is unknown (snaplen, gap)."""

    def desync(self) -> None:
        """The stream starts in the middle: the next bytes need not start a frame."""


# The anomaly of bytes on the wire that the capture did not keep (its snap length)
NOT_CAPTURED = "not_captured"

class NullSink:
    def data(self, payload: memoryview, ts_ns: int) -> None:
        pass

    def missing(self, length: int, ts_ns: int) -> None:
        pass

    def desync(self) -> None:
        pass


class DirectionReassembler:
    __slots__ = (
        "cut_run",
        "fin_offset",
        "hole_acked_at",
        "hole_opened_at",
        "isn",
        "next_seq",
        "offset",
        "ooo_cap",
        "pending",
        "pending_bytes",
        "pending_offsets",
        "report",
        "sink",
        "started",
    )

    def __init__(self, sink: StreamSink, report: Report, ooo_cap: int = DEFAULT_OOO_CAP) -> None:
        self.sink = sink
        self.report = report
        self.ooo_cap = ooo_cap
        self.started = False
        self.isn: int | None = None  # None: no SYN seen for this direction
        self.next_seq = 0  # 32-bit sequence number of the next byte owed to the sink
        self.offset = 0  # its stream offset
        self.pending: dict[int, tuple[bytes, int]] = {}  # offset -> (captured, wire length)
        self.pending_offsets: list[int] = []  # heap of the keys above
        self.pending_bytes = 0
        self.hole_acked_at: int | None = None
        self.hole_opened_at: int | None = None  # packet number (see hole_waited)
        self.fin_offset: int | None = None
        # segments cut by the capture's snap length since the last whole one: one anomaly
        # for the run, [first cut byte's offset, first cut's ts_ns, packets, bytes not
        # captured, offset after the last cut byte]; None when the last segment was whole
        self.cut_run: list[int] | None = None

    def segment(self, seq: int, flags: int, payload: memoryview, wire_len: int, ts_ns: int) -> None:
        if flags & SYN:
            if not self.started:
                self.started = True
                self.isn = seq
                self.next_seq = (seq + 1) & SEQ_MASK
            seq = (seq + 1) & SEQ_MASK  # the SYN itself takes one sequence number
        elif not self.started:
            self.started = True
            self.next_seq = seq
            self.report("midstream_start", ts_ns, 0, 0, f"first sequence number seen {seq}")
            self.sink.desync()
        if wire_len:
            delta = (seq - self.next_seq) & SEQ_MASK
            if delta == 0:
                self._deliver(payload, wire_len, ts_ns)
                if self.pending:
                    self._drain(ts_ns)
            elif delta < HALF_SEQ_SPACE:
                self._keep(self.offset + delta, payload, wire_len, ts_ns)
            else:
                self._behind(HALF_SEQ_SPACE * 2 - delta, payload, wire_len, ts_ns)
        if flags & FIN and self.fin_offset is None:
            delta = (seq - self.next_seq) & SEQ_MASK
            if delta >= HALF_SEQ_SPACE:
                delta -= HALF_SEQ_SPACE * 2
            self.fin_offset = self.offset + delta + wire_len

    def snapshot(self) -> tuple:
        """Where the direction is (a walk of in-order segments moves it on; it takes over
        only a direction with nothing pending), to go back to with restore()."""
        run = None if self.cut_run is None else self.cut_run.copy()
        return self.started, self.isn, self.next_seq, self.offset, self.fin_offset, run

    def restore(self, snapshot: tuple) -> None:
        self.started, self.isn, self.next_seq, self.offset, self.fin_offset, run = snapshot
        self.cut_run = None if run is None else run.copy()

    def _deliver(self, payload: memoryview, wire_len: int, ts_ns: int) -> None:
        captured = len(payload)
        if captured == wire_len and self.cut_run is not None:
            self.end_cut_run()  # (said before the frames this whole segment completes)
        if captured:
            self.sink.data(payload, ts_ns)
        if captured < wire_len:
            self._cut(self.offset + captured, wire_len - captured, ts_ns)
            self.sink.missing(wire_len - captured, ts_ns)
        self.next_seq = (self.next_seq + wire_len) & SEQ_MASK
        self.offset += wire_len

    def _cut(self, offset: int, length: int, ts_ns: int) -> None:
        """`length` bytes from `offset` were on the wire, not in the capture (snap length)."""
        run = self.cut_run
        if run is None:
            self.cut_run = [offset, ts_ns, 1, length, offset + length]
        else:
            run[2] += 1
            run[3] += length
            run[4] = offset + length

    def end_cut_run(self) -> None:
        """Say the run of cut segments (one anomaly however many packets it held)."""
        start, ts_ns, packets, length, end = self.cut_run
        self.cut_run = None
        self.report(
            NOT_CAPTURED,
            ts_ns,
            start,
            length,
            f"{length} payload byte{'s' * (length != 1)} of {packets} segment"
            f"{'s' * (packets != 1)} not captured (snap length), in stream bytes {start}..{end}",
        )

    def _behind(self, already: int, payload: memoryview, wire_len: int, ts_ns: int) -> None:
        """A segment starting `already` bytes before what was delivered."""
        start = self.offset - already
        if already >= wire_len:
            self.report("retransmission", ts_ns, start, wire_len, "")
            return
        self.report("overlap", ts_ns, start, already, f"{wire_len - already} new bytes")
        self._deliver(payload[already:], wire_len - already, ts_ns)
        if self.pending:
            self._drain(ts_ns)

    def _keep(self, offset: int, payload: memoryview, wire_len: int, ts_ns: int) -> None:
        """Out-of-order data: copied (the capture's read buffer must not be pinned)."""
        old = self.pending.get(offset)
        if old is not None:
            self.report("retransmission", ts_ns, offset, wire_len, "of out-of-order data")
            if old[1] >= wire_len:
                return
            self.pending_bytes -= old[1]
        else:
            heapq.heappush(self.pending_offsets, offset)
            self.report(
                "out_of_order", ts_ns, offset, wire_len, f"{offset - self.offset} bytes ahead"
            )
        self.pending[offset] = (bytes(payload), wire_len)
        self.pending_bytes += wire_len
        if self.pending_bytes > self.ooo_cap:
            self.report(
                "ooo_cap",
                ts_ns,
                self.offset,
                self.pending_bytes,
                f"out-of-order data above {self.ooo_cap} bytes: hole declared a gap",
            )
            while self.pending_bytes > self.ooo_cap:
                self.declare_gap(ts_ns, "out-of-order cap")

    def _drain(self, ts_ns: int) -> None:
        """Deliver kept segments that now continue the stream (the current packet's time:
        it is the one that completes them)."""
        heap = self.pending_offsets
        while heap and heap[0] <= self.offset:
            offset = heapq.heappop(heap)
            captured, wire_len = self.pending.pop(offset)
            self.pending_bytes -= wire_len
            already = self.offset - offset
            if already >= wire_len:
                continue  # fully covered by what filled the hole
            self._deliver(memoryview(captured)[already:], wire_len - already, ts_ns)
        self.hole_acked_at = None
        self.hole_opened_at = None

    def declare_gap(self, ts_ns: int, why: str) -> None:
        """Give up on the first hole: its bytes are missing, framing goes on after it."""
        if not self.pending_offsets:
            return
        if self.cut_run is not None:
            self.end_cut_run()
        length = self.pending_offsets[0] - self.offset
        self.report("gap", ts_ns, self.offset, length, why)
        self.sink.missing(length, ts_ns)
        self.next_seq = (self.next_seq + length) & SEQ_MASK
        self.offset += length
        self._drain(ts_ns)

    def peer_acked(self, ack: int, packet_number: int, ts_ns: int) -> None:
        """The other side acknowledged up to `ack`: a hole it covers was missed by the capture."""
        delta = (ack - self.next_seq) & SEQ_MASK
        if not 0 < delta < HALF_SEQ_SPACE:
            return
        if self.hole_acked_at is None:
            self.hole_acked_at = packet_number
        elif packet_number - self.hole_acked_at >= ACKED_HOLE_PATIENCE:
            self.declare_gap(ts_ns, "acknowledged by the peer but not captured")

    def hole_waited(self, packet_number: int, ts_ns: int, patience: int) -> None:
        """A hole still open `patience` packets of the connection after it was first seen is
        a gap, ACKs or not: for callers that are never shown pure ACKs nor the end of the
        capture (scapy's TCPSession), where a hole would otherwise hold back every frame."""
        if self.hole_opened_at is None:
            self.hole_opened_at = packet_number
        elif packet_number - self.hole_opened_at >= patience:
            self.declare_gap(ts_ns, f"not filled within {patience} packets")

    def finish(self, ts_ns: int) -> None:
        """End of capture: holes that remain are gaps; a run of cut segments is said."""
        while self.pending_offsets:
            self.declare_gap(ts_ns, "end of capture")
        if self.cut_run is not None:
            self.end_cut_run()
