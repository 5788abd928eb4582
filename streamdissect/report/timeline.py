"""The connection timeline: one bar per connection from its first to its last packet, the
handshake darker, how it ended at its right end, anomalies and error responses on it."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.dates import date2num
from matplotlib.figure import Figure

from streamdissect.report.bins import to_time
from streamdissect.report.canvas import (
    capture_time_axis,
    empty,
    new_figure,
    note,
    short_connection,
)
from streamdissect.report.text import missing, plural

MAX_ROWS = 40
MARKS_PER_ROW = 200  # anomalies (or errors) marked on one bar; more share a position
ENDS = {  # closed_by -> (marker, colour, legend)
    "client": ("s", "#1f77b4", "client sent Close"),
    "server": ("X", "#d62728", "broker sent Close"),
    "TCP closed without Close": ("o", "#7f7f7f", "TCP closed without Close"),
}
OPEN_END = (">", "#2ca02c", "still open at capture end")


def timeline_figure(data: Any, tz: Any = None) -> Figure:
    """One bar per connection (client port → server port): handshake (PeerProperties to the
    Open response) darker, then its life; at the end a marker for who closed it; anomalies
    (gaps, retransmissions, malformed frames...) as orange triangles, error responses as red
    crosses; missed heartbeats written beside the bar."""
    connections = data.table("connections")
    rows = _chosen(data, connections)
    fig, (ax,) = new_figure("Connection timeline", height=1.8 + 0.36 * max(len(rows), 2))
    if not len(rows):
        empty(ax, "No Stream connections in this capture.")
        return fig
    first = data.first_ns if data.first_ns is not None else int(rows["start_ns"].min())
    last = data.last_ns if data.last_ns is not None else int(rows["end_ns"].max())
    anomalies = data.table("anomalies")
    errors = _error_times(data)
    ax.plot(to_time([first, last]), [0, 0], alpha=0)  # (the x axis holds dates from here)
    legend: dict[str, Any] = {}
    for y, row in enumerate(rows.itertuples()):
        start = first if missing(row.start_ns) else row.start_ns
        end = last if missing(row.end_ns) else row.end_ns
        x0, x1 = date2num(to_time([start, end]))
        legend["life"] = ax.broken_barh([(x0, max(x1 - x0, 0))], (y - 0.3, 0.6),
                                        color="#aec7e8", label="connection")  # fmt: skip
        if not missing(row.handshake_ms):
            hs = date2num(to_time([start + int(row.handshake_ms * 1e6)]))[0]
            legend["handshake"] = ax.broken_barh([(x0, hs - x0)], (y - 0.3, 0.6),
                                                 color="#1f77b4", label="handshake")  # fmt: skip
        marker, color, label = ENDS.get(row.closed_by, OPEN_END if row.tcp_end == "open"
                                        else ("|", "#000000", "ended"))  # fmt: skip
        legend[label] = ax.plot([x1], [y], marker, color=color, markersize=8, label=label)[0]
        for times, mark, color, label in (
                (_times(anomalies, row.connection), "v", "#ff7f0e", "anomaly"),
                (errors.get(row.connection), "x", "#d62728", "error response")):  # fmt: skip
            if times is not None and len(times):
                xs = date2num(to_time(_thinned(times)))
                legend[label] = ax.plot(xs, np.full(len(xs), y + 0.32), mark, color=color,
                                        markersize=6, label=label)[0]  # fmt: skip
        missed = row.missed_heartbeat_gaps
        if not missing(missed) and missed:
            ax.annotate(f" {plural(int(missed), 'missed heartbeat')}", (x1, y), fontsize=8,
                        color="#9467bd", va="center", xytext=(8, 0),
                        textcoords="offset points")  # fmt: skip
    ax.set_yticks(range(len(rows)), [_label(r) for r in rows.itertuples()], fontsize=8)
    ax.set_ylim(len(rows) - 0.4, -0.8)
    ax.grid(True, axis="x", alpha=0.3)
    capture_time_axis(ax, data, tz)
    ax.legend(handles=list(legend.values()), loc="lower center", bbox_to_anchor=(0.5, 1.0),
              ncol=min(len(legend), 4), fontsize=8, frameon=False)  # fmt: skip
    if len(connections) > len(rows):
        note(fig, f"{len(connections) - len(rows)} more connections not drawn (those with "
                  "anomalies, errors or missed heartbeats come first, then by start).")  # fmt: skip
    return fig


def _chosen(data: Any, connections: Any) -> Any:
    """At most MAX_ROWS connections, those with something to see first, in start order."""
    if len(connections) <= MAX_ROWS:
        return connections.sort_values("start_ns", kind="stable").reset_index(drop=True)
    flagged = set(data.table("anomalies")["connection"].dropna()) | set(_error_times(data))
    interest = (connections["connection"].isin(flagged)
                | (connections["missed_heartbeat_gaps"].fillna(0) > 0)
                | (connections["closed_by"] == "server"))  # fmt: skip
    ranked = connections.assign(_i=~interest.to_numpy(bool)).sort_values(["_i", "start_ns"])
    return ranked.head(MAX_ROWS).drop(columns="_i").sort_values("start_ns").reset_index(drop=True)


def _error_times(data: Any) -> dict[str, np.ndarray]:
    """connection -> times of its error responses (a code other than OK) and PublishErrors."""
    import pyarrow.compute as pc

    out: dict[str, list] = {}
    requests = data.table("requests")
    bad = requests[requests["code"].notna() & (requests["code"] != 1)]
    for connection, rows in bad.groupby("connection"):
        times = rows["response_ts_ns"].fillna(rows["request_ts_ns"]).dropna()
        out.setdefault(connection, []).append(times.to_numpy(np.int64))
    errored: dict[str, list] = {}  # (read a chunk at a time: one part a connection)
    for part in data.batches("publishes", ("connection", "outcome", "outcome_ts_ns")):
        rows = part.filter(pc.fill_null(pc.equal(part["outcome"], "errored"), False))
        if not rows.num_rows:
            continue
        for connection, mine in rows.to_pandas().groupby("connection"):
            errored.setdefault(connection, []).append(mine["outcome_ts_ns"].dropna()
                                                      .to_numpy(np.int64))  # fmt: skip
    for connection in sorted(errored):
        out.setdefault(connection, []).append(np.concatenate(errored[connection]))
    return {c: np.concatenate(parts) for c, parts in out.items()}


def _times(anomalies: Any, connection: str) -> np.ndarray:
    return anomalies[anomalies["connection"] == connection]["ts_ns"].dropna().to_numpy(np.int64)


def _thinned(times: np.ndarray) -> np.ndarray:
    """At most MARKS_PER_ROW positions (marks closer than a pixel are one mark)."""
    if len(times) <= MARKS_PER_ROW:
        return times
    low, high = int(times.min()), int(times.max())
    width = max((high - low) // MARKS_PER_ROW, 1)
    return np.unique((times - low) // width) * width + low


def _label(row: Any) -> str:
    user = f" {row.user}" if isinstance(row.user, str) else ""
    return f"{short_connection(row.connection)}{user}"

