"""The tables a report draws, from a capture's analysis or from a directory of tables that
`analyze --format parquet|csv -o DIR` or the Spark job (`streamdissect spark --out DIR`) wrote.

    data = load(["capture.pcap"])          # analyze() with every table kept
    data = from_parquet("out/")            # whichever tables the directory holds
    data.table("stalls")                   # a DataFrame, empty (schema dtypes) when absent
    data.has("publishes")                  # was the table in the input at all?
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

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
                 first_ns: int | None = None, last_ns: int | None = None) -> None:  # fmt: skip
        self._tables = tables
        self._empty: dict[str, pd.DataFrame] = {}
        self.source = source
        # (the tables' times too: a connection's FIN can come after its last frame)
        low, high = _span(tables)
        self.first_ns = min((t for t in (first_ns, low) if t is not None), default=None)
        self.last_ns = max((t for t in (last_ns, high) if t is not None), default=None)

    def has(self, name: str) -> bool:
        """Whether the input had this table (it may have no rows)."""
        return self._tables.get(name) is not None

    def table(self, name: str) -> pd.DataFrame:
        """The table, or an empty one with the schema's columns and dtypes."""
        found = self._tables.get(name)
        if found is None:
            found = self._empty.get(name)
            if found is None:
                from streamdissect.tables.convert import dataframe

                found = self._empty[name] = dataframe(name, [])
        return found

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
        return any(len(self.table(name)) for name in ("requests", "latency", "deliveries",
                                                      "publishes", "throughput"))  # fmt: skip


def from_analysis(analysis: Analysis, source: str = "") -> ReportData:
    """The tables of an `analysis.analyze()` result."""
    tables = {name: getattr(analysis, name) for name in TABLES}
    tables.update((name, analysis.frame(name)) for name in analysis.other_tables())
    return ReportData(tables, source, analysis.first_ns, analysis.last_ns)


def load(captures: str | Sequence[str], **analyze_options) -> ReportData:
    """analyze() the capture (several files: one capture in time order) with every table
    kept (`report_only=False`); `analyze_options` go to analyze (ports, heuristic,
    max_frame, at_once_ms, on_read, helper_process)."""
    from streamdissect.analysis import analyze

    paths = [captures] if isinstance(captures, str) else list(captures)
    result = analyze(paths, report_only=False, **analyze_options)
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


def _span(tables: dict) -> tuple[int | None, int | None]:
    """The first and last capture time any table holds."""
    low = high = None
    for name, columns in TIME_COLUMNS.items():
        df = tables.get(name)
        if df is None or not len(df):
            continue
        for column in columns:
            values = df[column].dropna()
            if not len(values):
                continue
            first, last = int(values.min()), int(values.max())
            low = first if low is None else min(low, first)
            high = last if high is None else max(high, last)
    return low, high
