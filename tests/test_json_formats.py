"""The JSON report's rows written a chunk at a time in one format (cli._text_report: a column
of ints, of finite floats, of None, of one int or one string each goes into the format its
own way) are json.dumps(indent=1)'s text: for table rows (RowStream, tuples or
CompactRows) and for rows of dicts of one set of keys, with every kind of column, strings
holding "%", and chunks where a column is one value, or all but one."""

from __future__ import annotations

import json
import math
import random

import pytest

from streamdissect.analysis.compact import CompactRows
from streamdissect.cli import _text_report as report
from streamdissect.cli._text_report import json_text, json_write

STRINGS = ["10.0.0.1:5000-10.0.0.2:5552", "100%", "%s%d", 'é\n"', ""]
COMPILED = report.compiled_rows  # (_json_rows.c, when built and wanted)

# every test with the rows written by the compiled code and by the Python writer (the
# reference): native_modes.py's walk_mode sets compiled_rows to None for "python"
pytestmark = pytest.mark.usefixtures("walk_mode")


def assert_same_text(got: str | None, expected: str) -> None:
    """got == expected, and where they part when not (pytest's own diff of two texts of
    megabytes takes minutes)."""
    if got != expected:
        at = next((i for i, (a, b) in enumerate(zip(got or "", expected)) if a != b),
                  min(len(got or ""), len(expected)))  # fmt: skip
        pytest.fail(f"the texts part at {at}: {(got or '')[at - 60 : at + 60]!r} against"
                    f" {expected[at - 60 : at + 60]!r} (lengths {len(got or '')},"
                    f" {len(expected)})")  # fmt: skip


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


def _quarter_ms_values(rng: random.Random) -> list[float]:
    """Multiples of 2**-12 below and above 2**16 (the latencies _float_texts writes itself),
    every fraction of 2**-12 with integer parts at digit-count and power-of-two edges, and
    values it must leave to float.__repr__ (-0.0, negatives, other fractions, inf, NaN)."""
    edges = [0, 1, 2, 9, 10, 99, 100, 999, 1000, 4095, 4096, 8191, 8192, 9999, 10000, 16383,
             16384, 32767, 32768, 65535, 65536, 99999, 2**40]  # fmt: skip
    values = [q + k / 4096 for q in edges for k in range(4096)]
    values += [rng.randrange(4096 * 70000) / 4096 for _ in range(50_000)]
    return values + [-0.0, -1.5, 0.1, 1e-5, 2.0**-13, float("inf"), float("nan")]


def test_float_texts_are_float_repr():
    from array import array

    from streamdissect.cli._float_texts import LIMIT, exact_parts

    rng = random.Random(25)
    values = _quarter_ms_values(rng)
    taken = 0
    for at in range(0, len(values), 512):
        chunk = values[at : at + 512]
        for given in (chunk, array("d", chunk)):
            parts = exact_parts(given)
            taken_kind = [math.copysign(1, v) > 0 and v < LIMIT and (v * 4096).is_integer()
                          for v in chunk]  # fmt: skip
            if parts is None:  # (a value it does not take: the whole chunk is repr's)
                assert not all(taken_kind)
                continue
            assert all(taken_kind)
            taken += len(chunk)
            assert [f"{whole:d}{rest}" for whole, rest in zip(*parts)] == list(
                map(float.__repr__, chunk))
    assert taken > 100_000  # (most chunks are its kind)


@pytest.mark.parametrize("compact", [False, True])
def test_latency_rows_are_json_dumps(compact):
    """consumer_lag rows of 2**-12 ms latencies (a capture's usual ones), and chunks of
    other floats beside them, as json.dumps writes them."""
    rng = random.Random(26)
    latencies = _quarter_ms_values(rng)[:: 7]
    given = [(1_795_870_179_041_246_000 + i, "c", 0, i, 1, None, None, None, None, None,
              v, 10, None) for i, v in enumerate(latencies)]  # fmt: skip
    rows = given
    if compact:
        rows = CompactRows(13)
        rows.extend(given)
    pieces: list[str] = []
    json_write({"lag": report.RowStream("deliveries", rows, report.LAG_COLUMNS)}, pieces.append)
    expected = json.dumps(
        {"lag": report.plain_records("deliveries", given, report.LAG_COLUMNS)}, indent=1)
    assert "".join(pieces) == expected


def _stall_logs() -> list:
    """StallLogs: stalls a Credit ended (appended one by one, and as columns), open and
    otherwise ended ones between them, an open last one, and times past int64."""
    import numpy as np

    from streamdissect.protocols.stream.analysis.credit import Stall, StallLog

    rng = random.Random(27)
    logs = []
    for kind in ("ended", "mixed", "huge"):
        one, columns = StallLog("c", 3), StallLog("c", 3)
        at = 1_795_870_178_816_218_000
        for batch in range(40):
            starts = [at + rng.randrange(10**9) * 1000 for _ in range(rng.randrange(1, 30))]
            starts.sort()
            ends = [s + rng.randrange(1, 10**8) for s in starts]
            more = [rng.random() < 0.3 for _ in starts]
            last = Stall("c", 3, starts[-1] + 10**9, rng.random() < 0.5)
            for s, e, m in zip(starts, ends, more):
                stall = Stall("c", 3, s, m)
                stall.end_ns, stall.ended_by, stall.duration_ms = e, "credit", (e - s) / 1e6
                one.append(stall)
            one.append(last)
            columns.extend_ended(np.array(starts), np.array(ends), np.array(more), last)
            if kind == "mixed" and batch % 3 == 0:  # (an open one, and one a reason ended)
                for log in (one, columns):
                    log.append(Stall("c", 3, at, False))
                    ended = Stall("c", 3, at + 5, True)
                    ended.end_ns, ended.ended_by, ended.duration_ms = at + 9, "unsubscribe", 4e-6
                    log.append(ended)
            if kind == "huge" and batch == 20:
                for log in (one, columns):
                    log.append(Stall("c", 3, 2**64 + 1, False))
            at = starts[-1] + 2 * 10**9
        assert list(one) == list(columns)
        logs.append(columns)
    return logs


@pytest.mark.parametrize("chunk", [report.ROW_CHUNK, 7])
def test_stall_columns_are_its_rows(chunk, monkeypatch):
    """A credit row's stalls read column by column (StallLog.column_slices) are its rows,
    and written as json.dumps writes them."""
    monkeypatch.setattr(report, "ROW_CHUNK", chunk)
    for log in _stall_logs():
        n = len(log)
        for start, stop in [(0, n), (0, 1), (n - 1, n), (5, 500), (n - 3, n + 4), (2, 2 + chunk)]:
            rows = log[start:stop]
            assert [list(c) for c in log.column_slices(start, stop)] == [
                list(c) for c in zip(*rows)] or not rows  # fmt: skip
        pieces: list[str] = []
        json_write({"stalls": report.RowStream("stalls", log, report.STALL_COLUMNS)},
                   pieces.append)  # fmt: skip
        expected = {"stalls": report.plain_records("stalls", list(log), report.STALL_COLUMNS)}
        assert "".join(pieces) == json.dumps(expected, indent=1)


def test_stalled_ms_is_the_rows_sum():
    """StallLog.stalled_ms from its columns is sum() of its rows' durations in order, an open
    one as 0 (and with times past int64, a last one open or ended, no stall at all)."""
    from streamdissect.protocols.stream.analysis.credit import Stall, StallLog

    ended_last = StallLog("c", 3)
    ended_last.append(Stall("c", 3, 10, False))
    ended_last.last.end_ns, ended_last.last.duration_ms = 20, 1e-5
    for log in [*_stall_logs(), StallLog("c", 3), ended_last]:
        expected = sum(row[4] or 0.0 for row in list(log))
        got = log.stalled_ms()
        assert (type(got), got) == (type(expected), expected)


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
        assert_same_text("".join(pieces), expected)


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


# texts a capture can carry (a JSON header's "\ud800" escape or its surrogatepass decode
# gives a lone surrogate): every control character, quotes, backslashes, non-ASCII of each
# width, empty, huge
HOSTILE = [
    "".join(map(chr, range(0x20))), *map(chr, range(0x20)), "\x7f", '"', "\\", '\\"\\',
    "/", "é", "ÿ\x80", "中文", "\U0001f600", "\uffff", "\U0010ffff", "\ud800", "\udfff",
    "\udcff\ud83d", "a\ud83d\ude00b", "", " ", "%s%%", "x" * 100_000,
    "".join(chr(c) for c in range(0, 0x3000, 7)) * 40,
]  # fmt: skip


@pytest.mark.parametrize("chunk", [report.ROW_CHUNK, 1, 7])
def test_texts_are_json_dumps(chunk, monkeypatch):
    """A send's texts (its topic, ids, keys, tags, status...) of every hostile kind, beside
    None and plain texts, as json.dumps writes them."""
    from streamdissect.tables import schema

    monkeypatch.setattr(report, "ROW_CHUNK", chunk)
    rng = random.Random(29)
    kinds = [c.kind for c in schema.TABLES["rocketmq_sends"]]
    plain = {"string": "SEND_OK", "int64": 7, "int32": 3, "float64": 0.25, "bool": False}
    given = []
    for i in range(120):
        given.append(tuple(
            rng.choice(HOSTILE + [None, "SEND_OK"]) if kind == "string" and i % 5
            else HOSTILE[i % len(HOSTILE)] if kind == "string" else plain[kind]
            for kind in kinds))  # fmt: skip
    _assert_written_as_json_dumps("rocketmq_sends", given)


def _captures() -> list:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "captures"
    return sorted([*root.glob("*.pcap"), *root.glob("rocketmq/*.pcap")])


@pytest.mark.parametrize("path", _captures(), ids=lambda p: p.stem)
def test_reports_of_the_captures_are_json_dumps(path):
    """Every recorded capture's report (Stream and RocketMQ tables, rows of dicts) written
    by json_write is json.dumps of its plain records."""
    from streamdissect.analysis import analyze

    a = analyze(str(path), report_only=True, helper_process=False)
    pieces: list[str] = []
    json_write(report.to_json(a, lazy=True), pieces.append)
    assert_same_text("".join(pieces), json.dumps(report.to_json(a), indent=1))
