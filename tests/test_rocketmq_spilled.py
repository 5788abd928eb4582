"""What keeps a RocketMQ analysis's memory flat in a capture's length changes no figure: on
every recorded capture, the analyze report (JSON and text) and every RocketMQ table (rows,
pandas, Arrow) are the same when the rows of a row a message or call are written to
CompactRows as soon as they are begun or after one or three more rows (RowTable.WINDOW:
so a call answered later replaces its written row), the tables spill to their temporary file after a few rows
(CompactRows.SPILL_BYTES) and the latencies are folded into distinct values after every
few (ExactSample.FOLD), as when all of it is held in memory whole."""

from __future__ import annotations

import pytest
from rocketmq_support import CAPTURES, NAMES

from streamdissect.analysis import analyze
from streamdissect.analysis.compact import CompactRows
from streamdissect.analysis.percentiles import ExactSample
from streamdissect.cli import _text_report as report
from streamdissect.protocols.rocketmq.analysis.rows import RowTable
from streamdissect.tables import schema

TABLES = [t for t in schema.TABLES if t.startswith("rocketmq_") and t != "rocketmq_frames"]
# tables of a row a message or call (RowTable's)
ROW_TABLES = ("rocketmq_requests", "rocketmq_sends", "rocketmq_pulls",
              "rocketmq_broker_registrations")  # fmt: skip


def _everything(name: str, report_only: bool) -> tuple:
    a = analyze(str(CAPTURES / f"{name}.pcap"), report_only=report_only, helper_process=False)
    rows = {t: list(a.rows(t)) for t in TABLES}
    frames = {t: a.frame(t) for t in TABLES}
    arrows = {t: a.arrow(t) for t in TABLES}
    return report.json_text(report.to_json(a)), report.to_text(a), rows, frames, arrows, a


def _whole(patch: pytest.MonkeyPatch) -> None:
    """Everything in memory: no row written before the end, no spill, no fold."""
    patch.setattr(RowTable, "WINDOW", 1 << 40)
    patch.setattr(CompactRows, "SPILL_BYTES", 1 << 40)
    patch.setattr(ExactSample, "FOLD", 1 << 40)


def _spilled(patch: pytest.MonkeyPatch, window: int = 1) -> None:
    patch.setattr(RowTable, "WINDOW", window)
    patch.setattr(CompactRows, "SPILL_BYTES", 24 * 8 * 4)
    patch.setattr(CompactRows, "CHUNK", 3)
    patch.setattr(ExactSample, "FOLD", 2)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("report_only", [True, False])
@pytest.mark.parametrize("window", [0, 1, 3])  # (0: every row written as it is begun)
def test_spilled_and_written_early_is_the_same(name, report_only, window):
    with pytest.MonkeyPatch.context() as patch:
        _whole(patch)
        whole_json, whole_text, whole_rows, whole_frames, whole_arrows, _ = _everything(
            name, report_only)  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        _spilled(patch, window)
        json_text, text, rows, frames, arrows, a = _everything(name, report_only)
        lazy: list[str] = []
        report.json_write(report.to_json(a, lazy=True), lazy.append)
    assert json_text == whole_json == "".join(lazy)
    assert text == whole_text
    for table in TABLES:
        assert rows[table] == whole_rows[table], table
        assert frames[table].equals(whole_frames[table]), table
        assert arrows[table].equals(whole_arrows[table]), table


def test_the_row_tables_spill_and_rows_are_replaced(monkeypatch):
    """(the test above sees spilled chunks, and rows written before their call was answered
    replaced in them)"""
    _spilled(monkeypatch, window=1)
    replaced: dict[str, list] = {}
    replace = CompactRows.replace

    def counted(self, rows):
        replaced.setdefault(name, []).extend(rows)
        return replace(self, rows)

    monkeypatch.setattr(CompactRows, "replace", counted)
    for name in NAMES:
        a = analyze(str(CAPTURES / f"{name}.pcap"), helper_process=False)
        if name == "rmq-java-rocketmq-batch":
            for table in ("rocketmq_requests", "rocketmq_sends", "rocketmq_pulls"):
                assert a.rows(table)._file is not None, table
    assert "rmq-java-rocketmq-batch" in replaced, replaced


@pytest.mark.parametrize("spill", [False, True])
def test_replaced_rows_read_back_as_replaced(spill, monkeypatch):
    """CompactRows.replace on rows in chunks in memory, spilled and pending, with values of
    another kind than their column's (a None, a float, a text where ints were)."""
    monkeypatch.setattr(CompactRows, "CHUNK", 4)
    if spill:
        monkeypatch.setattr(CompactRows, "SPILL_BYTES", 3 * 8 * 6)
    given = [(i, f"r{i}", i * 0.5) for i in range(23)]
    table = CompactRows(3)
    table.extend(given)
    new = {0: (0, None, 1.5), 5: (None, "five", 2.5), 6: (6.5, "six", None),
           17: ("x", "y", "z"), 22: (22, "last", -1.0)}  # fmt: skip
    table.replace(new)
    expected = [new.get(i, row) for i, row in enumerate(given)]
    assert list(table) == expected and table[:] == expected
    assert table[5] == new[5] and table[-1] == new[22]
    assert (table._file is not None) == spill
    assert [list(v) for v, _ in table.columns()][1] == [row[1] for row in expected]


@pytest.mark.parametrize("window", [0, 1, 2, 5])
@pytest.mark.parametrize("seed", range(6))
def test_row_table_writes_a_row_as_soon_as_its_rule_allows(window, seed, monkeypatch):
    """RowTable writes only when a row begun or completed can let rows be written (the
    oldest, or the window past WINDOW): after every begin and completion, the rows written
    are exactly those the rule allows (every row before the first open one, and past
    WINDOW rows begun after it, the oldest ones anyway), and the table read is every row's
    last values in the order begun, rows completed after they were written included. The
    rows written hold, until the table is read, each row's values when it was written (a
    row written open is not changed by its completion until then)."""
    import random

    monkeypatch.setattr(RowTable, "WINDOW", window)
    monkeypatch.setattr(RowTable, "SHIFT", seed % 3)  # (the rows written let go often)
    monkeypatch.setattr(CompactRows, "CHUNK", 3)
    rng = random.Random(seed)
    table, rows, still_open, written = RowTable(1), [], set(), 0
    when_written = []  # (each row's values when it was written)
    for step in range(300):
        if rng.random() < 0.5 or not still_open:
            row = [step]  # (a row as RowTable takes it: a list of its values)
            complete = rng.random() < 0.2
            assert table.begin(row, complete=complete) == len(rows)
            rows.append(row)
            if not complete:
                still_open.add(len(rows) - 1)
        else:
            index = rng.choice(sorted(still_open))
            rows[index][0] = -step  # (its response: the row's last change)
            still_open.discard(index)
            table.completed(index, rows[index])
        while written < len(rows) and (len(rows) - written > window or written not in still_open):
            when_written.append(tuple(rows[written]))
            written += 1
        assert table._written == len(table._table) == written
        assert len(table) == len(rows)
        assert list(table._table) == [when_written[i] if i in table._late else tuple(rows[i])
                                      for i in range(written)]  # fmt: skip
    assert list(table.rows()) == [tuple(row) for row in rows]


def _table_state(table: RowTable) -> tuple:
    return (table._written, len(table), sorted(table._open), sorted(table._late),
            list(table._table))  # fmt: skip


@pytest.mark.parametrize("seed", range(12))
def test_a_run_of_rows_leaves_the_table_as_one_row_at_a_time(seed, monkeypatch):
    """add_run (a run of sends: rows begun, some left open, rows begun before completed)
    leaves the table as begin() each row of the run (complete but those left open) and
    then completed() each row begun before that it completed, one at a time: among rows written open past WINDOW (completed later: late),
    with a window empty or not."""
    import random

    monkeypatch.setattr(RowTable, "WINDOW", 2 + seed % 4)
    monkeypatch.setattr(RowTable, "SHIFT", seed % 3)
    monkeypatch.setattr(CompactRows, "CHUNK", 3)
    rng = random.Random(seed)
    by_run, by_row = RowTable(2), RowTable(2)
    rows: dict = {}  # index -> (the row by_run has, by_row's), while open
    n = 0
    for step in range(400):
        roll = rng.random()
        if roll < 0.3 or not rows:  # (a request outside a run)
            pair = ([n, "open"], [n, "open"])
            assert by_run.begin(pair[0]) == by_row.begin(pair[1]) == n
            rows[n], n = pair, n + 1
        elif roll < 0.5:  # (its response)
            index = rng.choice(sorted(rows))
            for table, row in zip((by_run, by_row), rows.pop(index)):
                row[1] = step
                table.completed(index, row)
        else:  # (a run)
            size = rng.randrange(6)
            if not by_run.room(size):
                continue
            done = sorted(rng.sample(sorted(rows), rng.randrange(min(len(rows), 3) + 1)))
            left = sorted(i for i in range(n, n + size) if rng.random() < 0.2)
            begun = [[i, "open" if i in left else step] for i in range(n, n + size)]
            answered = [(i, rows[i][0]) for i in done]
            for _, row in answered:
                row[1] = step
            by_run.add_run(begun, left, answered)
            for i in range(n, n + size):
                row = [i, "open"] if i in left else [i, step]
                by_row.begin(row, complete=i not in left)
                if i in left:
                    rows[i] = (begun[i - n], row)
            for i in done:
                row = rows.pop(i)[1]
                row[1] = step
                by_row.completed(i, row)
            n += size
        assert _table_state(by_run) == _table_state(by_row), step
    assert list(by_run.rows()) == list(by_row.rows())
