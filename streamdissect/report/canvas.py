"""What every figure shares: a matplotlib Figure made without pyplot (no global state, no
window: safe in a script, a notebook or a thread), wall-clock time axes, and the note a
figure shows when its table has nothing to draw."""

from __future__ import annotations

from datetime import UTC, tzinfo
from typing import Any

from matplotlib.figure import Figure

WIDTH = 10.0  # inches; 100 dpi in the HTML report: 1000 pixels
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf")  # fmt: skip
MAX_SERIES = 8  # lines in one plot; the rest are left out and the figure says so
STALL_COLOR = "#d62728"


def new_figure(title: str, rows: int = 1, height: float = 3.8, sharex: bool = True,
               height_ratios: list[float] | None = None) -> tuple[Figure, list[Any]]:  # fmt: skip
    """A titled Figure and its axes (a list, one per row)."""
    fig = Figure(figsize=(WIDTH, height), layout="constrained")
    axes = fig.subplots(rows, 1, sharex=sharex, squeeze=False,
                        gridspec_kw={"height_ratios": height_ratios} if height_ratios else None)
    fig.suptitle(title, fontsize=12, fontweight="bold")
    return fig, [row[0] for row in axes]


def zone(local: bool) -> tzinfo:
    """UTC, or this machine's time zone."""
    if not local:
        return UTC
    from datetime import datetime

    return datetime.now().astimezone().tzinfo or UTC


def zone_label(tz: tzinfo | None) -> str:
    if tz is None or tz == UTC:
        return "UTC"
    from datetime import datetime

    return datetime.now(tz).strftime("UTC%z")


def time_axis(ax: Any, tz: tzinfo | None = None, label: bool = True) -> None:
    """Wall-clock dates on the x axis (concise: the date once, then times), in `tz`."""
    import matplotlib.dates as mdates

    tz = tz or UTC
    locator = mdates.AutoDateLocator(tz=tz, minticks=3, maxticks=9)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=tz))
    if label:
        ax.set_xlabel(f"capture time ({zone_label(tz)})")


def capture_time_axis(ax: Any, data: Any, tz: tzinfo | None = None) -> None:
    """time_axis, spanning the capture (so every time figure lines up with the others)."""
    from streamdissect.report.bins import to_time

    time_axis(ax, tz)
    if data.first_ns is not None and data.last_ns is not None:
        first, last = data.first_ns, max(data.last_ns, data.first_ns + 1_000)
        pad = (last - first) // 50
        ax.set_xlim(to_time([first - pad])[0], to_time([last + pad])[0])


def empty(ax: Any, message: str) -> None:
    """A plot with nothing to draw says why, in its middle."""
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes,
            fontsize=11, color="#555555", wrap=True)  # fmt: skip
    # (ticks hidden, not removed: an axis shared with another plot keeps its ticks there)
    ax.tick_params(axis="both", which="both", length=0, labelbottom=False, labelleft=False)
    for side in ax.spines.values():
        side.set_visible(False)


def note(fig: Figure, text: str) -> None:
    """A line under the plots (laid out with them): what was aggregated or left out."""
    fig.supxlabel(text, x=0.01, ha="left", fontsize=8, color="#555555")


def short_connection(name: str) -> str:
    """'127.0.0.1:55740-127.0.0.1:5552' -> ':55740→:5552' when both ends are this host, else
    the client end."""
    client, _, server = str(name).partition("-")
    c_host, _, c_port = client.rpartition(":")
    s_host, _, s_port = server.rpartition(":")
    if c_host == s_host:
        return f":{c_port}→:{s_port}"
    return client
