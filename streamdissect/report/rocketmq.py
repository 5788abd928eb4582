"""The report's RocketMQ sections (shown when the capture has RocketMQ calls): latency per
request code, errors, sends and pulls over time, consumer offsets and lag; and what of
them needs a look."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from streamdissect.report import canvas
from streamdissect.report.bins import BINS, MAX_POINTS, bin_width, binned, describe_width, to_time
from streamdissect.report.canvas import capture_time_axis, empty, new_figure, note
from streamdissect.report.latency import SrtTables, srt_figure
from streamdissect.report.text import plural
from streamdissect.report.traffic import error_bars

SRT = SrtTables(
    "rocketmq_latency", "rocketmq_requests", "request_name",
    (("request_name", "request"), ("server", "server"), ("direction", "dir"),
     ("calls", "calls"), ("answered", "answered"), ("open_requests", "open"),
     ("orphan_responses", "orphans"), ("oneway", "oneway"), ("min_ms", "min ms"),
     ("p50_ms", "p50 ms"), ("p95_ms", "p95 ms"), ("p99_ms", "p99 ms"), ("max_ms", "max ms")),
    "RocketMQ request latency by request code (service response time)")  # fmt: skip
MAX_QUEUES = 30  # bars in the lag figure


def has_rocketmq(data: Any) -> bool:
    """Whether the capture (or dataset) has RocketMQ calls."""
    return bool(len(data.table("rocketmq_requests")) or len(data.table("rocketmq_latency")))


def latency_figure(data: Any, tz: Any = None) -> Figure:
    """Per request code, the fraction of calls answered within x ms, and the SRT table per
    request code, server and direction."""
    return srt_figure(data, SRT)


def errors_figure(data: Any, tz: Any = None) -> Figure:
    """How often each (request, response code) other than SUCCESS came back."""
    return error_bars(data, "rocketmq_errors", "request_name", _labels,
                      "RocketMQ errors by request and code")  # fmt: skip


def _labels(errors: Any) -> list[str]:
    return [f"{row.request_name or '(request not captured)'}: {row.code_name} ({int(row.code)})"
            + (f" {row.topic}" if isinstance(row.topic, str) else "")
            for row in errors.itertuples()]  # fmt: skip


def traffic_figure(data: Any, tz: Any = None) -> Figure:
    """Each send's latency and each pull's (a long poll's: how long the broker held it) by
    request time; failed sends and pulls that found nothing marked apart."""
    fig, (send_ax, pull_ax) = new_figure("RocketMQ sends and pulls over time", rows=2,
                                         height=6.0)  # fmt: skip
    sends, pulls = data.table("rocketmq_sends"), data.table("rocketmq_pulls")
    binned_any = False
    if len(sends):
        ok = (sends["status"] == "SEND_OK").fillna(False).to_numpy(bool)
        binned_any |= _series(send_ax, sends, ok, "sent, SEND_OK", "not SEND_OK")
        send_ax.set_ylabel("send → response (ms)")
    else:
        empty(send_ax, "No sends in this capture.")
    if len(pulls):
        found = (pulls["code"] == 0).fillna(False).to_numpy(bool)
        binned_any |= _series(pull_ax, pulls, found, "found messages", "nothing (or an error)")
        pull_ax.set_ylabel("pull → response (ms)")
    else:
        empty(pull_ax, "No pulls in this capture.")
    capture_time_axis(pull_ax, data, tz)
    if binned_any:
        note(fig, "Many calls: the latency's p50 and max per time bin.")
    return fig


def _series(ax: Any, table: Any, good: np.ndarray, good_label: str, bad_label: str) -> bool:
    """A table's latencies by request time: points when few (good blue, the others red),
    else p50 and max per time bin; whether it was binned."""
    answered = table["latency_ms"].notna().to_numpy(bool)
    ts = table["request_ts_ns"].to_numpy(np.int64, na_value=0)[answered]
    ms = table["latency_ms"].to_numpy(float, na_value=np.nan)[answered]
    good = good[answered]
    if not len(ts):
        empty(ax, "No call was answered.")
        return False
    if len(ts) <= MAX_POINTS:
        ax.plot(to_time(ts[good]), ms[good], ".", color="#1f77b4", markersize=5,
                label=f"{good_label} ({int(good.sum()):,})")  # fmt: skip
        if (~good).any():
            ax.plot(to_time(ts[~good]), ms[~good], "x", color=canvas.STALL_COLOR,
                    label=f"{bad_label} ({int((~good).sum()):,})")  # fmt: skip
        binned_it = False
    else:
        width = bin_width(int(ts.min()), int(ts.max()), BINS)
        per_bin = binned(ts, ms, width, ("p50", "max"))
        for stat, color in (("p50", "#1f77b4"), ("max", "#7f7f7f")):
            ax.step(per_bin["time"], per_bin[stat], where="post", color=color,
                    label=f"{stat} per {describe_width(width)}")  # fmt: skip
        binned_it = True
    if ms.min() > 0 and ms.max() / ms.min() > 100:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return binned_it


def offsets_figure(data: Any, tz: Any = None) -> Figure:
    """Per group, topic and queue: the committed offset and the broker's max offset as the
    wire last showed them; the gap between is the lag."""
    offsets = data.table("rocketmq_offsets")
    shown = offsets[offsets["committed_offset"].notna() | offsets["max_offset"].notna()]
    shown = shown.sort_values("lag", ascending=False, na_position="last").head(MAX_QUEUES)
    fig, (ax,) = new_figure("RocketMQ consumer offsets and lag",
                            height=1.8 + 0.3 * max(len(shown), 3))  # fmt: skip
    if not len(shown):
        empty(ax, "No committed offset or max offset on the wire.")
        return fig
    y = np.arange(len(shown))[::-1]
    committed = shown["committed_offset"].to_numpy(float, na_value=np.nan)
    highest = shown["max_offset"].to_numpy(float, na_value=np.nan)
    ax.barh(y, highest, color="#d9d9d9", label="max offset (broker)")
    ax.barh(y, committed, height=0.5, color="#1f77b4", label="committed offset")
    for yy, top, lag in zip(y, highest, shown["lag"].to_numpy(float, na_value=np.nan)):
        if not np.isnan(lag):
            ax.text(top, yy, f" lag {lag:,.0f}", va="center", fontsize=8)
    labels = [f"{row.consumer_group} {row.topic} q{row.queue_id}" for row in shown.itertuples()]
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel("queue offset")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    if len(offsets) > MAX_QUEUES:
        note(fig, f"The {MAX_QUEUES} queues with the most lag of {len(offsets)}.")
    return fig


def findings(data: Any) -> list[tuple[str, str, str, str]]:
    """(level, topic, text, anchor) of what needs a look in the RocketMQ tables."""
    out = []
    errors = data.table("rocketmq_errors")
    if len(errors):
        total = int(errors["count"].fillna(0).sum())
        top = errors.sort_values("count", ascending=False).head(6)
        parts = [f"{row.code_name} ({row.request_name}) ×{int(row['count'])}"
                 for _, row in top.iterrows()]  # fmt: skip
        more = f", and {len(errors) - len(top)} more" if len(errors) > len(top) else ""
        out.append(("problem", "RocketMQ error codes",
                    (f"{plural(total, 'response')} other than SUCCESS: "
                     f"{', '.join(parts)}{more}."), "rocketmq-errors"))  # fmt: skip
    latency = data.table("rocketmq_latency")
    open_ = latency[latency["open_requests"].fillna(0) > 0]
    if len(open_):
        total = int(open_["open_requests"].sum())
        parts = ", ".join(f"{row.request_name} ×{int(row.open_requests)}"
                          for row in open_.itertuples())  # fmt: skip
        out.append(("look", "RocketMQ requests never answered",
                    (f"{plural(total, 'request')} with no response in the capture (a pull "
                     f"the broker still held is one): {parts}."), "rocketmq-latency"))  # fmt: skip
    return out
