"""Table rows kept as columns: a large table (a Deliver or a publishing id a row) in a
fraction of the memory of a list of tuples, read back as the same tuples. Past SPILL_BYTES
of chunks in memory, the chunks go to a temporary file (deleted when closed), so that a
capture ten times as long does not hold ten times the rows (pickled, a tuple column packed
first where compiled: _spilled)."""

from __future__ import annotations

import pickle
from array import array
from bisect import bisect_left
from collections.abc import Iterator

from streamdissect.capture.native import optional

# A chunk's columns made by compiled code (_columns.c: _column's way for each column of
# rows of one length), or None: the Python code below, the reference
compiled = optional("streamdissect.analysis._columns")


class CompactRows:
    """A list of equal-length tuples kept, CHUNK rows at a time, as one array per column
    (8 bytes a value, plus a None mask when needed) wherever a column's values fit one;
    read back as the same tuples, by index or slice. (A row may be given as a list that
    does not change again: it is read back as the tuple of its values.)"""

    CHUNK = 4096
    # chunks held in memory (about 8 bytes a value) before they are written to a temporary
    # file: a table of this size or less never touches the disk. Small: at 4 MiB (with the
    # chunks then joined to be written) a live analyze's RSS rose 18% in one step when its
    # tables first spilled (20,000 msg/s, minute 1); at 1 MiB, +2.9% over 5 minutes
    SPILL_BYTES = 1 << 20

    def __init__(self, width: int) -> None:
        self._width = width
        # per chunk: [(values, None mask or None)] by column, or a _Spilled one
        self._chunks: list = []
        self._pending: list[tuple] = []
        self._n = 0
        self._held = 0  # rows of the chunks in memory
        self._file = None  # the temporary file of the spilled chunks
        self._loaded: tuple = (None, None)  # (the spilled chunk read last, its columns)

    def append(self, row: tuple) -> None:
        self._pending.append(row)
        self._n += 1
        if len(self._pending) == self.CHUNK:
            self._flush()

    def extend(self, rows: list[tuple]) -> None:
        """append() for each row, without a call a row."""
        pending = self._pending
        if len(pending) + len(rows) < self.CHUNK:  # (a few rows: no chunk made)
            pending += rows
            self._n += len(rows)
            return
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
        self._kept(n)

    def _flush(self) -> None:
        """The pending rows as a chunk of columns (compiled, when built: _columns.c)."""
        made = None if compiled is None else compiled.columns(self._pending, array)
        self._chunks.append([_column(c) for c in zip(*self._pending)] if made is None else made)
        n = len(self._pending)
        self._pending = []
        self._kept(n)

    def _kept(self, n: int) -> None:
        """A chunk of `n` rows was made: past SPILL_BYTES in memory, the chunks in memory
        go to the temporary file."""
        self._held += n
        if self._held * self._width * 8 > self.SPILL_BYTES:
            self._spill_held()

    def spill(self) -> None:
        """Every row to the temporary file now, whatever their size: rows that will only be
        read from now on (a closed subscription's), among many such tables, are then not
        each held up to SPILL_BYTES."""
        if self._pending:
            self._flush()
        if self._held:
            self._spill_held()

    def _spill_held(self) -> None:
        """The chunks in memory to the temporary file, each as it is (none joined: no
        transient of SPILL_BYTES, whose many copies over a long run fragment the heap)."""
        if self._file is None:
            # (imported at the first spill: tempfile imports shutil and random, ~4 ms of
            # every start of `analyze`, for a capture large enough to spill alone)
            import tempfile

            # (open for the rows' life: closed by close())
            self._file = tempfile.TemporaryFile(prefix="streamdissect-rows-")  # noqa: SIM115
        f = self._file
        f.seek(0, 2)
        first = len(self._chunks)  # (the chunks held are the last ones)
        while first and self._chunks[first - 1].__class__ is not _Spilled:
            first -= 1
        for i in range(first, len(self._chunks)):
            chunk = self._chunks[i]
            data = _spilled(chunk)
            self._chunks[i] = _Spilled(f.tell(), len(data), len(chunk[0][0]))
            f.write(data)
        self._held = 0

    def replace(self, rows: dict[int, tuple]) -> None:
        """Rows changed after they were appended, by index (a call answered after its row
        was written): each chunk holding one made again from its rows (a spilled one
        written anew at the file's end)."""
        order = sorted(rows)
        at = done = 0
        for i, chunk in enumerate(self._chunks):
            size = chunk.rows if chunk.__class__ is _Spilled else len(chunk[0][0])
            mine = order[done : bisect_left(order, at + size, done)]
            done += len(mine)
            if mine:
                given = self._rows(at, at + size)
                for index in mine:
                    given[index - at] = rows[index]
                columns = [_column(c) for c in zip(*given)]
                if chunk.__class__ is _Spilled:
                    data = _spilled(columns)
                    self._file.seek(0, 2)
                    self._chunks[i] = _Spilled(self._file.tell(), len(data), size)
                    self._file.write(data)
                    self._loaded = (None, None)
                else:
                    self._chunks[i] = columns
            at += size
        for index in order[done:]:  # (the rest are pending rows)
            self._pending[index - at] = rows[index]

    def _chunk(self, i: int) -> list:
        """Chunk i's columns (read back from the file when it was spilled)."""
        chunk = self._chunks[i]
        if chunk.__class__ is not _Spilled:
            return chunk
        if self._loaded[0] is not chunk:
            self._loaded = (None, None)  # (the one read before is let go first)
            self._file.seek(chunk.offset)
            self._loaded = (chunk, pickle.loads(self._file.read(chunk.length)))
        return self._loaded[1]

    def close(self) -> None:
        """Delete the temporary file (the rows spilled are gone with it)."""
        if self._file is not None:
            self._file.close()

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
        for i, chunk in enumerate(self._chunks):
            size = chunk.rows if chunk.__class__ is _Spilled else len(chunk[0][0])
            if at + size > start and at < stop:
                lo, hi = max(start - at, 0), min(stop - at, size)
                for part, (values, none) in zip(parts, self._chunk(i)):
                    piece = values[lo:hi]
                    if none is not None:
                        missing = none[lo:hi]
                        piece = ([None] * len(missing) if 0 not in missing  # (all: quicker)
                                 else [None if n else v for v, n in zip(piece, missing)])
                    part.append(piece)
            at += size
        if stop > at:
            pending = self._pending[max(start - at, 0) : stop - at]
            for part, column in zip(parts, zip(*pending)):
                part.append(column)
        return [part[0] if len(part) == 1 else [v for piece in part for v in piece]
                for part in parts]  # fmt: skip

    def column_chunks(self, indices: list[int], size: int) -> Iterator[list[tuple]]:
        """Columns `indices` of the rows in order, at most `size` rows at a time (a chunk
        is not joined to the next): per column (numpy int64 or float64 array, numpy bool
        mask of the missing ones or None) where the chunk keeps it as one array, else (the
        values, None). A spilled chunk is read back one at a time; no value is made a
        Python object that was not one."""
        import numpy as np

        for i in range(len(self._chunks)):
            chunk = self._chunk(i)
            columns = []
            for k in indices:
                values, none = chunk[k]
                if isinstance(values, array):
                    values = np.frombuffer(values, dtype="i8" if values.typecode == "q" else "f8")
                    none = None if none is None else np.frombuffer(none, dtype=bool)
                columns.append((values, none))
            n = len(chunk[0][0])
            for at in range(0, n, size):
                yield [(values[at : at + size], None if none is None else none[at : at + size])
                       for values, none in columns]  # fmt: skip
        if self._pending:
            columns = list(zip(*self._pending))
            yield [(columns[k], None) for k in indices]

    def _rows(self, start: int, stop: int) -> list[tuple]:
        return list(zip(*self.column_slices(start, stop)))

    def columns(self) -> list[tuple]:
        """The table as columns, for a DataFrame: per column (numpy array, None mask or None)
        where every chunk kept it as one kind of array, else (list of the values, None)."""
        import numpy as np  # (only the pandas tables ask)

        if self._pending:  # (a shorter last chunk: reading by index allows for it)
            self._flush()
        chunks = [self._chunk(k) if chunk.__class__ is _Spilled else chunk
                  for k, chunk in enumerate(self._chunks)]  # fmt: skip
        out = []
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


def _spilled(chunk: list) -> bytes:
    """A chunk's columns as written to the temporary file: pickled, each column kept as a
    tuple packed first where compiled (_columns.packed: its distinct values and each one's
    code, texts as one block), read back by pickle.loads as the same tuple (_Packed)."""
    if compiled is not None:
        chunk = [(values, none) if values.__class__ is not tuple
                 or (parts := compiled.packed(values)) is None
                 else (_Packed(parts), none) for values, none in chunk]  # fmt: skip
    return pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL)


class _Packed:
    """A column's tuple as compiled.packed's parts, pickled as them: read back as the tuple
    (the same values, of the same types: a text made anew, as pickle makes it)."""

    __slots__ = ("parts", "unpacked")

    def __init__(self, parts: tuple) -> None:
        self.parts, self.unpacked = parts, compiled.unpacked

    def __reduce__(self):
        return self.unpacked, self.parts  # (pickled by its name: _columns.unpacked)


class _Spilled:
    """Where a chunk is in the temporary file, and its number of rows."""

    __slots__ = ("length", "offset", "rows")

    def __init__(self, offset: int, length: int, rows: int) -> None:
        self.offset, self.length, self.rows = offset, length, rows


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
        return _Repeated(None, len(mask)), None
    items = values.tolist() if isinstance(values, np.ndarray) else list(values)
    if has_none:
        items = [None if n else v for v, n in zip(items, mask)]
    elif items and items.count(items[0]) == len(items) and items[0].__class__ is str:
        return _Repeated(items[0], len(items)), None  # (a run's Delivers of one connection)
    return tuple(items), None


class _Repeated:
    """A chunk's column of one value (a string or None) n times: read as the tuple of them
    (a slice is one), kept and spilled as the value and n."""

    __slots__ = ("n", "value")

    def __init__(self, value, n: int) -> None:
        self.value, self.n = value, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index):
        if isinstance(index, slice):
            return (self.value,) * len(range(self.n)[index])
        range(self.n)[index]  # (an IndexError past the end, as a tuple's)
        return self.value

    def __iter__(self):
        return iter((self.value,) * self.n)

    def __reduce__(self):
        return _Repeated, (self.value, self.n)
