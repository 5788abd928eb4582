"""What keeps analyze's memory flat in a capture's length changes no figure: the report and
every table of each capture are the same when every row table spills to its temporary file
after a few rows (CompactRows.SPILL_BYTES), confirm lags are folded into distinct values
after every few (ExactSample.FOLD) and the text report's consumer-lag summary reads a few
rows at a time (LAG_ROWS), as when each is held in memory whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamdissect.analysis import analyze
from streamdissect.analysis.compact import CompactRows
from streamdissect.analysis.percentiles import ExactSample
from streamdissect.cli import _text_report as report
from streamdissect.tables import schema

CAPTURES = sorted((Path(__file__).parent.parent / "captures").glob("*.pcap"))
TABLES = [name for name in schema.analysis_tables()]


def _everything(path: Path, report_only: bool) -> tuple:
    a = analyze(str(path), report_only=report_only, helper_process=False)
    tables = {name: a.frame(name) for name in TABLES}
    return report.json_text(report.to_json(a)), report.to_text(a), tables, a


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
@pytest.mark.parametrize("report_only", [True, False])
def test_spilled_and_folded_is_the_same(path, report_only, monkeypatch):
    whole_json, whole_text, whole_tables, _ = _everything(path, report_only)
    monkeypatch.setattr(CompactRows, "SPILL_BYTES", 13 * 8 * 5)
    monkeypatch.setattr(CompactRows, "CHUNK", 3)
    monkeypatch.setattr(ExactSample, "FOLD", 2)
    monkeypatch.setattr(report, "LAG_ROWS", 3)
    json_text, text, tables, a = _everything(path, report_only)
    lazy = []
    report.json_write(report.to_json(a, lazy=True), lazy.append)
    assert json_text == whole_json == "".join(lazy)
    assert text == whole_text
    for name in TABLES:
        assert tables[name].equals(whole_tables[name]), name


def test_a_table_spills():
    """(the test above sees spilled rows: the consumer capture's Delivers go to the file)"""
    path = Path(__file__).parent.parent / "captures" / "rstream-slow-consumer-3.10.pcap"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CompactRows, "SPILL_BYTES", 13 * 8 * 5)
        patch.setattr(CompactRows, "CHUNK", 3)  # (as above: a few Delivers a block are pending rows)
        a = analyze(str(path), report_only=True, helper_process=False)
        rows = a.rows("deliveries")
        assert len(rows) > 5 and rows._file is not None


def test_a_closed_subscriptions_balances_go_to_the_file():
    """Each subscription keeps its own balances: a capture of many subscriptions, each
    under SPILL_BYTES, would hold them all; a closed one's go to the file (read back the
    same: the test above holds the tables equal)."""
    path = Path(__file__).parent.parent / "captures" / "rstream-slow-consumer-3.10.pcap"
    a = analyze(str(path), helper_process=False)
    subs = a._c.credit._all()
    assert subs and all(s.history._file is not None for s in subs if len(s.history))
    assert not any(c.__class__.__name__ != "_Spilled" for s in subs for c in s.history._chunks)
    whole = a.credit_balance
    assert len(whole) == sum(len(s.history) for s in subs) > 0
    assert whole["balance"].tolist() == [b for s in subs for _, b in s.history]
