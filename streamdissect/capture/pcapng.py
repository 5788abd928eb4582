"""pcapng files: sections in either byte order, several interfaces with their own
timestamp resolution, enhanced/simple/obsolete packet blocks; other blocks are skipped."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from streamdissect.capture.chunked import ChunkedFile
from streamdissect.capture.errors import AnomalyReport, CaptureError
from streamdissect.capture.limits import MAX_BLOCK, MAX_PACKET
from streamdissect.capture.pcap import Packet

SECTION_HEADER = 0x0A0D0D0A
INTERFACE_DESCRIPTION = 1
OBSOLETE_PACKET = 2
SIMPLE_PACKET = 3
ENHANCED_PACKET = 6
PACKET_BLOCKS = (ENHANCED_PACKET, SIMPLE_PACKET, OBSOLETE_PACKET)
BYTE_ORDER_MAGIC = 0x1A2B3C4D
OPT_END, OPT_TSRESOL, OPT_TSOFFSET = 0, 9, 14
DEFAULT_TSRESOL = 6  # microseconds when an interface does not say


def ts_converter(tsresol: int, offset_s: int):
    """Return f(raw units) -> ns for an if_tsresol byte (bit 7: power of 2, else of 10)."""
    exponent = tsresol & 0x7F
    offset_ns = offset_s * 1_000_000_000
    if tsresol & 0x80:
        return lambda units: ((units * 1_000_000_000) >> exponent) + offset_ns
    if exponent <= 9:
        scale = 10 ** (9 - exponent)
        return lambda units: units * scale + offset_ns
    divisor = 10 ** (exponent - 9)
    return lambda units: units // divisor + offset_ns


def _interface_options(body: memoryview, order: str) -> tuple[int, int]:
    """(if_tsresol, if_tsoffset) from an IDB's options; bounded by the body length."""
    tsresol, tsoffset = DEFAULT_TSRESOL, 0
    pos = 8
    while pos + 4 <= len(body):
        code, length = struct.unpack_from(order + "HH", body, pos)
        pos += 4
        if code == OPT_END or pos + length > len(body):
            break
        if code == OPT_TSRESOL and length >= 1:
            tsresol = body[pos]
        elif code == OPT_TSOFFSET and length >= 8:
            tsoffset = struct.unpack_from(order + "q", body, pos)[0]
        pos += (length + 3) & ~3
    return tsresol, tsoffset


class PcapngBlocks:
    """What a pcapng reader knows between blocks (the section's byte order, its interfaces,
    the last packet's time) and what it makes of each block. The reference reader below and
    the bulk engine's block walk (capture.pcapng_walk) both take blocks through it."""

    def __init__(self, path: str, report: AnomalyReport) -> None:
        self.path = path
        self.report = report
        self.order = "<"
        # per interface of the current section: (link type, snaplen, ts converter, if_tsresol,
        # if_tsoffset)
        self.interfaces: list[tuple] = []
        self.last_ts: int | None = None
        self.first = True

    def head(self, head: Any, offset: int) -> tuple[int, int] | None:
        """(block type, block length) from a block's first 12 bytes; None when nothing tells
        where the next block starts (reported: the rest of the file is lost). CaptureError
        when the file does not start as pcapng."""
        block_type = struct.unpack_from("<I", head)[0]
        if block_type == SECTION_HEADER:
            # The byte-order magic decides how every length in this section is read.
            magic = struct.unpack_from("<I", head, 8)[0]
            if magic == BYTE_ORDER_MAGIC:
                self.order = "<"
            elif magic == 0x4D3C2B1A:
                self.order = ">"
            elif self.first:
                raise CaptureError(f"{self.path}: pcapng section header has a bad byte-order magic")
            else:
                self.report("bad_block", self.last_ts, offset, "section header byte-order magic")
                return None
            self.interfaces = []
        elif self.first:
            raise CaptureError(f"{self.path}: pcapng file does not start with a section header")
        else:
            block_type = struct.unpack_from(self.order + "I", head)[0]
        self.first = False
        block_len = struct.unpack_from(self.order + "I", head, 4)[0]
        if block_len < 12 or block_len % 4:
            self.report("bad_block", self.last_ts, offset, f"block length {block_len}")
            return None
        return block_type, block_len

    def oversized(self, block_type: int, block_len: int, offset: int) -> bool:
        """Is the block longer than any real one of its kind? (Reported: it is skipped.)"""
        packet_block = block_type in PACKET_BLOCKS
        if block_len > (MAX_PACKET + 64 if packet_block else MAX_BLOCK):
            self.report("bad_block", self.last_ts, offset, f"block length {block_len} > cap")
            return True
        return False

    def block(self, block_type: int, block: memoryview, offset: int) -> Packet | None:
        """The packet of a whole block (its data a view of `block`), or None."""
        body = block[8 : len(block) - 4]
        if block_type == INTERFACE_DESCRIPTION:
            if len(body) < 8:
                self.report("bad_block", self.last_ts, offset, "interface block too short")
                return None
            linktype, _reserved, snaplen = struct.unpack_from(self.order + "HHI", body)
            tsresol, tsoffset = _interface_options(body, self.order)
            self.interfaces.append((linktype, snaplen, ts_converter(tsresol, tsoffset), tsresol,
                                    tsoffset))  # fmt: skip
            return None
        if block_type not in PACKET_BLOCKS:
            return None  # statistics, name resolution, custom, unknown: not ours
        fields = _packet_fields(block_type, body, self.order, self.interfaces)
        if isinstance(fields, str):
            self.report("bad_block", self.last_ts, offset, fields)
            return None
        iface, ts_hi, ts_lo, caplen, wirelen, data_start = fields
        linktype, _snaplen, to_ns = self.interfaces[iface][:3]
        if ts_hi is not None:
            self.last_ts = to_ns((ts_hi << 32) | ts_lo)
        # A simple packet block has no time: it inherits the previous packet's.
        return (self.last_ts or 0, linktype, body[data_start : data_start + caplen],
                max(wirelen, caplen), offset)  # fmt: skip


def read_pcapng(src: ChunkedFile, report: AnomalyReport) -> Iterator[Packet]:
    blocks = PcapngBlocks(src.path, report)
    while True:
        block_offset = src.offset
        if not src.ensure(12):
            if src.available or src.damage:
                report("truncated_file", blocks.last_ts, block_offset,
                       src.damage or "block header cut")  # fmt: skip
            return
        head = blocks.head(src.view[src.pos : src.pos + 12], block_offset)
        if head is None:
            return  # (nothing tells where the next block starts: the rest is lost)
        block_type, block_len = head
        if blocks.oversized(block_type, block_len, block_offset):
            if not src.skip(block_len):
                report("truncated_file", blocks.last_ts, src.offset, src.damage or "block cut")
                return
            continue
        block = src.take(block_len)
        if block is None:
            report("truncated_file", blocks.last_ts, block_offset, src.damage or "block cut")
            return
        packet = blocks.block(block_type, block, block_offset)
        if packet is not None:
            yield packet


def _packet_fields(block_type: int, body: memoryview, order: str,
                   interfaces: list) -> tuple | str:  # fmt: skip
    """(interface, timestamp high and low words or None, captured length, original length,
    where the data starts in the body) of a packet block, or what is wrong with it."""
    if block_type == ENHANCED_PACKET:
        if len(body) < 20:
            return "packet block too short"
        iface, ts_hi, ts_lo, caplen, wirelen = struct.unpack_from(order + "IIIII", body)
        data_start = 20
    elif block_type == OBSOLETE_PACKET:
        if len(body) < 20:
            return "packet block too short"
        iface, _drops, ts_hi, ts_lo, caplen, wirelen = struct.unpack_from(order + "HHIIII", body)
        data_start = 20
    else:  # simple packet block: interface 0, no timestamp of its own
        if len(body) < 4:
            return "packet block too short"
        iface, ts_hi, ts_lo = 0, None, None
        wirelen = struct.unpack_from(order + "I", body)[0]
        caplen = len(body) - 4
        if interfaces and interfaces[0][1]:
            caplen = min(caplen, interfaces[0][1])
        caplen = min(caplen, wirelen)
        data_start = 4
    if iface >= len(interfaces):
        return f"packet on undeclared interface {iface}"
    if caplen > len(body) - data_start:
        return f"captured length {caplen} beyond block"
    return iface, ts_hi, ts_lo, caplen, wirelen, data_start
