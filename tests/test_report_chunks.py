"""The report draws its large tables a chunk at a time (report.data.ReportData.chunks) and
bins a long series a few bins a pass (report.series.Series): the figures are the same, to
the byte, as drawn from the whole table at once; the chunks are the table's rows."""

from __future__ import annotations

import io

import matplotlib
import numpy as np
import pandas as pd
import pytest
from reportlib import CAPTURES, PORTS
from test_report_figures import huge_data

from streamdissect import report
from streamdissect.analysis import analyze
from streamdissect.report import data as report_data
from streamdissect.report import series
from streamdissect.report.bins import binned

matplotlib.use("Agg")

# the figures that read a table a chunk at a time
CHUNKED = ("confirms", "backlog", "credit", "consumers", "connections")


def png(fig) -> bytes:
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100)
    return out.getvalue()


@pytest.fixture(scope="module")
def hundred_thousand():
    return huge_data(100_000)


def test_a_series_binned_a_few_bins_a_pass_is_binned_at_once(hundred_thousand, monkeypatch):
    data = hundred_thousand
    whole = data.table("publishes")
    ts = whole["publish_ts_ns"].to_numpy(np.int64)
    lags = whole["lag_ms"].to_numpy(float)
    stats = ("p50", "p95", "p99", "max", "mean", "min", "count")
    expected = binned(ts, lags, 7_000_000_000, stats)
    monkeypatch.setattr(report_data, "CHUNK", 999)
    monkeypatch.setattr(series, "PASS_ROWS", 1_000)
    lag = series.Series(data, "publishes", "publish_ts_ns", "lag_ms",
                        lambda part: part["lag_ms"].notna())  # fmt: skip
    assert (lag.count, lag.first_ns, lag.last_ns) == (len(ts), ts.min(), ts.max())
    got = lag.binned(7_000_000_000, stats)
    assert len(expected) > 400  # (many passes: about 250 values a bin, 1,000 a pass)
    assert got.equals(expected)


@pytest.mark.parametrize("anchor", CHUNKED)
def test_the_figures_drawn_chunk_by_chunk_are_drawn_at_once(hundred_thousand, anchor,
                                                            monkeypatch):  # fmt: skip
    figure = report.FIGURES[anchor]
    at_once = png(figure(hundred_thousand))
    monkeypatch.setattr(report_data, "CHUNK", 777)
    monkeypatch.setattr(series, "PASS_ROWS", 5_000)
    assert png(figure(hundred_thousand)) == at_once


def test_an_analysis_is_read_chunk_by_chunk_as_its_tables(monkeypatch):
    """from_analysis keeps the analysis's rows: its chunks are its DataFrames' rows, and the
    report of a capture is the same with chunks of a few rows."""
    path = str(CAPTURES / "rstream-slow-consumer-3.10.pcap")
    analysis = analyze(path, ports=PORTS)
    data = report.from_analysis(analysis, "slow")
    for name in ("publishes", "backlog", "credit_balance", "deliveries", "stalls"):
        parts = list(data.chunks(name, 10))
        whole = getattr(analysis, name)
        assert data.count(name) == len(whole) > 10, name
        joined = pd.concat(parts, ignore_index=True)
        assert joined.equals(whole), name
    page = report.render_html(report.load(path, ports=PORTS)).rsplit("<footer>", 1)[0]
    monkeypatch.setattr(report_data, "CHUNK", 7)
    assert report.render_html(report.load(path, ports=PORTS)).rsplit("<footer>", 1)[0] == page
