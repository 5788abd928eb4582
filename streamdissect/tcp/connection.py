"""TCP connections: which segments belong together, port reuse, how each one ended."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamdissect.capture.segment import ACK, FIN, RST, SYN, Segment
from streamdissect.tcp.reassembly import DEFAULT_OOO_CAP, DirectionReassembler, NullSink

Endpoint = tuple[bytes, int]  # raw address (4 or 16 bytes), port
# (connection, side that sent, kind, ts_ns, stream offset, length, detail)
ConnectionReport = Callable[["TcpConnection", int, str, int, int, int, str], None]


class TcpConnection:
    """Side 0 is whoever sent the first packet seen; side 1 the other end."""

    __slots__ = (
        "end_ns",
        "endpoints",
        "fin",
        "ignored",
        "owner",
        "packets",
        "rst",
        "start_ns",
        "streams",
    )

    def __init__(
        self, first: Endpoint, second: Endpoint, ts_ns: int, report: ConnectionReport, ooo_cap: int
    ) -> None:
        self.endpoints = (first, second)
        self.streams = tuple(
            DirectionReassembler(NullSink(), self._reporter(report, side), ooo_cap)
            for side in (0, 1)
        )
        self.start_ns = ts_ns
        self.end_ns = ts_ns
        self.fin = [False, False]
        self.rst = False
        self.packets = 0
        self.ignored = False  # not our protocol: later segments are dropped at once
        self.owner: Any = None  # whatever the layer above keeps per connection

    def _reporter(self, report: ConnectionReport, side: int):
        return lambda kind, ts, offset, length, detail: report(
            self, side, kind, ts, offset, length, detail
        )

    @property
    def ended(self) -> bool:
        return self.rst or (self.fin[0] and self.fin[1])

    @property
    def how_ended(self) -> str:
        return "rst" if self.rst else "fin" if any(self.fin) else "open"

    def is_new_start(self, side: int, seq: int) -> bool:
        """A client SYN on this four-tuple: does it begin another connection?"""
        isn = self.streams[side].isn
        if isn is None:
            # The old one began before the capture (or this side never sent a SYN).
            return self.streams[side].started
        return isn != seq or self.ended

    def snapshot(self) -> tuple:
        """What a walk of the connection's segments changes, to go back to with restore()."""
        return (self.packets, self.end_ns, list(self.fin), self.rst,
                [stream.snapshot() for stream in self.streams])  # fmt: skip

    def restore(self, snapshot: tuple) -> None:
        self.packets, self.end_ns, fin, self.rst, streams = snapshot
        self.fin[:] = fin
        for stream, saved in zip(self.streams, streams):
            stream.restore(saved)


class FlowTable:
    """Finds the connection of each segment; both directions share one entry."""

    def __init__(
        self,
        report: ConnectionReport,
        on_new: Callable[[TcpConnection, int], None],
        ooo_cap: int = DEFAULT_OOO_CAP,
        hole_patience: int | None = None,
    ) -> None:
        """`hole_patience`: declare a hole a gap once that many packets of its connection
        have come after it (see DirectionReassembler.hole_waited); None: only on the peer's
        ACKs, the out-of-order cap or the end of the capture."""
        self._hole_patience = hole_patience
        self._flows: dict[tuple[bytes, int, bytes, int], tuple[TcpConnection, int]] = {}
        self.connections: list[TcpConnection] = []  # every one, in order of first packet
        self._report = report
        self._on_new = on_new  # (connection, flags of its first segment)
        self._ooo_cap = ooo_cap

    def segment(self, seg: Segment, ts_ns: int) -> None:
        src, sport, dst, dport, seq, ack, flags, payload, wire_len = seg
        found = self._flows.get((src, sport, dst, dport))
        if found is None or (flags & (SYN | ACK) == SYN and found[0].is_new_start(found[1], seq)):
            conn = self.open(src, sport, dst, dport, ts_ns, flags)
            side = 0
        else:
            conn, side = found
        if conn.ignored:
            return
        conn.packets += 1
        conn.end_ns = ts_ns
        stream = conn.streams[side]
        stream.segment(seq, flags, payload, wire_len, ts_ns)
        if flags & (FIN | RST):
            if flags & RST:
                conn.rst = True
            else:
                conn.fin[side] = True
        if flags & ACK:
            other = conn.streams[1 - side]
            if other.pending:
                other.peer_acked(ack, conn.packets, ts_ns)
        if self._hole_patience is not None:
            for waiting in conn.streams:
                if waiting.pending:
                    waiting.hole_waited(conn.packets, ts_ns, self._hole_patience)

    def find(self, key: tuple[bytes, int, bytes, int]) -> tuple[TcpConnection, int] | None:
        """The connection a segment from (src, sport) to (dst, dport) belongs to, and its
        side, as the table stands (a SYN may still start another: `segment` decides)."""
        return self._flows.get(key)

    def open(
        self, src: bytes, sport: int, dst: bytes, dport: int, ts_ns: int, flags: int
    ) -> TcpConnection:
        """A new connection, from the packet (src, sport) -> (dst, dport) with these flags
        (its first, or a SYN that starts another one on the same four-tuple)."""
        conn = TcpConnection((src, sport), (dst, dport), ts_ns, self._report, self._ooo_cap)
        self._flows[(src, sport, dst, dport)] = (conn, 0)
        self._flows[(dst, dport, src, sport)] = (conn, 1)
        self.connections.append(conn)
        self._on_new(conn, flags)
        return conn

    def finish(self, ts_ns: int) -> None:
        """End of capture: every hole still open becomes a gap."""
        for conn in self.connections:
            if not conn.ignored:
                for stream in conn.streams:
                    stream.finish(ts_ns)
