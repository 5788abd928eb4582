#!/usr/bin/env python3
"""Each process of a command's tree, its RSS over time split into anon, file and shared pages.

    python benchmarks/rss_split.py [--every 0.005] [--pss] [--series] -- CMD ARG...

`/usr/bin/time`'s peak (run.py's "peak MB") is the largest peak of any one process of the run;
this says which process it is and what its pages are: anon (heap, interpreter), file (the
libraries) and shmem (the helper's shared slots, as far as the process touched them). For each
process: its highest VmRSS sample, split at that moment; --pss adds its highest Pss (shared
pages divided among the processes that map them: what it holds counted once); --series prints
~60 samples of each over time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time

FIELDS = ("VmRSS", "RssAnon", "RssFile", "RssShmem")


def sample(pid: int, pss: bool) -> dict | None:
    """The process's RSS fields in MB (and Pss), None once it is gone."""
    got: dict = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key == "Name":
                    got[key] = value.strip()
                elif key in FIELDS:
                    got[key] = int(value.split()[0]) / 1024
        if pss:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        got["Pss"] = int(line.split()[1]) / 1024
    except OSError:
        return None
    return got if "VmRSS" in got else None


def tree(pid: int) -> list[int]:
    """The process and its descendants."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=float, default=0.005)
    ap.add_argument("--pss", action="store_true")
    ap.add_argument("--series", action="store_true")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    start = time.monotonic()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    series: dict[int, list] = {}
    while child.poll() is None:
        now = time.monotonic() - start
        for pid in tree(child.pid):
            got = sample(pid, args.pss)
            if got is not None:
                series.setdefault(pid, []).append((now, got))
        time.sleep(args.every)
    print(f"wall {time.monotonic() - start:.3f} s, exit {child.returncode}")
    for pid, samples in series.items():
        at, top = max(samples, key=lambda s: s[1]["VmRSS"])
        line = (f"pid {pid} {top.get('Name', '?')}: peak RSS {top['VmRSS']:.1f} MB at {at:.3f} s"
                f" (anon {top['RssAnon']:.1f}, file {top['RssFile']:.1f},"
                f" shmem {top['RssShmem']:.1f})")  # fmt: skip
        if args.pss:
            line += f"; peak Pss {max(s[1].get('Pss', 0.0) for s in samples):.1f} MB"
        print(line)
        if args.series:
            for at, got in samples[:: max(1, len(samples) // 60)]:
                print(f"  {at:7.3f} s  rss {got['VmRSS']:7.1f}  anon {got['RssAnon']:6.1f}"
                      f"  file {got['RssFile']:5.1f}  shmem {got['RssShmem']:6.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
