"""The compiled run of a pcapng file's Enhanced Packet Blocks (capture/_records.c: epb_run)
against PcapngWalk's Python run, the reference: the same pieces, the same bytes after (times
rewritten in place), the same last time (benchmarks/fuzz_native.py: pcapng_walked), on every
shipped capture converted by editcap, the odd pcapng files test_input_forms.py makes
(several interfaces, link types and time resolutions, simple and obsolete blocks, both byte
orders, damaged and big blocks), made-worse and mutated copies, each read in random pieces;
and the run's refusals of hostile input and of inconsistent arguments.
"""

from __future__ import annotations

import importlib
import importlib.util
import random
import struct

import numpy as np
import pytest
import test_input_forms as forms
import worsen
from test_bulk_engine import WORSE
from test_fuzz_harness import load

from streamdissect.capture import native, pcapng_walk

load()  # (puts benchmarks/ on the path)
import fuzz_native

NAME = "streamdissect.capture._records"
BUILT = importlib.util.find_spec(NAME) is not None
COMPILED = importlib.import_module(NAME) if BUILT else None  # (also when switched off)
# (test_native.py fails when the extensions should have been built and were not)
needs_build = pytest.mark.skipif(not BUILT, reason="the C extension was not built (no C "
                                 "compiler at install): nothing to compare")  # fmt: skip


@pytest.fixture
def compiled(monkeypatch):
    """The compiled run loaded, whatever STREAMDISSECT_NATIVE says (both runs compared)."""
    monkeypatch.setattr(native, "loaded", COMPILED)
    return COMPILED


def walks_alike(data: bytes, seed: int, times: int = 4) -> None:
    """Both runs alike on `data` read whole and in `times` random ways."""
    rng = random.Random(seed)
    for _ in range(times):
        assert fuzz_native.check_native_pcapng_walk(data, rng)
    whole = fuzz_native.pcapng_walked(data, COMPILED, [])
    assert any(kind == 0 and payload for pieces in whole[0] for kind, payload in pieces), \
        "no EPB was walked in place"


@pytest.mark.tshark
@pytest.mark.parametrize("path", worsen.corpus_captures(), ids=lambda p: p.stem)
@needs_build
def test_runs_alike_on_the_corpus_converted_by_editcap(path, compiled, tmp_path):
    walks_alike(worsen.to_pcapng(path, tmp_path / "c.pcapng").read_bytes(), 25)


@pytest.mark.parametrize("big_endian", [False, True], ids=["le", "be"])
@pytest.mark.parametrize("name", sorted(forms.PCAPNG_CASES))
@needs_build
def test_runs_alike_on_odd_pcapng(name, big_endian, compiled, tmp_path):
    path = forms._odd_pcapng(name, tmp_path / "odd.pcapng", big_endian)
    data = path.read_bytes()
    if name in ("binary-resolution", "picoseconds"):  # (no EPB in place: all the exact way)
        rng = random.Random(7)
        assert all(fuzz_native.check_native_pcapng_walk(data, rng) for _ in range(4))
    else:
        walks_alike(data, 7)


@pytest.mark.parametrize("name", sorted(WORSE))
@needs_build
def test_runs_alike_on_made_worse_copies(name, compiled, tmp_path):
    _, packets = worsen.read_pcap(worsen.real_capture())
    interfaces = [worsen.Interface(1, 9), worsen.Interface(1, 6, 1_000)]
    data = worsen.pcapng_bytes(WORSE[name](packets), interfaces=interfaces,
                               choose=lambda k: ((k // 3) % 2, "epb"))  # fmt: skip
    walks_alike(data, 11)


@needs_build
def test_runs_alike_on_sections_big_and_damaged_blocks(compiled, tmp_path):
    """test_input_forms.py's files of two sections (either byte order) and of damaged and
    big blocks (their bytes, as it writes them)."""
    forms.test_sections_of_either_byte_order_in_one_file(tmp_path)
    walks_alike((tmp_path / "sections.pcapng").read_bytes(), 3)
    forms.test_big_and_damaged_blocks_same_as_stream(tmp_path)
    walks_alike((tmp_path / "damaged.pcapng").read_bytes(), 3)


@needs_build
def test_runs_alike_on_mutated_block_headers(compiled):
    """Lengths, interfaces, captured lengths and times of random blocks overwritten with
    random and edge values: a run stops where the Python one does, or a block is reported
    as the reference reader does."""
    _, packets = worsen.read_pcap(worsen.real_capture())
    interfaces = [worsen.Interface(1, 9), worsen.Interface(1, 6, -2**40)]
    good = worsen.pcapng_bytes(packets[:200], interfaces=interfaces,
                               choose=lambda k: (k % 2, "epb"), big_endian=True)  # fmt: skip
    rng = random.Random(3)
    starts, pos = [], 0
    while pos + 8 <= len(good):
        starts.append(pos)
        pos += struct.unpack_from(">I", good, pos + 4)[0]
    edges = (0, 1, 12, 28, 31, 32, 33, 36, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFC, 0xFFFFFFFF)
    for _ in range(300):
        data = bytearray(good)
        for _ in range(rng.randrange(1, 4)):
            at = rng.choice(starts) + rng.choice((0, 4, 8, 12, 16, 20))
            value = rng.choice(edges) if rng.random() < 0.5 else rng.getrandbits(32)
            struct.pack_into(">I", data, at, value)
        fuzz_native.check_native_pcapng_walk(bytes(data), rng)


REFUSAL = "pcapng section header has a bad byte-order magic"


@needs_build
def test_a_file_the_reader_refuses_is_both_runs_outcome(compiled):
    """A first section header with a bad byte-order magic: the reader's clear error, the
    same for both runs (a finding of the fuzz campaign's harness, which let it escape)."""
    _, packets = worsen.read_pcap(worsen.real_capture())
    data = bytearray(worsen.pcapng_bytes(packets[:20]))
    data[8:12] = b"\x01\x02\x03\x04"
    assert fuzz_native.check_native_pcapng_walk(bytes(data), random.Random(5))
    made = fuzz_native.pcapng_walked(bytes(data), COMPILED, [])[0]
    assert made == [("refused", f"walked.pcapng: {REFUSAL}")]


def test_the_compiled_run_takes_every_form(walk_mode, tmp_path, monkeypatch):
    """pcapng, gzip'd pcapng and a pipe (the forms of test_input_forms.py) are walked by
    the compiled run when it is loaded, by the Python one when it is not."""
    used = []
    real = native.loaded
    if real is not None:
        monkeypatch.setattr(native, "loaded", _Counting(real, used))
    python_run = pcapng_walk.PcapngWalk._python_run
    monkeypatch.setattr(pcapng_walk.PcapngWalk, "_python_run",
                        lambda self, *a: used.append("python") or python_run(self, *a))
    ng = forms._pcapng_of(worsen.real_capture(), tmp_path)
    wanted = "python" if walk_mode == "python" or real is None else "compiled"
    for paths in ([ng], forms.FORMS["pcapng-gzip"](worsen.real_capture(), tmp_path),
                  forms._fifo_form(ng, tmp_path)):  # fmt: skip
        used.clear()
        forms.outcome(paths, "bulk", helper_process=False)
        assert used and set(used) == {wanted}, paths
    for feeder in forms.FEEDERS:
        feeder.kill()
    forms.FEEDERS.clear()


class _Counting:
    """The extension module, its epb_run calls noted."""

    def __init__(self, module, used: list) -> None:
        self.module, self.used = module, used

    def epb_run(self, *args):
        self.used.append("compiled")
        return self.module.epb_run(*args)

    def __getattr__(self, name: str):
        return getattr(self.module, name)


# --- epb_run's arguments -------------------------------------------------------------------


def _tables(n: int = 1) -> list:
    return [b"\x01" * n, np.full(n, 1, np.int64), np.zeros(n, np.int64),
            np.zeros(n, np.uint64), np.full(n, 1 << 40, np.uint64)]  # fmt: skip


def _epb(block_len: int = 40, caplen: int = 8, iface: int = 0, units: int = 5) -> bytes:
    head = struct.pack("<IIIIIII", 6, block_len, iface, units >> 32, units & 0xFFFFFFFF,
                       caplen, caplen)  # fmt: skip
    return head + bytes(max(0, min(block_len, 64) - 28))


def _run(buf, pos=0, end=None, tables=None):
    end = len(buf) if end is None else end
    return COMPILED.epb_run(buf, pos, end, False, 1 << 20, *(tables or _tables()))


@pytest.mark.parametrize("block", [
    _epb(0xFFFFFFFF), _epb(0xFFFFFFFC), _epb(0), _epb(12), _epb(28), _epb(38, caplen=0), _epb(100),
    _epb(40, caplen=9), _epb(40, caplen=0xFFFFFFFF), _epb(40, iface=1), _epb(40, iface=2**31),
    _epb(40, units=1 << 41), b"\x07" + _epb()[1:], _epb()[:39],
], ids=["len-max", "len-4G", "len-0", "len-12", "len-28", "len-unaligned", "len-past-end",
        "caplen-past-block", "caplen-max", "iface-undeclared", "iface-huge", "time-out-of-range",
        "unknown-type", "cut"])  # fmt: skip
@needs_build
def test_a_hostile_block_ends_the_run_where_python_does(block, compiled):
    """A block the run does not take: none taken, the position at it, nothing written."""
    buf = bytearray(_epb() + block)
    before = bytes(buf)
    starts, pos, last = _run(buf)
    assert (np.frombuffer(starts, np.int64).tolist(), pos) == ([12], 40)
    assert last == 5 and buf[40:] == before[40:]
    walk = pcapng_walk.PcapngWalk("x.pcapng")
    walk.blocks.order = "<"
    walk.regular_mask = b"\x01"
    walk.regular = frozenset({0})
    walk.scale, walk.offset_ns, walk.units_min, walk.units_max = _tables()[1:]
    again = bytearray(before)
    at, stop = walk._python_run(again, 0, len(again))
    assert (at.tolist(), stop) == ([12], 40) and again == buf


@needs_build
@pytest.mark.parametrize(("units", "taken"), [(4, False), (5, True), (9, True), (10, False)])
def test_times_taken_within_the_interface_s_bounds(units, taken, compiled):
    """An interface whose times in units 5 to 9 convert (the others go the exact way)."""
    tables = _tables()
    tables[3], tables[4] = np.full(1, 5, np.uint64), np.full(1, 9, np.uint64)
    starts, pos, last = _run(bytearray(_epb(40, units=units)), tables=tables)
    assert (len(starts) // 8, pos, last) == ((1, 40, units) if taken else (0, 0, -1))


@needs_build
@pytest.mark.parametrize("changed", ["pos", "end", "table", "readonly"])
def test_inconsistent_arguments_are_refused(changed, compiled):
    buf = bytearray(_epb() * 2)
    tables = _tables()
    if changed == "pos":
        with pytest.raises(ValueError):
            _run(buf, pos=-1)
    elif changed == "end":
        with pytest.raises(ValueError):
            _run(buf, end=len(buf) + 1)
    elif changed == "table":
        tables[3] = np.zeros(2, np.uint64)
        with pytest.raises(ValueError):
            _run(buf, tables=tables)
    else:
        with pytest.raises(BufferError):
            _run(bytes(buf))


@needs_build
def test_times_rewritten_in_either_byte_order(compiled):
    """units 10**9 + 7 at 1 ns a unit and an offset of 2 s: 3 s and 7 ns, in the file's
    order, where the EPB's time was."""
    units = 10**9 + 7
    for big, order in ((False, "<"), (True, ">")):
        block = bytearray(struct.pack(order + "IIIIIII", 6, 32, 0, units >> 32,
                                      units & 0xFFFFFFFF, 0, 0) + struct.pack(order + "I", 32))
        tables = [b"\x01", np.ones(1, np.int64), np.full(1, 2 * 10**9, np.int64),
                  np.zeros(1, np.uint64), np.full(1, 1 << 40, np.uint64)]  # fmt: skip
        starts, pos, last = compiled.epb_run(block, 0, 32, big, 1 << 20, *tables)
        assert (np.frombuffer(starts, np.int64).tolist(), pos, last) == ([12], 32, 3 * 10**9 + 7)
        assert struct.unpack_from(order + "II", block, 12) == (3, 7)
