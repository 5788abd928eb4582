"""Classic libpcap files: microsecond and nanosecond magic, either byte order."""

from __future__ import annotations

import struct
from collections.abc import Iterator

from streamdissect.capture.chunked import ChunkedFile
from streamdissect.capture.errors import AnomalyReport, CaptureError
from streamdissect.capture.limits import MAX_PACKET

# magic as read little-endian -> (byte order prefix, nanoseconds per fraction unit)
PCAP_MAGICS = {
    0xA1B2C3D4: ("<", 1000),
    0xD4C3B2A1: (">", 1000),
    0xA1B23C4D: ("<", 1),
    0x4D3CB2A1: (">", 1),
}
FILE_HEADER_SIZE = 24
RECORD_HEADER_SIZE = 16

# (ts_ns, link type, captured bytes, original length, file offset of the record)
Packet = tuple[int, int, memoryview, int, int]


def read_pcap(src: ChunkedFile, magic: int, report: AnomalyReport) -> Iterator[Packet]:
    order, frac_ns = PCAP_MAGICS[magic]
    header = src.take(FILE_HEADER_SIZE)
    if header is None:
        raise CaptureError(f"{src.path}: pcap file header cut short")
    # The header's snaplen is ignored on purpose: a hostile 2**31 must not size anything.
    linktype = struct.unpack_from(order + "I", header, 20)[0] & 0x0FFFFFFF
    unpack_record = struct.Struct(order + "IIII").unpack_from
    buf, view, pos, end = src.buf, src.view, src.pos, len(src.buf)
    last_ts: int | None = None
    while True:
        if end - pos < RECORD_HEADER_SIZE:
            src.pos = pos
            if not src.ensure(RECORD_HEADER_SIZE):
                if src.available or src.damage:
                    report("truncated_file", last_ts, src.offset, src.damage or "record header cut")
                return
            buf, view, pos, end = src.buf, src.view, src.pos, len(src.buf)
        sec, frac, caplen, wirelen = unpack_record(buf, pos)
        if caplen > MAX_PACKET:
            # With a lying length there is no trustworthy next record: stop this file here.
            report("bad_record", last_ts, src.base + pos, f"captured length {caplen} > cap")
            return
        need = RECORD_HEADER_SIZE + caplen
        if end - pos < need:
            src.pos = pos
            if not src.ensure(need):
                report("truncated_file", last_ts, src.offset, src.damage or "record data cut")
                return
            buf, view, pos, end = src.buf, src.view, src.pos, len(src.buf)
        last_ts = sec * 1_000_000_000 + frac * frac_ns
        yield (
            last_ts,
            linktype,
            view[pos + RECORD_HEADER_SIZE : pos + need],
            max(wirelen, caplen),
            src.base + pos,
        )
        pos += need
