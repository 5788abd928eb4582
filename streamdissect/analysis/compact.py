"""Table rows kept as columns: a large table (a Deliver or a publishing id a row) in a
fraction of the memory of a list of tuples, read back as the same tuples. Within
`spilling(n)`, the tables made keep their last n chunks in memory and the older ones in a
temporary file (a live analysis, whose tables grow for as long as the capture runs)."""

from __future__ import annotations

import contextlib
import pickle
import tempfile
from array import array
from collections.abc import Iterator

_SPILL_AFTER: list[int | None] = [None]  # chunks kept in memory by the tables made now


@contextlib.contextmanager
def spilling(after_chunks: int) -> Iterator[None]:
    """The CompactRows made within keep `after_chunks` chunks in memory, the rest on disk."""
    before = _SPILL_AFTER[0]
    _SPILL_AFTER[0] = after_chunks
    try:
        yield
    finally:
        _SPILL_AFTER[0] = before


class _OnDisk(tuple):
    """Where a chunk was written: (offset, length) in the chunks' file."""


class _Chunks:
    """A table's chunks in order, each a list of columns; past `spill_after` in memory, the
    oldest are pickled to an unnamed temporary file and read back when asked for."""

    def __init__(self, spill_after: int | None) -> None:
        self._items: list = []
        self.sizes: list[int] = []  # rows in each chunk
        self._spill_after = spill_after
        self._in_memory: list[int] = []  # indexes of the chunks in memory, oldest first
        self._file = None

    def append(self, chunk: list) -> None:
        self._items.append(chunk)
        self.sizes.append(len(chunk[0][0]) if chunk else 0)
        if self._spill_after is None:
            return
        self._in_memory.append(len(self._items) - 1)
        if len(self._in_memory) > self._spill_after:
            oldest = self._in_memory.pop(0)
            if self._file is None:
                # (unnamed: gone when the table is, or the process)
                self._file = tempfile.TemporaryFile(prefix="streamdissect-rows-")  # noqa: SIM115
            data = pickle.dumps(self._items[oldest], protocol=pickle.HIGHEST_PROTOCOL)
            offset = self._file.seek(0, 2)
            self._file.write(data)
            self._items[oldest] = _OnDisk((offset, len(data)))

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> list:
        item = self._items[index]
        if item.__class__ is not _OnDisk:
            return item
        offset, length = item
        self._file.seek(offset)
        return pickle.loads(self._file.read(length))

    def __iter__(self) -> Iterator[list]:
        return (self[i] for i in range(len(self._items)))


class CompactRows:
    """A list of equal-length tuples kept, CHUNK rows at a time, as one array per column
    (8 bytes a value, plus a None mask when needed) wherever a column's values fit one;
    read back as the same tuples, by index or slice."""

    CHUNK = 4096

    def __init__(self, width: int) -> None:
        self._width = width
        # per chunk: [(values, None mask or None)] by column
        self._chunks = _Chunks(_SPILL_AFTER[0])
        self._pending: list[tuple] = []
        self._n = 0

    def append(self, row: tuple) -> None:
        self._pending.append(row)
        self._n += 1
        if len(self._pending) == self.CHUNK:
            self._flush()

    def extend(self, rows: list[tuple]) -> None:
        """append() for each row, without a call a row."""
        for at in range(0, len(rows), self.CHUNK):
            part = rows[at : at + self.CHUNK]
            room = self.CHUNK - len(self._pending)
            self._pending += part[:room]
            self._n += len(part)
            if len(self._pending) == self.CHUNK:
                self._flush()
                self._pending = part[room:]

    def extend_columns(self, columns: list[tuple], n: int) -> None:
        """`n` rows given as columns, each (numpy array or list, None mask or None): kept as
        one chunk, as append() would keep them (after the rows pending)."""
        if self._pending:
            self._flush()
        self._chunks.append([_numpy_column(values, none) for values, none in columns])
        self._n += n

    def _flush(self) -> None:
        """The pending rows as a chunk of columns."""
        self._chunks.append([_column(c) for c in zip(*self._pending)])
        self._pending = []

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def column_slices(self, start: int, stop: int) -> list:
        """Rows [start, stop) as columns, each a sequence of its values as _rows gives them
        (an array of the array module where a chunk keeps the column as one, without a
        None; else a list or tuple), for a reader that goes column by column."""
        parts: list[list] = [[] for _ in range(self._width)]
        at = 0
        for index, size in enumerate(self._chunks.sizes):
            if at + size > start and at < stop:
                lo, hi = max(start - at, 0), min(stop - at, size)
                for part, (values, none) in zip(parts, self._chunks[index]):
                    piece = values[lo:hi]
                    if none is not None:
                        piece = [None if n else v for v, n in zip(piece, none[lo:hi])]
                    part.append(piece)
            at += size
        if stop > at:
            pending = self._pending[max(start - at, 0) : stop - at]
            for part, column in zip(parts, zip(*pending)):
                part.append(column)
        return [part[0] if len(part) == 1 else [v for piece in part for v in piece]
                for part in parts]  # fmt: skip

    def _rows(self, start: int, stop: int) -> list[tuple]:
        return list(zip(*self.column_slices(start, stop)))

    def columns(self) -> list[tuple]:
        """The table as columns, for a DataFrame: per column (numpy array, None mask or None)
        where every chunk kept it as one kind of array, else (list of the values, None)."""
        import numpy as np  # (only the pandas tables ask)

        if self._pending:  # (a shorter last chunk: reading by index allows for it)
            self._flush()
        out = []
        chunks = list(self._chunks)  # (once each, when some were on disk)
        for i in range(self._width):
            parts = [chunk[i] for chunk in chunks]
            codes = {values.typecode if isinstance(values, array) else None
                     for values, _ in parts}  # fmt: skip
            if len(codes) == 1 and None not in codes:
                code = codes.pop()
                data = np.concatenate([np.frombuffer(v, dtype="i8" if code == "q" else "f8")
                                       for v, _ in parts])  # fmt: skip
                masks = [np.frombuffer(none, dtype=bool) if none is not None
                         else np.zeros(len(v), dtype=bool) for v, none in parts]  # fmt: skip
                mask = np.concatenate(masks) if any(n is not None for _, n in parts) else None
                out.append((data, mask))
                continue
            values: list = []
            for part, none in parts:
                part = part.tolist() if isinstance(part, array) else list(part)
                values += part if none is None else [None if n else v for v, n in zip(part, none)]
            out.append((values, None))
        return out

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(self._n)
            rows = self._rows(start, stop)
            return rows if step == 1 else rows[::step]
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError(index)
        return self._rows(index, index + 1)[0]

    def __iter__(self) -> Iterator[tuple]:
        for at in range(0, self._n, self.CHUNK):
            yield from self._rows(at, min(at + self.CHUNK, self._n))


def _column(values: tuple) -> tuple:
    """(values as an array when they all fit one, else as given; None mask or None)."""
    kinds = set(map(type, values))
    none = None
    if type(None) in kinds:
        kinds.discard(type(None))
        none = bytes([v is None for v in values])
    code = "q" if kinds == {int} else "d" if kinds == {float} else None
    if code is None:
        return values, None
    try:
        filler = 0 if code == "q" else 0.0
        return array(code, values if none is None else [filler if v is None else v
                                                        for v in values]), none  # fmt: skip
    except OverflowError:
        return values, None


def _numpy_column(values, none) -> tuple:
    """_column's (values, None mask) for a column given as a numpy array (or a list) and a
    boolean mask of its missing values."""
    import numpy as np

    has_none = none is not None and bool(np.any(none))
    mask = bytes(np.asarray(none, dtype=bool)) if has_none else None
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        if values.dtype.kind == "i" or not len(values) or int(values.max()) < 1 << 63:
            kept = np.where(none, 0, values) if has_none else values
            return array("q", kept.astype(np.int64).tobytes()), mask
    elif isinstance(values, np.ndarray) and values.dtype.kind == "f":
        kept = np.where(none, 0.0, values) if has_none else values
        return array("d", kept.astype(np.float64).tobytes()), mask
    if has_none and 0 not in mask:  # (every value missing: a Deliver's crc_ok in a report)
        return (None,) * len(mask), None
    items = values.tolist() if isinstance(values, np.ndarray) else list(values)
    if has_none:
        items = [None if n else v for v, n in zip(items, mask)]
    return tuple(items), None
