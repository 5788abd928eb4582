"""Traffic as a whole: messages and bytes per second, and the error codes by command."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from streamdissect.report.bins import BINS, MAX_POINTS, bin_width, describe_width, to_time
from streamdissect.report.canvas import COLORS, capture_time_axis, empty, new_figure, note
from streamdissect.report.text import missing

SECOND = 1_000_000_000
MAX_BARS = 25
# (column, label, colour, line style): confirmed dashed, as it often equals published
RATES = (("published_msgs", "published", COLORS[0], "-"),
         ("confirmed_msgs", "confirmed", COLORS[2], "--"),
         ("delivered_msgs", "delivered", COLORS[1], "-"))  # fmt: skip
BYTE_RATES = (("published_bytes", "published", COLORS[0], "-"),
              ("delivered_bytes", "delivered", COLORS[1], "-"))  # fmt: skip
BYTE_UNITS = ((1e9, "GB"), (1e6, "MB"), (1e3, "KB"), (1.0, "bytes"))


def throughput_figure(data: Any, tz: Any = None) -> Figure:
    """Messages per second published, confirmed and delivered, and MB per second published
    and delivered (second by second; averaged over longer bins for a long capture)."""
    fig, (msgs_ax, bytes_ax) = new_figure("Throughput", rows=2, height=5.6)
    per_second = data.table("throughput")
    per_second = per_second[per_second["second_ns"].notna()]
    if not len(per_second) or not per_second.drop(columns="second_ns").fillna(0).to_numpy().any():
        empty(msgs_ax, "No messages published, confirmed or delivered in this capture.")
        empty(bytes_ax, "")
        return fig
    seconds = per_second["second_ns"].to_numpy(np.int64)
    width = SECOND
    if len(per_second) > MAX_POINTS // 2:  # (a long capture: seconds averaged per bin)
        width = max(bin_width(int(seconds.min()), int(seconds.max()), BINS) // SECOND, 1) * SECOND
    peak = max(float(per_second[c].fillna(0).max()) for c, *_ in BYTE_RATES) / (width / SECOND)
    scale, unit = next((s, u) for s, u in BYTE_UNITS if peak >= s or s == 1.0)
    # every bin from the first to one past the last (a second with no traffic has no row)
    bins = np.arange(seconds.min() // width, seconds.max() // width + 2)
    for ax, rates, divisor in ((msgs_ax, RATES, 1.0), (bytes_ax, BYTE_RATES, scale)):
        for column, label, color, style in rates:
            values = per_second[column].fillna(0).to_numpy(float)
            sums = np.zeros(len(bins))
            np.add.at(sums, seconds // width - bins[0], values)
            ax.step(to_time(bins * width), sums / (width / SECOND) / divisor, where="post",
                    color=color, linestyle=style,
                    label=f"{label} ({values.sum():,.0f} in all)" if ax is msgs_ax else label)  # fmt: skip
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    msgs_ax.set_ylabel("messages / s")
    bytes_ax.set_ylabel(f"{unit} / s")
    capture_time_axis(bytes_ax, data, tz)
    if width > SECOND:
        note(fig, f"Long capture: the rate averaged over each {describe_width(width)}.")
    return fig


def errors_figure(data: Any, tz: Any = None) -> Figure:
    """How often each (command, code) other than OK came back: error responses,
    PublishError, Credit errors (0x8009), MetadataUpdate."""
    return error_bars(data, "errors", "command", _labels, "Errors by command and code")


def _labels(errors: Any) -> list[str]:
    return [f"{row.command}: {row.code_name}" if missing(row.code) else
            f"{row.command}: {row.code_name or 'code'} (0x{int(row.code):02x})"
            for row in errors.itertuples()]  # fmt: skip


def error_bars(data: Any, table: str, key: str, labels: Any, title: str) -> Figure:
    """A bar a row of an errors table (`count` occurrences, coloured by `key`: its request);
    `labels(rows)`: the bars' labels."""
    errors = data.table(table)
    errors = errors.sort_values(["count", key], ascending=[False, True]).head(MAX_BARS)
    fig, (ax,) = new_figure(title, height=1.6 + 0.32 * max(len(errors), 3))
    if not len(errors):
        empty(ax, "No error codes in this capture: every response was OK.")
        return fig
    commands = list(dict.fromkeys(errors[key]))
    colors = [COLORS[commands.index(c) % len(COLORS)] for c in errors[key]]
    y = np.arange(len(errors))[::-1]
    counts = errors["count"].fillna(0).to_numpy(int)
    ax.barh(y, counts, color=colors)
    for yy, count in zip(y, counts):
        ax.text(count, yy, f" {count:,}", va="center", fontsize=8)
    ax.set_yticks(y, labels(errors), fontsize=8)
    ax.set_xlabel("occurrences")
    ax.set_xlim(0, counts.max() * 1.15 + 1)
    ax.grid(True, axis="x", alpha=0.3)
    total = int(data.table(table)["count"].fillna(0).sum())
    ax.set_title(f"{total:,} in all; colour by command", fontsize=9)
    if len(data.table(table)) > MAX_BARS:
        note(fig, f"The {MAX_BARS} most frequent of {len(data.table(table))} "
                  "(command, code) pairs.")  # fmt: skip
    return fig
