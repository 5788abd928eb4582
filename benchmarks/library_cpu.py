#!/usr/bin/env python3
"""CPU time of the library's bulk calls in a caller's process (a notebook's, a script's), with
Python's default garbage collector thresholds, as such a process has them.

    python benchmarks/library_cpu.py /work/bench/rocketmq.pcap /work/bench/small.pcap \\
        --tree main=/path/to/main --tree new=. [--repeats 3]

For each capture: `analyze(capture)` and `frame_batches(capture, protocol=...)` (`--protocol`,
by default "rocketmq" for a file whose name says so, else the Stream), each in a fresh
process with the tree's package first on sys.path, `helper_process=False` (the helper's CPU
would be another process's). Rounds alternate between the trees, so load moves all of them;
the load average is printed before and after. Per call and tree: the median CPU time
(time.process_time of the call alone, pandas and pyarrow imported before), the collections
of each generation the call made (gc.get_stats) and the peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CALL = """
import gc, json, resource, sys, time
import pandas, pyarrow  # (imported already in a notebook: not the call's time)
what, path, protocol = sys.argv[1:4]
if what == "analyze":
    from streamdissect.analysis import analyze
    call = lambda: analyze(path, helper_process=False)
else:
    from streamdissect.tables.batches import frame_batches
    call = lambda: sum(b.num_rows for b in frame_batches(path, helper_process=False,
                                                         protocol=protocol or None))
before = [s["collections"] for s in gc.get_stats()]
started = time.process_time()
call()
cpu = time.process_time() - started
made = [s["collections"] - b for s, b in zip(gc.get_stats(), before)]
print(json.dumps({"cpu": cpu, "collections": made,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
"""


def measure(tree: str, what: str, capture: str, protocol: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}  # (-P: not the cwd's)
    out = subprocess.run([sys.executable, "-P", "-c", CALL, what, capture, protocol], env=env,
                         check=True, capture_output=True, text=True)  # fmt: skip
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("captures", nargs="+")
    parser.add_argument("--tree", action="append", required=True, help="NAME=DIR")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--protocol", default=None)
    args = parser.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree)
    found: dict[tuple, list] = {}
    print("load average before:", os.getloadavg())
    for _ in range(args.repeats):
        for name, tree in trees.items():
            for capture in args.captures:
                protocol = args.protocol or ("rocketmq" if "rocketmq" in capture else "")
                for what in ("analyze", "frame_batches"):
                    key = (Path(capture).name, what, name)
                    found.setdefault(key, []).append(measure(tree, what, capture, protocol))
    print("load average after:", os.getloadavg())
    for (capture, what, name), runs in found.items():
        cpus = [r["cpu"] for r in runs]
        print(f"{capture:<20} {what:<14} {name:<10} CPU {statistics.median(cpus):6.2f} s "
              f"(min {min(cpus):.2f}, max {max(cpus):.2f}), collections "
              f"{runs[0]['collections']}, peak RSS {runs[0]['rss_mb']} MB")  # fmt: skip


if __name__ == "__main__":
    main()
