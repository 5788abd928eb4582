"""Rows -> pandas DataFrames with the column names and dtypes of `streamdissect.schema`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .. import schema

if TYPE_CHECKING:
    import pandas as pd


def dataframe(table: str, rows: list) -> pd.DataFrame:
    """Rows are dicts (extra keys ignored) or tuples in the schema's column order."""
    import pandas as pd  # here, not at import: the JSON report never needs it (~1 s)

    names = schema.column_names(table)
    if rows and isinstance(rows[0], dict):
        data = {n: [r.get(n) for r in rows] for n in names}
    else:
        columns = list(zip(*rows)) if rows else [()] * len(names)
        data = dict(zip(names, (list(c) for c in columns)))
    df = pd.DataFrame(data, columns=names)
    return df.astype(schema.pandas_dtypes(table))


def _cast(kind: str):
    """The Python value a column of this kind holds once through pandas and back."""
    if kind in ("int64", "int32"):
        return lambda v: v if v.__class__ is int else None if v is None or _nan(v) else int(v)
    if kind == "float64":
        return lambda v: (
            v
            if v.__class__ is float and not _nan(v)
            else None
            if v is None or _nan(v)
            else float(v)
        )
    if kind == "bool":
        return lambda v: v if v.__class__ is bool else None if v is None or _nan(v) else bool(v)
    return lambda v: v if v.__class__ is str else None if v is None or _nan(v) else str(v)


def _nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def plain_records(table: str, rows: list, columns: list[str] | None = None) -> list[dict]:
    """The table's rows as plain JSON-able dicts with the schema's casts, without pandas."""
    names = schema.column_names(table)
    kinds = {c.name: c.kind for c in schema.TABLES[table]}
    wanted = columns if columns is not None else names
    casts = [(n, _cast(kinds[n])) for n in wanted]
    if rows and isinstance(rows[0], dict):
        return [{n: cast(r.get(n)) for n, cast in casts} for r in rows]
    where = {n: i for i, n in enumerate(names)}
    picks = [(n, where[n], cast) for n, cast in casts]
    return [{n: cast(r[i]) for n, i, cast in picks} for r in rows]
