"""`streamdissect spark` in real local Spark (run in this process, on the tests' shared
session; spark-submit in a process of its own): its Parquet tables equal what `streamdissect
analyze --format json` says of the same captures read as one set, table by table (counts
exact, percentiles equal to rounding), in the layout `analyze --format parquet` writes."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import rotate
import worsen

from streamdissect.analysis.driver import analyze
from streamdissect.cli._text_report import CONNECTION_COLUMNS, LAG_COLUMNS
from streamdissect.spark.jobs import TABLES
from streamdissect.tables.batches import frames_arrow

CLI = [sys.executable, "-m", "streamdissect.cli"]
# captures of the same broker port, no four-tuple reused across them
FILES = [worsen.CAPTURES / name for name in ("raw-errors-3.10.pcap",
         "rstream-slow-consumer-3.10.pcap", "rstream-publish-confirm-3.10.pcap",
         "rbfly-publish-consume-3.10.pcap")]  # fmt: skip
# JSON key -> (Parquet table, the columns the JSON has)
PAIRS = {"connections": ("connections", CONNECTION_COLUMNS), "latency": ("latency", None),
         "confirms": ("confirms", None), "consumer_lag": ("deliveries", LAG_COLUMNS),
         "throughput": ("throughput", None), "errors": ("errors", None),
         "anomalies": ("anomalies", None),
         "credit": ("credit", ["connection", "subscription_id", "stream", "initial_credit",
                               "credits_granted", "credit_frames", "chunks_delivered",
                               "records_delivered", "credit_errors", "final_credit",
                               "stalled_ms_total"])}  # fmt: skip


def same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is None and b is None
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) or (math.isnan(a) and math.isnan(b))
    return a == b


def plain(value):
    if value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "item"):
        value = value.item()
    if type(value).__name__ == "Decimal":
        return int(value)
    return value


def spark_job(spark_command, inputs, out, *extra) -> None:
    code, printed = spark_command(*inputs, "--out", out, "--master", "local[2]", *extra)
    assert code == 0
    assert "wrote" in printed


def analyze_report(files) -> dict:
    return json.loads(subprocess.run([*CLI, "analyze", "--format", "json", *map(str, files)],
                                     capture_output=True, check=True).stdout)  # fmt: skip


@pytest.fixture(scope="module")
def files_report():
    return analyze_report(FILES)


@pytest.fixture(scope="module")
def job(tmp_path_factory, spark_command, files_report):
    out = tmp_path_factory.mktemp("job")
    spark_job(spark_command, FILES, out)
    return out, files_report


@pytest.fixture(scope="module")
def rotated_job(tmp_path_factory, spark_command, files_report):
    """The same captures, two of them cut into rotated pieces (3 and 5), in one directory
    with the others: the figures are those of the whole files."""
    folder = tmp_path_factory.mktemp("archive")
    rotate.cut(FILES[1], 3, folder / "slow", offset=2)
    rotate.cut(FILES[2], 5, folder / "confirm")
    for path in (FILES[0], FILES[3]):
        (folder / path.name).write_bytes(path.read_bytes())
    out = tmp_path_factory.mktemp("rotated-job")
    spark_job(spark_command, [folder], out, "--tables", ",".join((*TABLES, "frames", "requests")))
    return out, files_report


@pytest.mark.parametrize("key", sorted(PAIRS))
def test_job_tables_equal_the_analyze_report(job, key):
    assert_same_tables(job, key)


@pytest.mark.parametrize("key", sorted(PAIRS))
def test_rotated_pieces_give_the_figures_of_the_whole_files(rotated_job, key):
    assert_same_tables(rotated_job, key)


def test_rotated_pieces_give_the_frames_of_the_whole_files(rotated_job):
    """Frames on request: those of the whole files, the frames across the cuts included,
    each connection named and its stream offsets counted as in the whole file."""
    out, _ = rotated_job
    got = pq.read_table(out / "frames").to_pylist()
    whole = pa.concat_tables([frames_arrow(str(f), deliver_keep_limit=0) for f in FILES])
    key = lambda r: json.dumps({c: str(v) for c, v in r.items()}, sort_keys=True)
    assert len(got) == whole.num_rows > 300
    assert sorted(map(key, got)) == sorted(map(key, whole.to_pylist()))


def test_rotated_pieces_give_the_requests_of_the_whole_files(rotated_job):
    """Requests on request: every request and response of the whole files, paired across
    the cuts, as analyze() has them."""
    out, _ = rotated_job
    got = pq.read_table(out / "requests").to_pylist()
    expected = [row for f in FILES for row in
                analyze(str(f), report_only=True).arrow("requests").to_pylist()]  # fmt: skip
    assert len(got) == len(expected) > 50
    assert sorted(map(str, got)) == sorted(map(str, expected))


PER_ID = ("connections", "deliveries", "publishes", "backlog", "credit_balance")


def test_rotated_pieces_give_the_per_id_tables_of_the_whole_file(spark_command, tmp_path):
    """The per-id tables on request (every publishing id, the backlog and the credit
    balance after each change, what the report draws): a capture of publishes and one of a
    slow consumer, cut in pieces, give those of analyze() of the whole files, and the
    Deliver CRCs are then checked alike."""
    folder = tmp_path / "archive"
    rotate.cut(FILES[1], 4, folder / "slow", offset=1)
    rotate.cut(FILES[2], 3, folder / "confirm")
    spark_job(spark_command, [folder], tmp_path / "out", "--tables", ",".join(PER_ID))
    for table in PER_ID:
        got = pq.read_table(tmp_path / "out" / table).to_pylist()
        expected = [row for f in FILES[1:3] for row in analyze(str(f)).arrow(table).to_pylist()]
        assert len(got) == len(expected) > 0, table
        assert sorted(map(str, got)) == sorted(map(str, expected)), table


def assert_same_tables(job, key) -> None:
    out, report = job
    table, columns = PAIRS[key]
    frame = pd.read_parquet(out / table)
    columns = columns or list(frame.columns)
    got = [{c: plain(v) for c, v in zip(columns, row)} for row in
           frame[columns].itertuples(index=False)]  # fmt: skip
    expected = [{c: row.get(c) for c in columns} for row in report[key]]
    assert len(got) == len(expected)
    order = lambda r: json.dumps([str(r[c]) for c in columns[:3]] + [str(r.get("ts_ns"))])
    for g, e in zip(sorted(got, key=order), sorted(expected, key=order)):
        assert all(same(g[c], e[c]) for c in columns), (g, e)
    assert got or key == "anomalies"


def test_job_layout_is_the_analyze_parquet_layout(job, tmp_path):
    out, _ = job
    subprocess.run([*CLI, "analyze", "--format", "parquet", "-o", str(tmp_path), str(FILES[0])],
                   capture_output=True, check=True)  # fmt: skip
    for table in ("latency", "connections", "throughput"):
        mine, cli = pd.read_parquet(out / table), pd.read_parquet(tmp_path / table)
        assert list(mine.columns) == list(cli.columns)


def test_spark_submit_runs_the_job(tmp_path):
    """`spark-submit` (the pyspark package's own) with spark/submit.py: the same tables as
    `streamdissect spark`, on the session spark-submit made."""
    import os

    import pyspark

    from streamdissect.spark import submit

    spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    run = subprocess.run([spark_submit, "--master", "local[2]", submit.__file__,
                          *map(str, FILES[:2]), "--out", str(tmp_path / "out"),
                          "--tables", "connections,latency"],
                         capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert "wrote" in run.stdout
    report = analyze_report(FILES[:2])
    got = pd.read_parquet(tmp_path / "out" / "latency")
    assert sorted(got["command"]) == sorted(r["command"] for r in report["latency"])
    assert sorted(got["calls"]) == sorted(r["calls"] for r in report["latency"])
    assert len(pd.read_parquet(tmp_path / "out" / "connections")) == len(report["connections"])


def test_the_job_goes_on_over_bad_files_and_reports_them(spark_command, tmp_path):
    """A corrupt, an empty and a non-capture file beside a good one: the job completes, its
    anomalies table names the two unreadable files and the damage in the corrupt one, and
    the good file's figures are whole."""
    folder = tmp_path / "archive"
    folder.mkdir()
    good = FILES[2]
    (folder / good.name).write_bytes(good.read_bytes())
    data = good.read_bytes()
    (folder / "corrupt.pcap").write_bytes(data[: len(data) // 2] + b"\xff" * 40)
    (folder / "empty.pcap").write_bytes(b"")
    (folder / "notes.txt").write_bytes(b"not a capture at all\n" * 20)
    spark_job(spark_command, [folder], tmp_path / "out")
    anomalies = pd.read_parquet(tmp_path / "out" / "anomalies")
    unreadable = anomalies[anomalies["kind"] == "unreadable_file"]
    named = {detail.split(":")[0] for detail in unreadable["detail"]}
    assert named == {str(folder / "empty.pcap"), str(folder / "notes.txt")}
    assert anomalies["kind"].isin(["truncated_file", "bad_record"]).any()
    report = analyze_report([good])
    confirms = pd.read_parquet(tmp_path / "out" / "confirms")
    assert confirms["published"].sum() >= sum(r["published"] for r in report["confirms"])
