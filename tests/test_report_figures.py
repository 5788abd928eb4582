"""The report's figures (streamdissect.report): each a titled matplotlib Figure with labelled
axes on every capture of the corpus; the slow consumer's stalls drawn where its client slept
(read from the figure's own artists, against the client-side truth); three million rows
drawn as a few thousand points; tables that are missing or empty drawn as a note."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import pytest
import worsen
from matplotlib.dates import num2date
from matplotlib.figure import Figure
from reportlib import CAPTURES, PORTS, figures_kept, sleeps, truth_of

from streamdissect import report
from streamdissect.analysis import analyze
from streamdissect.report.data import ReportData
from streamdissect.tables import schema
from streamdissect.tables.export import write_tables

matplotlib.use("Agg")

CORPUS = worsen.corpus_captures()
SLOW = CAPTURES / "rstream-slow-consumer-3.10.pcap"
MS = 1_000_000


def ns_of(x: float) -> int:
    """A matplotlib date number (days) as ns since the epoch."""
    return round(num2date(x).timestamp() * 1e6) * 1000


def stall_spans(fig: Figure) -> list[tuple[int, int]]:
    """The shaded stalls of a credit figure, read back from its patches (gid 'stall')."""
    spans = []
    for ax in fig.axes:
        for patch in ax.patches:
            if patch.get_gid() == "stall":
                x0 = patch.get_x()
                spans.append((ns_of(x0), ns_of(x0 + patch.get_width())))
    return sorted(spans)


def drawn_points(fig: Figure) -> int:
    """Every point the figure's lines and collections hold."""
    total = 0
    for ax in fig.axes:
        total += sum(len(line.get_xdata()) for line in ax.get_lines())
        for collection in ax.collections:
            total += sum(len(path.vertices) for path in collection.get_paths())
        total += len(ax.patches)
    return total


@pytest.fixture(scope="module")
def slow():
    return report.load(str(SLOW), ports=PORTS)


@pytest.mark.parametrize("capture", CORPUS, ids=lambda p: p.stem)
def test_every_figure_is_titled_and_labelled_on_every_capture(capture, corpus_report):
    page, _, figures = corpus_report(capture)  # (the report's own figures, drawn into it)
    for section, image in zip(report.SECTIONS, page.images, strict=True):
        fig = figures[section.anchor]
        assert isinstance(fig, Figure), section.anchor
        assert fig.get_suptitle(), section.anchor
        notes = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_text()]
        drawn = [ax for ax in fig.axes if ax.get_lines() or ax.collections or ax.patches]
        for ax in drawn:  # (a plot says what its y axis is, by label or by tick labels)
            assert ax.get_ylabel() or any(t.get_text() for t in ax.get_yticklabels()), section
        # and what its x axis is (the lowest plot of a shared axis), or why it is empty
        assert any(ax.get_xlabel() for ax in fig.axes) or (notes and not drawn), section
        assert image.startswith("data:image/png;base64,iVBORw0KGgo"), section.anchor  # (PNG)


def test_the_credit_figure_shades_the_stalls_where_the_client_slept(slow):
    fig = report.credit_figure(slow)
    spans = stall_spans(fig)
    recorded = sleeps(SLOW)
    # one more stall than sleeps: the last credit was used up with nothing left to send, and
    # the client never asked again (the stall ends with the connection)
    assert len(spans) == len(recorded) + 1 > 10
    for (start, end), (sleep_start, sleep_end) in zip(spans, recorded):
        # credit ran out before the client went to sleep; the Credit left after it woke
        # (the figure's date numbers hold times to about a microsecond)
        assert start <= sleep_start + 2_000 and sleep_end <= end + 2_000
        assert (end - start) < (sleep_end - sleep_start) + 100 * MS
    # the stalls the figure shades are the stalls table's, to the microsecond
    table = slow.table("stalls").sort_values("start_ns")
    for (start, end), row in zip(spans, table.itertuples()):
        assert abs(start - row.start_ns) < 2_000 and abs(end - row.end_ns) < 2_000


def test_the_credit_figure_draws_the_balance_the_truth_implies(slow):
    truth = next(c for c in truth_of(SLOW)["connections"] if "sleeps_ns" in c)
    (line,) = [line for line in report.credit_figure(slow).axes[0].get_lines()
               if line.get_label() == "credit balance"]  # fmt: skip
    balance = np.asarray(line.get_ydata(), dtype=float)
    (initial,) = truth["initial_credit"].values()
    # Subscribe, then one point per Credit and per Deliver
    assert len(balance) == 1 + truth["credits_granted"] + truth["delivered_chunks"]
    assert balance[0] == initial
    assert balance[-1] == initial + truth["credits_granted"] - truth["delivered_chunks"]
    assert balance.min() == 0 and balance.max() == initial


def test_the_throughput_figure_counts_the_truths_messages(slow):
    truth = truth_of(SLOW)
    (messages, _) = report.throughput_figure(slow).axes
    labels = {line.get_label() for line in messages.get_lines()}
    delivered = sum(c.get("delivered_records", 0) for c in truth["connections"])
    published = sum(c.get("published", 0) for c in truth["connections"])
    assert f"delivered ({delivered} in all)" in labels
    assert f"published ({published} in all)" in labels


def test_time_axes_are_the_captures_wall_clock(slow):
    truth = truth_of(SLOW)
    fig = report.consumer_figure(slow)
    low, high = (ns_of(x) for x in fig.axes[-1].get_xlim())
    assert low <= truth["started_ns"] + 500 * MS and high >= truth["ended_ns"] - 500 * MS
    assert high - low < (truth["ended_ns"] - truth["started_ns"]) * 1.2
    assert fig.axes[-1].get_xlabel() == "capture time (UTC)"


# --- tables of three million rows -----------------------------------------------------


def frame(table: str, n: int, **columns) -> pd.DataFrame:
    """A table with the given columns (schema dtypes), the others missing."""
    dtypes = schema.pandas_dtypes(table)
    out = {}
    for name, dtype in dtypes.items():
        if name in columns:
            values = columns[name]
            out[name] = pd.array(values, dtype="string[pyarrow]" if dtype == "string" else dtype)
        elif dtype in ("Int64", "Int32", "UInt64", "boolean"):
            numpy = {"boolean": bool}.get(dtype, dtype.lower())
            out[name] = pd.array(np.zeros(n, dtype=numpy), dtype=dtype)
            out[name][:] = pd.NA
        else:
            out[name] = pd.array([None] * n, dtype="string" if dtype == "string" else "float64")
    return pd.DataFrame(out)


def huge_data(n: int = 3_000_000) -> ReportData:
    """An hour of capture: n Delivers, publishes and balance changes, 100,000 stalls."""
    rng = np.random.default_rng(7)
    t0, hour = 1_795_300_000 * 10**9, 3600 * 10**9
    ts = np.sort(rng.integers(t0, t0 + hour, n))
    conn = np.full(n, "127.0.0.1:40000-127.0.0.1:5552", dtype=object)
    stall_starts = np.sort(rng.integers(t0, t0 + hour, 100_000))
    stall_ends = stall_starts + rng.integers(1, 20 * MS, 100_000)
    lag = rng.exponential(5.0, n)
    tables = {
        "deliveries": frame("deliveries", n, ts_ns=ts, connection=conn,
                            subscription_id=np.zeros(n, np.int32), lag=rng.integers(0, 50, n),
                            delivery_latency_ms=lag),
        "credit_balance": frame("credit_balance", n, ts_ns=ts, connection=conn,
                                subscription_id=np.zeros(n, np.int32),
                                balance=rng.integers(0, 10, n)),
        "stalls": frame("stalls", 100_000, connection=conn[:100_000],
                        subscription_id=np.zeros(100_000, np.int32), start_ns=stall_starts,
                        end_ns=stall_ends, duration_ms=(stall_ends - stall_starts) / 1e6,
                        broker_had_more=np.ones(100_000, bool)),
        "publishes": frame("publishes", n, connection=conn, publisher_id=np.zeros(n, np.int32),
                           publishing_id=np.arange(n, dtype=np.uint64), publish_ts_ns=ts,
                           outcome_ts_ns=ts + (lag * MS).astype(np.int64), lag_ms=lag,
                           outcome=np.where(np.arange(n) % 1000 == 0, "errored", "confirmed")
                           .astype(object)),
        "backlog": frame("backlog", n, ts_ns=ts, connection=conn,
                         publisher_id=np.zeros(n, np.int32), outstanding=rng.integers(0, 400, n)),
        "throughput": frame("throughput", 3600,
                            second_ns=t0 + np.arange(3600, dtype=np.int64) * 10**9,
                            **{c: rng.integers(0, 1000, 3600) for c in
                               ("published_msgs", "published_bytes", "confirmed_msgs",
                                "delivered_msgs", "delivered_bytes")}),
        "requests": frame("requests", 100_000, connection=conn[:100_000],
                          command=np.array(["QueryOffset", "Metadata"] * 50_000, dtype=object),
                          status=np.full(100_000, "answered", dtype=object),
                          latency_ms=lag[:100_000], request_ts_ns=ts[:100_000]),
        "anomalies": frame("anomalies", 100_000, ts_ns=ts[:100_000], connection=conn[:100_000],
                           kind=np.full(100_000, "retransmission", dtype=object)),
    }  # fmt: skip
    analysis = analyze(str(CAPTURES / "raw-errors-3.10.pcap"))  # (small tables: real rows)
    for name in ("connections", "latency", "confirms", "credit", "errors"):
        tables[name] = getattr(analysis, name)
    return ReportData(tables, "synthetic hour")


@pytest.fixture(scope="module")
def huge():
    """The HTML report of three million rows, rendered once, and the figure of each section
    as the report drew it (into a PNG of 100 dpi, html.DPI)."""
    with figures_kept() as drawn:
        page = report.render_html(huge_data())
    assert set(drawn) == set(report.FIGURES)
    return page, drawn


@pytest.mark.parametrize("anchor", [s.anchor for s in report.SECTIONS])
def test_three_million_rows_are_drawn_as_a_few_thousand_points(huge, anchor):
    fig = huge[1][anchor]
    points = drawn_points(fig)
    assert points < 30_000, (anchor, points)
    if anchor == "credit":
        assert 0 < len(stall_spans(fig)) <= 1_100  # (100,000 stalls as bands)


def test_the_html_report_of_three_million_rows_stays_small(huge):
    size = len(huge[0].encode())
    assert size < 5_000_000


# --- tables missing or empty ------------------------------------------------------------


def test_a_directory_without_the_per_row_tables_still_draws_every_figure(tmp_path):
    """What the Spark job writes (no requests, publishes, backlog or credit_balance table):
    the SRT percentiles, the publishers' percentiles, the chunks delivered under the shaded
    stalls; the backlog figure says the table is missing."""
    write_tables(analyze(str(SLOW)), str(tmp_path), "parquet",
                 ["connections", "latency", "confirms", "credit", "stalls", "deliveries",
                  "throughput", "errors", "anomalies"])  # fmt: skip
    data = report.from_parquet(str(tmp_path))
    assert set(data.missing) == {"requests", "publishes", "backlog", "credit_balance"}
    latency = report.latency_figure(data)
    assert "percentiles" in latency.axes[0].get_title()
    assert "not in this dataset" in report.confirm_lag_figure(data).axes[0].get_title()
    assert any("not in this dataset" in t.get_text() for t in
               report.backlog_figure(data).axes[0].texts)  # fmt: skip
    credit = report.credit_figure(data)
    assert len(stall_spans(credit)) == len(sleeps(SLOW)) + 1
    assert "chunks delivered" in credit.axes[0].get_ylabel()


def test_no_tables_at_all_draw_notes():
    empty = ReportData({name: None for name in schema.analysis_tables()}, "nothing")
    assert empty.missing and not empty.has_traffic
    for section in report.SECTIONS:
        fig = section.figure(empty)
        assert any(t.get_text() for ax in fig.axes for t in ax.texts), section.anchor


def test_a_directory_with_no_tables_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        report.from_parquet(str(tmp_path))


def test_the_report_face_imports_no_other_face_and_no_pyplot():
    import subprocess
    import sys

    code = ("import sys, streamdissect.report; print(sorted(m for m in sys.modules if "
            "m.startswith(('streamdissect.spark', 'streamdissect.scapy', 'streamdissect.probe', "
            "'streamdissect.wireshark', 'streamdissect.cli', 'matplotlib.pyplot', 'pyspark'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=CAPTURES.parent)  # fmt: skip
    assert out.stdout.strip() == "[]"
