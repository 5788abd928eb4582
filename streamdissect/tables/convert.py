"""Rows -> pandas DataFrames with the column names and dtypes of `streamdissect.tables.schema`."""

from __future__ import annotations

import math
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from streamdissect.tables import schema

if TYPE_CHECKING:
    import pandas as pd


# integer kinds -> (numpy dtype, smallest, largest value)
_INTEGERS = {"int64": ("int64", -(2**63), 2**63 - 1), "int32": ("int32", -(2**31), 2**31 - 1),
             "uint64": ("uint64", 0, 2**64 - 1)}  # fmt: skip


def dataframe(table: str, rows) -> pd.DataFrame:
    """Rows are dicts (extra keys ignored) or tuples in the schema's column order. Each column
    is made as an array of its schema dtype at once; a value that the dtype cannot hold (a
    u64 difference beyond int64, say) is missing (<NA>), never an exception."""
    import pandas as pd  # here, not at import: the JSON report never needs it (~1 s)

    names = schema.column_names(table)
    kinds = [c.kind for c in schema.TABLES[table]]
    columns = _columns_of(names, rows)
    data = {n: _array(values, none, kind)
            for n, (values, none), kind in zip(names, columns, kinds)}  # fmt: skip
    return pd.DataFrame(data, columns=names)


def _columns_of(names: list[str], rows) -> list[tuple]:
    """Rows (dicts, tuples in schema order, or CompactRows) as columns: (values, None mask
    or a numpy mask of the missing ones) each."""
    if hasattr(rows, "columns"):  # (kept as columns already: CompactRows)
        return rows.columns()
    if len(rows) and isinstance(rows[0], dict):
        return [([r.get(n) for r in rows], None) for n in names]
    # (zip(*rows) is ~7x slower on a large table)
    return [(list(map(itemgetter(i), rows)), None) for i in range(len(names))]


def arrow_dataframe(table: str, batches) -> pd.DataFrame:
    """Arrow record batches of a table (its schema.arrow_schema) as a DataFrame with the
    schema's nullable pandas dtypes (`string` and list columns kept in Arrow memory)."""
    import pandas as pd
    import pyarrow as pa

    arrow = pa.Table.from_batches(batches, schema=schema.arrow_schema(table))
    release_free_memory()  # (what making the batches freed, before the DataFrame is made)
    dtypes = {pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype(),
              pa.uint64(): pd.UInt64Dtype(), pa.bool_(): pd.BooleanDtype(),
              pa.string(): pd.StringDtype("pyarrow"),
              pa.list_(pa.uint64()): pd.ArrowDtype(pa.list_(pa.uint64())),
              schema.arrow_type(schema.MAP): pd.ArrowDtype(schema.arrow_type(schema.MAP))}  # fmt: skip
    # (the Arrow columns are freed as they are converted: the table is not held twice)
    return arrow.to_pandas(types_mapper=dtypes.get, self_destruct=True, split_blocks=True)


def release_free_memory() -> None:
    """Give the heap memory freed so far back to the system (glibc's malloc_trim, as Dask's
    workers do after a task): a large dissection leaves tens of MB of freed blocks that
    the DataFrame made next would otherwise sit beside. Elsewhere, nothing."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):  # (not glibc)
        pass


def _array(values, none, kind: str):
    """A pandas array of the schema `kind` (nullable) holding `values`: a list, or a numpy
    int64 or float64 array with `none`, a mask of the missing ones (or None)."""
    import numpy as np
    import pandas as pd

    pandas_dtype = schema.KINDS[kind][0]
    if isinstance(values, np.ndarray):
        return _from_numpy(values, none, kind)
    if kind in _INTEGERS:
        dtype, low, high = _INTEGERS[kind]
        try:  # (the usual column: Python ints in range, no None; one pass in C)
            return pd.array(np.array(values, dtype=dtype), dtype=pandas_dtype)
        except (TypeError, ValueError, OverflowError):
            pass
        try:  # (ints and None; numpy's warning for a float it cannot cast is not the user's)
            with np.errstate(invalid="ignore", over="ignore"):
                return pd.array(values, dtype=pandas_dtype)
        except (TypeError, ValueError, OverflowError):
            cast = _cast(kind)
            held = [_held(cast, v) for v in values]
            held = [v if v is not None and low <= v <= high else None for v in held]
            mask = np.array([v is None for v in held], dtype=bool)
            data = np.array([0 if v is None else v for v in held], dtype=dtype)
            return pd.arrays.IntegerArray(data, mask)
    if kind == "float64":
        try:
            return np.array(values, dtype=np.float64)  # (None -> NaN)
        except (TypeError, ValueError, OverflowError):
            cast = _cast(kind)
            held = (_held(cast, v) for v in values)
            return np.array([math.nan if v is None else v for v in held], dtype=np.float64)
    if kind == "list<uint64>":
        import pyarrow as pa

        return pd.array([None if v is None else list(v) for v in values],
                        dtype=pd.ArrowDtype(pa.list_(pa.uint64())))  # fmt: skip
    if kind == schema.MAP:
        from streamdissect.tables.arrays import typed_array

        return pd.array(typed_array(values, kind), dtype=pd.ArrowDtype(schema.arrow_type(kind)))
    plain = {"string": str, "bool": bool}[kind]
    if not set(map(type, values)) - {plain, type(None)}:  # (no value to convert)
        return pd.array(values, dtype=pandas_dtype)
    cast = _cast(kind)
    return pd.array([_held(cast, v) for v in values], dtype=pandas_dtype)


def _held(cast, v):
    """`cast(v)`, or None for a value the column's kind cannot take."""
    try:
        return cast(v)
    except (TypeError, ValueError, OverflowError):
        return None


def _from_numpy(values, none, kind: str):
    import numpy as np
    import pandas as pd

    if kind in _INTEGERS:
        return pd.arrays.IntegerArray(*_integers(values, none, kind))
    missing = np.zeros(len(values), dtype=bool) if none is None else none.copy()
    if kind == "float64":
        data = values.astype(np.float64)
        data[missing] = np.nan
        return data
    return _array([None if m else v for v, m in zip(values.tolist(), missing.tolist())], None,
                  kind)


def _integers(values, none, kind: str) -> tuple:
    """(values, missing mask) of an integer column of `kind`: what does not fit its dtype
    (compared in the values' own type), or is no integer, is missing."""
    import numpy as np

    missing = np.zeros(len(values), dtype=bool) if none is None else none.copy()
    dtype, low, high = _INTEGERS[kind]
    if values.dtype.kind == "f":
        missing |= ~np.isfinite(values) | (values != np.floor(values))
    if low > -(2**63) or values.dtype.kind == "f":
        missing |= values < low
    if high < 2**63 - 1 or values.dtype.kind == "f":
        missing |= values > high
    return np.where(missing, 0, values).astype(dtype), missing


def _cast(kind: str):
    """The Python value a column of this kind holds once through pandas and back."""
    if kind in _INTEGERS:
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
    if kind == schema.MAP:  # (a JSON object: a dict, or pandas' and Arrow's pairs)
        return lambda v: v if v.__class__ is dict else None if v is None else dict(v)
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


def arrow_table(table: str, rows) -> Any:
    """The rows of `dataframe` as a pyarrow.Table of the schema, without pandas: the same
    values as `pa.Table.from_pandas(dataframe(table, rows))` (what the column's kind cannot
    hold, and a float NaN, are null), for a table that is only written out (the Spark
    tasks' Parquet parts)."""
    names = schema.column_names(table)
    return arrow_columns(table, names, _columns_of(names, rows))


def arrow_columns(table: str, names: list[str], columns: list[tuple]) -> Any:
    """The columns `names` of the table as a pyarrow.Table (arrow_table's values), from
    their (values, None mask) as CompactRows keeps them: numpy arrays in one step, other
    values through typed_array."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from streamdissect.tables.arrays import typed_array

    kinds = {c.name: c.kind for c in schema.TABLES[table]}
    arrays = []
    for (values, none), name in zip(columns, names):
        kind = kinds[name]
        if isinstance(values, np.ndarray) and kind in _INTEGERS:
            data, missing = _integers(values, none, kind)  # (the pandas column's rules)
            array = pa.array(data, schema.arrow_type(kind), mask=missing)
        elif isinstance(values, np.ndarray) and kind == "float64" and values.dtype.kind in "if":
            array = pa.array(values.astype(np.float64, copy=False), pa.float64(), mask=none)
        elif isinstance(values, np.ndarray):
            array = typed_array([None if none is not None and none[i] else v
                                 for i, v in enumerate(values.tolist())], kind)  # fmt: skip
        else:
            array = typed_array(list(values), kind)
        if kind == "float64" and len(array):
            array = pc.if_else(pc.is_nan(array), pa.scalar(None, pa.float64()), array)
        arrays.append(array)
    full = schema.arrow_schema(table)
    return pa.Table.from_arrays(arrays, schema=pa.schema([full.field(n) for n in names]))
