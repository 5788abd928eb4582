#!/usr/bin/env python3
"""Remake the capture corpus: ``python captures/make.py`` (all) or ``... NAME ...`` (some).

For every scenario in captures/scenarios/: start tcpdump on lo, run the scenario in a
child process (which records the client-side truth), stop tcpdump, keep only the
scenario's own connections in captures/NAME.pcap, write captures/NAME.truth.json, then
check the truth against the wire at the TCP level with tshark (connections, payload bytes
per direction).  Any disagreement is a hard failure (exit 1).

``python captures/make.py --check`` only re-runs the tshark check on the committed files.
Needs: the brokers (scripts/brokers.sh start), tcpdump, tshark, rstream, rbfly; node and
rabbitmq-stream-js-client for js-messages-4.0 (captures/README.md).
"""
from __future__ import annotations

import argparse
import importlib
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]

MAX_ONE = 1_000_000
MAX_ALL = 10_000_000


def _modules() -> list[str]:
    return sorted(p.stem for p in (HERE / "scenarios").glob("*.py") if not p.stem.startswith("_"))


def scenario_names() -> list[str]:
    """Capture names (each scenario module's NAME), e.g. rstream-publish-confirm-3.10."""
    return sorted(load_module(m).NAME for m in _modules())


def load_module(module: str):
    return importlib.import_module("scenarios." + module)


def load(name: str):
    """The scenario module whose NAME (capture name) is ``name``."""
    for m in _modules():
        mod = load_module(m)
        if mod.NAME == name:
            return mod
    raise KeyError(name)


# ---------------------------------------------------------------------------------------
# child side: run one scenario and write its truth


def _peer_version(s2c: bytes) -> str | None:
    """Server 'product version' from its PeerProperties response, read from client bytes."""
    from truthlib import I32, _string, split_frames

    for k, _v, b in split_frames(s2c)[0]:
        if k == 0x8011:
            (n,) = I32.unpack_from(b, 6)
            off, props = 10, {}
            for _ in range(n):
                key, off = _string(b, off)
                val, off = _string(b, off)
                props[key] = val
            return "%s %s" % (props.get("product", "?"), props.get("version", "?"))
    return None


def run_child(name: str, out: str) -> None:
    from importlib.metadata import version

    import truthlib

    mod = load(name)
    rec = truthlib.Recorder()
    rec.install_asyncio()
    started = time.time_ns()
    mod.run(rec)
    ended = time.time_ns()
    broker = None
    for c in rec.conns:
        broker = broker or _peer_version(bytes(c.s2c))
    if hasattr(mod, "client_version"):  # not a Python package (the JS client)
        client = mod.client_version()
    elif mod.CLIENT == "raw":
        client = "captures/rawclient.py (streamdissect codec %s)" % version("streamdissect")
    else:
        client = "%s %s" % (mod.CLIENT, version(mod.CLIENT))
    meta = {
        "capture": name + ".pcap",
        "scenario": mod.SCENARIO,
        "broker": broker or "unknown",
        "broker_port": mod.BROKER_PORT,
        "client": client,
        "started_ns": started,
        "ended_ns": ended,
    }
    truth = truthlib.build_truth(rec, meta)
    missing = [c for c in mod.COVERS if c not in truth["commands"]]
    if missing:
        raise SystemExit("%s: expected commands not seen on the wire: %s" % (name, missing))
    Path(out).write_text(json.dumps(truth, indent=1, sort_keys=False) + "\n")


# ---------------------------------------------------------------------------------------
# parent side: tcpdump around the child, then filter and check


def tcpdump_start(path: Path, pcap_filter: str = "tcp port 5552 or tcp port 5553",
                  buffer_kib: int = 32768) -> subprocess.Popen:  # fmt: skip
    """tcpdump on lo into `path`; `buffer_kib`: its kernel buffer (a long, busy recording on
    a loaded machine needs more, or the kernel drops packets)."""
    err = open(str(path) + ".err", "w+")
    p = subprocess.Popen(
        # a large kernel buffer: other loopback traffic on the broker ports (tests,
        # benchmarks) must not make tcpdump drop this scenario's packets
        # --immediate-mode: without it libpcap hands packets over per ring block (up to
        # ~1 s late) and a SIGINT right after a short scenario loses them all
        ["tcpdump", "-i", "lo", "-s", "0", "-U", "-n", "-B", str(buffer_kib), "--immediate-mode",
         "-w", str(path), pcap_filter],
        stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.time() + 10
    while time.time() < deadline:
        err.seek(0)
        if "listening on" in err.read():
            time.sleep(0.5)  # "listening on" can come a moment before packets are taken
            return p
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    raise SystemExit("tcpdump did not start: %s" % Path(str(path) + ".err").read_text())


def tcpdump_stop(p: subprocess.Popen, path: Path) -> int:
    """Stop tcpdump; returns the number of packets the kernel dropped."""
    time.sleep(0.5)  # let the last FIN/ACKs reach the ring
    p.send_signal(signal.SIGINT)
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.terminate()
        p.wait(10)
    m = re.search(r"(\d+) packets? dropped by kernel", Path(str(path) + ".err").read_text())
    return int(m.group(1)) if m else 0


def tshark_check(pcap: Path, truth: dict) -> list[str]:
    """TCP-level agreement between a pcap and its truth; returns the problems found."""
    problems = []
    out = subprocess.run(
        ["tshark", "-r", str(pcap), "-T", "fields", "-e", "tcp.srcport", "-e", "tcp.dstport",
         "-e", "tcp.len", "-e", "tcp.flags.syn", "-e", "tcp.flags.ack",
         "-e", "tcp.analysis.retransmission"],
        check=True, capture_output=True, text=True).stdout
    server_ports = {5552, 5553}
    got: dict = defaultdict(lambda: {"c2s": 0, "s2c": 0, "syn": 0})
    for line in out.splitlines():
        f = line.split("\t")
        src, dst, ln = int(f[0]), int(f[1]), int(f[2] or 0)
        if f[5] and ln:  # a retransmitted bare FIN/ACK carries no payload: harmless
            problems.append("retransmission %s->%s in the capture" % (src, dst))
        if dst in server_ports:
            key, d = src, "c2s"
        else:
            key, d = dst, "s2c"
        got[key][d] += ln
        if f[3] in ("1", "True") and f[4] in ("0", "False"):
            got[key]["syn"] += 1
    conv = subprocess.run(["tshark", "-r", str(pcap), "-q", "-z", "conv,tcp"],
                          check=True, capture_output=True, text=True).stdout
    n_conv = sum(1 for line in conv.splitlines() if "<->" in line)
    conns = truth["connections"]
    if n_conv != len(conns):
        problems.append("tshark conv,tcp lists %d connections, truth %d" % (n_conv, len(conns)))
    for c in conns:
        g = got.get(c["client_port"])
        if g is None:
            problems.append("port %d: not in the capture" % c["client_port"])
            continue
        if g["syn"] != 1:
            problems.append("port %d: %d SYNs (want one whole connection)" % (c["client_port"], g["syn"]))
        for d in ("c2s", "s2c"):
            if g[d] != c["bytes"][d]:
                problems.append("port %d %s: wire %d payload bytes, truth %d"
                                % (c["client_port"], d, g[d], c["bytes"][d]))
    extra = set(got) - {c["client_port"] for c in conns}
    if extra:
        problems.append("connections not in truth: %s" % sorted(extra))
    return problems


def make_one(name: str, tries: int = 2) -> None:
    """Make one capture; a failed attempt is reported and retried once, then fatal."""
    for attempt in range(1, tries + 1):
        try:
            return _make_one(name)
        except SystemExit as e:
            if attempt == tries:
                raise
            print("   attempt %d failed (%s); retrying" % (attempt, e), flush=True)


def _make_one(name: str) -> None:
    with tempfile.TemporaryDirectory(prefix="sd-cap-") as tmp:
        raw = Path(tmp) / "raw.pcap"
        tout = Path(tmp) / "truth.json"
        dump = tcpdump_start(raw)
        t0 = time.time()
        try:
            r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--run", name,
                                "--truth-out", str(tout)], timeout=120)
        finally:
            dropped = tcpdump_stop(dump, raw)
        if r.returncode != 0:
            raise SystemExit("scenario %s failed (exit %d)" % (name, r.returncode))
        truth = json.loads(tout.read_text())
        ports = sorted(c["client_port"] for c in truth["connections"])
        flt = "tcp and (%s)" % " or ".join("port %d" % p for p in ports)
        pcap = HERE / (name + ".pcap")
        subprocess.run(["tcpdump", "-r", str(raw), "-w", str(pcap), flt], check=True,
                       stderr=subprocess.DEVNULL)
        (HERE / (name + ".truth.json")).write_text(json.dumps(truth, indent=1) + "\n")
        problems = tshark_check(pcap, truth)
        if dropped:
            problems.append("tcpdump: %d packets dropped by kernel" % dropped)
        size = pcap.stat().st_size
        if size > MAX_ONE:
            problems.append("capture is %d bytes (> %d)" % (size, MAX_ONE))
        status = "OK" if not problems else "FAILED"
        print("%-40s %s  %.1fs  %d conns  %d bytes" % (name, status, time.time() - t0,
                                                     len(ports), size), flush=True)
        if problems:
            for p in problems:
                print("   ", p)
            raise SystemExit("truth disagrees with the wire for %s" % name)


def check_all(names: list[str]) -> int:
    bad = 0
    total = 0
    for name in names:
        pcap = HERE / (name + ".pcap")
        truth = json.loads((HERE / (name + ".truth.json")).read_text())
        total += pcap.stat().st_size
        problems = tshark_check(pcap, truth)
        print("%-40s %s" % (name, "OK" if not problems else "FAILED"))
        for p in problems:
            print("   ", p)
        bad += bool(problems)
    if total > MAX_ALL:
        print("corpus is %d bytes (> %d)" % (total, MAX_ALL))
        bad += 1
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="scenarios to remake (default: all)")
    ap.add_argument("--check", action="store_true", help="only check committed files")
    ap.add_argument("--run", help=argparse.SUPPRESS)
    ap.add_argument("--truth-out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.run:
        run_child(a.run, a.truth_out)
        return 0
    names = a.names or scenario_names()
    unknown = set(names) - set(scenario_names())
    if unknown:
        raise SystemExit("unknown scenarios: %s" % sorted(unknown))
    if a.check:
        return check_all(names)
    for name in names:
        make_one(name)
    return check_all(scenario_names() if not a.names else names)


if __name__ == "__main__":
    sys.exit(main())
