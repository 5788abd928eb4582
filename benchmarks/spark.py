"""The Spark job's scaling, in one run: `python benchmarks/spark.py [--copies N] [--big FILE]`.

Makes an archive (copies of the shipped captures, and of a benchmark capture with --big),
runs `streamdissect spark` on it with local[1] and local[2], and prints frames/s, files/s,
the scaling from 1 to 2 cores, the per-task overhead (a job over tiny files, one task each,
less the same files' dissection time in one process) and the CLI's analyze on the same files
for comparison. Targets (issue 15): >= 1.7x from 1 to 2 cores; frames/s per core within 2x
of the CLI's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "streamdissect.cli"]


def frames_in(files: list[Path]) -> int:
    from streamdissect.frame_batches import frames_arrow

    return sum(frames_arrow(str(f), ports=(5552, 5553)).num_rows for f in files)


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def job(archive: Path, master: str, out: Path, partitions: int | None = None) -> float:
    shutil.rmtree(out, ignore_errors=True)
    extra = ["--partitions", str(partitions)] if partitions else []
    return timed([*CLI, "spark", str(archive), "--out", str(out), "--master", master,
                  "--port", "5552", "--port", "5553", *extra])  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--copies", type=int, default=12, help="copies of each shipped capture")
    ap.add_argument("--big", action="append", default=[], help="a benchmark capture to add")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sd-spark-bench-"))
    try:
        archive = work / "archive"
        archive.mkdir()
        captures = sorted((ROOT / "captures").glob("*.pcap"))
        for k in range(args.copies):
            for path in captures:
                shutil.copy(path, archive / f"{k:03d}-{path.name}")
        for k, big in enumerate(args.big):
            shutil.copy(big, archive / f"big{k}-{Path(big).name}")
        files = sorted(archive.iterdir())
        size = sum(f.stat().st_size for f in files)
        frames = frames_in(files)
        print(f"archive: {len(files)} files, {size / 1e6:.1f} MB, {frames:,} frames")

        # the CLI on the same files, one process, one file at a time (its own per-file cost)
        cli = sum(timed([*CLI, "analyze", "--format", "json", "--port", "5552", "--port",
                         "5553", str(f)]) for f in files[: len(captures)])  # fmt: skip
        cli_rate = frames_in(files[: len(captures)]) / cli
        one = job(archive, "local[1]", work / "out1")
        two = job(archive, "local[2]", work / "out2")
        # per-task overhead: a job over N tiny files in N tasks, less their dissection
        tiny = work / "tiny"
        tiny.mkdir()
        small = min(captures, key=lambda p: p.stat().st_size)
        for k in range(8):
            shutil.copy(small, tiny / f"{k}.pcap")
        tiny_job = job(tiny, "local[1]", work / "out3", partitions=8)
        single = job(tiny, "local[1]", work / "out4", partitions=1)
        overhead = (tiny_job - single) / 7
        print(f"CLI analyze, one file a process: {cli_rate:,.0f} frames/s")
        print(f"spark local[1]: {one:.1f} s, {frames / one:,.0f} frames/s, "
              f"{len(files) / one:.1f} files/s")
        print(f"spark local[2]: {two:.1f} s, {frames / two:,.0f} frames/s, "
              f"{len(files) / two:.1f} files/s")
        print(f"scaling 1 -> 2 cores: {one / two:.2f}x (target >= 1.7x)")
        print(f"per core, against the CLI: {frames / two / 2 / cli_rate:.2f}x "
              "(target: within 2x, >= 0.5)")
        print(f"per-task overhead: {overhead * 1000:.0f} ms (8 tiny files in 8 tasks: "
              f"{tiny_job:.1f} s; in one task: {single:.1f} s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    sys.exit(main())
