"""The series of one large table (each publisher's backlog, each subscription's lag and
latency) read together, a chunk and only the columns they need at a time, so that a
capture ten times as long is drawn in the same memory, to the same values, in a few passes
over the table whatever the number of series:

1. `SeriesSet(...)`: per key (the `keys` columns' values, missing matching missing) and per
   value, its number of values, first and last time and smallest and largest value: what
   chooses the series drawn and fixes a long one's bin width (bins.bin_width);
2. `read(wanted)`: a short series' (time, value) pairs as they are, a long one's values per
   time bin counted;
3. then a long series' values per bin, bins.binned over the values of whole bins in the
   table's order (the same values in the same order as binning the series at once, so the
   same figures to the byte), at most PASS_ROWS values held at once: a bin is taken in when
   its first value is read and there is room for all of its values, and binned once they
   are all read. A table in time order is read once; the bins a pass had no room for are
   read by the next one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamdissect.report.bins import BINS, MAX_POINTS, bin_width, binned

# Values of the bins taken in held at once (of every series of the set); a single bin of
# more is read alone.
PASS_ROWS = 1 << 16


@dataclass
class Stats:
    """One series' (key, value) figures from the first pass."""

    count: int = 0
    first_ns: int = 0
    last_ns: int = 0
    low: float = np.inf
    high: float = -np.inf


@dataclass(frozen=True)
class Wanted:
    """A series to read: `how` is "points" (its pairs when at most MAX_POINTS, else binned
    with `stats`), "all" (its pairs however many) or "bins" (the bins holding a value, of
    bin_width over its span)."""

    key: tuple
    value: str
    how: str = "points"
    stats: tuple[str, ...] = ()


@dataclass
class Drawn:
    """A series read: its pairs (`ts_ns`, `values`), or its bins (`width`, and `per_bin`
    bins.binned's frame, or `bins` the start of every bin holding a value)."""

    ts_ns: np.ndarray | None = None
    values: np.ndarray | None = None
    width: int | None = None
    per_bin: Any = None
    bins: np.ndarray | None = None


# value name -> its column (a name), or a function of a chunk giving it (a null: no value)
Values = dict[str, str | Callable[[Any], Any]]


class SeriesSet:
    """The series of `table`: rows with a time (`ts`), per value of `keys`, each of `values`
    (name -> a column, or a function of a chunk, a pyarrow Table with `columns`, giving
    that value's column: a row's missing value is not in the series)."""

    def __init__(self, data: Any, table: str, ts: str, keys: tuple[str, ...], values: Values,
                 columns: tuple[str, ...] = ()) -> None:  # fmt: skip
        self._data, self._table, self._ts, self._keys = data, table, ts, keys
        self._values = {name: (lambda part, c=v: part[c]) if isinstance(v, str) else v
                        for name, v in values.items()}  # fmt: skip
        named = (v for v in values.values() if isinstance(v, str))
        self._columns = tuple(dict.fromkeys((ts, *keys, *named, *columns)))
        self.rows: dict[tuple, int] = {}  # key -> its rows with a time, in the order first seen
        self.stats: dict[tuple[tuple, str], Stats] = {}
        for part in self._parts():
            self._summed(part)

    def _parts(self) -> Iterator[Any]:
        import pyarrow.compute as pc

        for part in self._data.batches(self._table, self._columns):
            part = part.filter(pc.is_valid(part[self._ts]))
            if part.num_rows:
                yield part

    def _summed(self, part: Any) -> None:
        import pyarrow.compute as pc

        found, codes = _grouped(part, self._keys)
        for key, n in zip(found, np.bincount(codes, minlength=len(found)).tolist()):
            self.rows[key] = self.rows.get(key, 0) + n
        ts = part[self._ts].to_numpy()
        for name, compute in self._values.items():
            value = compute(part)
            valid = pc.is_valid(value).to_numpy(zero_copy_only=False)
            if not valid.any():
                continue
            values = pc.drop_null(value).to_numpy(zero_copy_only=False)
            for g, n, first, last, low, high in _per_group(codes[valid], ts[valid], values):
                s = self.stats.setdefault((found[g], name), Stats())
                s.first_ns = first if not s.count else min(s.first_ns, first)
                s.last_ns = last if not s.count else max(s.last_ns, last)
                s.count += n
                s.low, s.high = min(s.low, low), max(s.high, high)

    def of(self, key: tuple, value: str) -> Stats:
        """The figures of one series (none: a Stats of no values)."""
        return self.stats.get((key, value)) or Stats()

    def read(self, wanted: list[Wanted]) -> dict[Wanted, Drawn]:
        """Each wanted series, read together (see the module's docstring)."""
        readers = {w: _Reader(w, self.of(w.key, w.value)) for w in wanted}
        if not readers:
            return {}
        for part in self._parts():
            for w, pairs in self._pairs(part, readers).items():
                readers[w].take(*pairs)
        long = [r for r in readers.values() if r.left]
        while long:  # (once, for a table in time order)
            room = _Room(long)
            for part in self._parts():
                for w, pairs in self._pairs(part, {r.wanted: r for r in long}).items():
                    readers[w].take_bins(*pairs, room)
            for r in long:  # (every bin taken in is read whole by now)
                r.taken = dict.fromkeys(r.taken, 0)
                r.bin_read(room)
                r.refused = set()
            long = [r for r in long if r.left]
        return {w: r.drawn() for w, r in readers.items()}

    def _pairs(self, part: Any, readers: dict) -> dict[Wanted, tuple[np.ndarray, np.ndarray]]:
        """Each series' (times, values) in this chunk."""
        import pyarrow.compute as pc

        masks: dict[tuple, Any] = {}
        values: dict[str, Any] = {}
        out = {}
        for w in readers:
            if w.key not in masks:
                masks[w.key] = _same_key(part, self._keys, w.key)
            if w.value not in values:
                values[w.value] = self._values[w.value](part)
            value = values[w.value]
            mask = pc.and_(masks[w.key], pc.is_valid(value))
            ts = pc.filter(part[self._ts], mask).to_numpy()
            out[w] = ts, pc.filter(value, mask).to_numpy(zero_copy_only=False).astype(np.float64)
        return out


def keys_in(data: Any, table: str, columns: tuple[str, ...]) -> list[tuple]:
    """The distinct values of `columns` in `table`'s rows (missing ones None), in the order
    first seen (the key columns read alone, a chunk at a time)."""
    seen: dict[tuple, None] = {}
    for part in data.batches(table, columns):
        seen.update(dict.fromkeys(_grouped(part, columns)[0]))
    return list(seen)


def _grouped(part: Any, columns: tuple[str, ...]) -> tuple[list[tuple], np.ndarray]:
    """The distinct values of `columns` in a chunk (missing ones None) in the order first
    seen, and each row's index among them. (numpy, not pyarrow's group_by: its Acero
    library added 7 MB to the report's peak.)"""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = part.num_rows
    if not columns or not n:
        return ([()] if n else []), np.zeros(n, dtype=np.int64)
    numbers, names = [], []  # (per column: its values or their codes, and whether missing)
    for column in columns:
        values = part[column].combine_chunks()
        if pa.types.is_integer(values.type):
            numbers.append(pc.fill_null(values, 0).to_numpy().astype(np.int64))
            names.append(None)
        else:
            values = pc.dictionary_encode(values)
            numbers.append(pc.fill_null(values.indices, 0).to_numpy().astype(np.int64))
            names.append(values.dictionary.to_pylist())
        numbers.append(pc.is_null(values).to_numpy(zero_copy_only=False).astype(np.int64))
    found, first, inverse = np.unique(np.stack(numbers, axis=1), axis=0, return_index=True,
                                      return_inverse=True)  # fmt: skip
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    keys = [tuple(None if row[2 * i + 1] else row[2 * i] if known is None
                  else known[row[2 * i]] for i, known in enumerate(names))
            for row in found[order].tolist()]  # fmt: skip
    return keys, rank[inverse.ravel()]


def _per_group(codes: np.ndarray, ts: np.ndarray, values: np.ndarray) -> Iterator[tuple]:
    """Per group present (in the order of their codes): (code, rows, first and last time,
    smallest and largest value)."""
    order = np.argsort(codes, kind="stable")
    codes, ts, values = codes[order], ts[order], values[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    counts = np.diff(np.r_[starts, len(codes)])
    yield from zip(codes[starts].tolist(), counts.tolist(),
                   np.minimum.reduceat(ts, starts).tolist(), np.maximum.reduceat(ts, starts).tolist(),
                   np.minimum.reduceat(values, starts).tolist(),
                   np.maximum.reduceat(values, starts).tolist())  # fmt: skip


def _same_key(part: Any, columns: tuple[str, ...], key: tuple) -> Any:
    """The rows of `part` whose `columns` hold `key` (a missing value matching a missing
    one, as a group_by groups them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    mask = pa.array(np.ones(part.num_rows, dtype=bool))
    for column, value in zip(columns, key):
        same = (pc.is_null(part[column]) if value is None
                else pc.fill_null(pc.equal(part[column], value), False))  # fmt: skip
        mask = pc.and_(mask, same)
    return mask


class _Room:
    """The values of the bins taken in and not yet binned, of every series of a pass."""

    def __init__(self, readers: list[_Reader]) -> None:
        self.held = 0
        self._readers = readers

    def fits(self, need: int) -> bool:
        """Whether a bin of `need` values can be taken in now (the bins read whole binned
        first, when there is no room without)."""
        if not self.held or self.held + need <= PASS_ROWS:
            return True
        for reader in self._readers:
            reader.bin_read(self)
        return not self.held or self.held + need <= PASS_ROWS


@dataclass
class _Reader:
    """One wanted series as the passes read it."""

    wanted: Wanted
    stats: Stats
    width: int | None = None
    counts: dict = field(default_factory=dict)  # bin -> its values (a long series)
    parts: list = field(default_factory=list)  # (times, values) read
    taken: dict = field(default_factory=dict)  # bin -> values still to read (this pass)
    done: set = field(default_factory=set)  # bins binned
    refused: set = field(default_factory=set)  # bins left for the next pass
    results: list = field(default_factory=list)  # binned frames

    def __post_init__(self) -> None:
        w = self.wanted
        if w.how == "bins" or (w.how == "points" and self.stats.count > MAX_POINTS):
            self.width = bin_width(self.stats.first_ns, self.stats.last_ns, BINS)

    @property
    def left(self) -> bool:
        """Bins still to bin (a long series binned with stats)."""
        return self.wanted.how == "points" and self.width is not None and (
            len(self.done) < len(self.counts))  # fmt: skip

    def take(self, ts: np.ndarray, values: np.ndarray) -> None:
        """A chunk's pairs, in the first reading pass: kept, or counted per bin."""
        if self.width is None:
            self.parts.append((ts, values))
            return
        bins, n = np.unique(ts // self.width, return_counts=True)
        for b, k in zip(bins.tolist(), n.tolist()):
            self.counts[b] = self.counts.get(b, 0) + k

    def take_bins(self, ts: np.ndarray, values: np.ndarray, room: _Room) -> None:
        """A chunk's pairs in a binning pass: those of the bins taken in are kept."""
        if not len(ts):
            return
        bins = ts // self.width
        firsts = np.unique(bins, return_index=True)
        for b in firsts[0][np.argsort(firsts[1], kind="stable")].tolist():
            if b in self.taken or b in self.done or b in self.refused:
                continue
            need = self.counts[b]
            if not room.fits(need):
                self.refused.add(b)
                continue
            self.taken[b] = need
            room.held += need
        kept = np.isin(bins, np.fromiter(self.taken, dtype=np.int64, count=len(self.taken)))
        if kept.any():
            self.parts.append((ts[kept], values[kept]))
            for b, k in zip(*(x.tolist() for x in np.unique(bins[kept], return_counts=True))):
                self.taken[b] -= k

    def bin_read(self, room: _Room) -> None:
        """Bin the bins taken in whose values are all read, and let their values go."""
        whole = [b for b, left in self.taken.items() if not left]
        if not whole:
            return
        ts = np.concatenate([t for t, _ in self.parts])
        values = np.concatenate([v for _, v in self.parts])
        now = np.isin(ts // self.width, np.asarray(whole, dtype=np.int64))
        self.results.append(binned(ts[now], values[now], self.width, self.wanted.stats))
        self.parts = [(ts[~now], values[~now])] if not now.all() else []
        for b in whole:
            room.held -= self.counts[b]
            del self.taken[b]
        self.done.update(whole)

    def drawn(self) -> Drawn:
        if self.width is None:
            ts = np.concatenate([t for t, _ in self.parts]) if self.parts else np.zeros(0, np.int64)
            values = (np.concatenate([v for _, v in self.parts]) if self.parts
                      else np.zeros(0, np.float64))  # fmt: skip
            return Drawn(ts_ns=ts, values=values)
        if self.wanted.how == "bins":
            return Drawn(width=self.width,
                         bins=np.array(sorted(self.counts), dtype=np.int64) * self.width)  # fmt: skip
        import pandas as pd

        per_bin = (self.results[0] if len(self.results) == 1 else pd.concat(
            self.results, ignore_index=True).sort_values("time", kind="stable").reset_index(
            drop=True))  # fmt: skip
        return Drawn(width=self.width, per_bin=per_bin)
