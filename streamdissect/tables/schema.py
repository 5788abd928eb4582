"""Every table streamdissect produces, by name: each registered protocol's tables
(protocols.registry; the Stream's are in protocols/stream/tables.py), and the anomalies
table and the messages table (tables/messages.py, made only on request), which every
protocol shares.

pandas, Arrow/Parquet and Spark schemas are all derived from the column lists
(tables.columns), so a notebook written against the pandas tables runs unchanged on the
Parquet the Spark jobs write. A table's columns are also `schema.<NAME>`, its name in upper
case (`schema.FRAMES`).
"""

from __future__ import annotations

import threading
from typing import Any

from streamdissect.protocols import registry
from streamdissect.protocols.registry import PROTOCOLS
from streamdissect.tables.columns import KINDS, MAP, Column, arrow_schema_of, arrow_type, fit
from streamdissect.tables.columns import columns as _cols
from streamdissect.tables.messages import MESSAGES

__all__ = ["ANOMALIES", "KINDS", "MAP", "MESSAGES", "TABLES", "Column", "arrow_schema", "arrow_type",
           "column_names", "fit", "pandas_dtypes"]  # fmt: skip

ANOMALIES = _cols(
    ("ts_ns", "int64"),
    ("connection", "string"),
    ("direction", "string"),
    ("kind", "string"),
    ("stream_offset", "int64"),
    ("length", "int64"),
    ("detail", "string"),
)


class _Tables(dict):
    """Every table by name: each protocol's in registry order, then the shared ones. A
    protocol's tables (its tables module) are read at the first lookup of a name not among
    those read so far, and all of them once the whole is asked for (iteration, length,
    copies), so a run of the Stream alone never reads RocketMQ's (~1.5 ms of the start)."""

    def __init__(self, protocols: tuple, shared: dict[str, tuple[Column, ...]]) -> None:
        super().__init__(shared)
        self._protocols, self._shared, self._unread = protocols, shared, list(protocols)
        self._ordered = False  # every protocol's tables read, in the order above
        self._reading = threading.Lock()  # (a name looked up while another thread reads)

    def _found(self, name: object) -> bool:
        if dict.__contains__(self, name) or not self._unread:
            return dict.__contains__(self, name)
        with self._reading:
            while not dict.__contains__(self, name) and self._unread:
                dict.update(self, self._unread[0].tables)
                del self._unread[0]
        return dict.__contains__(self, name)

    def _whole(self) -> None:
        if self._ordered:
            return
        with self._reading:
            if not self._ordered:
                registry.check(self._protocols)
                ordered = {name: table for p in self._protocols for name, table in p.tables.items()}
                dict.clear(self)
                dict.update(self, {**ordered, **self._shared})
                self._unread, self._ordered = [], True

    def __missing__(self, name: str) -> tuple[Column, ...]:
        if self._found(name):
            return dict.__getitem__(self, name)
        raise KeyError(name)

    def get(self, name: str, default: Any = None) -> Any:
        return dict.__getitem__(self, name) if self._found(name) else default

    def __contains__(self, name: object) -> bool:
        return self._found(name)

    def copy(self) -> dict[str, tuple[Column, ...]]:
        self._whole()
        return dict.copy(self)

    def clear(self) -> None:
        self._unread, self._ordered = [], True
        dict.clear(self)


def _whole_first(method: Any) -> Any:
    def whole(self: _Tables, *args: Any) -> Any:
        self._whole()
        return method(self, *args)

    return whole


for _name in ("__iter__", "__len__", "__repr__", "keys", "values", "items"):  # the whole
    setattr(_Tables, _name, _whole_first(getattr(dict, _name)))
del _name

TABLES: dict[str, tuple[Column, ...]] = _Tables(PROTOCOLS, {"anomalies": ANOMALIES,
                                                            "messages": MESSAGES})
ON_REQUEST = ("messages",)  # the shared tables made only when asked for


def analysis_tables(protocol: str | None = None, on_request: bool = False) -> tuple[str, ...]:
    """The tables an analysis of `protocol` (None: the default) gives: its tables but its
    frames table (and those it makes only on request, unless `on_request`), the anomalies
    table, and with `on_request` the messages table."""
    analysed = registry.protocol(protocol)
    left_out = {analysed.frames_table} | (set() if on_request else analysed.tables_on_request)
    return (*(name for name in analysed.tables if name not in left_out), "anomalies",
            *(ON_REQUEST if on_request else ()))


def __getattr__(name: str) -> tuple[Column, ...]:
    """`schema.FRAMES` is TABLES["frames"]."""
    table = TABLES.get(name.lower()) if name.isupper() else None
    if table is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return table


def column_names(table: str) -> list[str]:
    return [c.name for c in TABLES[table]]


def arrow_schema(table: str):
    """The table's Arrow schema (Parquet and Spark take theirs from it)."""
    return arrow_schema_of(TABLES[table])


def pandas_dtypes(table: str) -> dict[str, str]:
    return {c.name: KINDS[c.kind][0] for c in TABLES[table]}
