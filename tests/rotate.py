"""Cut a classic pcap into rotated pieces, as `tcpdump -C` does: the same file header in
each piece, whole packet records, a new piece once one holds its share of the bytes."""

from __future__ import annotations

import struct
from pathlib import Path

HEADER, RECORD = 24, 16


def records(data: bytes) -> list[bytes]:
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    out, pos = [], HEADER
    while pos + RECORD <= len(data):
        captured = struct.unpack_from(endian + "I", data, pos + 8)[0]
        out.append(data[pos : pos + RECORD + captured])
        pos += RECORD + captured
    return out


def cut(path: Path, pieces: int, out_dir: Path, offset: int = 0) -> list[Path]:
    """`path` cut into `pieces` files of about equal size (`offset`: packets moved from the
    first cut onwards, to put the cuts elsewhere); their paths, in order."""
    data = path.read_bytes()
    header, packets = data[:HEADER], records(data)
    share = max(1, len(packets) // pieces)
    bounds = [min(len(packets), k * share + (offset if k else 0)) for k in range(pieces)]
    bounds.append(len(packets))
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(pieces):
        piece = out_dir / f"{path.stem}.pcap{k or ''}"  # (tcpdump -C names: f, f1, f2...)
        piece.write_bytes(header + b"".join(packets[bounds[k] : bounds[k + 1]]))
        paths.append(piece)
    return paths


def timestamp_ns(record: bytes, endian: str = "<") -> int:
    """A packet record's time (microsecond pcap)."""
    seconds, micros = struct.unpack_from(endian + "II", record, 0)
    return seconds * 1_000_000_000 + micros * 1000


def cut_at(path: Path, bounds: list[int], out_dir: Path) -> list[Path]:
    """`path` cut before each packet index in `bounds` (ascending); the pieces' paths."""
    data = path.read_bytes()
    header, packets = data[:HEADER], records(data)
    edges = [0, *bounds, len(packets)]
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(len(edges) - 1):
        piece = out_dir / f"{path.stem}.pcap{k or ''}"
        piece.write_bytes(header + b"".join(packets[edges[k] : edges[k + 1]]))
        paths.append(piece)
    return paths
