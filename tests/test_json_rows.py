"""The compiled writer of the JSON report's rows (cli/_json_rows.c) against the json module
and the Python writer it stands in for (_text_report's _column_format and _joined_rows, the
reference): every character's escape, floats whose text it makes without the digit search
and the ones it leaves to it, ints at int64's edges and past them, every column kind, and
each value it must leave to the Python writer (which casts it as pandas would)."""

from __future__ import annotations

import enum
import random
from array import array
from json.encoder import encode_basestring_ascii, py_encode_basestring_ascii

import numpy as np
import pytest
from test_json_formats import HOSTILE, assert_same_text

from streamdissect.cli import _text_report as report

COMPILED = report.compiled_rows
pytestmark = pytest.mark.skipif(COMPILED is None,
                                reason="the C extension was not built or not wanted")  # fmt: skip


def _one_column(spec: bytes, values) -> str | None:
    """The values' texts, comma-separated, by the compiled writer."""
    return COMPILED.json_rows(["", ""], spec, [values], len(values))


def test_every_character_is_escaped_as_the_json_module_does():
    every = [chr(c) for c in range(0x110000)]  # (lone surrogates too)
    assert_same_text(_one_column(b"t", ["".join(every)]), encode_basestring_ascii("".join(every)))
    # each ASCII character at each place of a text read eight characters at a time
    placed = [f"{'a' * at}{c}{'b' * (19 - at)}" for c in every[:0x80] for at in range(20)]
    for texts in (every[:0x3000], every[0xD700:0xE100], every[0x10000::97], HOSTILE, placed):
        expected = ",".join(map(encode_basestring_ascii, texts))
        assert expected == ",".join(map(py_encode_basestring_ascii, texts))
        assert_same_text(_one_column(b"t", texts), expected)
        assert_same_text(_one_column(b"v", tuple(texts)), expected)


def _float_values(rng: random.Random) -> list[float]:
    """Latencies in ms from ns (m / 1e6) across the range written without the digit search
    and past its edges (1e-4, 2**33), multiples of 2**-12 below and above 2**16, and values
    of every other kind (-0.0, subnormals, the largest, random digits and exponents)."""
    values = [rng.randrange(10**k) / 1e6 for k in range(1, 17) for _ in range(4000)]
    values += [(2**33 + d) + k / 1e6 for d in (-2, -1, 0, 1) for k in range(-3000, 3000, 7)]
    values += [1e-4 + k * 1e-12 for k in range(-500, 500)] + [100 / 1e6, 99 / 1e6]
    values += [q + k / 4096 for q in (0, 1, 9, 4095, 65535, 65536, 2**40) for k in range(4096)]
    values += [rng.random() * 10.0 ** rng.randrange(-30, 30) for _ in range(50_000)]
    values += [0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e16,
               1e15 + 0.5, 0.1, 0.3, 2 / 3, 1e22, 9007199254740993.0]  # fmt: skip
    return values + [-v for v in values[::3]]


def test_float_texts_are_float_repr():
    values = _float_values(random.Random(31))
    expected = ",".join(map(float.__repr__, values))
    for spec in (b"f", b"v"):
        assert_same_text(_one_column(spec, values), expected)
        assert_same_text(_one_column(spec, array("d", values)), expected)
        assert_same_text(_one_column(spec, np.array(values)), expected)


def test_int_texts_are_int_repr():
    rng = random.Random(32)
    edges = [0, -1, 1, 9, 10, -10, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**64, -(2**70),
             10**40]  # fmt: skip
    values = edges + [rng.randrange(-(2**63), 2**63) >> rng.randrange(64) for _ in range(5000)]
    expected = ",".join(map(int.__repr__, values))
    for spec in (b"i", b"v"):
        assert_same_text(_one_column(spec, values), expected)
    small = [v for v in values if -(2**63) <= v < 2**63]
    assert_same_text(_one_column(b"i", array("q", small)), ",".join(map(int.__repr__, small)))


class _Code(enum.IntEnum):
    OK = 0


# per spec: a column of every value it takes, and values it leaves to the Python writer
TAKEN = {
    b"i": [0, -5, 2**70, None, 2**63 - 1],
    b"f": [0.5, 337.242, None, -0.0, 1e300, 0.000244140625],
    b"t": ["SEND_OK", None, 'é\n"', "", "\ud800"],
    b"b": [True, False, None, True, None],
    b"v": [None, True, 1, "x\x00", 2.5, 2**64],
}
LEFT = {
    b"i": [True, 1.0, "1", np.int64(1), _Code.OK, array("d", [1.0] * 64),
           np.zeros(64, np.int32)],
    b"f": [1, float("nan"), float("inf"), -float("inf"), np.float64(0.5), True,
           array("q", [1] * 64)],
    b"t": [b"x", 1, True, np.str_("x")],
    b"b": [1, 0, 0.0, np.bool_(True), "true"],
    b"v": [float("nan"), float("inf"), _Code.OK, np.float64(1.5), b"x", (1,), {}],
}
TEXT = {b"i": report._int_column, b"f": report._float_column, b"t": report._str_column,
        b"b": report._bool_column, b"v": report._cells}  # fmt: skip


def _python_rows(opening: str, heads: list[str], close: str, columns: list, specs: bytes,
                 n: int) -> str:  # fmt: skip
    """The same rows by the Python writer (the reference)."""
    cells = [_column_format(TEXT[bytes((spec,))], column) for spec, column in zip(specs, columns)]
    return report._joined_rows(opening, heads, cells, close, n)


def _column_format(text, column):
    return report._column_format(text, column if column.__class__ is array else list(column))


@pytest.mark.parametrize("n", [1, 5, 40])
def test_rows_are_the_python_writers(n):
    """Columns of every spec, shuffled, with "%" and quotes in the keys: the Python writer's
    rows; a column holding one value the spec leaves to it: None."""
    rng = random.Random(n)
    specs = b"ifftbvv"
    columns = [[rng.choice(TAKEN[bytes((s,))]) for _ in range(n)] for s in specs]
    columns[2] = array("d", [rng.choice([0.5, 337.242, 1e-7]) for _ in range(n)])
    heads = ["\n  \"k0%\": "] + [f",\n  \"k{i}\\\"%s\": " for i in range(1, len(specs))]
    pieces = report._pieces("\n {", heads, "\n }")
    made = COMPILED.json_rows(pieces, specs, columns, n)
    assert made is not None
    assert_same_text(made, _python_rows("\n {", heads, "\n }", columns, specs, n))
    for spec, left in LEFT.items():
        at = specs.index(spec)
        for value in left:
            odd = list(columns)
            if isinstance(value, (array, np.ndarray)):
                odd[at] = value  # (a buffer of a kind the spec does not take)
            else:
                odd[at] = [*columns[at][:-1], value]
            assert COMPILED.json_rows(pieces, specs, odd, n) is None, (spec, value)


def test_what_it_cannot_write_is_none():
    """A piece not ASCII, a column shorter than n, a map's text not a str or not ASCII."""
    assert COMPILED.json_rows(["é", ""], b"i", [[1]], 1) is None
    assert COMPILED.json_rows(["", ""], b"i", [[1]], 2) is None
    assert COMPILED.json_rows(["", ""], b"i", [array("q", [1])], 2) is None
    assert COMPILED.json_rows(["", ""], b"s", [["{\"a\": 1}", None]], 2) is None
    assert COMPILED.json_rows(["", ""], b"s", [["é"]], 1) is None
    assert COMPILED.json_rows(["", ""], b"s", [["{\"a\": 1}", "null"]], 2) == '{"a": 1},null'
    with pytest.raises(ValueError):
        COMPILED.json_rows(["", ""], b"x", [[1]], 1)
    with pytest.raises(ValueError):
        COMPILED.json_rows([""], b"i", [[1]], 1)


def test_a_text_repeated_is_written_as_the_first_time():
    """The same str object again in a column (a send's connection, topic, status: most rows')
    is copied from its first text: alternating with others, None and escapes, in both specs
    and in a chunk large enough that the text is moved as the output grows."""
    texts = ['conn "a"\n', "é", "", "x" * 40, None]
    column = [texts[i % 3 // 2 * (i % 5)] for i in range(5000)]  # (runs and alternations)
    expected = ",".join("null" if v is None else encode_basestring_ascii(v) for v in column)
    for spec in (b"t", b"v"):
        assert_same_text(_one_column(spec, column), expected)
        assert_same_text(_one_column(spec, tuple(column)), expected)
    pieces = ["\n {\"a\": ", ", \"b\": ", "}"]
    rows = COMPILED.json_rows(pieces, b"tt", [column, column[::-1]], len(column))
    assert_same_text(rows, ",".join(f"\n {{\"a\": {a}, \"b\": {b}}}" for a, b in zip(
        expected.split(","), expected.split(",")[::-1])))


@pytest.mark.parametrize("n", [1, 2, 3, 300])
def test_columns_of_one_value_are_the_python_writers(n):
    """Columns each of one value in the rows (the same object, or an array of one number)
    beside columns that vary, first, last and together: the Python writer's rows; and None
    when such a column's value is one its spec leaves to Python."""
    rng = random.Random(n)
    one = {b"i": 2**70, b"f": 337.242, b"t": 'conn "a"\n', b"b": True, b"v": "é"}
    specs = b"iftbvfiitv"
    columns: list = []
    for at, spec in enumerate(specs):
        key = bytes((spec,))
        if at % 3 == 1:  # (varying)
            columns.append([rng.choice(TAKEN[key]) for _ in range(n)])
        else:
            columns.append([None if at == 9 else one[key]] * n)
    columns[5] = array("d", [0.5] * n)
    columns[6] = array("q", [-7] * n)
    heads = ["\n  \"k0\": "] + [f",\n  \"k{i}\": " for i in range(1, len(specs))]
    pieces = report._pieces("\n {", heads, "\n }")
    made = COMPILED.json_rows(pieces, specs, columns, n)
    assert made is not None
    assert_same_text(made, _python_rows("\n {", heads, "\n }", columns, specs, n))
    for at, value in ((0, True), (2, 1), (5, array("d", [float("nan")] * n))):
        odd = list(columns)
        odd[at] = value if isinstance(value, array) else [value] * n
        assert COMPILED.json_rows(pieces, specs, odd, n) is None, (at, value)


def test_a_first_row_of_a_huge_text_asks_no_room_for_every_row_as_long():
    """The text's room is guessed from its first row, within a bound: a first row of 1 MB
    before 200,000 short ones asks no 200 GB (a MemoryError), and the rows are written."""
    big = "x" * (1 << 20)
    column = [big] + ["a"] * 200_000
    made = COMPILED.json_rows(["{", "}"], b"t", [column], len(column))
    assert made == ",".join("{" + encode_basestring_ascii(v) + "}" for v in column)
