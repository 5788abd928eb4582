"""Bounded decompression of Osiris sub-batch bodies (codes from facts §3.3).

Sub-batch bodies come from the network: a few kilobytes can claim to inflate to gigabytes.
Every codec here stops producing output at a limit (the claimed length plus a little slack,
and never above `max_size`), so a zip bomb costs at most that much memory.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

from streamdissect.protocols.stream.codes import CompressionType

DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024
SLACK = 64  # enough to notice an output longer than claimed, without trusting it
_SNAPPY_FEED = 4096  # a framed-snappy chunk inflates to <= 64 KiB, so feeding 4 KiB bounds output


class DecompressionError(Exception):
    """`kind` is "decompression_cap" when a bound stopped the output (a claimed length above
    the cap, or more output than claimed: a zip bomb), "malformed" for bad data."""

    def __init__(self, message: str, kind: str = "malformed") -> None:
        super().__init__(message)
        self.kind = kind


def _gzip(data: bytes, limit: int) -> bytes:
    inflater = zlib.decompressobj(wbits=31)
    try:
        return inflater.decompress(data, limit)
    except zlib.error as exc:
        raise DecompressionError(f"gzip: {exc}") from None


def _snappy(data: bytes, limit: int) -> bytes:
    import snappy  # python-snappy; framed format (the Java client's SnappyFramed*)

    inflater = snappy.StreamDecompressor()
    out = bytearray()
    try:
        for start in range(0, len(data), _SNAPPY_FEED):
            out += inflater.decompress(bytes(data[start : start + _SNAPPY_FEED]))
            if len(out) >= limit:
                break
    except Exception as exc:  # noqa: BLE001 - the library raises several types
        raise DecompressionError(f"snappy: {exc}") from None
    return bytes(out[:limit])


def _lz4(data: bytes, limit: int) -> bytes:
    import lz4.frame

    try:
        return lz4.frame.LZ4FrameDecompressor().decompress(bytes(data), max_length=limit)
    except RuntimeError as exc:
        raise DecompressionError(f"lz4: {exc}") from None


def _zstd(data: bytes, limit: int) -> bytes:
    import zstandard

    out = bytearray()
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(bytes(data))
        while len(out) < limit:
            piece = reader.read(limit - len(out))
            if not piece:
                break
            out += piece
    except zstandard.ZstdError as exc:
        raise DecompressionError(f"zstd: {exc}") from None
    return bytes(out)


_CODECS: dict[int, Callable[[bytes, int], bytes]] = {
    CompressionType.NONE: lambda data, limit: bytes(data[:limit]),
    CompressionType.GZIP: _gzip,
    CompressionType.SNAPPY: _snappy,
    CompressionType.LZ4: _lz4,
    CompressionType.ZSTD: _zstd,
}


def decompress(
    code: int, data: bytes, claimed_length: int, max_size: int = DEFAULT_MAX_DECOMPRESSED
) -> bytes:
    """Decompress a sub-batch body; raise DecompressionError rather than exceed the bounds."""
    codec = _CODECS.get(code)
    if codec is None:
        raise DecompressionError(f"unknown compression code {code}")
    if claimed_length > max_size:
        raise DecompressionError(
            f"claimed uncompressed length {claimed_length} exceeds the cap {max_size}",
            "decompression_cap",
        )
    limit = claimed_length + SLACK
    out = codec(data, limit + 1)
    if len(out) > limit:
        raise DecompressionError(
            f"output exceeds the claimed length {claimed_length}", "decompression_cap"
        )
    if len(out) != claimed_length:
        raise DecompressionError(
            f"decompressed {len(out)} bytes, the entry claims {claimed_length}"
        )
    return out
