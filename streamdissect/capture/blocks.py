"""A classic pcap file read in large blocks: where its records are, block by block.

The file is read into one reused buffer, BLOCK bytes at a time; record boundaries are walked
in Python, with runs of equal-sized records taken in one step (walk_records). With a CPU to
spare, a forked helper reads and walks the file into SLOTS shared buffers that the caller
dissects in place (helper_layout), and may parse each block's packets there too. Fixed
sizes, never taken from the file: peak memory is the same for any large capture.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import signal
import stat
import struct
from array import array
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from streamdissect.capture.limits import MAX_PACKET
from streamdissect.capture.pcap import FILE_HEADER_SIZE, PCAP_MAGICS, RECORD_HEADER_SIZE

# The per-block work is ~150 numpy calls whatever the block's size: 16 MiB blocks take
# ~0.1 s less CPU than 4 MiB ones on the 621 MB benchmark capture (benchmarks/README.md),
# for ~16.3 MiB of buffer, or 3 x that with the helper.
BLOCK = 16 << 20


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


BLOCK_REGION, BAD_REGION, CUT_REGION = 0, 1, 2
# One item of a file's layout: (kind, file offset, length, record starts within the block).
# BLOCK_REGION: whole records in [offset, offset + length); BAD_REGION: a record claiming
# `length` captured bytes (> MAX_PACKET) at offset; CUT_REGION: the file ends `length` bytes
# into a record at offset.
Region = tuple[int, int, int, array]


class Reading(NamedTuple):
    """How a classic pcap file is read: its path, byte order ("<" or ">"), block size."""

    path: str
    order: str
    block: int


def layout(f: Any, reading: Reading, buf: bytearray) -> Iterator[Region]:
    """Where the records of a classic pcap file are, block by block, reading the file `f`
    (positioned after its header) into `buf`. A BLOCK_REGION's bytes are at buf[:length]
    while it is handled."""
    u32 = struct.Struct(reading.order + "I").unpack_from
    block = reading.block
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
            yield BLOCK_REGION, base, pos, starts
        if bad:
            yield BAD_REGION, base + pos, u32(buf, pos + 8)[0], array("q")
            return
        rest = end - pos
        if not got:
            if rest:
                yield CUT_REGION, base + pos, rest, array("q")
            return
        buf[:rest] = buf[pos:end]
        base += pos
        have = rest


# kind, slot, offset, length, n, and the number of flows when the helper parsed the block's
# packets (its `parse`) into the slot, else -1. Parsed, the block's n record starts are
# there too; else n bytes of starts follow on the pipe. (In shared memory they do not fill
# the pipe: the helper runs ahead by up to SLOTS blocks.)
_ITEM = struct.Struct("<BBQQQq")
FIRST_BLOCK = 1 << 20  # the helper's first read; each next one twice the last, up to BLOCK
FIRST_READ = 1 << 18  # the first read without a helper (see layout)
SLOTS = 3  # shared read buffers: one being filled, one waiting, one being dissected


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


# (slot, record starts in it) -> the number of flows of the block's packets parsed into
# the slot, or -1 (not parsed)
Parse = Callable[[int, np.ndarray], int]


def helper_layout(reading: Reading, slots: SharedSlots, parse: Parse | None = None):
    """Blocks of the file read, and their record boundaries found, by a forked helper process
    (another CPU) into shared slots: (kind, slot, file offset, length, starts, flows) for
    the parent to dissect in place; a slot goes back to the helper when the parent asks for
    the next block. `parse`, run by the helper, may parse the block's packets into the
    slot. `starts`: the record starts as bytes, or, for a block parsed (flows >= 0), their
    number."""
    path = reading.path
    data_r, data_w = os.pipe()
    free_r, free_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the helper: no return from here
        code = 0
        try:
            os.close(data_r)
            os.close(free_w)
            _helper(reading, slots, (data_w, free_r), parse)
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


def _helper(reading: Reading, slots: SharedSlots, pipes: tuple[int, int],
            parse: Parse | None) -> None:  # fmt: skip
    """The helper process: reads the file into free slots, finds their records, writes
    what it found to the data pipe, and takes back the slots the parent is done with from
    the free pipe (`pipes`: the data pipe's write end, the free pipe's read end)."""
    data_w, free_r = pipes
    u32 = struct.Struct(reading.order + "I").unpack_from
    shared, slot_size, block = slots.memory, slots.stride, reading.block
    free = list(range(SLOTS))

    def take() -> int:
        if free:
            return free.pop(0)
        got = os.read(free_r, 1)
        if not got:
            raise EOFError("the parent went away")
        return got[0]

    with open(data_w, "wb", buffering=0) as out, open(reading.path, "rb", buffering=0) as f:
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


def sliding(memory: Any, at: int, size: int, width: int) -> np.ndarray:
    """memory[at : at + size] as `width`-byte void items starting at every byte (stride 1):
    indexing it with record or message positions copies whole items, one memcpy each (a
    2-D byte window copies byte by byte, a structured dtype field by field: 2.5x and 17x
    slower here); the result is then viewed with its structured dtype."""
    items = np.ndarray(shape=(size - width + 1,), dtype=np.dtype(f"V{width}"), buffer=memory,
                       offset=at, strides=(1,))  # fmt: skip
    items.flags.writeable = False  # (overlapping items)
    return items


