#!/usr/bin/env python3
"""`analyze` on one capture in every input form, side by side (issue 25's targets).

    python benchmarks/forms.py benchmarks/out/small.pcap [--repeats 3] [--pieces 4]

Makes the forms from the capture into benchmarks/out/forms/ with the tools people use
(`editcap -F pcapng`, `gzip -1`, `editcap -c` for a rotated set), then times, round robin,
medians of --repeats: cat (the floor), `gzip -dc` (inflating alone), tshark's
`-q -z conv,tcp` on the plain file, and `streamdissect analyze --format json` on the plain
pcap, the pcapng, the gzip'd pcap, the pieces and the plain pcap through a pipe
(`cat FILE | analyze -`). Targets: each form within 1.15x of the plain pcap's time (the
gzip'd one: of plain + `gzip -dc`). The machine's load before and after is printed: the
ratios are measured in one run, so load moves both sides. Peak MB is /usr/bin/time's: the
largest peak RSS of any one process of the run (analyze's main process, its helper, cat),
not their sum (benchmarks/rss_split.py shows each).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import Tool, add_python_option, measure, streamdissect_cmd, use_interpreter

LIMIT = 1.15
FLAT = 1.10


def make_forms(path: Path, folder: Path, pieces: int) -> dict[str, list[str]]:
    """The capture's forms, made once (kept while the capture is older)."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = path.stem
    ng, gz = folder / f"{stem}.pcapng", folder / f"{stem}.pcap.gz"
    piece_dir = folder / f"{stem}-pieces{pieces}"
    fresh = lambda p: p.exists() and p.stat().st_mtime >= path.stat().st_mtime
    if not fresh(ng):
        subprocess.run(["editcap", "-F", "pcapng", str(path), str(ng)], check=True)
    if not fresh(gz):
        with open(gz, "wb") as out:
            subprocess.run(["gzip", "-1", "-c", str(path)], stdout=out, check=True)
    if not fresh(piece_dir):
        piece_dir.mkdir(exist_ok=True)
        for old in piece_dir.iterdir():
            old.unlink()
        count = int(subprocess.run(["capinfos", "-M", "-c", "-T", "-r", str(path)],
                                   capture_output=True, text=True, check=True).stdout.split()[-1])
        subprocess.run(["editcap", "-F", "pcap", "-c", str(-(-count // pieces)), str(path),
                        str(piece_dir / f"{stem}.pcap")], check=True)  # fmt: skip
    return {"pcapng": [str(ng)], "gzip": [str(gz)],
            "pieces": sorted(str(p) for p in piece_dir.iterdir())}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("capture", type=Path)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pieces", type=int, default=4)
    ap.add_argument("--no-tshark", action="store_true")
    ap.add_argument("--flatness", type=Path, metavar="CAPTURE2X",
                    help="the same traffic twice as long: each form's peak RSS on it within "
                         f"{FLAT}x of the first's")
    add_python_option(ap)
    args = ap.parse_args(argv)
    use_interpreter(args.python)
    plain = str(args.capture)
    forms = make_forms(args.capture, HERE / "out" / "forms", args.pieces)
    sd = streamdissect_cmd()
    analyze = [*sd, "analyze", "--format", "json"]
    tools = [
        Tool("cat", "cat FILE", ["cat", plain], plain),
        Tool("gunzip", "gzip -dc FILE.gz", ["gzip", "-dc", forms["gzip"][0]], plain),
        *analyze_tools(plain, forms, analyze),
    ]
    if not args.no_tshark:
        tools.insert(2, Tool("tshark", "tshark -r FILE -q -z conv,tcp",
                             ["tshark", "-r", plain, "-q", "-z", "conv,tcp"], plain))
    for t in tools:  # (every file read once first: all from the page cache)
        for f in t.argv:
            if os.path.isfile(f):
                Path(f).read_bytes()
    load = os.getloadavg()
    measure(tools, args.repeats, 1200.0, 300.0, dict(os.environ), print)
    after = os.getloadavg()
    by = {t.name: t for t in tools}
    base = by["plain"].median_s
    print(f"\nstreamdissect run by {sd[0]}")
    print(f"load average before {load[0]:.2f}, after {after[0]:.2f} (2 CPUs)")
    print(f"{'tool':<8} {'median s':>9} {'min..max s':>15} {'x plain':>8} {'peak MB':>8}  what")
    for t in tools:
        if not t.ok:
            print(f"{t.name:<8} FAILED: {t.error}")
            continue
        walls = t.walls()
        print(f"{t.name:<8} {t.median_s:9.3f} {min(walls):7.3f}..{max(walls):<7.3f} "
              f"{t.median_s / base:8.3f} {t.peak_rss_mb:8.1f}  {t.what}")  # fmt: skip
    failed = 0
    for name in ("pcapng", "gzip", "pieces", "pipe"):
        t = by[name]
        limit = LIMIT * (base + (by["gunzip"].median_s if name == "gzip" else 0))
        ok = t.ok and t.median_s <= limit
        failed += not ok
        got = f"{t.median_s:.3f} s" if t.ok else "failed"
        print(f"target {name}: <= {limit:.3f} s ({LIMIT}x plain"
              f"{' + gzip -dc' if name == 'gzip' else ''}): {got} {'PASS' if ok else 'FAIL'}")
    if "tshark" in by and by["tshark"].ok:
        print(f"plain analyze / tshark conv,tcp: {base / by['tshark'].median_s:.3f}x")
    if args.flatness:
        failed += flatness(args, by, analyze)
    return 1 if failed else 0


def analyze_tools(plain: str, forms: dict, analyze: list[str]) -> list[Tool]:
    """analyze on each form of a capture."""
    return [
        Tool("plain", "analyze FILE.pcap", [*analyze, plain], plain),
        Tool("pcapng", "analyze FILE.pcapng", [*analyze, *forms["pcapng"]], plain),
        Tool("gzip", "analyze FILE.pcap.gz", [*analyze, *forms["gzip"]], plain),
        Tool("pieces", f"analyze PIECE x{len(forms['pieces'])}", [*analyze, *forms["pieces"]],
             plain),
        Tool("pipe", "cat FILE | analyze -",
             ["sh", "-c", f"cat {shlex.quote(plain)} | {shlex.join(analyze)} -"], plain),
    ]


def flatness(args: argparse.Namespace, by: dict, analyze: list[str]) -> int:
    """Each form's peak RSS on the 2x capture against the 1x one's; the failures."""
    forms2 = make_forms(args.flatness, HERE / "out" / "forms", args.pieces)
    tools2 = analyze_tools(str(args.flatness), forms2, analyze)
    measure(tools2, 1, 1200.0, 300.0, dict(os.environ), print)
    failed = 0
    for t in tools2:
        one = by[t.name].peak_rss_mb if by[t.name].ok else None
        ok = t.ok and one is not None and t.peak_rss_mb <= FLAT * one
        failed += not ok
        two = f"{t.peak_rss_mb:.1f} MB" if t.ok else "failed"
        print(f"flat {t.name}: 1x {one} MB, 2x {two} (<= {FLAT}x): {'PASS' if ok else 'FAIL'}")
    return failed


if __name__ == "__main__":
    sys.exit(main())
