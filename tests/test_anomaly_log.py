"""The anomalies table stays bounded however many anomalies a capture produces."""

from __future__ import annotations

import tracemalloc

from streamdissect.analysis import analyze_events
from streamdissect.engine.anomalies import DEFAULT_PER_KIND, Anomaly, AnomalyLog


def flood(n: int, kind: str = "retransmission"):
    for i in range(n):
        yield Anomaly(i, "c", "c2s", kind, i * 10, 10, "dup")


def test_log_keeps_the_first_of_each_kind_and_counts_the_rest():
    log = AnomalyLog(per_kind=3)
    log.extend(flood(10))
    log.append(Anomaly(99, "c", "s2c", "gap", 0, 5, "hole"))
    rows = list(log)
    assert [r.kind for r in rows] == ["retransmission"] * 3 + ["gap", "suppressed"]
    assert rows[-1].length == 7 and "retransmission" in rows[-1].detail
    assert log.suppressed == {"retransmission": 7}


def test_analysis_memory_is_flat_under_an_anomaly_flood():
    tracemalloc.start()
    a = analyze_events(flood(DEFAULT_PER_KIND * 20))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    table = a.anomalies
    assert len(table) == DEFAULT_PER_KIND + 1
    assert table.iloc[-1]["kind"] == "suppressed"
    assert table.iloc[-1]["length"] == DEFAULT_PER_KIND * 19
    assert peak < 20 * 1024 * 1024
