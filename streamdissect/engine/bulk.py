"""The bulk engine: a classic pcap file read in large blocks, packets parsed as columns.

Same results as the streaming pipeline (dissect.Dissector with engine="stream"), event for
event, at a fraction of the cost per packet (tests/test_bulk_engine.py holds it to that).
This module drives the layers that do the work, block by block:

- capture.blocks: the file read in large blocks, record boundaries found (with a CPU to
  spare, by a forked helper that reads ahead into shared buffers);
- capture.packet_columns: link, IP and TCP headers parsed with numpy, the rest one by one;
- tcp.vectorized: per connection and direction, in-order segments and retransmissions moved
  past in one step, anything irregular handed to the exact per-packet code (FlowTable);
- framing.walk: frames walked straight over the in-order segments;
- the protocol's fast path (protocols.stream.fast_path): hot frames made into records, or
  noted and decoded as columns at the block's end.

The state the exact code keeps (FlowTable, TcpConnection, DirectionReassembler, Framer) is
the one the bulk engine updates, so the two hand over at any packet. Events are tagged with
the packet that produced them and sorted per block, which gives the streaming order. When a
Tune of one direction could have mattered to the other, walked on its own clock
(framing.walk.LimitCheck), the connection's block is undone and done again packet by packet.
"""

from __future__ import annotations

import contextlib
import heapq
import mmap
from collections.abc import Iterator
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from streamdissect.capture import blocks, open_capture, packet_columns
from streamdissect.capture.blocks import (
    ANOMALY,
    BLOCK_REGION,
    FILE,
    LAYOUT,
    MERGE,
    PACKETS,
    SLOTS,
    Layout,
    Reading,
    SharedSlots,
    can_fork,
    helper_layout,
    layout,
)
from streamdissect.capture.limits import MAX_PACKET
from streamdissect.capture.packet_columns import (
    COLUMNS,
    PacketLayout,
    Packets,
    packets,
    parse_packets,
    read_parsed,
    slot_columns,
    write_parsed,
)
from streamdissect.capture.pcap import RECORD_HEADER_SIZE
from streamdissect.capture.sources import Source
from streamdissect.engine.anomalies import Anomaly
from streamdissect.engine.stream import dissect_packet
from streamdissect.framing.walk import BlockEvents, LimitCheck, PlainFrames, Walk, walk
from streamdissect.tcp import vectorized
from streamdissect.tcp.connection import TcpConnection
from streamdissect.tcp.vectorized import InOrder

if TYPE_CHECKING:
    from streamdissect.engine.state import DissectionState

__all__ = ["BulkCapture"]


class BlockBuffer(NamedTuple):
    """A buffer blocks are read into: the buffer (a bytearray, or a view of a helper's
    slot), as a memoryview, where it starts in its memory, and the views the fast path
    gathers from."""

    buf: Any
    mv: memoryview
    memory: Any
    at: int
    size: int
    views: Any


class BulkCapture:
    """Runs a capture (capture.sources: one file or a set, any format and any kind of
    file) through a dissection state, block by block."""

    def __init__(self, state: DissectionState, sources: list[Source]) -> None:
        self.state = state
        self.sources = sources
        self.path = sources[0].path  # the file being read (its anomalies name it)
        self.rows_before = 0  # packets of earlier blocks (global packet numbers)
        self.last_ts: int | None = None
        self.anomalies_made = 0  # state.anomalies_made when the last block's were collected
        self.layout: PacketLayout | None = None
        self.shift = 0  # (the layout's: a record's start to its block's file offset)
        self.headers: dict = {}  # (slot, layout) -> the layout's views of the slot
        self.fast: Any = None  # the fast path of the protocols that have one
        self.plain: dict = {}  # protocol -> the plain walk of its connections (no fast path)
        self.buffer: BlockBuffer | None = None  # the block's
        self.events: BlockEvents | None = None  # the block's
        self.walk: Walk | None = None  # the connection's being walked
        self.columns: list | None = None  # the helper's slots' columns

    # --- reading ---------------------------------------------------------------------

    def batches(self) -> Iterator[list]:
        """The events in order, a list at a time (a block's, then the end's): the caller
        chains them in C (itertools.chain), without a generator step per event."""
        state = self.state
        try:
            if state.out:  # (anomalies told when a set's files were opened)
                yield self._drained()
            sizes = [s.size for s in self.sources]
            block = blocks.BLOCK if None in sizes else min(blocks.BLOCK, max(sum(sizes), 1 << 16))
            patch_start = block + RECORD_HEADER_SIZE + MAX_PACKET + packet_columns.PAD
            # The protocol's fast path in the frame walk, made per run: (state, where its
            # room starts in a block buffer) -> what framing.walk.PlainFrames offers.
            fast_path = state.fast_path
            self.fast = fast_path(state, patch_start)
            size = patch_start + fast_path.ROOM
            reading = Reading(self.sources, block)
            if state.helper_process and block == blocks.BLOCK and can_fork():  # (over a block)
                yield from self._with_helper(reading, size)
            else:
                buffer = self._buffer(bytearray(size), 0, size)
                pieces = ((*piece, -1) for piece in layout(reading, buffer.buf))
                try:
                    yield from self._pieces(pieces, [buffer])
                finally:
                    buffer = pieces = None
                    self._release()
            yield list(state.finish_capture(self.last_ts or 0))
        finally:
            for source in self.sources:
                source.close()

    def _with_helper(self, reading: Reading, size: int) -> Iterator[list]:
        """The blocks read and walked by a forked helper into SLOTS shared buffers, each
        followed by its columns (the helper parses the packets too)."""
        area = COLUMNS * packet_columns.MAX_ROWS * 8
        stride = size + _HelperParse.areas * area  # a slot: data, then its column areas
        shared = mmap.mmap(-1, SLOTS * stride)
        try:
            buffers = [self._buffer(shared, k * stride, size) for k in range(SLOTS)]
            self.columns = [[slot_columns(shared, k * stride + size + a * area)
                             for a in range(_HelperParse.areas)] for k in range(SLOTS)]  # fmt: skip
            parse = _HelperParse(self, buffers, self.columns)
            pieces = helper_layout(reading, SharedSlots(shared, stride), parse)
            yield from self._pieces(pieces, buffers)
        finally:
            # (no view of the shared memory may stay for it to close)
            buffers = parse = self.columns = None
            self._release()
            with contextlib.suppress(BufferError):
                shared.close()

    def _release(self) -> None:
        """No block buffer held once the blocks are done: the state (kept after the run for
        its tables) would keep it, a block's size or more, through this engine and the fast path's
        views."""
        self.buffer = self.events = self.walk = None
        self.headers = {}
        self.fast.use(None, None, None)

    def _buffer(self, memory: Any, at: int, size: int) -> BlockBuffer:
        """memory[at : at + size] as a block buffer."""
        mv = memoryview(memory)[at : at + size]
        whole = memory if at == 0 and len(memory) == size else mv
        return BlockBuffer(whole, mv, memory, at, size, self.fast.views(memory, at, size))

    def headers_of(self, slot: int, buffer: BlockBuffer) -> tuple:
        """The packet parser's views of a slot's buffer for the layout in force."""
        key = (slot, self.layout)
        views = self.headers.get(key)
        if views is None:
            views = self.headers[key] = self.layout.views(buffer.memory, buffer.at, buffer.size)
        return views

    def _pieces(self, pieces: Iterator, buffers: list) -> Iterator[list]:
        state = self.state
        for kind, slot, base, read, payload, flows in pieces:
            if kind == BLOCK_REGION:
                self.buffer = buffer = buffers[slot]
                self.fast.use(buffer.buf, buffer.mv, buffer.views)
                if state.on_read is not None and read:
                    state.on_read(read)
                base += self.shift
                if flows >= 0:  # parsed by the helper (one piece: at most MAX_ROWS records)
                    area, n = payload
                    yield self._block(*read_parsed(self.columns[slot][area], n, flows), base)
                    continue
                starts = np.frombuffer(payload, dtype=np.int64)
                headers = self.headers_of(slot, buffer)
                rows = packet_columns.MAX_ROWS
                for at in range(0, len(starts), rows):
                    piece = starts[at : at + rows]
                    yield self._block(piece, parse_packets(headers, piece, self.layout), base)
            elif kind == LAYOUT:
                self.layout = PacketLayout.of(payload.order, payload.frac_ns, payload.linktype)
                self.shift = payload.shift
            elif kind == FILE:
                if payload >= 0:
                    self.path = self.sources[payload].path
            elif kind == ANOMALY:
                state.file_anomaly(self.path, *payload)
                yield self._drained()
            elif kind == PACKETS:
                yield self._exact(payload)
            elif kind == MERGE:
                yield from self._merged(*payload)

    # --- packets between blocks ----------------------------------------------------------

    def _exact(self, packets_: list) -> list:
        """Packets (capture.pcap.Packet) through the exact per-packet code, between blocks."""
        state = self.state
        segment = state.flows.segment
        for ts, linktype, data, _wire_len, offset in packets_:
            state.at_row(self.rows_before)
            self.rows_before += 1
            dissect_packet(state, segment, ts, linktype, data, offset)
            self.last_ts = ts
        return self._drained()

    def _drained(self) -> list:
        """What the state has made outside a block (its anomalies now in the table)."""
        state = self.state
        made = state.out[:]
        state.out.clear()
        if self.anomalies_made != state.anomalies_made:
            self.anomalies_made = state.anomalies_made
            state.anomalies.extend([ev for ev in made if ev.__class__ is Anomaly])
        return made

    def _merged(self, number: int, offset: int) -> Iterator[list]:
        """From file `number`'s record at `offset` on, the set's files overlap in time: the
        rest merged in time order the reference way (engine.stream), packet by packet."""
        rest = []
        for source in self.sources[number:]:
            if source.skip:
                continue
            told = offset if source.number == number else source.quiet_before
            report = _told_after(self.state.file_reporter(source.path), told)
            rest.append(_from_offset(open_capture(source.path, report), told))
        for packet in heapq.merge(*rest, key=itemgetter(0)):
            yield self._exact([packet])

    # --- one block -------------------------------------------------------------------

    def _block(self, starts: np.ndarray, parsed: packet_columns.Parsed, base: int) -> list:
        """The block's frame events and anomalies, in the streaming engine's order."""
        state, buffer = self.state, self.buffer
        piece = packets(starts, parsed, self.layout, buffer.buf, buffer.mv)
        self.last_ts = int(parsed.ts[-1])
        self.events = events = BlockEvents(state.out, self.at_row, state.frame_class)
        for r, problem in piece.problems.items():
            self.at_row(r)
            state.anomaly(int(parsed.ts[r]), problem.kind, base + int(starts[r]),
                          int(parsed.caplen[r]), problem.detail)  # fmt: skip
            events.tag(r)
        if piece.keys:
            self._connections(piece)
        self.rows_before += len(starts)
        ordered = self.fast.end_block(events)
        self.events = None
        if self.anomalies_made != state.anomalies_made:  # (most blocks have none)
            self.anomalies_made = state.anomalies_made
            state.anomalies.extend([ev for ev in ordered if ev.__class__ is Anomaly])
        return ordered if events.join is None else events.join(ordered)

    def _connections(self, piece: Packets) -> None:
        table = self.state.flows
        groups = vectorized.connections(table, piece, self)
        if groups is None:  # (a port may be reused: every packet the exact way)
            vectorized.exact(table, piece, np.flatnonzero(piece.columns.fid >= 0).tolist(), self)
            return
        for conn, rows, sides in groups:
            self._connection(conn, piece, rows, sides)

    def _connection(self, conn: TcpConnection, piece: Packets, rows: np.ndarray,
                    sides: np.ndarray) -> None:  # fmt: skip
        if conn.ignored:
            return
        owner = conn.owner
        table = self.state.flows
        if (
            owner is None
            or not owner.stream
            or (piece.slow and piece.slow.keys() & set(rows.tolist()))
            or not all(map(_walkable, conn.streams, owner.framers))
        ):
            vectorized.exact(table, piece, rows.tolist(), self)
            return
        plan = vectorized.plan(conn, piece, rows, sides)
        saved = (conn.snapshot(), [f.snapshot() for f in owner.framers], list(owner.frames))
        events_made, notes_made = len(self.events.items), self.fast.mark()
        plain = owner.protocol.fast_path is None
        fast = self._plain(owner.protocol) if plain else self.fast
        self.walk = Walk(self.events, LimitCheck(owner.framers[0]), fast)
        if plain:
            fast.begin_connection(owner)
        vectorized.apply(conn, piece, plan, self)
        if plain:  # (both directions walked: what needs their frames in time order)
            fast.end_connection(owner, self.events.items, events_made)
        check = self.walk.check
        if check.changes and check.wrong():
            # A Tune changed the frame limit while the other direction was walked on its own
            # clock: do this connection's block again, packet by packet.
            conn.restore(saved[0])
            for framer, framer_saved in zip(owner.framers, saved[1]):
                framer.restore(framer_saved)
            owner.frames[:] = saved[2]
            del self.events.items[events_made:]
            self.fast.undo(notes_made)
            vectorized.exact(table, piece, rows.tolist(), self)
            return
        if plan.regular < len(rows):
            vectorized.exact(table, piece, rows[plan.regular :].tolist(), self)

    def _plain(self, protocol: Any) -> Any:
        """The plain walk of a protocol without a fast path: its own help in the walk
        (Protocol.plain_walk), else PlainFrames (its framer decodes every frame)."""
        plain = self.plain.get(protocol)
        if plain is None:
            plain = self.plain[protocol] = (protocol.plain_walk or PlainFrames)(self.state)
        return plain

    # --- what the TCP walk tells (tcp.vectorized.RowSink) ------------------------------

    def at_row(self, row: int) -> None:
        self.state.at_row(self.rows_before + row)

    def tag(self, row: int) -> None:
        self.events.tag(row)

    def in_order(self, conn: TcpConnection, segments: InOrder) -> None:
        walk(conn.owner.framers[segments.side], segments, self.walk)


def _walkable(stream: Any, framer: Any) -> bool:
    """Is this direction in a state the walk can take over from?"""
    return not stream.pending and framer.ready_for_walk(stream.offset)


class _HelperParse:
    """(In the helper process.) parse_packets for a piece of a block just read into a slot,
    its results written into one of the slot's column areas: the number of flows.

    A block of small frames can have more records than one area holds (a 16 MiB one of the
    small-frame benchmark capture: ~73,000 of ~230 bytes; an 8 MiB one of records under 128
    bytes): two areas keep the parsing of such blocks in the helper, off the main process; a
    file of tinier records still
    has the rest of each block parsed by the main process, so that the areas, 7.5 MiB each,
    stay two a slot."""

    areas = 2

    def __init__(self, engine: BulkCapture, buffers: list, columns: list) -> None:
        self.engine, self.buffers, self.columns = engine, buffers, columns
        self.rows = packet_columns.MAX_ROWS  # (records an area holds)
        self.layouts: dict = {}

    def __call__(self, slot: int, area: int, starts: np.ndarray, layout: Layout) -> int:
        engine = self.engine
        engine.layout = self.layouts.get(layout)
        if engine.layout is None:
            engine.layout = self.layouts[layout] = PacketLayout.of(*layout[:3])
        headers = engine.headers_of(slot, self.buffers[slot])
        parsed = parse_packets(headers, starts, engine.layout)
        return write_parsed(self.columns[slot][area], parsed, starts)


def _from_offset(packets: Iterator, offset: int) -> Iterator:
    """The packets at file offset `offset` or after."""
    return (p for p in packets if p[4] >= offset)


def _told_after(report: Any, told: int) -> Any:
    """`report`, but for the anomalies before file offset `told` (told already)."""

    def after(kind: str, ts_ns: int | None, offset: int, detail: str) -> None:
        if offset >= told:
            report(kind, ts_ns, offset, detail)

    return after
