"""`streamdissect spark INPUT... --out DIR`: the analysis tables of a capture archive, one
Parquet dataset each, in the layout `analyze --format parquet -o DIR` writes.

Three stages of tasks (tasks.py); only file facts and row counts reach the driver:
1. Each file is analysed apart, exactly as the CLI does, its rows of every table written
   as Parquet part files by the task; the task returns what the file says at its edges.
2. The driver makes the stitching plan (rotated.stitch): which files are pieces of one
   rotated capture (tcpdump -C/-G/-W), which connections carry on across them. When there
   are such sets, each of their files is a task again: its rows renamed as the set has them,
   the frames of its connections that cross a cut written out per bucket of connections.
3. Each bucket is a task: its connections analysed from all their frames with the columnar
   analyses, the frames across the cuts included (rotated.apply.chain_tables).
Tables of one connection (connections, confirms, credit, stalls, deliveries, anomalies,
frames) are then the part files, moved in place. Tables across connections are Spark
operations over the part files: latency from every request (counts summed, percentiles with
Spark's exact `percentile`, linear between ranks like the CLI's), throughput and errors
summed per second and per (command, code).
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import replace
from typing import Any

from streamdissect.protocols.registry import PROTOCOLS
from streamdissect.spark.files import list_files, pack
from streamdissect.spark.tasks import (
    SERVERS_DIR,
    analyse_chains,
    analyse_pieces,
    analyse_server,
    bucket_of,
    part_path,
    server_folder,
    stitch_piece,
    visible_parts,
    write_whole,
)
from streamdissect.tables import schema

# The protocols analysed per server (Protocol.analysed_per_server: RocketMQ), and their
# tables: every analysis table by default, the frames table on request.
PER_SERVER = tuple(p for p in PROTOCOLS if p.analysed_per_server)
SERVER_TABLES = {p.name: tuple(t for t in schema.analysis_tables(p.name, on_request=True)
                               if t not in ("anomalies", *schema.ON_REQUEST)) for p in PER_SERVER}  # fmt: skip
TABLES = ("connections", "latency", "confirms", "credit", "stalls", "deliveries",
          "throughput", "errors", "anomalies",
          *(t for tables in SERVER_TABLES.values() for t in tables))  # fmt: skip
OPTIONAL = ("frames", "requests", "publishes", "backlog", "credit_balance", "messages",
            *(p.frames_table for p in PER_SERVER))  # on request  # fmt: skip
# Tables of protocols analysed per server without a server column (RocketMQ's errors, per
# request, code and topic): the servers' rows summed up (the others are per server, or per
# connection: their tasks' parts are the table).
ACROSS_SERVERS = frozenset(t for tables in SERVER_TABLES.values() for t in tables
                           if "server" not in schema.column_names(t))  # fmt: skip
# Tables of a row per id or per change (what the report's figures draw): the files are then
# analysed keeping them (analyze() without report_only), which costs more.
PER_ID = ("publishes", "backlog", "credit_balance")
# Tables of one connection: the tasks' part files are the table (moved in place; requests
# copied, the latency table is made from them).
IN_PLACE = frozenset(("connections", "confirms", "credit", "stalls", "deliveries",
                      "anomalies", "frames", "requests", "messages", *PER_ID,
                      *(t for t in TABLES + OPTIONAL if t not in ACROSS_SERVERS
                        and any(t in SERVER_TABLES[p.name] or t == p.frames_table
                                for p in PER_SERVER))))  # fmt: skip
CHAINS_PER_BUCKET = 64


def run_job(spark: Any, inputs: list[str], out: str, tables: tuple[str, ...] = TABLES,
            ports: tuple[int, ...] | dict[str, tuple[int, ...]] = (5552,),
            heuristic: bool = True, partitions: int | None = None, stats: dict | None = None,
            messages: dict | None = None) -> dict[str, int]:  # fmt: skip
    """Write the tables under `out`; their row counts. `partitions`: at least this many
    tasks (default: Spark's parallelism). `messages`: analyze()'s max_body and bodies for
    the messages table, when asked for (each file's, as `analyze --messages` makes it). `stats`, when given, is filled with what the run
    did: files, tasks, rotated sets, chains, and the seconds the tasks worked."""
    from streamdissect.rotated.facts import PieceFacts
    from streamdissect.rotated.stitch import plan

    files = list_files(inputs, recursive=True)
    if not files:
        raise FileNotFoundError("no capture files in " + ", ".join(inputs))
    sc = spark.sparkContext
    slots = partitions or sc.defaultParallelism
    index = {f.path: k for k, f in enumerate(files)}
    groups = [[(index[p], p) for p in group] for group in pack(files, slots)]
    work = os.path.join(out, f"_parts-{uuid.uuid4().hex[:8]}")
    for table in tables:  # (a table is the job's alone: nothing of an earlier run stays)
        shutil.rmtree(os.path.join(out, table), ignore_errors=True)
    options = {"work": work, "ports": ports, "heuristic": heuristic,
               "frames": "frames" in tables, "clock": sc.accumulator(0.0),
               "per_id": tuple(t for t in PER_ID if t in tables),
               "per_server": {p.name: wanted for p in PER_SERVER if (wanted := tuple(
                   t for t in tables if t in SERVER_TABLES[p.name] or t == p.frames_table))},
               "messages": ({"max_body": 256, "bodies": True} | (messages or {})
                            if "messages" in tables else None)}  # fmt: skip
    clock = time.perf_counter()
    found = sc.parallelize(groups, len(groups)).flatMap(
        lambda item: analyse_pieces(item, options)).collect()  # fmt: skip
    stages = {"analyse": time.perf_counter() - clock}
    pieces = [PieceFacts(f.path, None, None) for f in files]
    for k, facts in found:
        pieces[k] = facts
    the_plan = plan(pieces)
    clock = time.perf_counter()
    if the_plan.chains or any(len(s) > 1 for s in the_plan.sets):
        _stitch(sc, the_plan, [f.path for f in files], options, slots)
    stages["stitch"] = time.perf_counter() - clock
    clock = time.perf_counter()
    if options["per_server"]:
        _per_server(sc, the_plan, options, slots)
    stages["servers"] = time.perf_counter() - clock
    clock = time.perf_counter()
    # (the tables across connections are small: Spark's default 200 shuffle partitions
    # would be 200 tasks each for a few thousand rows)
    shuffle = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(max(1, slots)))
    try:
        # (the Spark tables' jobs at once: most of their time is scheduling, not work)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=3) as pool:
            futures = {table: pool.submit(_finish_table, spark, table, work, out)
                       for table in tables if table not in IN_PLACE}  # fmt: skip
            written = {table: _finish_table(spark, table, work, out) for table in tables
                       if table in IN_PLACE}  # fmt: skip
            written |= {table: future.result() for table, future in futures.items()}
        written = {table: written[table] for table in tables}
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", shuffle)
    stages["tables"] = time.perf_counter() - clock
    shutil.rmtree(work, ignore_errors=True)
    if stats is not None:
        stats.update(files=len(files), tasks=len(groups), chains=len(the_plan.chains),
                     rotated_sets=sum(len(s) > 1 for s in the_plan.sets),
                     task_seconds=options["clock"].value, stage_seconds=stages)  # fmt: skip
    return written


def _per_server(sc: Any, the_plan: Any, options: dict, slots: int) -> None:
    """Stage 4: each server of each protocol analysed per server, a task a server (its
    chains' frames across the cuts sent along)."""
    from streamdissect.rotated.apply import cut_frames
    from streamdissect.rotated.servers import server_of

    light = replace(the_plan, anomalies=[],
                    chains={k: replace(c, frames=[]) for k, c in the_plan.chains.items()})  # fmt: skip
    items = []
    for name in options["per_server"]:
        root = os.path.join(options["work"], SERVERS_DIR, name)
        folders = {os.path.join(root, f) for f in visible_parts(root)}
        chains: dict[str, list] = {}
        for chain in the_plan.chains.values():
            if chain.protocol == name:
                folder = server_folder(options["work"], name, server_of(chain.name))
                folders.add(folder)
                chains.setdefault(folder, []).append(chain)
        for folder in sorted(folders):
            mine = chains.get(folder, [])
            items.append((name, folder, [light.chains[c.key] for c in mine],
                          [_ipc(cut_frames(c)) for c in mine]))  # fmt: skip
    if not items:
        return
    shared = sc.broadcast(light)
    sc.parallelize(items, max(1, min(len(items), slots * 4))).foreach(
        lambda item: analyse_server(item, shared.value, options))  # fmt: skip
    shared.unpersist()


def _stitch(sc: Any, the_plan: Any, paths: list[str], options: dict, slots: int) -> None:
    """Stages 2 and 3: the files of rotated sets, then their chains (those of the protocols
    analysed per file: the others' are stage 4's)."""
    from streamdissect.protocols.registry import protocol
    from streamdissect.rotated.apply import cut_frames

    chains = [c for c in the_plan.chains.values()
              if not protocol(c.protocol).analysed_per_server]  # fmt: skip
    # a task a connection while there are few (both cores busy), then up to 64 a task
    buckets = max(1, min(len(chains), max(4 * slots, -(-len(chains) // CHAINS_PER_BUCKET))))
    options = {**options, "buckets": buckets}
    cuts = {chain.key: cut_frames(chain) for chain in chains}  # (small: frames at the cuts)
    light = replace(the_plan, anomalies=[],
                    chains={c.key: replace(c, frames=[]) for c in chains})  # fmt: skip
    shared = sc.broadcast(light)
    members = [(k, paths[k]) for s in the_plan.sets if len(s) > 1 for k in s]
    sc.parallelize(members, max(1, min(len(members), slots * 4))).foreach(
        lambda item: stitch_piece(item[0], item[1], shared.value, options))  # fmt: skip
    by_bucket: dict[int, list] = {}
    for chain in chains:
        by_bucket.setdefault(bucket_of(chain.key, buckets), []).append(
            (light.chains[chain.key], _ipc(cuts[chain.key])))  # fmt: skip
    if by_bucket:
        sc.parallelize(sorted(by_bucket.items()), len(by_bucket)).foreach(
            lambda item: analyse_chains(item[0], item[1], options))  # fmt: skip
    _write_driver_rows(the_plan, cuts, options)
    shared.unpersist()


def _ipc(table: Any) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _write_driver_rows(the_plan: Any, cuts: dict, options: dict) -> None:
    """The anomalies found at the cuts, and (frames on request) the frames across them."""
    import pyarrow as pa

    from streamdissect.rotated.local import anomaly_rows

    if the_plan.anomalies:
        write_whole(anomaly_rows(the_plan.anomalies),
                    part_path(options["work"], "anomalies", "cuts"))  # fmt: skip
    if options["frames"] and cuts:
        names = schema.column_names("frames")
        every = pa.concat_tables([cut.select(names) for cut in cuts.values()])
        if every.num_rows:
            write_whole(every, part_path(options["work"], "frames", "cuts"))


def _finish_table(spark: Any, table: str, work: str, out: str) -> int:
    folder = os.path.join(out, table)
    if table in IN_PLACE:
        parts = os.path.join(work, table)
        names = visible_parts(parts)
        if names:
            os.makedirs(folder, exist_ok=True)
            for name in names:
                source, target = os.path.join(parts, name), os.path.join(folder, name)
                if table == "requests":
                    shutil.copyfile(source, target)
                else:
                    os.replace(source, target)
        else:
            _write_empty(folder, table)
    else:
        source = "requests" if table == "latency" else table
        parts = os.path.join(work, source)
        if visible_parts(parts):
            from streamdissect.spark.types import spark_ddl

            frame = spark.read.schema(spark_ddl(source)).parquet(_literal(parts))
        else:
            frame = _empty(spark, source)
        _finish(table, frame).write.mode("overwrite").parquet(folder)  # (written as named)
    return _rows_written(folder)


def _literal(path: str) -> str:
    """A path as Hadoop's file systems take it literally (they read [, ], {, }, *, ? as a
    glob)."""
    return "".join("\\" + c if c in "[]{}*?" else c for c in path)


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


def _empty(spark: Any, table: str) -> Any:
    from streamdissect.spark.types import spark_ddl

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
    # (stitching takes back what a rotated set's pieces counted: a key left at nothing
    # is no row)
    if table == "throughput":
        names = schema.column_names(table)[1:]
        sums = [F.sum(c).cast("bigint").alias(c) for c in names]
        counted = " OR ".join(f"{c} != 0" for c in names)
        return frame.groupBy("second_ns").agg(*sums).where(counted).orderBy("second_ns")
    if table in ACROSS_SERVERS:  # (errors: each server's counts summed, the first remark)
        keys = [c for c in schema.column_names(table)
                if c not in ("count", "remark", "first_ts_ns")]  # fmt: skip
        return (frame.groupBy(*keys).agg(F.sum("count").cast("bigint").alias("count"),
                                         F.min_by("remark", "first_ts_ns").alias("remark"),
                                         F.min("first_ts_ns").alias("first_ts_ns"))
                .select(*schema.column_names(table)))  # fmt: skip
    if table == "errors":
        return (frame.groupBy("command", "code", "code_name")
                .agg(F.sum("count").cast("bigint").alias("count")).where("count != 0")
                .select(*schema.column_names("errors")))  # fmt: skip
    return frame.select(*schema.column_names(table))
