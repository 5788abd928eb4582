"""The building blocks of every table: a column's kind and how pandas, Arrow and Spark hold it.

Timestamps are int64 nanoseconds since the Unix epoch (`*_ns`); durations are float
milliseconds (`*_ms`). The tables themselves are defined where they come from (a protocol's
tables in its package, the anomalies table in tables/schema.py) and found by name through
tables/schema.py.
"""

from __future__ import annotations

from streamdissect.slotted import Frozen


class Column(Frozen):
    """A table's column: its name, its kind (one of KINDS) and what it holds."""

    __slots__ = field_names = ("name", "kind", "doc")
    name: str
    kind: str  # one of KINDS
    doc: str

    def __init__(self, name: str, kind: str, doc: str = "") -> None:
        self._set(name=name, kind=kind, doc=doc)


# kind -> (pandas dtype, pyarrow type name). Nullable pandas dtypes keep "no value" distinct
# from zero, which matters for correlation ids and codes.
KINDS = {
    "int64": ("Int64", "int64"),
    "uint64": ("UInt64", "uint64"),  # u64 on the wire: publishing ids, chunk ids (offsets)
    "int32": ("Int32", "int32"),
    "float64": ("float64", "float64"),
    "string": ("string", "string"),
    "bool": ("boolean", "bool_"),  # (pyarrow's name: pa.bool_)
    # Arrow memory in pandas too (pd.ArrowDtype): a row reads as a Python list; an object
    # column of lists would cost ~100 bytes a row more
    "list<uint64>": ("list<item: uint64>[pyarrow]", None),
    # a map of text to text (a message's application properties): Arrow's map, which
    # Parquet stores as its MAP type, Spark reads as map<string,string> and pandas as a
    # list of (key, value) pairs a row; CSV files hold it as a JSON object's text
    "map<string,string>": ("map<string, string>[pyarrow]", None),
}
MAP = "map<string,string>"


def columns(*specs: tuple[str, str] | tuple[str, str, str]) -> tuple[Column, ...]:
    return tuple(Column(*spec) for spec in specs)


_INTEGER_RANGES = {"int64": (-(2**63), 2**63 - 1), "int32": (-(2**31), 2**31 - 1),
                   "uint64": (0, 2**64 - 1)}  # fmt: skip


def fit(kind: str, value):
    """What a column of `kind` holds of `value`: an integer out of the kind's range is
    missing (None); text keeps only valid UTF-8 (the codec keeps invalid bytes of a string
    with surrogate escapes: each becomes U+FFFD); lists keep the items that fit."""
    if value is None:
        return None
    if kind in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[kind]
        return value if low <= value <= high else None
    if kind == "string" and isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if kind == "list<uint64>":
        return [fit("uint64", item) for item in value]
    if kind == MAP:
        pairs = value.items() if isinstance(value, dict) else value
        return [(fit("string", str(k)), None if v is None else fit("string", str(v)))
                for k, v in pairs]  # fmt: skip
    return value


def arrow_type(kind: str):
    import pyarrow as pa

    if kind == "list<uint64>":
        return pa.list_(pa.uint64())
    if kind == MAP:
        return pa.map_(pa.string(), pa.string())
    return getattr(pa, KINDS[kind][1])()


def map_json(value) -> str | None:
    """A map column's cell as the JSON text of an object (CSV files, the JSON report): a
    dict, or the (key, value) pairs pandas and Arrow give a row."""
    import json

    if value is None:
        return None
    return json.dumps(dict(value.items() if isinstance(value, dict) else value),
                      ensure_ascii=False)  # fmt: skip


def arrow_schema_of(table: tuple[Column, ...]):
    """The Arrow schema of a table's columns (Parquet and Spark take theirs from it)."""
    import pyarrow as pa

    return pa.schema([pa.field(c.name, arrow_type(c.kind)) for c in table])
