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

import os
from typing import TYPE_CHECKING, Any

from streamdissect.tables import schema
from streamdissect.tables.convert import arrow_dataframe

if TYPE_CHECKING:
    import pandas as pd

    from streamdissect.analysis.driver import Analysis

FORMATS = ("csv", "parquet")
PART = "part-00000.parquet"


def arrow_table(table: str, df: pd.DataFrame) -> Any:
    """A table's DataFrame as a pyarrow.Table of its schema (its columns, its types)."""
    import pyarrow as pa

    return pa.Table.from_pandas(df[schema.column_names(table)],
                                schema=schema.arrow_schema(table), preserve_index=False)  # fmt: skip


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
        pcsv.write_csv(arrow, path)
        return path
    import pyarrow.parquet as pq

    folder = os.path.join(directory, table)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, PART)
    pq.write_table(arrow, path)
    return path


def read_table(path: str, table: str) -> pd.DataFrame:
    """A table written by write_tables (a .csv file, a Parquet file or dataset directory, by
    the CLI or by Spark) as a DataFrame with the schema's dtypes."""
    arrow_schema = schema.arrow_schema(table)
    if path.endswith(".csv"):
        import pyarrow.csv as pcsv

        options = pcsv.ConvertOptions(column_types=arrow_schema, strings_can_be_null=True)
        arrow = pcsv.read_csv(path, convert_options=options)
    else:
        import pyarrow.parquet as pq

        arrow = pq.read_table(path, schema=arrow_schema)
    arrow = arrow.select(schema.column_names(table)).cast(arrow_schema)
    return arrow_dataframe(table, arrow.to_batches())
