#!/usr/bin/env python3
"""Structure-aware fuzz campaign for the codec, the framer, the capture readers and the
TCP reassembler.

    python benchmarks/fuzz.py --minutes 10              # split between the three targets
    python benchmarks/fuzz.py --frames 1000000 --pcaps 10000 --streams 20000

Targets (each input is run under a per-input time bound; memory is sampled with
tracemalloc on a share of the inputs, each in a child process, and as RSS growth over the
whole campaign, freed heap handed back after each round: fuzz_memory.py says why):

- frame:  one mutated frame -> decode_frame (with and without a declared size, as snaplen
          gives), then everything a user can ask of the record: to_dict both ways, repr,
          the text summary, re-encoding (must give back exactly the bytes: a record that
          encodes to other bytes would lie), record_from_dict, Deliver entries, records,
          tracking, bounded decompression, AMQP 1.0 decoding of every record payload, the
          `frames -V` tree and each message's dict (no body shown past --max-body); one
          frame in SCAPY_EVERY also through the scapy layer (same verdict and record, the
          same bytes built back, show() and summary() never raise).
- stream: a byte stream of mutated frames -> StreamFramer, fed whole and in random splits with
          missing bytes at random places; the split feeds must give the same frames and
          anomalies as the whole feed (TCP segmentation must not change what we report).
- pcap:   a mutated capture file (pcap or pcapng, sometimes gzip'd) -> the whole Dissector
          pipeline (capture readers, link/IP/TCP headers, reassembler, framer, codec) with
          every event turned into its jsonl and text output, its messages into the messages
          table's rows (no preview past --max-body); the frames as Arrow batches
          (frame_batches, in batches of BATCH_ROWS) must hold the record rows (frame_row),
          and turned back into events (protocols.stream.frame_events) give the collectors' tables of the
          records (where every frame's time fits the table's int64); a plain pcap
          is also cut into 2-4 rotated pieces and stitched (streamdissect.rotated), which
          must not fail.

Seeds are real frames and packets of the corpus (captures/*.pcap) plus crafted Deliver
chunks with sub-batches in every compression. Mutations know the layouts: the size field,
key, version, integer fields at every offset (string lengths, array counts), the Osiris
chunk header, sub-batch headers, AMQP 1.0 type codes and sizes; pcap record lengths, link,
IPv4/IPv6 and TCP header fields, sequence numbers, flags, packet order; plus truncations,
splices, insertions and deletions.

A finding (uncaught exception, broken invariant, time bound exceeded, memory bound
exceeded) is printed and its input saved under tests/regressions/ (replayed by
tests/test_fuzz_regressions.py); the exit status is then 1.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import json
import os
import random
import re
import resource
import signal
import struct
import sys
import tempfile
import time
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _place in (str(ROOT), str(ROOT / "benchmarks")):  # (the project; fuzz_memory beside this)
    if _place not in sys.path:
        sys.path.insert(0, _place)

from fuzz_memory import sampled
from fuzz_native import (
    Mismatch,
    check_native_decode,
    check_native_pcapng_walk,
    check_native_walk,
)

from streamdissect.analysis.driver import analyze_events
from streamdissect.capture import CaptureError
from streamdissect.capture import native as capture_native
from streamdissect.cli import _text_report as text_report
from streamdissect.cli._text_report import json_write, to_json
from streamdissect.cli.frames import HotLines, anomaly_dict, frame_dict, jsonl_writer
from streamdissect.engine.dissect import Anomaly, Dissector, FrameEvent
from streamdissect.protocols.stream import (
    MESSAGES,
    DecompressionError,
    Malformed,
    MalformedEntry,
    Record,
    SubBatch,
    Unknown,
    decode_amqp_message,
    decode_frame,
    decompress,
    encode_record,
    native,
    record_from_dict,
)
from streamdissect.protocols.stream.amqp import to_json as amqp_to_json
from streamdissect.protocols.stream.frame_events import frame_events
from streamdissect.protocols.stream.frame_table import frame_row
from streamdissect.protocols.stream.framing import StreamFramer
from streamdissect.protocols.stream.messages import (
    MessageRows,
    frame_messages,
    message_body,
    message_fields,
    table_row,
)
from streamdissect.protocols.stream.summary import frame_summary as summary
from streamdissect.protocols.stream.verbose import frame_tree
from streamdissect.scapy import StreamFrame, StreamMalformed, StreamUnknown
from streamdissect.tables import schema
from streamdissect.tables.batches import frames_arrow
from streamdissect.tables.convert import dataframe, release_free_memory

CAPTURES = ROOT / "captures"
REGRESSIONS = ROOT / "tests" / "regressions"
TESTS = str(ROOT / "tests")
EXTENSIONS = {"frame": ".frame", "stream": ".stream", "pcap": ".pcap"}

# Bounds for one input. Generous against a loaded 2-core machine; a real hang or a
# quadratic blow-up is far beyond them. The time is the process's CPU time (ITIMER_PROF):
# every target is pure computation, and a campaign under `nice` on a busy machine waits
# for a CPU far longer than it computes, which is no hang.
TIMER, TIMER_SIGNAL = signal.ITIMER_PROF, signal.SIGPROF
TIME_BOUND_S = {"frame": 2.0, "stream": 5.0, "pcap": 10.0}
MEMORY_BOUND = {"frame": 16 << 20, "stream": 16 << 20, "pcap": 32 << 20}
MAX_DECOMPRESSED = 1 << 20  # what the fuzzer lets a sub-batch inflate to
FUZZ_MAX_FRAME = 1 << 20  # the framer's cap in the stream target (the default is 8 MiB)
FUZZ_OOO_CAP = 64 * 1024  # small, so the cap path runs often
SAMPLE_MEMORY_EVERY = 97  # one input in this many runs under tracemalloc
BATCH_ROWS = 5  # the pcap target's frame batches are small, so a file makes several
SCAPY_EVERY = 4  # one frame in this many also goes through the scapy layer (it is slow)

KNOWN_KEYS = sorted({m.key for m in MESSAGES})
INTERESTING_32 = (0, 1, 2, 3, 4, 7, 8, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF,
                  0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF)  # fmt: skip
INTERESTING_16 = (0, 1, 2, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFE, 0xFFFF)
INTERESTING_8 = (0, 1, 0x0F, 0x10, 0x40, 0x50, 0x53, 0x70, 0x7F, 0x80, 0xA1, 0xB0, 0xC0,
                 0xD0, 0xE0, 0xF0, 0xFF)  # fmt: skip


class Hang(BaseException):
    """An input over its time bound. Not an Exception: code under test that guards its own
    work with `except Exception` (the codec turns its own bugs into malformed records) must
    not swallow it and give other output."""


class Finding(Exception):
    """An invariant that does not hold: the dissector would lie."""


# --------------------------------------------------------------------------------------
# Seeds


def _u32(v: int) -> bytes:
    return struct.pack(">I", v & 0xFFFFFFFF)


def _amqp_message(rng: random.Random) -> bytes:
    """A small AMQP 1.0 message: properties, application properties, data body."""
    props = b"\x00\x53\x73\xc0\x0b\x03\xa1\x03abc\x40\xa1\x02to"
    app = b"\x00\x53\x74\xc1\x0b\x02\xa1\x01k\xa1\x05value"
    body_bytes = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 20)))
    body = b"\x00\x53\x75\xa0" + bytes([len(body_bytes)]) + body_bytes
    nested = b"\x00\x53\x77" + b"\xc0\x03\x01" * 3 + b"\x40"
    return props + app + body + (nested if rng.random() < 0.3 else b"")


def _compress(code: int, data: bytes) -> bytes:
    if code == 1:
        return gzip.compress(data, mtime=0)  # (no clock in the bytes: a seed gives one campaign)
    if code == 2:
        import snappy

        return snappy.StreamCompressor().compress(data)
    if code == 3:
        import lz4.frame

        return lz4.frame.compress(data)
    if code == 4:
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    return data


def _sub_batch(code: int, records: list[bytes]) -> bytes:
    plain = b"".join(_u32(len(r)) + r for r in records)
    body = _compress(code, plain)
    return struct.pack(">BHII", 0x80 | code << 4, len(records), len(plain), len(body)) + body


def _deliver(entries: list[bytes], num_records: int, version: int, chunk_type: int = 0,
             trailer: bytes = b"") -> bytes:  # fmt: skip
    data = b"".join(entries)
    header = struct.pack(">BBHIqQQIIIBHB", 0x50, chunk_type, len(entries), num_records,
                         1_700_000_000_000, 3, 100, zlib.crc32(data), len(data), len(trailer),
                         0, 0, 0)  # fmt: skip
    prefix = b"\x01" + (struct.pack(">Q", 99) if version == 2 else b"")
    body = prefix + header + data + trailer
    return struct.pack(">IHH", len(body) + 4, 0x0008, version) + body


def crafted_frames(rng: random.Random) -> list[bytes]:
    frames = []
    for code in range(5):
        records = [_amqp_message(rng) for _ in range(3)]
        for version in (1, 2):
            frames.append(_deliver([_u32(len(records[0])) + records[0],
                                    _sub_batch(code, records)], 4, version))  # fmt: skip
        # a Publish (v1) carrying a sub-batch
        entry = _sub_batch(code, records)
        body = b"\x07" + struct.pack(">iQ", 1, 42) + entry
        frames.append(struct.pack(">IHH", len(body) + 4, 0x0002, 1) + body)
    tracking = b"\x00\x03abc" + struct.pack(">Q", 7)
    frames.append(_deliver([_u32(len(tracking)) + tracking], 1, 1, chunk_type=1))
    frames.append(_deliver([_u32(5) + b"hello"], 1, 1, trailer=b"\x00\x02id" + bytes(8)))
    return frames + long_list_frames(rng)


LONG_LIST = 101  # one past scapy's own conf.max_list_count (100): the scapy target reads more


def long_list_frames(rng: random.Random) -> list[bytes]:
    """Frames whose lists hold more than LONG_LIST - 1 items: Publish (v1, v2) batches, a
    PublishConfirm's ids, a Deliver chunk's entries, a Metadata request's streams."""
    n = LONG_LIST + rng.randrange(200)
    ids = range(1000, 1000 + n)
    v1 = b"\x07" + struct.pack(">i", n) + b"".join(struct.pack(">Q", i) + _u32(1) + b"x"
                                                   for i in ids)  # fmt: skip
    v2 = b"\x07" + struct.pack(">i", n) + b"".join(struct.pack(">Qh", i, 1) + b"f" + _u32(0)
                                                   for i in ids)  # fmt: skip
    confirm = b"\x07" + struct.pack(">i", n) + b"".join(struct.pack(">Q", i) for i in ids)
    streams = struct.pack(">Ii", 5, n) + b"".join(struct.pack(">h", 2) + b"s%d" % (i % 10)
                                                  for i in range(n))  # fmt: skip
    bodies = [(0x0002, 1, v1), (0x0002, 2, v2), (0x0003, 1, confirm), (0x000F, 1, streams)]
    frames = [struct.pack(">IHH", len(body) + 4, key, version) + body
              for key, version, body in bodies]  # fmt: skip
    frames.append(_deliver([_u32(2) + b"e%d" % (i % 10) for i in range(n)], n, 1))
    return frames


def corpus_packets() -> list[tuple[int, list[tuple[int, bytes, int]]]]:
    """(link type, packets) of every corpus capture, read without streamdissect."""
    out = []
    for path in sorted(CAPTURES.glob("*.pcap")):
        raw = path.read_bytes()
        order = "<" if raw[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        ns = raw[:4] in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
        linktype = struct.unpack_from(order + "I", raw, 20)[0]
        packets, pos = [], 24
        while pos + 16 <= len(raw):
            sec, frac, caplen, wirelen = struct.unpack_from(order + "IIII", raw, pos)
            data = raw[pos + 16 : pos + 16 + caplen]
            packets.append((sec * 10**9 + frac * (1 if ns else 1000), data, wirelen))
            pos += 16 + caplen
        out.append((linktype, packets))
        if linktype == 1:  # the same packets on the other link layers the bulk engine parses
            out += [(other, _relinked(packets, relink)) for other, relink in RELINKS.items()]
    return out


def _relinked(packets: list[tuple[int, bytes, int]], relink: Callable) -> list[tuple]:
    out = []
    for ts, data, wire_len in packets:
        moved = relink(data[14:], data[12:14])
        out.append((ts, moved, wire_len - len(data) + len(moved)))
    return out


# link type -> (IP packet, ethertype) -> that packet on this link layer
RELINKS = {
    113: lambda ip, et: struct.pack(">HHH8s", 0, 772, 6, b"\x00" * 8) + et + ip,  # Linux SLL
    276: lambda ip, et: et + struct.pack(">HIHBB8s", 0, 1, 772, 0, 6, b"\x00" * 8) + ip,  # SLL2
    0: lambda ip, et: struct.pack("<I", 2 if et == b"\x08\x00" else 10) + ip,  # BSD null
    108: lambda ip, et: struct.pack(">I", 2 if et == b"\x08\x00" else 24) + ip,  # OpenBSD loop
    101: lambda ip, et: ip,  # raw IP
}


def corpus_streams() -> list[bytes]:
    """Each direction's byte stream of every corpus connection (whole frames only)."""
    streams: dict[tuple[str, str], list[bytes]] = {}
    for path in sorted(CAPTURES.glob("*.pcap")):
        for ev in Dissector(deliver_keep_limit=None).run(str(path)):
            if isinstance(ev, FrameEvent) and not ev.record.truncated:
                streams.setdefault((f"{path.name} {ev.connection}", ev.direction), []).append(
                    encode_frame(ev.record)
                )
    return [b"".join(frames) for frames in streams.values() if frames]


def encode_frame(record: Any) -> bytes:
    return bytes(record.raw) if isinstance(record, (Malformed, Unknown)) else encode_record(record)


def corpus_frames(streams: list[bytes], per_kind: int = 12) -> list[bytes]:
    """Up to `per_kind` frames of each (key, version), small ones preferred."""
    by_kind: dict[tuple[int, int], list[bytes]] = {}
    for stream in streams:
        pos = 0
        while pos + 8 <= len(stream):
            size, key, version = struct.unpack_from(">IHH", stream, pos)
            frame = stream[pos : pos + 4 + size]
            pos += 4 + size
            if len(frame) <= 32 * 1024:
                by_kind.setdefault((key, version), []).append(frame)
    seeds = []
    for frames in by_kind.values():
        frames = sorted(set(frames), key=len)
        step = max(1, len(frames) // per_kind)
        seeds += frames[::step][:per_kind]
    return seeds


# --------------------------------------------------------------------------------------
# Mutators


def _put(buf: bytearray, at: int, fmt: str, value: int) -> None:
    size = struct.calcsize(fmt)
    if 0 <= at and at + size <= len(buf):
        struct.pack_into(fmt, buf, at, value & ((1 << (8 * size)) - 1))


def _deliver_layout(buf: bytes) -> tuple[int, int] | None:
    """(chunk header offset, data offset) of a Deliver frame, else None."""
    if len(buf) < 8 or struct.unpack_from(">H", buf, 4)[0] != 0x0008:
        return None
    version = struct.unpack_from(">H", buf, 6)[0]
    header = 9 + (8 if version == 2 else 0)
    return header, header + 48


def _entries(buf: bytes, start: int) -> list[tuple[int, bool]]:
    """(offset, is sub-batch) of each entry of a data section, as far as it parses."""
    found, pos = [], start
    while pos + 4 <= len(buf) and len(found) < 64:
        if buf[pos] & 0x80:
            if pos + 11 > len(buf):
                break
            length = struct.unpack_from(">I", buf, pos + 7)[0]
            found.append((pos, True))
            pos += 11 + length
        else:
            found.append((pos, False))
            pos += 4 + struct.unpack_from(">I", buf, pos)[0]
    return found


class FrameMutator:
    def __init__(self, rng: random.Random, seeds: list[bytes]) -> None:
        self.rng = rng
        self.seeds = seeds

    def interesting(self, width: int, around: int = 0) -> int:
        rng = self.rng
        if around and rng.random() < 0.3:
            return max(0, around + rng.randint(-9, 9))
        if width == 4:
            return rng.choice(INTERESTING_32) if rng.random() < 0.8 else rng.getrandbits(32)
        if width == 2:
            return rng.choice(INTERESTING_16) if rng.random() < 0.8 else rng.getrandbits(16)
        return rng.choice(INTERESTING_8) if rng.random() < 0.8 else rng.getrandbits(8)

    def mutate(self, seed: bytes | None = None) -> bytes:
        rng = self.rng
        buf = bytearray(seed if seed is not None else rng.choice(self.seeds))
        for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 5))):
            self.step(buf)
        return bytes(buf)

    def step(self, buf: bytearray) -> None:
        rng = self.rng
        n = len(buf)
        what = rng.randrange(16)
        if n < 9:
            buf += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
            return
        if what == 0:  # the size field
            _put(buf, 0, ">I", self.interesting(4, n - 4))
        elif what == 1:  # key
            key = rng.choice(KNOWN_KEYS) | (0x8000 if rng.random() < 0.4 else 0)
            _put(buf, 4, ">H", key if rng.random() < 0.9 else rng.getrandbits(16))
        elif what == 2:  # version
            _put(buf, 6, ">H", rng.choice((0, 1, 2, 3, 0xFFFF)))
        elif what in (3, 4):  # an integer field: counts, string/bytes lengths, ids
            width = rng.choice((1, 2, 2, 4, 4, 8))
            at = rng.randrange(8, max(9, n - width + 1))
            fmt = {1: ">B", 2: ">H", 4: ">I", 8: ">Q"}[width]
            value = self.interesting(min(width, 4), n - at)
            if width == 8 and rng.random() < 0.5:
                value = rng.choice((0, 1 << 63, (1 << 64) - 1, rng.getrandbits(64)))
            _put(buf, at, fmt, value)
        elif what == 5:  # byte flips
            for _ in range(rng.randrange(1, 4)):
                at = rng.randrange(n)
                buf[at] ^= 1 << rng.randrange(8)
        elif what == 6:  # truncation
            del buf[rng.randrange(4, n + 1) :]
        elif what == 7:  # insertion
            at = rng.randrange(8, n + 1)
            buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 12)))
        elif what == 8:  # deletion
            at = rng.randrange(8, n)
            del buf[at : at + rng.randrange(1, 12)]
        elif what == 9:  # splice with another seed
            other = rng.choice(self.seeds)
            cut = rng.randrange(8, n + 1)
            buf[cut:] = other[rng.randrange(0, len(other) + 1) :]
        elif what == 10:  # resize: keep the size field honest after other edits
            _put(buf, 0, ">I", n - 4)
        elif what in (11, 12):
            self.chunk_step(buf)
        elif what == 13:
            self.amqp_step(buf)
        elif what == 14:  # duplicate a slice (repeated entries, repeated map keys)
            at = rng.randrange(8, n)
            piece = bytes(buf[at : at + rng.randrange(1, 64)])
            buf[at:at] = piece * rng.randrange(1, 4)
        else:  # random bytes over a range
            at = rng.randrange(8, n)
            for i in range(at, min(n, at + rng.randrange(1, 16))):
                buf[i] = rng.randrange(256)
        if rng.random() < 0.5 and len(buf) >= 4 and what not in (0, 6, 10):
            _put(buf, 0, ">I", len(buf) - 4)  # most edits keep the frame length consistent

    def chunk_step(self, buf: bytearray) -> None:
        """Osiris chunk header fields and sub-batch headers of a Deliver frame."""
        rng = self.rng
        layout = _deliver_layout(bytes(buf[:8]))
        if layout is None:
            return
        header, data = layout
        field_at = {
            "magic": (0, ">B"), "type": (1, ">B"), "entries": (2, ">H"), "records": (4, ">I"),
            "data_length": (36, ">I"), "trailer_length": (40, ">I"), "bloom": (44, ">B"),
            "crc": (32, ">I"),
        }  # fmt: skip
        if rng.random() < 0.5:
            name = rng.choice(list(field_at))
            at, fmt = field_at[name]
            width = struct.calcsize(fmt)
            around = len(buf) - data if name == "data_length" else 0
            value = self.interesting(width, around)
            if name == "magic" and rng.random() < 0.7:
                value = 0x50 | rng.randrange(16)
            if name == "type" and rng.random() < 0.7:
                value = rng.randrange(4)
            _put(buf, header + at, fmt, value)
            return
        entries = _entries(bytes(buf), data)
        if not entries:
            return
        at, is_sub = rng.choice(entries)
        if is_sub:
            choice = rng.randrange(5)
            if choice == 0:  # flags: compression code, reserved bits
                buf[at] = 0x80 | rng.randrange(0x80)
            elif choice == 1:
                _put(buf, at + 1, ">H", self.interesting(2))  # num_records
            elif choice == 2:
                _put(buf, at + 3, ">I", self.interesting(4))  # uncompressed length
            elif choice == 3:
                _put(buf, at + 7, ">I", self.interesting(4, len(buf) - at - 11))  # length
            else:  # a zip bomb in place of the body
                code = rng.choice((1, 1, 3, 4))
                bomb = _compress(code, b"\x00" * rng.choice((1 << 16, 1 << 20, 4 << 20)))
                claimed = rng.choice((10, 1 << 16, 1 << 30, 0xFFFFFFFF))
                entry = struct.pack(">BHII", 0x80 | code << 4, 1, claimed, len(bomb)) + bomb
                stop = at + 11 + struct.unpack_from(">I", buf, at + 7)[0]
                buf[at:stop] = entry
        else:
            _put(buf, at, ">I", self.interesting(4, len(buf) - at - 4))

    def amqp_step(self, buf: bytearray) -> None:
        """Type codes and sizes inside AMQP 1.0 sections (found by their 0x00 0x53 prefix)."""
        rng = self.rng
        starts = [i for i in range(8, len(buf) - 3) if buf[i] == 0 and buf[i + 1] == 0x53]
        if not starts:
            return
        at = rng.choice(starts) + 3
        choice = rng.randrange(4)
        if choice == 0 and at < len(buf):
            buf[at] = rng.choice((0xA0, 0xB0, 0xA1, 0xB1, 0xC0, 0xD0, 0xC1, 0xD1, 0xE0, 0xF0,
                                  0x00, 0x40, 0x45, 0x98, 0x73, 0x55, 0x94))  # fmt: skip
        elif choice == 1:
            _put(buf, at + 1, rng.choice((">B", ">I")), self.interesting(4))
        elif choice == 2:  # deep nesting: list8 of list8 of ...
            depth = rng.choice((10, 31, 32, 33, 100, 1000))
            buf[at:at] = b"\xc0\x02\x01" * depth + b"\x40"
        else:  # described inside described
            buf[at:at] = b"\x00" * rng.choice((2, 40, 200)) + b"\x40\x40"


class StreamMutator:
    """A direction's byte stream with a few frames mutated, spliced or cut."""

    def __init__(self, rng: random.Random, streams: list[bytes], frames: FrameMutator) -> None:
        self.rng = rng
        self.streams = [s[: 64 * 1024] for s in streams]
        self.frames = frames

    def mutate(self) -> bytes:
        rng = self.rng
        stream = rng.choice(self.streams)
        starts, pos = [], 0
        while pos + 8 <= len(stream):
            starts.append(pos)
            pos += 4 + struct.unpack_from(">I", stream, pos)[0]
        first = rng.randrange(len(starts))
        window = starts[first : first + rng.randrange(1, 40)]
        frames = []
        for i, start in enumerate(window):
            end = starts[first + i + 1] if first + i + 1 < len(starts) else len(stream)
            frame = stream[start:end]
            if rng.random() < 0.15:
                frame = self.frames.mutate(frame)
            frames.append(frame)
        if rng.random() < 0.2:
            frames.insert(rng.randrange(len(frames) + 1), rng.choice(self.frames.seeds))
        out = b"".join(frames)
        if rng.random() < 0.3:  # start mid-way
            out = out[rng.randrange(min(len(out), 40)) :]
        if rng.random() < 0.1:
            out += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
        return out


# --- captures ---------------------------------------------------------------------------


def _pcap(linktype: int, packets: list[tuple[int, bytes, int]], *, ns: bool = False,
          big: bool = False, snaplen: int = 262144) -> bytes:  # fmt: skip
    order = ">" if big else "<"
    out = [struct.pack(order + "IHHiIII", 0xA1B23C4D if ns else 0xA1B2C3D4, 2, 4, 0, 0,
                       snaplen, linktype)]  # fmt: skip
    for ts, data, wirelen in packets:
        sec, frac = divmod(ts, 10**9)
        out.append(struct.pack(order + "IIII", sec & 0xFFFFFFFF, frac if ns else frac // 1000,
                               len(data), wirelen & 0xFFFFFFFF))  # fmt: skip
        out.append(data)
    return b"".join(out)


def _pcapng_block(block_type: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    return struct.pack("<II", block_type, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))


# if_tsresol of an interface: ns, us, ms, 2^-20 s, ps (the last two go the exact way)
TSRESOLS = (9, 9, 6, 3, 0x94, 12)


def _units(ts: int, tsresol: int, tsoffset: int) -> int:
    """A time in ns as an interface's units (0 before its offset)."""
    ns = max(0, ts - tsoffset * 10**9)
    if tsresol & 0x80:
        return ((ns << (tsresol & 0x7F)) // 10**9) & (2**64 - 1)
    return (ns * 10 ** (tsresol & 0x7F) // 10**9) & (2**64 - 1)


def _pcapng(linktype: int, packets: list[tuple[int, bytes, int]], rng: random.Random) -> bytes:
    """One section of 1-3 interfaces (their own time resolutions and offsets), packets on
    any of them, some in simple or other blocks."""
    interfaces = [(9, 0)] + [(rng.choice(TSRESOLS), rng.choice((0, 0, 1_000, -1_000)))
                             for _ in range(rng.choice((0, 0, 1, 2)))]  # fmt: skip
    out = [_pcapng_block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))]
    for tsresol, tsoffset in interfaces:
        offset = struct.pack("<HHq", 14, 8, tsoffset) if tsoffset else b""
        out.append(_pcapng_block(1, struct.pack("<HHI", linktype, 0, 0) + struct.pack("<HH", 9, 1)
                                 + bytes([tsresol, 0, 0, 0]) + offset
                                 + struct.pack("<HH", 0, 0)))  # fmt: skip
    for ts, data, wirelen in packets:
        iface = rng.randrange(len(interfaces))
        ts = _units(ts, *interfaces[iface])
        kind = rng.random()
        if kind < 0.05:
            out.append(_pcapng_block(3, struct.pack("<I", wirelen) + data))
        elif kind < 0.08:
            out.append(_pcapng_block(rng.choice((4, 5, 0x0BAD, 0x80000001)), data[:20]))
        else:
            out.append(_pcapng_block(6, struct.pack("<IIIII", iface, ts >> 32, ts & 0xFFFFFFFF,
                                                    len(data), wirelen) + data))  # fmt: skip
    return b"".join(out)


def _tcp_at(data: bytes) -> tuple[int, int] | None:
    """(IP header offset, TCP header offset) of an Ethernet + IPv4 + TCP frame."""
    if len(data) < 54 or data[12:14] != b"\x08\x00" or data[23] != 6:
        return None
    tcp = 14 + (data[14] & 0x0F) * 4
    return (14, tcp) if tcp + 20 <= len(data) else None


class PcapMutator:
    def __init__(self, rng: random.Random, captures: list, frames: FrameMutator) -> None:
        self.rng = rng
        self.captures = captures
        self.frames = frames

    def mutate(self) -> bytes:
        rng = self.rng
        linktype, packets = rng.choice(self.captures)
        if rng.random() < 0.5:  # a window of the capture
            start = rng.randrange(len(packets))
            packets = packets[start : start + rng.randrange(5, 80)]
        packets = list(packets)
        for _ in range(rng.choice((1, 1, 2, 3, 6))):
            self.packet_step(packets)
        if not packets:
            packets = [rng.choice(rng.choice(self.captures)[1])]
        container = rng.random()
        if container < 0.7:
            raw = bytearray(
                _pcap(
                    linktype,
                    packets,
                    ns=rng.random() < 0.3,
                    big=rng.random() < 0.2,
                    snaplen=rng.choice((262144, 65535, 96, 2**31, 0xFFFFFFFF)),
                )
            )
            if rng.random() < 0.3:
                self.record_step(raw)
        else:
            raw = bytearray(_pcapng(linktype, packets, rng))
            if rng.random() < 0.3:
                self.block_step(raw)
        if rng.random() < 0.08:
            del raw[rng.randrange(24, len(raw) + 1) :]
        if rng.random() < 0.08:
            raw = bytearray(gzip.compress(bytes(raw), compresslevel=1, mtime=0))
            if rng.random() < 0.3:
                del raw[rng.randrange(10, len(raw) + 1) :]
        return bytes(raw)

    def packet_step(self, packets: list[tuple[int, bytes, int]]) -> None:
        rng = self.rng
        if not packets:
            return
        i = rng.randrange(len(packets))
        ts, data, wirelen = packets[i]
        buf = bytearray(data)
        where = _tcp_at(data)
        what = rng.randrange(14)
        if what == 0 and where:  # sequence number
            _, tcp = where
            seq = struct.unpack_from(">I", buf, tcp + 4)[0]
            delta = rng.choice((1, -1, 1000, -1000, 1 << 31, rng.getrandbits(32)))
            _put(buf, tcp + 4, ">I", seq + delta)
        elif what == 1 and where:  # flags
            buf[where[1] + 13] = rng.choice((0x02, 0x12, 0x10, 0x18, 0x11, 0x04, 0x14, 0x01,
                                             rng.randrange(256)))  # fmt: skip
        elif what == 2 and where:  # TCP data offset
            _, tcp = where
            buf[tcp + 12] = (rng.randrange(16) << 4) | (buf[tcp + 12] & 0x0F)
        elif what == 3 and where:  # IHL, total length, protocol, fragment bits, version
            ip, _ = where
            choice = rng.randrange(5)
            if choice == 0:
                buf[ip] = 0x40 | rng.randrange(16)
            elif choice == 1:
                _put(buf, ip + 2, ">H", rng.choice((0, 1, 20, 40, len(buf) - 14 + 7, 0xFFFF)))
            elif choice == 2:
                buf[ip + 9] = rng.choice((6, 17, 1, 0))
            elif choice == 3:
                _put(buf, ip + 6, ">H", rng.choice((0x2000, 0x0010, 0x3FFF, 0x4000)))
            else:
                buf[ip] = (rng.randrange(16) << 4) | (buf[ip] & 0x0F)
        elif what == 4:  # ethertype / VLAN tags / IPv6 with extension loops
            choice = rng.randrange(3)
            if choice == 0:
                _put(buf, 12, ">H", rng.choice((0x0800, 0x86DD, 0x8100, 0x88A8, 0x0806)))
            elif choice == 1:
                buf[12:12] = b"\x81\x00\x00\x01" * rng.randrange(1, 7)
            elif where:
                buf = bytearray(self._as_ipv6(bytes(buf), where))
        elif what == 5 and where:  # the payload: mutate the frame in it
            _, tcp = where
            start = tcp + (buf[tcp + 12] >> 4) * 4
            if start + 8 <= len(buf):
                payload = self.frames.mutate(bytes(buf[start:]))
                buf[start:] = payload
                _put(buf, 16, ">H", len(buf) - 14)
        elif what == 6:  # drop
            del packets[i]
            return
        elif what == 7:  # duplicate later
            packets.insert(min(len(packets), i + rng.randrange(1, 5)), packets[i])
            return
        elif what == 8 and i + 1 < len(packets):  # reorder
            j = min(len(packets) - 1, i + rng.randrange(1, 5))
            packets[i], packets[j] = (packets[i][0], packets[j][1], packets[j][2]), (
                packets[j][0], data, wirelen)  # fmt: skip
            return
        elif what == 9:  # snaplen cut, wire length kept
            del buf[rng.randrange(0, len(buf) + 1) :]
        elif what == 10:  # wire length lies
            wirelen = rng.choice((0, len(buf), len(buf) + 1, 0xFFFFFFFF, rng.getrandbits(32)))
        elif what == 11:  # splice a packet of another capture
            packets.insert(i, rng.choice(rng.choice(self.captures)[1]))
            return
        elif what == 12:  # resegment: split a data segment in two
            if where:
                _, tcp = where
                start = tcp + (buf[tcp + 12] >> 4) * 4
                payload_len = len(buf) - start
                if payload_len > 2:
                    cut = rng.randrange(1, payload_len)
                    seq = struct.unpack_from(">I", buf, tcp + 4)[0]
                    first, second = bytearray(buf[: start + cut]), bytearray(buf[:start])
                    second += buf[start + cut :]
                    _put(second, tcp + 4, ">I", seq + cut)
                    for part in (first, second):
                        _put(part, 16, ">H", len(part) - 14)
                    packets[i : i + 1] = [(ts, bytes(first), len(first)),
                                          (ts, bytes(second), len(second))]  # fmt: skip
                    return
        else:  # time going backwards or far ahead
            ts = max(0, ts + rng.choice((-(10**9), 10**12, -ts)))
        packets[i] = (ts, bytes(buf), wirelen)

    @staticmethod
    def _as_ipv6(data: bytes, where: tuple[int, int]) -> bytes:
        _, tcp = where
        tcp_bytes = data[tcp:]
        chain = bytes([60, 0, 1, 4, 0, 0, 0, 0]) * 12  # a chain longer than the bound
        payload = chain + tcp_bytes
        header = struct.pack(">IHBB16s16s", 6 << 28, len(payload), 60, 64, b"\x20" * 16,
                             b"\x21" * 16)  # fmt: skip
        return data[:12] + b"\x86\xdd" + header + payload

    def record_step(self, raw: bytearray) -> None:
        """A classic pcap record header or the file header."""
        rng = self.rng
        choice = rng.randrange(4)
        if choice == 0:  # file header snaplen / link type / version
            _put(raw, 16, "<I", rng.choice((0, 2**31, 0xFFFFFFFF)))
            if rng.random() < 0.3:
                _put(raw, 20, "<I", rng.choice((0, 101, 113, 228, 229, 276, 0xFFFFFFFF)))
            return
        pos, records = 24, []
        while pos + 16 <= len(raw):
            records.append(pos)
            pos += 16 + struct.unpack_from("<I", raw, pos + 8)[0]
        if not records:
            return
        at = rng.choice(records)
        value = rng.choice((0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 300 * 1024,
                            len(raw) - at, len(raw) - at + 100))  # fmt: skip
        _put(raw, at + (8 if choice != 3 else 12), "<I", value)

    def block_step(self, raw: bytearray) -> None:
        """A pcapng block's type or length (either of its two length fields)."""
        rng = self.rng
        pos, blocks = 0, []
        while pos + 12 <= len(raw):
            blocks.append(pos)
            length = struct.unpack_from("<I", raw, pos + 4)[0]
            if length < 12:
                break
            pos += length
        if not blocks:
            return
        at = rng.choice(blocks)
        choice = rng.randrange(3)
        if choice == 0:
            _put(raw, at, "<I", rng.choice((0, 2, 3, 5, 6, 0x0A0D0D0A, rng.getrandbits(32))))
        elif choice == 1:
            _put(raw, at + 4, "<I", rng.choice((0, 8, 12, 13, 30, 1 << 30, 0xFFFFFFFC,
                                                 rng.getrandbits(32))))  # fmt: skip
        else:
            if at + 20 <= len(raw):
                _put(raw, at + 8 + rng.choice((0, 4, 12, 16)), "<I", self.frames.interesting(4))


# --------------------------------------------------------------------------------------
# Targets


def exercise(record: Any, frame: bytes | None) -> None:
    """Everything a user can ask of a record; raise Finding when an output would lie."""
    d = record.to_dict()
    json.dumps(d, default=str)
    secret = record.to_dict(show_secrets=True)
    json.dumps(secret, default=str)
    repr(record)
    summary(record)
    if frame is not None:
        if isinstance(record, (Malformed, Unknown)):
            if bytes(record.raw) != frame:
                raise Finding("Malformed/Unknown raw differs from the frame")
        elif not record.truncated:
            again = encode_record(record)
            if again != frame:
                raise Finding(f"{record.command} re-encodes to other bytes")
            rebuilt = record_from_dict(secret)
            if encode_frame(rebuilt) != frame:
                raise Finding(f"{record.command} to_dict/record_from_dict loses bytes")
    check_verbose(record)
    if not isinstance(record, Record):
        return
    if record.command == "Deliver" and not record.response:
        record.crc_ok  # noqa: B018
        for entry in record.entries():
            if isinstance(entry, MalformedEntry):
                break
        for item in record.messages(max_decompressed=MAX_DECOMPRESSED):
            if not isinstance(item, MalformedEntry):
                _amqp(item.data)
        record.tracking()
    elif record.command == "Publish" and record.messages is not None:
        try:
            items = list(record.messages)
        except Exception:
            if not record.truncated:
                raise
            items = []
        for item in items:
            entry = item.entry
            if isinstance(entry, SubBatch):
                try:
                    decompress(entry.compression, entry.data, entry.uncompressed_length,
                               MAX_DECOMPRESSED)  # fmt: skip
                except DecompressionError:
                    pass
            else:
                _amqp(entry)


VERBOSE_BODY = 64  # --max-body of the -V rendering the frame target checks


def check_verbose(record: Any) -> None:
    """`frames -V` of the record (and the message dicts of -Y and --messages): never raises,
    and no body shows more than --max-body bytes."""
    frame_tree(record, max_body=VERBOSE_BODY, max_decompressed=MAX_DECOMPRESSED)
    frame_tree(record, bodies=False, max_decompressed=MAX_DECOMPRESSED)
    for message in frame_messages(record, MAX_DECOMPRESSED):
        json.dumps(message_fields(message, VERBOSE_BODY), default=str)
        body = message_body(message, VERBOSE_BODY)
        shown = body.value if isinstance(body.value, (str, bytes)) else ""
        length = len(shown) // 2 if body.encoding == "hex" else len(
            shown.encode("utf-8", "surrogatepass") if isinstance(shown, str) else shown)
        if length > VERBOSE_BODY:
            raise Finding(f"-V shows {length} bytes of a body, past --max-body {VERBOSE_BODY}")


def _amqp(data: Any) -> None:
    message = decode_amqp_message(data)
    json.dumps(message.summary(), default=str)
    amqp_to_json(message.body)


def check_scapy(frame: bytes, record: Any) -> None:
    """The scapy layer reads what the codec reads: never raises, builds back the bytes, and
    a whole frame is malformed, unknown or the same record for both."""
    packet = StreamFrame(frame)
    packet.summary()
    packet.show(dump=True)
    if bytes(packet) != frame:
        raise Finding("the scapy layer builds other bytes than it dissected")
    if len(frame) < 8 or struct.unpack_from(">I", frame)[0] != len(frame) - 4:
        return  # (cut or followed by more bytes: the two read different spans)
    body = packet.payload
    if isinstance(record, Malformed) != isinstance(body, StreamMalformed):
        raise Finding(f"codec and scapy layer disagree on malformed: {record!r} / {body!r}")
    if isinstance(record, Unknown) != isinstance(body, StreamUnknown):
        raise Finding("codec and scapy layer disagree on unknown")
    same = packet.to_record().to_dict(show_secrets=True) == record.to_dict(show_secrets=True)
    if isinstance(record, Record) and not record.truncated and not same:
        raise Finding(f"the scapy layer reads another {record.command}")


def run_frame(frame: bytes) -> None:
    record = decode_frame(frame)
    if "internal error" in getattr(record, "reason", ""):
        raise Finding(f"decode_frame caught its own bug: {record.reason}")
    exercise(record, frame)
    if int.from_bytes(hashlib.sha1(frame).digest()[4:6], "big") % SCAPY_EVERY == 0:
        check_scapy(frame, record)
    if isinstance(record, Record) and not record.truncated and len(frame) > 8:
        # what snaplen leaves of a valid frame must not turn malformed (the framer's resync
        # judges cut candidates this way, so segmentation would change its output)
        digest = int.from_bytes(hashlib.sha1(frame).digest()[:4], "big")
        for cut in {8, len(frame) - 1, 8 + digest % (len(frame) - 8)}:
            prefix = decode_frame(frame[:cut], declared_size=len(frame) - 4)
            if isinstance(prefix, Malformed):
                raise Finding(f"{cut}-byte prefix of a valid {record.command} is malformed: "
                              f"{prefix.reason}")  # fmt: skip
    if len(frame) >= 4:
        size = struct.unpack_from(">I", frame)[0]
        if size > len(frame) - 4:  # as snaplen leaves it
            cut = decode_frame(frame, declared_size=size)
            if "internal error" in getattr(cut, "reason", ""):
                raise Finding(f"decode_frame caught its own bug: {cut.reason}")
            exercise(cut, None)


class _Collect:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def emit(self, offset: int, ts_ns: int, record: Any) -> None:
        self.events.append(("frame", offset, record.to_dict(show_secrets=True)))

    def report(self, kind: str, ts_ns: int, offset: int, length: int, detail: str) -> None:
        self.events.append(("anomaly", kind, offset, length))


def _framer(collect: _Collect, **options: Any) -> StreamFramer:
    return StreamFramer(collect.emit, collect.report, FUZZ_MAX_FRAME, **options)


def run_stream(stream: bytes) -> None:
    """Whole feed vs random splits into pieces of 1-9 bytes and of mixed sizes (same frames
    and anomalies), with the default Deliver keep limit and with the analyze report's (every
    Deliver kept by its head); then splits with missing bytes (must not raise, output
    bounded by the input)."""
    rng = random.Random(hashlib.sha1(stream).digest())
    for options in ({}, {"deliver_keep_limit": 0}):
        check_splits(stream, rng, lambda collect, o=options: _framer(collect, **o), str(options))
    check_gaps(stream, rng, _framer, FUZZ_MAX_FRAME)
    try:  # (the compiled loops against the Python ones)
        check_native_walk(stream, rng)
        check_native_decode(stream, rng)
    except Mismatch as mismatch:
        raise Finding(str(mismatch)) from None


def check_splits(stream: bytes, rng: random.Random, make_framer: Callable[[_Collect], Any],
                 what: str = "") -> None:  # fmt: skip
    """The framer `make_framer(collect)` gives the same frames and anomalies fed the whole
    stream and fed it in random pieces (a protocol's stream target: this and check_gaps)."""
    whole = _Collect()
    framer = make_framer(whole)
    framer.data(memoryview(stream), 1)
    framer.finish(1)
    for steps in ((1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 2, 3, 7, 8, 9, 64, 1460, 65536)):
        split = _Collect()
        framer = make_framer(split)
        pos = 0
        while pos < len(stream):
            step = rng.choice(steps)
            framer.data(memoryview(stream[pos : pos + step]), 1)
            pos += step
        framer.finish(1)
        if split.events != whole.events:
            pairs = zip(split.events + [None], whole.events + [None])
            first = next(i for i, (a, b) in enumerate(pairs) if a != b)
            raise Finding(
                f"framer output {what} depends on segmentation at event {first}: split "
                f"{split.events[first : first + 1]} vs whole {whole.events[first : first + 1]}"
            )


def check_gaps(stream: bytes, rng: random.Random, make_framer: Callable[[_Collect], Any],
               max_frame: int) -> None:  # fmt: skip
    """Fed with holes, the framer neither raises nor buffers beyond its frame limit, and its
    frames' dicts are JSON."""
    gappy = _Collect()
    framer = make_framer(gappy)
    pos = 0
    while pos < len(stream):
        step = rng.randrange(1, 3000)
        if rng.random() < 0.2:
            framer.missing(step, 1)
        else:
            framer.data(memoryview(stream[pos : pos + step]), 1)
        pos += step
    framer.finish(1)
    if len(framer.rbuf) > max_frame + 64:
        raise Finding(f"resync buffer holds {len(framer.rbuf)} bytes")
    for event in gappy.events:
        if event[0] == "frame":
            json.dumps(event[2], default=str)


def _event_key(event: Any) -> tuple:
    if isinstance(event, FrameEvent):
        return (event.ts_ns, event.connection, event.direction, event.stream_offset,
                json.dumps(event.record.to_dict(show_secrets=True), default=str))  # fmt: skip
    return (event.ts_ns, event.connection, event.direction, event.kind, event.stream_offset,
            event.length, event.detail)  # fmt: skip


def _report(path: str, engine: str, columns: bool = False) -> str:
    """The analyze report's JSON: from HotFrames (the bulk engine's columns, as the CLI makes
    it) or from records."""
    dissector = Dissector(ooo_cap=FUZZ_OOO_CAP, engine=engine, columns=columns,
                          publish_messages=False, deliver_keep_limit=0)  # fmt: skip
    result = analyze_events(dissector.run(path), report_only=True,
                            protocol_of=dissector.protocol_of.get,
                            tcp_connections_after=lambda: list(dissector.connections))  # fmt: skip
    parts: list[str] = []
    json_write(to_json(result, lazy=True), parts.append)
    return "".join(parts)


def _report_walked(path: str, compiled: bool) -> str:
    """The columns report (_report) with the compiled code as loaded (the walks:
    native.loaded and capture.native.loaded; the JSON rows: compiled_rows) or the
    Python code."""
    kept = native.loaded, capture_native.loaded, text_report.compiled_rows
    if not compiled:
        native.loaded = capture_native.loaded = text_report.compiled_rows = None
    try:
        return _report(path, "auto", columns=True)
    finally:
        native.loaded, capture_native.loaded, text_report.compiled_rows = kept


def _engine_runs(paths: list[str], engines: tuple, what: str = "") -> list:
    """(dissector, events or None for a file refused) for each engine, checked equal."""
    runs = []
    for engine in engines or ("auto",):
        dissector = Dissector(ooo_cap=FUZZ_OOO_CAP, **({"engine": engine} if engines else {}))
        try:
            events = list(dissector.run(paths))
        except CaptureError:
            events = None  # a clear error for a file that is not a capture
        runs.append((dissector, events))
    if len(runs) == 2:
        (_, auto), (_, stream) = runs
        if (auto is None) != (stream is None):
            raise Finding(f"one engine refuses the file{' ' + what if what else ''}, the other "
                          "reads it")  # fmt: skip
        if auto is not None and stream is not None:
            a, b = [_event_key(e) for e in auto], [_event_key(e) for e in stream]
            if a != b:
                first = next(i for i, (x, y) in enumerate(zip(a + [None], b + [None])) if x != y)
                raise Finding(f"engines disagree{' ' + what if what else ''} at event {first}: "
                              f"auto {a[first:first + 1]} vs stream {b[first:first + 1]}")
    return runs


def run_pcap(data: bytes, path: str) -> None:
    """The whole pipeline and its outputs; for a plain pcap, the bulk engine must give
    exactly the events of the streaming (reference) engine."""
    with open(path, "wb") as f:
        f.write(data)
    try:  # (the compiled run of a pcapng file's packet blocks against the Python one)
        PCAPNG_WALK_CHECKS[0] += check_native_pcapng_walk(
            data, random.Random(hashlib.sha1(data).digest()))
    except Mismatch as mismatch:
        raise Finding(str(mismatch)) from None
    engines = ("auto", "stream") if "engine" in Dissector.__init__.__code__.co_varnames else ()
    runs = _engine_runs([path], engines)
    if len(runs) == 2:
        # the same bytes gzip'd, and as a set of two files (the same one twice: their times
        # overlap, so the bulk engine merges them the reference way)
        with open(path + ".gz", "wb") as f:
            f.write(gzip.compress(data, compresslevel=1, mtime=0))
        _engine_runs([path + ".gz"], engines, "gzip'd")
        _engine_runs([path, path], engines, "as a set of two")
    dissector, events = runs[0]
    if events is None:
        return
    if len(runs) == 2:
        reference = _report(path, "stream")
        built = (native.loaded, capture_native.loaded, text_report.compiled_rows)
        for compiled in {built != (None, None, None), False}:  # (compiled code, and Python)
            made = _report_walked(path, compiled)
            if made != reference:
                first = next(i for i, (x, y) in enumerate(zip(made, reference)) if x != y)
                raise Finding(f"the columns report differs ({'compiled' if compiled else 'Python'} "
                              f"walk) at character {first}: "
                              f"{made[first - 40 : first + 80]!r} vs "
                              f"{reference[first - 40 : first + 80]!r}")  # fmt: skip
        check_runs(path, events, runs[1][0])
    text = io.StringIO()
    last: dict[tuple[str, str], int] = {}
    hot = HotLines()
    for event in events:
        if isinstance(event, FrameEvent):
            protocol = dissector.protocol_of.get(event.connection)
            row = frame_dict(event, show_secrets=False, protocol=protocol)
            line = json.dumps(row, default=str) + "\n"
            fast = hot.line(event)
            if fast is not None and fast != line:
                raise Finding(f"a hot jsonl line differs from json.dumps: {fast[:200]!r}")
            text.write(summary(event.record) if protocol is None or protocol.name == "stream"
                       else protocol.frame_line(event.record))  # fmt: skip
            if event.record.to_dict is None:
                raise Finding("record without to_dict")
            key = (event.connection, event.direction)
            if event.stream_offset < last.get(key, -1):
                raise Finding(f"frame offsets go backwards on {key}")
            last[key] = event.stream_offset
        elif isinstance(event, Anomaly):
            json.dumps(anomaly_dict(event), default=str)
        else:
            raise Finding(f"unexpected event {type(event).__name__}")
        if text.tell() > 1 << 20:
            text = io.StringIO()
    for row in dissector.connections:
        repr(row)
    check_messages(events)
    ROTATED_CHECKS[0] += check_rotated(path, data)
    frames = [frame_row(e) for e in events if isinstance(e, FrameEvent)]
    arrow = frames_arrow(path, ooo_cap=FUZZ_OOO_CAP, rows_per_batch=BATCH_ROWS)
    check_frame_events(arrow, events, dissector)
    batches = arrow.to_pylist()
    if batches != frames:
        first = next(i for i, (x, y) in enumerate(zip(batches + [None], frames + [None]))
                     if x != y)  # fmt: skip
        raise Finding(f"frame batches differ from the record rows at frame {first}: "
                      f"{str(batches[first:first + 1])[:300]} vs {str(frames[first:first + 1])[:300]}")


ROTATED_CHECKS = [0]  # (captures cut and stitched so far: the campaign's summary says)
PCAPNG_WALK_CHECKS = [0]  # (pcapng files walked by both runs of their packet blocks, so far)


def check_messages(events: list) -> None:
    """The messages table of the events (what --messages and analyze --messages make): its
    rows JSON-able and typed by the schema, no body preview past --max-body."""
    rows = MessageRows(VERBOSE_BODY)
    table = [table_row(row) for event in events if isinstance(event, FrameEvent)
             for row in rows.feed(event)]  # fmt: skip
    json.dumps(table, default=str)
    dataframe("messages", table)
    for row in table:
        preview = row["body_preview"] or ""
        shown = len(preview) // 2 if row["body_encoding"] == "hex" else len(preview.encode(
            "utf-8", "surrogatepass"))  # fmt: skip
        if row["body_encoding"] is not None and shown > VERBOSE_BODY:
            raise Finding(f"a messages row previews {shown} bytes, past {VERBOSE_BODY}")


def check_rotated(path: str, data: bytes) -> int:
    """The capture cut into 2-4 pieces at record boundaries, each piece dissected apart and
    stitched (streamdissect.rotated): never an exception, every table made with its
    schema. (Equal figures are the tests' business: TCP damage
    across a cut is not carried over, and fuzzed captures are damaged everywhere.)"""
    from streamdissect.rotated.local import TABLES, analyze_set

    if data[:4] not in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\xc3\xd4",
                        b"\xa1\xb2\x3c\x4d"):  # fmt: skip
        return 0  # (pcapng, gzip: not cut here)
    if TESTS not in sys.path:  # (once: inserted per input, sys.path grew a capture at a time)
        sys.path.insert(0, TESTS)
    import rotate  # (the tests' cutter: whole records, the file header in each piece)

    records = rotate.records(data)
    if len(records) < 2:
        return 0  # (nothing to cut)
    rng = random.Random(len(data))
    cuts = sorted(rng.sample(range(1, len(records)), min(len(records) - 1, rng.randint(1, 3))))
    pieces = []
    for k, (lo, hi) in enumerate(zip([0, *cuts], [*cuts, len(records)])):
        piece = f"{path}.piece{k}"
        with open(piece, "wb") as f:
            f.write(data[: rotate.HEADER] + b"".join(records[lo:hi]))
        pieces.append(piece)
    try:
        tables = analyze_set(pieces, helper_process=False)
    except CaptureError:
        return 0  # (a piece that is no capture by itself: its header or first record is bad)
    finally:
        for piece in pieces:
            os.remove(piece)
    for table in TABLES:
        if not tables[table].schema.equals(schema.arrow_schema(table)):
            raise Finding(f"rotated pieces: the {table} table has another schema")
    return 1


def check_runs(path: str, events: list, reference: Any) -> None:
    """analyze()'s every table from HotFrames (the collectors' on_hot) equals the one from the
    streaming engine's records, and so do the frames jsonl lines made from runs."""
    full = Dissector(ooo_cap=FUZZ_OOO_CAP, columns=True, publish_messages=False)
    made = analyze_events(full.run(path), tcp_connections_after=lambda: list(full.connections),
                          protocol_of=full.protocol_of.get)  # fmt: skip
    expected = analyze_events(iter(events), tcp_connections_after=lambda: list(reference.connections),
                              protocol_of=reference.protocol_of.get)  # fmt: skip
    for table in schema.analysis_tables():
        if list(made.rows(table)) != list(expected.rows(table)):
            raise Finding(f"the {table} table from runs differs from the records'")
    lines = []
    for mode in ("lines", False):
        out = io.StringIO()
        dissector = Dissector(ooo_cap=FUZZ_OOO_CAP, columns=mode, publish_messages=False,
                              engine="auto" if mode else "stream")  # fmt: skip
        write = jsonl_writer(out, False, False, dissector.protocol_of.get)
        for event in dissector.run(path):
            write(event)
        lines.append(out.getvalue())
    if lines[0] != lines[1]:
        raise Finding("the jsonl lines from runs differ from the records'")


def check_frame_events(frames: Any, events: list, dissector: Any) -> None:
    """The frames table turned back into events (tables.events: what a rotated chain is
    analysed from) gives every table the records give (it must never raise, whatever the
    times; a time past int64 is null in the table, so such a capture is not compared)."""
    tcp = list(dissector.connections)
    made = analyze_events(frame_events(frames), tcp_connections_after=lambda: tcp)
    if not all(0 <= e.ts_ns < 2**63 for e in events if isinstance(e, FrameEvent)):
        return
    expected = analyze_events(events, tcp_connections_after=lambda: tcp,
                              protocol_of=dissector.protocol_of.get)  # fmt: skip
    for table in schema.analysis_tables():
        if table != "anomalies" and list(made.rows(table)) != list(expected.rows(table)):
            raise Finding(f"the {table} table from the frames table differs from the records'")


# --------------------------------------------------------------------------------------
# The campaign


@dataclass
class Stats:
    inputs: int = 0
    findings: int = 0
    seconds: float = 0.0
    slowest_s: float = 0.0
    slowest_input: str = ""
    peak_bytes: int = 0  # largest tracemalloc peak of one sampled input
    sampled: int = 0
    saved: list[str] = field(default_factory=list)
    signatures: dict[str, int] = field(default_factory=dict)  # distinct findings, counted
    slowest_data: bytes = b""


def _alarm(signum: int, frame: Any) -> None:
    raise Hang("per-input time bound exceeded")


def save(target: str, data: bytes, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{target}-{hashlib.sha1(data).hexdigest()[:12]}{EXTENSIONS[target]}"
    path.write_bytes(data)
    return path


def replay(target: str, data: bytes, scratch: str | None = None) -> None:
    """Run one saved input through its target (regression tests use this)."""
    if target == "frame":
        run_frame(data)
    elif target == "stream":
        run_stream(data)
    else:
        if scratch is None:
            with tempfile.TemporaryDirectory() as tmp:
                run_pcap(data, os.path.join(tmp, "input.pcap"))
        else:
            run_pcap(data, scratch)


def run_one(target: str, data: bytes, stats: Stats, scratch: str, out_dir: Path | None,
            sample: bool, log: Callable[[str], None],
            replay_with: Callable[[str, bytes, str | None], None] | None = None,
            ) -> None:  # fmt: skip
    """One input through its target (`replay_with`: another protocol's targets of the same
    names, as benchmarks/fuzz_rocketmq.py runs them), under the time and memory bounds; a
    sampled one in a child process under tracemalloc (fuzz_memory.sampled)."""
    started = time.perf_counter()
    if sample:
        peak, problem = sampled(lambda: attempt(target, data, scratch, replay_with))
        stats.sampled += 1
        stats.peak_bytes = max(stats.peak_bytes, peak)
        if peak > MEMORY_BOUND[target] and problem is None:
            problem = f"memory: peak {peak} bytes > {MEMORY_BOUND[target]}"
    else:
        problem = attempt(target, data, scratch, replay_with)
    elapsed = time.perf_counter() - started
    stats.inputs += 1
    stats.seconds += elapsed
    if elapsed > stats.slowest_s:
        stats.slowest_s = elapsed
        stats.slowest_input = f"{len(data)} bytes sha1 {hashlib.sha1(data).hexdigest()[:12]}"
        stats.slowest_data = data
    if problem is not None:
        stats.findings += 1
        # the same finding over and over: count it, save and print the first few only
        signature = re.sub(r"[0-9]+", "N", problem.strip().splitlines()[-1])[:90]
        seen = stats.signatures[signature] = stats.signatures.get(signature, 0) + 1
        if seen > 3:
            return
        where = save(target, data, out_dir) if out_dir is not None else None
        if where is not None:
            stats.saved.append(str(where))
        log(f"FINDING in {target} ({len(data)} bytes, saved as {where}):\n{problem}")


def attempt(target: str, data: bytes, scratch: str,
            replay_with: Callable[[str, bytes, str | None], None] | None) -> str | None:  # fmt: skip
    """One input through its target under the time bound: what went wrong, or None."""
    signal.setitimer(TIMER, TIME_BOUND_S[target])
    try:
        (replay_with or replay)(target, data, scratch)
    except Hang:
        return f"hang: more than {TIME_BOUND_S[target]} s"
    except RecursionError:
        return "RecursionError:\n" + traceback.format_exc(limit=-8)
    except Exception:  # noqa: BLE001 - every exception is a finding
        return traceback.format_exc(limit=-8)
    finally:
        signal.setitimer(TIMER, 0)
    return None


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def campaign(
    minutes: float | None = None,
    counts: dict[str, int] | None = None,
    seed: int = 1,
    out_dir: Path | None = REGRESSIONS,
    log: Callable[[str], None] = print,
    progress_every: float = 60.0,
    slowest_dir: Path | None = None,
    scratch_dir: str | None = "/dev/shm" if os.path.isdir("/dev/shm") else None,
) -> dict[str, Any]:
    """Run the targets round-robin until `minutes` pass or every target has its count."""
    rng = random.Random(seed)
    streams = corpus_streams()
    seeds = corpus_frames(streams) + crafted_frames(rng)
    frames = FrameMutator(rng, seeds)
    generators = {
        "frame": frames.mutate,
        "stream": StreamMutator(rng, streams, frames).mutate,
        "pcap": PcapMutator(rng, corpus_packets(), frames).mutate,
    }
    # inputs per round of each target, so that time splits roughly evenly
    batch = {"frame": 200, "stream": 20, "pcap": 4}
    stats = {name: Stats() for name in generators}
    import pandas  # noqa: F401  (pyarrow imports it lazily: a time bound must not cut that short)

    old_handler = signal.signal(TIMER_SIGNAL, _alarm)
    fd, scratch = tempfile.mkstemp(prefix="streamdissect-fuzz-", suffix=".pcap", dir=scratch_dir)
    os.close(fd)
    deadline = time.monotonic() + minutes * 60 if minutes else None
    started = time.monotonic()
    next_progress = started + progress_every
    rss_start = rss_after_warmup = None
    rss_series: list[float] = []  # at each progress line (every minute by default)
    rounds = 0
    generator_errors = 0
    try:
        while True:
            pending = [
                n for n in generators if counts is None or stats[n].inputs < counts.get(n, 0)
            ]
            if not pending or (deadline is not None and time.monotonic() >= deadline):
                break
            for name in pending:
                for _ in range(batch[name]):
                    if counts is not None and stats[name].inputs >= counts.get(name, 0):
                        break
                    try:
                        data = generators[name]()
                    except Exception:  # noqa: BLE001 - a mutator bug, not a finding
                        generator_errors += 1
                        if generator_errors <= 3:
                            log(f"mutator error in {name}:\n{traceback.format_exc(limit=-3)}")
                        continue
                    count = stats[name].inputs
                    sample = count == 10 or count % SAMPLE_MEMORY_EVERY == SAMPLE_MEMORY_EVERY - 1
                    run_one(name, data, stats[name], scratch, out_dir, sample, log)
            rounds += 1
            release_free_memory()  # (RSS then is what is held: fuzz_memory)
            if rounds == 20:
                rss_after_warmup = rss_bytes()
            if rss_start is None:
                rss_start = rss_bytes()
            now = time.monotonic()
            if now >= next_progress:
                next_progress = now + progress_every
                rss_series.append(round(rss_bytes() / 2**20, 1))
                log(f"[{(now - started) / 60:.1f} min, RSS {rss_series[-1]:.0f} MiB] " + ", ".join(
                    f"{n} {s.inputs} ({s.findings} findings)" for n, s in stats.items()))  # fmt: skip
    finally:
        signal.signal(TIMER_SIGNAL, old_handler)
        for left in (scratch, scratch + ".gz"):  # (run_pcap's gzip'd copy too: /dev/shm is RAM)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(left)
    if slowest_dir is not None:
        slowest_dir.mkdir(parents=True, exist_ok=True)
        for name, st in stats.items():
            (slowest_dir / f"{name}-slowest{EXTENSIONS[name]}").write_bytes(st.slowest_data)
    rss_end = rss_bytes()
    base = rss_after_warmup or rss_start or rss_end
    return {
        "seed": seed,
        "minutes": round((time.monotonic() - started) / 60, 2),
        "targets": {
            n: {
                "inputs": s.inputs,
                "findings": s.findings,
                "inputs_per_s": round(s.inputs / s.seconds) if s.seconds else None,
                "slowest_ms": round(s.slowest_s * 1000, 2),
                "slowest_input": s.slowest_input,
                "sampled_for_memory": s.sampled,
                "peak_traced_kib": round(s.peak_bytes / 1024),
                "saved": s.saved,
                "distinct_findings": s.signatures,
            }
            for n, s in stats.items()
        },
        "findings": sum(s.findings for s in stats.values()),
        "pcaps_cut_into_rotated_pieces": ROTATED_CHECKS[0],
        "pcapngs_walked_both_ways": PCAPNG_WALK_CHECKS[0],
        "mutator_errors": generator_errors,
        "rss_after_warmup_mib": round(base / 2**20, 1),
        "rss_end_mib": round(rss_end / 2**20, 1),
        "rss_growth_mib": round((rss_end - base) / 2**20, 1),
        "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_by_progress_mib": rss_series,
    }


RSS_GROWTH_BOUND_MIB = 64


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, help="stop after this long")
    parser.add_argument("--frames", type=int, help="frame inputs to run (with --pcaps ...)")
    parser.add_argument("--streams", type=int, help="stream inputs to run")
    parser.add_argument("--pcaps", type=int, help="capture inputs to run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--out",
        type=Path,
        default=REGRESSIONS,
        help="where inputs of findings are saved (default tests/regressions)",
    )
    parser.add_argument("--json", type=Path, help="write the counts here too")
    parser.add_argument("--slowest", type=Path, metavar="DIR",
                        help="save each target's slowest input here")  # fmt: skip
    parser.add_argument(
        "--replay",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="run saved inputs (target from the file name) and stop",
    )
    args = parser.parse_args(argv)
    if args.replay:
        bad = 0
        for path in args.replay:
            target = path.name.split("-", 1)[0]
            try:
                replay(target, path.read_bytes())
                print(f"ok   {path}")
            except Exception:  # noqa: BLE001
                bad += 1
                print(f"FAIL {path}\n{traceback.format_exc(limit=-8)}")
        return 1 if bad else 0
    counts = None
    if args.frames or args.streams or args.pcaps:
        counts = {"frame": args.frames or 0, "stream": args.streams or 0, "pcap": args.pcaps or 0}
    if counts is None and args.minutes is None:
        parser.error("give --minutes N and/or counts (--frames, --streams, --pcaps)")
    result = campaign(args.minutes, counts, args.seed, args.out, slowest_dir=args.slowest)
    if result["rss_growth_mib"] > RSS_GROWTH_BOUND_MIB:
        print(f"FINDING: RSS grew {result['rss_growth_mib']} MiB over the campaign")
        result["findings"] += 1
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 1 if result["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
