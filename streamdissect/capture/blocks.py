"""A classic pcap file read in large blocks: where its records are, block by block.

The file is read into one reused buffer, BLOCK bytes at a time; record boundaries are walked
(walk_records: compiled when built, else in Python, with runs of equal-sized records taken
in one step). With a CPU to spare, a forked helper reads and walks the file into SLOTS shared
buffers that the caller dissects in place (helper_layout), and may parse each block's packets
there too. Fixed sizes, never taken from the file: peak memory is the same for any large
capture.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import re
import select
import signal
import struct
import weakref
from array import array
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, Protocol

import numpy as np

from streamdissect.capture import native
from streamdissect.capture.limits import MAX_PACKET
from streamdissect.capture.pcap import RECORD_HEADER_SIZE

# The per-block work is ~150 numpy calls whatever the block's size (4 MiB blocks cost the
# 621 MB benchmark capture ~0.1 s more CPU than 16 MiB ones), but with the reading helper
# 8 MiB ones take less wall time (the three slots a block is handed on in stay within the
# processor's cache, and a small-frame block fits one parse of MAX_ROWS packets): -0.03 s on
# both benchmark captures, peak RSS -27 MB (benchmarks/README.md, "Twelfth round").
BLOCK = 8 << 20


# Run patterns compiled per block at most (~85 us each): a file of many sizes, each twice in
# a row, must not cost a compile a record; past this its runs are walked one by one.
RUN_PATTERNS = 64
# Runs are looked for among records of this size or more (full-MSS segments come in long
# runs; small ones repeat a few times at most, where a match costs more than it saves).
RUN_MIN = 512


def walk_records(buf: bytearray, pos: int, end: int, u32: Any) -> tuple[array, int, bool]:
    """Record starts from `pos` while whole records are in buf[:end]; (starts, position
    after the last whole record, True when a record's captured length is absurd). By the
    compiled walk when it is loaded (capture.native), else _walk_records."""
    compiled = native.loaded
    if compiled is None:
        return _walk_records(buf, pos, end, u32)
    noted, pos, bad = compiled.record_starts(buf, pos, end, u32.__self__.format[0] == ">",
                                             MAX_PACKET)  # fmt: skip
    starts = array("q")
    starts.frombytes(noted)
    return starts, pos, bad


def _walk_records(buf: bytearray, pos: int, end: int, u32: Any) -> tuple[array, int, bool]:
    """walk_records in Python (the reference of _records.record_starts)."""
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
    caps = sliding(buf, 0, len(buf), 4)[at + 8].view(np.dtype(order + "u4")).astype(np.int64)
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


# What a walk of a capture's bytes finds, in order: (kind, payload) pieces.
# BLOCK_REGION: record starts (classic pcap record headers) in the read buffer; ANOMALY: a
# file's anomaly (kind, ts_ns, file offset, detail); PACKETS: packets the reference reader's
# code took one by one (capture.pcap.Packet tuples, their data as bytes); LAYOUT: how the
# records of the regions after it are read (Layout); FILE: the next file of a set begins
# (its number); MERGE: (file number, file offset): from that record on, the set's files
# overlap in time and are merged the reference way.
BLOCK_REGION, ANOMALY, PACKETS, LAYOUT, FILE, MERGE = 0, 1, 2, 3, 4, 5


class Layout(NamedTuple):
    """How a region's records are read: byte order, nanoseconds per fraction of a second,
    link type, and what to add to a record's start for its block's file offset."""

    order: str
    frac_ns: int
    linktype: int
    shift: int


class PcapWalk:
    """Walks a classic pcap file's records (after its header): walk_records, and the file's
    anomalies as the reference reader (capture.pcap) reports them."""

    def __init__(self, order: str, frac_ns: int, linktype: int) -> None:
        self.layout = Layout(order, frac_ns, linktype, 0)
        self.u32 = struct.Struct(order + "I").unpack_from
        self.head = struct.Struct(order + "II").unpack_from
        self.last_ts: int | None = None

    def walk(self, buf: Any, pos: int, end: int, offset_of: int) -> tuple[list, int, bool]:
        """(pieces, position after them, stopped) for the records in buf[pos:end]."""
        starts, pos, bad = walk_records(buf, pos, end, self.u32)
        pieces: list = []
        if starts:
            sec, frac = self.head(buf, starts[-1])
            self.last_ts = sec * 1_000_000_000 + frac * self.layout.frac_ns
            pieces.append((BLOCK_REGION, np.frombuffer(starts, dtype=np.int64)))
        if bad:
            detail = f"captured length {self.u32(buf, pos + 8)[0]} > cap"
            pieces.append((ANOMALY, ("bad_record", self.last_ts, pos + offset_of, detail)))
        return pieces, pos, bad

    def finish(self, buf: Any, pos: int, end: int, offset_of: int, damage: str | None) -> list:
        """The anomaly of a file that ends `end - pos` bytes into a record."""
        rest = end - pos
        if not rest and not damage:
            return []
        what = "record header cut" if rest < RECORD_HEADER_SIZE else "record data cut"
        return [(ANOMALY, ("truncated_file", self.last_ts, pos + offset_of, damage or what))]


class Reading(NamedTuple):
    """How a capture is read: its files' walks (capture.sources.Source, in order) and the
    largest block size."""

    sources: list
    block: int


# kind, slot, the slot's column area, file offset of the slot's first byte, raw bytes read
# (progress), n, and the number of flows when the helper parsed the region's packets (its
# `parse`) into that area, else -1. Parsed, the region's n record starts are there too; else
# n bytes of starts follow on the pipe; other kinds: n bytes of their pickled payload.
_ITEM = struct.Struct("<BBBQQQq")
FIRST_BLOCK = 1 << 20  # the helper's first read; each next one twice the last, up to BLOCK
FIRST_READ = 1 << 18  # the first read without a helper (see read_blocks)
SLOTS = 3  # shared read buffers: one being filled, one waiting, one being dissected
_WAITING = b"\xff"  # (on the free pipe, not a slot) the parent has nothing left to dissect
_END = 0xFF  # (a kind on the data pipe) the helper read everything: its last item


def read_blocks(reading: Reading, view: memoryview, stride: int, take: Callable[[], int],
                first: int, more: Callable[[int], bool] | None = None) -> Iterator[tuple]:  # fmt: skip
    """The pieces of every file of `reading`, as (kind, slot, base, read, payload): a
    BLOCK_REGION's record starts are relative to its slot, whose first byte is at file offset
    `base`; `read`: raw bytes read since the last one (progress). Each read goes to slot
    take() at `slot * stride`; a slot is handed to take() again only once its block is
    dissected (the caller's business). A small first read (`first`), each next one twice the
    last: a capture that starts mid-connection has its first block's connections go through
    the exact code, so that block is kept short; the files of a set after the first go on
    where the last one's reads were (as one file would: the same blocks, the same memory,
    whatever the files' sizes). A read that comes back short (a pipe's: what had come) is
    handed on as it is, unless more(descriptor) says to wait for more into the same read
    (see _helper)."""
    block = reading.block
    slot = None  # (taken when a file begins: the last one's may still be dissected)
    size = min(first, block)
    for number, source in enumerate(reading.sources):
        if source.skip:
            continue
        if slot is None:
            slot = take()
        yield FILE, slot, 0, 0, number
        walker = source.walker
        if walker.layout is not None:
            yield LAYOUT, slot, 0, 0, walker.layout
        base = source.data_start  # file offset of the slot's first byte
        have = 0
        while True:
            at = slot * stride
            got = source.bytes.readinto(view[at + have : at + have + size])
            while more is not None and 0 < got < size and more(source.bytes.fileno()):
                extra = source.bytes.readinto(view[at + have + got : at + have + size])
                if not extra:
                    break
                got += extra
            size = min(2 * size, block)
            end = at + have + got
            if got:
                pieces, pos, stopped = walker.walk(view.obj, at, end, base - at)
            else:
                pos, stopped = at, True
                pieces = walker.finish(view.obj, at, end, base - at, source.bytes.damage)
            blocks_in_slot = False
            for kind, payload in source.checked(pieces, walker, view.obj, base - at):
                if kind == BLOCK_REGION:
                    blocks_in_slot = True
                    yield kind, slot, base, source.read_since(), payload - at
                else:
                    yield kind, slot, base, 0, payload
                if kind == MERGE:
                    return
            if stopped:
                slot = None if blocks_in_slot else slot
                break
            rest = end - pos
            following = take() if blocks_in_slot else slot
            to = following * stride
            view[to : to + rest] = view[pos:end]
            slot = following
            base += pos - at
            have = rest



def layout(reading: Reading, buf: bytearray) -> Iterator[tuple]:
    """The pieces of the capture read into one buffer, in this process (read_blocks): a
    BLOCK_REGION's bytes are at buf[:...] while it is handled."""
    return read_blocks(reading, memoryview(buf), len(buf), lambda: 0, FIRST_READ)


def can_fork() -> bool:
    """A helper process needs a second CPU. Decided by the CPUs we may run on, not by the
    load average: that lags by a minute, so the choice (and with it the time and memory of
    a run) would depend on what ran just before. On a busy machine the helper only does
    the reading and walking this process would do anyway."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return hasattr(os, "fork") and hasattr(mmap, "MAP_SHARED") and (cpus or 1) >= 2


class SharedSlots(NamedTuple):
    """SLOTS buffers in shared memory, `stride` bytes apart: the file's bytes from each
    slot's start."""

    memory: mmap.mmap
    stride: int


class Parse(Protocol):
    """What a helper may do with the regions it reads: parse their packets into its slot's
    column areas (`areas` of them, `rows` records each)."""

    rows: int
    areas: int

    def __call__(self, slot: int, area: int, starts: np.ndarray, layout: Layout) -> int:
        """The number of flows of the packets at `starts` parsed into the slot's column
        area `area`, or -1 (not parsed)."""


def helper_layout(reading: Reading, slots: SharedSlots, parse: Parse | None = None):
    """The pieces of the capture (read_blocks) read by a forked helper process (another
    CPU) into shared slots: (kind, slot, base, read, payload, flows) for the parent to
    dissect in place; a slot goes back to the helper when the parent asks for the next
    piece. With `parse` (run by the helper) a region is handed over in pieces of at most
    `parse.rows` records, the first `parse.areas` pieces of a read parsed into the slot's
    column areas. A BLOCK_REGION's payload: its record starts as bytes, or, for a piece
    parsed (flows >= 0), (its column area, the number of its records)."""
    _reap_ended()
    data_r, data_w = os.pipe()
    free_r, free_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the helper: no return from here
        code = 0
        try:
            # Only what it reads and its two pipes stay open: a write end of the pipe it
            # reads (a live capture's copier holds one here) would keep it from ending.
            _close_all_but({0, 1, 2, data_w, free_r, *(s.bytes.fileno() for s in reading.sources)})
            _helper(reading, slots, (data_w, free_r), parse)
            _until_closed(free_r)
        except BaseException:  # noqa: BLE001 - the parent sees a short stream
            code = 1
        finally:
            os._exit(code)
    os.close(data_w)
    os.close(free_r)
    done = False
    free = open(free_w, "wb", buffering=0)  # noqa: SIM115 - closed below, or by _let_go
    try:
        with open(data_r, "rb", buffering=0) as src:
            held = None  # (slot, base): the read whose slot is being dissected
            told = False  # the helper was told we wait, since this read came
            while True:
                if not told and not select.select([data_r], [], [], 0)[0]:
                    # Nothing more to dissect: the helper hands on what it has read (at
                    # most once a read, so that these bytes never fill the free pipe).
                    told = True
                    with contextlib.suppress(BrokenPipeError):
                        free.write(_WAITING)
                head = _read_exactly(src, _ITEM.size)
                if len(head) < _ITEM.size:
                    break
                kind, slot, area, base, read, n, flows = _ITEM.unpack(head)
                if kind == _END:
                    done = True
                    break
                if kind == BLOCK_REGION:
                    # A read's regions (several, in pcapng) are dissected before its slot
                    # goes back to the helper, once, when the next read's first one comes.
                    if held != (slot, base):
                        told = False
                        if held is not None:
                            with contextlib.suppress(BrokenPipeError):  # (it may be done)
                                free.write(bytes((held[0],)))
                    held = (slot, base)
                    payload = (area, n) if flows >= 0 else _read_exactly(src, n)
                    yield kind, slot, base, read, payload, flows
                else:
                    yield kind, slot, base, read, pickle.loads(_read_exactly(src, n)), -1
        if done:
            # The helper waits until the shared slots are unmapped here (the memory's owner
            # closes them; then this finalizer runs), so that its exit, not this process,
            # frees their pages: ~0.02 s of a run's end, on the other CPU.
            weakref.finalize(slots.memory, _let_go, free, pid)
            return
        free.close()
        _, status = os.waitpid(pid, 0)
        done = True
        if status:
            raise OSError(f"{reading.sources[0].path}: the capture-reading helper failed "
                          f"(status {status})")  # fmt: skip
    finally:
        if not done:
            free.close()
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


_ending: list[int] = []  # helpers told to end, not reaped yet


def _let_go(free: Any, pid: int) -> None:
    """The helper told it may end (its free pipe closed); not waited for here (its exit
    frees the shared slots' pages): reaped by the next helper_layout, or by init after a
    command's exit. (No thread waits for it: a library call forks only in a process of
    one thread.)"""
    free.close()
    _ending.append(pid)


def _reap_ended() -> None:
    """The helpers told to end that have, reaped."""
    for pid in list(_ending):
        try:
            ended = os.waitpid(pid, os.WNOHANG)[0] != 0
        except ChildProcessError:  # (reaped by someone else)
            ended = True
        if ended:
            _ending.remove(pid)


def _until_closed(fd: int) -> None:
    """(The helper, done) wait until the parent closes the other end of pipe `fd`."""
    with contextlib.suppress(OSError):
        while os.read(fd, 4096):
            pass


def _read_exactly(src: Any, n: int) -> bytes:
    """n bytes from an unbuffered pipe (fewer at its end)."""
    data = src.read(n)
    while data and len(data) < n:
        more = src.read(n - len(data))
        if not more:
            break
        data += more
    return data


def _close_all_but(keep: set[int]) -> None:
    """Close every file descriptor of this process but those in `keep`."""
    low = 0
    for fd in sorted(keep):
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536)


def _helper(reading: Reading, slots: SharedSlots, pipes: tuple[int, int],
            parse: Parse | None) -> None:  # fmt: skip
    """The helper process: reads the capture into free slots, finds their records, writes
    what it found to the data pipe, and takes back the slots the parent is done with from
    the free pipe (`pipes`: the data pipe's write end, the free pipe's read end)."""
    data_w, free_r = pipes
    free = list(range(SLOTS))

    waiting = False  # the parent said it had nothing left to dissect

    def hear() -> None:
        """One byte from the parent: a slot it is done with, or that it waits."""
        nonlocal waiting
        got = os.read(free_r, 1)
        if not got:
            raise EOFError("the parent went away")
        if got == _WAITING:
            waiting = True
        else:
            free.append(got[0])

    def take() -> int:
        while not free:
            hear()
        return free.pop(0)

    def more(fd: int) -> bool:
        # A short read (a pipe's: what had come) is handed on at once only to a parent
        # waiting for it; while the parent is busy, it is filled further as its input
        # comes. So a pipe fed faster than it is dissected is read in whole blocks, as a
        # file is (the same block sizes, time and memory, whatever the timing), and a live
        # capture's packets reach a waiting parent as soon as they come.
        while not waiting:
            ready = select.select([fd, free_r], [], [])[0]
            if free_r in ready:
                hear()
            elif ready:
                return True
        return False

    layout_now: Layout | None = None
    this_read = None  # (slot, base) of the read whose pieces the slot's column areas hold
    used = 0  # column areas of the slot used by this read
    rows = parse.rows if parse is not None else 0
    view = memoryview(slots.memory)
    with open(data_w, "wb", buffering=0) as out:
        for kind, slot, base, read, payload in read_blocks(reading, view, slots.stride, take,
                                                           FIRST_BLOCK, more):  # fmt: skip
            if kind != BLOCK_REGION:
                if kind == LAYOUT:
                    layout_now = payload
                data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
                out.write(_ITEM.pack(kind, slot, 0, base, read, len(data), -1) + data)
                continue
            if this_read != (slot, base):  # (a new read: what the parent waited for)
                this_read, used, waiting = (slot, base), 0, False
            if parse is None:
                data = payload.tobytes()
                out.write(_ITEM.pack(kind, slot, 0, base, read, len(data), -1) + data)
                continue
            # A read's regions (several in pcapng) in pieces the parent dissects one by one;
            # the first pieces parsed into the slot's column areas, the others by the parent.
            for at in range(0, len(payload), rows):
                piece = payload[at : at + rows]
                flows = -1
                if used < parse.areas:
                    flows = parse(slot, used, piece, layout_now)
                if flows >= 0:
                    out.write(_ITEM.pack(kind, slot, used, base, read, len(piece), flows))
                    used += 1
                else:
                    data = piece.tobytes()
                    out.write(_ITEM.pack(kind, slot, 0, base, read, len(data), -1) + data)
                read = 0  # (counted once)
        out.write(_ITEM.pack(_END, 0, 0, 0, 0, 0, -1))


def sliding(memory: Any, at: int, size: int, width: int) -> np.ndarray:
    """memory[at : at + size] as `width`-byte void items starting at every byte (stride 1):
    indexing it with record or message positions copies whole items, one memcpy each (a
    2-D byte window copies byte by byte, a structured dtype field by field: 2.5x and 17x
    slower here); the result is then viewed with its structured dtype."""
    items = np.ndarray(shape=(size - width + 1,), dtype=np.dtype(f"V{width}"), buffer=memory,
                       offset=at, strides=(1,))  # fmt: skip
    items.flags.writeable = False  # (overlapping items)
    return items


