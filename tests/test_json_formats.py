"""The JSON report's rows written a chunk at a time in one format (cli._text_report: a column
of ints, of finite floats, of None, of one int or one string each goes into the format its
own way) are json.dumps(indent=1)'s text: for table rows (RowStream, tuples or
CompactRows) and for rows of dicts of one set of keys, with every kind of column, strings
holding "%", and chunks where a column is one value, or all but one."""

from __future__ import annotations

import json
import random

import pytest

from streamdissect.analysis.compact import CompactRows
from streamdissect.cli import _text_report as report
from streamdissect.cli._text_report import json_text, json_write

STRINGS = ["10.0.0.1:5000-10.0.0.2:5552", "100%", "%s%d", 'é\n"', ""]


def _anomaly(i: int, rng: random.Random, same: bool) -> tuple:
    """An anomalies row (ts_ns, connection, direction, kind, stream_offset, length,
    detail); `same`: most columns keep one value."""
    if same:
        return (7, STRINGS[1], "c2s", "gap", i if i % 97 == 5 else 3, 2**70, "")
    return (rng.choice([i, -i, 2**63 - 1, None]), rng.choice(STRINGS + [None]),
            rng.choice(["c2s", "s2c"]), rng.choice(STRINGS), rng.choice([i, True, None]),
            rng.choice([1448, 2**70, None]), rng.choice(STRINGS))  # fmt: skip


@pytest.mark.parametrize("chunk", [report.ROW_CHUNK, 1, 7])
@pytest.mark.parametrize("same", [True, False])
@pytest.mark.parametrize("compact", [False, True])
def test_table_rows_are_json_dumps(chunk, same, compact, monkeypatch):
    monkeypatch.setattr(report, "ROW_CHUNK", chunk)
    rng = random.Random(chunk)
    given = [_anomaly(i, rng, same) for i in range(300)]
    rows = given
    if compact:  # (kept as columns: arrays where the values allow)
        rows = CompactRows(7)
        rows.extend(given)
    pieces: list[str] = []
    json_write({"anomalies": report.RowStream("anomalies", rows)}, pieces.append)
    expected = json.dumps({"anomalies": report.plain_records("anomalies", given)}, indent=1)
    assert "".join(pieces) == expected


@pytest.mark.parametrize("same", [True, False])
def test_rows_of_dicts_are_json_dumps(same):
    rng = random.Random(3)
    values = [0, 1, -1, 2**70, 0.5, -0.0, float("nan"), float("inf"), True, None, "a%sb",
              "%", "x"]  # fmt: skip
    keys = ["start_ns", "a%d", "s", "f"]
    rows = []
    for i in range(200):
        if same:  # (each column one value but for a few rows)
            row = {"start_ns": 5, "a%d": "%d%%", "s": i if i == 150 else 1, "f": 0.25}
        else:
            row = {k: rng.choice(values) for k in keys}
        rows.append(row)
    for table in (rows, rows[:1], rows[150:151]):
        assert json_text({"t": table}) == json.dumps({"t": table}, indent=1)


BOOL_COLUMNS = {  # a bool column's values in a chunk: each kind of text, and values cast
    "all true": [True] * 40, "all false": [False] * 40, "mixed": [True, False] * 20,
    "with None": [None, True, False, None] * 10, "all None": [None] * 40,
    "ints and floats": [1, 0, 2, 0.0, float("nan"), None, True] * 6,
}  # fmt: skip


@pytest.mark.parametrize("chunk", [report.ROW_CHUNK, 1, 7])
@pytest.mark.parametrize("column", list(BOOL_COLUMNS))
def test_bool_columns_are_json_dumps(chunk, column, monkeypatch):
    """(a bool column of one value goes into the format as its text; of bools and None, its
    texts looked up; any other, each value cast as pandas would)"""
    from streamdissect.tables import schema

    monkeypatch.setattr(report, "ROW_CHUNK", chunk)
    names = schema.column_names("rocketmq_pulls")
    at = names.index("long_poll")
    given = [tuple(v if i == at else (n if i == 0 else None) for i in range(len(names)))
             for n, v in enumerate(BOOL_COLUMNS[column])]  # fmt: skip
    _assert_written_as_json_dumps("rocketmq_pulls", given)


def _assert_written_as_json_dumps(table: str, given: list[tuple]) -> None:
    """The rows written by RowStream, as a list and kept as CompactRows, are json.dumps's."""
    expected = json.dumps({"t": report.plain_records(table, given)}, indent=1)
    kept = CompactRows(len(given[0]))
    kept.extend(given)
    for rows in (given, kept):
        pieces: list[str] = []
        json_write({"t": report.RowStream(table, rows)}, pieces.append)
        assert "".join(pieces) == expected


@pytest.mark.parametrize("chunk", [report.ROW_CHUNK, 1, 7])
@pytest.mark.parametrize("odd", [None, float("nan"), 2**70, "x%d"])
def test_rows_of_numbers_are_json_dumps(chunk, odd, monkeypatch):
    """(rows whose varying columns are all ints and finite floats go into one %-format; a
    chunk with a text column, or a column of other values, into one join)"""
    monkeypatch.setattr(report, "ROW_CHUNK", chunk)

    def stall(i: int, odd=1) -> tuple:
        text = odd.__class__ is str  # (a text where the connection's one value was)
        end = i * 1000 + i % 3 if odd == 1 or text else odd
        return (odd if text else "c%d", 1, i * 1000, end, i * 0.001 + 0.5, "x", True)

    given = [stall(i) for i in range(60)]
    given[17] = stall(17, odd)
    _assert_written_as_json_dumps("stalls", given)
