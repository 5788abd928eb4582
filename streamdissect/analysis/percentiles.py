"""Latency summaries in the shape users know from PerfTest and Wireshark's SRT tables."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

PERCENTILES = (50, 75, 95, 99)


def summarize_ms(values_ms: Sequence[float]) -> dict[str, float | None]:
    """min, p50, p75, p95, p99, max of a sample in ms (linear interpolation, as pandas)."""
    if len(values_ms) == 0:
        return {"min_ms": None, **{f"p{p}_ms": None for p in PERCENTILES}, "max_ms": None}
    arr = np.sort(np.asarray(values_ms, dtype=np.float64))
    out: dict[str, float | None] = {"min_ms": float(arr.min())}
    out.update({f"p{p}_ms": q for p, q in zip(PERCENTILES, percentiles(arr, PERCENTILES))})
    out["max_ms"] = float(arr.max())
    return out


def percentiles(ordered: np.ndarray, points: Sequence[float]) -> list[float]:
    """numpy.percentile's default ("linear") of a sorted float sample, to the last bit.
    Its own first call imports numpy.ma (~15 ms of the CLI's start), for a few lines."""
    last = len(ordered) - 1
    if math.isnan(ordered[last]):  # (NaN sorts last, and makes every percentile NaN)
        return [math.nan] * len(points)
    values = []
    for p in points:
        at = last * (p / 100)
        below = math.floor(at) if at < last else last
        a, b = float(ordered[below]), float(ordered[min(below + 1, last)])
        t = at - below
        # numpy's lerp: from the nearer end, which keeps the result within [a, b]
        values.append(a + (b - a) * t if t < 0.5 else b - (b - a) * (1 - t))
    return values
