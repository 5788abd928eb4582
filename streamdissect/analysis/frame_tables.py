"""Rows -> pandas DataFrames with the column names and dtypes of `streamdissect.schema`."""

from __future__ import annotations

import pandas as pd

from .. import schema


def dataframe(table: str, rows: list) -> pd.DataFrame:
    """Rows are dicts (extra keys ignored) or tuples in the schema's column order."""
    names = schema.column_names(table)
    if rows and isinstance(rows[0], dict):
        data = {n: [r.get(n) for r in rows] for n in names}
    else:
        columns = list(zip(*rows)) if rows else [()] * len(names)
        data = dict(zip(names, (list(c) for c in columns)))
    df = pd.DataFrame(data, columns=names)
    return df.astype(schema.pandas_dtypes(table))
