"""walk_records (the bulk engine's record boundaries, capture.blocks) against a plain one-record-at-a-time
walk: runs of one size, sizes whose length bytes are regular-expression syntax, both byte
orders, a record cut by the end, an absurd captured length."""

import random
import struct

import pytest

from streamdissect.capture.blocks import walk_records
from streamdissect.capture.limits import MAX_PACKET


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


def test_many_sizes_compile_few_patterns(monkeypatch):
    """A file of many record sizes, each twice in a row: at most RUN_PATTERNS run patterns
    are compiled a block (each costs ~85 us), and the walk is still the plain one."""
    from streamdissect.capture import blocks

    compiled = []
    real_compile = blocks.re.compile
    monkeypatch.setattr(blocks.re, "compile", lambda *a: compiled.append(a) or real_compile(*a))
    u32 = struct.Struct("<I").unpack_from
    data = b"".join(struct.pack("<IIII", 1, 2, n, n) + b"z" * n
                    for n in range(100, 600) for _ in range(2))  # fmt: skip
    starts, pos, bad = walk_records(bytearray(data), 0, len(data), u32)
    assert (list(starts), pos, bad) == plain_walk(data, u32)
    assert len(compiled) == blocks.RUN_PATTERNS
