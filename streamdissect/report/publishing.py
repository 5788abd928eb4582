"""The publishing side over time: publish-confirm lag with its percentiles, and the confirm
backlog (publishing ids awaiting confirm) of each publisher."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from streamdissect.report import canvas
from streamdissect.report.bins import BINS, MAX_POINTS, bin_width, binned, describe_width, to_time
from streamdissect.report.canvas import (
    COLORS,
    MAX_SERIES,
    capture_time_axis,
    empty,
    new_figure,
    note,
)
from streamdissect.report.text import missing

LINES = (("p50", "#1f77b4", "-"), ("p95", "#ff7f0e", "-"), ("p99", "#d62728", "-"),
         ("max", "#7f7f7f", ":"))  # fmt: skip


def confirm_lag_figure(data: Any, tz: Any = None) -> Figure:
    """Publish-to-confirm lag of every publishing id over the capture, with its p50, p95, p99
    (and max): per time bin when there are many, for the whole capture when few. Errored ids
    are red crosses; ids never confirmed are ticks along the bottom."""
    fig, (ax,) = new_figure("Publish-confirm lag over time")
    publishes = data.table("publishes")
    if not data.has("publishes") and len(data.table("confirms")):
        _from_summary(ax, data)
    elif not len(publishes):
        empty(ax, "No publishes in this capture.")
        return fig
    else:
        _per_publish(fig, ax, data, publishes)
    ax.set_ylabel("publish → confirm (ms)")
    ax.grid(True, alpha=0.3)
    capture_time_axis(ax, data, tz)
    ax.legend(loc="upper left", fontsize=8, ncol=3)
    return fig


def _per_publish(fig: Figure, ax: Any, data: Any, publishes: Any) -> None:
    decided = publishes[publishes["lag_ms"].notna() & publishes["publish_ts_ns"].notna()]
    ts, lags = decided["publish_ts_ns"].to_numpy(np.int64), decided["lag_ms"].to_numpy(float)
    errored = (decided["outcome"] == "errored").to_numpy(dtype=bool)
    if len(decided) <= MAX_POINTS:
        ax.plot(to_time(ts[~errored]), lags[~errored], ".", color="#1f77b4", alpha=0.6,
                markersize=4, label=f"confirmed ({int((~errored).sum()):,})")  # fmt: skip
        if errored.any():
            ax.plot(to_time(ts[errored]), lags[errored], "x", color=canvas.STALL_COLOR,
                    label=f"errored ({int(errored.sum()):,})")  # fmt: skip
        for stat, color, style in LINES[:3]:
            if len(lags):
                value = float(np.percentile(lags, int(stat[1:])))
                ax.axhline(value, color=color, linestyle="--", linewidth=1,
                           label=f"{stat} {value:,.2f} ms (whole capture)")  # fmt: skip
    else:
        width = bin_width(int(ts.min()), int(ts.max()), BINS)
        per_bin = binned(ts, lags, width, ("p50", "p95", "p99", "max"))
        for stat, color, style in LINES:
            ax.step(per_bin["time"], per_bin[stat], where="post", color=color, linestyle=style,
                    label=f"{stat} per {describe_width(width)}")  # fmt: skip
        if errored.any():
            ax.plot([], [], "x", color=canvas.STALL_COLOR, label=f"errored ({int(errored.sum()):,})")
        note(fig, f"{len(decided):,} publishing ids answered: percentiles of each "
                  f"{describe_width(width)} bin by publish time.")  # fmt: skip
    if len(lags) and lags.min() > 0 and lags.max() / lags.min() > 100:
        ax.set_yscale("log")
    unconfirmed = publishes[publishes["outcome"] == "unconfirmed"]["publish_ts_ns"].dropna()
    if len(unconfirmed):
        times = unconfirmed.to_numpy(np.int64)
        if len(times) > MAX_POINTS:  # (one tick a bin is enough to see where they are)
            width = bin_width(int(times.min()), int(times.max()), BINS)
            times = np.unique(times // width) * width
        bottom = blended_transform_factory(ax.transData, ax.transAxes)
        ax.plot(to_time(times), np.full(len(times), 0.02), "|", color="#9467bd", markersize=12,
                transform=bottom, label=f"never confirmed ({len(unconfirmed):,})")  # fmt: skip


def _from_summary(ax: Any, data: Any) -> None:
    """Only the confirms table (a directory without publishes): each publisher's
    percentiles over the whole span."""
    confirms = data.table("confirms")
    first, last = to_time([data.first_ns or 0, data.last_ns or 0])
    for i, (_, row) in enumerate(confirms.head(MAX_SERIES).iterrows()):
        for stat, _, style in LINES[:3]:
            value = row[f"{stat}_ms"]
            if not missing(value):
                ax.hlines(value, first, last, color=COLORS[i % len(COLORS)], linestyle=style,
                          label=f"{canvas.short_connection(row['connection'])} publisher "
                          f"{row['publisher_id']} {stat}")  # fmt: skip
    ax.set_title("per-publish times not in this dataset: each publisher's percentiles over "
                 "the whole capture", fontsize=9)  # fmt: skip


def backlog_figure(data: Any, tz: Any = None) -> Figure:
    """Publishing ids awaiting confirm after each frame, one line per publisher (the
    largest per time bin when there are many frames)."""
    fig, (ax,) = new_figure("Confirm backlog per publisher")
    backlog = data.table("backlog")
    if not data.has("backlog"):
        empty(ax, "The confirm backlog is not in this dataset (its directory has no backlog "
                  "table).")  # fmt: skip
        return fig
    backlog = backlog[backlog["ts_ns"].notna()]
    if not len(backlog):
        empty(ax, "No publishes in this capture.")
        return fig
    groups = sorted(backlog.groupby(["connection", "publisher_id"], sort=False, dropna=False),
                    key=lambda item: -int(item[1]["outstanding"].max()))  # fmt: skip
    width = None
    for i, ((connection, publisher), series) in enumerate(groups[:MAX_SERIES]):
        ts = series["ts_ns"].to_numpy(np.int64)
        outstanding = series["outstanding"].to_numpy(float)
        label = f"{canvas.short_connection(connection)} publisher {publisher}"
        if len(series) <= MAX_POINTS:
            ax.step(to_time(ts), outstanding, where="post", color=COLORS[i % len(COLORS)],
                    label=label)  # fmt: skip
        else:
            width = bin_width(int(ts.min()), int(ts.max()), BINS)
            peak = binned(ts, outstanding, width, ("max",))
            ax.step(peak["time"], peak["max"], where="post", color=COLORS[i % len(COLORS)],
                    label=f"{label} (most per {describe_width(width)})")  # fmt: skip
    left_out = len(groups) - MAX_SERIES
    if left_out > 0:
        note(fig, f"{left_out} more publishers not drawn (the {MAX_SERIES} with the largest "
                  "backlog are).")  # fmt: skip
    ax.set_ylabel("publishing ids awaiting confirm")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    capture_time_axis(ax, data, tz)
    ax.legend(loc="upper left", fontsize=8)
    return fig
