"""`spark.read.format("streamdissect")`: capture files as a DataFrame (a Python Data Source).

Options:
- `table`: `frames` (default), `connections` or `anomalies` (schema.py's columns), or a
  table of RocketMQ's (`rocketmq_frames`, `rocketmq_connections`, `rocketmq_requests`,
  `rocketmq_latency`, `rocketmq_sends`, ...: each file analysed alone);
- `table` `messages`: one row a message, as `analyze --messages` makes them, with
  `maxBody` (the bytes of a body previewed, default 256) and `bodies` (true/false, default
  true);
- `ports` (comma-separated: the Stream's, as `--port` names them, default 5552; with
  `heuristic` false, the Stream's alone), `heuristic` (true/false, default true);
- `mode`, as Spark's file sources have it: `PERMISSIVE` (default: a file that cannot be read
  as a capture, an empty one, or one damaged part way, goes on; the anomalies table has a
  row naming it and why), `DROPMALFORMED` (such files give no rows at all), `FAILFAST` (the
  job fails with a message naming the file);
- `pathGlobFilter`, `recursiveFileLookup`, as Spark's.

Each task reads its files one at a time (each file its own capture) and yields Arrow
record batches: frame_batches for frames (no Python object a frame on the bulk path), the
analysis' rows for the other tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from streamdissect.protocols.registry import PROTOCOLS, named_ports, tcp_port
from streamdissect.spark.files import list_files, pack
from streamdissect.spark.types import for_spark, spark_ddl
from streamdissect.tables import schema

# the Stream's frames, connections and anomalies, and every table of the protocols the
# job analyses per server (RocketMQ's: its frames, connections, calls, ...), each file alone
TABLES = ("frames", "connections", "anomalies", "messages",
          *(t for p in PROTOCOLS if p.analysed_per_server
            for t in (p.frames_table, *schema.analysis_tables(p.name, on_request=True))
            if t not in ("anomalies", *schema.ON_REQUEST)))  # fmt: skip
FRAMES_TABLES = {p.frames_table: p.name for p in PROTOCOLS}
MODES = ("PERMISSIVE", "DROPMALFORMED", "FAILFAST")
# File-level anomalies: the file, not a connection, is damaged.
FILE_KINDS = frozenset(("truncated_file", "bad_record", "unreadable_file"))


class StreamDissectSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "streamdissect"

    def _table(self) -> str:
        table = self.options.get("table", "frames")
        if table not in TABLES:
            raise ValueError(f"table must be one of {', '.join(TABLES)}, not {table!r}")
        return table

    def schema(self) -> str:
        return spark_ddl(self._table())

    def reader(self, schema: Any) -> DataSourceReader:
        return CaptureReader(self._table(), dict(self.options))


class FilesPartition(InputPartition):
    def __init__(self, files: list[str]) -> None:
        super().__init__(files)
        self.files = files


class CaptureReader(DataSourceReader):
    def __init__(self, table: str, options: dict[str, str]) -> None:
        self.table = table
        self.options = {k.lower(): v for k, v in options.items()}  # (Spark's are caseless)
        self.mode = self.options.get("mode", "PERMISSIVE").upper()
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        # (the Stream's ports as named, none: its default; _batches makes the map of them)
        self.ports = tuple(tcp_port(p) for p in self.options.get("ports", "").split(",") if p)
        self.heuristic = self.options.get("heuristic", "true").lower() != "false"
        self.messages = {"max_body": int(self.options.get("maxbody", "256")),
                         "bodies": self.options.get("bodies", "true").lower() != "false"}
        if self.messages["max_body"] < 0:
            raise ValueError("maxBody takes a number of bytes, 0 or more")

    def partitions(self) -> list[FilesPartition]:
        paths = _paths(self.options.get("paths") or self.options.get("path") or "")
        files = list_files(paths, self.options.get("pathglobfilter"),
                           self.options.get("recursivefilelookup", "false").lower() == "true")
        slots = int(self.options.get("slots", "0")) or _default_slots()
        return [FilesPartition(group) for group in pack(files, slots)]

    def read(self, partition: FilesPartition) -> Iterator[Any]:
        for path in partition.files:
            yield from self._file(path)

    def _file(self, path: str) -> Iterator[Any]:
        from streamdissect.capture import CaptureError

        try:
            batches = list(_batches(path, self.table, self.ports, self.heuristic,
                                    self.messages))  # fmt: skip
        except CaptureError as exc:
            if self.mode == "FAILFAST":
                raise RuntimeError(f"streamdissect: {path}: {exc}") from None
            if self.mode == "PERMISSIVE" and self.table == "anomalies":
                yield for_spark(_unreadable(path, str(exc)), "anomalies")
            return
        damage = _file_damage(path, batches, self.table, self.ports, self.heuristic)
        if damage is not None:
            if self.mode == "FAILFAST":
                raise RuntimeError(f"streamdissect: {path}: {damage}")
            if self.mode == "DROPMALFORMED":
                return
        for batch in batches:
            yield for_spark(batch, self.table)


def _paths(value: str) -> list[str]:
    """`paths` as DataFrameReader.load passes several (a JSON list), or one path."""
    import json

    if not value:
        raise ValueError("load() needs a path: a file, a glob or a directory")
    try:
        parsed = json.loads(value)
    except ValueError:
        return [value]
    return [str(p) for p in parsed] if isinstance(parsed, list) else [value]


def _default_slots() -> int:
    import os

    return os.cpu_count() or 1


def _batches(path: str, table: str, ports: tuple[int, ...], heuristic: bool,
             messages: dict | None = None) -> Iterator[Any]:  # fmt: skip
    """The table's Arrow record batches for one capture file (CaptureError: not readable);
    `messages`: analyze()'s max_body and bodies for the messages table."""
    import pyarrow as pa

    # (`ports` are the Stream's as the user names them: each protocol's, as the command
    # line's --port makes them, in every table)
    named = named_ports({PROTOCOLS[0].name: ports}, heuristic)

    if table in FRAMES_TABLES:
        from streamdissect.tables.batches import frame_batches

        yield from frame_batches(path, ports=named, heuristic=heuristic, helper_process=False,
                                 protocol=FRAMES_TABLES[table])  # fmt: skip
        return
    from streamdissect.analysis.driver import analyze

    # (the Stream's report tables are all a report_only run makes; another protocol's
    # table of a row a call needs the full run)
    wanted = {"messages": True, **(messages or {})} if table == "messages" else {}
    analysis = analyze(path, ports=named, heuristic=heuristic,
                       report_only=table in ("connections", "anomalies", "messages"),
                       helper_process=False, **wanted)  # fmt: skip
    try:
        found = analysis.rows(table)
    except KeyError:  # (another protocol's table, and the file carried none of its traffic)
        found = []
    rows = [_row(table, row) for row in found]
    yield pa.RecordBatch.from_pylist(rows, schema=schema.arrow_schema(table))


def _row(table: str, row: Any) -> dict:
    names = schema.column_names(table)
    if isinstance(row, dict):
        return {name: schema.fit(kind, row.get(name)) for name, kind in
                zip(names, (c.kind for c in schema.TABLES[table]))}  # fmt: skip
    return {c.name: schema.fit(c.kind, value) for c, value in zip(schema.TABLES[table], row)}


def _file_damage(path: str, batches: list, table: str, ports: tuple[int, ...],
                 heuristic: bool) -> str | None:  # fmt: skip
    """Why the file is damaged (a file-level anomaly), or None."""
    if table == "anomalies":
        rows = [r for b in batches for r in b.to_pylist()]
    else:
        rows = [r for b in _batches(path, "anomalies", ports, heuristic) for r in b.to_pylist()]
    for row in rows:
        if row["kind"] in FILE_KINDS and row["connection"] is None:
            return f"{row['kind']}: {row['detail']}"
    return None


def _unreadable(path: str, reason: str) -> Any:
    from streamdissect.spark.tasks import unreadable

    return unreadable(path, reason).to_batches()[0]
