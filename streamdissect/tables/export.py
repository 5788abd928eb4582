"""The analysis tables written as files, and read back: one CSV file, or one Parquet dataset,
a table, with the columns and types of `streamdissect.tables.schema`.

    write_tables(analysis, "out/", "parquet")   # out/latency/part-00000.parquet, ...
    read_table("out/latency", "latency")         # the DataFrame, the schema's dtypes

Parquet is written as Spark writes a table (a directory of part files), so a notebook reads
what the CLI wrote and what a Spark job wrote the same way: `pd.read_parquet(DIR/TABLE)`, or
read_table for the schema's nullable dtypes. CSV is one file a table (`TABLE.csv`), for a
spreadsheet: a header row, empty cells for missing values.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from streamdissect.tables import schema
from streamdissect.tables.columns import MAP, map_json
from streamdissect.tables.convert import arrow_dataframe

if TYPE_CHECKING:
    import pandas as pd

    from streamdissect.analysis.driver import Analysis

FORMATS = ("csv", "parquet")
PART = "part-00000.parquet"


def arrow_table(table: str, df: pd.DataFrame) -> Any:
    """A table's DataFrame as a pyarrow.Table of its schema (its columns, its types)."""
    import pyarrow as pa

    arrow = pa.Table.from_pandas(df[schema.column_names(table)],
                                 schema=schema.arrow_schema(table), preserve_index=False)  # fmt: skip
    # pandas cannot make its map dtype again from the name it stores (pd.read_parquet then
    # fails): a map column is stored as an object column, a row's (key, value) pairs
    meta = json.loads(arrow.schema.metadata[b"pandas"])
    for column in meta["columns"]:
        if str(column.get("numpy_type")).startswith("map<"):
            column["numpy_type"] = "object"
    return arrow.replace_schema_metadata({**arrow.schema.metadata,
                                          b"pandas": json.dumps(meta).encode()})  # fmt: skip


def write_tables(analysis: Analysis, directory: str, fmt: str,
                 tables: list[str] | None = None) -> list[str]:  # fmt: skip
    """Every analysis table (or `tables`; the tables made on request only when named, as
    `messages`) under `directory`; the paths written. Every table: the default protocol's,
    and those of the other protocols whose traffic the capture had."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    os.makedirs(directory, exist_ok=True)
    written = []
    for table in tables or [*schema.analysis_tables(), *analysis.other_tables()]:
        arrow = arrow_table(table, analysis.frame(table))
        written.append(write_table(arrow, directory, table, fmt))
    return written


def write_table(arrow: Any, directory: str, table: str, fmt: str) -> str:
    """One pyarrow.Table as `directory`/TABLE.csv, or `directory`/TABLE/part-00000.parquet."""
    if fmt == "csv":
        import pyarrow.csv as pcsv

        path = os.path.join(directory, f"{table}.csv")
        pcsv.write_csv(_maps_as(arrow, table, map_json, "string"), path)
        return path
    import pyarrow.parquet as pq

    folder = os.path.join(directory, table)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, PART)
    pq.write_table(arrow, path)
    return path


def _maps_as(arrow: Any, table: str, convert: Any, kind: str) -> Any:
    """`arrow` with the table's map columns made of `kind` by `convert` on each cell (CSV
    has no maps: each is written as a JSON object's text, and read back from it)."""
    from streamdissect.tables.arrays import typed_array

    for column in schema.TABLES[table]:
        if column.kind == MAP and column.name in arrow.column_names:
            at = arrow.column_names.index(column.name)
            cells = [] if convert is None else arrow.column(at).to_pylist()
            arrow = arrow.set_column(at, pa_field(column.name, kind),
                                     typed_array([convert(c) for c in cells], kind))  # fmt: skip
    return arrow


def pa_field(name: str, kind: str) -> Any:
    import pyarrow as pa

    return pa.field(name, schema.arrow_type(kind))


def read_table(path: str, table: str) -> pd.DataFrame:
    """A table written by write_tables (a .csv file, a Parquet file or dataset directory, by
    the CLI or by Spark) as a DataFrame with the schema's dtypes."""
    arrow_schema = schema.arrow_schema(table)
    if path.endswith(".csv"):
        import pyarrow.csv as pcsv

        as_text = _maps_as(arrow_schema.empty_table(), table, None, "string").schema
        options = pcsv.ConvertOptions(column_types=as_text, strings_can_be_null=True)
        arrow = _maps_as(pcsv.read_csv(path, convert_options=options), table,
                         lambda text: None if text is None else json.loads(text), MAP)  # fmt: skip
    else:
        import pyarrow.parquet as pq

        arrow = pq.read_table(path, schema=arrow_schema)
    arrow = arrow.select(schema.column_names(table)).cast(arrow_schema)
    return arrow_dataframe(table, arrow.to_batches())
