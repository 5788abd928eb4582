"""`streamdissect spark` on an archive that mixes both protocols (real local Spark, on the
tests' shared session): Stream captures, RocketMQ captures, one file holding both, and two
RocketMQ captures cut into rotated pieces whose connections cross the cuts. Every RocketMQ
table the job writes equals what `streamdissect analyze --format parquet` writes of the same
captures read whole as one (row for row); the figures the clients wrote down
(captures/rocketmq/*.truth.json) are held to the job's tables directly: every send result,
every error response, every traced connection's frames and calls."""

from __future__ import annotations

import collections
import json
import math
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import rotate
import worsen
from rocketmq_support import CAPTURES, both_protocols, client_port, truth
from test_rocketmq_connections import COUNTED, traced_counts

from streamdissect.spark.jobs import OPTIONAL, SERVER_TABLES, TABLES

pytestmark = pytest.mark.spark

STREAM_FILES = [worsen.CAPTURES / n for n in ("raw-errors-3.10.pcap",
                                               "rstream-publish-confirm-3.10.pcap")]  # fmt: skip
WHOLE = ["rmq-errors", "rmq-long-poll", "rmq-broker-register", "rmq-cpp"]
ROTATED = {"rmq-java-compressed": (4, 0), "rmq-java-json": (3, 2)}  # pieces, offset
MIXED = (worsen.CAPTURES / "rbfly-publish-consume-3.10.pcap", "rmq-js")
ROCKETMQ_TABLES = SERVER_TABLES["rocketmq"] + ("rocketmq_frames",)


@pytest.fixture(scope="module")
def archive(tmp_path_factory, spark_command):
    """The archive, the job's tables (every table, RocketMQ's frames too) and the CLI's
    tables of the same captures read whole."""
    folder = tmp_path_factory.mktemp("mixed-archive")
    whole = [*STREAM_FILES, *(CAPTURES / f"{n}.pcap" for n in WHOLE)]
    for path in whole:
        (folder / path.name).write_bytes(path.read_bytes())
    for name, (pieces, offset) in ROTATED.items():
        rotate.cut(CAPTURES / f"{name}.pcap", pieces, folder / name, offset=offset)
    mixed = both_protocols(folder / "both.pcap", MIXED[0], CAPTURES / f"{MIXED[1]}.pcap")
    out = tmp_path_factory.mktemp("mixed-job")
    tables = ",".join((*TABLES, *OPTIONAL))
    code, printed = spark_command(folder, "--out", out, "--master", "local[2]",
                                  "--tables", tables)  # fmt: skip
    assert code == 0 and "wrote" in printed
    cli = tmp_path_factory.mktemp("mixed-cli")
    inputs = [*whole, mixed, *(CAPTURES / f"{n}.pcap" for n in ROTATED)]
    subprocess.run([sys.executable, "-m", "streamdissect", "analyze", "--format", "parquet",
                    "-o", str(cli), *map(str, inputs)], capture_output=True, check=True)  # fmt: skip
    frames = tmp_path_factory.mktemp("mixed-frames")
    from streamdissect.tables.batches import frames_arrow

    pq.write_table(frames_arrow([str(p) for p in inputs], protocol="rocketmq"),
                   frames / "rocketmq_frames.parquet")  # fmt: skip
    return out, cli, frames


def rows_of(folder, table) -> list[dict]:
    where = folder / table if (folder / table).is_dir() else folder / f"{table}.parquet"
    return [{c: plain(v) for c, v in row.items()} for row in pq.read_table(where).to_pylist()]


def plain(value):
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 9)
    if type(value).__name__ == "Decimal":
        return int(value)
    return value


def key(row: dict) -> str:
    return json.dumps(row, sort_keys=True, default=str)


@pytest.mark.parametrize("table", SERVER_TABLES["rocketmq"])
def test_each_rocketmq_table_is_the_clis(archive, table):
    out, cli, _ = archive
    got, expected = rows_of(out, table), rows_of(cli, table)
    assert len(got) == len(expected)
    assert sorted(map(key, got)) == sorted(map(key, expected))
    assert got  # (the archive gives every table rows)


def test_the_rocketmq_frames_are_those_of_the_whole_captures(archive):
    """The frames table on request: the frames across the cuts included, each connection
    named and its offsets counted as in the whole file, each response named by its request."""
    out, _, frames = archive
    got, expected = rows_of(out, "rocketmq_frames"), rows_of(frames, "rocketmq_frames")
    assert len(got) == len(expected) > 300
    assert sorted(map(key, got)) == sorted(map(key, expected))


@pytest.mark.parametrize("table", ["connections", "latency", "errors", "anomalies"])
def test_the_stream_tables_are_the_clis_beside_rocketmq(archive, table):
    """The Stream's tables of the same archive: its connections only (RocketMQ's are in
    rocketmq_connections), the anomalies of both."""
    out, cli, _ = archive
    got, expected = rows_of(out, table), rows_of(cli, table)
    assert len(got) == len(expected)
    assert sorted(map(key, got)) == sorted(map(key, expected))
    if table == "connections":
        assert got and all(r["server"].endswith(":5552") for r in got)


def _sends(name: str) -> list[dict]:
    return [s for c in truth(name)["clients"] for s in c["report"].get("sends") or ()
            if "msgId" in s]  # fmt: skip


def test_every_send_result_is_a_row_of_the_jobs_sends(archive):
    """Each message the producers sent (the rotated captures' too: their sends cross the
    cuts), found by the id its client reported, with the client's status and offset."""
    out, _, _ = archive
    by_id = {}
    for row in rows_of(out, "rocketmq_sends"):
        by_id[row["msg_id"]] = by_id[row["offset_msg_id"]] = row
    results = [s for n in [*WHOLE, *ROTATED, MIXED[1]] for s in _sends(n)]
    assert len(results) > 15
    for send in results:
        for index, msg_id in enumerate(send["msgId"].split(",")):
            row = by_id[msg_id]
            assert row["status"] == "SEND_OK" and str(send["status"]) in ("SEND_OK", "0")
            assert row["queue_offset"] == send["queueOffset"] + index
            if "bodyLength" in send:
                assert row["size"] == send["bodyLength"]
            if "compressedByClient" in send:
                assert row["compressed"] == send["compressedByClient"]


def test_the_errors_are_the_responses_the_clients_got(archive):
    out, _, _ = archive
    expected = collections.Counter(
        (f["code"], " ".join(f["remark"].split())) for c in truth("rmq-errors")["clients"]
        for f in c["report"].get("frames", ()) if f["dir"] == "s->c response" and f["code"])  # fmt: skip
    got = collections.Counter()
    for row in rows_of(out, "rocketmq_errors"):  # (each remark names its topic or request)
        got[row["code"], " ".join((row["remark"] or "").split())] += row["count"]
    assert len(expected) == 7 and all(got[k] == n for k, n in expected.items())


def test_each_traced_connection_has_its_frames_and_calls(archive):
    """The fully traced captures of the archive, two of them rotated: each connection's
    frames and calls each way, as the clients traced them, and closed."""
    out, _, _ = archive
    rows = {client_port(r["connection"]): r for r in rows_of(out, "rocketmq_connections")}
    for name in ("rmq-errors", "rmq-long-poll", *ROTATED):
        counted = traced_counts(name)
        for port in {p for p, _ in counted}:
            row = rows[port]
            for column in COUNTED:
                assert row[column] == counted[port, column], (name, port, column)
            assert row["status"] == "closed"


def _rows_of_analysis(path, table) -> list[dict]:
    from streamdissect.analysis.driver import analyze

    analysis = analyze(str(path))
    if table not in analysis.other_tables():  # (a file without RocketMQ traffic)
        return []
    return analysis.arrow(table).to_pylist()


def test_the_data_source_reads_rocketmq_tables_file_by_file(spark, tmp_path):
    """`spark.read.format("streamdissect")` with a RocketMQ table: each file its own capture
    (a Stream capture, a RocketMQ capture, a file of both), the core's tables file by file;
    the Stream's frames of the file of both are the Stream's only; the long poll's
    connections are what its clients traced."""
    from streamdissect.tables.batches import frames_arrow

    folder = tmp_path / "archive"
    folder.mkdir()
    paths = [folder / STREAM_FILES[0].name, folder / "rmq-long-poll.pcap"]
    for path, source in zip(paths, (STREAM_FILES[0], CAPTURES / "rmq-long-poll.pcap")):
        path.write_bytes(source.read_bytes())
    paths.append(both_protocols(folder / "both.pcap", MIXED[0], CAPTURES / "rmq-errors.pcap"))
    reader = spark.read.format("streamdissect")
    frames = [plain_row(r) for r in reader.option("table", "rocketmq_frames")
              .load(str(folder)).collect()]  # fmt: skip
    expected = [r for p in paths for r in frames_arrow(str(p), protocol="rocketmq").to_pylist()]
    assert len(frames) == len(expected) > 50
    assert sorted(map(key, frames)) == sorted(map(key, map(plain_row, expected)))
    for table in ("rocketmq_connections", "rocketmq_requests", "rocketmq_sends",
                  "rocketmq_latency", "rocketmq_errors"):  # fmt: skip
        got = [plain_row(r) for r in reader.option("table", table).load(str(folder)).collect()]
        expected = [plain_row(r) for p in paths for r in _rows_of_analysis(p, table)]
        assert got and sorted(map(key, got)) == sorted(map(key, expected)), table
    stream = reader.option("table", "frames").load(str(folder / "both.pcap")).collect()
    assert stream and all(r["connection"].endswith(":5552") for r in stream)
    counted = traced_counts("rmq-long-poll")
    for row in reader.option("table", "rocketmq_connections").load(str(paths[1])).collect():
        for column in COUNTED:
            assert row[column] == counted[client_port(row["connection"]), column]


def plain_row(row) -> dict:
    items = row.asDict().items() if hasattr(row, "asDict") else row.items()
    return {c: plain(v) for c, v in items}


def test_a_report_of_the_jobs_tables_counts_each_protocols_frames(archive):
    """`streamdissect report --parquet` of the job's tables: the frames of each protocol
    as the CLI's tables of the same captures count them, RocketMQ's sections drawn."""
    from streamdissect import report
    from streamdissect.report.sections import OTHER_SECTIONS

    out, cli, _ = archive
    job, whole = report.from_parquet(str(out)), report.from_parquet(str(cli))
    assert job.frames_by_protocol == whole.frames_by_protocol
    assert [title for title, _ in job.frames_by_protocol] == ["RabbitMQ Stream",
                                                             "RocketMQ remoting"]  # fmt: skip
    assert all(section.shown(job) for section in OTHER_SECTIONS)


@pytest.mark.parametrize(("options", "servers"), [
    ([], {":5552", ":9876", ":10911"}),
    (["--port", "5552", "--no-heuristic"], {":5552"}),  # (only the port named: as analyze)
])  # fmt: skip
def test_the_jobs_port_options_mean_what_analyzes_do(spark_command, tmp_path, options, servers):
    """A capture of both protocols: `--port 5552 --no-heuristic` keeps the Stream on 5552
    and no RocketMQ, as `streamdissect analyze` and a live capture's filter do."""
    both = both_protocols(tmp_path / "both.pcap", MIXED[0], CAPTURES / f"{MIXED[1]}.pcap")
    out = tmp_path / "out"
    code, printed = spark_command(both, "--out", out, "--master", "local[2]", "--tables",
                                  "connections,rocketmq_connections", *options)  # fmt: skip
    assert code == 0 and "wrote" in printed
    shown = {row["server"][row["server"].rindex(":"):]
             for table in ("connections", "rocketmq_connections")
             for row in (rows_of(out, table) if any(out.glob(f"{table}*")) else ())}  # fmt: skip
    assert shown == servers
