"""walk_records (the bulk engine's record boundaries, capture.blocks) against a plain one-record-at-a-time
walk: runs of one size, sizes whose length bytes are regular-expression syntax, both byte
orders, a record cut by the end, an absurd captured length; by the compiled walk
(capture/_records.c) and the Python one (native_modes), and the compiled one refusing a
position outside its buffer."""

import importlib.util
import random
import struct

import pytest
from native_modes import walk_mode  # noqa: F401 (a fixture)

from streamdissect.capture import native
from streamdissect.capture.blocks import walk_records
from streamdissect.capture.limits import MAX_PACKET

pytestmark = pytest.mark.usefixtures("walk_mode")
NAME = "streamdissect.capture._records"
BUILT = importlib.util.find_spec(NAME) is not None


def plain_walk(buf: bytes, u32) -> tuple[list[int], int, bool]:
    starts, pos = [], 0
    while len(buf) - pos >= 16:
        cap = u32(buf, pos + 8)[0]
        if cap > MAX_PACKET:
            return starts, pos, True
        if pos + 16 + cap > len(buf):
            break
        starts.append(pos)
        pos += 16 + cap
    return starts, pos, False


@pytest.mark.parametrize("order", ["<", ">"])
def test_same_as_a_plain_walk(order):
    u32 = struct.Struct(order + "I").unpack_from
    rng = random.Random(5)

    def record(cap: int) -> bytes:
        return struct.pack(order + "IIII", 1, 2, cap, cap) + bytes(rng.randrange(256)
                                                                   for _ in range(cap))

    # 0x2A2B / 0x5C7C: length bytes '*', '+', '\\', '|'
    sizes = [1514] * 70 + [66, 1514, 1514, 0x2A2B, 0x2A2B, 0x2A2B, 0x5C7C, 0x5C7C] + [0] * 9
    sizes += [rng.choice([54, 66, 1514, 1514, 1514]) for _ in range(400)]
    data = b"".join(record(n) for n in sizes)
    for cut in (len(data), len(data) - 3, len(data) - 1514):
        buf = bytearray(data[:cut])
        starts, pos, bad = walk_records(buf, 0, len(buf), u32)
        assert (list(starts), pos, bad) == plain_walk(bytes(buf), u32)
    boundary = sum(16 + n for n in sizes[:80])
    absurd = data[:boundary] + struct.pack(order + "IIII", 1, 2, MAX_PACKET + 1, 60)
    starts, pos, bad = walk_records(bytearray(absurd), 0, len(absurd), u32)
    assert (list(starts), pos, bad) == plain_walk(absurd, u32)
    assert bad


def test_from_an_offset_and_up_to_an_end():
    """A walk from inside the buffer up to a shorter end (a block's records after those
    walked before, the rest read later): the plain walk of that slice, moved."""
    u32 = struct.Struct("<I").unpack_from
    data = b"".join(struct.pack("<IIII", 1, 2, n, n) + b"q" * n for n in [60, 0, 1514, 7] * 5)
    for pos, end in ((0, 0), (76, len(data) - 1), (76, 76 + 15), (92, len(data))):
        starts, after, bad = walk_records(bytearray(data), pos, end, u32)
        plain, plain_after, plain_bad = plain_walk(data[pos:end], u32)
        assert (list(starts), after, bad) == ([pos + s for s in plain], pos + plain_after,
                                              plain_bad)  # fmt: skip


@pytest.mark.skipif(not BUILT, reason="the C extension was not built (the Python walk runs)")
def test_compiled_walk_refuses_positions_outside_its_buffer():
    compiled = importlib.import_module(NAME)
    buf = bytearray(struct.pack("<IIII", 1, 2, 4, 4) + b"abcd")
    assert compiled.record_starts(buf, 0, len(buf), False, MAX_PACKET)[1:] == (20, False)
    for pos, end in ((-1, 20), (0, 21), (10, 5), (21, 21)):
        with pytest.raises(ValueError):
            compiled.record_starts(buf, pos, end, False, MAX_PACKET)
    if native.loaded is not None:  # (the native mode: what walk_records runs)
        assert native.loaded is compiled


def test_many_sizes_compile_few_patterns(monkeypatch):
    """A file of many record sizes, each twice in a row: at most RUN_PATTERNS run patterns
    are compiled a block (each costs ~85 us) by the Python walk, and the walk is still the
    plain one."""
    from streamdissect.capture import blocks

    compiled = []
    real_compile = blocks.re.compile
    monkeypatch.setattr(blocks.re, "compile", lambda *a: compiled.append(a) or real_compile(*a))
    u32 = struct.Struct("<I").unpack_from
    data = b"".join(struct.pack("<IIII", 1, 2, n, n) + b"z" * n
                    for n in range(100, 600) for _ in range(2))  # fmt: skip
    starts, pos, bad = walk_records(bytearray(data), 0, len(data), u32)
    assert (list(starts), pos, bad) == plain_walk(data, u32)
    assert len(compiled) == (blocks.RUN_PATTERNS if native.loaded is None else 0)
