"""Open a capture file of any supported format and stream its packets."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator

from streamdissect.capture.chunked import ChunkedFile
from streamdissect.capture.errors import AnomalyReport, CaptureError, ignore_anomaly
from streamdissect.capture.pcap import PCAP_MAGICS, Packet, read_pcap
from streamdissect.capture.pcapng import SECTION_HEADER, read_pcapng


def open_capture(
    path: str,
    on_anomaly: AnomalyReport = ignore_anomaly,
    on_read: Callable[[int], None] | None = None,
) -> Iterator[Packet]:
    """Packets of a pcap/pcapng file, gzip'd or not, as tuples
    (ts_ns, link type, captured bytes as a memoryview, original length, file offset).

    Raises CaptureError at once (not at the first next()) when the file is not a capture.
    Damage later in the file is reported through `on_anomaly` and ends the iteration.
    `on_read(n)` hears of every n bytes read from the file (for progress bars).
    """
    src = ChunkedFile(path, on_read)
    try:
        magic = capture_magic(src)
        packets = read_pcap(src, magic, on_anomaly) if magic in PCAP_MAGICS else read_pcapng(
            src, on_anomaly)
        # The header is checked now so a bad file fails here, not at the first packet.
        first = next(packets, None)
    except BaseException:
        src.close()
        raise
    return _stream(src, first, packets)


def capture_magic(src: ChunkedFile) -> int:
    """The first four bytes of a capture (a pcap magic or pcapng's section header type),
    read without moving on; CaptureError when they are neither."""
    path = src.path
    if not src.ensure(4):
        raise CaptureError(
            f"{path}: not a capture file ({'empty' if not src.available else 'too short'})"
        )
    magic = struct.unpack_from("<I", src.buf, src.pos)[0]
    if magic not in PCAP_MAGICS and magic != SECTION_HEADER:
        what = "gzip'd data" if src.is_gzip else "data"
        raise CaptureError(
            f"{path}: not a pcap or pcapng capture ({what} starts with {bytes(src.buf[:4]).hex()})"
        )
    return magic


def _stream(src: ChunkedFile, first: Packet | None, rest: Iterator[Packet]) -> Iterator[Packet]:
    with src:
        if first is None:
            return
        yield first
        yield from rest
