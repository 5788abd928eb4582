"""CompactRows' chunks made columns by compiled code (analysis/_columns.c) are the Python
code's (compact._column over zip(*rows), the reference): on random chunks of every kind of
column (ints in and past int64, bools, int and float subclasses, floats with NaN and -0.0,
texts, None anywhere, mixed, all None), the same values of the same types, the same array
type codes and None masks, rows given as tuples or lists (or both); rows of two lengths
or neither tuples nor lists are left to Python. And the
rows read back from a CompactRows are the rows given, either way, its chunks spilled too:
a column's tuple packed for the spill (_columns.packed: distinct values and codes, ASCII
texts as one block) reads back as the same values of the same types as pickled as it is."""

from __future__ import annotations

import math
import pickle
import random
from array import array
from enum import IntEnum

import pytest

from streamdissect.analysis import compact
from streamdissect.analysis.compact import CompactRows, _column


def _built():
    """The extension when built (whatever STREAMDISSECT_NATIVE says: the tests')."""
    try:
        from streamdissect.analysis import _columns
    except ImportError:
        return None
    return _columns


pytestmark = pytest.mark.skipif(_built() is None, reason="the compiled columns were not built")


class Small(IntEnum):
    ONE = 1


class Real(float):
    pass


_KINDS = {
    "int": lambda r: r.randint(-(2**63), 2**63 - 1),
    "small": lambda r: r.randint(-5, 5),
    "big": lambda r: r.choice((2**63, -(2**63) - 1, 2**70)),
    "bool": lambda r: r.random() < 0.5,
    "intenum": lambda r: Small.ONE,
    "float": lambda r: r.choice((r.random() * 1e9, -0.0, float("nan"), float("inf"), 1e-300)),
    "real": lambda r: Real(2.5),
    "text": lambda r: r.choice(("a", "bc", "")),
    "bytes": lambda r: b"x",
    # (texts made anew each time: many distinct, some equal; not ASCII; a str subclass)
    "id": lambda r: f"{r.randrange(10**6):x}" * r.randint(0, 3),
    "accented": lambda r: r.choice(("é", "ab\u20ac", "\U0001f600x", "\ud800")),
    "named": lambda r: Named("n"),
}


class Named(str):
    pass


def _value(rng: random.Random, kinds: list[str], none: float):
    if rng.random() < none:
        return None
    return _KINDS[rng.choice(kinds)](rng)


def _chunk(rng: random.Random, n: int = 0) -> list[tuple]:
    width, n = rng.randint(1, 6), n or rng.randint(1, 300)
    plan = []
    for _ in range(width):
        main = rng.choice(list(_KINDS))
        other = rng.choice(list(_KINDS)) if rng.random() < 0.2 else main
        kinds = [main] * 50 + [other]  # (another kind now and then, or none)
        plan.append((kinds, rng.choice((0.0, 0.0, 0.1, 0.9, 1.0))))
    return [tuple(_value(rng, kinds, none) for kinds, none in plan) for _ in range(n)]


def _same(a, b) -> bool:
    """Equal values of equal types (NaN equal to NaN, -0.0 not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, array):
        return a.typecode == b.typecode and a.tobytes() == b.tobytes()
    if isinstance(a, float):
        return a.hex() == b.hex() if not math.isnan(a) else math.isnan(b)
    return a == b


@pytest.fixture
def built():
    return _built()


@pytest.mark.parametrize("seed", range(40))
def test_the_compiled_chunk_is_the_python_chunk(built, seed):
    rng = random.Random(seed)
    rows = _chunk(rng)
    if seed % 2:  # (some rows as lists: RowTable's complete rows)
        rows = [list(row) if rng.random() < 0.7 else row for row in rows]
    made = built.columns(rows, array)
    assert made is not None
    assert _same(made, [_column(c) for c in zip(*rows)])


class Row(tuple):
    pass


def test_rows_not_of_one_length_or_not_tuples_or_lists_are_left_to_python(built):
    assert built.columns([(1, 2), (3,)], array) is None
    assert built.columns([[1, 2], (3,)], array) is None
    assert built.columns([(1, 2), Row((3, 4))], array) is None
    assert built.columns([range(2)], array) is None
    assert built.columns([], array) is None
    assert _same(built.columns([[1, "a"], (2, "b")], array), [_column((1, 2)), (("a", "b"), None)])
    with pytest.raises(TypeError):
        built.columns(((1,),), array)


@pytest.mark.parametrize("spill", [False, True])
@pytest.mark.parametrize("native", [True, False])
def test_rows_read_back_are_the_rows_given(built, native, spill, monkeypatch):
    monkeypatch.setattr(compact, "compiled", built if native else None)
    monkeypatch.setattr(CompactRows, "CHUNK", 64)
    if spill:  # (every chunk written to the temporary file as it is made)
        monkeypatch.setattr(CompactRows, "SPILL_BYTES", 0)
    rng = random.Random(7)
    for _ in range(10):
        rows = _chunk(rng, 500)
        table = CompactRows(len(rows[0]))
        table.extend(rows[:100])
        for row in rows[100:]:
            table.append(row)
        assert (table._file is not None) == spill
        assert _same(list(table[0 : len(rows)]), rows)
        table.close()


def _column_values(rng: random.Random) -> tuple:
    """A column's values as a chunk keeps them in a tuple: of one kind or mixed, few
    distinct objects (each many times) or many, past 256 and 65,536 values now and then."""
    kinds = rng.sample(list(_KINDS), rng.choice((1, 1, 2)))
    n = rng.choice((1, 2, 300, 4096, 70_000 if rng.random() < 0.1 else 5000))
    pool = [_value(rng, kinds, 0.1) for _ in range(rng.choice((1, 3, 200, 300, n)))]
    return tuple(rng.choice(pool) for _ in range(n))


@pytest.mark.parametrize("seed", range(30))
def test_a_packed_column_reads_back_as_pickled_as_it_is(built, seed, monkeypatch):
    rng = random.Random(seed)
    values = _column_values(rng)
    chunk = [(values, None), (array("q", range(len(values))), None)]
    monkeypatch.setattr(compact, "compiled", built)
    packed = pickle.loads(compact._spilled(chunk))
    monkeypatch.setattr(compact, "compiled", None)
    plain = pickle.loads(compact._spilled(chunk))
    assert _same(packed, plain) and _same(packed, chunk)
    parts = built.packed(values)
    assert (parts is None) == (len(values) > 65_536)
    if parts is not None:  # (the same objects where the distinct values were kept)
        distinct, text, _, codes, _ = parts
        assert (text is None) == (distinct is not None)
        assert (codes is None) == (len(set(map(id, values))) == len(values))
        again = built.unpacked(*parts)
        assert _same(again, values)
        if distinct is not None:
            assert all(a is b for a, b in zip(again, values))


def test_packed_parts_that_do_not_fit_are_an_error_not_a_crash(built):
    parts = built.packed(("ab", "c", "ab"))
    assert _same(built.unpacked(*parts), ("ab", "c", "ab"))
    distinct, text, lengths, codes, size = parts
    for bad in [(distinct, text[:-1], lengths, codes, size),
                (distinct, text + b"x", lengths, codes, size),
                (distinct, text, lengths[:-1], codes, size),
                (distinct, text, lengths, b"\x05", size), (distinct, text, lengths, codes, 3),
                (None, None, None, codes, size)]:  # fmt: skip
        with pytest.raises(ValueError):
            built.unpacked(*bad)
    assert built.packed([1, 2]) is None and built.packed(()) is None
