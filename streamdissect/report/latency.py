"""Request latency per command: an ECDF on a log axis, with the SRT table under it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from streamdissect.report.bins import ecdf
from streamdissect.report.canvas import COLORS, MAX_SERIES, empty, new_figure, note
from streamdissect.report.text import cell

SMALLEST_MS = 1e-3  # a log axis has no zero: faster answers are drawn at 1 µs
SRT_COLUMNS = (("command", "command"), ("calls", "calls"), ("answered", "answered"),
               ("open_requests", "open"), ("orphan_responses", "orphans"),
               ("duplicate_ids", "dup ids"), ("min_ms", "min ms"), ("p50_ms", "p50 ms"),
               ("p95_ms", "p95 ms"), ("p99_ms", "p99 ms"), ("max_ms", "max ms"))  # fmt: skip
PERCENTILES = (("min_ms", 0.0), ("p50_ms", 0.5), ("p75_ms", 0.75), ("p95_ms", 0.95),
               ("p99_ms", 0.99), ("max_ms", 1.0))  # fmt: skip


@dataclass(frozen=True)
class SrtTables:
    """Where a protocol's service response times are: its summary table (one row a key, or
    several: RocketMQ's a request code per server), its per-request table, the key column of
    both, the summary's columns as (column, heading), and the figure's title."""

    summary: str
    requests: str
    key: str
    columns: tuple[tuple[str, str], ...]
    title: str


STREAM_SRT = SrtTables("latency", "requests", "command", SRT_COLUMNS,
                       "Request latency by command (service response time)")  # fmt: skip


def latency_figure(data: Any, tz: Any = None) -> Figure:
    """Per command, the fraction of requests answered within x ms (x on a log axis), and
    the SRT table: calls, answered, open, orphan responses, duplicate ids, percentiles."""
    return srt_figure(data, STREAM_SRT)


def srt_figure(data: Any, tables: SrtTables) -> Figure:
    """The latency figure of `tables`: a curve a key, the SRT table under it."""
    key = tables.key
    srt = data.table(tables.summary).sort_values(["calls", key], ascending=[False, True])
    srt = srt.reset_index(drop=True)
    rows = len(srt)
    fig, (ax, table_ax) = new_figure(
        tables.title, rows=2, sharex=False,
        height=4.3 + 0.16 * (rows + 2), height_ratios=[4.2, 0.16 * (rows + 2)])  # fmt: skip
    table_ax.axis("off")
    if not rows:
        empty(ax, "No requests in this capture: nothing to time.")
        return fig
    drawn, left_out = _curves(ax, data, srt, tables)
    if drawn:
        ax.set_xscale("log")
        ax.set_xlabel("latency: request to response (ms, log scale)")
        ax.set_ylabel("fraction of requests answered")
        ax.set_ylim(0, 1.02)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right", fontsize=8, ncol=2)
    else:
        empty(ax, "No request was answered in this capture.")
    table_ax.text(0.0, 1.0, _srt_text(srt, tables.columns), family="monospace", fontsize=8,
                  va="top", ha="left", transform=table_ax.transAxes)  # fmt: skip
    if left_out:
        note(fig, f"{left_out} more commands in the table only (the {MAX_SERIES} with the "
                  "most calls are drawn).")  # fmt: skip
    return fig


def _curves(ax: Any, data: Any, srt: Any, tables: SrtTables) -> tuple[int, int]:
    """Draw a curve per key (at most MAX_SERIES); (drawn, left out)."""
    key = tables.key
    requests = data.table(tables.requests)
    exact = data.has(tables.requests) and len(requests)
    if exact:
        answered = requests[(requests["status"] == "answered") & requests["latency_ms"].notna()]
        by_command = {c: g["latency_ms"].to_numpy(dtype=np.float64)
                      for c, g in answered.groupby(key, sort=False)}  # fmt: skip
    drawn = 0
    candidates = list(dict.fromkeys(c for c in srt[key]
                                    if (srt.loc[srt[key] == c, "answered"] > 0).any()))  # fmt: skip
    for i, command in enumerate(candidates[:MAX_SERIES]):
        color = COLORS[i % len(COLORS)]
        if exact:
            values = by_command.get(command)
            if values is None or not len(values):
                continue
            x, y = ecdf(np.maximum(values, SMALLEST_MS))
            ax.step(x, y, where="post", color=color, label=f"{command} ({len(values):,})")
        else:  # (only the SRT table: its percentiles as points)
            row = srt[srt[key] == command].iloc[0]
            x = [max(float(row[name]), SMALLEST_MS) for name, _ in PERCENTILES]
            y = [fraction for _, fraction in PERCENTILES]
            ax.plot(x, y, "o--", color=color, label=f"{command} (min, p50, p75, p95, p99, max)")
        drawn += 1
    if drawn and not exact:
        ax.set_title("per-request times not in this dataset: the SRT table's percentiles",
                     fontsize=9)  # fmt: skip
    return drawn, max(len(candidates) - MAX_SERIES, 0)


def _srt_text(srt: Any, columns: tuple[tuple[str, str], ...]) -> str:
    """The SRT table as fixed-width text (one text object: a cell per text object made the
    figure take a second to lay out)."""
    rows = [[label for _, label in columns]]
    rows += [[cell(row[name]) for name, _ in columns] for _, row in srt.iterrows()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(columns))]
    lines = ["  ".join(value.ljust(w) if i == 0 else value.rjust(w)
                       for i, (value, w) in enumerate(zip(r, widths))) for r in rows]  # fmt: skip
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)
