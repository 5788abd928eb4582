"""CompactRows.column_slices (what the JSON report reads a table by) gives the columns of the
rows that slicing gives: the same values, of the same types, in the same order, however the
rows were added (one by one, in batches, as numpy columns) and wherever a slice starts and
ends (inside a chunk, across chunks, into the rows not yet made a chunk); a column of one
string (a run's Delivers of one connection) or of None only, kept as the value and a count,
included."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from streamdissect.analysis.compact import CompactRows


def _row(i: int) -> tuple:
    return (i, f"c{i // 50 % 3}", None if i % 7 == 0 else 2**63 + i if i == 500 else i * 3,
            1.5 * i if i % 5 else None, True if i % 2 else None, 2 if i == 900 else 0.5,
            float("nan") if i == 11 else -0.0)  # fmt: skip


def _filled(chunk: int, seed: int) -> tuple[CompactRows, list[tuple]]:
    """1,000 rows added one by one, in batches, and as numpy columns, mixed."""
    rng = random.Random(seed)
    rows, given, i = CompactRows(7), [], 0
    while i < 1000:
        how = rng.choice(("append", "extend", "columns"))
        n = rng.choice((1, 2, chunk - 1, 3 * chunk))
        batch = [_row(k) for k in range(i, min(i + n, 1000))]
        if how == "append":
            for row in batch:
                rows.append(row)
        elif how == "extend":
            rows.extend(batch)
        else:  # (numpy columns where the values allow, with a None mask)
            columns = []
            for values in zip(*batch):
                none = np.array([v is None for v in values])
                if all(type(v) is int and v < 2**63 for v in values if v is not None):
                    array = np.array([0 if v is None else v for v in values], dtype=np.int64)
                    columns.append((array, none))
                elif all(type(v) is float for v in values if v is not None):
                    array = np.array([0.0 if v is None else v for v in values])
                    columns.append((array, none))
                else:
                    columns.append((list(values), None))
            rows.extend_columns(columns, len(batch))
        given += batch
        i += len(batch)
    return rows, given


def _same(a, b) -> bool:
    nans = type(a) is float and math.isnan(a) and math.isnan(b)  # (nan equals nan here)
    return type(a) is type(b) and (a == b or nans)


def _nan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)


@pytest.mark.parametrize("spill", [False, True])
@pytest.mark.parametrize("chunk", [CompactRows.CHUNK, 7, 64])
def test_column_slices_are_the_rows_columns(chunk, spill, monkeypatch):
    monkeypatch.setattr(CompactRows, "CHUNK", chunk)
    if spill:  # (chunks written to the temporary file every few hundred rows)
        monkeypatch.setattr(CompactRows, "SPILL_BYTES", 7 * 8 * 150)
    rows, given = _filled(chunk, chunk)
    assert (rows._file is not None) == spill
    assert len(rows) == len(given)
    rng = random.Random(1)
    spans = [(0, 1000), (0, 1), (999, 1000), (500, 512)]
    spans += [tuple(sorted(rng.sample(range(1001), 2))) for _ in range(200)]
    for start, stop in spans:
        expected = [list(column) for column in zip(*rows[start:stop])]
        got = [list(column) for column in rows.column_slices(start, stop)]
        assert len(got) == 7, (start, stop)
        for k, (want, have) in enumerate(zip(expected, got)):
            assert len(want) == len(have) == stop - start, (start, stop, k)
            assert all(map(_same, want, have)), (start, stop, k)
    # (and the rows themselves are what was added)
    assert all(map(_same, [v for r in rows[0:1000] for v in r], [v for r in given for v in r]))


@pytest.mark.parametrize("chunk", [7, 64])
def test_spilled_rows_read_back_as_columns(chunk, monkeypatch):
    """columns() (a DataFrame's input) of spilled chunks: the values added, each column
    one numpy array where every value fits one."""
    monkeypatch.setattr(CompactRows, "CHUNK", chunk)
    monkeypatch.setattr(CompactRows, "SPILL_BYTES", 7 * 8 * 100)
    rows, given = _filled(chunk, chunk + 1)
    assert rows._file is not None
    for k, (values, none) in enumerate(rows.columns()):
        want = [row[k] for row in given]
        got = values.tolist() if isinstance(values, np.ndarray) else list(values)
        if none is not None:
            got = [None if n else v for v, n in zip(got, none.tolist())]
        assert len(got) == len(want) and all(
            a == b or (_nan(a) and _nan(b)) for a, b in zip(want, got)), k
    rows.close()
