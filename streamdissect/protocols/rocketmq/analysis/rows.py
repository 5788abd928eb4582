"""A row type per table: its columns as slots, read by name (`row.status`, `row["status"]`)
and by position in the table's column order, as the table converters read tuples; and
RowTable, where the rows of a table of a row per message or call are kept: as tuples in
CompactRows (columns, spilled to a file past a few MB), once they can no longer change."""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Sequence
from dataclasses import make_dataclass
from operator import attrgetter
from typing import Any

from streamdissect.analysis.compact import CompactRows


def shared(value: Any) -> Any:
    """A text many rows hold (a topic, a group, a tag, a remark) as one string for all of
    them (sys.intern), not one a row: a row a send is kept for the whole capture."""
    return sys.intern(value) if value.__class__ is str else value


def row_type(name: str, columns: Sequence[Any]) -> type:
    """A class whose instances are rows of a table of these columns (tables.columns.Column);
    a column not given is None, one not in the table a TypeError. (Its __init__ is the one
    dataclasses writes for keyword fields: a row a message sent is made 100,000 times on
    the benchmark capture, and a loop over the columns took four times as long.)"""
    names = tuple(c.name for c in columns)
    every = attrgetter(*names)

    def values(self) -> tuple:
        """The row as a tuple in the table's column order."""
        return every(self)

    def __getitem__(self, key: int | str) -> Any:
        return getattr(self, key if key.__class__ is str else names[key])

    def __len__(self) -> int:
        return len(names)

    def __eq__(self, other: object) -> bool:
        return other.__class__ is self.__class__ and tuple(self) == tuple(other)

    def __repr__(self) -> str:
        return f"{name}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    return make_dataclass(name, [(column, Any, None) for column in names], kw_only=True,
                          slots=True, eq=False, repr=False,
                          namespace={"__getitem__": __getitem__, "__len__": __len__,
                                     "__eq__": __eq__, "__hash__": None, "__repr__": __repr__,
                                     "columns": names,
                                     # (calls.answer sets code_name where the table has it)
                                     "names_codes": "code_name" in names,
                                     "values": values})  # fmt: skip


class RowTable:
    """A table's rows in the order they were begun (a request's), each changed until it is
    complete (its response), kept as CompactRows: a row is written there (a tuple) once it
    is complete and every row begun before it is written, or once WINDOW rows were begun
    after it (a request never answered holds back no more than that). A row written while
    still open and completed later (a long poll held past WINDOW other requests) is kept
    as an object until the table is read, or until more than WINDOW such rows wait, and
    replaces its tuple then."""

    WINDOW = 4096

    def __init__(self, width: int) -> None:
        self._table = CompactRows(width)
        self._written = 0  # rows in _table (its length, without a call to its __len__)
        self._window: deque = deque()  # rows begun and not written, oldest first
        self._open: set[int] = set()  # indices of the window's rows not complete
        self._late: dict[int, Any] = {}  # index -> a row completed after it was written

    def __len__(self) -> int:
        return self._written + len(self._window)

    # Between calls the window is empty, or holds at most WINDOW rows and its oldest is
    # open: so a row begun or completed can let rows be written only when it is the oldest
    # or the window grew past WINDOW, and _write is called only then.

    def begin(self, row: Any, complete: bool = False) -> int:
        """Add a row (row_type's) that may change until completed(); its index."""
        window = self._window
        index = self._written + len(window)
        window.append(row)
        if not complete:
            self._open.add(index)
        elif len(window) == 1:
            self._write(self.WINDOW)
            return index
        if len(window) > self.WINDOW:
            self._write(self.WINDOW)
        return index

    def completed(self, index: int, row: Any) -> None:
        """The row at `index` will not change again."""
        if index >= self._written:
            self._open.discard(index)
            if index == self._written:
                self._write(self.WINDOW)
        else:
            self._late[index] = row
            if len(self._late) > self.WINDOW:  # (no more of them held than of the window)
                self._replace_late()

    def _write(self, keep: int) -> None:
        """Write the oldest rows that are complete, and past `keep` rows any."""
        window, append, still = self._window, self._table.append, self._open
        written = self._written
        while window and (len(window) > keep or written not in still):
            still.discard(written)
            append(window.popleft().values())
            written += 1
        self._written = written

    def rows(self) -> CompactRows:
        """Every row as a tuple in the table's column order (the rows open so far too: a
        change made to one later is applied at the next read)."""
        self._write(0)
        self._replace_late()
        return self._table

    def _replace_late(self) -> None:
        if self._late:
            self._table.replace({i: row.values() for i, row in self._late.items()})
            self._late = {}
