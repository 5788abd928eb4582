"""A row shape per table: its rows as lists in the table's column order, written by the
column's position (`row[SHAPE.status]`), as the table converters read tuples; and RowTable, where the rows of a table of a row per message or call are kept: in CompactRows
(columns, spilled to a file past a few MB), once they can no longer change."""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from streamdissect.analysis.compact import CompactRows


def shared(value: Any) -> Any:
    """A text many rows hold (a topic, a group, a tag, a remark) as one string for all of
    them (sys.intern), not one a row: a row a send is kept for the whole capture."""
    return sys.intern(value) if value.__class__ is str else value


class RowShape:
    """The rows of a table of these columns (tables.columns.Column) as lists in its column
    order, as the table converters read them: each column's position by its name
    (`shape.status`), and `maker`, a function making a row from some columns' values. (A row
    a message sent is made 100,000 times on the benchmark capture: a list made by one call
    and written as a tuple costs a sixth of a slots object made by keyword and read by an
    attrgetter.)"""

    def __init__(self, columns: Sequence[Any]) -> None:
        self.columns = names = tuple(c.name for c in columns)
        taken = {"columns", "names_codes", "maker"} & set(names)
        if taken:
            raise ValueError(f"columns named as RowShape's own attributes: {sorted(taken)}")
        for at, name in enumerate(names):
            setattr(self, name, at)
        self.names_codes = "code_name" in names  # (calls.answer sets code_name where held)

    def maker(self, *names: str) -> Callable[..., list]:
        """A function of these columns' values, by position, making a row (the other
        columns None). Its source is written for these names once (a loop over the columns
        a row would cost as much as the row), as dataclasses writes an __init__."""
        unknown = [n for n in names if n not in self.columns]
        if unknown or len(set(names)) != len(names):
            raise TypeError(f"not the table's columns once each: {names}")
        given = {self.columns.index(name): f"v{i}" for i, name in enumerate(names)}
        items = ", ".join(given.get(at, "None") for at in range(len(self.columns)))
        source = f"def make_row({', '.join(given.values())}):\n    return [{items}]\n"
        namespace: dict[str, Any] = {}
        exec(source, namespace)  # noqa: S102 (only v0.. and None in it: no name comes in)
        make_row = namespace["make_row"]
        # (where each value goes and the row's length: a compiled caller makes the same row)
        make_row.at, make_row.width = tuple(self.columns.index(n) for n in names), len(self.columns)
        return make_row


class RowTable:
    """A table's rows in the order they were begun (a request's), each changed until it is
    complete (its response), kept as CompactRows: a row is written there (a tuple) once it
    is complete and every row begun before it is written, or once WINDOW rows were begun
    after it (a request never answered holds back no more than that). A row written while
    still open and completed later (a long poll held past WINDOW other requests) is kept
    as a list until the table is read, or until more than WINDOW such rows wait, and
    replaces its tuple then."""

    WINDOW = 4096
    # rows written kept at the window's start before it is shifted (a shift a SHIFT rows
    # written, not one a row: a window of open rows past WINDOW writes one a row begun)
    SHIFT = 256

    def __init__(self, width: int) -> None:
        self._table = CompactRows(width)
        self._written = 0  # rows in _table (its length, without a call to its __len__)
        # rows begun and not written, oldest first: _window[_front:] (the rows written
        # before _front let go only now and then: no list shifted a row written)
        self._window: list = []
        self._front = 0
        self._open: set[int] = set()  # indices of the window's rows not complete
        # every index put in _open, in increasing order (some since completed: they go
        # once older than the first open one): where _write finds the first open row
        self._order: deque[int] = deque()
        self._late: dict[int, Any] = {}  # index -> a row completed after it was written

    def __len__(self) -> int:
        return self._written + len(self._window) - self._front

    # Between calls the window is empty, or holds at most WINDOW rows and its oldest is
    # open: so a row begun or completed can let rows be written only when it is the oldest
    # or the window grew past WINDOW, and _write is called only then.

    def begin(self, row: Any, complete: bool = False) -> int:
        """Add a row (a list, RowShape's) that may change until completed(); its index."""
        window = self._window
        window.append(row)
        waiting = len(window) - self._front  # (rows in the window, this one too)
        index = self._written + waiting - 1
        if not complete:
            self._open.add(index)
            self._order.append(index)
        elif waiting == 1:
            self._write(self.WINDOW)
            return index
        if waiting > self.WINDOW:
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

    def room(self, rows: int) -> bool:
        """Whether this many rows begun now keep the window within WINDOW (add_run)."""
        return len(self._window) - self._front + rows <= self.WINDOW

    def add_run(self, begun: list, left: list, done: list) -> None:
        """Rows begun (`begun`, in order; of them, the indices of those not complete at the
        end: `left`, increasing) and rows begun before completed (`done`: (index, row)
        each) in some interleaving, leaving the table as begin() and completed() one at a
        time in that interleaving leave it, when the window stays within WINDOW meanwhile
        (`room`): a row is written once it and every older row are complete, whenever that
        came about; a row completed after it was written is late as before. (Only the
        rows left open are named: a run's rows are mostly answered within it.)"""
        window, still, written = self._window, self._open, self._written
        if not left and not still and not window and not self._order:
            # (none waiting and none left open: the run's rows are written as they are, as
            # _write would, without going through the window; a run's usual end)
            for index, row in done:
                if index < written:
                    self.completed(index, row)
            self._written = written + len(begun)
            self._table.extend(begun)
            return
        window += begun
        still.update(left)
        self._order += left
        for index, row in done:
            if index >= written:
                still.discard(index)
            else:
                self.completed(index, row)
        if len(window) > self._front and written not in still:
            self._write(self.WINDOW)

    def _write(self, keep: int) -> None:
        """Write the oldest rows that are complete, and past `keep` rows any: every row
        before the first open one not among the `keep` newest (those past it written
        open: completed later, they are late). A complete row goes as it is (its list:
        it does not change again, CompactRows takes it as a tuple), an open one as a
        tuple of its values now."""
        window, still, order, front = self._window, self._open, self._order, self._front
        written = self._written
        waiting = len(window) - front
        forced = written + waiting - keep  # (rows before it are written anyway)
        still_open = []  # (the rows written open)
        while order and (order[0] < forced or order[0] not in still):
            index = order.popleft()
            if index in still:
                still.discard(index)
                still_open.append(index)
        stop = order[0] - written if order else waiting
        if stop:
            out = window[front : front + stop]
            for index in still_open:
                out[index - written] = tuple(out[index - written])
            front += stop
            if front == len(window):
                window.clear()
                front = 0
            elif front > self.SHIFT:
                del window[:front]
                front = 0
            self._front = front
            self._written = written + stop
            self._table.extend(out)

    def rows(self) -> CompactRows:
        """Every row as a tuple in the table's column order (the rows open so far too: a
        change made to one later is applied at the next read)."""
        self._write(0)
        self._replace_late()
        return self._table

    def _replace_late(self) -> None:
        if self._late:
            self._table.replace({i: tuple(row) for i, row in self._late.items()})
            self._late = {}
