"""pcapng files: sections in either byte order, several interfaces with their own
timestamp resolution, enhanced/simple/obsolete packet blocks; other blocks are skipped."""

from __future__ import annotations

import struct
from collections.abc import Iterator

from streamdissect.capture.chunked import ChunkedFile
from streamdissect.capture.errors import AnomalyReport, CaptureError
from streamdissect.capture.limits import MAX_BLOCK, MAX_PACKET
from streamdissect.capture.pcap import Packet

SECTION_HEADER = 0x0A0D0D0A
INTERFACE_DESCRIPTION = 1
OBSOLETE_PACKET = 2
SIMPLE_PACKET = 3
ENHANCED_PACKET = 6
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


def read_pcapng(src: ChunkedFile, report: AnomalyReport) -> Iterator[Packet]:
    order = "<"
    # per interface of the current section: (link type, snaplen, ts converter)
    interfaces: list[tuple[int, int, object]] = []
    last_ts: int | None = None
    first = True
    while True:
        block_offset = src.offset
        if not src.ensure(12):
            if src.available or src.damage:
                report("truncated_file", last_ts, block_offset, src.damage or "block header cut")
            return
        head = src.view[src.pos : src.pos + 12]
        block_type = struct.unpack_from("<I", head)[0]
        if block_type == SECTION_HEADER:
            # The byte-order magic decides how every length in this section is read.
            magic = struct.unpack_from("<I", head, 8)[0]
            if magic == BYTE_ORDER_MAGIC:
                order = "<"
            elif magic == 0x4D3C2B1A:
                order = ">"
            elif first:
                raise CaptureError(f"{src.path}: pcapng section header has a bad byte-order magic")
            else:
                report("bad_block", last_ts, block_offset, "section header byte-order magic")
                return
            interfaces = []
        elif first:
            raise CaptureError(f"{src.path}: pcapng file does not start with a section header")
        else:
            block_type = struct.unpack_from(order + "I", head)[0]
        first = False
        block_len = struct.unpack_from(order + "I", head, 4)[0]
        if block_len < 12 or block_len % 4:
            # Nothing tells where the next block starts: the rest of the file is lost.
            report("bad_block", last_ts, block_offset, f"block length {block_len}")
            return
        packet_block = block_type in (ENHANCED_PACKET, SIMPLE_PACKET, OBSOLETE_PACKET)
        if block_len > (MAX_PACKET + 64 if packet_block else MAX_BLOCK):
            report("bad_block", last_ts, block_offset, f"block length {block_len} > cap")
            if not src.skip(block_len):
                report("truncated_file", last_ts, src.offset, src.damage or "block cut")
                return
            continue
        block = src.take(block_len)
        if block is None:
            report("truncated_file", last_ts, block_offset, src.damage or "block cut")
            return
        body = block[8 : block_len - 4]
        if block_type == INTERFACE_DESCRIPTION:
            if len(body) < 8:
                report("bad_block", last_ts, block_offset, "interface block too short")
                continue
            linktype, _reserved, snaplen = struct.unpack_from(order + "HHI", body)
            tsresol, tsoffset = _interface_options(body, order)
            interfaces.append((linktype, snaplen, ts_converter(tsresol, tsoffset)))
            continue
        if not packet_block:
            continue  # statistics, name resolution, custom, unknown: not ours
        fields = _packet_fields(block_type, body, order, interfaces)
        if isinstance(fields, str):
            report("bad_block", last_ts, block_offset, fields)
            continue
        iface, ts_hi, ts_lo, caplen, wirelen, data_start = fields
        linktype, _snaplen, to_ns = interfaces[iface]
        if ts_hi is not None:
            last_ts = to_ns((ts_hi << 32) | ts_lo)  # type: ignore[operator]
        # A simple packet block has no time: it inherits the previous packet's.
        yield (
            last_ts or 0,
            linktype,
            body[data_start : data_start + caplen],
            max(wirelen, caplen),
            block_offset,
        )


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
