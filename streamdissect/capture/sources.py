"""Captures opened for the bulk engine: any file the reference reader takes (pcap or pcapng,
gzip'd or not, a file, standard input, a pipe such as a live capture's), and several files
read as one capture.

A Source is one capture file: its bytes (capture.chunked.ChunkedFile, the reference reader's
own, so gzip and pipes behave alike), where its records start, and its walk (pcap records,
or pcapng blocks: capture.pcapng_walk). Opening checks the file the way
capture.files.open_capture does, so a file that is no capture raises CaptureError at once.

Several files are one capture merged in time order (heapq.merge in engine.stream, the
reference). A rotated set is read file after file, which is that merge exactly as long as
no record of a file is later than the first record of a file after it. Opening the set reads
each file's first packet as the reference does at that moment (with its anomalies before
it, reported then, in file order), so each Source knows the bound its records must keep
(`bound`) and which anomalies were told already (`quiet_before`); a record past the bound
ends the walk with a MERGE piece, and the files are merged the reference way from there.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from streamdissect.capture.blocks import ANOMALY, BLOCK_REGION, MERGE, PACKETS, PcapWalk, sliding
from streamdissect.capture.chunked import STDIN, ChunkedFile
from streamdissect.capture.errors import AnomalyReport, CaptureError, ignore_anomaly
from streamdissect.capture.files import capture_magic, open_capture
from streamdissect.capture.pcap import FILE_HEADER_SIZE, PCAP_MAGICS
from streamdissect.capture.pcapng import PcapngBlocks
from streamdissect.capture.pcapng_walk import PcapngWalk

DEFLATE_MOST = 1032  # the most bytes deflate makes of one


class Source:
    """One capture file as the bulk engine reads it."""

    def __init__(self, path: str, number: int = 0) -> None:
        self.path = path
        self.number = number  # in its set
        self._read = 0  # raw bytes read and not yet handed on (read_since)
        self.bytes = ChunkedFile(path, self._count)
        try:
            magic = capture_magic(self.bytes)
            if magic in PCAP_MAGICS:
                self.walker: Any = _pcap_walk(self.bytes, magic)
                self.data_start = FILE_HEADER_SIZE
            else:
                if self.bytes.ensure(12):  # (the reference's check of the first block)
                    first = self.bytes.view[self.bytes.pos : self.bytes.pos + 12]
                    PcapngBlocks(path, ignore_anomaly).head(first, 0)
                self.walker = PcapngWalk(path)
                self.data_start = 0
        except BaseException:
            self.bytes.close()
            raise
        self.skip = False  # (a file of a set with no packet: all it has was told on opening)
        self.bound: int | None = None  # no record may be later (see the module's text)
        self.quiet_before = 0  # its anomalies before this offset were told on opening

    @property
    def size(self) -> int | None:
        """About how many bytes it holds, None when unknown before reading it (a pipe): a
        gzip'd file's trailer says its inflated size (mod 2**32, of its last member only; a
        wrong one costs speed, never a result)."""
        if self.bytes.size is not None or not self.bytes.is_gzip:
            return self.bytes.size
        try:
            fd = self.bytes.fileno()
            held = os.fstat(fd)
            end = held.st_size
            if not stat.S_ISREG(held.st_mode) or end < 18:
                return None
            claimed = struct.unpack("<I", os.pread(fd, 4, end - 4))[0]
            # (deflate inflates at most ~1032:1: a trailer claiming more is not believed)
            return max(min(claimed, end * DEFLATE_MOST), end)
        except (OSError, ValueError):
            return None

    def _count(self, n: int) -> None:
        self._read += n

    def read_since(self) -> int:
        """Raw bytes (compressed ones for gzip) read since the last call: progress."""
        n, self._read = self._read, 0
        return n

    def close(self) -> None:
        self.bytes.close()

    def checked(self, pieces: list, walker: Any, memory: Any, offset_of: int) -> Iterator:
        """A walk's pieces, but the anomalies told when the set was opened; cut short by a
        MERGE piece at the first record later than the bound."""
        bound, quiet = self.bound, self.quiet_before
        for kind, payload in pieces:
            if kind == ANOMALY and payload[2] < quiet:
                continue
            if bound is not None and kind == BLOCK_REGION:
                late = np.flatnonzero(_times(memory, payload, walker.layout) > bound)
                if len(late):
                    k = int(late[0])
                    if k:
                        yield kind, payload[:k]
                    yield MERGE, (self.number, int(payload[k]) + offset_of + walker.layout.shift)
                    return
            elif bound is not None and kind == PACKETS:
                for k, packet in enumerate(payload):
                    if packet[0] > bound:
                        if k:
                            yield kind, payload[:k]
                        yield MERGE, (self.number, packet[4])
                        return
            yield kind, payload


def _pcap_walk(src: ChunkedFile, magic: int) -> PcapWalk:
    order, frac_ns = PCAP_MAGICS[magic]
    header = src.take(FILE_HEADER_SIZE)
    if header is None:
        raise CaptureError(f"{src.path}: pcap file header cut short")
    # (the snaplen is ignored, as the reference reader does)
    linktype = struct.unpack_from(order + "I", header, 20)[0] & 0x0FFFFFFF
    return PcapWalk(order, frac_ns, linktype)


def _times(memory: Any, starts: np.ndarray, layout: Any) -> np.ndarray:
    """The times of the records at `starts` (their headers' seconds and fractions)."""
    dtype = np.dtype({"names": ["sec", "frac"], "formats": [layout.order + "u4"] * 2,
                      "offsets": [0, 4], "itemsize": 8})  # fmt: skip
    h = sliding(memory, 0, len(memory), 8)[starts].view(dtype)
    return h["sec"].astype(np.int64) * 1_000_000_000 + h["frac"].astype(np.int64) * layout.frac_ns


def open_sources(paths: list[str],
                 reporter: Callable[[str], AnomalyReport]) -> list[Source] | None:  # fmt: skip
    """The capture's files opened for the bulk engine (CaptureError at once for a file that
    is none); None for a set the bulk engine does not read (several files of which one is
    no regular file). `reporter(path)`: where a file's anomalies go."""
    if len(paths) == 1:
        return [Source(paths[0])]
    if any(p == STDIN or not _regular(p) for p in paths):
        return None
    firsts = []
    for p in paths:  # (in order: the reference's opening reports as it goes)
        packets = open_capture(p, reporter(p))
        try:
            firsts.append(next(packets, None))
        finally:
            packets.close()
    sources = [Source(p, k) for k, p in enumerate(paths)]
    later: int | None = None
    for source, first in reversed(list(zip(sources, firsts))):
        source.bound = later
        if first is None:
            source.skip = True
            continue
        source.quiet_before = first[4]
        later = first[0] if later is None else min(later, first[0])
    return sources


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True  # (Source says why it cannot be opened)
