"""The newest packet time of a pcap byte stream as it goes by (a live capture tool's output,
in the pieces a pipe gives): record headers walked, packet bytes skipped, nothing kept but a
header cut between pieces. A live capture's stop waits on it (capture/live.py)."""

from __future__ import annotations

import struct

from streamdissect.capture.limits import MAX_PACKET
from streamdissect.capture.pcap import FILE_HEADER_SIZE, PCAP_MAGICS, RECORD_HEADER_SIZE


class PcapClock:
    """`newest_ns`: the time of the last packet whose header went by (None before the first;
    and for ever when the stream is not a pcap one, e.g. dumpcap's pcapng, or its lengths
    cannot be trusted: `lost`)."""

    __slots__ = ("_frac_ns", "_pending", "_skip", "_unpack", "lost", "newest_ns")

    def __init__(self) -> None:
        self.newest_ns: int | None = None
        self.lost = False
        self._pending = b""  # a header (the file's or a record's) cut between pieces
        self._skip = 0  # packet bytes still to go by before the next record header
        self._unpack = None
        self._frac_ns = 1000

    def feed(self, data: bytes) -> None:
        if self.lost:
            return
        buf = self._pending + data if self._pending else data
        at, end = self._skip, len(buf)
        if self._unpack is None:
            if end < FILE_HEADER_SIZE:
                self._pending = bytes(buf)
                return
            layout = PCAP_MAGICS.get(int.from_bytes(buf[:4], "little"))
            if layout is None:
                self.lost = True
                return
            order, self._frac_ns = layout
            self._unpack = struct.Struct(order + "IIII").unpack_from
            at = FILE_HEADER_SIZE
        last = None
        while at + RECORD_HEADER_SIZE <= end:
            last = self._unpack(buf, at)
            if last[2] > MAX_PACKET:
                self.lost = True
                return
            at += RECORD_HEADER_SIZE + last[2]
        if at >= end:
            self._skip, self._pending = at - end, b""
        else:
            self._skip, self._pending = 0, bytes(buf[at:])
        if last is not None:
            self.newest_ns = last[0] * 1_000_000_000 + last[1] * self._frac_ns
