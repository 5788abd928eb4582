"""One series of a table (a publisher's backlog, a subscription's credit balance) read a
chunk at a time: its size and time span from a first pass, then its values as they are
(a short series) or per time bin (bins.binned over a few bins at a time), so that a
capture ten times as long is drawn in the same memory, and to the same values."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from streamdissect.report.bins import binned

# Values held at once when binning: the bins are read in groups of at most this many values
# (one pass over the table a group; a single bin of more is read alone).
PASS_ROWS = 1 << 16


class Series:
    """The rows of `table` that `where(chunk)` (a boolean mask) keeps, as (capture time in
    ns, value as float) pairs in the table's order."""

    def __init__(self, data: Any, table: str, ts: str, value: str,
                 where: Callable[[Any], Any]) -> None:  # fmt: skip
        self._data, self._table, self._ts, self._value, self._where = (data, table, ts, value,
                                                                      where)  # fmt: skip
        self.count = 0
        self.first_ns = self.last_ns = 0
        for ts_ns, _ in self.parts():
            if len(ts_ns):
                low, high = int(ts_ns.min()), int(ts_ns.max())
                self.first_ns = low if not self.count else min(self.first_ns, low)
                self.last_ns = high if not self.count else max(self.last_ns, high)
                self.count += len(ts_ns)

    def parts(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for chunk in self._data.chunks(self._table):
            rows = chunk[np.asarray(self._where(chunk), dtype=bool)]
            yield rows[self._ts].to_numpy(np.int64), rows[self._value].to_numpy(float)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Every (time, value) at once (for a short series)."""
        parts = list(self.parts())
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        return np.concatenate([t for t, _ in parts]), np.concatenate([v for _, v in parts])

    def binned(self, width: int, stats: tuple[str, ...]) -> Any:
        """bins.binned of the whole series, read a group of bins at a time."""
        import pandas as pd

        counts: Counter = Counter()
        for ts_ns, _ in self.parts():
            bins, n = np.unique(ts_ns // width, return_counts=True)
            counts.update(dict(zip(bins.tolist(), n.tolist())))
        results = [binned(*self._within(low, high, width), width, stats)
                   for low, high in _groups(sorted(counts.items()))]  # fmt: skip
        if len(results) == 1:
            return results[0]
        return pd.concat(results, ignore_index=True)

    def _within(self, low: int, high: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        """The (time, value) pairs of bins low..high (in order)."""
        times, values = [], []
        for ts_ns, part in self.parts():
            bins = ts_ns // width
            keep = (bins >= low) & (bins <= high)
            times.append(ts_ns[keep])
            values.append(part[keep])
        return np.concatenate(times), np.concatenate(values)


def _groups(counts: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """Consecutive runs of bins of at most PASS_ROWS values in all: (first bin, last bin)."""
    start, last, held = None, None, 0
    for bin_, n in counts:
        if start is not None and held + n > PASS_ROWS:
            yield start, last
            start, held = None, 0
        if start is None:
            start = bin_
        held += n
        last = bin_
    if start is not None:
        yield start, last


def same_key(part: Any, columns: tuple[str, ...], key: tuple) -> np.ndarray:
    """The rows of `part` whose `columns` hold `key` (a missing value matching a missing
    one, as a groupby with dropna=False groups them)."""
    from streamdissect.report.text import missing

    mask = np.ones(len(part), dtype=bool)
    for column, value in zip(columns, key):
        values = part[column]
        same = values.isna() if missing(value) else (values == value)
        mask &= np.asarray(same.fillna(False) if hasattr(same, "fillna") else same, dtype=bool)
    return mask
