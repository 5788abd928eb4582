"""The Spark job on the standalone cluster of the tests survives a lost executor: one of the
workers' executor JVMs killed by pid while the job's tasks run, the job completes through
Spark's retries and its Parquet tables equal a clean run's, no row lost or doubled, no part
left behind; the same with an unreadable file in the middle of the archive (issue 28)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time

import pyarrow.parquet as pq
import rotate
import worsen

from streamdissect.spark.jobs import TABLES

# the archive: enough files that the tasks run for some seconds on the two workers
COPIES = 3
# a read's or a job's tasks may be short: when one ended before the killer saw its tasks
# run, it runs again (each run, killed or not, must give the reference rows)
READ_ATTEMPTS = 3


def archive(folder) -> None:
    folder.mkdir()
    for k in range(COPIES):
        for path in worsen.corpus_captures():
            shutil.copy(path, folder / f"{k}-{path.name}")
    rotate.cut(worsen.CAPTURES / "rstream-consume-credit-3.10.pcap", 4, folder / "rotated",
               offset=1)  # fmt: skip
    (folder / f"{COPIES // 2}-unreadable.pcap").write_bytes(b"not a capture at all")


def tables_of(out) -> dict[str, list[str]]:
    """Each table's rows, sorted (as text: the order of parts is Spark's), and its files."""
    found = {}
    for table in TABLES:
        folder = out / table
        names = sorted(os.listdir(folder))
        # written whole: nothing hidden or temporary left beside Spark's own markers
        assert not [n for n in names if n.startswith(".") and not n.endswith(".crc")], names
        assert "_temporary" not in names, names
        found[table] = sorted(map(str, pq.read_table(folder).to_pylist()))
    return found


def executors(app_id: str) -> list[int]:
    """The pids of this application's executor JVMs (the workers' children)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read()
        except OSError:
            continue
        if b"CoarseGrainedExecutorBackend" in command and app_id.encode() in command:
            pids.append(int(entry))
    return pids


@contextlib.contextmanager
def executor_killed(spark, app: str, busy: int = 2):
    """While the block runs: the first of the application's executors killed by pid once
    `busy` tasks run; the killed pids (empty when the work ended first)."""
    killed: list[int] = []
    done = threading.Event()

    def kill_when_busy() -> None:
        tracker = spark.sparkContext.statusTracker()
        while not done.is_set() and not killed:
            active = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
            if any(info is not None and info.numActiveTasks >= busy for info in active):
                victim = executors(app)[0]
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)
            time.sleep(0.01)

    killer = threading.Thread(target=kill_when_busy)
    killer.start()
    try:
        yield killed
    finally:
        done.set()
        killer.join()


def read_rows(spark, folder, mode: str) -> list[str] | str:
    """The data source's frames and anomalies tables in that mode (rows as sorted text),
    or the error that ended the read."""
    try:
        rows = []
        for table in ("frames", "anomalies"):
            df = spark.read.format("streamdissect").option("table", table) \
                .option("mode", mode).load(str(folder))  # fmt: skip
            rows += sorted(map(str, df.collect()))
        return rows
    except Exception as exc:  # noqa: BLE001 - FAILFAST's error, compared by its text
        return "unreadable.pcap" if "unreadable.pcap" in str(exc) else str(exc)[:300]


def test_a_killed_executor_loses_no_row(spark, standalone_cluster, tmp_path):
    from streamdissect.spark import session
    from streamdissect.spark.jobs import run_job

    spark.stop()  # (one session a process: the cluster's below)
    folder = tmp_path / "archive"
    archive(folder)
    cluster = standalone_cluster
    cluster.start()  # (stopped by another test already: started again)
    with cluster:
        remote = session(cluster.master_url)
        try:
            app = remote.sparkContext.applicationId
            clean = tmp_path / "clean"
            run_job(remote, [str(folder)], str(clean))
            expected = tables_of(clean)
            assert len(executors(app)) == 2  # (one a worker)
            for attempt in range(READ_ATTEMPTS):  # (a quick job may end before the kill)
                faulty = tmp_path / f"faulty{attempt}"
                with executor_killed(remote, app) as killed:
                    counts = run_job(remote, [str(folder)], str(faulty))
                assert tables_of(faulty) == expected
                if killed:
                    break
            assert killed, "the job ended before an executor could be killed"
            assert killed[0] not in executors(app)  # (gone; the worker started another)
            unreadable = [row for row in expected["anomalies"] if "unreadable_file" in row]
            assert len(unreadable) == 1 and counts["connections"] > 0
            # the data source in each reader mode, the unreadable file mid-archive
            for mode in ("PERMISSIVE", "DROPMALFORMED", "FAILFAST"):
                reference = read_rows(remote, folder, mode)
                for _attempt in range(READ_ATTEMPTS):
                    with executor_killed(remote, app, busy=1) as killed:
                        got = read_rows(remote, folder, mode)
                    assert got == reference, mode
                    if killed or mode == "FAILFAST":
                        break
                if mode == "FAILFAST":
                    assert reference == "unreadable.pcap"
                else:
                    assert killed, f"{mode}: the read ended before an executor was killed"
                    assert len(reference) > 1000
        finally:
            remote.stop()
