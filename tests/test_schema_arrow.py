"""Every table's Arrow schema comes from schema.py, and the pandas tables convert to it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamdissect.analysis import analyze, frames_table
from streamdissect.tables import schema

CAPTURE = "captures/rstream-slow-consumer-3.10.pcap"
ARROW_OF_KIND = {"int64": pa.int64(), "uint64": pa.uint64(), "int32": pa.int32(),
                 "float64": pa.float64(), "string": pa.string(), "bool": pa.bool_(),
                 "list<uint64>": pa.list_(pa.uint64()),
                 "map<string,string>": pa.map_(pa.string(), pa.string())}  # fmt: skip


@pytest.mark.parametrize("table", sorted(schema.TABLES))
def test_arrow_schema_has_every_column_with_its_type(table):
    arrow = schema.arrow_schema(table)
    assert arrow.names == schema.column_names(table)
    assert [f.type for f in arrow] == [ARROW_OF_KIND[c.kind] for c in schema.TABLES[table]]
    assert all(f.nullable for f in arrow)


@pytest.fixture(scope="module")
def tables():
    result = analyze(CAPTURE)
    found = {name: getattr(result, name) for name in schema.analysis_tables()}
    found["frames"] = frames_table(CAPTURE)
    return found


@pytest.mark.parametrize("table", sorted([*schema.analysis_tables(), "frames"]))
def test_pandas_tables_convert_to_their_arrow_schema(tables, table):
    frame = tables[table]
    converted = pa.Table.from_pandas(frame, schema=schema.arrow_schema(table), preserve_index=False)
    assert converted.schema.equals(schema.arrow_schema(table))
    assert converted.num_rows == len(frame)
    if table in ("frames", "stalls", "deliveries", "credit", "publishes"):
        assert converted.num_rows > 0  # the capture has rows for the tables with bools and ids
