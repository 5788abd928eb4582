"""The bulk engine: a classic pcap file read in large blocks, packets parsed as columns.

Same results as the streaming pipeline (dissect.Dissector with engine="stream"), event for
event, at a fraction of the cost per packet (tests/test_bulk_engine.py holds it to that):

- the file is read into one reused buffer, BLOCK bytes at a time; record boundaries are
  walked in Python, with runs of equal-sized records taken in one step. With
  `helper_process` (and a CPU to spare) a forked helper reads and walks the file into
  SLOTS shared buffers that this process dissects in place;
- link, IPv4 or IPv6, and TCP headers are gathered for the whole block with numpy
  (Ethernet, Linux cooked v1/v2 as `tcpdump -i any` writes, BSD null/loop, raw IP:
  LINK_LAYOUTS); any other packet (VLAN tags, IP options, IPv6 extension headers...) goes
  through capture.tcp_segment, the exact per-packet code;
- per TCP connection and direction, sequence numbers are checked with vectorized arithmetic:
  in-order segments and full retransmissions (the regular case) never reach the per-packet
  reassembler; from the first irregular packet (gap, out of order, overlap, snaplen cut,
  SYN-less start, a SYN again, a packet parsed one by one) the connection goes through the
  exact FlowTable code until the end of the block; a block with a possible port reuse goes
  through it whole;
- frames are walked over the in-order segments directly: only the bytes a record needs are
  copied (the whole frame; a big Deliver's head). Without `publish_messages`, Publish
  frames are not copied at all: their ids are read with one numpy gather per block;
- a Tune changes the frame limit while a direction is walked: the walk reads it live, and
  when a Tune of the other direction could have mattered (LimitCheck) the connection's
  block is undone and done again packet by packet.

The state the exact code keeps (FlowTable, TcpConnection, DirectionReassembler, Framer) is
the one the bulk engine updates, so the two hand over at any packet. Events are tagged with
the packet that produced them and sorted per block, which gives the streaming order.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import signal
import stat
import struct
import zlib
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from streamdissect.capture import ACK, FIN, RST, SYN, PacketProblem, tcp_segment
from streamdissect.capture.limits import MAX_PACKET
from streamdissect.capture.link import ETHERNET, IPV4, IPV6, LINUX_SLL, LINUX_SLL2, LOOP, NULL, RAW
from streamdissect.capture.pcap import FILE_HEADER_SIZE, PCAP_MAGICS, RECORD_HEADER_SIZE
from streamdissect.engine.anomalies import Anomaly
from streamdissect.framing.framer import (
    DELIVER_HEAD,
    DELIVER_KEY,
    HEADER,
    MIN_NEGOTIATED_FRAME_MAX,
)
from streamdissect.protocols.stream import hot, layouts
from streamdissect.protocols.stream.codec import (
    FAST_PATHS,
    decode_deliver_head,
)
from streamdissect.protocols.stream.records import Malformed, record_class
from streamdissect.tcp.reassembly import HALF_SEQ_SPACE, SEQ_MASK

if TYPE_CHECKING:
    from streamdissect.engine.state import DissectionState

# Fixed sizes, never taken from the file: peak memory is the same for any large capture.
# The per-block work is ~150 numpy calls whatever the block's size: 16 MiB blocks take
# ~0.1 s less CPU than 4 MiB ones on the 621 MB benchmark capture (benchmarks/README.md),
# for ~16.3 MiB of buffer, or 3 x that with the helper. A block is dissected MAX_ROWS
# packets at a time, so that a file of tiny packets (16 bytes a record) cannot make the
# per-packet columns (~250 bytes a packet, temporaries included) grow past ~16 MiB.
BLOCK = 16 << 20
MAX_ROWS = 1 << 16
PAD = 128  # room after the data so header gathers never index past the buffer
# Columns mode: room after a block for copies of the hot frames that cross segments (hot
# frames past it go the record way).
PATCH = 4 << 20
SMALL_COPY = 512  # crossing hot frames up to this size are copied whole, all at once
_header = struct.Struct(">IHH").unpack_from
_size_key = struct.Struct(">IH").unpack_from
_third = itemgetter(2)
# Link layers whose IPv4 and IPv6 + TCP packets are parsed as columns, as
# capture.link.ip_offset reads them: linktype -> (link header length, (format, offset) of
# the field that names the network layer, its IPv4 values, its IPv6 values). Raw IP has no
# such field: the IP header's first byte says it.
_AF_INET6 = (10, 24, 28, 30)  # (per OS)
LINK_LAYOUTS = {
    ETHERNET: (14, (">u2", 12), (0x0800,), (0x86DD,)),  # (VLAN tags: the per-packet path)
    LINUX_SLL: (16, (">u2", 14), (0x0800,), (0x86DD,)),  # tcpdump -i any
    LINUX_SLL2: (20, (">u2", 0), (0x0800,), (0x86DD,)),
    # the family in the capturing host's byte order
    NULL: (4, ("<u4", 0), (2, 2 << 24), (*_AF_INET6, *(f << 24 for f in _AF_INET6))),
    LOOP: (4, (">u4", 0), (2,), _AF_INET6),
    RAW: (0, None, (), ()), IPV4: (0, None, (), ()), IPV6: (0, None, (), ()),
}  # fmt: skip
PUBLISH_KEY = 0x0002
PUBLISH = record_class("Publish")
# v1: frame header, publisher id, count, first message's id and entry word
_publish_head = layouts.PUBLISH.struct().unpack_from
PUBLISH_HEAD = layouts.PUBLISH.size
_MESSAGE = hot.MESSAGE
_message_head = layouts.MESSAGE.struct().unpack
FIRST_ID = hot.FIRST_ID
CREDIT_KEY, CONFIRM_KEY, HEARTBEAT_KEY = 0x0009, 0x0003, 0x0017
# Small hot frames (Credit, PublishConfirm, Heartbeat) decoded by their codec fast path
# straight from the walk: a whole frame is exactly what decode_frame would hand it, so the
# record is the same, without three calls of checks per frame. Anything a fast path
# declines (or trips over) goes the usual way, which explains it.
_DIRECT = {key: FAST_PATHS[key] for key in (CONFIRM_KEY, CREDIT_KEY, HEARTBEAT_KEY)}
_DELIVER_HEAD = FAST_PATHS[DELIVER_KEY]  # (frame, size, version, head=True): a Deliver's head


def _fast_record(key: int, frame: bytes, size: int, version: int) -> Any:
    """A small hot frame's record by its codec fast path (_DIRECT), or None: decode_frame
    then makes the record, or the Malformed one that explains it."""
    fast = _DIRECT.get(key)
    if fast is None:
        return None
    try:
        return fast(frame, size, version)
    except Exception:  # noqa: BLE001 - decode_frame makes the Malformed record
        return None


def _deliver_head_record(head: bytes, size: int, version: int) -> Any:
    """A Deliver's record from its head (the header read from the frame: decode_deliver_head's
    checks hold)."""
    return _DELIVER_HEAD(head, size, version, True) or decode_deliver_head(head, size)


# Frame heads gathered HEAD_BYTES wide from each frame's start, viewed with a kind's layout.
HEAD_BYTES = hot.HEAD_BYTES


_FRAME_HEAD = layouts.FRAME.dtype(HEAD_BYTES)
_PUBLISH_HEAD = layouts.PUBLISH.dtype(HEAD_BYTES)


def pcap_magic(path: str) -> int | None:
    """The pcap magic when `path` is a plain (not gzip'd) classic pcap file, else None (a
    pipe, which must not be read here, is no file)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as f:
            head = f.read(FILE_HEADER_SIZE)
    except OSError:
        return None
    if len(head) < FILE_HEADER_SIZE:
        return None
    magic = struct.unpack_from("<I", head)[0]
    return magic if magic in PCAP_MAGICS else None


_IPV4_TCP = (("vihl", "u1"), ("tos", "u1"), ("total", ">u2"), ("ipid", ">u2"),
             ("frag", ">u2"), ("ttl", "u1"), ("proto", "u1"), ("ipsum", ">u2"), ("src", ">u4"),
             ("dst", ">u4"))  # fmt: skip
_IPV6_TCP = (("vtc", "u1"), ("flow", "V3"), ("payload", ">u2"), ("next", "u1"), ("hops", "u1"),
             ("src", "V16"), ("dst", "V16"))  # fmt: skip
_TCP = (("sport", ">u2"), ("dport", ">u2"), ("seq", ">u4"), ("ack", ">u4"), ("off", "u1"),
        ("flags", "u1"))  # fmt: skip


def _header_dtype(order: str, link: tuple, ip: tuple = _IPV4_TCP) -> np.dtype:
    """A record header, the link header `link` (LINK_LAYOUTS), the IP header's fields `ip`
    (_IPV4_TCP, _IPV6_TCP) and TCP up to the flags."""
    length, field = link[:2]
    names, formats, offsets = ["sec", "frac", "caplen", "wirelen"], [order + "u4"] * 4, [0, 4, 8, 12]
    if field is not None:
        names.append("link")
        formats.append(field[0])
        offsets.append(RECORD_HEADER_SIZE + field[1])
    at = RECORD_HEADER_SIZE + length
    for name, fmt in (*ip, *_TCP):
        names.append(name)
        formats.append(fmt)
        offsets.append(at)
        at += np.dtype(fmt).itemsize
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": at})


# Run patterns compiled per block at most (~85 us each): a file of many sizes, each twice in
# a row, must not cost a compile a record; past this its runs are walked one by one.
RUN_PATTERNS = 64
# Runs are looked for among records of this size or more (full-MSS segments come in long
# runs; small ones repeat a few times at most, where a match costs more than it saves).
RUN_MIN = 512


def walk_records(buf: bytearray, pos: int, end: int, u32: Any) -> tuple[array, int, bool]:
    """Record starts from `pos` while whole records are in buf[:end]; (starts, position
    after the last whole record, True when a record's captured length is absurd)."""
    starts = array("q")
    runs = array("q")  # (first start, records, stride) of each run; expanded at the end
    app, add_run = starts.append, runs.extend
    patterns: dict[int, Any] = {}  # captured length -> its run pattern (in this file's order)
    prev = -1
    last = end - RECORD_HEADER_SIZE
    # Each record's start noted as it comes, checked afterwards (_checked_records): an absurd
    # length or one past the end only ends the walk.
    while pos <= last:
        cap = u32(buf, pos + 8)[0]
        if cap == prev and RUN_MIN <= cap <= MAX_PACKET and (cap in patterns
                                                              or len(patterns) < RUN_PATTERNS):
            # A run of records of one size (full-MSS segments): one regular expression match
            # (C code) checks the length field of each, each record pointing at the next.
            pattern = patterns.get(cap)
            if pattern is None:
                field = re.escape(bytes(buf[pos + 8 : pos + 12]))
                pattern = patterns[cap] = re.compile(b"(?:.{8}%s.{%d})+" % (field, cap + 4),
                                                     re.DOTALL)  # fmt: skip
            match = pattern.match(buf, pos, end)
            if match:  # (whole records of this size, all within end)
                r = RECORD_HEADER_SIZE + cap
                n = (match.end() - pos) // r
                add_run((pos, n, r))
                pos += n * r
                continue
        prev = cap
        app(pos)
        pos += RECORD_HEADER_SIZE + cap
    if not starts and not runs:
        return starts, pos, False
    return _checked_records(buf, _with_runs(starts, runs), end, u32.__self__.format[0])


def _checked_records(buf: Any, starts: array, end: int, order: str) -> tuple[array, int, bool]:
    """walk_records' result from the starts it noted: they end at the first record whose
    captured length is absurd (bad) or that is not whole before `end`."""
    at = np.frombuffer(starts, dtype=np.int64)
    caps = _sliding(buf, 0, len(buf), 4)[at + 8].view(np.dtype(order + "u4")).astype(np.int64)
    over = caps > MAX_PACKET
    stop = np.flatnonzero(over | (at + RECORD_HEADER_SIZE + caps > end))
    if not len(stop):
        return starts, int(at[-1] + RECORD_HEADER_SIZE + caps[-1]), False
    k = int(stop[0])
    return starts[:k], int(at[k]), bool(over[k])


def _with_runs(starts: array, runs: array) -> array:
    """walk_records' starts with those of its runs, in file order."""
    if not runs:
        return starts
    first, count, stride = np.frombuffer(runs, dtype=np.int64).reshape(-1, 3).T
    before = np.repeat(np.cumsum(count) - count, count)  # records of earlier runs
    expanded = np.repeat(first, count) + (np.arange(len(before)) - before) * np.repeat(stride,
                                                                                      count)
    every = np.concatenate((np.frombuffer(starts, dtype=np.int64), expanded))
    every.sort()
    out = array("q")
    out.frombytes(every.tobytes())
    return out


BLOCK_REGION, BAD_REGION, CUT_REGION = 0, 1, 2
# One item of a file's layout: (kind, file offset, length, record starts within the block).
# BLOCK_REGION: whole records in [offset, offset + length); BAD_REGION: a record claiming
# `length` captured bytes (> MAX_PACKET) at offset; CUT_REGION: the file ends `length` bytes
# into a record at offset.
Region = tuple[int, int, int, bytes]


def layout(f: Any, order: str, buf: bytearray, block: int, owner: Any = None) -> Iterator[Region]:
    """Where the records of a classic pcap file are, block by block, reading the file `f`
    (positioned after its header) into `buf`. A BLOCK_REGION's bytes are at buf[:length]
    when it is yielded and its starts are in `owner.walked` (None is yielded for them), or,
    without an owner, yielded as bytes."""
    u32 = struct.Struct(order + "I").unpack_from
    mv = memoryview(buf)
    base = FILE_HEADER_SIZE  # file offset of buf[0]
    have = 0
    # A small first read, each next one twice the last: a file that starts mid-connection
    # (a piece of a rotated capture) has its first block's connections go through the exact
    # code, so that block is kept short.
    want = min(FIRST_READ, block)
    while True:
        got = f.readinto(mv[have : have + want])
        want = min(want * 2, block)
        end = have + got
        starts, pos, bad = walk_records(buf, 0, end, u32)
        if starts:
            if owner is None:
                yield BLOCK_REGION, base, pos, starts.tobytes()
            else:
                owner.walked = starts
                yield BLOCK_REGION, base, pos, None
        if bad:
            yield BAD_REGION, base + pos, u32(buf, pos + 8)[0], b""
            return
        rest = end - pos
        if not got:
            if rest:
                yield CUT_REGION, base + pos, rest, b""
            return
        buf[:rest] = buf[pos:end]
        base += pos
        have = rest


# kind, slot, offset, length, n, and the number of flows when the helper parsed the block's
# packets into the slot's columns, else -1. Parsed, the block's n record starts are in its
# STARTS column; else n bytes of starts follow on the pipe. (In shared memory they do not
# fill the pipe: the helper runs ahead by up to SLOTS blocks.)
_ITEM = struct.Struct("<BBQQQq")
# The columns the helper fills (parse_packets' results, one int64 row each: ten per packet,
# then FLOW_COLUMNS on, three per flow, then the record starts), for blocks of at most
# MAX_ROWS records.
FLOW_COLUMNS = 10
STARTS = FLOW_COLUMNS + 3
COLUMNS = STARTS + 1
FIRST_BLOCK = 1 << 20  # the helper's first read; each next one twice the last, up to BLOCK
FIRST_READ = 1 << 18  # the first read without a helper (see layout)
SLOTS = 3  # shared read buffers: one being filled, one waiting, one being dissected


def _can_fork() -> bool:
    """A helper process needs a second CPU. Decided by the CPUs we may run on, not by the
    load average: that lags by a minute, so the choice (and with it the time and memory of
    a run) would depend on what ran just before. On a busy machine the helper only does
    the reading and walking this process would do anyway."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return hasattr(os, "fork") and hasattr(mmap, "MAP_SHARED") and (cpus or 1) >= 2


def helper_layout(path: str, order: str, block: int, shared: mmap.mmap, slot_size: int,
                  parse: Any = None):  # fmt: skip
    """Blocks of the file read, and their record boundaries found, by a forked helper process
    (another CPU) into SLOTS shared buffers: (kind, slot, file offset, length, starts, flows)
    for the parent to dissect in place; a slot goes back to the helper when the parent asks
    for the next block. `parse(slot, starts)`, run by the helper, fills the slot's columns
    and returns the number of flows, or -1. `starts`: the record starts as bytes, or, for a
    block parsed into its columns (flows >= 0), their number."""
    data_r, data_w = os.pipe()
    free_r, free_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the helper: no return from here
        code = 0
        try:
            os.close(data_r)
            os.close(free_w)
            _helper(path, order, block, shared, slot_size, data_w, free_r, parse)
        except BaseException:  # noqa: BLE001 - the parent sees a short stream
            code = 1
        finally:
            os._exit(code)
    os.close(data_w)
    os.close(free_r)
    done = False
    try:
        with open(data_r, "rb", buffering=1 << 16) as src, open(free_w, "wb", buffering=0) as free:
            while True:
                head = src.read(_ITEM.size)
                if len(head) < _ITEM.size:
                    break
                kind, slot, base, length, n, flows = _ITEM.unpack(head)
                yield kind, slot, base, length, n if flows >= 0 else src.read(n), flows
                if kind == BLOCK_REGION:
                    with contextlib.suppress(BrokenPipeError):  # (it may be done already)
                        free.write(bytes((slot,)))  # dissected: the helper may fill it again
        _, status = os.waitpid(pid, 0)
        done = True
        if status:
            raise OSError(f"{path}: the record-layout helper failed (status {status})")
    finally:
        if not done:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


def _helper(path: str, order: str, block: int, shared: mmap.mmap, slot_size: int,
            data_w: int, free_r: int, parse: Any) -> None:  # fmt: skip
    u32 = struct.Struct(order + "I").unpack_from
    free = list(range(SLOTS))

    def take() -> int:
        if free:
            return free.pop(0)
        got = os.read(free_r, 1)
        if not got:
            raise EOFError("the parent went away")
        return got[0]

    with open(data_w, "wb", buffering=0) as out, open(path, "rb", buffering=0) as f:
        view = memoryview(shared)
        f.seek(FILE_HEADER_SIZE)
        base = FILE_HEADER_SIZE  # file offset of the slot's first byte
        have = 0
        slot = take()
        # The parent waits for the first block: it is small, and the next ones twice as
        # big, up to `block` (the helper reads and parses faster than the parent dissects).
        size = min(FIRST_BLOCK, block)
        while True:
            at = slot * slot_size
            got = f.readinto(view[at + have : at + have + size])
            size = min(2 * size, block)
            end = have + got
            starts, pos, bad = walk_records(shared, at, at + end, u32)
            pos -= at
            if starts:
                rows = np.frombuffer(starts, dtype=np.int64)
                if at:
                    rows = rows - at
                flows = -1 if parse is None else parse(slot, rows)
                if flows >= 0:
                    out.write(_ITEM.pack(BLOCK_REGION, slot, base, pos, len(rows), flows))
                else:
                    data = rows.tobytes()
                    out.write(_ITEM.pack(BLOCK_REGION, slot, base, pos, len(data), flows) + data)
            if bad:
                cap = u32(shared, at + pos + 8)[0]
                out.write(_ITEM.pack(BAD_REGION, slot, base + pos, cap, 0, -1))
                return
            rest = end - pos
            if not got:
                if rest:
                    out.write(_ITEM.pack(CUT_REGION, slot, base + pos, rest, 0, -1))
                return
            following = take()
            to = following * slot_size
            view[to : to + rest] = view[at + pos : at + end]
            if not starts:
                free.append(slot)
            slot = following
            base += pos
            have = rest


def parse_packets(headers: tuple, starts: np.ndarray, dtypes: tuple, frac_ns: int,
                  link: tuple | None) -> tuple:
    """The part of a block that needs no state: each record's headers gathered and parsed,
    and the flows of the IPv4 and IPv6 + TCP packets of the link layer `link` (LINK_LAYOUTS;
    None: no packet is parsed here). `headers`, `dtypes`: the IPv4 and the IPv6 header views
    and layouts. (caplen, ts, flags, seq, ack,
    payload start and length in the buffer, TCP payload length on the wire, parsed-here
    mask, flow number or -1; then per flow: addresses, ports, first row.) The helper process
    runs it for the block it has just read; this process, for the others."""
    n = len(starts)
    h = headers[0][starts].view(dtypes[0])
    caplen = h["caplen"].astype(np.int64)
    ts = h["sec"].astype(np.int64) * 1_000_000_000 + h["frac"].astype(np.int64) * frac_ns
    flags = h["flags"].astype(np.int64)
    seq = h["seq"].astype(np.int64)
    ack = h["ack"].astype(np.int64)
    total = h["total"].astype(np.int64)
    off = h["off"].astype(np.int64)
    length = 0 if link is None else link[0]
    tcp_start = length + 20 + (off >> 4) * 4  # in the packet
    ip_end = length + total
    if link is not None:
        # what capture.tcp_segment takes without a question: IPv4 without options or
        # fragments, TCP with a sane data offset, the whole TCP header captured
        fast = (
            (caplen >= length + 34)
            & (h["vihl"] == 0x45)
            & (h["proto"] == 6)
            & (total >= 40)
            & ((h["frag"] & 0x3FFF) == 0)
            & (off >= 0x50)
            & (tcp_start <= ip_end)
        )
        if link[1] is not None:
            fast &= np.isin(h["link"], link[2])
    else:
        fast = np.zeros(n, dtype=bool)
    fast_rows = np.flatnonzero(fast)
    rows6, h6 = _ipv6_rows(headers[1], dtypes[1], starts, h, caplen, link)
    if len(rows6):
        flags[rows6] = h6["flags"]
        seq[rows6] = h6["seq"]
        ack[rows6] = h6["ack"]
        tcp_start[rows6] = length + 40 + (h6["off"].astype(np.int64) >> 4) * 4
        ip_end[rows6] = length + 40 + h6["payload"].astype(np.int64)
        fast[rows6] = True
    pstart = starts + RECORD_HEADER_SIZE + tcp_start
    plen = np.maximum(np.minimum(ip_end, caplen) - tcp_start, 0)
    wlen = ip_end - tcp_start
    fid = np.full(n, -1, dtype=np.int64)
    uniq_a = uniq_p = np.zeros(0, dtype=np.uint64)
    firsts = np.zeros(0, dtype=np.int64)
    if len(fast_rows):
        a = (h["src"][fast_rows].astype(np.uint64) << np.uint64(32)) | h["dst"][
            fast_rows
        ].astype(np.uint64)
        p = (h["sport"][fast_rows].astype(np.uint64) << np.uint64(16)) | h["dport"][fast_rows]
        # Ports tell flows apart almost always; the addresses are checked to be sure.
        uniq_p, index, inverse = np.unique(p, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        uniq_a = a[index]
        if not np.array_equal(uniq_a[inverse], a):
            k = np.empty(len(fast_rows), dtype=[("a", "u8"), ("p", "u8")])
            k["a"], k["p"] = a, p
            uniq_k, index, inverse = np.unique(k, return_index=True, return_inverse=True)
            inverse = inverse.reshape(-1)
            uniq_a, uniq_p = uniq_k["a"], uniq_k["p"]
        firsts = fast_rows[index]
        fid[fast_rows] = inverse
    if len(rows6):
        # IPv6 flows after the IPv4 ones: their addresses are read from their first packet
        # (BulkPcap._block), the column keeps only their ports
        k = np.empty(len(rows6), dtype=[("src", "V16"), ("dst", "V16"), ("p", "u8")])
        k["src"], k["dst"] = h6["src"], h6["dst"]
        k["p"] = (h6["sport"].astype(np.uint64) << np.uint64(16)) | h6["dport"]
        uniq_k, index, inverse = np.unique(k, return_index=True, return_inverse=True)
        fid[rows6] = len(uniq_p) + inverse.reshape(-1)
        uniq_a = np.concatenate((uniq_a, np.zeros(len(uniq_k), dtype=np.uint64)))
        uniq_p = np.concatenate((uniq_p, uniq_k["p"]))
        firsts = np.concatenate((firsts, rows6[index]))
    return caplen, ts, flags, seq, ack, pstart, plen, wlen, fast, fid, uniq_a, uniq_p, firsts


def _ipv6_rows(headers6: np.ndarray, dtype6: np.dtype, starts: np.ndarray, h: np.ndarray,
               caplen: np.ndarray, link: tuple | None) -> tuple:
    """(rows, their IPv6 headers) of the IPv6 + TCP packets capture.tcp_segment takes without
    a question: TCP right after the IPv6 header, a payload length (no jumbogram), a sane
    data offset, the whole TCP header captured."""
    none = (np.zeros(0, dtype=np.int64), None)
    if link is None:
        return none
    length, field, _, ipv6_values = link
    named = np.isin(h["link"], ipv6_values) if field is not None else (h["vihl"] >> 4) == 6
    rows = np.flatnonzero(named & (caplen >= length + 54))
    if not len(rows):
        return none
    h6 = headers6[starts[rows]].view(dtype6)
    off = h6["off"].astype(np.int64)
    payload = h6["payload"].astype(np.int64)
    ok = (((h6["vtc"] >> 4) == 6) & (h6["next"] == 6) & (payload > 0) & (off >= 0x50)
          & ((off >> 4) * 4 <= payload))  # fmt: skip
    return rows[ok], h6[ok]


class BulkPcap:
    """Runs one plain pcap file through a dissection state, block by block."""

    def __init__(self, dissector: DissectionState, path: str, magic: int) -> None:
        self.d = dissector
        self.path = path
        self.order, self.frac_ns = PCAP_MAGICS[magic]
        self.rows_before = 0  # packets of earlier blocks (global packet numbers)
        self.last_ts: int | None = None
        self.events: list[tuple] = []
        self.anomalies_made = 0  # d.anomalies_made when the last block's were collected

    # --- reading ---------------------------------------------------------------------

    def batches(self) -> Iterator[list]:
        """The events in order, a list at a time (a block's, then the end's): the caller
        chains them in C (itertools.chain), without a generator step per event."""
        d = self.d
        with open(self.path, "rb", buffering=0) as f:
            header = f.read(FILE_HEADER_SIZE)
            self.linktype = struct.unpack_from(self.order + "I", header, 20)[0] & 0x0FFFFFFF
            self.link = LINK_LAYOUTS.get(self.linktype)
            link = self.link or LINK_LAYOUTS[ETHERNET]
            # (IPv4 and IPv6 header layouts, gathered from every record start)
            self.dtypes = (_header_dtype(self.order, link),
                           _header_dtype(self.order, link, _IPV6_TCP))  # fmt: skip
            block = min(BLOCK, max(os.fstat(f.fileno()).st_size, 1 << 16))
            self.patch_start = block + RECORD_HEADER_SIZE + MAX_PACKET + PAD
            self.patch_used = 0
            size = self.patch_start + PATCH
            if d.helper_process and block == BLOCK and _can_fork():  # (more than a block)
                stride = size + COLUMNS * MAX_ROWS * 8  # a slot: data, then columns
                shared = mmap.mmap(-1, SLOTS * stride)
                try:
                    slots = [self._use(shared, k * stride, size) for k in range(SLOTS)]
                    self.slot_headers = [slot[2] for slot in slots]
                    self.columns = [_columns(shared, k * stride + size) for k in range(SLOTS)]
                    regions = helper_layout(self.path, self.order, block, shared, stride,
                                            self._parse_into)  # fmt: skip
                    yield from self._regions(regions, slots)
                finally:
                    self.buf = self.mv = self.headers = self.messages = slots = None
                    self.frame_heads = None
                    self.columns = self.slot_headers = None
                    with contextlib.suppress(BufferError):
                        shared.close()
            else:
                slot = self._use(bytearray(size), 0, size)
                regions = (
                    (k, 0, b, n, s, -1)
                    for k, b, n, s in layout(f, self.order, slot[0], block, self)
                )
                yield from self._regions(regions, [slot])
        yield list(d._finish(self.last_ts or 0))

    def _use(self, memory: Any, at: int, size: int) -> tuple:
        """(buffer, memoryview, header, message and frame head views) over
        memory[at : at + size]."""
        mv = memoryview(memory)[at : at + size]
        headers = tuple(_sliding(memory, at, size, dtype.itemsize) for dtype in self.dtypes)
        messages = _sliding(memory, at, size, _MESSAGE.itemsize)
        frame_heads = _sliding(memory, at, size, HEAD_BYTES)
        whole = memory if at == 0 and len(memory) == size else mv
        return whole, mv, headers, messages, frame_heads

    def _regions(self, regions: Iterator, slots: list) -> Iterator[list]:
        d = self.d
        for kind, slot, base, length, starts, flows in regions:
            if kind == BLOCK_REGION:
                self.buf, self.mv, self.headers, self.messages, self.frame_heads = slots[slot]
                if d.on_read is not None:
                    d.on_read(length)
                if flows >= 0:  # parsed by the helper (one piece: at most MAX_ROWS records)
                    columns = self.columns[slot]
                    yield self._block(columns[STARTS, :starts], base,
                                      _parsed(columns, starts, flows))  # fmt: skip
                    continue
                starts = self.starts_array(starts)
                for at in range(0, len(starts), MAX_ROWS):
                    yield self._block(starts[at : at + MAX_ROWS], base)
            elif kind == BAD_REGION:
                d._file_anomaly(self.path, "bad_record", self.last_ts, base,
                                f"captured length {length} > cap")  # fmt: skip
                return
            else:
                what = "record header cut" if length < RECORD_HEADER_SIZE else "record data cut"
                d._file_anomaly(self.path, "truncated_file", self.last_ts, base, what)
                return

    def _parse_into(self, slot: int, starts: np.ndarray) -> int:
        """(In the helper process.) parse_packets for a block just read into `slot`, its
        results written into the slot's columns; the number of flows, or -1 when the block
        has more records than the columns hold."""
        n = len(starts)
        if n > MAX_ROWS:
            return -1
        *rows, uniq_a, uniq_p, firsts = parse_packets(
            self.slot_headers[slot], starts, self.dtypes, self.frac_ns, self.link)
        columns = self.columns[slot]
        for i, values in enumerate(rows):  # (FLOW_COLUMNS of them)
            columns[i, :n] = values
        columns[STARTS, :n] = starts
        flows = len(uniq_a)
        for i, values in enumerate((uniq_a.view(np.int64), uniq_p.view(np.int64), firsts)):
            columns[FLOW_COLUMNS + i, :flows] = values
        return flows

    def starts_array(self, starts: bytes | None) -> np.ndarray:
        if starts is None:  # read in this process: the walk left them here
            starts = self.walked
        return np.frombuffer(starts, dtype=np.int64)

    # --- one block -------------------------------------------------------------------

    def _block(self, starts: np.ndarray, base: int, parsed: tuple | None = None) -> list[Any]:
        """The block's frame events and anomalies, in the streaming engine's order.
        `parsed`: parse_packets' result for these records, when the helper made it."""
        d = self.d
        n = len(starts)
        if parsed is None:
            parsed = parse_packets(self.headers, starts, self.dtypes, self.frac_ns, self.link)
        caplen, ts, flags, seq, ack, pstart, plen, wlen, fast, fid, uniq_a, uniq_p, firsts = parsed
        self.last_ts = int(ts[-1])
        keys: list[tuple] = []
        key_ids: dict[tuple, int] = {}
        first_row: list[int] = []
        ip_at = RECORD_HEADER_SIZE + (self.link[0] if self.link else 0)
        buf = self.buf
        for j, (a, p, r) in enumerate(zip(uniq_a.tolist(), uniq_p.tolist(), firsts.tolist())):
            at = int(starts[r]) + ip_at
            if buf[at] >> 4 == 6:  # an IPv6 flow: its addresses from its first packet
                key = (bytes(buf[at + 8 : at + 24]), p >> 16, bytes(buf[at + 24 : at + 40]),
                       p & 0xFFFF)  # fmt: skip
            else:
                key = ((a >> 32).to_bytes(4, "big"), p >> 16, (a & 0xFFFFFFFF).to_bytes(4, "big"),
                       p & 0xFFFF)  # fmt: skip
            key_ids[key] = j
            keys.append(key)
            first_row.append(r)
        # Everything else, one packet at a time with the exact code.
        slow: dict[int, tuple] = {}
        problems: dict[int, PacketProblem] = {}
        mv = self.mv
        linktype = self.linktype
        if not fast.all():
            for r in np.flatnonzero(~fast).tolist():
                s = int(starts[r]) + RECORD_HEADER_SIZE
                try:
                    seg = tcp_segment(linktype, mv[s : s + int(caplen[r])])
                except PacketProblem as problem:
                    problems[r] = problem
                    continue
                if seg is None:
                    continue
                key = (seg[0], seg[1], seg[2], seg[3])
                j = key_ids.get(key)
                if j is None:
                    j = key_ids[key] = len(keys)
                    keys.append(key)
                    first_row.append(r)
                elif r < first_row[j]:
                    first_row[j] = r
                fid[r] = j
                slow[r] = seg
                seq[r], ack[r], flags[r], wlen[r] = seg[4], seg[5], seg[6], seg[8]
                plen[r] = len(seg[7])
        self.ts, self.flags, self.seq, self.ack = ts, flags, seq, ack
        self.pstart, self.plen, self.wlen, self.fid = pstart, plen, wlen, fid
        self.keys, self.slow = keys, slow
        self.events = []
        self.hot: list[hot.HotChunk] = []
        rb = self.rows_before
        for r, problem in problems.items():
            d._row = rb + r
            d._anomaly(int(ts[r]), None, None, problem.kind, base + int(starts[r]),
                       int(caplen[r]), problem.detail)  # fmt: skip
            self._tag(r)
        if keys:
            self._flows(first_row)
        self.rows_before += n
        chunks = []
        if self.hot:  # columns mode: the hot frames' places are None among the events
            chunks = self._hot_block()  # (a declined one's record goes to its place)
            self.events = [ev for ev in self.events if ev is not None]
        events = self.events
        self.events = []
        events.sort()
        cut_by = None if d.columns == "lines" else d._frame_class
        ordered = (hot.place(chunks, events, cut_by) if chunks
                   else list(map(_third, events)))  # fmt: skip
        if self.anomalies_made != d.anomalies_made:  # (most blocks have none)
            self.anomalies_made = d.anomalies_made
            d.anomalies.extend([ev for ev in ordered if ev.__class__ is Anomaly])
        return ordered

    def _tag(self, row: int) -> None:
        out = self.d._out
        if out:
            events = self.events
            for ev in out:
                events.append((row, len(events), ev))
            out.clear()

    # --- connections -----------------------------------------------------------------

    def _flows(self, first_row: list[int]) -> None:
        d = self.d
        table = d._flows
        flows = table._flows
        keys = self.keys
        flags = self.flags
        order = sorted(range(len(keys)), key=first_row.__getitem__)
        # A SYN on a four-tuple that already has a connection may start another one (port
        # reuse): such a block goes through the exact code packet by packet.
        pure_syn = np.flatnonzero((flags & (SYN | ACK)) == SYN)
        known = set()
        for j in order:
            src, sport, dst, dport = keys[j]
            if (src, sport, dst, dport) in flows or (src, sport, dst, dport) in known:
                continue
            known.add((dst, dport, src, sport))
        for r in pure_syn.tolist():
            j = int(self.fid[r])
            if j < 0:
                continue
            if keys[j] in flows or keys[j] in known or r != first_row[j]:
                self._all_exact()
                return
        # Open new connections in order of their first packet.
        rb = self.rows_before
        ts = self.ts
        conns: dict[int, Any] = {}  # connection id() -> (conn, [flow ids])
        side_of = [0] * len(keys)
        conn_of: list[Any] = [None] * len(keys)
        for j in order:
            key = keys[j]
            found = flows.get(key)
            if found is None:
                r = first_row[j]
                d._row = rb + r
                found = (table._open(*key, int(ts[r]), int(flags[r])), 0)
            conn_of[j], side_of[j] = found
        fid = self.fid
        valid = fid >= 0
        rows = np.flatnonzero(valid)
        if not len(rows):
            return
        conn_index = {}
        cid = np.empty(len(keys), dtype=np.int64)
        for j in range(len(keys)):
            cid[j] = conn_index.setdefault(id(conn_of[j]), len(conn_index))
            conns[cid[j]] = conn_of[j]
        side_arr = np.array(side_of, dtype=np.int64)
        row_conn = cid[fid[rows]]
        row_side = side_arr[fid[rows]]
        by_conn = np.argsort(row_conn, kind="stable")
        bounds = np.flatnonzero(np.diff(row_conn[by_conn])) + 1
        for group in np.split(by_conn, bounds):
            c = int(row_conn[group[0]])
            self._connection(conns[c], rows[group], row_side[group])

    def _all_exact(self) -> None:
        rows = np.flatnonzero(self.fid >= 0).tolist()
        self._exact(rows)

    def _exact(self, rows: list[int]) -> None:
        d = self.d
        segment = d._flows.segment
        rb = self.rows_before
        mv = self.mv
        slow = self.slow
        keys, fid = self.keys, self.fid
        seq, ack, flags, pstart, plen, wlen, ts = (
            self.seq, self.ack, self.flags, self.pstart, self.plen, self.wlen, self.ts
        )  # fmt: skip
        for r in rows:
            d._row = rb + r
            seg = slow.get(r)
            if seg is None:
                src, sport, dst, dport = keys[fid[r]]
                p = int(pstart[r])
                seg = (src, sport, dst, dport, int(seq[r]), int(ack[r]), int(flags[r]),
                       mv[p : p + int(plen[r])], int(wlen[r]))  # fmt: skip
            segment(seg, int(ts[r]))
            self._tag(r)

    def _connection(self, conn: Any, rows: np.ndarray, sides: np.ndarray) -> None:
        if conn.ignored:
            return
        owner = conn.owner
        if (
            owner is None
            or not owner.stream
            or (self.slow and self.slow.keys() & set(rows.tolist()))
            or not all(_clean(s, f) for s, f in zip(conn.streams, owner.framers))
        ):
            self._exact(rows.tolist())
            return
        flags, seq, wlen, plen = self.flags[rows], self.seq[rows], self.wlen[rows], self.plen[rows]
        k = len(rows)
        plans = []
        for side in (0, 1):
            where = np.flatnonzero(sides == side)
            if not len(where):
                continue
            stream = conn.streams[side]
            fl, sq, wl, pl = flags[where], seq[where], wlen[where], plen[where]
            syn = (fl & SYN) != 0
            bad = syn.copy()
            if stream.started:
                base = stream.next_seq
            elif syn[0]:
                base = (int(sq[0]) + 1) & SEQ_MASK
                bad[0] = False
            else:
                k = min(k, int(where[0]))  # midstream start: the exact code reports it
                continue
            rel = ((sq + syn) - base) & SEQ_MASK
            rel[rel >= HALF_SEQ_SPACE] -= 2 * HALF_SEQ_SPACE
            data = wl > 0
            ends = rel + wl
            run = np.maximum.accumulate(np.where(data, ends, 0))
            prev = np.empty_like(run)
            prev[0] = 0
            prev[1:] = run[:-1]
            np.maximum(prev, 0, out=prev)
            in_order = data & (rel == prev)
            retrans = data & (ends <= prev)
            # far from the run (over 2**30 bytes either way): whether it is ahead or behind
            # depends on where the stream is at that packet, which the exact code knows
            far = (rel < -(HALF_SEQ_SPACE >> 1)) | (ends > (HALF_SEQ_SPACE >> 1))
            irregular = bad | (data & ~in_order & ~retrans) | (pl < wl) | (data & far)
            hit = np.flatnonzero(irregular)
            if len(hit):
                k = min(k, int(where[hit[0]]))
            plans.append((side, where, base, rel, ends, wl, in_order, retrans, syn, fl, prev))
        saved = _save(conn)
        events = len(self.events)
        hot_chunks = len(self.hot)
        self.check = check = LimitCheck(owner.framers[0].frame_limit,
                                        min(MIN_LIMIT, owner.framers[0].max_frame))  # fmt: skip
        self._fast(conn, rows, k, plans)
        if check.changes and check.wrong():
            # A Tune changed the frame limit while the other direction was walked on its own
            # clock: do this connection's block again, packet by packet.
            _restore(conn, saved)
            del self.events[events:]
            del self.hot[hot_chunks:]
            self._exact(rows.tolist())
            return
        if k < len(rows):
            self._exact(rows[k:].tolist())

    def _fast(self, conn: Any, rows: np.ndarray, k: int, plans: list) -> None:
        """Rows before `k` (per connection) are regular: apply them in bulk."""
        if k <= 0:
            return
        d = self.d
        owner = conn.owner
        ts = self.ts
        rb = self.rows_before
        for side, where, base, rel, ends, wl, in_order, retrans, syn, fl, prev in plans:
            n = int(np.searchsorted(where, k))
            if not n:
                continue
            stream = conn.streams[side]
            framer = owner.framers[side]
            direction = owner.direction(side)
            if not stream.started:
                stream.started = True
                stream.isn = (base - 1) & SEQ_MASK
                stream.next_seq = base
            offset0 = stream.offset
            rrows = rows[where[:n]]
            io = np.flatnonzero(in_order[:n])
            for j in np.flatnonzero(retrans[:n]).tolist():
                r = int(rrows[j])
                d._row = rb + r
                d._anomaly(int(ts[r]), owner.id, direction, "retransmission",
                           offset0 + int(rel[j]), int(wl[j]), "")  # fmt: skip
                self._tag(r)
            ends_fin = np.flatnonzero(fl[:n] & FIN)
            if len(ends_fin) and stream.fin_offset is None:
                j = int(ends_fin[0])
                stream.fin_offset = offset0 + int(rel[j]) + int(wl[j])
            if np.any(fl[:n] & RST):
                conn.rst = True
            if np.any((fl[:n] & (FIN | RST)) == FIN):
                conn.fin[side] = True
            if len(io):
                advance = int(ends[io[-1]])
                stream.next_seq = (base + advance) & SEQ_MASK
                stream.offset = offset0 + advance
                seg_rows = rrows[io]
                so_a, lo_a, po_a = offset0 + rel[io], wl[io], self.pstart[seg_rows]
                self.arrays = (so_a, lo_a, po_a)
                # Offsets, lengths and positions as int64 arrays of the array module: the
                # walk bisects and indexes them as Python ints, and making one is a copy of
                # bytes, not a Python int per segment as tolist() is. Rows and times stay
                # numpy arrays: only frame ends read them.
                self._frames(framer, side, _ints(so_a), _ints(lo_a), _ints(po_a),
                             seg_rows, ts[seg_rows])  # fmt: skip
        conn.packets += k
        conn.end_ns = int(ts[rows[k - 1]])

    # --- frames over in-order segments -----------------------------------------------

    def _frames(self, framer: Any, side: int, so: array, lo: array, po: array, rows: np.ndarray,
                times: np.ndarray) -> None:  # fmt: skip
        """Frames over one direction's in-order segments of a block: stream offsets `so`,
        lengths `lo`, buffer positions `po`, `rows` and `times` (read as Python ints by io(j)
        and to(j))."""
        io, to = _ints(rows).__getitem__, _ints(times).__getitem__
        mv = self.mv
        tag = self._tag
        send = so[-1] + lo[-1]
        pos = framer.offset

        def read(a: int, b: int) -> bytes:
            j = bisect_right(so, a) - 1
            at = po[j] + a - so[j]
            if b <= so[j] + lo[j]:
                return bytes(mv[at : at + b - a])
            jj = bisect_right(so, b - 1) - 1  # the segment holding the last byte
            parts = [mv[at : po[j] + lo[j]]]
            parts += [mv[p : p + n] for p, n in zip(po[j + 1 : jj], lo[j + 1 : jj])]
            parts.append(mv[po[jj] : po[jj] + b - so[jj]])
            return b"".join(parts)

        if framer.cur_start >= 0:  # a frame begun in an earlier block
            stop = framer.cur_start + framer.cur_total
            upto = min(stop, send)
            need = framer.cur_keep - framer.cur_kept
            if need > 0:
                piece = read(pos, min(pos + need, upto))
                framer.cur_parts.append(piece)
                framer.cur_kept += len(piece)
            framer.cur_have += upto - pos
            framer.offset = upto
            if stop > send:
                return
            j = bisect_right(so, stop - 1) - 1  # the segment that completes it
            limit = framer.frame_limit
            framer._finish_frame(to(j))
            if framer.frame_limit != limit:
                self.check.changes.append((io(j), framer.cur_start, side, framer.frame_limit))
            tag(io(j))
            pos = stop
        keep_limit = framer.deliver_keep_limit
        heads = not self.d.publish_messages
        publishes: list[tuple] = []
        walk = None
        if self.d.columns and getattr(framer.emit, "lane", None) is not None and pos < send:
            # columns mode: the hot frames' offsets noted by the walk (HotWalk)
            walk = HotWalk(hot.HOT_KEYS if heads else hot.HOT_KEYS - {PUBLISH_KEY})
        try:
            self._walk(framer, side, pos, send, so, lo, po, io, to, read, keep_limit, heads,
                       publishes, walk)  # fmt: skip
        finally:
            if publishes:
                self._publishes(framer, side, publishes, so, lo, po, read)
            if walk is not None and walk.starts:
                self._hot_note(framer, side, walk, rows, times, read)

    def _walk(self, framer, side, pos, send, so, lo, po, io, to, read, keep_limit, heads,
              publishes, walk=None) -> None:  # fmt: skip
        buf, mv = self.buf, self.mv
        events = self.events
        out = self.d._out
        decode = framer._decode
        emit = framer.emit
        check = self.check
        low = check.low
        bigs = check.big
        changes = check.changes
        # emit's count and event made here, for records that are neither Publish nor Tune
        lane = getattr(emit, "lane", None)
        if lane is not None:
            counts, connection, direction = lane
            make = self.d._frame_class
        if walk is not None:
            hot_keys, starts, runs = walk.keys, walk.starts, walk.runs
            note = starts.append
            last = len(so) - 1
            equal = EqualRuns(self.arrays, self.frame_heads, starts, read)
        jj = 0
        while pos < send:
            if walk is not None and not out:
                # The hot frames from here, their offsets and sizes noted and nothing else
                # (hot.decode reads them at the block's end); the walk below takes the
                # first other one (HotWalk).
                p = pos
                noted = len(starts)
                limit = framer.frame_limit  # (no hot frame changes it)
                j = jj
                seg_end = so[j] + lo[j]
                shift = po[j] - so[j]
                last_size = last_key = -1
                streak = 0
                while True:
                    if p + HEADER <= seg_end:
                        size, key = _size_key(buf, shift + p)
                    elif p + HEADER > send:
                        break
                    elif p >= seg_end:  # the next segment (they follow each other)
                        j = j + 1 if p == seg_end and j < last else bisect_right(so, p, j) - 1
                        seg_end = so[j] + lo[j]
                        shift = po[j] - so[j]
                        continue
                    else:  # a header across two segments
                        size, key = _size_key(read(p, p + HEADER))
                    end = p + 4 + size
                    if key in hot_keys and 4 <= size <= low and end <= send:
                        note(p)
                        if size != last_size or key != last_key:
                            last_size, last_key, streak = size, key, 0
                        elif streak < 2:
                            streak += 1
                        else:  # the fourth of a kind: more of them may follow (EqualRuns)
                            after = equal.follow(end, size, key, send)
                            streak = 0 if after == end else 2
                            end = after
                            if end >= seg_end:
                                j = bisect_right(so, end, j) - 1 if end < send else last
                                seg_end = so[j] + lo[j]
                                shift = po[j] - so[j]
                        p = end
                        continue
                    if key not in hot_keys or size < 4 or end > send or size > limit:
                        break
                    walk.big.append(len(starts))  # within this limit; LimitCheck learns of it
                    note(p)
                    p = end
                if p != pos:
                    count = len(starts) - noted
                    walk.ends.append(p)  # (a run's frames follow each other: their sizes)
                    runs.append((len(events), count))
                    events.extend(repeat(None, count))  # their places among the events
                    pos = p
                    framer.offset = pos
                    jj = bisect_right(so, pos - 1, jj) - 1
                    if pos >= send:
                        break
            j = jj  # the segment the last frame ended in
            if send - pos < HEADER:
                self._exact_tail(framer, pos, so, lo, po, io, to)
                return
            seg_end = so[j] + lo[j]
            if not so[j] <= pos < seg_end:
                # Clients and brokers end a segment with a frame: this one starts the next
                # (in-order segments follow each other without a gap or an overlap).
                j = j + 1 if pos == seg_end else bisect_right(so, pos, j) - 1
                seg_end = so[j] + lo[j]
            at = po[j] + pos - so[j]
            if pos + HEADER <= seg_end:
                size, key, version = _header(buf, at)
            else:
                size, key, version = _header(read(pos, pos + HEADER))
            limit = framer.frame_limit  # live: a Tune just walked changes it
            if size > low:  # its fate depends on the limit at the packet that tells its size
                k = j if pos + 4 <= seg_end else bisect_right(so, pos + 3) - 1
                bigs.append((io(k), pos, side, size))
            if size > limit or size < 4:  # absurd, or above the negotiated max
                self._exact_tail(framer, pos, so, lo, po, io, to)
                return
            end = pos + 4 + size
            big = key == DELIVER_KEY and keep_limit is not None and size > keep_limit
            if end > send:  # continues in a later block (or never ends)
                keep = DELIVER_HEAD if big else 4 + size
                piece = read(pos, min(send, pos + keep))
                framer.cur_start = pos
                framer.cur_total = 4 + size
                framer.cur_keep = keep
                framer.cur_parts = [piece]
                framer.cur_kept = len(piece)
                framer.cur_have = send - pos
                framer.cur_cut = False
                framer.cur_head_only = big
                framer.offset = send
                return
            jj = j if end <= seg_end else bisect_right(so, end - 1, j) - 1  # completes it
            framer.offset = end
            row = io(jj)
            ts = to(jj)
            if key == PUBLISH_KEY and heads:
                # Counted in one numpy pass after the walk; its place in the order is kept.
                publishes.append((pos, end, size, ts, row, len(events), at, seg_end))
                events.append(None)
                pos = end
                continue
            if big:
                stop = min(end, pos + DELIVER_HEAD)
                head = bytes(mv[at : at + stop - pos]) if stop <= seg_end else read(pos, stop)
                record = _deliver_head_record(head, size, version)
                if record.__class__ is Malformed:  # reported with it, as the framer does
                    framer._emit_head(pos, ts, head, size)
                    record = None
            else:
                frame = bytes(mv[at : at + 4 + size]) if jj == j else read(pos, end)
                record = _fast_record(key, frame, size, version)
                if record is None:
                    decode(pos, ts, frame, size, False)
                    if framer.frame_limit != limit:  # a Tune
                        changes.append((row, pos, side, framer.frame_limit))
            if record is not None:  # a Deliver's head or a small hot frame: not Publish, Tune
                if lane is None or out:
                    emit(pos, ts, record)
                else:
                    counts[side] += 1
                    events.append((row, len(events), make(ts, connection, direction, pos, record)))
                    pos = end
                    continue
            for ev in out:
                events.append((row, len(events), ev))
            out.clear()
            pos = end
        framer.offset = pos

    def _hot_note(self, framer: Any, side: int, walk: HotWalk, rows: np.ndarray,
                  times: np.ndarray, read) -> None:  # fmt: skip
        """The hot frames a walk noted: where their bytes are (the block buffer, or a copy
        for one that crosses segments), the row and time of the packet that completes each,
        their event slots; decoded with the block's others (_hot_block)."""
        so_a, lo_a, po_a = self.arrays
        offsets = np.frombuffer(walk.starts, dtype=np.int64)
        ends = np.empty_like(offsets)
        ends[:-1] = offsets[1:]
        counts = np.array([n for _, n in walk.runs], dtype=np.int64)
        ends[np.cumsum(counts) - 1] = walk.ends  # (each run's last frame)
        sizes = ends - offsets - 4
        seg = np.searchsorted(so_a, offsets, side="right") - 1
        at = po_a[seg] + offsets - so_a[seg]
        crossing = np.flatnonzero(ends > so_a[seg] + lo_a[seg])
        spilled: dict[int, bytes] = {}
        crcs: dict[int, int] = {}
        messages: dict[int, np.ndarray] = {}
        if len(crossing):
            # Their bytes copied to the buffer's patch area: small ones all at once, whole
            # (_patch_small); of a bigger Deliver its head, its chunk's CRC computed over the
            # segments here; of a bigger Publish its head, its messages read where they are
            # (_publish_messages). Past the area's room, kept aside for the record path.
            keep_limit = framer.deliver_keep_limit
            wanted, keys = self._wanted_bytes(crossing, offsets, ends, at, seg, keep_limit)
            small = np.flatnonzero(wanted <= SMALL_COPY)
            room = PATCH - self.patch_used - hot.PAD
            small = small[np.cumsum(wanted[small]) <= room]
            if len(small):
                frames = crossing[small]
                at[frames] = self._patch_small(offsets[frames], offsets[frames] + wanted[small])
            big_publish = np.flatnonzero((keys == PUBLISH_KEY) & (wanted > SMALL_COPY))
            if len(big_publish) and self.patch_used + PUBLISH_HEAD * len(big_publish) < room:
                done = self._publish_messages(crossing[big_publish], offsets, ends, at, messages)
                small = np.union1d(small, big_publish[done])
            crossing = np.delete(crossing, small)
            mv = self.mv
            for k, a, b in zip(crossing.tolist(), offsets[crossing].tolist(),
                               ends[crossing].tolist()):  # fmt: skip
                head = read(a, min(b, a + DELIVER_HEAD))
                key = _header(head)[1]
                if key == DELIVER_KEY and len(head) >= HEAD_BYTES:
                    if keep_limit is None or b - a - 4 <= keep_limit:
                        crcs[k] = self._chunk_crc(head, a, b, so_a, lo_a, po_a)
                    copy = head
                else:
                    copy = read(a, b)
                if self.patch_used + len(copy) + hot.PAD > PATCH:
                    spilled[k] = read(a, b)  # (the record path takes the whole frame)
                    continue
                where = self.patch_start + self.patch_used
                mv[where : where + len(copy)] = copy
                at[k] = where
                self.patch_used += len(copy)
        last = np.searchsorted(so_a, ends - 1, side="right") - 1
        slot = np.concatenate([np.arange(s, s + n, dtype=np.int64) for s, n in walk.runs])
        if walk.big:  # (LimitCheck: the row of the packet that tells the size)
            big = np.asarray(walk.big, dtype=np.int64)
            told = rows[np.searchsorted(so_a, offsets[big] + 3, side="right") - 1]
            self.check.big.extend(zip(told.tolist(), offsets[big].tolist(), repeat(side),
                                      sizes[big].tolist()))  # fmt: skip
        self.hot.append(HotNote(framer, side, offsets.copy(), sizes, at, spilled, crcs,
                                messages, rows[last], times[last], slot, read))  # fmt: skip

    def _publish_messages(self, frames: np.ndarray, offsets: np.ndarray, ends: np.ndarray,
                          at: np.ndarray, messages: dict) -> np.ndarray:
        """Big Publish frames across segments, read where they are: each one's head copied
        to the patch area (`at`), and, when it is a v1 Publish of simple entries of one size
        as its head says, where the (id, entry word) of each of its messages is (one cut by a
        segment boundary: copied to the patch area too) in `messages`. Which of `frames`
        were done so (the others are copied whole)."""
        so_a, lo_a, po_a = self.arrays
        starts = offsets[frames]
        lengths = ends[frames] - starts
        heads_at = self._patch_small(starts, starts + PUBLISH_HEAD)
        h = self.frame_heads[heads_at].view(_PUBLISH_HEAD)
        count, word = h["count"].astype(np.int64), h["entry_word"].astype(np.int64)
        stride = _MESSAGE.itemsize + word
        done = ((h["version"] == 1) & (count > 0) & (word < 0x80000000)
                & (FIRST_ID + count * stride == lengths))  # fmt: skip
        if not done.any():
            return done
        mine = np.flatnonzero(done)
        count, stride = count[mine], stride[mine]
        message = hot.positions(starts[mine] + FIRST_ID, count, stride)  # stream offsets
        seg = np.searchsorted(so_a, message, side="right") - 1
        where = po_a[seg] + message - so_a[seg]
        cut = np.flatnonzero(message + _MESSAGE.itemsize > so_a[seg] + lo_a[seg])
        if len(cut):
            where[cut] = self._patch_small(message[cut], message[cut] + _MESSAGE.itemsize)
        at[frames[mine]] = heads_at[mine]
        for k, part in zip(frames[mine].tolist(), np.split(where, np.cumsum(count)[:-1])):
            messages[k] = part
        return done

    def _wanted_bytes(self, crossing: np.ndarray, offsets: np.ndarray, ends: np.ndarray,
                      at: np.ndarray, seg: np.ndarray, keep_limit: int | None) -> np.ndarray:
        """How many bytes of each crossing frame hot.decode reads (all of it, but a Deliver's
        head when its data is not kept, above keep_limit), and their keys; a frame whose
        header crosses too counts as big (the per-frame copy reads it), its key -1."""
        so_a, lo_a, _ = self.arrays
        lengths = ends[crossing] - offsets[crossing]
        header_inside = offsets[crossing] + HEADER <= so_a[seg[crossing]] + lo_a[seg[crossing]]
        wanted = np.where(header_inside, lengths, PATCH)
        heads = self.frame_heads[np.where(header_inside, at[crossing], 0)].view(_FRAME_HEAD)
        keys = np.where(header_inside, heads["key"].astype(np.int64), -1)
        if keep_limit is not None:
            head_only = (keys == DELIVER_KEY) & (lengths - 4 > keep_limit)
            wanted[head_only] = np.minimum(lengths[head_only], DELIVER_HEAD)
        return wanted, keys

    def _patch_small(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """The stream bytes [starts[i], ends[i]) of the walk just done, copied one after the
        other to the patch area with one gather (each range cut where its segments are);
        where each copy is."""
        so_a, lo_a, po_a = self.arrays
        lengths = ends - starts
        before = np.cumsum(lengths) - lengths  # (where each copy goes in the patch)
        first_seg = np.searchsorted(so_a, starts, side="right") - 1
        last_seg = np.searchsorted(so_a, ends - 1, side="right") - 1
        pieces = last_seg - first_seg + 1
        frame = np.repeat(np.arange(len(starts)), pieces)
        seg = first_seg[frame] + np.arange(len(frame)) - np.repeat(np.cumsum(pieces) - pieces,
                                                                   pieces)  # fmt: skip
        lo = np.maximum(starts[frame], so_a[seg])
        hi = np.minimum(ends[frame], so_a[seg] + lo_a[seg])
        size = hi - lo
        source = po_a[seg] + lo - so_a[seg]  # buffer position of each piece
        target = before[frame] + lo - starts[frame]  # its place in the patch
        total = int(lengths.sum())
        index = np.repeat(source - target, size) + np.arange(total, dtype=np.int64)
        first = self.patch_start + self.patch_used
        patch = np.frombuffer(self.mv[first : first + total], dtype=np.uint8)
        patch[:] = np.frombuffer(self.buf, dtype=np.uint8)[index]
        self.patch_used += total
        return first + before

    def _chunk_crc(self, head: bytes, a: int, b: int, so_a: np.ndarray, lo_a: np.ndarray,
                   po_a: np.ndarray) -> int:  # fmt: skip
        """CRC-32 of the chunk data of the Deliver at stream offsets [a, b), over the
        segments that hold it (no copy); hot.decode compares it with the header's."""
        need, layout = hot.DELIVER_HEADS.get(_header(head)[2], (None, None))
        if need is None:
            return 0  # (no v1/v2 Deliver: declined, the record path explains it)
        length = int(np.frombuffer(head, layout, count=1)["data_length"][0])
        lo, hi = a + need, min(b, a + need + length)
        crc = 0
        j = int(np.searchsorted(so_a, lo, side="right")) - 1
        mv = self.mv
        while lo < hi:
            seg_end = int(so_a[j] + lo_a[j])
            upto = min(hi, seg_end)
            at = int(po_a[j]) + lo - int(so_a[j])
            crc = zlib.crc32(mv[at : at + upto - lo], crc)
            lo = upto
            j += 1
        return crc

    def _hot_block(self) -> list:
        """The block's hot frames (HotNotes) decoded at once from the block buffer (crossing
        frames: from its patch area); a frame that fails a check, or was spilled, is decoded
        as a record, in its place. The chunks that hot.place merges with the events."""
        notes, self.hot = self.hot, []
        self.patch_used = 0
        data = np.frombuffer(self.buf, dtype=np.uint8)
        starts = np.concatenate([note.at for note in notes])
        for note in notes:  # (decoded as records below)
            for k in note.spilled:
                note.at[k] = 0
        crcs, messages, first = {}, {}, 0
        for note in notes:
            crcs.update((first + k, crc) for k, crc in note.crcs.items())
            messages.update((first + k, where) for k, where in note.messages.items())
            first += len(note.at)
        columns = hot.decode(data, np.concatenate([note.at for note in notes]),
                             self.d.deliver_keep_limit, crcs, self.d.columns == "lines",
                             messages)  # fmt: skip
        accepted = columns.accepted
        chunks = []
        first = 0
        for note in notes:
            n = len(note.at)
            good = accepted[first : first + n]
            for k in note.spilled:
                good[k] = False
            frames, connection, direction = note.framer.emit.lane
            for k in np.flatnonzero(~good).tolist():
                self._hot_record(note, k, int(note.sizes[k]), int(starts[first + k]), data)
            kept = int(good.sum())
            frames[note.side] += kept
            if kept:
                chunks.append(hot.chunk(columns, first, good, note.row[good], note.slot[good],
                                        note.ts[good], note.offsets[good], connection,
                                        direction))  # fmt: skip
            first += n
        return chunks

    def _hot_record(self, note: HotNote, k: int, size: int, at: int, data: np.ndarray) -> None:
        """A hot frame hot.decode declined (or spilled), decoded as a record in its place: a
        big Deliver from its head, as the framer keeps it."""
        framer = note.framer
        offset, ts = int(note.offsets[k]), int(note.ts[k])
        frame = note.spilled.get(k)
        if frame is None:  # (a crossing Deliver's or Publish's copy is its head)
            frame = data[at : at + 4 + size].tobytes()
            if k in note.crcs or k in note.messages:
                frame = note.read(offset, offset + 4 + size)
        keep_limit = framer.deliver_keep_limit
        if (keep_limit is not None and size > keep_limit
                and _header(frame)[1] == DELIVER_KEY):  # fmt: skip
            framer._emit_head(offset, ts, frame[: min(4 + size, DELIVER_HEAD)], size)
        else:
            framer._decode(offset, ts, frame, size, False)
        self._place_out(int(note.row[k]), int(note.slot[k]))

    def _publishes(self, framer: Any, side: int, items: list, so: array, lo: array, po: array,
                   read) -> None:  # fmt: skip
        """Publish frames of one direction and block, without copying their messages: v1
        frames whose messages all have one simple-entry size are checked and their ids read
        with numpy; any other goes through the codec."""
        emit = framer.emit
        n = len(items)
        pos, size, at, seg_end = (np.fromiter(map(itemgetter(k), items), np.int64, n)
                                  for k in (0, 2, 6, 7))  # fmt: skip
        # The heads (up to the first message's entry word), read for all at once where the
        # segment holds them, one by one where they cross into the next.
        h = self.frame_heads[at].view(_PUBLISH_HEAD)
        version, publisher = h["version"].astype(np.int64), h["publisher_id"].astype(np.int64)
        count, word = h["count"].astype(np.int64), h["entry_word"].astype(np.int64)
        whole = size + 4 >= PUBLISH_HEAD
        for k in np.flatnonzero(whole & (pos + PUBLISH_HEAD > seg_end)).tolist():
            a = int(pos[k])
            _, _, version[k], publisher[k], count[k], _, word[k] = _publish_head(
                read(a, a + PUBLISH_HEAD), 0)
        stride = _MESSAGE.itemsize + word
        ok = (whole & (version == 1) & (count > 0) & (word < 0x80000000)
              & (FIRST_ID + count * stride == 4 + size))  # fmt: skip
        ok_frames = np.flatnonzero(ok)
        ids_of: dict[int, list] = {}
        if len(ok_frames):
            counts, strides, firsts = count[ok_frames], stride[ok_frames], pos[ok_frames] + FIRST_ID
            total = int(counts.sum())
            frame_of = np.repeat(np.arange(len(ok_frames)), counts)
            starts_of = np.cumsum(counts) - counts
            index = np.arange(total, dtype=np.int64) - starts_of[frame_of]
            at = firsts[frame_of] + index * strides[frame_of]  # stream offsets of messages
            so_a, lo_a, po_a = self.arrays
            seg = np.searchsorted(so_a, at, side="right") - 1
            within = at - so_a[seg]
            inside = within + _MESSAGE.itemsize <= lo_a[seg]
            bufpos = po_a[seg] + within
            bufpos[~inside] = 0
            fields = self.messages[bufpos].view(_MESSAGE)  # (id, entry word) of each message
            ids = fields["publishing_id"].astype(np.uint64)
            words = fields["entry_word"].astype(np.int64)
            for m in np.flatnonzero(~inside).tolist():  # the few cut by a segment boundary
                a = int(at[m])
                mid, mword = _message_head(read(a, a + _MESSAGE.itemsize))
                ids[m] = mid
                words[m] = mword
            good = words + _MESSAGE.itemsize == strides[frame_of]
            bad_frames = set(frame_of[~good].tolist())
            # A frame whose ids go up one by one (what clients send) gets them as a range
            # (what emit makes of such a list): no Python int per message.
            steps = (ids[1:] - ids[:-1] != 1) | (ids[1:] < ids[:-1])  # (u64: no wrap)
            broken = set(frame_of[1:][steps & (frame_of[1:] == frame_of[:-1])].tolist())
            firsts_of = ids[starts_of].tolist()
            starts_list = starts_of.tolist()
            for f, (k, n_ids) in enumerate(zip(ok_frames.tolist(), counts.tolist())):
                if f in bad_frames:
                    continue
                if f in broken:
                    first = starts_list[f]
                    ids_of[k] = ids[first : first + n_ids].tolist()
                else:
                    ids_of[k] = range(firsts_of[f], firsts_of[f] + n_ids)
        for k, (item, pid, n_ids) in enumerate(zip(items, publisher.tolist(), count.tolist())):
            start, end, frame_size, ts, row, slot = item[:6]
            ids = ids_of.get(k)
            if ids is not None:
                emit(start, ts, PUBLISH(PUBLISH_KEY, 1, frame_size, None, None, False, pid, None,
                                        ids, n_ids))  # fmt: skip
            else:
                framer._decode(start, ts, read(start, end), frame_size, False)
            self._place_out(row, slot)

    def _place_out(self, row: int, slot: int) -> None:
        """What the framer just put in d._out, for a frame deferred by the walk: in its slot
        of the events (a malformed report comes with its record: both kept, in order)."""
        out = self.d._out
        events = self.events
        for k, ev in enumerate(out):
            if k == 0:
                events[slot] = (row, slot, ev)
            else:
                events.append((row, slot + k / 1024, ev))
        out.clear()

    def _exact_tail(self, framer: Any, pos: int, so: array, lo: array, po: array, io: Any,
                    to: Any) -> None:  # fmt: skip
        """From `pos` on, feed the segments to the framer itself (odd sizes, resync); `io(j)`
        and `to(j)`: segment j's row and time."""
        self.check.tail = True
        d = self.d
        rb = self.rows_before
        mv = self.mv
        framer.offset = pos
        first = bisect_right(so, pos) - 1
        at = pos - so[first]
        for j in range(first, len(so)):
            d._row = rb + io(j)
            framer.data(mv[po[j] + at : po[j] + lo[j]], to(j))
            self._tag(io(j))
            at = 0


def _sliding(memory: Any, at: int, size: int, width: int) -> np.ndarray:
    """memory[at : at + size] as `width`-byte void items starting at every byte (stride 1):
    indexing it with record or message positions copies whole items, one memcpy each (a
    2-D byte window copies byte by byte, a structured dtype field by field: 2.5x and 17x
    slower here); the result is then viewed with its structured dtype."""
    items = np.ndarray(shape=(size - width + 1,), dtype=np.dtype(f"V{width}"), buffer=memory,
                       offset=at, strides=(1,))  # fmt: skip
    items.flags.writeable = False  # (overlapping items)
    return items


def _columns(memory: Any, at: int) -> np.ndarray:
    return np.ndarray((COLUMNS, MAX_ROWS), dtype=np.int64, buffer=memory, offset=at)


def _parsed(columns: np.ndarray, n: int, flows: int) -> tuple:
    """parse_packets' results as the helper left them in a slot's columns (views)."""
    per_packet = [columns[i, :n] for i in range(FLOW_COLUMNS)]
    per_packet[8] = per_packet[8].astype(bool)  # the parsed-here mask
    uniq_a, uniq_p, firsts = (columns[FLOW_COLUMNS + i, :flows] for i in range(3))
    return (*per_packet, uniq_a.view(np.uint64), uniq_p.view(np.uint64), firsts)


def _ints(values: np.ndarray) -> array:
    """An int64 numpy array as an array.array (indexing gives Python ints quickly)."""
    out = array("q")
    out.frombytes(np.ascontiguousarray(values, dtype=np.int64).view(np.uint8).data)
    return out


MIN_LIMIT = MIN_NEGOTIATED_FRAME_MAX - 4  # no negotiated limit is lower


@dataclass(slots=True)
class HotNote:
    """The hot frames of one walk, until the block's end (_hot_block): stream offsets,
    positions in the block buffer (crossing ones: in its patch area), rows, times, event
    slots."""

    framer: Any
    side: int
    offsets: np.ndarray
    sizes: np.ndarray
    at: np.ndarray
    spilled: dict  # frame number -> its bytes, past the patch area's room
    crcs: dict  # frame number -> CRC-32 of a crossing Deliver's chunk data
    messages: dict  # frame number -> where a crossing Publish's messages are
    row: np.ndarray
    ts: np.ndarray
    slot: np.ndarray
    read: Any  # (a, b) -> the walk's stream bytes [a, b), for a declined crossing frame


class EqualRuns:
    """Columns mode: frames of one size and key one after the other (a client's Publish of one
    message each, a consumer's Credits) checked a batch at a time with numpy, not walked one
    by one: their headers gathered from where their offsets say they are. The batch grows
    while the frames keep coming, and starts small again after a miss."""

    __slots__ = ("batch", "heads", "lo", "po", "read", "so", "starts")

    def __init__(self, arrays: tuple, heads: np.ndarray, starts: array, read: Any) -> None:
        self.so, self.lo, self.po = arrays
        self.heads = heads
        self.starts = starts
        self.read = read  # (a, b) -> stream bytes: a header across two segments
        self.batch = 8

    def follow(self, p: int, size: int, key: int, send: int) -> int:
        """From stream offset `p`, where a frame like the last might start: note those that
        do (whole before `send`) and return where they end."""
        step = 4 + size
        while True:
            n = min(self.batch, (send - p) // step)
            if n <= 0:
                return p
            at = p + step * np.arange(n, dtype=np.int64)
            seg = np.searchsorted(self.so, at, side="right") - 1
            within = at - self.so[seg]
            head = self.heads[self.po[seg] + within].view(_FRAME_HEAD)
            same = (head["size"] == size) & (head["key"] == key)
            for k in np.flatnonzero(within + HEADER > self.lo[seg]).tolist():  # (few)
                a = int(at[k])
                same[k] = _size_key(self.read(a, a + HEADER)) == (size, key)
            m = n if same.all() else int(np.argmin(same))
            if m:
                self.starts.frombytes(at[:m].tobytes())
                p += m * step
            if m < n:
                self.batch = 8
                return p
            self.batch = min(self.batch * 4, 4096)


class HotWalk:
    """Columns mode, one direction's walk of a block: the hot keys, the stream offsets and
    sizes of the hot frames noted, and their runs (first event slot, count)."""

    __slots__ = ("big", "ends", "keys", "runs", "starts")

    def __init__(self, keys: frozenset) -> None:
        self.keys = keys
        self.starts = array("q")
        self.ends: list[int] = []  # (where each run ends)
        self.big: list[int] = []  # (indexes into starts: frames above LimitCheck.low)
        self.runs: list[tuple[int, int]] = []


class LimitCheck:
    """Did a Tune walked in one direction change the frame limit under the other one?"""

    __slots__ = ("big", "changes", "initial", "low", "tail")

    def __init__(self, initial: int, low: int) -> None:
        self.initial = initial
        self.low = low  # frames up to this size are within every limit
        self.big: list[tuple] = []  # (row that tells the size, offset, side, size)
        self.changes: list[tuple] = []  # (row of the Tune, offset, side, new limit)
        self.tail = False  # exact code ran on its own clock

    def wrong(self) -> bool:
        if self.tail:
            return True
        changes = sorted(self.changes)
        for row, pos, side, size in self.big:
            limit = self.initial
            for crow, cpos, cside, new in changes:
                if crow < row or (crow == row and cside == side and cpos < pos):
                    limit = new
            if size > limit:  # walked as within the limit: it was not
                return True
        return False


def _save(conn: Any) -> list:
    """The state the bulk walk changes, to undo it."""
    objects = [*conn.streams, *conn.owner.framers]
    saved = [(o, [(k, _copy(getattr(o, k))) for k in _slots(type(o))]) for o in objects]
    framers = conn.owner.framers
    extra = ([list(f.cur_parts) for f in framers], [bytearray(f.rbuf) for f in framers])
    return [saved, extra, conn.packets, conn.end_ns, list(conn.fin), conn.rst,
            list(conn.owner.frames)]  # fmt: skip


def _slots(cls: type) -> tuple[str, ...]:
    """Every slot of a class and its bases (a framer may be a subclass: rotated.facts)."""
    names = _SLOTS.get(cls)
    if names is None:
        names = _SLOTS[cls] = tuple(dict.fromkeys(
            n for c in reversed(cls.__mro__) for n in getattr(c, "__slots__", ())))  # fmt: skip
    return names


_SLOTS: dict[type, tuple[str, ...]] = {}


def _copy(value: Any) -> Any:
    return value[:] if value.__class__ is list else value  # (a list the walk may grow)


def _restore(conn: Any, saved: list) -> None:
    state, (parts, rbufs), conn.packets, conn.end_ns, fin, conn.rst, frames = saved
    for o, values in state:
        for k, v in values:
            setattr(o, k, v)
    for f, p, r in zip(conn.owner.framers, parts, rbufs):
        f.cur_parts, f.rbuf = p, r
    conn.fin[:] = fin
    conn.owner.frames[:] = frames


def _clean(stream: Any, framer: Any) -> bool:
    """Is this direction in a state the bulk code can take over from?"""
    return (
        not stream.pending
        and framer.synced
        and not framer.cur_cut
        and (framer.cur_start < 0 or framer.cur_have >= HEADER)
        and framer.offset == stream.offset
    )
