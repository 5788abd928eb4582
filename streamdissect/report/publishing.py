"""The publishing side over time: publish-confirm lag with its percentiles, and the confirm
backlog (publishing ids awaiting confirm) of each publisher."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from streamdissect.report import canvas
from streamdissect.report.bins import BINS, MAX_POINTS, bin_width, describe_width, to_time
from streamdissect.report.canvas import (
    COLORS,
    MAX_SERIES,
    capture_time_axis,
    empty,
    new_figure,
    note,
)
from streamdissect.report.series import Series, same_key
from streamdissect.report.text import missing

LINES = (("p50", "#1f77b4", "-"), ("p95", "#ff7f0e", "-"), ("p99", "#d62728", "-"),
         ("max", "#7f7f7f", ":"))  # fmt: skip


def confirm_lag_figure(data: Any, tz: Any = None) -> Figure:
    """Publish-to-confirm lag of every publishing id over the capture, with its p50, p95, p99
    (and max): per time bin when there are many, for the whole capture when few. Errored ids
    are red crosses; ids never confirmed are ticks along the bottom."""
    fig, (ax,) = new_figure("Publish-confirm lag over time")
    if not data.has("publishes") and len(data.table("confirms")):
        _from_summary(ax, data)
    elif not data.count("publishes"):
        empty(ax, "No publishes in this capture.")
        return fig
    else:
        _per_publish(fig, ax, data)
    ax.set_ylabel("publish → confirm (ms)")
    ax.grid(True, alpha=0.3)
    capture_time_axis(ax, data, tz)
    ax.legend(loc="upper left", fontsize=8, ncol=3)
    return fig


def _decided(chunk: Any) -> Any:
    return chunk["lag_ms"].notna() & chunk["publish_ts_ns"].notna()


def _per_publish(fig: Figure, ax: Any, data: Any) -> None:
    decided = Series(data, "publishes", "publish_ts_ns", "lag_ms", _decided)
    errored_n, low, high = _outcomes(data)
    if decided.count <= MAX_POINTS:
        ts, lags = decided.arrays()
        errored = np.concatenate([(part["outcome"] == "errored").to_numpy(dtype=bool)[
            _decided(part).to_numpy(dtype=bool)] for part in data.chunks("publishes")])  # fmt: skip
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
        width = bin_width(decided.first_ns, decided.last_ns, BINS)
        per_bin = decided.binned(width, ("p50", "p95", "p99", "max"))
        for stat, color, style in LINES:
            ax.step(per_bin["time"], per_bin[stat], where="post", color=color, linestyle=style,
                    label=f"{stat} per {describe_width(width)}")  # fmt: skip
        if errored_n:
            ax.plot([], [], "x", color=canvas.STALL_COLOR, label=f"errored ({errored_n:,})")
        note(fig, f"{decided.count:,} publishing ids answered: percentiles of each "
                  f"{describe_width(width)} bin by publish time.")  # fmt: skip
    if decided.count and low > 0 and high / low > 100:
        ax.set_yscale("log")
    _unconfirmed_ticks(ax, data)


def _outcomes(data: Any) -> tuple[int, float, float]:
    """(errored ids answered, the smallest and the largest lag answered)."""
    errored, low, high = 0, np.inf, -np.inf
    for part in data.chunks("publishes"):
        decided = part[_decided(part).to_numpy(dtype=bool)]
        errored += int((decided["outcome"] == "errored").to_numpy(dtype=bool).sum())
        if len(decided):
            lags = decided["lag_ms"].to_numpy(float)
            low, high = min(low, lags.min()), max(high, lags.max())
    return errored, low, high


def _unconfirmed_ticks(ax: Any, data: Any) -> None:
    """A tick along the bottom where ids were never confirmed (one a bin when many)."""
    never = Series(data, "publishes", "publish_ts_ns", "publish_ts_ns",
                   lambda part: (part["outcome"] == "unconfirmed").fillna(False)
                   & part["publish_ts_ns"].notna())  # fmt: skip
    if not never.count:
        return
    if never.count > MAX_POINTS:  # (one tick a bin is enough to see where they are)
        width = bin_width(never.first_ns, never.last_ns, BINS)
        times = np.unique(np.concatenate([np.unique(t // width) for t, _ in never.parts()])) * width
    else:
        times = never.arrays()[0]
    bottom = blended_transform_factory(ax.transData, ax.transAxes)
    ax.plot(to_time(times), np.full(len(times), 0.02), "|", color="#9467bd", markersize=12,
            transform=bottom, label=f"never confirmed ({never.count:,})")  # fmt: skip


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
    if not data.has("backlog"):
        empty(ax, "The confirm backlog is not in this dataset (its directory has no backlog "
                  "table).")  # fmt: skip
        return fig
    largest = _publishers(data)
    if not largest:
        empty(ax, "No publishes in this capture.")
        return fig
    groups = sorted(largest, key=lambda key: -largest[key])
    width = None
    for i, (connection, publisher) in enumerate(groups[:MAX_SERIES]):
        series = Series(data, "backlog", "ts_ns", "outstanding",
                        lambda part, key=(connection, publisher): _timed(part)
                        & same_key(part, ("connection", "publisher_id"), key))  # fmt: skip
        label = f"{canvas.short_connection(connection)} publisher {publisher}"
        if series.count <= MAX_POINTS:
            ts, outstanding = series.arrays()
            ax.step(to_time(ts), outstanding, where="post", color=COLORS[i % len(COLORS)],
                    label=label)  # fmt: skip
        else:
            width = bin_width(series.first_ns, series.last_ns, BINS)
            peak = series.binned(width, ("max",))
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


def _timed(part: Any) -> Any:
    return part["ts_ns"].notna().to_numpy(dtype=bool)


def _publishers(data: Any) -> dict:
    """(connection, publisher id) -> its largest backlog, in the order first seen (rows with
    a time only)."""
    largest: dict = {}
    for part in data.chunks("backlog"):
        part = part[_timed(part)]
        peaks = part.groupby(["connection", "publisher_id"], sort=False, dropna=False)["outstanding"]
        for key, peak in peaks.max().items():
            largest[key] = max(largest.get(key, peak), peak)
    return {key: int(peak) for key, peak in largest.items()}
