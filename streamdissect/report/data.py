"""The tables a report draws, from a capture's analysis or from a directory of tables that
`analyze --format parquet|csv -o DIR` or the Spark job (`streamdissect spark --out DIR`) wrote.

    data = load(["capture.pcap"])          # analyze() with every table kept
    data = from_parquet("out/")            # whichever tables the directory holds
    data.table("stalls")                   # a DataFrame, empty (schema dtypes) when absent
    data.has("publishes")                  # was the table in the input at all?
    for part in data.chunks("backlog"): ...  # the same rows, CHUNK at a time (the figures)

A capture's analysis is kept as its rows (analysis.compact.CompactRows: past a few MB in a
temporary file) and a table is made a DataFrame only when asked for (`table`): the report
draws the large tables (a row per publishing id, per frame, per Deliver) from `chunks`, so
that a capture ten times as long is drawn in the same memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from streamdissect.protocols import registry
from streamdissect.tables import schema

if TYPE_CHECKING:
    import pandas as pd

    from streamdissect.analysis.driver import Analysis

# The tables a report reads (every analysis table; frames are never needed).
TABLES = schema.analysis_tables()
# The other protocols' analysis tables: drawn when the input has them, never missing.
OTHER_TABLES = tuple(name for p in registry.PROTOCOLS[1:] for name in schema.analysis_tables(p.name)
                     if name not in TABLES)  # fmt: skip
# Rows of a table read at once by `chunks`.
CHUNK = 1 << 14
# Anomaly kinds that stand for a frame that could not be read.
DAMAGED = ("malformed", "truncated")
# Columns that hold a capture time, for the span of a directory of tables.
TIME_COLUMNS = {"connections": ("start_ns", "end_ns"), "requests": ("request_ts_ns",),
                "publishes": ("publish_ts_ns",), "backlog": ("ts_ns",),
                "stalls": ("start_ns", "end_ns"), "credit_balance": ("ts_ns",),
                "deliveries": ("ts_ns",), "throughput": ("second_ns",),
                "anomalies": ("ts_ns",),
                "rocketmq_connections": ("start_ns", "end_ns"),
                "rocketmq_requests": ("request_ts_ns", "response_ts_ns")}  # fmt: skip


class ReportData:
    """The analysis tables of one capture (or archive) and its time span in ns."""

    def __init__(self, tables: dict[str, pd.DataFrame | None], source: str,
                 first_ns: int | None = None, last_ns: int | None = None,
                 analysis: Analysis | None = None, lazy: Sequence[str] = ()) -> None:  # fmt: skip
        """`tables`: DataFrames (None: not in the input); the tables named in `lazy` are
        `analysis`'s rows, each made a DataFrame when first asked for."""
        self._tables = tables
        self._empty: dict[str, pd.DataFrame] = {}
        self._analysis = analysis
        self._lazy = dict.fromkeys(lazy)  # (a dict: ordered, and quick to ask)
        self._rows: dict[str, Any] = {}
        self.source = source
        # (the tables' times too: a connection's FIN can come after its last frame)
        low, high = _span(self)
        self.first_ns = min((t for t in (first_ns, low) if t is not None), default=None)
        self.last_ns = max((t for t in (last_ns, high) if t is not None), default=None)

    def has(self, name: str) -> bool:
        """Whether the input had this table (it may have no rows)."""
        return self._tables.get(name) is not None or name in self._lazy

    def table(self, name: str) -> pd.DataFrame:
        """The table, or an empty one with the schema's columns and dtypes."""
        if name in self._lazy:
            self._tables[name] = self._analysis.frame(name)
            del self._lazy[name]
            self._rows.pop(name, None)
        found = self._tables.get(name)
        if found is None:
            found = self._empty.get(name)
            if found is None:
                from streamdissect.tables.convert import dataframe

                found = self._empty[name] = dataframe(name, [])
        return found

    def count(self, name: str) -> int:
        """The table's number of rows (0 when absent), without making it a DataFrame."""
        if name in self._lazy:
            return len(self._analysis_rows(name))
        found = self._tables.get(name)
        return 0 if found is None else len(found)

    def chunks(self, name: str, size: int | None = None) -> Iterator[pd.DataFrame]:
        """The table's rows in order, as DataFrames of at most `size` (CHUNK) rows with the
        table's columns and dtypes (none when the table is empty or absent)."""
        size = size or CHUNK
        if name not in self._lazy:
            found = self._tables.get(name)
            if found is not None:
                for at in range(0, len(found), size):
                    yield found.iloc[at : at + size]
            return
        from streamdissect.tables.convert import dataframe

        rows = self._analysis_rows(name)
        for at in range(0, len(rows), size):
            piece = (_ColumnSlice(rows, at, min(at + size, len(rows)))
                     if hasattr(rows, "column_slices") else rows[at : at + size])  # fmt: skip
            yield dataframe(name, piece)

    def batches(self, name: str, names: Sequence[str]) -> Iterator[Any]:
        """The columns `names` of the table's rows in order, as pyarrow Tables of a chunk of
        rows each (none when the table is empty or absent): what a figure reads of a large
        table, no other column converted. A missing value (and a float NaN) is null."""
        import pyarrow as pa

        names = list(names)
        if name not in self._lazy:
            found = self._tables.get(name)
            if found is not None:
                for at in range(0, len(found), CHUNK):
                    yield pa.Table.from_pandas(found.iloc[at : at + CHUNK][names],
                                               preserve_index=False)  # fmt: skip
            return
        from streamdissect.tables.convert import arrow_columns

        rows = self._analysis_rows(name)
        if hasattr(rows, "column_chunks"):
            where = schema.column_names(name)
            for columns in rows.column_chunks([where.index(n) for n in names], CHUNK):
                yield arrow_columns(name, names, columns)
            return
        for part in self.chunks(name):  # (rows kept otherwise: a short table, or the stalls)
            yield pa.Table.from_pandas(part[names], preserve_index=False)

    def head(self, name: str, n: int) -> pd.DataFrame:
        """The table's first `n` rows (schema columns and dtypes)."""
        for part in self.chunks(name, n):
            return part
        return self.table(name)  # (empty)

    def _analysis_rows(self, name: str) -> Any:
        rows = self._rows.get(name)
        if rows is None:
            rows = self._rows[name] = self._analysis.rows(name)
        return rows

    @property
    def missing(self) -> list[str]:
        """The tables the input did not have."""
        return [name for name in TABLES if not self.has(name)]

    @property
    def frames(self) -> int:
        """Frames seen (both directions, every connection, every protocol)."""
        return sum(n for _, n in self.frames_by_protocol)

    @property
    def frames_by_protocol(self) -> list[tuple[str, int]]:
        """(protocol title, its frames seen) for each protocol with a connections table:
        the default protocol always, the others when the input has frames of theirs."""
        counts = []
        for k, p in enumerate(registry.PROTOCOLS):
            if p.connections_table is None:
                continue
            c = self.table(p.connections_table)
            n = int(c["frames_c2s"].fillna(0).sum() + c["frames_s2c"].fillna(0).sum())
            if n or k == 0:
                counts.append((p.title, n))
        return counts

    @property
    def damaged_frames(self) -> int:
        """Frames the codec could not read (each is an anomaly: malformed, truncated)."""
        kinds = self.table("anomalies")["kind"]
        return int(kinds.isin(DAMAGED).sum())

    @property
    def has_traffic(self) -> bool:
        """Whether any Stream frame could be read: a capture of other traffic, or of damaged
        frames only, has none. (A directory without a connections table: whether any table
        that frames fill has rows.)"""
        if self.has("connections"):
            return self.frames > self.damaged_frames
        return any(self.count(name) for name in ("requests", "latency", "deliveries",
                                                      "publishes", "throughput"))  # fmt: skip


def from_analysis(analysis: Analysis, source: str = "") -> ReportData:
    """The tables of an `analysis.analyze()` result (each a DataFrame when first asked for
    by `table`)."""
    return ReportData({}, source, analysis.first_ns, analysis.last_ns, analysis,
                      lazy=[*TABLES, *analysis.other_tables()])  # fmt: skip


def load(captures: str | Sequence[str], **analyze_options) -> ReportData:
    """analyze() the capture (several files: one capture in time order) with every table
    kept (`report_only=False`); `analyze_options` go to analyze (ports, heuristic,
    max_frame, at_once_ms, on_read, helper_process)."""
    from streamdissect.analysis import analyze

    paths = [captures] if isinstance(captures, str) else list(captures)
    from streamdissect.tables.convert import release_free_memory

    result = analyze(paths, report_only=False, **analyze_options)
    release_free_memory()  # (what the run freed, before the figures are drawn beside it)
    return from_analysis(result, ", ".join(os.path.basename(p) for p in paths))


def from_parquet(directory: str) -> ReportData:
    """The tables in `directory`: DIR/TABLE/ Parquet datasets (the CLI's or Spark's part
    files) or DIR/TABLE.csv; a table that is not there is missing, not an error. Raises
    FileNotFoundError when no table is there at all."""
    from streamdissect.tables.export import read_table

    tables: dict[str, pd.DataFrame | None] = {}
    for name in TABLES + OTHER_TABLES:
        folder, csv = os.path.join(directory, name), os.path.join(directory, f"{name}.csv")
        if os.path.isdir(folder) and _has_parts(folder):
            tables[name] = read_table(folder, name)
        elif os.path.isfile(csv):
            tables[name] = read_table(csv, name)
        else:
            tables[name] = None
    if all(t is None for t in tables.values()):
        raise FileNotFoundError(f"no analysis tables in {directory} (expected TABLE/ Parquet "
                                "datasets or TABLE.csv files, as analyze -o or spark --out "
                                "write them)")  # fmt: skip
    return ReportData(tables, os.path.basename(os.path.normpath(directory)) or directory)


def _has_parts(folder: str) -> bool:
    return any(name.endswith(".parquet") for name in os.listdir(folder))


class _ColumnSlice:
    """Rows [start, stop) of a CompactRows, read as columns by tables.convert.dataframe."""

    def __init__(self, rows: Any, start: int, stop: int) -> None:
        self._rows, self._start, self._stop = rows, start, stop

    def __len__(self) -> int:
        return self._stop - self._start

    def columns(self) -> list[tuple]:
        return [(values, None) for values in self._rows.column_slices(self._start, self._stop)]


def _span(data: ReportData) -> tuple[int | None, int | None]:
    """The first and last capture time any table holds (its time columns read a chunk at a
    time)."""
    import pyarrow.compute as pc

    low = high = None
    for name, columns in TIME_COLUMNS.items():
        for part in data.batches(name, columns):
            for column in columns:
                found = pc.min_max(part[column]).as_py()
                if found["min"] is None:
                    continue
                first, last = int(found["min"]), int(found["max"])
                low = first if low is None else min(low, first)
                high = last if high is None else max(high, last)
    return low, high
