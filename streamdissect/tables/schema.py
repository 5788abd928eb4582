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

TABLES: dict[str, tuple[Column, ...]] = {
    **{name: table for protocol in PROTOCOLS for name, table in protocol.tables.items()},
    "anomalies": ANOMALIES,
    "messages": MESSAGES,
}
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
