"""The publishing side over time: publish-confirm lag with its percentiles, and the confirm
backlog (publishing ids awaiting confirm) of each publisher."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from streamdissect.report import canvas
from streamdissect.report.bins import MAX_POINTS, describe_width, to_time
from streamdissect.report.canvas import (
    COLORS,
    MAX_SERIES,
    capture_time_axis,
    empty,
    new_figure,
    note,
)
from streamdissect.report.series import SeriesSet, Wanted
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


def _outcome_is(outcome: str) -> Callable[[Any], Any]:
    """A publish's lag when its outcome is `outcome` (else missing)."""
    def lag(part: Any) -> Any:
        import pyarrow.compute as pc

        return pc.if_else(pc.fill_null(pc.equal(part["outcome"], outcome), False),
                          part["lag_ms"], None)  # fmt: skip
    return lag


def _publish_series(data: Any) -> SeriesSet:
    """The publishes read for the figure (one pass for them all): every lag answered, those
    errored and not, and the times of ids never confirmed."""
    import pyarrow.compute as pc

    def never(part: Any) -> Any:
        return pc.if_else(pc.fill_null(pc.equal(part["outcome"], "unconfirmed"), False),
                          part["publish_ts_ns"], None)  # fmt: skip

    def not_errored(part: Any) -> Any:
        return pc.if_else(pc.fill_null(pc.equal(part["outcome"], "errored"), False), None,
                          part["lag_ms"])  # fmt: skip

    return SeriesSet(data, "publishes", "publish_ts_ns", (),
                     {"lag": "lag_ms", "errored": _outcome_is("errored"),
                      "confirmed": not_errored, "never": never},
                     columns=("lag_ms", "outcome"))  # fmt: skip


def _per_publish(fig: Figure, ax: Any, data: Any) -> None:
    publishes = _publish_series(data)
    decided = publishes.of((), "lag")
    errored_n = publishes.of((), "errored").count
    never = publishes.of((), "never")
    if decided.count <= MAX_POINTS:
        wanted = [Wanted((), "confirmed", "all"), Wanted((), "errored", "all")]
    else:
        wanted = [Wanted((), "lag", "points", ("p50", "p95", "p99", "max"))]
    if never.count:
        wanted.append(Wanted((), "never", "points" if never.count <= MAX_POINTS else "bins"))
    drawn = publishes.read(wanted)
    if decided.count <= MAX_POINTS:
        confirmed, errored = drawn[wanted[0]], drawn[wanted[1]]
        ax.plot(to_time(confirmed.ts_ns), confirmed.values, ".", color="#1f77b4", alpha=0.6,
                markersize=4, label=f"confirmed ({len(confirmed.ts_ns):,})")  # fmt: skip
        if len(errored.ts_ns):
            ax.plot(to_time(errored.ts_ns), errored.values, "x", color=canvas.STALL_COLOR,
                    label=f"errored ({len(errored.ts_ns):,})")  # fmt: skip
        lags = np.concatenate([confirmed.values, errored.values])  # (percentiles: any order)
        for stat, color, style in LINES[:3]:
            if len(lags):
                value = float(np.percentile(lags, int(stat[1:])))
                ax.axhline(value, color=color, linestyle="--", linewidth=1,
                           label=f"{stat} {value:,.2f} ms (whole capture)")  # fmt: skip
    else:
        lag = drawn[wanted[0]]
        per_bin, width = lag.per_bin, lag.width
        for stat, color, style in LINES:
            ax.step(per_bin["time"], per_bin[stat], where="post", color=color, linestyle=style,
                    label=f"{stat} per {describe_width(width)}")  # fmt: skip
        if errored_n:
            ax.plot([], [], "x", color=canvas.STALL_COLOR, label=f"errored ({errored_n:,})")
        note(fig, f"{decided.count:,} publishing ids answered: percentiles of each "
                  f"{describe_width(width)} bin by publish time.")  # fmt: skip
    if decided.count and decided.low > 0 and decided.high / decided.low > 100:
        ax.set_yscale("log")
    if never.count:
        _unconfirmed_ticks(ax, drawn[wanted[-1]], never.count)


def _unconfirmed_ticks(ax: Any, never: Any, count: int) -> None:
    """A tick along the bottom where ids were never confirmed (one a bin when many)."""
    times = never.ts_ns if never.bins is None else never.bins
    bottom = blended_transform_factory(ax.transData, ax.transAxes)
    ax.plot(to_time(times), np.full(len(times), 0.02), "|", color="#9467bd", markersize=12,
            transform=bottom, label=f"never confirmed ({count:,})")  # fmt: skip


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
    backlog = SeriesSet(data, "backlog", "ts_ns", KEY, {"outstanding": "outstanding"})
    largest = {key: int(backlog.of(key, "outstanding").high) for key in backlog.rows
               if backlog.of(key, "outstanding").count}  # fmt: skip
    if not largest:
        empty(ax, "No publishes in this capture.")
        return fig
    groups = sorted(largest, key=lambda key: -largest[key])
    wanted = [Wanted(key, "outstanding", "points", ("max",)) for key in groups[:MAX_SERIES]]
    drawn = backlog.read(wanted)
    for i, w in enumerate(wanted):
        connection, publisher = w.key
        series = drawn[w]
        label = f"{canvas.short_connection(connection)} publisher {publisher}"
        if series.per_bin is None:
            ax.step(to_time(series.ts_ns), series.values, where="post",
                    color=COLORS[i % len(COLORS)], label=label)  # fmt: skip
        else:
            peak, width = series.per_bin, series.width
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


KEY = ("connection", "publisher_id")
