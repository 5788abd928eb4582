"""Time series made small enough to draw: a capture of three frames is drawn point by point,
one of three million as a few hundred time bins (never millions of points)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

# Up to this many points a series is drawn as it is; above it, in BINS time bins.
MAX_POINTS = 2_000
BINS = 400


def as_ns(values) -> np.ndarray:
    """A column of capture times (nullable Int64) as int64 nanoseconds (no missing ones:
    callers drop them first)."""
    return np.asarray(values, dtype=np.int64)


def to_time(ns) -> np.ndarray:
    """Nanoseconds since the epoch as numpy datetime64 (UTC), what matplotlib draws as
    dates."""
    return as_ns(ns).astype("datetime64[ns]")


def bin_width(first_ns: int, last_ns: int, bins: int = BINS) -> int:
    """A round bin width in ns (1, 2 or 5 times a power of ten) giving at most `bins` bins
    over the span."""
    span = max(last_ns - first_ns, 1)
    raw = span / bins
    power = 10 ** int(np.floor(np.log10(raw))) if raw >= 1 else 1
    for step in (1, 2, 5, 10):
        if step * power >= raw:
            return int(step * power)
    return int(10 * power)  # (not reached)


def describe_width(ns: int) -> str:
    """A bin width for a legend: '200 ms', '5 s', '2 min'."""
    if ns >= 60_000_000_000 and ns % 60_000_000_000 == 0:
        return f"{ns // 60_000_000_000} min"
    if ns >= 1_000_000_000:
        return f"{ns / 1e9:g} s"
    if ns >= 1_000_000:
        return f"{ns / 1e6:g} ms"
    return f"{ns / 1e3:g} µs"


def binned(ts_ns, values, width: int, stats: tuple[str, ...]) -> pd.DataFrame:
    """Per time bin of `width` ns (bins with values only): `time` (the bin's start, as
    datetime64) and each of `stats` of the values: count, sum, min, max, mean, or pNN (a
    percentile, linear interpolation)."""
    import pandas as pd

    ts = as_ns(ts_ns)
    frame = pd.DataFrame({"bin": ts // width, "v": np.asarray(values, dtype=np.float64)})
    groups = frame.groupby("bin", sort=True)["v"]
    out = {}
    for stat in stats:
        if stat.startswith("p"):
            out[stat] = groups.quantile(int(stat[1:]) / 100)
        else:
            out[stat] = getattr(groups, stat)()
    result = pd.DataFrame(out)
    result["time"] = to_time(result.index.to_numpy(dtype=np.int64) * width)
    return result.reset_index(drop=True)


def ecdf(values, points: int = 1_000) -> tuple[np.ndarray, np.ndarray]:
    """(x, fraction <= x) of the values: every value when few, else `points` quantiles
    (the smallest and largest always among them)."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = len(x)
    if n <= MAX_POINTS:  # (from 0 at the smallest value, so one value is a step too)
        return np.r_[x[:1], x], np.r_[0.0, np.arange(1, n + 1) / n]
    fractions = np.linspace(0.0, 1.0, points)
    return np.r_[x[:1], np.quantile(x, fractions)], np.r_[0.0, fractions]


def merge_spans(starts, ends, gap_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Intervals (sorted by start) with those closer than `gap_ns` joined: thousands of
    stalls become the bands a reader can tell apart."""
    starts, ends = as_ns(starts), as_ns(ends)
    if not len(starts):
        return starts, ends
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    new = np.r_[True, starts[1:] > reach[:-1] + gap_ns]
    group = np.cumsum(new) - 1
    merged_ends = np.zeros(group[-1] + 1, dtype=np.int64)
    np.maximum.at(merged_ends, group, ends)
    return starts[new], merged_ends
