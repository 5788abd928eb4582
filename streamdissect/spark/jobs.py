"""`streamdissect spark INPUT... --out DIR`: the analysis tables of a capture archive, one
Parquet dataset each, in the layout `analyze --format parquet -o DIR` writes.

Each task analyses its files with the core, exactly as the CLI does (a file is a capture:
its connections are analysed together), and writes its rows of every table as Parquet part
files itself; only row counts reach the driver. Tables of one connection (connections,
confirms, credit, stalls, deliveries, anomalies) are those rows. Tables across connections
are Spark operations over the tasks' rows: latency from every request (counts summed,
percentiles with Spark's exact `percentile`, linear between ranks like the CLI's),
throughput and errors summed per second and per (command, code).
"""

from __future__ import annotations

import os
import shutil
import uuid
from typing import Any

from .. import schema
from .files import list_files, pack

TABLES = ("connections", "latency", "confirms", "credit", "stalls", "deliveries",
          "throughput", "errors", "anomalies")  # fmt: skip
# what the tasks write: the tables above, with requests in place of latency
TASK_TABLES = ("connections", "requests", "confirms", "credit", "stalls", "deliveries",
               "throughput", "errors", "anomalies")  # fmt: skip
# Tables of one connection: the tasks' part files are the table (written in place).
IN_PLACE = frozenset(("connections", "confirms", "credit", "stalls", "deliveries",
                      "anomalies"))  # fmt: skip


def run_job(spark: Any, inputs: list[str], out: str, tables: tuple[str, ...] = TABLES,
            ports: tuple[int, ...] = (5552,), heuristic: bool = True,
            partitions: int | None = None) -> dict[str, int]:  # fmt: skip
    """Write the tables under `out`; their row counts. `partitions`: at least this many
    tasks (default: Spark's parallelism)."""
    files = list_files(inputs, recursive=True)
    if not files:
        raise FileNotFoundError("no capture files in " + ", ".join(inputs))
    slots = partitions or spark.sparkContext.defaultParallelism
    groups = pack(files, slots)
    work = os.path.join(out, f"_parts-{uuid.uuid4().hex[:8]}")
    for table in tables:  # (a table is the job's alone: nothing of an earlier run stays)
        shutil.rmtree(os.path.join(out, table), ignore_errors=True)
    options = (work, out, ports, heuristic)
    rdd = spark.sparkContext.parallelize(list(enumerate(groups)), len(groups))
    rdd.map(lambda item: _task(item, options)).count()  # (each task writes its parts)
    written = {}
    for table in tables:
        folder = os.path.join(out, table)
        if table in IN_PLACE:
            if not os.path.isdir(folder) or not os.listdir(folder):
                _write_empty(folder, table)
        else:
            source = "requests" if table == "latency" else table
            parts = os.path.join(work, source)
            frame = spark.read.parquet(parts) if os.path.isdir(parts) else _empty(spark, source)
            _finish(table, frame).write.mode("overwrite").parquet(folder)
        written[table] = _rows_written(folder)
    shutil.rmtree(work, ignore_errors=True)
    return written


def _write_empty(folder: str, table: str) -> None:
    """A table with no rows, as a dataset of one empty part (readable, with its columns)."""
    import pyarrow.parquet as pq

    os.makedirs(folder, exist_ok=True)
    pq.write_table(schema.arrow_schema(table).empty_table(),
                   os.path.join(folder, "part-00000.parquet"))  # fmt: skip


def _rows_written(folder: str) -> int:
    """The rows of a Parquet dataset, from its files' footers (no Spark job)."""
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(os.path.join(folder, name)).num_rows
               for name in os.listdir(folder) if name.endswith(".parquet"))  # fmt: skip


def _task(item: tuple[int, list[str]], options: tuple) -> int:
    """(In a Spark task.) Every file of the group analysed, each table's rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..analysis.run import analyze
    from ..capture import CaptureError

    index, files = item
    work, out, ports, heuristic = options
    rows = 0
    for k, path in enumerate(files):
        try:
            analysis = analyze(path, ports=ports, heuristic=heuristic, report_only=True,
                               helper_process=False)  # fmt: skip
        except CaptureError:
            continue  # (the data source's anomalies table names such files)
        for table in TASK_TABLES:
            frame = getattr(analysis, table)
            if frame.empty:
                continue
            arrow = pa.Table.from_pandas(frame[schema.column_names(table)],
                                         schema=schema.arrow_schema(table), preserve_index=False)  # fmt: skip
            folder = os.path.join(out if table in IN_PLACE else work, table)
            os.makedirs(folder, exist_ok=True)
            pq.write_table(arrow, os.path.join(folder, f"part-{index:05d}-{k:05d}.parquet"))
            rows += arrow.num_rows
    return rows


def _empty(spark: Any, table: str) -> Any:
    from .types import spark_ddl

    return spark.createDataFrame([], spark_ddl(table))


def _finish(table: str, frame: Any) -> Any:
    """The final table from the tasks' rows."""
    from pyspark.sql import functions as F

    if table == "latency":
        status = F.col("status")
        answered = F.when(status == "answered", F.col("latency_ms"))
        percentile = {name: F.percentile(answered, fraction)
                      for name, fraction in (("p50_ms", 0.5), ("p75_ms", 0.75), ("p95_ms", 0.95),
                                             ("p99_ms", 0.99))}  # fmt: skip
        return frame.groupBy("command").agg(
            F.sum(F.when(status != "orphan_response", 1).otherwise(0)).cast("bigint")
            .alias("calls"),
            F.sum(F.when(status == "answered", 1).otherwise(0)).cast("bigint").alias("answered"),
            F.sum(F.when(status.isin("open", "duplicate"), 1).otherwise(0)).cast("bigint")
            .alias("open_requests"),
            F.sum(F.when(status == "orphan_response", 1).otherwise(0)).cast("bigint")
            .alias("orphan_responses"),
            F.sum(F.when(status == "duplicate", 1).otherwise(0)).cast("bigint")
            .alias("duplicate_ids"),
            F.min(answered).alias("min_ms"),
            *(column.alias(name) for name, column in percentile.items()),
            F.max(answered).alias("max_ms"),
        ).select(*schema.column_names("latency"))  # fmt: skip
    if table == "throughput":
        sums = [F.sum(c).cast("bigint").alias(c) for c in schema.column_names(table)[1:]]
        return frame.groupBy("second_ns").agg(*sums).orderBy("second_ns")
    if table == "errors":
        return (frame.groupBy("command", "code", "code_name")
                .agg(F.sum("count").cast("bigint").alias("count"))
                .select(*schema.column_names("errors")))  # fmt: skip
    return frame.select(*schema.column_names(table))
