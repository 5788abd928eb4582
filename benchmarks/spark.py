"""The Spark job's scaling, in one run:
`python benchmarks/spark.py [--copies N] [--big FILE] [--pieces N] [--big-copies N]`.

Makes an archive: copies of the shipped captures, and each benchmark capture (--big) cut
into rotated pieces as `tcpdump -C` cuts (tests/rotate.py), --big-copies times. Then, in
this process, with a Spark session per master started (and timed) apart:
- the job (`spark.jobs.run_job`, what `streamdissect spark` runs) with local[1] and
  local[2]: wall time, frames/s, files/s, the scaling from 1 to 2 cores;
- the seconds its tasks worked (summed in the workers), against the CLI's analysis of the
  same files in one process: as it gives the job's figures (a rotated set's pieces in one
  `analyze`, which reads several files as one capture; every other file on its own), and
  file by file (faster, but wrong at the cuts): frames/s per core;
- the per-task overhead: a job over 8 tiny files in 8 tasks, less the same in one task.
Targets (issue 15): >= 1.7x from 1 to 2 cores; frames/s per core within 2x of the CLI's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PORTS = (5552, 5553)


def frames_in(files: list[Path]) -> int:
    from streamdissect.tables.batches import frames_arrow

    return sum(frames_arrow(str(f), ports=PORTS).num_rows for f in files)


def make_archive(folder: Path, copies: int, bigs: list[str], pieces: int,
                 big_copies: int) -> tuple[list[Path], list[Path], list[list[Path]]]:  # fmt: skip
    """The archive's files, the whole files they hold (the frames to count), and the
    rotated sets among them (each set's pieces in order)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import rotate

    folder.mkdir()
    captures = sorted((ROOT / "captures").glob("*.pcap"))
    wholes, sets = [], []
    for k in range(copies):
        for path in captures:
            shutil.copy(path, folder / f"{k:03d}-{path.name}")
            wholes.append(path)
    for n, big in enumerate(bigs):
        for k in range(big_copies):
            sets.append(rotate.cut(Path(big), pieces, folder / f"big{n}-{k}"))
            wholes.append(Path(big))
    return sorted(p for p in folder.rglob("*") if p.is_file()), wholes, sets


def cli_set_seconds(files: list[Path], sets: list[list[Path]]) -> float:
    """The CLI on the same files as it gives the job's figures: a rotated set's pieces in
    one `analyze` (several files read as one capture), every other file on its own."""
    from streamdissect.analysis.driver import analyze

    pieces = {p for s in sets for p in s}
    started = time.perf_counter()
    for path in files:
        if path not in pieces:
            analyze(str(path), ports=PORTS, report_only=True)
    for pieces_of_set in sets:
        analyze([str(p) for p in pieces_of_set], ports=PORTS, report_only=True)
    return time.perf_counter() - started


def cli_seconds(files: list[Path]) -> float:
    """The CLI's analysis of each file, in one process (no interpreter start-up)."""
    from streamdissect.analysis.driver import analyze

    started = time.perf_counter()
    for path in files:
        analyze(str(path), ports=PORTS, report_only=True)
    return time.perf_counter() - started


def run(spark, archive: Path, out: Path, partitions: int | None = None) -> tuple[float, dict]:
    from streamdissect.spark.jobs import run_job

    shutil.rmtree(out, ignore_errors=True)
    stats: dict = {}
    started = time.perf_counter()
    run_job(spark, [str(archive)], str(out), ports=PORTS, partitions=partitions, stats=stats)
    return time.perf_counter() - started, stats


def measure(master: str, archive: Path, tiny: Path, work: Path) -> dict:
    from streamdissect.spark import session

    started = time.perf_counter()
    spark = session(master)
    spark.sparkContext.parallelize([0], 1).count()
    start_up = time.perf_counter() - started
    try:
        run(spark, tiny, work / "warm")  # (the session's first job pays for the JIT)
        wall, stats = run(spark, archive, work / f"out-{master}")
        eight, _ = run(spark, tiny, work / "tiny8", partitions=8)
        one, _ = run(spark, tiny, work / "tiny1", partitions=1)
    finally:
        spark.stop()
    return {"start_up": start_up, "wall": wall, "stats": stats, "tiny8": eight, "tiny1": one}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--copies", type=int, default=4, help="copies of each shipped capture")
    ap.add_argument("--big", action="append", default=[], help="a benchmark capture to add")
    ap.add_argument("--pieces", type=int, default=8, help="rotated pieces of each --big")
    ap.add_argument("--big-copies", type=int, default=1, help="copies of each --big's pieces")
    args = ap.parse_args()
    from streamdissect.spark import spark_environment

    spark_environment()
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)  # (git-ignored: not in a fresh checkout)
    work = Path(tempfile.mkdtemp(prefix="sd-spark-bench-", dir=out))
    try:
        archive = work / "archive"
        files, wholes, sets = make_archive(archive, args.copies, args.big, args.pieces,
                                           args.big_copies)  # fmt: skip
        size = sum(f.stat().st_size for f in files)
        frames = frames_in(wholes)
        print(f"archive: {len(files)} files, {size / 1e6:.1f} MB, {frames:,} frames")
        tiny = work / "tiny"
        tiny.mkdir()
        small = min((ROOT / "captures").glob("*.pcap"), key=lambda p: p.stat().st_size)
        for k in range(8):
            shutil.copy(small, tiny / f"{k}.pcap")
        cli = cli_seconds(files)
        cli_sets = cli_set_seconds(files, sets) if any(len(s) > 1 for s in sets) else cli
        results = {m: measure(m, archive, tiny, work) for m in ("local[1]", "local[2]")}
        for master, r in results.items():
            s = r["stats"]
            print(f"spark {master}: session start-up {r['start_up']:.1f} s; job {r['wall']:.1f} s,"
                  f" {frames / r['wall']:,.0f} frames/s, {len(files) / r['wall']:.1f} files/s "
                  f"({s['tasks']} first-stage tasks, {s['rotated_sets']} rotated sets, "
                  f"{s['chains']} connections across cuts); tasks worked "
                  f"{s['task_seconds']:.1f} s; stages " +
                  ", ".join(f"{k} {v:.1f} s" for k, v in s["stage_seconds"].items()))  # fmt: skip
        one, two = results["local[1]"]["wall"], results["local[2]"]["wall"]
        print(f"scaling 1 -> 2 cores: {one / two:.2f}x (target >= 1.7x)")
        task_rate = frames / results["local[2]"]["stats"]["task_seconds"]
        print(f"CLI analyze, one process, each file on its own: {cli:.1f} s, "
              f"{frames / cli:,.0f} frames/s (a rotated set's figures wrong at the cuts)")
        print(f"CLI analyze, one process, each rotated set as one capture (the job's figures): "
              f"{cli_sets:.1f} s, {frames / cli_sets:,.0f} frames/s")  # fmt: skip
        for name, seconds in (("the same figures", cli_sets), ("file by file", cli)):
            print(f"per core against the CLI, {name}: tasks {task_rate:,.0f} frames/s = "
                  f"{task_rate / (frames / seconds):.2f}x (target >= 0.5); end to end on 2 "
                  f"cores {frames / two / 2:,.0f} frames/s = "
                  f"{frames / two / 2 / (frames / seconds):.2f}x")  # fmt: skip
        r = results["local[1]"]
        print(f"per-task overhead: {(r['tiny8'] - r['tiny1']) / 7 * 1000:.0f} ms (8 tiny files "
              f"in 8 tasks {r['tiny8']:.2f} s, in one task {r['tiny1']:.2f} s)")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    sys.exit(main())
