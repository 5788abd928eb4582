"""`spark.read.format("streamdissect")` in real local Spark: the frames, connections and
anomalies of captures/ as DataFrames equal to the core's own tables, files packed into
partitions, and Spark's reader modes on a corrupt, an empty and a non-capture file."""

from __future__ import annotations

import os
import shutil
from decimal import Decimal

import pyarrow.parquet as pq
import pytest
import rotate
import worsen

from streamdissect.analysis.driver import analyze
from streamdissect.rotated.local import to_arrow
from streamdissect.spark.files import CaptureFile, pack
from streamdissect.tables.batches import frames_arrow

CAPTURES = worsen.corpus_captures()


def plain(value):
    """A Spark value as the core's Arrow rows have it (decimal(20,0) back to int)."""
    if isinstance(value, Decimal):
        return int(value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def rows_of(df) -> list[dict]:
    return [{k: plain(v) for k, v in row.asDict().items()} for row in df.collect()]


def test_frames_equal_the_core_batches_file_by_file(spark, tmp_path):
    folder = tmp_path / "archive"
    folder.mkdir()
    for path in CAPTURES:
        shutil.copy(path, folder / path.name)
    df = spark.read.format("streamdissect").option("ports", "5552,5553").load(str(folder))
    assert df.rdd.getNumPartitions() == 2
    got = sorted(rows_of(df), key=lambda r: (r["connection"], r["ts_ns"], r["direction"],
                                             r["stream_offset"]))  # fmt: skip
    expected = []
    for path in CAPTURES:
        expected += frames_arrow(str(path), ports=(5552, 5553)).to_pylist()
    expected.sort(key=lambda r: (r["connection"], r["ts_ns"], r["direction"],
                                 r["stream_offset"]))  # fmt: skip
    assert got == expected and len(got) > 1000


@pytest.mark.parametrize("table", ["connections", "anomalies"])
def test_other_tables_equal_the_analysis(spark, table, tmp_path):
    linktype, packets = worsen.read_pcap(worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap")
    worse = worsen.write_pcap(tmp_path / "worse.pcap", linktype,
                              worsen.drop(worsen.reorder(packets), {40, 80}))  # fmt: skip
    paths = [str(p) for p in CAPTURES[:6]] + [str(worse)]
    df = spark.read.format("streamdissect").option("table", table).load(paths)
    got = rows_of(df)
    expected = []
    for path in paths:
        for row in analyze(path, report_only=True).rows(table):
            expected.append(row if isinstance(row, dict) else dict(zip(df.columns, row)))
    expected = [{c: row.get(c) for c in df.columns} for row in expected]
    key = lambda r: (r["connection"] or "", str(r.get("ts_ns") or r.get("start_ns")))
    assert sorted(got, key=key) == sorted(expected, key=key) and got


def test_reader_modes_on_bad_files(spark, tmp_path):
    good = worsen.CAPTURES / "rstream-consume-credit-3.10.pcap"
    shutil.copy(good, tmp_path / "good.pcap")
    data = good.read_bytes()
    (tmp_path / "corrupt.pcap").write_bytes(data[: len(data) // 2] + b"\xff" * 40)
    (tmp_path / "empty.pcap").write_bytes(b"")
    (tmp_path / "notes.txt").write_bytes(b"not a capture at all\n" * 20)
    reader = spark.read.format("streamdissect")
    good_frames = reader.load(str(tmp_path / "good.pcap")).count()

    anomalies = rows_of(reader.option("table", "anomalies").load(str(tmp_path)))
    named = {row["detail"].split(":")[0] for row in anomalies if row["kind"] == "unreadable_file"}
    assert named == {str(tmp_path / "empty.pcap"), str(tmp_path / "notes.txt")}
    assert any(row["kind"] in ("truncated_file", "bad_record") for row in anomalies)
    permissive = reader.option("table", "frames").load(str(tmp_path)).count()
    assert permissive > good_frames  # (the corrupt file's frames before the damage too)

    dropped = (spark.read.format("streamdissect").option("mode", "DROPMALFORMED")
               .load(str(tmp_path)).count())  # fmt: skip
    assert dropped == good_frames

    with pytest.raises(Exception, match="corrupt.pcap|empty.pcap|notes.txt"):
        spark.read.format("streamdissect").option("mode", "FAILFAST").load(str(tmp_path)).count()


@pytest.mark.parametrize("ports, says", [("5552,70000", "a TCP port is 1-65535, not 70000"),
                                         ("5552,x", "not a port number: 'x'")])  # fmt: skip
def test_the_ports_option_takes_tcp_ports_only(ports, says):
    """The reader's `ports` are checked as the command line's --port is (no session needed:
    the reader is made from its options), not a filter that matches nothing."""
    from streamdissect.spark.source import CaptureReader

    with pytest.raises(ValueError, match=says):
        CaptureReader("frames", {"ports": ports})
    assert CaptureReader("frames", {"ports": "5552,5553"}).ports == (5552, 5553)


def test_glob_filter_and_recursive_lookup(spark, tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    shutil.copy(CAPTURES[0], tmp_path / "a" / "one.pcap")
    shutil.copy(CAPTURES[1], tmp_path / "a" / "b" / "two.pcap")
    (tmp_path / "a" / "skip.txt").write_bytes(b"x")
    reader = spark.read.format("streamdissect").option("pathGlobFilter", "*.pcap")
    top = reader.load(str(tmp_path / "a")).count()
    deep = reader.option("recursiveFileLookup", "true").load(str(tmp_path / "a")).count()
    assert top == frames_arrow(str(CAPTURES[0])).num_rows
    assert deep == top + frames_arrow(str(CAPTURES[1])).num_rows


def test_packing_puts_big_files_alone_and_small_ones_together():
    files = [CaptureFile(f"f{i}", size) for i, size in
             enumerate([900 << 20, 300 << 20, 5, 6, 7, 8, 9])]  # fmt: skip
    parts = pack(files, slots=2, target=128 << 20)
    assert ["f0"] in parts  # the biggest alone
    assert sorted(p for part in parts for p in part) == sorted(f.path for f in files)
    assert len(pack(files[2:], slots=2)) == 2  # both cores busy with small files too


# the job's tables that a rotated capture's pieces give as the whole file does
STITCHED = ("connections", "confirms", "credit", "stalls", "deliveries", "throughput",
            "errors", "anomalies")  # fmt: skip


def test_a_standalone_cluster_reads_what_local_spark_reads(spark, standalone_cluster, tmp_path):
    """A real standalone master and two workers from the pyspark package, on 127.0.0.1 (up
    since the first Spark test: tests/conftest.py): the same frames and tables as local
    mode, and a capture cut in rotated pieces gives the figures of the whole file;
    everything it started is stopped."""
    import pandas as pd

    from streamdissect.spark import session
    from streamdissect.spark.jobs import run_job

    folder = tmp_path / "archive"
    folder.mkdir()
    for path in CAPTURES[:8]:
        shutil.copy(path, folder / path.name)
    rotated = tmp_path / "rotated"  # one capture cut in four pieces, as tcpdump -C cuts
    whole = worsen.CAPTURES / "rstream-consume-credit-3.10.pcap"
    rotate.cut(whole, 4, rotated, offset=1)
    local = sorted(map(str, rows_of(spark.read.format("streamdissect").load(str(folder)))))
    run_job(spark, [str(folder)], str(tmp_path / "local"), ("latency", "confirms", "stalls"))
    spark.stop()  # (one session a process; the next test to ask for `spark` makes it again)
    with standalone_cluster as cluster:  # (started already: stopped on leaving)
        remote = session(cluster.master_url)
        try:
            df = remote.read.format("streamdissect").load(str(folder))
            assert df.rdd.getNumPartitions() >= 2
            assert sorted(map(str, rows_of(df))) == local
            executors = remote.sparkContext._jsc.sc().getExecutorMemoryStatus().size()
            assert executors >= 3  # (the driver and the two workers' executors)
            run_job(remote, [str(folder)], str(tmp_path / "cluster"),
                    ("latency", "confirms", "stalls"))  # fmt: skip
            for table in ("latency", "confirms", "stalls"):
                on_cluster = pd.read_parquet(tmp_path / "cluster" / table)
                in_local = pd.read_parquet(tmp_path / "local" / table)
                key = list(on_cluster.columns[:3])
                pd.testing.assert_frame_equal(
                    on_cluster.sort_values(key).reset_index(drop=True),
                    in_local.sort_values(key).reset_index(drop=True))  # fmt: skip
                assert len(on_cluster) > 0
            run_job(remote, [str(rotated)], str(tmp_path / "cluster-rotated"), STITCHED)
            analysis = analyze(str(whole), report_only=True, helper_process=False)
            for table in STITCHED:
                got = pq.read_table(tmp_path / "cluster-rotated" / table).to_pylist()
                expected = to_arrow(table, getattr(analysis, table)).to_pylist()
                assert sorted(map(str, got)) == sorted(map(str, expected)), table
                assert got or table == "anomalies"
        finally:
            remote.stop()
        pids = [p.pid for p in cluster.processes]
    assert len(pids) == 3  # (the master and the two workers)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_the_ports_option_means_what_the_command_lines_port_does(tmp_path):
    """The reader's `ports` are the Stream's as `--port` names them (registry.named_ports, the
    rule of analyze, frames and the Spark job): with heuristic false, the named protocol's
    ports alone (no RocketMQ on 9876/10911); a Stream port on RocketMQ's 9876 is the Stream's,
    not RocketMQ's; no `ports` given, every protocol's defaults. (No session needed: the
    reader's own file function, on a capture of both protocols.)"""
    from rocketmq_support import both_protocols

    from streamdissect.spark.source import CaptureReader, _batches

    both = str(both_protocols(tmp_path / "both.pcap",
                              worsen.CAPTURES / "rstream-publish-confirm-3.10.pcap",
                              worsen.CAPTURES / "rocketmq" / "rmq-java-json.pcap"))  # fmt: skip

    def servers(table: str, options: dict) -> set[int]:
        reader = CaptureReader(table, options)
        rows = [r for b in _batches(both, table, reader.ports, reader.heuristic)
                for r in b.to_pylist()]  # fmt: skip
        return {int(r["connection"].split("#")[0].rsplit(":", 1)[1]) for r in rows}

    assert servers("frames", {}) == {5552}
    assert servers("rocketmq_frames", {}) == {9876, 10911}
    assert servers("rocketmq_frames", {"heuristic": "false"}) == {9876, 10911}
    assert servers("rocketmq_frames", {"ports": "5552", "heuristic": "false"}) == set()
    assert servers("connections", {"ports": "5552", "heuristic": "false"}) == {5552}
    # 9876 named for the Stream: a Stream server there, not RocketMQ's default
    assert servers("frames", {"ports": "5552,9876", "heuristic": "false"}) == {5552, 9876}
