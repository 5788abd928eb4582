"""Latency summaries in the shape users know from PerfTest and Wireshark's SRT tables."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PERCENTILES = (50, 75, 95, 99)


def summarize_ms(values_ms: Sequence[float]) -> dict[str, float | None]:
    """min, p50, p75, p95, p99, max of a sample in ms (linear interpolation, as pandas)."""
    if len(values_ms) == 0:
        return {"min_ms": None, **{f"p{p}_ms": None for p in PERCENTILES}, "max_ms": None}
    arr = np.asarray(values_ms, dtype=np.float64)
    qs = np.percentile(arr, PERCENTILES)
    out: dict[str, float | None] = {"min_ms": float(arr.min())}
    out.update({f"p{p}_ms": float(q) for p, q in zip(PERCENTILES, qs)})
    out["max_ms"] = float(arr.max())
    return out
