#!/usr/bin/env python3
"""Time streamdissect against baselines on one capture, and check the issue's targets.

    python benchmarks/run.py [FILE] [--repeats 3] [--flatness FILE2] [--json PATH]

FILE defaults to benchmarks/out/large.pcap (made by make_large.py).  Every measurement is a
fresh child process (stdout to /dev/null, stdin closed); its wall time is taken around
spawn..reap and its peak RSS from wait4()'s rusage (the child and any children it waited
for).  The repeats go round-robin over the tools so slow drift hits all of them alike; the
median is reported with min/max.  The file is read once beforehand so every tool reads it
from the page cache.

Rows: cat (the floor: reading the bytes), tshark -q -z conv,tcp (a C dissector doing TCP
conversation bookkeeping), scapy sniff(session=TCPSession) on the first --scapy-packets
packets (rate from its loop only, imports excluded), streamdissect frames/analyze (the CLI),
and the pandas tables (streamdissect.analysis.analyze(FILE), every table built).  A command
that fails or times out is reported with its stderr tail; the run goes on.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from pcapio import count_packets, write_slice

MARK = "SD_BENCH "

SCAPY_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
from scapy.all import sniff
from scapy.sessions import TCPSession
t1 = time.perf_counter()
out = [0]
def seen(pkt):
    out[0] += 1
sniff(offline=sys.argv[1], session=TCPSession, store=False, prn=seen)
t2 = time.perf_counter()
print("SD_BENCH " + json.dumps({"import_s": t1 - t0, "loop_s": t2 - t1, "emitted": out[0]}),
      file=sys.stderr)
"""

SCAPY_LAYER_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
from scapy.all import sniff
from scapy.sessions import TCPSession
from streamdissect.scapy import StreamFrame
t1 = time.perf_counter()
out = [0, 0]
def seen(pkt):
    out[0] += 1
    first = pkt.getlayer(StreamFrame)
    if first is not None:
        out[1] += len(first.frames())
sniff(offline=sys.argv[1], session=TCPSession, store=False, prn=seen)
t2 = time.perf_counter()
print("SD_BENCH " + json.dumps({"import_s": t1 - t0, "loop_s": t2 - t1, "emitted": out[0],
                                "frames": out[1]}), file=sys.stderr)
"""

# As a notebook calls it: pandas is loaded by then (its import is timed apart, as import_s).
PANDAS_SCRIPT = r"""
import functools, json, sys, time
t0 = time.perf_counter()
from streamdissect.analysis import analyze
import pandas
t1 = time.perf_counter()
a = analyze(sys.argv[1])
t2 = time.perf_counter()
names = [n for n, v in vars(type(a)).items() if isinstance(v, functools.cached_property)]
rows = {}
for n in names:
    df = getattr(a, n)
    rows[n] = int(len(df))
    df.head(1).to_dict()
t3 = time.perf_counter()
print("SD_BENCH " + json.dumps({"import_s": t1 - t0, "analyze_s": t2 - t1, "tables_s": t3 - t2,
                                "rows": rows}), file=sys.stderr)
"""

# The call as a notebook makes it: pandas and pyarrow are loaded by then (their import,
# ~0.3 s, is timed apart as import_s).
FRAMES_TABLE_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
from streamdissect.analysis import frames_table
import pandas, pyarrow
t1 = time.perf_counter()
table = frames_table(sys.argv[1])
t2 = time.perf_counter()
print("SD_BENCH " + json.dumps({"import_s": t1 - t0, "table_s": t2 - t1, "rows": len(table)}),
      file=sys.stderr)
"""

CLI_SCRIPT = "import sys; from streamdissect.cli import main; sys.exit(main())"


@dataclass
class Run:
    wall_s: float
    maxrss_mb: float
    rc: int
    timed_out: bool = False
    extra: dict | None = None
    cpu_s: float | None = None  # user + sys of the command and the children it waited for


@dataclass
class Tool:
    name: str
    what: str
    argv: list[str]
    path: str          # the file it reads
    packets: int = 0
    bytes: int = 0
    runs: list[Run] = field(default_factory=list)
    error: str | None = None    # the first failure: exit code/timeout and stderr tail
    note: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.runs) and self.error is None

    def walls(self) -> list[float]:
        return [r.wall_s for r in self.runs]

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.walls()) if self.ok else None

    @property
    def cpu_median_s(self) -> float | None:
        cpus = [r.cpu_s for r in self.runs if r.cpu_s is not None]
        return statistics.median(cpus) if self.ok and cpus else None

    @property
    def peak_rss_mb(self) -> float | None:
        return max(r.maxrss_mb for r in self.runs) if self.ok else None

    @property
    def median_cpu_s(self) -> float | None:
        return statistics.median(r.cpu_s for r in self.runs) if self.ok else None

    def rate_s(self) -> float | None:
        """Seconds the packet rate is computed from (scapy: its loop, imports excluded)."""
        if not self.ok:
            return None
        loops = [r.extra["loop_s"] for r in self.runs if r.extra and "loop_s" in r.extra]
        return statistics.median(loops) if loops else self.median_s

    def pps(self) -> float | None:
        s = self.rate_s()
        return self.packets / s if s else None

    def mbps(self) -> float | None:
        s = self.rate_s()
        return self.bytes / 1e6 / s if s else None


TIME = "/usr/bin/time"


def run_once(argv: list[str], timeout: float, env: dict) -> tuple[Run, str]:
    """Spawn under /usr/bin/time (its %M is the child's peak RSS), wall time around it all.

    /usr/bin/time rather than this process's wait4(): a child forked from Python starts with
    Python's pages, and Linux keeps that high-water mark across exec, so a small tool such as
    cat would show ~25 MB.  Without /usr/bin/time, wait4() it is (rss_method says which).
    """
    with tempfile.TemporaryFile() as err, open(os.devnull, "wb") as null, \
            tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        cmd = [TIME, "-f", "%M", "-o", tf.name] + argv if RSS_METHOD == TIME else argv
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=null, stderr=err, env=env,
                             start_new_session=True)
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here; keep Popen quiet
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
        maxrss_kb = ru.ru_maxrss
        if RSS_METHOD == TIME:
            lines = tf.read().split()
            maxrss_kb = int(lines[-1]) if lines and lines[-1].isdigit() else 0
    extra = None
    for line in text.splitlines():
        if line.startswith(MARK):
            try:
                extra = json.loads(line[len(MARK):])
            except ValueError:
                pass
    return Run(round(wall, 4), round(maxrss_kb / 1024, 1), p.returncode, killed.is_set(),
               extra, round(ru.ru_utime + ru.ru_stime, 4)), text


RSS_METHOD = TIME if os.access(TIME, os.X_OK) else "wait4"


def tail(text: str, lines: int = 12, chars: int = 2000) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])[-chars:]


def file_stats(path: str) -> tuple[int, int]:
    """(packets, file bytes): own pcap reader, capinfos for what it cannot read (pcapng)."""
    size = os.path.getsize(path)
    try:
        return count_packets(path)[0], size
    except ValueError:
        out = subprocess.run(["capinfos", "-M", "-c", path], capture_output=True, text=True,
                             check=False)
        for line in out.stdout.splitlines():
            if "Number of packets" in line:
                return int(line.split(":")[1].strip()), size
        raise


# The interpreter whose environment runs streamdissect's rows (`--python`: a fresh one from
# installed.py, the package as users install it; default this one).
INTERPRETER = sys.executable


def use_interpreter(python: str | None) -> None:
    global INTERPRETER
    if python:
        if not os.access(python, os.X_OK):
            raise SystemExit(f"--python {python}: not an interpreter (make one: "
                             "python benchmarks/installed.py)")
        INTERPRETER = python


def add_python_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--python", metavar="PATH",
                    help="run streamdissect with this interpreter's environment (trees too): "
                    "benchmarks/installed.py makes one with the package installed as users "
                    "install it; default: this interpreter")


def streamdissect_cmd() -> list[str]:
    """The console script of the measured environment (no pyenv shim in the timing)."""
    script = Path(INTERPRETER).parent / "streamdissect"
    return [str(script)] if script.exists() else [INTERPRETER, "-c", CLI_SCRIPT]


def tree_tools(path: str, trees: list[str], log) -> list[Tool]:
    """`analyze` of each NAME=DIR source tree (its package byte-compiled, as byte_compile
    does for the one installed)."""
    tools = []
    for given in trees:
        name, _, tree = given.partition("=")
        tree = os.path.abspath(tree)
        if not name or not os.path.isdir(os.path.join(tree, "streamdissect")):
            raise SystemExit(f"--tree {given}: want NAME=DIR, DIR holding streamdissect/")
        subprocess.run([INTERPRETER, "-m", "compileall", "-q",
                        os.path.join(tree, "streamdissect")], check=True)  # fmt: skip
        log(f"byte-compiled {tree}/streamdissect (row analyze@{name})")
        tools.append(Tool(f"analyze@{name}", f"streamdissect analyze of {tree}",
                          ["env", f"PYTHONPATH={tree}", *streamdissect_cmd(), "analyze",
                           "--format", "json", path], path))  # fmt: skip
    return tools


SMALL_ONLY = ("tshark-ek", "frames-table", "frames-text", "frames-filter",
              "tshark-lua", "frames-verbose", "tshark-verbose")  # rows the small-frame targets need
PLUGIN_ROWS = ("tshark-lua", "tshark-verbose")  # rows that run tshark with the plugin
DELIVERS = 'command == "Deliver"'


def build_tools(path: str, scapy_slice: str, selected: set[str] | None,
                small: bool = False, plugin: str = "") -> list[Tool]:
    sd = streamdissect_cmd()
    tools = [
        Tool("cat", "cat FILE > /dev/null: reading the bytes (the floor)", ["cat", path], path),
        Tool("tshark", "tshark -r FILE -q -z conv,tcp: C dissection + TCP conversations",
             ["tshark", "-r", path, "-q", "-z", "conv,tcp"], path),
        Tool("scapy", "scapy sniff(offline, session=TCPSession, store=False) on a slice",
             [sys.executable, "-c", SCAPY_SCRIPT, scapy_slice], scapy_slice,
             note="packets/s and MB/s from sniff()'s own time, imports excluded"),
        Tool("scapy-layer", "the same with streamdissect.scapy imported: frames decoded",
             [INTERPRETER, "-c", SCAPY_LAYER_SCRIPT, scapy_slice], scapy_slice,
             note="packets/s and MB/s from sniff()'s own time, imports excluded"),
        Tool("frames", "streamdissect frames --format jsonl FILE > /dev/null",
             sd + ["frames", "--format", "jsonl", path], path),
        Tool("analyze", "streamdissect analyze --format json FILE > /dev/null",
             sd + ["analyze", "--format", "json", path], path),
        Tool("pandas", "python: streamdissect.analysis.analyze(FILE), every table built",
             [INTERPRETER, "-c", PANDAS_SCRIPT, path], path),
        Tool("tshark-ek", "tshark -r FILE -T ek > /dev/null: every packet's fields as JSON",
             ["tshark", "-r", path, "-T", "ek"], path),
        Tool("frames-table", "python: streamdissect.analysis.frames_table(FILE)",
             [INTERPRETER, "-c", FRAMES_TABLE_SCRIPT, path], path),
        Tool("frames-text", "streamdissect frames FILE > /dev/null: a text line a frame",
             sd + ["frames", path], path),
        Tool("frames-filter", f"streamdissect frames -Y '{DELIVERS}' FILE > /dev/null",
             sd + ["frames", "-Y", DELIVERS, path], path),
        Tool("tshark-lua", "tshark -n -X lua_script:PLUGIN -r FILE > /dev/null: a line a "
             "packet through the project's Wireshark plugin",
             ["tshark", "-n", "-X", f"lua_script:{plugin}", "-r", path], path),
        Tool("frames-verbose", "streamdissect frames -V FILE > /dev/null: every frame as a "
             "tree, messages and their AMQP sections (issue 27)",
             sd + ["frames", "-V", path], path),
        Tool("tshark-verbose", "tshark -n -X lua_script:PLUGIN -V -r FILE > /dev/null: every "
             "packet's tree through the project's Wireshark plugin",
             ["tshark", "-n", "-X", f"lua_script:{plugin}", "-V", "-r", path], path),
    ]
    if selected is None:
        return [t for t in tools if small or t.name not in SMALL_ONLY]
    return [t for t in tools if t.name in selected]


def measure(tools: list[Tool], repeats: int, timeout: float, repeat_cap: float, env: dict,
            log) -> None:
    for r in range(repeats):
        for t in tools:
            if t.error is not None or (t.runs and t.runs[0].wall_s > repeat_cap):
                continue
            run, text = run_once(t.argv, timeout, env)
            if run.rc != 0 or run.timed_out:
                why = (f"timed out after {timeout:.0f} s" if run.timed_out
                       else f"exit code {run.rc}")
                t.error = f"{why}; stderr tail:\n{tail(text)}"
                log(f"  {t.name:<8} run {r + 1}: FAILED ({why})")
                continue
            t.runs.append(run)
            log(f"  {t.name:<8} run {r + 1}: {run.wall_s:8.3f} s  {run.maxrss_mb:7.1f} MB")
    for t in tools:
        if t.ok and len(t.runs) < repeats:
            t.note = (t.note + "; " if t.note else "") + (
                f"{len(t.runs)} run(s) only: the first took more than {repeat_cap:.0f} s")


def fmt(v, spec: str, none: str = "-") -> str:
    return none if v is None else format(v, spec)


def ratio(a: Tool | None, b: Tool | None) -> float | None:
    if a is None or b is None or not a.ok or not b.ok or not b.median_s:
        return None
    return a.median_s / b.median_s


def table(tools: list[Tool]) -> str:
    by = {t.name: t for t in tools}
    head = ("tool", "median s", "min..max s", "CPU s", "x tshark", "x cat", "packets/s", "MB/s",
            "peak RSS MB")
    rows = [head]
    for t in tools:
        if not t.ok:
            rows.append((t.name, "FAILED", "", "", "", "", "", "", ""))
            continue
        w = t.walls()
        comparable = t.path == by.get("cat", t).path
        rows.append((
            t.name, f"{t.median_s:.3f}", f"{min(w):.3f}..{max(w):.3f}",
            fmt(t.cpu_median_s, ".2f"),
            fmt(ratio(t, by.get("tshark")) if comparable else None, ".3f"),
            fmt(ratio(t, by.get("cat")) if comparable else None, ".1f"),
            fmt(t.pps(), ",.0f"), fmt(t.mbps(), ",.1f"), fmt(t.peak_rss_mb, ".1f")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    out = []
    for k, r in enumerate(rows):
        out.append("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                             for i, c in enumerate(r)))
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def targets(tools: list[Tool], flat: dict | None, rss_limit: float,
            small: bool = False) -> list[dict]:
    by = {t.name: t for t in tools}
    an, ts, cat, sc = (by.get(n) for n in ("analyze", "tshark", "cat", "scapy"))

    def check(name: str, value, limit: float, le: bool, unit: str, missing: str) -> dict:
        if value is None:
            return {"target": name, "status": "N/A", "value": None, "limit": limit,
                    "detail": missing}
        ok = value <= limit if le else value >= limit
        return {"target": name, "status": "PASS" if ok else "FAIL", "value": round(value, 4),
                "limit": limit, "detail": "{} {} (limit {}{})".format(
                    format(value, ".3f"), unit, "<= " if le else ">= ", limit)}

    def why(*names: str) -> str:
        bad = [n for n in names if by.get(n) is None or not by[n].ok]
        return "no figure: {} failed or not run".format(", ".join(bad)) if bad else ""

    rate = None
    if an and an.ok and sc and sc.ok:
        rate = an.pps() / sc.pps()
    if small:  # (a small-frame capture: issue 13's targets instead of issue 6's)
        res = small_targets(by, check, why)
    else:
        res = [
            check("analyze <= 0.25x tshark", ratio(an, ts), 0.25, True, "x tshark",
                  why("analyze", "tshark")),
            check("analyze <= 10x cat", ratio(an, cat), 10, True, "x cat",
                  why("analyze", "cat")),
            check("packet rate >= 200x scapy TCPSession", rate, 200, False, "x scapy",
                  why("analyze", "scapy")),
            check(f"analyze peak RSS <= {rss_limit:g} MB", an.peak_rss_mb if an else None,
                  rss_limit, True, "MB", why("analyze")),
        ]
    if flat is not None:
        res.append(check("analyze peak RSS on 2x file within 20% of 1x", flat.get("change"),
                         0.20, True, "relative change", flat.get("detail", "")))
    return res


def small_targets(by: dict, check, why) -> list[dict]:
    """Issue 13's targets, on a small-frame capture (make_large.py --shape small)."""
    an, ts, pandas, ft = (by.get(n) for n in ("analyze", "tshark", "pandas", "frames-table"))
    jsonl, ek = by.get("frames"), by.get("tshark-ek")
    text, lua = by.get("frames-text"), by.get("tshark-lua")
    verbose, lua_verbose = by.get("frames-verbose"), by.get("tshark-verbose")
    verbose_cpu = None
    if verbose and verbose.ok and lua_verbose and lua_verbose.ok and lua_verbose.cpu_median_s:
        verbose_cpu = verbose.cpu_median_s / lua_verbose.cpu_median_s
    pandas_ratio = None
    if pandas and pandas.ok and an and an.ok:
        extras = [r.extra for r in pandas.runs if r.extra]
        inside = statistics.median(e["analyze_s"] + e["tables_s"] for e in extras)
        pandas_ratio = inside / an.median_s
    table_s = None
    if ft and ft.ok:
        table_s = statistics.median(r.extra["table_s"] for r in ft.runs if r.extra)
    return [
        check("analyze <= 0.15x tshark (small frames)", ratio(an, ts), 0.15, True, "x tshark",
              why("analyze", "tshark")),
        check("analyze() + pandas tables <= 2x CLI analyze", pandas_ratio, 2, True, "x analyze",
              why("pandas", "analyze")),
        check("frames_table() <= 1.0 s", table_s, 1.0, True, "s", why("frames-table")),
        check("frames_table() peak RSS <= 250 MB", ft.peak_rss_mb if ft else None, 250, True,
              "MB", why("frames-table")),
        check("frames --format jsonl <= 0.05x tshark -T ek", ratio(jsonl, ek), 0.05, True,
              "x tshark -T ek", why("frames", "tshark-ek")),
        check("frames text <= 0.05x tshark with the plugin (issue 25)", ratio(text, lua), 0.05,
              True, "x tshark-lua", why("frames-text", "tshark-lua")),
        check("frames -V <= 0.3x tshark -V with the plugin (issue 27)", ratio(verbose, lua_verbose),
              0.3, True, "x tshark -V", why("frames-verbose", "tshark-verbose")),
        check("frames -V <= 0.3x tshark -V, by CPU time (issue 27)", verbose_cpu, 0.3, True,
              "x tshark -V CPU", why("frames-verbose", "tshark-verbose")),
    ]


def env_info() -> dict:
    def first_line(cmd: list[str]) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False,
                                  cwd=ROOT).stdout.splitlines()[0].strip()
        except (OSError, IndexError, subprocess.SubprocessError):
            return "?"

    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    from importlib.metadata import PackageNotFoundError, version
    try:
        scapy_v = version("scapy")
    except PackageNotFoundError:
        scapy_v = "?"
    return {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "host_cpu": cpu,
            "cpus": os.cpu_count(), "python": platform.python_version(),
            "tshark": first_line(["tshark", "-v"]), "scapy": scapy_v,
            "git": git_rev()}


def cpu_ticks() -> tuple[int, int, int] | None:
    """(steal, total, busy) jiffies of all CPUs from /proc/stat. Steal: on a virtual machine,
    time the hypervisor gave to other guests. CPU-bound tools slow down by it, `cat` of a
    cached file much less, so their ratio moves with it. Busy: time any process of this
    machine ran (with this run's children's CPU time taken off, what else ran)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    fields += [0] * (8 - len(fields))
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return steal, sum(fields[:8]), user + nice + system + irq + softirq


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def git_rev() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                         cwd=ROOT, check=False).stdout.strip()
    return out or "?"


def warm(path: str) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def byte_compile(log) -> None:
    """Write streamdissect's .pyc files, as `pip install` of a wheel does. An editable
    install under PYTHONDONTWRITEBYTECODE=1 (as in this environment) has none, so every
    run would compile every module again (~0.1-0.2 s), which no installed user pays."""
    import importlib.util

    spec = importlib.util.find_spec("streamdissect")
    if spec is None or spec.origin is None:
        log("byte-compile: streamdissect not importable; skipped")
        return
    package = os.path.dirname(spec.origin)
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True)
    log(f"byte-compiled {package} (the package as pip installs it)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?", default=str(HERE / "out" / "large.pcap"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--flatness", metavar="FILE2",
                    help="the 2x capture (make_large.py --scale 2): analyze's peak RSS on it")
    ap.add_argument("--flatness-repeats", type=int, default=1)
    ap.add_argument("--json", metavar="PATH", default=str(HERE / "out" / "results.json"))
    ap.add_argument("--scapy-packets", type=int, default=20_000)
    ap.add_argument("--tools", help="comma-separated subset of: cat,tshark,scapy,scapy-layer,"
                                    "frames,analyze,pandas,tshark-ek,frames-table,"
                                    "frames-text,frames-filter,tshark-lua,frames-verbose,"
                                    "tshark-verbose")
    ap.add_argument("--timeout", type=float, default=1200, help="seconds per run")
    ap.add_argument("--repeat-cap", type=float, default=300,
                    help="a tool whose first run takes longer is not repeated")
    ap.add_argument("--rss-limit", type=float, default=200)
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                    help="also time `analyze` with the streamdissect package of another source "
                    "tree (PYTHONPATH=DIR), as the row analyze@NAME, in the same round-robin: "
                    "old and new code side by side (repeatable)")
    ap.add_argument("--small", action="store_true",
                    help="judge by the small-frame targets (automatic for --shape small files)")
    add_python_option(ap)
    args = ap.parse_args(argv)
    use_interpreter(args.python)

    sys.stdout.reconfigure(line_buffering=True)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    path = os.path.abspath(args.file)
    if not os.path.exists(path):
        ap.error(f"{path} does not exist: run python benchmarks/make_large.py first")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    info = env_info()
    byte_compile(log)
    info["byte_compiled"] = True
    info["interpreter"] = INTERPRETER
    packets, size = file_stats(path)
    made = {}
    if os.path.exists(path + ".json"):
        made = json.loads(Path(path + ".json").read_text())
    log(f"file {path}: {packets} packets, {size / 1e6:.1f} MB")
    # a small-frame capture (make_large.py --shape small) is judged by issue 13's targets
    small = made.get("shape") == "small" or args.small

    selected = set(args.tools.split(",")) if args.tools else None
    with tempfile.TemporaryDirectory(prefix="sd-bench-") as tmp:
        scapy_slice = os.path.join(tmp, "scapy-slice.pcap")
        if selected is None or selected & {"scapy", "scapy-layer"}:
            try:
                write_slice(path, scapy_slice, args.scapy_packets)
            except ValueError:  # not classic pcap (pcapng): editcap cuts it, as pcap
                subprocess.run(["editcap", "-F", "pcap", "-r", path, scapy_slice,
                                f"1-{args.scapy_packets}"], check=True, capture_output=True)
        plugin = os.path.join(tmp, "rabbitmq_stream.lua")
        if (selected is None and small) or (selected and selected & set(PLUGIN_ROWS)):
            subprocess.run(streamdissect_cmd() + ["wireshark", "-o", plugin], check=True)
        tools = build_tools(path, scapy_slice, selected, small, plugin)
        tools += tree_tools(path, args.tree, log)
        for t in tools:
            if t.path == path:
                t.packets, t.bytes = packets, size
            else:
                t.packets = count_packets(t.path)[0]
                t.bytes = os.path.getsize(t.path)
        warm(path)
        load0 = os.getloadavg()
        ticks0, ours0, wall0 = cpu_ticks(), children_cpu_s(), time.monotonic()
        log(f"measuring ({args.repeats} repeats, round-robin) ...")
        measure(tools, args.repeats, args.timeout, args.repeat_cap, env, log)
        ticks1, ours1, wall1 = cpu_ticks(), children_cpu_s(), time.monotonic()
        if ticks0 and ticks1 and ticks1[1] > ticks0[1]:
            info["cpu_steal"] = round((ticks1[0] - ticks0[0]) / (ticks1[1] - ticks0[1]), 4)
            busy_s = (ticks1[2] - ticks0[2]) / os.sysconf("SC_CLK_TCK")
            # (jiffies are coarse: a few hundredths of a CPU either way are noise)
            info["other_cpu"] = round(max(busy_s - (ours1 - ours0), 0.0) / (wall1 - wall0), 3)

    flat = None
    if args.flatness:
        path2 = os.path.abspath(args.flatness)
        p2, s2 = file_stats(path2)
        log(f"flatness: {path2}: {p2} packets, {s2 / 1e6:.1f} MB")
        warm(path2)
        an1 = next((t for t in tools if t.name == "analyze"), None)
        an2 = Tool("analyze-2x", "streamdissect analyze on the 2x file",
                   streamdissect_cmd() + ["analyze", "--format", "json", path2], path2, p2, s2)
        measure([an2], args.flatness_repeats, args.timeout, args.repeat_cap, env, log)
        flat = {"file2": path2, "packets2": p2, "bytes2": s2, "tool": asdict_tool(an2)}
        if an1 is not None and an1.ok and an2.ok:
            r1, r2 = an1.peak_rss_mb, an2.peak_rss_mb
            flat["change"] = abs(r2 - r1) / r1
            flat["detail"] = f"{r1:.1f} MB on 1x, {r2:.1f} MB on 2x"
        else:
            flat["detail"] = "no figure: analyze failed or not run on %s" % (
                "the 2x file" if an1 is not None and an1.ok else "the 1x file")

    results = targets(tools, flat, args.rss_limit, small)
    info["git_after"] = git_rev()
    info["streamdissect_uncommitted"] = bool(subprocess.run(
        ["git", "status", "--porcelain", "--", "streamdissect"], capture_output=True, text=True,
        cwd=ROOT, check=False).stdout.strip())
    info["loadavg_before"] = [round(x, 2) for x in load0]
    info["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]

    print()
    print(f"streamdissect benchmark: {path}")
    workload = (f"; {made['messages']} messages of {made['body_size']} bytes published with "
                f"confirms and consumed ({made.get('client', '?')})" if made else "")
    print(f"  {packets} packets, {size / 1e6:.1f} MB{workload}")
    print(f"  {info['host_cpu']}, {info['cpus']} CPUs, Python {info['python']}, "
          f"{info['tshark']}, scapy {info['scapy']}, git {info['git']}")
    if info["git_after"] != info["git"]:
        print(f"  note: git HEAD moved during the run ({info['git']} -> {info['git_after']}): "
              "rows may mix versions")
    if info["streamdissect_uncommitted"]:
        print("  note: uncommitted changes under streamdissect/: the figures are for the work "
              "tree, not for a commit")
    print(f"  median of {args.repeats} runs each (min..max shown), peak RSS = max over the runs "
          f"({RSS_METHOD})")
    print(f"  streamdissect run by {INTERPRETER}")
    before, after = ("/".join(f"{x:.2f}" for x in info[k])
                     for k in ("loadavg_before", "loadavg_after"))  # fmt: skip
    print(f"  load average (1/5/15 min) before {before}, after {after}: other work on the machine "
          "shows as spread\n")
    if info.get("cpu_steal") is not None:
        print("  CPU steal during the runs: %.1f %% of all CPU time (the hypervisor serving "
              "other guests)" % (100 * info["cpu_steal"]))
        print(f"  other processes on this machine during the runs: {info['other_cpu']:.2f} of a "
              "CPU on average (a RabbitMQ broker left running adds its timers: "
              "bash scripts/brokers.sh stop)\n")
    print(table(tools))
    for t in tools:
        if t.name in ("scapy", "scapy-layer") and t.ok:
            print(f"\n  {t.name}: first {t.packets} packets ({t.bytes / 1e6:.1f} MB); whole "
                  f"process median {t.median_s:.3f} s, sniff() loop {t.rate_s():.3f} s")
            if t.name == "scapy-layer":
                print(scapy_layer_line(tools, t))
        elif t.note:
            print(f"\n  {t.name}: {t.note}")
        extras = [r.extra for r in t.runs if r.extra and "analyze_s" in r.extra]
        if extras:
            analyze_s = statistics.median(e["analyze_s"] for e in extras)
            tables_s = statistics.median(e["tables_s"] for e in extras)
            print(f"\n  pandas: import {extras[0]['import_s']:.2f} s, analyze() {analyze_s:.2f} s, "
                  f"tables {tables_s:.2f} s; rows {extras[0]['rows']}")
    for t in tools:
        if t.error:
            error = t.error.replace("\n", "\n    ")
            print(f"\n  {t.name} FAILED ({t.what}):\n    {error}")
    if flat is not None:
        an2 = flat["tool"]
        if an2["error"]:
            error = an2["error"].replace("\n", "\n    ")
            print(f"\n  analyze on the 2x file FAILED: {error}")
    print("\ntargets:")
    for r in results:
        print(f"  {r['status']:<4}  {r['target']:<48} {r['detail']}")

    doc = {"file": path, "packets": packets, "bytes": size, "made": made,
           "env": dict(info, rss_method=RSS_METHOD),
           "repeats": args.repeats, "tools": [asdict_tool(t) for t in tools],
           "flatness": flat, "targets": results}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nresults written to {args.json}")
    return 0


def scapy_layer_line(tools: list[Tool], layer: Tool) -> str:
    """What the layer costs against plain TCPSession, and what `frames` gives instead."""
    by = {t.name: t for t in tools}
    frames = statistics.median(r.extra["frames"] for r in layer.runs if r.extra)
    parts = [f"  {frames:,.0f} frames decoded, {frames / layer.rate_s():,.0f} frames/s"]
    plain = by.get("scapy")
    if plain is not None and plain.ok:
        parts.append(f"packet rate {layer.pps() / plain.pps():.2f}x plain TCPSession")
    cli = by.get("frames")
    if cli is not None and cli.ok:
        parts.append(f"streamdissect frames: {cli.pps() / layer.pps():,.0f}x the layer's "
                     "packet rate")
    return "; ".join(parts)


def asdict_tool(t: Tool) -> dict:
    d = asdict(t)
    d.update(ok=t.ok, median_s=t.median_s, cpu_median_s=t.cpu_median_s, peak_rss_mb=t.peak_rss_mb,
             min_s=min(t.walls()) if t.runs else None, max_s=max(t.walls()) if t.runs else None,
             rate_s=t.rate_s(), packets_per_s=t.pps(), mb_per_s=t.mbps())
    return d


if __name__ == "__main__":
    sys.exit(main())
