#!/usr/bin/env python3
"""`analyze` on the RocketMQ benchmark capture against tshark (issue 26's speed target).

    python benchmarks/rocketmq.py benchmarks/out/rocketmq.pcap \\
        --flatness benchmarks/out/rocketmq2x.pcap [--repeats 3]

The captures come from make_rocketmq.py (100,000 sends and their pulls; --scale 2 for the
second). `--tree NAME=DIR` adds a row analyze@NAME: the 1x capture analysed with another
source tree's package, in the same round robin (old code against new under the same load).
Times, round robin in one run, medians of --repeats: cat (the floor), tshark
`-r FILE -q -z conv,tcp`, and `streamdissect analyze --format json FILE` (stdout to
/dev/null), on the 1x capture and, with --flatness, on the 2x one too. Each row gives wall
and CPU time (user + sys of the command and what it waited for: streamdissect's helper
process) and peak RSS (/usr/bin/time's %M). Targets: analyze's median wall time at most
0.2x tshark's on the same file; its peak RSS on the 2x capture within 1.2x of the 1x one's
(memory flat in the capture's size). The load average before and after and the CPU the
machine's other processes used meanwhile are printed: both sides are measured in the same
run, so load moves both.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import (
    Tool,
    add_python_option,
    byte_compile,
    children_cpu_s,
    cpu_ticks,
    file_stats,
    git_rev,
    measure,
    streamdissect_cmd,
    tree_tools,
    use_interpreter,
    warm,
)

RATIO = 0.2
FLAT = 1.2


def tools_for(path: str, suffix: str = "") -> list[Tool]:
    sd = streamdissect_cmd()
    return [
        Tool("tshark" + suffix, "tshark -r FILE -q -z conv,tcp",
             ["tshark", "-r", path, "-q", "-z", "conv,tcp"], path),
        Tool("analyze" + suffix, "streamdissect analyze --format json FILE",
             [*sd, "analyze", "--format", "json", path], path),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("capture", nargs="?", default=str(HERE / "out" / "rocketmq.pcap"))
    ap.add_argument("--flatness", metavar="CAPTURE2X",
                    help="the same traffic twice over (make_rocketmq.py --scale 2)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=1200, help="seconds per run")
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                    help="also analyze the 1x capture with the streamdissect package of another "
                    "source tree, as the row analyze@NAME, in the same round robin (old and "
                    "new code side by side; repeatable)")
    add_python_option(ap)
    args = ap.parse_args(argv)
    use_interpreter(args.python)
    sys.stdout.reconfigure(line_buffering=True)
    paths = [os.path.abspath(args.capture)]
    if args.flatness:
        paths.append(os.path.abspath(args.flatness))
    for p in paths:
        if not os.path.exists(p):
            ap.error(f"{p} does not exist: run python benchmarks/make_rocketmq.py first")
    byte_compile(print)
    tools = [Tool("cat", "cat FILE", ["cat", paths[0]], paths[0]), *tools_for(paths[0])]
    tools += tree_tools(paths[0], args.tree, print)
    if args.flatness:
        tools += tools_for(paths[1], "@2x")
    for p in paths:
        packets, size = file_stats(p)
        print(f"{p}: {packets} packets, {size / 1e6:.1f} MB")
        for t in tools:
            if t.path == p:
                t.packets, t.bytes = packets, size
        warm(p)  # (every run reads it from the page cache)

    load, ticks, ours = os.getloadavg(), cpu_ticks(), children_cpu_s()
    measure(tools, args.repeats, args.timeout, args.timeout, dict(os.environ), print)
    after, ticks2, ours2 = os.getloadavg(), cpu_ticks(), children_cpu_s()
    print(f"\nstreamdissect run by {streamdissect_cmd()[0]}")
    print(f"git {git_rev()}; load average before {load[0]:.2f}, after {after[0]:.2f} "
          f"({os.cpu_count()} CPUs)")
    if ticks and ticks2:
        hz = os.sysconf("SC_CLK_TCK")
        elapsed = (ticks2[1] - ticks[1]) / hz / (os.cpu_count() or 1)
        other = (ticks2[2] - ticks[2]) / hz - (ours2 - ours)
        steal = (ticks2[0] - ticks[0]) / max(ticks2[1] - ticks[1], 1)
        print(f"meanwhile other processes used {other / max(elapsed, 1e-9):.2f} of a CPU; "
              f"steal {steal:.1%}")
    print(f"\n{'tool':<14} {'median s':>9} {'min..max s':>17} {'cpu s':>7} {'x tshark':>9} "
          f"{'cpu x':>7} {'peak MB':>8}")
    by = {t.name: t for t in tools}
    for t in tools:
        if not t.ok:
            print(f"{t.name:<14} FAILED: {t.error}")
            continue
        walls = t.walls()
        ts = by.get("tshark" + ("@2x" if t.name.endswith("@2x") else ""))
        ratio = cpu_ratio = "-"
        if ts is not None and ts.ok:
            ratio = f"{t.median_s / ts.median_s:.3f}"
            cpu_ratio = f"{t.median_cpu_s / ts.median_cpu_s:.3f}"
        print(f"{t.name:<14} {t.median_s:9.3f} {min(walls):8.3f}..{max(walls):<7.3f} "
              f"{t.median_cpu_s:7.2f} {ratio:>9} {cpu_ratio:>7} {t.peak_rss_mb:8.1f}")
    failed = 0
    for suffix in ("", "@2x") if args.flatness else ("",):
        a, ts = by["analyze" + suffix], by["tshark" + suffix]
        ok = a.ok and ts.ok and a.median_s <= RATIO * ts.median_s
        failed += not ok
        got = f"{a.median_s / ts.median_s:.3f}x" if a.ok and ts.ok else "failed"
        print(f"target analyze{suffix} <= {RATIO}x tshark conv,tcp (wall): {got} "
              f"{'PASS' if ok else 'FAIL'}")
    if args.flatness:
        one, two = by["analyze"], by["analyze@2x"]
        ok = one.ok and two.ok and two.peak_rss_mb <= FLAT * one.peak_rss_mb
        failed += not ok
        got = (f"1x {one.peak_rss_mb:.1f} MB, 2x {two.peak_rss_mb:.1f} MB "
               f"({two.peak_rss_mb / one.peak_rss_mb:.2f}x)" if one.ok and two.ok else "failed")
        print(f"target analyze peak RSS flat (2x within {FLAT}x of 1x): {got} "
              f"{'PASS' if ok else 'FAIL'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
