"""The messages table in Spark, on request: `streamdissect spark --tables messages` writes
each file's messages as `analyze --messages` makes them (messages_table(), the reference),
with --max-body and --no-bodies; Spark itself reads the table, the application properties
a map<string,string>; the data source gives the same rows (`table` `messages`, `maxBody`,
`bodies`). Real local Spark (the tests' shared session)."""

from __future__ import annotations

import pandas as pd
import pytest
from messages_truth import CAPTURES

from streamdissect.analysis import messages_table
from streamdissect.tables import schema
from streamdissect.tables.export import read_table

# captures with messages, application properties and sub-batches; no four-tuple shared
FILES = [CAPTURES / f"{name}.pcap" for name in (
    "rbfly-filter-4.0", "rstream-sub-entry-3.10", "rstream-superstream-4.0")]  # fmt: skip
ORDER = ["connection", "ts_ns", "frame", "index"]


def reference(**options) -> pd.DataFrame:
    """Each file's messages table, as analyze --messages makes it, one after the other."""
    every = pd.concat([messages_table(str(path), **options) for path in FILES])
    return every.sort_values(ORDER, ignore_index=True)


def job_table(spark_command, tmp_path, *extra) -> pd.DataFrame:
    out = tmp_path / "out"
    code, printed = spark_command(*FILES, "--out", out, "--master", "local[2]",
                                  "--tables", "connections,messages", *extra)  # fmt: skip
    assert code == 0 and "messages" in printed
    return out, read_table(str(out / "messages"), "messages").sort_values(ORDER,
                                                                          ignore_index=True)


def test_the_job_writes_the_messages_table_of_analyze(spark_command, spark, tmp_path):
    out, table = job_table(spark_command, tmp_path)
    expected = reference()
    assert len(table) == len(expected) > 200
    pd.testing.assert_frame_equal(table, expected, check_dtype=False)
    assert table["body_preview"].notna().all()
    assert table["application_properties"].notna().any()
    # Spark reads it: the application properties a map of strings, each row's the table's
    from pyspark.sql.types import MapType, StringType

    frame = spark.read.parquet(str(out / "messages"))
    assert frame.schema["application_properties"].dataType == MapType(StringType(),
                                                                        StringType())  # fmt: skip
    rows = frame.select(*ORDER, "application_properties").orderBy(*ORDER).collect()
    assert [r["application_properties"] for r in rows] == \
        [None if c is None or c is pd.NA else dict(c) for c in expected["application_properties"]]
    # (asked for only: the default tables leave it out)
    code, _ = spark_command(*FILES, "--out", tmp_path / "plain", "--master", "local[2]")
    assert code == 0 and not (tmp_path / "plain" / "messages").exists()


def test_the_job_leaves_bodies_out_or_cuts_them(spark_command, tmp_path):
    _, table = job_table(spark_command, tmp_path, "--no-bodies")
    expected = reference(bodies=False)
    pd.testing.assert_frame_equal(table, expected, check_dtype=False)
    assert table["body_preview"].isna().all() and table["body_encoding"].isna().all()
    assert (table["body_size"] > 0).all()
    _, table = job_table(spark_command, tmp_path, "--max-body", "9")
    pd.testing.assert_frame_equal(table, reference(max_body=9), check_dtype=False)
    assert table["body_truncated"].all() and (table["body_preview"].str.len() <= 9).all()


@pytest.mark.parametrize("bodies", ["true", "false"])
def test_the_data_source_reads_the_messages(spark, bodies):
    frame = (spark.read.format("streamdissect").option("table", "messages")
             .option("bodies", bodies).option("maxBody", "20")
             .load([str(path) for path in FILES]))  # fmt: skip
    assert frame.columns == schema.column_names("messages")
    got = frame.orderBy(*ORDER).toPandas()
    expected = reference(bodies=bodies == "true", max_body=20)
    assert len(got) == len(expected)
    for name in ("connection", "frame", "index", "command", "size", "body_size", "body_preview",
                 "subject", "filter_value", "stream", "compression"):  # fmt: skip
        assert [None if pd.isna(v) else v for v in got[name]] == \
            [None if pd.isna(v) else v for v in expected[name]], name  # fmt: skip
    for name in ("publishing_id", "offset"):  # (decimal(20,0) in Spark: u64)
        assert [None if v is None else int(v) for v in got[name]] == \
            [None if pd.isna(v) else int(v) for v in expected[name]], name  # fmt: skip
    assert [None if v is None else dict(v) for v in got["application_properties"]] == \
        [None if c is None or c is pd.NA else dict(c) for c in expected["application_properties"]]
