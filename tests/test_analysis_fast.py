"""The analyze report's fast paths give what the general code gives: the publish/confirm
ledger's runs, compact delivery rows, the JSON writer and the report-only collectors."""

from __future__ import annotations

import io
import json
import random
from types import SimpleNamespace as NS

import pytest
import worsen

from streamdissect.analysis import analyze
from streamdissect.analysis.compact import CompactRows
from streamdissect.cli import _text_report as report
from streamdissect.cli._text_report import json_text, json_write, to_json
from streamdissect.protocols.stream.analysis.confirms import ConfirmCollector

HANDLERS = {"p": "on_publish", "c": "on_confirm", "e": "on_error", "d": "on_declare"}


def ledger(keep_pairs: bool, script: list) -> tuple:
    collector = ConfirmCollector(keep_pairs=keep_pairs, keep_backlog=True)
    for kind, pid, ids, ts in script:
        record = NS(publisher_id=pid, publishing_ids=ids, record_count=len(ids), response=False,
                    errors=[(i, 2) for i in ids])  # fmt: skip
        getattr(collector, HANDLERS[kind])(NS(ts_ns=ts, connection="c", record=record))
    collector.finish()
    lags = [list(led.lags_ms) for led in collector._ledgers.values()]
    return collector.summary(), list(collector.backlog), lags


def script_of(seed: int) -> list:
    rnd = random.Random(seed)
    script, pending, nxt, ts = [], [], rnd.randint(0, 5), 0
    for _ in range(rnd.randint(1, 60)):
        ts += rnd.randint(0, 3000)
        r = rnd.random()
        if r < 0.45:
            ids = list(range(nxt, nxt + rnd.randint(0, 6)))
            nxt += len(ids)
            if rnd.random() < 0.1:
                ids.reverse()
            if rnd.random() < 0.1 and pending:
                ids.append(rnd.choice(pending))  # a resend
            if rnd.random() < 0.1:
                nxt += rnd.randint(1, 3)  # ids skipped
            pending += ids
            script.append(("p", int(rnd.random() < 0.1), ids, ts))
        elif r < 0.9 and pending:
            k = rnd.randint(0, min(len(pending), 8))
            ids, pending = pending[:k], pending[k:]
            if rnd.random() < 0.15:
                ids = ids[1:] + [nxt + 7]  # never published
            if rnd.random() < 0.1:
                rnd.shuffle(ids)
            script.append(("c", 0, ids, ts))
        elif r < 0.95 and pending:
            script.append(("e", 0, [pending.pop(0)], ts))
        else:
            script.append(("d", 0, [], ts))
    return script


@pytest.mark.parametrize("seed", range(300))
def test_confirm_runs_same_as_per_id_ledger(seed):
    script = script_of(seed)
    assert ledger(False, script) == ledger(True, script)


@pytest.mark.parametrize("spill", [None, 2])  # (chunks in memory; the older ones on disk)
@pytest.mark.parametrize("chunk", [CompactRows.CHUNK, 7])
def test_compact_rows_read_back_as_the_tuples_given(chunk, spill, monkeypatch):
    monkeypatch.setattr(CompactRows, "CHUNK", chunk)
    if spill:
        monkeypatch.setattr(CompactRows, "SPILL_BYTES", spill * chunk * 6 * 8)
    rows = CompactRows(6)
    given = []
    for i in range(1000):
        row = (i, f"c{i % 3}", None if i % 7 == 0 else 2**63 + i if i == 500 else i * 3,
               1.5 * i if i % 5 else None, True if i % 2 else None, 2 if i == 900 else 0.5)  # fmt: skip
        rows.append(row)
        given.append(row)
    assert list(rows) == given and len(rows) == 1000
    assert rows[3:17] == given[3:17] and rows[::3] == given[::3] and rows[-1] == given[-1]
    assert all(type(x) is type(y) for a, b in zip(rows, given) for x, y in zip(a, b))
    for start in range(0, 1000, 37):
        for stop in (start, start + 1, start + 13, 1000):
            assert rows[start:stop] == given[start:stop]


@pytest.mark.parametrize("spill", [None, 2])
@pytest.mark.parametrize("chunk", [CompactRows.CHUNK, 7])
def test_compact_rows_extended_and_as_columns(chunk, spill, monkeypatch):
    """Rows added in batches of any size read back as when added one by one; columns() gives
    each column's values (numpy arrays with a mask where a chunk kept numbers)."""
    import random

    monkeypatch.setattr(CompactRows, "CHUNK", chunk)
    given = [(i, f"c{i % 3}", None if i % 7 == 0 else i * 3, 1.5 * i, 2**64 - i if i == 9 else i)
             for i in range(1000)]  # fmt: skip
    if spill:
        monkeypatch.setattr(CompactRows, "SPILL_BYTES", spill * chunk * 5 * 8)
    rows = CompactRows(5)
    rng, at = random.Random(chunk), 0
    while at < len(given):
        size = rng.choice([0, 1, 2, chunk - 1, chunk, chunk + 1, 3 * chunk])
        rows.extend(given[at : at + size])
        at += size
    assert list(rows) == given and len(rows) == len(given)
    for i, (values, none) in enumerate(rows.columns()):
        values = values.tolist() if hasattr(values, "tolist") else values
        if none is not None:
            values = [None if n else v for v, n in zip(values, none.tolist())]
        assert values == [row[i] for row in given], i
    assert list(rows) == given  # (columns() leaves the rows as they were)


def test_a_report_whose_rows_went_to_disk_is_the_same(monkeypatch):
    # (a table past CompactRows.SPILL_BYTES keeps its older rows on disk)
    monkeypatch.setattr(CompactRows, "CHUNK", 3)
    path = str(worsen.real_capture())
    expected = json.dumps(to_json(analyze(path, report_only=True)), indent=1)
    monkeypatch.setattr(CompactRows, "SPILL_BYTES", 3 * 8 * 8)
    spilled = analyze(path, report_only=True)
    kept = spilled._c.deliveries.rows
    assert kept._file is not None and len(kept._chunks) >= 2
    assert json.dumps(to_json(spilled), indent=1) == expected


@pytest.mark.parametrize("chunk", [report.ROW_CHUNK, 3])
@pytest.mark.parametrize("path", worsen.corpus_captures(), ids=lambda p: p.stem)
def test_report_only_gives_the_same_report_text(path, chunk, monkeypatch):
    monkeypatch.setattr(report, "ROW_CHUNK", chunk)
    full = to_json(analyze(str(path)))
    fast = analyze(str(path), report_only=True)
    expected = json.dumps(full, indent=1)
    assert json.dumps(to_json(fast), indent=1) == expected
    assert json_text(to_json(fast)) == expected
    out = io.StringIO()
    json_write(to_json(fast, lazy=True), out.write)
    assert out.getvalue() == expected


def test_json_text_is_json_dumps():
    value = {"a": [1.5, float("nan"), {"b": []}, {}, [], True, None, "é\n"],
             "c": {"d": -0.0, "e": 10**30, "f": float("inf")},
             "r": [{"a": 1, "b": None, "c": "x"}, {}, {"z": [1]}], "q": [{}]}  # fmt: skip
    assert json_text(value) == json.dumps(value, indent=1)
    # rows of the same keys (formatted column by column): every kind of value, a % in a key
    rows = [{"n": i, "x": i / 3, "s": f"{i}%s", "b": i % 2 == 0, "z%d": None,
             "m": [float("nan"), -0.0, 10**30, float("-inf")][i % 4], "k": 2**70 * (i % 2)}
            for i in range(9)]  # fmt: skip
    for table in (rows, rows[:1], [*rows, {"n": 1}], [*rows, {"n": [1]} | rows[0]]):
        assert json_text({"t": table}) == json.dumps({"t": table}, indent=1)


def test_json_write_hands_over_bounded_pieces(monkeypatch):
    """json_write never holds more than about FLUSH_CHARS (plus one piece) before writing,
    so the report's memory does not grow with the number of rows."""
    monkeypatch.setattr(report, "ROW_CHUNK", 10)
    monkeypatch.setattr(report, "FLUSH_CHARS", 1000)
    rows = [(i * 1000, "10.0.0.1:5000-10.0.0.2:5552", "c2s", "retransmission", i, 1448, "")
            for i in range(2000)]  # fmt: skip
    lazy = {"anomalies": report.RowStream("anomalies", rows)}
    pieces: list[str] = []
    json_write(lazy, pieces.append)
    assert "".join(pieces) == json.dumps({"anomalies": report.plain_records("anomalies", rows)},
                                         indent=1)  # fmt: skip
    longest_piece = max(len(t) for t in report.RowStream("anomalies", rows).texts(1, " "))
    assert len(pieces) > 10
    assert max(map(len, pieces)) < 1000 + longest_piece
