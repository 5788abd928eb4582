"""The fuzz campaign's check of the compiled loops (protocols/stream/_native.c) against the
Python code they replace: the walk (hot_walk.HotWalk's own run) on one direction's stream
cut into segments laid out in a block buffer between bytes of no segment (as packet headers
are), and the hot frames' decode (hot_native.decode against hot.decode) of every frame of
the stream.

benchmarks/fuzz.py calls `check_native_walk` and `check_native_decode` on every input of
its stream target; the pcap target compares the analyze report made with either walk to the
reference engine's, and `check_native_pcapng_walk` holds the compiled run of a pcapng
file's Enhanced Packet Blocks (capture/_records.c: epb_run) to PcapngWalk's Python one.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import numpy as np

from streamdissect.capture import CaptureError
from streamdissect.capture import native as capture_native
from streamdissect.capture.blocks import sliding
from streamdissect.capture.pcapng_walk import PcapngWalk
from streamdissect.protocols.stream import hot, hot_native, native
from streamdissect.protocols.stream.hot_walk import HotWalk
from streamdissect.tcp.vectorized import InOrder, _ints

LOWS = (4, 16, 60, 1000, 1 << 20)  # LimitCheck.low: frames above it are `big`
KEYS = (hot.HOT_KEYS, hot.HOT_KEYS - {hot.PUBLISH_KEY})


class Mismatch(Exception):
    """The two walks noted different frames (the campaign reports it as a finding)."""


def segments_of(stream: bytes, rng: random.Random) -> InOrder:
    """`stream` cut into segments of random sizes (sometimes at its frames' ends), each put
    into one buffer after 0-40 bytes of other data, with PAD bytes after it all."""
    cuts, pos = [], 0
    while pos < len(stream):
        step = rng.choice((1, 2, 3, 7, 8, 9, 13, 64, 200, 1460))
        if rng.random() < 0.5 and pos + 4 <= len(stream):  # (a frame's end)
            size = int.from_bytes(stream[pos : pos + 4], "big")
            step = size + 4 if 0 < size + 4 <= len(stream) - pos else step
        cuts.append((pos, min(step, len(stream) - pos)))
        pos += step
    buf = bytearray()
    so, lo, po = [], [], []
    for start, length in cuts:
        buf += rng.randbytes(rng.randrange(0, 41))
        so.append(start)
        lo.append(length)
        po.append(len(buf))
        buf += stream[start : start + length]
    buf += bytes(hot.PAD + 8)
    data = np.frombuffer(buf, dtype=np.uint8)
    po_a = np.array(po, dtype=np.int64)
    heads = sliding(data, 0, len(data), 8)[po_a].view(np.int64)
    so_a, lo_a = np.array(so, dtype=np.int64), np.array(lo, dtype=np.int64)
    rows = np.arange(len(so), dtype=np.int64)
    return InOrder(0, _ints(so_a), _ints(lo_a), _ints(po_a), so_a, lo_a, po_a, rows, rows,
                   heads, buf, memoryview(buf))  # fmt: skip


def _walk(segments: InOrder, keys: frozenset, low: int, limit: int, compiled: Any) -> tuple:
    """The hot runs of the whole stream, as HotWalk notes them (a frame it does not take is
    stepped over by its size, as the frame walk would after decoding it)."""
    framer = SimpleNamespace(frame_limit=limit, offset=0)
    w = SimpleNamespace(events=SimpleNamespace(items=[]), check=SimpleNamespace(low=low))
    data = np.frombuffer(segments.buf, dtype=np.uint8)
    walk = HotWalk(keys, segments, framer, w, sliding(data, 0, len(data), hot.HEAD_BYTES))
    walk.native = compiled
    if compiled is not None and walk.mask is None:
        from streamdissect.protocols.stream.hot_walk import _mask

        walk.mask = _mask(keys)
    send, pos, j, stops = segments.send, 0, 0, []
    while pos < send:
        pos, j = walk.run(pos, j)
        stops.append((pos, j))
        if pos + 8 > send:
            break
        size = int.from_bytes(segments.read(pos, pos + 4), "big")
        if size < 4:
            break
        pos += 4 + size
        if pos >= send:
            break
        j = int(np.searchsorted(segments.so_a, pos, side="right")) - 1
    return (stops, walk.starts.tolist(), walk.segs.tolist(), walk.big, walk.ends, walk.runs)


def check_native_walk(stream: bytes, rng: random.Random) -> bool:
    """Both walks over `stream` (random segments, frame limits, hot keys) note the same
    frames; False when the extension is not there to compare."""
    compiled = native.loaded
    if compiled is None or not stream:
        return False
    segments = segments_of(stream, rng)
    low = rng.choice(LOWS)
    limit = max(low, rng.choice(LOWS))
    keys = rng.choice(KEYS)
    python = _walk(segments, keys, low, limit, None)
    made = _walk(segments, keys, low, limit, compiled)
    if made != python:
        names = ("stops", "starts", "segs", "big", "ends", "runs")
        which = [name for name, a, b in zip(names, made, python) if a != b]
        raise Mismatch(f"the compiled walk differs from the Python one in {which} (low {low}, "
                       f"limit {limit}, {len(segments.so)} segments)")
    return True


def _columns(c: hot.HotColumns) -> tuple:
    """What a HotColumns says, comparable (a frame's ids by its start and count)."""
    ids = [c.id_values[a : a + n].tolist() if n >= 0 else None
           for a, n in zip(c.id_starts.tolist(), c.id_counts.tolist())]  # fmt: skip
    fields = {name: (values.dtype.str, values.tolist(), valid.tolist())
              for name, (values, valid) in c.fields.items()}  # fmt: skip
    return (c.key.tolist(), c.version.tolist(), c.size.tolist(), c.accepted.tolist(), fields,
            ids, c.id_values.tolist(), c.crc.tolist())  # fmt: skip


def check_native_decode(stream: bytes, rng: random.Random) -> bool:
    """Both decodes of the stream's whole frames (each at its start in a padded buffer, with
    a random CRC limit and with or without the whole chunk header) give the same columns;
    False when the extension is not there or the stream has no whole frame."""
    compiled = native.loaded
    if compiled is None:
        return False
    starts, pos = [], 0
    while pos + 8 <= len(stream):
        end = pos + 4 + int.from_bytes(stream[pos : pos + 4], "big")
        if end > len(stream) or end < pos + 8:
            break
        starts.append(pos)
        pos = end
    if not starts:
        return False
    data = np.frombuffer(stream[:pos] + bytes(hot.PAD), dtype=np.uint8)
    at = np.array(starts, dtype=np.int64)
    crc_limit = rng.choice((None, 0, 100, 1 << 20))
    whole_chunk = rng.random() < 0.5
    python = _columns(hot.decode(data, at, crc_limit, {}, whole_chunk, hot.NO_MESSAGES))
    made = _columns(hot_native.decode(compiled, data, at, crc_limit, {}, whole_chunk,
                                      hot.NO_MESSAGES))
    if made != python:
        names = ("key", "version", "size", "accepted", "fields", "ids", "id pool", "crc")
        which = [name for name, a, b in zip(names, made, python) if a != b]
        raise Mismatch(f"the compiled decode differs from the Python one in {which} "
                       f"({len(starts)} frames, crc_limit {crc_limit})")
    return True


PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"


def pcapng_walked(data: bytes, compiled: Any, reads: list[int]) -> tuple:
    """What PcapngWalk makes of the pcapng file `data` with the compiled run (the module) or
    the Python one (None), its bytes read up to each of `reads` in turn: the pieces of each
    read (arrays as lists), the bytes after the walk (times rewritten in place), the last
    time."""
    kept = capture_native.loaded
    capture_native.loaded = compiled
    try:
        buf = bytearray(data)
        walk = PcapngWalk("walked.pcapng")
        pos, made = 0, []
        try:
            for end in [*reads, len(buf)]:
                pieces, pos, stopped = walk.walk(buf, pos, max(end, pos), 0)
                made.append(_comparable(pieces))
                if stopped:
                    break
            else:
                made.append(_comparable(walk.finish(buf, pos, len(buf), 0, None)))
        except CaptureError as refused:  # (no pcapng file: the clear error the reader gives)
            made.append(("refused", str(refused)))
        return made, bytes(buf), walk.last_ts
    finally:
        capture_native.loaded = kept


def _comparable(pieces: list) -> list:
    return [(kind, payload.tolist() if isinstance(payload, np.ndarray) else payload)
            for kind, payload in pieces]  # fmt: skip


def check_native_pcapng_walk(data: bytes, rng: random.Random) -> bool:
    """Both runs walk the pcapng file `data`, read in 1-4 random pieces, alike: the same
    pieces, the same bytes after, the same last time; False when the extension is not there
    or `data` is no pcapng file."""
    compiled = capture_native.loaded
    if compiled is None or not data.startswith(PCAPNG_MAGIC):
        return False
    reads = sorted(rng.randrange(len(data) + 1) for _ in range(rng.randrange(4)))
    python = pcapng_walked(data, None, reads)
    made = pcapng_walked(data, compiled, reads)
    if made != python:
        names = ("pieces", "bytes after", "last time")
        which = [name for name, a, b in zip(names, made, python) if a != b]
        raise Mismatch(f"the compiled pcapng walk differs from the Python one in {which} "
                       f"(reads ending at {reads})")
    return True
