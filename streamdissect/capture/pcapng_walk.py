"""A pcapng file's packets found block by block, for the bulk engine.

An Enhanced Packet Block holds, 12 bytes in, what a classic pcap record header holds: the
time in two 32-bit words, the captured and the original length, then the packet. So the
runs of ordinary EPBs are handed on in place, as pcap records at `block + 12`, once each
one's time is rewritten there as seconds and nanoseconds (frac_ns = 1) in the section's byte
order: no packet byte is copied. Every other block (section and interface blocks, simple and
obsolete packet blocks, an EPB on an interface of another link type or whose time the
columns cannot convert, anything damaged) goes through capture.pcapng.PcapngBlocks, the
reference reader's own code, and its packets are handed on one by one. The runs are walked
by compiled code when it is built and wanted (capture/_records.c: epb_run, loaded by
capture.native), else by _python_run, its reference.
"""

from __future__ import annotations

import re
import struct
from array import array
from typing import Any

import numpy as np

from streamdissect.capture import native
from streamdissect.capture.blocks import (
    ANOMALY,
    BLOCK_REGION,
    LAYOUT,
    PACKETS,
    RUN_MIN,
    RUN_PATTERNS,
    Layout,
    sliding,
)
from streamdissect.capture.limits import MAX_PACKET
from streamdissect.capture.pcapng import (
    ENHANCED_PACKET,
    INTERFACE_DESCRIPTION,
    SECTION_HEADER,
    PcapngBlocks,
)

EPB_HEAD = 12  # an EPB's pcap-like record starts this far into the block
EPB_MIN = 32  # type, length, interface, time (2 words), two lengths, trailing length
NS = 1_000_000_000
# Times handed on as u32 seconds and nanoseconds: from 1970 to 2106.
TS_END = (1 << 32) * NS


class PcapngWalk:
    """Walks a pcapng file's bytes, block by block (capture.blocks.read_blocks drives it)."""

    def __init__(self, path: str) -> None:
        self.pieces: list = []
        self.blocks = PcapngBlocks(path, self._report)
        self.layout: Layout | None = None
        self.regular: frozenset[int] = frozenset()  # interfaces whose EPBs are walked in place
        self.regular_mask = b""  # the same, a byte an interface (for the compiled run)
        self.scale = self.offset_ns = self.units_min = self.units_max = np.zeros(0)
        self.skipping = 0  # bytes of an oversized block still to pass over
        self.pending: bytearray | None = None  # a big non-packet block being gathered
        self.pending_at = self.pending_len = 0
        self.patterns: dict[int, Any] = {}

    def _report(self, kind: str, ts_ns: int | None, offset: int, detail: str) -> None:
        self.pieces.append((ANOMALY, (kind, ts_ns, offset, detail)))

    @property
    def last_ts(self) -> int | None:
        return self.blocks.last_ts

    # --- the walk ------------------------------------------------------------------------

    def walk(self, buf: Any, pos: int, end: int, offset_of: int) -> tuple[list, int, bool]:
        """(pieces, position after them, stopped) for the blocks in buf[pos:end]; a block's
        file offset is its position + `offset_of`. Pieces whose time matters are in order:
        a run of EPBs (BLOCK_REGION, their record starts), a block's packet (PACKETS), an
        anomaly (ANOMALY), a new layout for the runs after it (LAYOUT)."""
        self.pieces = pieces = []
        while pos < end:
            if self.skipping or self.pending is not None:
                pos = self._pass_over(buf, pos, end, offset_of)
                continue
            if self.layout is not None:
                starts, pos = self._run(buf, pos, end)
                if len(starts):
                    pieces.append((BLOCK_REGION, starts))
            if end - pos < 12:
                break
            step = self._one_block(buf, pos, end, offset_of)
            if step is None:
                return pieces, pos, True
            if step < 0:
                break
            pos += step
        return pieces, pos, False

    def finish(self, buf: Any, pos: int, end: int, offset_of: int, damage: str | None) -> list:
        """The anomaly of a file that ends at `end` (bytes left in a block, a damaged
        stream), as the reference reader reports it."""
        self.pieces = []
        blocks = self.blocks
        if self.skipping:
            self._report("truncated_file", blocks.last_ts, end + offset_of, damage or "block cut")
        elif self.pending is not None:
            self._report("truncated_file", blocks.last_ts, self.pending_at, damage or "block cut")
        elif end - pos < 12:
            if end > pos or damage:
                self._report("truncated_file", blocks.last_ts, pos + offset_of,
                             damage or "block header cut")  # fmt: skip
        else:
            offset = pos + offset_of
            head = blocks.head(buf[pos : pos + 12], offset)
            if head is not None:
                if blocks.oversized(*head, offset):
                    self._report("truncated_file", blocks.last_ts, end + offset_of,
                                 damage or "block cut")  # fmt: skip
                else:
                    self._report("truncated_file", blocks.last_ts, offset, damage or "block cut")
        return self.pieces

    def _one_block(self, buf: Any, pos: int, end: int, offset_of: int) -> int | None:
        """The block at `pos` the exact way: how far to move on (0: look again from `pos`;
        -1: the block is not whole yet), or None when the file is read no further."""
        blocks = self.blocks
        offset = pos + offset_of
        head = blocks.head(buf[pos : pos + 12], offset)
        if head is None:
            return None
        block_type, block_len = head
        if blocks.oversized(block_type, block_len, offset):
            self.skipping = block_len  # (passed over from here, over as many reads as it takes)
            return 0
        if end - pos < block_len:
            if block_len <= MAX_PACKET + 64:
                return -1
            # a big non-packet block (up to MAX_BLOCK): gathered on the side, read by read
            self.pending, self.pending_at, self.pending_len = bytearray(), offset, block_len
            return 0
        if block_type == ENHANCED_PACKET and self._switch(buf, pos):
            return 0
        self._take(block_type, memoryview(bytes(buf[pos : pos + block_len])), offset)
        return block_len

    def _pass_over(self, buf: Any, pos: int, end: int, offset_of: int) -> int:
        """Bytes of an oversized block passed over, or of a big block gathered."""
        if self.skipping:
            step = min(self.skipping, end - pos)
            self.skipping -= step
            return pos + step
        pending = self.pending
        step = min(self.pending_len - len(pending), end - pos)
        pending += buf[pos : pos + step]
        if len(pending) == self.pending_len:
            self.pending = None
            block_type = struct.unpack_from(self.blocks.order + "I", pending)[0]
            self._take(block_type, memoryview(bytes(pending)), self.pending_at)
        return pos + step

    def _take(self, block_type: int, block: memoryview, offset: int) -> None:
        """A whole block through the reference reader's code; its packet handed on."""
        packet = self.blocks.block(block_type, block, offset)
        if packet is not None:
            ts, linktype, data, wirelen, at = packet
            self.pieces.append((PACKETS, [(ts, linktype, bytes(data), wirelen, at)]))
        elif block_type in (SECTION_HEADER, INTERFACE_DESCRIPTION):
            self._interfaces_changed()

    # --- interfaces ------------------------------------------------------------------------

    def _interfaces_changed(self) -> None:
        """A section or interface block: which interfaces' EPBs the runs take, and how
        their times convert (a decimal resolution of at most nanoseconds; others go the
        exact way)."""
        interfaces = self.blocks.interfaces
        n = len(interfaces)
        self.scale = np.zeros(n, dtype=np.int64)
        self.offset_ns = np.zeros(n, dtype=np.int64)
        self.units_min = np.ones(n, dtype=np.uint64)
        self.units_max = np.zeros(n, dtype=np.uint64)
        for i, (_link, _snap, _to_ns, tsresol, tsoffset) in enumerate(interfaces):
            exponent = tsresol & 0x7F
            if tsresol & 0x80 or exponent > 9:
                continue
            scale, offset_ns = 10 ** (9 - exponent), tsoffset * NS
            low = max(0, -(offset_ns // scale))  # (the smallest units giving a time >= 0)
            high = (TS_END - 1 - offset_ns) // scale
            # (a time int64 arithmetic may miss goes the exact way, in Python's integers)
            if high < low or abs(offset_ns) >= 1 << 62 or high * scale >= 1 << 63:
                continue
            self.scale[i], self.offset_ns[i] = scale, offset_ns
            self.units_min[i], self.units_max[i] = low, high
        if self.layout is not None and self.layout.order != self.blocks.order:
            self.layout, self.regular = None, frozenset()  # (a section in the other order)
            self.regular_mask = b""
        elif self.layout is not None:
            self._regular_for(self.layout.linktype)

    def _regular_for(self, linktype: int) -> None:
        interfaces = self.blocks.interfaces
        self.regular = frozenset(i for i, f in enumerate(interfaces)
                                 if f[0] == linktype and self.scale[i])  # fmt: skip
        self.regular_mask = bytes(i in self.regular for i in range(len(self.scale)))
        self.patterns = {}

    def _switch(self, buf: Any, pos: int) -> bool:
        """An EPB the run stopped at, on an interface whose EPBs could be walked in place
        under another layout: switch to it (LAYOUT) and take the block in the next run."""
        blocks = self.blocks
        iface = struct.unpack_from(blocks.order + "I", buf, pos + 8)[0]
        if iface >= len(blocks.interfaces) or not self.scale[iface]:
            return False
        linktype = blocks.interfaces[iface][0]
        layout = Layout(blocks.order, 1, linktype, -EPB_HEAD)
        if layout == self.layout:
            return False  # (the run stopped for another reason: damage, a time out of range)
        self.layout = layout
        self._regular_for(linktype)
        self.pieces.append((LAYOUT, layout))
        return True

    # --- the runs of EPBs --------------------------------------------------------------------

    def _run(self, buf: Any, pos: int, end: int) -> tuple[np.ndarray, int]:
        """The record starts (block + 12) of the whole, ordinary EPBs from `pos`, their
        times rewritten in place; and where the run stopped. By the compiled run when it is
        loaded (capture.native), else _python_run."""
        compiled = native.loaded
        if compiled is None:
            return self._python_run(buf, pos, end)
        noted, pos, last_ns = compiled.epb_run(
            buf, pos, end, self.blocks.order == ">", MAX_PACKET + 64, self.regular_mask,
            self.scale, self.offset_ns, self.units_min, self.units_max)  # fmt: skip
        if last_ns >= 0:
            self.blocks.last_ts = last_ns
        return np.frombuffer(noted, dtype=np.int64), pos

    def _python_run(self, buf: Any, pos: int, end: int) -> tuple[np.ndarray, int]:
        """_run in Python (the reference of _records.epb_run)."""
        order = self.blocks.order
        heads = struct.Struct(order + "III").unpack_from
        regular, patterns = self.regular, self.patterns
        starts = array("q")
        app = starts.append
        prev = -1
        limit = MAX_PACKET + 64
        while end - pos >= 12:
            block_type, block_len, iface = heads(buf, pos)
            if (block_type != ENHANCED_PACKET or iface not in regular or block_len < EPB_MIN
                    or block_len > limit or block_len & 3 or end - pos < block_len):  # fmt: skip
                break
            if block_len == prev and block_len >= RUN_MIN:
                pattern = patterns.get((block_len, iface))
                if pattern is None and len(patterns) < RUN_PATTERNS:
                    field = re.escape(bytes(buf[pos : pos + 12]))
                    pattern = patterns[(block_len, iface)] = re.compile(
                        b"(?:%s.{%d})+" % (field, block_len - 12), re.DOTALL)
                if pattern is not None:
                    match = pattern.match(buf, pos, end)
                    count = (match.end() - pos) // block_len
                    starts.extend(range(pos, pos + count * block_len, block_len))
                    pos += count * block_len
                    continue
            prev = block_len
            app(pos)
            pos += block_len
        if not starts:
            return np.zeros(0, dtype=np.int64), pos
        return self._times(buf, np.frombuffer(starts, dtype=np.int64), pos)

    def _times(self, buf: Any, at: np.ndarray, pos: int) -> tuple[np.ndarray, int]:
        """The run's times converted and written back as seconds and nanoseconds; the run
        cut before the first block whose lengths or time the columns do not take."""
        order = self.blocks.order
        fields = np.dtype({"names": ["len", "iface", "hi", "lo", "caplen"],
                           "formats": [order + "u4"] * 5, "offsets": [0, 4, 8, 12, 16],
                           "itemsize": 20})  # fmt: skip
        h = sliding(buf, 0, len(buf), 20)[at + 4].view(fields)
        iface = h["iface"].astype(np.int64)
        units = (h["hi"].astype(np.uint64) << np.uint64(32)) | h["lo"].astype(np.uint64)
        ok = ((h["caplen"] <= h["len"] - EPB_MIN)
              & (units >= self.units_min[iface]) & (units <= self.units_max[iface]))  # fmt: skip
        if not ok.all():
            k = int(np.argmin(ok))
            at, pos, iface, units = at[:k], int(at[k]), iface[:k], units[:k]
            if not k:
                return at, pos
        ns = units.astype(np.int64) * self.scale[iface] + self.offset_ns[iface]
        pair = np.empty((len(at), 2), dtype=order + "u4")
        pair[:, 0] = ns // NS
        pair[:, 1] = ns % NS
        memory = np.frombuffer(buf, dtype=np.uint8)
        memory[(at + EPB_HEAD)[:, None] + np.arange(8)] = pair.view(np.uint8).reshape(-1, 8)
        self.blocks.last_ts = int(ns[-1])
        return at + EPB_HEAD, pos
