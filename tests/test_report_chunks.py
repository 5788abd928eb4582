"""The report draws its large tables a chunk at a time (report.data.ReportData.chunks and
batches) and bins a long series a few bins at a time (report.series.SeriesSet): the figures
are the same, to the byte, as drawn from the whole table at once; the chunks are the
table's rows."""

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
from streamdissect.report.bins import BINS, bin_width, binned

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


STATS = ("p50", "p95", "p99", "max", "mean", "min", "count")


def _read_lags(data, monkeypatch):
    """The publishes' lags as report.series reads them, with 999-row chunks and at most
    1,000 values held: (their first-pass figures, the series read)."""
    monkeypatch.setattr(report_data, "CHUNK", 999)
    monkeypatch.setattr(series, "PASS_ROWS", 1_000)
    publishes = series.SeriesSet(data, "publishes", "publish_ts_ns", (), {"lag": "lag_ms"})
    wanted = series.Wanted((), "lag", "points", STATS)
    return publishes.of((), "lag"), publishes.read([wanted])[wanted]


def test_a_series_binned_a_few_bins_at_a_time_is_binned_at_once(hundred_thousand, monkeypatch):
    whole = hundred_thousand.table("publishes")
    ts = whole["publish_ts_ns"].to_numpy(np.int64)
    lags = whole["lag_ms"].to_numpy(float)
    stats, got = _read_lags(hundred_thousand, monkeypatch)
    assert (stats.count, stats.first_ns, stats.last_ns) == (len(ts), ts.min(), ts.max())
    assert (stats.low, stats.high) == (lags.min(), lags.max())
    assert got.width == bin_width(ts.min(), ts.max(), BINS)
    expected = binned(ts, lags, got.width, STATS)
    assert len(expected) == 360  # (10 s bins over an hour: about 280 values a bin, 1,000 held)
    assert got.per_bin.equals(expected)


def test_a_table_out_of_time_order_is_binned_in_several_passes_the_same(hundred_thousand,
                                                                       monkeypatch):  # fmt: skip
    """Rows in no time order: a pass takes in the bins it has room for, the next the others;
    every bin's values in the table's order, as binning the whole series at once."""
    order = np.random.default_rng(3).permutation(hundred_thousand.count("publishes"))
    shuffled = hundred_thousand.table("publishes").iloc[order].reset_index(drop=True)
    data = report_data.ReportData({"publishes": shuffled}, "shuffled")
    ts = shuffled["publish_ts_ns"].to_numpy(np.int64)
    lags = shuffled["lag_ms"].to_numpy(float)
    passes = []
    reads = data.batches
    monkeypatch.setattr(data, "batches", lambda *a: passes.append(a) or reads(*a))
    _, got = _read_lags(data, monkeypatch)
    assert len(passes) > 3  # (the first-pass figures, the bins' counts, then several)
    assert got.per_bin.equals(binned(ts, lags, got.width, STATS))


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


def test_a_figure_reads_its_table_in_three_passes_whatever_its_series(hundred_thousand,
                                                                      monkeypatch):  # fmt: skip
    """Eight subscriptions' lag and latency (16 series, each long, 12,500 values): the
    consumer figure reads the Delivers three times (each series' span; the bins' counts; the
    bins, the table being in time order), not a few times a series."""
    deliveries = hundred_thousand.table("deliveries").copy()
    deliveries["subscription_id"] = pd.array(np.arange(len(deliveries)) % 8, dtype="Int32")
    data = report_data.ReportData({"deliveries": deliveries}, "eight subscriptions")
    reads = []
    batches = data.batches
    monkeypatch.setattr(data, "batches", lambda name, columns: reads.append(name)
                        or batches(name, columns))  # fmt: skip
    fig = report.FIGURES["consumers"](data)
    assert reads.count("deliveries") == 3
    lines = [line for ax in fig.axes for line in ax.get_lines() if line.get_label()[:1] != "_"]
    assert len(lines) == 16  # (a line a subscription and value: the mean; the max unlabelled)
