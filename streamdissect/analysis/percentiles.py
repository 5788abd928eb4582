"""Latency summaries in the shape users know from PerfTest and Wireshark's SRT tables."""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Sequence

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


class ExactSample:
    """A sample of floats for exact percentiles in memory that grows with its distinct
    values, not its size: the values gathered in a buffer, folded into (sorted distinct
    values, their counts) once it holds FOLD values and as many as there are distinct ones
    (so that folding costs O(n log n) in all, however many values are distinct). Its percentiles are those of the whole sample,
    to the last bit (the same order statistics, interpolated the same way). A capture's
    times are whole microseconds (or nanoseconds), so a lag takes at most one distinct value
    a microsecond (nanosecond) of its range."""

    FOLD = 1 << 16

    __slots__ = ("_buffer", "_counts", "_values")

    def __init__(self) -> None:
        self._buffer = array("d")
        self._values = np.zeros(0, dtype=np.float64)
        self._counts = np.zeros(0, dtype=np.int64)

    def extend(self, values) -> None:
        self._buffer.extend(values)
        if len(self._buffer) >= self.FOLD and len(self._buffer) >= len(self._values):
            self._fold()

    def append(self, value: float) -> None:
        self._buffer.append(value)
        if len(self._buffer) >= self.FOLD and len(self._buffer) >= len(self._values):
            self._fold()

    def _fold(self) -> None:
        new = np.frombuffer(self._buffer, dtype=np.float64)
        ordered = np.sort(new)
        if (len(ordered) and np.isnan(ordered[-1])) or (
                len(self._values) and np.isnan(self._values[-1])):  # fmt: skip
            self._fold_unique(new)
        else:  # (the buffer's distinct values, merged with the ones kept: no sort of both)
            values, counts = _runs(ordered, None)
            # (-0.0 and 0.0 are one value here, as they sort as one: the first seen stands
            # for both, as np.unique's stable order of the values kept, then the buffer's)
            zeros = np.flatnonzero(new == 0)
            if len(zeros):
                values[values == 0] = new[zeros[0]]
            values = np.concatenate((self._values, values))
            order = np.argsort(values, kind="stable")
            self._values, self._counts = _runs(values[order],
                                               np.concatenate((self._counts, counts))[order])
        self._buffer = array("d")

    def _fold_unique(self, new: np.ndarray) -> None:
        """_fold by np.unique, which makes every NaN one value (equal_nan)."""
        values = np.concatenate((self._values, new))
        counts = np.concatenate((self._counts, np.ones(len(new), dtype=np.int64)))
        self._values, where = np.unique(values, return_inverse=True)
        self._counts = np.bincount(where.ravel(), weights=counts,
                                   minlength=len(self._values)).astype(np.int64)  # fmt: skip

    def __len__(self) -> int:
        return int(self._counts.sum()) + len(self._buffer)

    def distinct(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted distinct values, their counts)."""
        if self._buffer:
            self._fold()
        return self._values, self._counts

    def __iter__(self):
        """The values in ascending order."""
        values, counts = self.distinct()
        return iter(np.repeat(values, counts).tolist())


def _runs(ordered: np.ndarray, counts: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of a sorted array without NaN (the first of each run of equal
    ones) and each one's count: its run's length, or the sum of its run's `counts`."""
    if not len(ordered):
        return ordered, np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    if counts is None:
        return ordered[starts], np.diff(np.r_[starts, len(ordered)])
    return ordered[starts], np.add.reduceat(counts, starts)


def summarize_sample(sample: ExactSample) -> dict[str, float | None]:
    """summarize_ms of an ExactSample's values."""
    values, counts = sample.distinct()
    if not len(values):
        return summarize_ms(())
    ends = np.cumsum(counts)  # (the order statistic k is values[first end > k])
    at_rank = lambda k: values[int(np.searchsorted(ends, k, side="right"))]
    lowest = math.nan if math.isnan(values[-1]) else float(values[0])  # (as numpy's min)
    out: dict[str, float | None] = {"min_ms": lowest}
    found = ranked_percentiles(at_rank, int(ends[-1]), PERCENTILES)
    out.update({f"p{p}_ms": q for p, q in zip(PERCENTILES, found)})
    out["max_ms"] = float(values[-1])
    return out


def percentiles(ordered: Sequence[float], points: Sequence[float]) -> list[float]:
    """numpy.percentile's default ("linear") of a sorted float sample, to the last bit.
    (numpy's own first call imports numpy.ma, ~15 ms of the CLI's start, for a few lines.)"""
    return ranked_percentiles(ordered.__getitem__, len(ordered), points)


def ranked_percentiles(at_rank: Callable[[int], float], size: int,
                       points: Sequence[float]) -> list[float]:  # fmt: skip
    """percentiles() of a sorted sample of `size` values that is not held as one: `at_rank(k)`
    gives its k-th smallest value (k from 0), e.g. from distinct values and their counts."""
    last = size - 1
    if math.isnan(at_rank(last)):  # (NaN sorts last, and makes every percentile NaN)
        return [math.nan] * len(points)
    values = []
    for p in points:
        at = last * (p / 100)
        below = math.floor(at) if at < last else last
        a, b = float(at_rank(below)), float(at_rank(min(below + 1, last)))
        t = at - below
        # numpy's lerp: from the nearer end, which keeps the result within [a, b]
        values.append(a + (b - a) * t if t < 0.5 else b - (b - a) * (1 - t))
    return values
