"""The consuming side over time: each subscription's credit balance with its stalls shaded,
and consumer lag and delivery latency of every Deliver."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.dates import date2num
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from streamdissect.report.bins import (
    MAX_POINTS,
    describe_width,
    merge_spans,
    to_time,
)
from streamdissect.report.canvas import (
    COLORS,
    MAX_SERIES,
    STALL_COLOR,
    capture_time_axis,
    empty,
    new_figure,
    note,
    short_connection,
)
from streamdissect.report.series import SeriesSet, Wanted, keys_in
from streamdissect.report.text import duration, missing, plural

KEY = ("connection", "subscription_id")
MAX_PANELS = 6  # subscriptions drawn, most stalled first
MAX_SPANS = 300  # stalls drawn one by one; more are joined into bands


def subscriptions(data: Any) -> list[tuple[str, int, Any]]:
    """(connection, subscription id, its credit row or None) of every subscription, the
    most stalled first, then as the credit table lists them."""
    credit = data.table("credit")
    seen: dict = {}
    for _, row in credit.iterrows():
        seen.setdefault((row["connection"], _id(row["subscription_id"])), row)
    for name in ("stalls", "credit_balance", "deliveries"):
        for key in keys_in(data, name, KEY):
            seen.setdefault((key[0], _id(key[1])), None)
    stalled = data.table("stalls").groupby(["connection", "subscription_id"])["duration_ms"].sum()
    order = sorted(seen, key=lambda k: -float(stalled.get(k, 0.0) or 0.0))
    return [(c, s, seen[(c, s)]) for c, s in order]


def _id(value: Any) -> Any:
    return None if missing(value) else int(value)


def _mine(table: Any, connection: str, sid: Any) -> Any:
    return table[_is_mine(table, connection, sid)]


def _is_mine(table: Any, connection: str, sid: Any) -> Any:
    ids = table["subscription_id"]
    same = ids.isna() if sid is None else ids == sid
    return (table["connection"] == connection) & same.fillna(False)


def credit_figure(data: Any, tz: Any = None) -> Figure:
    """One plot per subscription: its credit balance (chunks the broker may still send)
    after every Subscribe, Credit and Deliver, and its stalls (no credit left: from the
    Deliver that used the last credit to the Credit that restored some) shaded."""
    subs = subscriptions(data)
    panels = subs[:MAX_PANELS]
    fig, axes = new_figure("Credit balance per subscription, stalls shaded", rows=max(len(panels), 1),
                           height=1.6 + 2.0 * max(len(panels), 1))  # fmt: skip
    if not panels:
        empty(axes[0], "No subscriptions in this capture.")
        return fig
    balances = _balances(data, [(c, s) for c, s, _ in panels])
    joined = 0
    for ax, (connection, sid, row) in zip(axes, panels):
        joined += _panel(ax, data, connection, sid, row, balances)
        ax.grid(True, alpha=0.3)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    capture_time_axis(axes[-1], data, tz)
    notes = []
    if len(subs) > MAX_PANELS:
        notes.append(f"{len(subs) - MAX_PANELS} more subscriptions not drawn (the {MAX_PANELS} "
                     "most stalled are).")  # fmt: skip
    if joined:
        notes.append(f"Stalls closer than a thousandth of the span are joined into bands "
                     f"({joined:,} bands drawn).")  # fmt: skip
    if notes:
        note(fig, " ".join(notes))
    return fig


def _balances(data: Any, keys: list[tuple]) -> dict[tuple, Any]:
    """Each subscription's ("balance", its credit balance as series.Drawn), or ("delivered",
    its Delivers' times) when it has none (no Subscribe captured, or no credit_balance
    table): one read of each table for every panel."""
    balance = SeriesSet(data, "credit_balance", "ts_ns", KEY,
                        {"balance": "balance"})  # fmt: skip
    wanted = {key: Wanted(key, "balance", "points", ("min", "max")) for key in keys
              if balance.of(key, "balance").count}  # fmt: skip
    out = {w.key: ("balance", drawn) for w, drawn in balance.read(list(wanted.values())).items()}
    unknown = [Wanted(key, "ts_ns", "all") for key in keys if key not in wanted]
    if unknown:
        delivered = SeriesSet(data, "deliveries", "ts_ns", KEY, {"ts_ns": "ts_ns"})
        out.update({w.key: ("delivered", drawn) for w, drawn in delivered.read(unknown).items()})
    return out


def _panel(ax: Any, data: Any, connection: str, sid: Any, row: Any, balances: dict) -> int:
    """One subscription; the number of joined bands drawn (0: every stall its own)."""
    stalls = _mine(data.table("stalls"), connection, sid)
    stalled = float(stalls["duration_ms"].fillna(0).sum())
    stream = "" if row is None or missing(row["stream"]) else f" · stream {row['stream']}"
    ax.set_title(f"{short_connection(connection)} subscription {sid}{stream} · "
                 f"{plural(len(stalls), 'stall')}, {duration(stalled)} stalled",
                 fontsize=9, loc="left")  # fmt: skip
    what, drawn = balances[(connection, sid)]
    if what == "balance":
        _balance_line(ax, drawn)
        ax.set_ylabel("credit (chunks)")
    else:
        _delivered_line(ax, data, drawn.ts_ns)
    joined = _stall_spans(ax, stalls, data)
    ax.set_ylim(bottom=min(0, ax.get_ylim()[0]))
    ax.legend(loc="upper right", fontsize=8)
    return joined


def _balance_line(ax: Any, balance: Any) -> None:
    if balance.per_bin is None:
        ax.step(to_time(balance.ts_ns), balance.values, where="post", color=COLORS[0],
                label="credit balance")  # fmt: skip
        return
    span, width = balance.per_bin, balance.width
    ax.fill_between(span["time"], span["min"], span["max"], step="post", color=COLORS[0],
                    alpha=0.5, label=f"credit balance (range per {describe_width(width)})")  # fmt: skip


def _delivered_line(ax: Any, data: Any, times: np.ndarray) -> None:
    """No balance known (no Subscribe captured, or a directory without the credit_balance
    table): the chunks delivered so far, flat while stalled."""
    ts = np.sort(times)
    why = ("Subscribe not captured: balance unknown" if data.has("credit_balance")
           else "credit balance not in this dataset")  # fmt: skip
    ax.set_ylabel("chunks delivered")
    if not len(ts):
        ax.plot([], [], " ", label=f"no Deliver ({why})")
        ax.set_ylim(0, 1)
        return
    count = np.arange(1, len(ts) + 1)
    if len(ts) > MAX_POINTS:
        keep = np.unique(np.linspace(0, len(ts) - 1, MAX_POINTS).astype(int))
        ts, count = ts[keep], count[keep]
    ax.step(to_time(ts), count, where="post", color=COLORS[2],
            label=f"chunks delivered, cumulative ({why})")  # fmt: skip


def _stall_spans(ax: Any, stalls: Any, data: Any) -> int:
    """Shade every stall (gid 'stall': tests and tools find them in the figure); many are
    joined into bands. The number of bands when joined, else 0."""
    stalls = stalls[stalls["start_ns"].notna()]
    if not len(stalls):
        return 0
    last = data.last_ns if data.last_ns is not None else int(stalls["start_ns"].max())
    starts = stalls["start_ns"].to_numpy(np.int64)
    ends = stalls["end_ns"].fillna(last).to_numpy(np.int64)
    joined = 0
    if len(starts) > MAX_SPANS:
        span = (data.last_ns or int(ends.max())) - (data.first_ns or int(starts.min()))
        starts, ends = merge_spans(starts, ends, max(span // 1000, 1))
        joined = len(starts)
    left, right = date2num(to_time(starts)), date2num(to_time(ends))
    for i, (x0, x1) in enumerate(zip(left, right)):
        ax.axvspan(x0, x1, color=STALL_COLOR, alpha=0.22, linewidth=0, gid="stall",
                   label="stall: no credit left" if i == 0 else None)  # fmt: skip
    return joined


def consumer_figure(data: Any, tz: Any = None) -> Figure:
    """Per subscription, over the capture: consumer lag (committed chunk id minus the
    delivered chunk's first offset; Deliver v2) and delivery latency (capture time minus
    the chunk's broker timestamp)."""
    fig, (lag_ax, latency_ax) = new_figure("Consumer lag and delivery latency", rows=2, height=6.2)
    deliveries = SeriesSet(data, "deliveries", "ts_ns", KEY,
                           {column: column for column in ("lag", "delivery_latency_ms")})  # fmt: skip
    sizes = deliveries.rows  # (Delivers with a time, in the order first seen)
    if not sizes:
        empty(lag_ax, "No Deliver frames in this capture.")
        empty(latency_ax, "")
        return fig
    groups = sorted(sizes, key=lambda key: -sizes[key])
    wanted = [Wanted(key, column, "points", ("mean", "max"))
              for column in ("lag", "delivery_latency_ms") for key in groups[:MAX_SERIES]
              if deliveries.of(key, column).count]  # fmt: skip
    drawn = deliveries.read(wanted)
    widths = set()
    for column, ax in (("lag", lag_ax), ("delivery_latency_ms", latency_ax)):
        drawn_n = 0
        for i, (connection, sid) in enumerate(groups[:MAX_SERIES]):
            w = Wanted((connection, sid), column, "points", ("mean", "max"))
            if w in drawn:
                widths.add(_series(ax, drawn[w], COLORS[i % len(COLORS)],
                                   f"{short_connection(connection)} subscription {sid}"))  # fmt: skip
                drawn_n += 1
        if not drawn_n:
            empty(ax, "Consumer lag needs Deliver v2 (its committed chunk id); this capture has "
                      "only Deliver v1." if column == "lag" else "No chunk timestamps.")  # fmt: skip
        else:
            ax.legend(loc="upper left", fontsize=8)
            ax.grid(True, alpha=0.3)
    lag_ax.set_ylabel("lag (offsets behind\ncommitted chunk)")
    latency_ax.set_ylabel("delivery latency (ms)\ncapture − chunk timestamp")
    capture_time_axis(latency_ax, data, tz)
    widths.discard(None)
    notes = ["Delivery latency compares the capture's clock with the broker's."]
    if widths:
        notes.append(f"Many Delivers: mean (line) and largest (dotted) per "
                     f"{describe_width(max(widths))}.")  # fmt: skip
    if len(groups) > MAX_SERIES:
        notes.append(f"{len(groups) - MAX_SERIES} more subscriptions not drawn.")
    note(fig, " ".join(notes))
    return fig


def _series(ax: Any, rows: Any, color: str, label: str) -> int | None:
    """One subscription's values (series.Drawn); the bin width when binned."""
    if rows.per_bin is None:
        ax.plot(to_time(rows.ts_ns), rows.values, ".-", color=color, markersize=3,
                linewidth=0.8, label=label)  # fmt: skip
        return None
    per_bin, width = rows.per_bin, rows.width
    ax.step(per_bin["time"], per_bin["mean"], where="post", color=color, label=label)
    ax.step(per_bin["time"], per_bin["max"], where="post", color=color, linestyle=":",
            linewidth=0.8)  # fmt: skip
    return width
