"""TCP over a block of packets as columns: sequence numbers checked with vectorized arithmetic.

Per TCP connection and direction, in-order segments and full retransmissions (the regular
case) never reach the per-packet reassembler: the stream's state (DirectionReassembler) is
moved on in one step and its in-order segments handed over as one list (InOrder). From the
first irregular packet (gap, out of order, overlap, snaplen cut or the first data after
one, SYN-less start, a SYN again, a packet parsed one by one) the connection goes through
the exact FlowTable code until the end of the block; a block with a possible port reuse
goes through it whole. The state is the one the exact code keeps, so the two hand over at
any packet.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import numpy as np

from streamdissect.capture.packet_columns import Packets
from streamdissect.capture.segment import ACK, FIN, RST, SYN
from streamdissect.slotted import Slotted
from streamdissect.tcp.connection import FlowTable, TcpConnection
from streamdissect.tcp.reassembly import HALF_SEQ_SPACE, SEQ_MASK


class RowSink(Protocol):
    """Where the walk tells which packet it handles, and hands the in-order bytes on."""

    def at_row(self, row: int) -> None:
        """The packet of this row is handled now (anomalies and new connections are
        ordered by it)."""

    def tag(self, row: int) -> None:
        """What the packet of this row just made (frames, anomalies) is done."""

    def in_order(self, conn: TcpConnection, segments: InOrder) -> None:
        """One direction's in-order segments of the block, its stream state moved past
        them."""


class InOrder(Slotted):
    """One direction's in-order segments of a block: stream offsets `so`, lengths `lo`,
    buffer positions `po` as int64 arrays of the array module (a walk bisects and indexes
    them as Python ints: making one is a copy of bytes, not a Python int per segment as
    tolist() is) and as numpy arrays (`so_a`...); each one's packet row and time (numpy;
    `row_of(j)`, `time_of(j)`: as Python ints) and first bytes (packet_columns.Parsed.phead);
    the block buffer they point into."""

    __slots__ = field_names = ("side", "so", "lo", "po", "so_a", "lo_a", "po_a", "rows", "times",
                               "heads", "buf", "mv", "row_of", "time_of")  # fmt: skip
    side: int
    so: array
    lo: array
    po: array
    so_a: np.ndarray
    lo_a: np.ndarray
    po_a: np.ndarray
    rows: np.ndarray
    times: np.ndarray
    heads: np.ndarray
    buf: Any
    mv: memoryview
    row_of: Callable[[int], int]  # (made from rows and times)
    time_of: Callable[[int], int]

    def __init__(self, side: int, so: array, lo: array, po: array, so_a: np.ndarray,
                 lo_a: np.ndarray, po_a: np.ndarray, rows: np.ndarray, times: np.ndarray,
                 heads: np.ndarray, buf: Any, mv: memoryview) -> None:  # fmt: skip
        self.side, self.so, self.lo, self.po = side, so, lo, po
        self.so_a, self.lo_a, self.po_a = so_a, lo_a, po_a
        self.rows, self.times, self.heads, self.buf, self.mv = rows, times, heads, buf, mv
        self.row_of = _ints(rows).__getitem__
        self.time_of = _ints(times).__getitem__

    @property
    def send(self) -> int:
        """The stream offset after the last segment."""
        return self.so[-1] + self.lo[-1]

    def read(self, a: int, b: int) -> bytes:
        """The stream bytes [a, b) (within the segments)."""
        so, lo, po, mv = self.so, self.lo, self.po, self.mv
        j = bisect_right(so, a) - 1
        at = po[j] + a - so[j]
        if b <= so[j] + lo[j]:
            return bytes(mv[at : at + b - a])
        jj = bisect_right(so, b - 1) - 1  # the segment holding the last byte
        parts = [mv[at : po[j] + lo[j]]]
        parts += [mv[p : p + n] for p, n in zip(po[j + 1 : jj], lo[j + 1 : jj])]
        parts.append(mv[po[jj] : po[jj] + b - so[jj]])
        return b"".join(parts)


def _ints(values: np.ndarray) -> array:
    """An int64 numpy array as an array.array (indexing gives Python ints quickly)."""
    out = array("q")
    out.frombytes(np.ascontiguousarray(values, dtype=np.int64).view(np.uint8).data)
    return out


def connections(table: FlowTable, piece: Packets, sink: RowSink) -> list[tuple] | None:
    """The piece's rows grouped by connection, (connection, rows, sides) each, new
    connections opened in order of their first packet. None when a SYN on a four-tuple that
    already has a connection may start another one (port reuse): the piece then goes
    through the exact code packet by packet."""
    keys, first_row, c = piece.keys, piece.first_row, piece.columns
    order = sorted(range(len(keys)), key=first_row.__getitem__)
    known = set()
    for j in order:
        src, sport, dst, dport = keys[j]
        if table.find(keys[j]) is not None or keys[j] in known:
            continue
        known.add((dst, dport, src, sport))
    for r in np.flatnonzero((c.flags & (SYN | ACK)) == SYN).tolist():
        j = int(c.fid[r])
        if j >= 0 and (table.find(keys[j]) is not None or keys[j] in known or r != first_row[j]):
            return None
    side_of = [0] * len(keys)
    conn_of: list[Any] = [None] * len(keys)
    for j in order:
        found = table.find(keys[j])
        if found is None:
            r = first_row[j]
            sink.at_row(r)
            found = (table.open(*keys[j], int(c.ts[r]), int(c.flags[r])), 0)
        conn_of[j], side_of[j] = found
    rows = np.flatnonzero(c.fid >= 0)
    if not len(rows):
        return []
    conn_index: dict[int, int] = {}
    conns = {}
    cid = np.empty(len(keys), dtype=np.int64)
    for j in range(len(keys)):
        cid[j] = conn_index.setdefault(id(conn_of[j]), len(conn_index))
        conns[cid[j]] = conn_of[j]
    row_conn = cid[c.fid[rows]]
    row_side = np.array(side_of, dtype=np.int64)[c.fid[rows]]
    by_conn = np.argsort(row_conn, kind="stable")
    bounds = np.flatnonzero(np.diff(row_conn[by_conn])) + 1
    return [(conns[int(row_conn[group[0]])], rows[group], row_side[group])
            for group in np.split(by_conn, bounds)]  # fmt: skip


def exact(table: FlowTable, piece: Packets, rows: list[int], sink: RowSink) -> None:
    """Rows through the exact per-packet code."""
    ts = piece.columns.ts
    for r in rows:
        sink.at_row(r)
        table.segment(piece.segment(r), int(ts[r]))
        sink.tag(r)


class DirectionPlan(NamedTuple):
    """The regular rows of one direction of a connection: where they are among its rows,
    the sequence number of the direction's stream offset 0 of the block (`base`), each
    one's offset from it, end and wire length, which are in order and which retransmitted,
    and their TCP flags."""

    side: int
    where: np.ndarray
    base: int
    rel: np.ndarray
    ends: np.ndarray
    wl: np.ndarray
    in_order: np.ndarray
    retrans: np.ndarray
    flags: np.ndarray


class ConnectionPlan(NamedTuple):
    """A connection's rows of a block: how far they are regular (rows[:regular]), and each
    direction's plan."""

    rows: np.ndarray
    regular: int
    directions: list[DirectionPlan]


def plan(conn: TcpConnection, piece: Packets, rows: np.ndarray,
         sides: np.ndarray) -> ConnectionPlan:  # fmt: skip
    """How far the connection's rows (`sides`: which side sent each) are regular, and each
    direction's plan."""
    c = piece.columns
    k = len(rows)
    plans = []
    for side in (0, 1):
        where = np.flatnonzero(sides == side)
        if not len(where):
            continue
        stream = conn.streams[side]
        mine = rows[where]  # (each column gathered once, by the direction's rows)
        fl, sq, wl, pl = c.flags[mine], c.seq[mine], c.wlen[mine], c.plen[mine]
        syn = (fl & SYN) != 0
        bad = syn.copy()
        if stream.started:
            base = stream.next_seq
        elif syn[0]:
            base = (int(sq[0]) + 1) & SEQ_MASK
            bad[0] = False
        else:
            k = min(k, int(where[0]))  # midstream start: the exact code reports it
            continue
        rel = ((sq + syn) - base) & SEQ_MASK
        rel[rel >= HALF_SEQ_SPACE] -= 2 * HALF_SEQ_SPACE
        data = wl > 0
        ends = rel + wl
        run = np.maximum.accumulate(np.where(data, ends, 0))
        prev = np.empty_like(run)
        prev[0] = 0
        prev[1:] = run[:-1]
        np.maximum(prev, 0, out=prev)
        in_order = data & (rel == prev)
        retrans = data & (ends <= prev)
        # far from the run (over 2**30 bytes either way): whether it is ahead or behind
        # depends on where the stream is at that packet, which the exact code knows
        far = (rel < -(HALF_SEQ_SPACE >> 1)) | (ends > (HALF_SEQ_SPACE >> 1))
        irregular = bad | (data & ~in_order & ~retrans) | (pl < wl) | (data & far)
        if stream.cut_run is not None:  # the exact code ends the run of cut segments
            irregular |= data
        hit = np.flatnonzero(irregular)
        if len(hit):
            k = min(k, int(where[hit[0]]))
        plans.append(DirectionPlan(side, where, base, rel, ends, wl, in_order, retrans, fl))
    return ConnectionPlan(rows, k, plans)


def apply(conn: TcpConnection, piece: Packets, plan: ConnectionPlan, sink: RowSink) -> None:
    """The connection's regular rows applied in bulk: each direction's stream moved on,
    retransmissions reported, the in-order segments handed to the sink."""
    rows, k = plan.rows, plan.regular
    if k <= 0:
        return
    ts = piece.columns.ts
    for p in plan.directions:
        n = int(np.searchsorted(p.where, k))
        if not n:
            continue
        stream = conn.streams[p.side]
        if not stream.started:
            stream.started = True
            stream.isn = (p.base - 1) & SEQ_MASK
            stream.next_seq = p.base
        offset0 = stream.offset
        rrows = rows[p.where[:n]]
        for j in np.flatnonzero(p.retrans[:n]).tolist():
            r = int(rrows[j])
            sink.at_row(r)
            stream.report("retransmission", int(ts[r]), offset0 + int(p.rel[j]), int(p.wl[j]), "")
            sink.tag(r)
        fl = p.flags[:n]
        ends_fin = np.flatnonzero(fl & FIN)
        if len(ends_fin) and stream.fin_offset is None:
            j = int(ends_fin[0])
            stream.fin_offset = offset0 + int(p.rel[j]) + int(p.wl[j])
        if np.any(fl & RST):
            conn.rst = True
        if np.any((fl & (FIN | RST)) == FIN):
            conn.fin[p.side] = True
        io = np.flatnonzero(p.in_order[:n])
        if len(io):
            advance = int(p.ends[io[-1]])
            stream.next_seq = (p.base + advance) & SEQ_MASK
            stream.offset = offset0 + advance
            seg_rows = rrows[io]
            so_a, lo_a, po_a = offset0 + p.rel[io], p.wl[io], piece.columns.pstart[seg_rows]
            sink.in_order(conn, InOrder(p.side, _ints(so_a), _ints(lo_a), _ints(po_a), so_a,
                                        lo_a, po_a, seg_rows, ts[seg_rows],
                                        piece.columns.phead[seg_rows], piece.buf,
                                        piece.mv))  # fmt: skip
    conn.packets += k
    conn.end_ns = int(ts[rows[k - 1]])
