"""A small classic-pcap reader/writer for the benchmarks (no streamdissect import).

The benchmark inputs must not depend on the code under test, so making and counting them
uses this instead: libpcap's file format (magic a1b2c3d4 microseconds or a1b23c4d
nanoseconds, either byte order), one global header, then records of
(ts_sec, ts_frac, caplen, origlen) + caplen bytes.  pcapng is not handled here.
"""
from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

MAGIC_US = 0xA1B2C3D4
MAGIC_NS = 0xA1B23C4D
LINKTYPE_ETHERNET = 1


class PcapError(ValueError):
    pass


@dataclass
class PcapHeader:
    endian: str          # "<" or ">"
    nanos: bool          # timestamp fraction in ns (else us)
    version: tuple[int, int]
    snaplen: int
    linktype: int

    def pack(self) -> bytes:
        magic = MAGIC_NS if self.nanos else MAGIC_US
        return struct.pack(self.endian + "IHHiIII", magic, self.version[0], self.version[1],
                           0, 0, self.snaplen, self.linktype)


def read_header(f: BinaryIO) -> PcapHeader:
    raw = f.read(24)
    if len(raw) < 24:
        raise PcapError("file shorter than a pcap global header")
    for endian in "<>":
        (magic,) = struct.unpack(endian + "I", raw[:4])
        if magic in (MAGIC_US, MAGIC_NS):
            _, vmaj, vmin, _tz, _sig, snaplen, linktype = struct.unpack(endian + "IHHiIII", raw)
            return PcapHeader(endian, magic == MAGIC_NS, (vmaj, vmin), snaplen, linktype & 0xFFFF)
    raise PcapError(f"not a classic pcap file (magic {raw[:4].hex()}); pcapng is not handled")


def read_packets(f: BinaryIO, hdr: PcapHeader,
                 bufsize: int = 1 << 22) -> Iterator[tuple[int, int, int, bytes]]:
    """Yield (ts_sec, ts_frac, origlen, data) for each record, reading in large chunks."""
    rec = struct.Struct(hdr.endian + "IIII")
    buf = b""
    pos = 0
    while True:
        if len(buf) - pos < 16:
            more = f.read(bufsize)
            buf = buf[pos:] + more
            pos = 0
            if len(buf) < 16:
                if buf:
                    raise PcapError("truncated record header at end of file")
                return
        sec, frac, caplen, origlen = rec.unpack_from(buf, pos)
        end = pos + 16 + caplen
        if end > len(buf):
            more = f.read(max(bufsize, end - len(buf)))
            buf = buf[pos:] + more
            end -= pos
            pos = 0
            if end > len(buf):
                raise PcapError("truncated record at end of file")
        yield sec, frac, origlen, buf[pos + 16:end]
        pos = end


def count_packets(path: str) -> tuple[int, int]:
    """(packets, captured bytes) of a classic pcap, walking the record headers only."""
    n = total = 0
    with open(path, "rb") as f:
        hdr = read_header(f)
        rec = struct.Struct(hdr.endian + "IIII")
        while True:
            raw = f.read(16)
            if len(raw) < 16:
                break
            caplen = rec.unpack(raw)[2]
            f.seek(caplen, 1)
            n += 1
            total += caplen
    return n, total


class PcapWriter:
    def __init__(self, f: BinaryIO, hdr: PcapHeader) -> None:
        self.f = f
        self.rec = struct.Struct(hdr.endian + "IIII")
        self.packets = 0
        self.bytes = 0
        f.write(hdr.pack())

    def write(self, sec: int, frac: int, data: bytes, origlen: int | None = None) -> None:
        self.f.write(self.rec.pack(sec, frac, len(data), len(data) if origlen is None else origlen))
        self.f.write(data)
        self.packets += 1
        self.bytes += len(data)


def write_slice(src: str, dst: str, count: int) -> int:
    """Copy the first ``count`` packets of ``src`` to ``dst``; returns how many were copied."""
    with open(src, "rb") as f, open(dst, "wb") as g:
        hdr = read_header(f)
        w = PcapWriter(g, hdr)
        for sec, frac, origlen, data in read_packets(f, hdr):
            if w.packets >= count:
                break
            w.write(sec, frac, data, origlen)
        return w.packets
