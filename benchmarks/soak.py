#!/usr/bin/env python3
"""A soak of the fuzz campaigns (issue 28, point 5): fuzz.py (frames, streams, captures with
their rotated pieces, the scapy layer) and fuzz_rocketmq.py side by side for the same
minutes, each at `nice -n 19`, their resident memory read from /proc every minute.

    python benchmarks/soak.py --minutes 30 [--seed 28] [--json PATH]

Each campaign is a child process (its own findings, time and memory bounds, its JSON); this
script only starts them, samples /proc/PID/statm every --every seconds and gathers the
figures: per campaign, the inputs and findings of each target, and RSS over time (the first
sample after the first minute is the warmed-up baseline). The exit status is 1 when a
campaign had a finding or failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CAMPAIGNS = {"stream": "fuzz.py", "rocketmq": "fuzz_rocketmq.py"}


def rss_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (FileNotFoundError, ProcessLookupError):
        return None


def last_json(text: str) -> dict | None:
    """The JSON object a campaign prints last (its summary)."""
    start = text.rfind("\n{")
    start = 0 if text.startswith("{") and start < 0 else start + 1
    try:
        return json.loads(text[start:])
    except ValueError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, required=True)
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    logs = Path(tempfile.mkdtemp(prefix="soak-"))
    children = {}
    for name, script in CAMPAIGNS.items():
        out = open(logs / f"{name}.log", "w")  # noqa: SIM115  (open while the child runs)
        argv_ = ["nice", "-n", "19", sys.executable, str(HERE / script),
                 "--minutes", str(args.minutes), "--seed", str(args.seed)]  # fmt: skip
        children[name] = (subprocess.Popen(argv_, stdout=out, stderr=subprocess.STDOUT), out)
    started = time.monotonic()
    samples: dict[str, list] = {name: [] for name in children}
    print(f"soak: {args.minutes} min, logs in {logs}", flush=True)
    next_sample = started + args.every
    while any(p.poll() is None for p, _ in children.values()):
        time.sleep(min(args.every, 5.0))
        if time.monotonic() >= next_sample:
            next_sample += args.every
            minute = (time.monotonic() - started) / 60
            line = []
            for name, (proc, _) in children.items():
                rss = rss_mib(proc.pid) if proc.poll() is None else None
                if rss is not None:
                    samples[name].append((round(minute, 2), round(rss, 1)))
                    line.append(f"{name} {rss:.0f} MiB")
            print(f"[{minute:5.1f} min, load {os.getloadavg()[0]:.1f}] " + ", ".join(line),
                  flush=True)  # fmt: skip
    results = {}
    for name, (proc, out) in children.items():
        out.close()
        text = (logs / f"{name}.log").read_text()
        summary = last_json(text)
        series = samples[name]
        warm = next((rss for minute, rss in series if minute >= 1.0), None)
        results[name] = {
            "exit": proc.returncode,
            "findings": None if summary is None else summary["findings"],
            "inputs": None
            if summary is None
            else {t: v["inputs"] for t, v in summary["targets"].items()},
            "rss_mib": series,
            "rss_after_1_min_mib": warm,
            "rss_end_mib": series[-1][1] if series else None,
            "rss_max_mib": max((rss for _, rss in series), default=None),
            "summary": summary,
        }
        print(
            f"{name}: exit {proc.returncode}, findings {results[name]['findings']}, inputs "
            f"{results[name]['inputs']}, RSS after 1 min {warm} MiB, end "
            f"{results[name]['rss_end_mib']} MiB, max {results[name]['rss_max_mib']} MiB"
        )
    if args.json:
        args.json.write_text(json.dumps({"minutes": args.minutes, "seed": args.seed,
                                         "campaigns": results}, indent=1) + "\n")  # fmt: skip
    bad = any(r["exit"] != 0 or r["findings"] for r in results.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
