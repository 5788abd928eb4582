"""A row type per table: its columns as slots (a fifth of a dict's memory, for the tables of a
row per message or call), read by name (`row.status`, `row["status"]`) and by position in
the table's column order, as the table converters read tuples."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import make_dataclass
from typing import Any


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
                                     "columns": names})  # fmt: skip
