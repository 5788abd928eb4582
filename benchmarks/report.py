#!/usr/bin/env python3
"""Time `streamdissect report` against `streamdissect analyze` on the benchmark captures, and
check issue 17's targets: report <= 2x analyze + 5 s, and the HTML file <= 5 MB.

    python benchmarks/report.py [FILE...] [--repeats 3] [--json PATH]

FILE defaults to whichever of benchmarks/out/large.pcap, large1.pcap and small.pcap exist
(made by make_large.py: `python benchmarks/make_large.py --help`). Each measurement is a
fresh child process timed spawn..reap with its peak RSS (run.py's run_once); the repeats go
round-robin over the two commands and the median is reported. `analyze` is run as run.py
runs it (`--format json`, output to /dev/null); `report` writes its HTML to a temporary file.
Both run as `python -m streamdissect` from this source tree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from run import run_once, tail

DEFAULTS = ("large.pcap", "large1.pcap", "small.pcap")
MAX_HTML = 5_000_000
CLI = [sys.executable, "-m", "streamdissect"]


def into_page_cache(path: str) -> None:
    """Read the file once, so that every run reads it from the page cache."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def round_robin(commands: dict[str, list], repeats: int, timeout: float, env: dict,
                where: str) -> dict[str, list]:  # fmt: skip
    """Each command `repeats` times, round-robin (slow drift hits them alike): name -> its
    runs (run.py's run_once); a command that fails stops the benchmark with its stderr."""
    runs: dict[str, list] = {name: [] for name in commands}
    for r in range(repeats):
        for name, command in commands.items():
            run, text = run_once(command, timeout, env)
            if run.rc != 0 or run.timed_out:
                raise SystemExit(f"{name} failed on {where}:\n{tail(text)}")
            runs[name].append(run)
            print(f"  {name:<8} run {r + 1}: {run.wall_s:7.3f} s  {run.maxrss_mb:7.1f} MB",
                  flush=True)  # fmt: skip
    return runs


def measure(path: str, repeats: int, timeout: float) -> dict:
    into_page_cache(path)
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        html = os.path.join(tmp, "report.html")
        argv = {"analyze": [*CLI, "analyze", "--format", "json", path],
                "report": [*CLI, "report", "-q", path, "-o", html]}  # fmt: skip
        runs = round_robin(argv, repeats, timeout, env, path)
        size = os.path.getsize(html)
    analyze_s = statistics.median(r.wall_s for r in runs["analyze"])
    report_s = statistics.median(r.wall_s for r in runs["report"])
    budget = 2 * analyze_s + 5
    return {
        "file": path, "bytes": os.path.getsize(path), "repeats": repeats,
        "analyze_s": analyze_s, "report_s": report_s, "ratio": report_s / analyze_s,
        "budget_s": budget, "time_ok": report_s <= budget,
        "analyze_rss_mb": max(r.maxrss_mb for r in runs["analyze"]),
        "report_rss_mb": max(r.maxrss_mb for r in runs["report"]),
        "html_bytes": size, "size_ok": size <= MAX_HTML,
        "runs": {name: [r.wall_s for r in rs] for name, rs in runs.items()},
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", metavar="FILE")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", metavar="PATH", help="also write the results here")
    args = parser.parse_args(argv)
    files = args.files or [str(HERE / "out" / n) for n in DEFAULTS if (HERE / "out" / n).exists()]
    if not files:
        print("no benchmark capture: make one with python benchmarks/make_large.py",
              file=sys.stderr)  # fmt: skip
        return 2
    results = []
    for path in files:
        print(f"{path} ({os.path.getsize(path) / 1e6:,.0f} MB)", flush=True)
        results.append(measure(path, args.repeats, args.timeout))
    print(f"\n{'capture':<28} {'analyze':>9} {'report':>9} {'ratio':>6} {'budget':>9} "
          f"{'time':>5} {'HTML':>8} {'size':>5} {'RSS':>8}")  # fmt: skip
    for r in results:
        print(f"{Path(r['file']).name:<28} {r['analyze_s']:8.2f}s {r['report_s']:8.2f}s "
              f"{r['ratio']:5.2f}x {r['budget_s']:8.2f}s {'PASS' if r['time_ok'] else 'FAIL':>5} "
              f"{r['html_bytes'] / 1e6:6.2f}MB {'PASS' if r['size_ok'] else 'FAIL':>5} "
              f"{r['report_rss_mb']:6.0f}MB")  # fmt: skip
    print("\ntargets (issue 17): report <= 2x analyze + 5 s; HTML <= 5 MB")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r["time_ok"] and r["size_ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
