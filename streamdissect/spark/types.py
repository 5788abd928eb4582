"""The schema's tables as Spark types, and Arrow batches cast to them.

Spark has no unsigned integers: a u64 column (publishing ids, chunk ids, offsets: all u64 on
the wire) is decimal(20,0), which holds every value exactly; everything else maps one to one
(int64 long, int32 int, float64 double, string, bool boolean, list<u64> array<decimal>,
map<string,string> as it is).
"""

from __future__ import annotations

from typing import Any

from streamdissect.tables import schema

U64 = "decimal(20,0)"
_DDL = {"int64": "bigint", "int32": "int", "uint64": U64, "float64": "double",
        "string": "string", "bool": "boolean", "list<uint64>": f"array<{U64}>",
        "map<string,string>": "map<string,string>"}  # fmt: skip


def spark_ddl(table: str) -> str:
    """The table's Spark schema as a DDL string (what DataSource.schema() returns)."""
    return ", ".join(f"`{c.name}` {_DDL[c.kind]}" for c in schema.TABLES[table])


def spark_arrow_schema(table: str) -> Any:
    import pyarrow as pa

    decimal = pa.decimal128(20, 0)
    fields = []
    for column in schema.TABLES[table]:
        arrow_type = schema.arrow_type(column.kind)
        if column.kind == "uint64":
            arrow_type = decimal
        elif column.kind == "list<uint64>":
            arrow_type = pa.list_(decimal)
        fields.append(pa.field(column.name, arrow_type))
    return pa.schema(fields)


def for_spark(batch: Any, table: str) -> Any:
    """A record batch of the table's Arrow schema, its u64 columns cast to decimal(20,0)."""
    import pyarrow as pa

    target = spark_arrow_schema(table)
    arrays = [column if column.type == field.type else column.cast(field.type)
              for column, field in zip(batch.columns, target)]  # fmt: skip
    return pa.RecordBatch.from_arrays(arrays, schema=target)
