"""Analysis.arrow(table), made without pandas for the Spark tasks' Parquet parts, holds the
same values as the pandas table converted by Arrow, on every shipped capture and a capture
of odd values (the fuzz regressions)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import worsen

from streamdissect.analysis.driver import analyze
from streamdissect.tables import schema

TABLES = ("connections", "requests", "latency", "publishes", "confirms", "backlog", "credit",
          "stalls", "credit_balance", "deliveries", "throughput", "errors", "anomalies")  # fmt: skip
REGRESSIONS = sorted((Path(__file__).parent / "regressions").glob("*.pcap"))


@pytest.mark.parametrize("capture", sorted(worsen.CAPTURES.glob("*.pcap")) + REGRESSIONS[:20],
                         ids=lambda p: p.stem)  # fmt: skip
def test_arrow_tables_equal_the_pandas_tables(capture):
    analysis = analyze(str(capture), ports=(5552, 5553))
    for table in TABLES:
        frame = getattr(analysis, table)
        expected = pa.Table.from_pandas(frame[schema.column_names(table)],
                                        schema=schema.arrow_schema(table), preserve_index=False)  # fmt: skip
        assert analysis.arrow(table).equals(expected), table
