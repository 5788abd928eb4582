"""Latency summaries in the shape users know from PerfTest and Wireshark's SRT tables."""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence

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
    return _percentiles(lambda i: float(ordered[i]), len(ordered), points)


def _percentiles(at_rank: Callable[[int], float], n: int, points: Sequence[float]) -> list[float]:
    """percentiles() of a sorted sample of n values, the i-th given by at_rank(i)."""
    last = n - 1
    if math.isnan(at_rank(last)):  # (NaN sorts last, and makes every percentile NaN)
        return [math.nan] * len(points)
    values = []
    for p in points:
        at = last * (p / 100)
        below = math.floor(at) if at < last else last
        a, b = at_rank(below), at_rank(min(below + 1, last))
        t = at - below
        # numpy's lerp: from the nearer end, which keeps the result within [a, b]
        values.append(a + (b - a) * t if t < 0.5 else b - (b - a) * (1 - t))
    return values


class CountedSample:
    """A sample of floats kept as its distinct values and how many times each came, for
    summarize_ms's figures exactly (the same to the last bit) in memory that grows with the
    distinct values, not with the sample: publish-to-confirm lags are differences of capture
    times (whole microseconds in a pcap), a few thousand values over millions of confirms,
    where an array of them grew 8 bytes a confirm for as long as a live capture ran."""

    FOLD = 1 << 16  # values gathered before they are counted in

    def __init__(self) -> None:
        self._pending = array("d")
        self._values = np.empty(0, dtype=np.float64)  # distinct, ascending
        self._counts = np.empty(0, dtype=np.int64)

    def extend(self, values: Iterable[float]) -> None:
        self._pending.extend(values)
        if len(self._pending) >= self.FOLD:
            self._fold()

    def extend_array(self, values: np.ndarray) -> None:
        self.extend(array("d", np.asarray(values, dtype=np.float64).tobytes()))

    def _fold(self) -> None:
        if not self._pending:
            return
        pending = np.frombuffer(self._pending, dtype=np.float64)
        values = np.concatenate((self._values, pending))
        counts = np.concatenate((self._counts, np.ones(len(pending), dtype=np.int64)))
        self._values, where = np.unique(values, return_inverse=True)
        self._counts = np.bincount(where, weights=counts).astype(np.int64)
        self._pending = array("d")

    def __len__(self) -> int:
        return int(self._counts.sum()) + len(self._pending)

    def __iter__(self) -> Iterator[float]:
        """The sample's values in ascending order."""
        self._fold()
        return iter(np.repeat(self._values, self._counts).tolist())

    def summary(self) -> dict[str, float | None]:
        """summarize_ms of the sample."""
        self._fold()
        if not len(self._values):
            return summarize_ms(())
        ends = np.cumsum(self._counts)  # (the rank after each distinct value's last)
        values = self._values

        def at_rank(i: int) -> float:
            return float(values[np.searchsorted(ends, i, side="right")])

        nan = math.isnan(values[-1])  # (NaN sorts last, and makes min and max NaN in numpy)
        out: dict[str, float | None] = {"min_ms": math.nan if nan else float(values[0])}
        out.update({f"p{p}_ms": q for p, q in zip(PERCENTILES, _percentiles(
            at_rank, int(ends[-1]), PERCENTILES))})  # fmt: skip
        out["max_ms"] = float(values[-1])
        return out
