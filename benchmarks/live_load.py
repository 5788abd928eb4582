#!/usr/bin/env python3
"""Live analysis under load (issue 28, point 1): a real client (load_client.py, rstream)
publishes in batches at a set rate for a set time to a stream of its own on the 3.10
broker (127.0.0.1:5552), a consumer reading it, while `streamdissect analyze -i lo --port
5552 --no-heuristic --every 10 --format json -w KEPT` runs and a tcpdump of its own writes
the same traffic (the same filter) to a reference file. Loopback only; the client's stream
is deleted at its end.

    python benchmarks/live_load.py --rate 20000 --seconds 300 [--batch 100] [--json PATH]
    python benchmarks/live_load.py --find-max [--rate 5000] [--factor 1.5] [--seconds 60]

Every --every seconds the resident memory (and CPU time) of analyze, its helper process and
its tcpdump is read from /proc. At the end:
- the capture tools' counts: analyze's tcpdump (its summaries, its last line, the report's
  capture_dropped anomaly) and the reference tcpdump's, each with its drops;
- the live report against `analyze` of KEPT, what its own tcpdump gave it: the whole report,
  equal but for the capture_dropped anomaly that only the live run knows of;
- the live report against `analyze` of the reference file, whose packets were taken by
  another tcpdump (their times differ by a microsecond or so): the counts (times left out)
  of the client's own connections, found by their connection names in PeerProperties
  (`connections`, `peer_properties`, `confirms`, `credit`, `consumer_lag`, `anomalies`),
  since the broker is shared and other people's connections may be in either capture; and,
  when both captures hold the same connections (nothing began or ended while only one
  ran), every command's frames in analyze's last summary against the reference file's,
  counted by the reference (packet by packet) engine;
- memory: RSS over time, and its growth from the sample at the end of warm-up (minute 1,
  or the first quarter of a shorter run) to the last: flat when at most +10%.
A run lost nothing when neither tcpdump dropped a packet and every comparison is equal.
--find-max runs --seconds at --rate, then --factor times it, and so on, until a run loses
something or the client cannot hold the rate: the last clean rate is the highest sustained
rate at which nothing was lost. The exit status is 1 when a run (with --find-max, the last
clean one) lost something or its memory was not flat.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from soak import rss_mib  # (the benchmarks' own RSS reading, from /proc)

PORT = 5552
WARM_UP_S = 60.0
FLAT = 0.10  # at most this growth of RSS after warm-up
SETTLE_S = 3.0  # after the client ends, before the captures are stopped (last ACKs, FINs)
# the tables whose rows belong to one connection, and are compared for the client's own
PER_CONNECTION = ("connections", "peer_properties", "confirms", "credit", "consumer_lag",
                  "anomalies")  # fmt: skip


def cpu_s(pid: int) -> float | None:
    """User and system CPU time of the process so far."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> dict[str, int]:
    """analyze's child processes by role: its capture tool and its helper (a fork of it)."""
    found = {}
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(k) for k in f.read().split()]
    except FileNotFoundError:
        return found
    for kid in kids:
        try:
            with open(f"/proc/{kid}/comm") as f:
                name = f.read().strip()
        except FileNotFoundError:
            continue
        found["tcpdump" if name in ("tcpdump", "dumpcap") else "helper"] = kid
    return found


class Sampler(threading.Thread):
    """RSS (MiB) and CPU time (s) of analyze and its children every `every` seconds."""

    def __init__(self, pid: int, every: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.samples: list[dict] = []
        self.done = threading.Event()
        self.started = time.monotonic()

    def run(self) -> None:
        while not self.done.wait(self.every):
            sample = {"t_s": round(time.monotonic() - self.started, 1)}
            for role, pid in {"analyze": self.pid, **children(self.pid)}.items():
                rss = rss_mib(pid)
                if rss is not None:
                    sample[f"{role}_rss_mib"] = round(rss, 1)
                    sample[f"{role}_cpu_s"] = cpu_s(pid)
            sample["load_1min"] = os.getloadavg()[0]
            self.samples.append(sample)


def flatness(samples: list[dict], key: str = "analyze_rss_mib") -> dict:
    """RSS growth from the end of warm-up (minute 1, or the first quarter of a shorter run)
    to the last sample."""
    kept = [s for s in samples if key in s]
    if len(kept) < 2:
        return {"flat": None, "why": "fewer than 2 samples"}
    warm = min(WARM_UP_S, kept[-1]["t_s"] / 4)
    base = next(s for s in kept if s["t_s"] >= warm)
    growth = kept[-1][key] / base[key] - 1
    return {"from_t_s": base["t_s"], "from_mib": base[key], "to_t_s": kept[-1]["t_s"],
            "to_mib": kept[-1][key], "growth": round(growth, 4),
            "peak_mib": max(s[key] for s in kept), "flat": growth <= FLAT}  # fmt: skip


def broker_answers() -> bool:
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
    except OSError:
        return False
    return True


def env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")


def analyze_filter() -> str:
    """The capture filter of `analyze -i lo --port 5552 --no-heuristic`: the Stream's port
    given, every other protocol's own (RocketMQ's 9876, 10911), so that the file holds what
    analyze was given."""
    sys.path.insert(0, str(ROOT))
    from streamdissect.capture.live import capture_filter
    from streamdissect.protocols.registry import PROTOCOLS

    others = (port for protocol in PROTOCOLS[1:] for port in protocol.ports)
    return capture_filter({PORT, *others}, heuristic=False)


def reference_capture(path: Path, buffer_kib: int) -> subprocess.Popen:
    """tcpdump writing the same traffic to a file, started and listening."""
    tool = subprocess.Popen(["tcpdump", "-i", "lo", "-s", "0", "-n", "-B", str(buffer_kib),
                             "-w", str(path), analyze_filter()], stderr=subprocess.PIPE)  # fmt: skip
    said = b""
    deadline = time.monotonic() + 15
    while b"listening on" not in said:
        line = tool.stderr.readline()
        if not line and tool.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"tcpdump did not start: {said.decode(errors='replace')}")
        said += line
    return tool


def tcpdump_counts(said: str) -> dict:
    """The last counts tcpdump wrote (at its end)."""
    counts = {}
    for what in ("captured", "received by filter", "dropped by kernel", "dropped by interface"):
        found = re.findall(rf"(\d+) packets? {what}", said)
        if found:
            counts[what.replace(" ", "_")] = int(found[-1])
    return counts


def summaries(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("[")]


def summary_counts(line: str) -> dict:
    """A summary line's frames by command, and its capture tool's counts."""
    head = re.match(r"\[(\d+) s(, end)?\] ([\d,]+) frames(?: \(([^)]*)\))?", line)
    commands = {}
    if head and head.group(4):
        for part in head.group(4).split(", "):
            name, n = part.rsplit(" ", 1)
            commands[name] = int(n.replace(",", ""))
    tool = re.search(r"(\w+): ([\d,]+) packets received, ([\d,]+) dropped", line)
    return {"end": bool(head and head.group(2)), "frames": int(head.group(3).replace(",", ""))
            if head else None, "commands": commands,
            "received": int(tool.group(2).replace(",", "")) if tool else None,
            "dropped": int(tool.group(3).replace(",", "")) if tool else None,
            "falling_behind": "falling behind" in line}  # fmt: skip


def own_rows(report: dict, names: list[str], counts_only: bool = False) -> dict:
    """The rows of the client's connections (by their connection names), table by table;
    `counts_only`: without their times (the keys *_ns, *_ms, and the credit stalls, which
    are made of times)."""
    mine = {row["connection"] for row in report["peer_properties"]
            if (row["client"] or {}).get("connection_name") in names}  # fmt: skip

    def kept(row: dict) -> dict:
        if not counts_only:
            return row
        return {k: v for k, v in row.items()
                if not k.endswith(("_ns", "_ms", "_ms_total")) and k != "stalls"}  # fmt: skip

    return {table: sorted((kept(row) for row in report[table] if row.get("connection") in mine),
                          key=json.dumps) for table in PER_CONNECTION}  # fmt: skip


def file_commands(path: Path) -> Counter:
    """Frames of each command in the file, by the reference (packet by packet) engine."""
    sys.path.insert(0, str(ROOT))
    from streamdissect.cli._live import frame_name
    from streamdissect.engine.dissect import Dissector, FrameEvent

    dissector = Dissector(ports=(PORT,), heuristic=False, engine="stream")
    return Counter(frame_name(event.record) for event in dissector.run(str(path))
                   if event.__class__ is FrameEvent)  # fmt: skip


def compare(live: dict, kept: dict, reference: dict, names: list[str], last: dict,
            reference_path: Path) -> dict:  # fmt: skip
    """What of the live report equals what (see the module's doc): `kept`, the report of
    analyze's own capture (-w), in full; `reference`, the other tcpdump's, by counts."""
    # (but for the capture tool's drops, an anomaly the live run alone knows of)
    told = {**live, "anomalies": [a for a in live["anomalies"] if a["kind"] != "capture_dropped"]}
    out = {"live_equals_its_capture": told == kept,
           "unequal_to_its_capture": [k for k in told if told[k] != kept.get(k)]}
    live_mine = own_rows(live, names, counts_only=True)
    reference_mine = own_rows(reference, names, counts_only=True)
    out["own_connections"] = len(live_mine["connections"])
    out["own_counts_equal_reference"] = {t: live_mine[t] == reference_mine[t]
                                         for t in PER_CONNECTION}  # fmt: skip
    live_all = {row["connection"] for row in live["connections"]}
    reference_all = {row["connection"] for row in reference["connections"]}
    out["connections_live"], out["connections_reference"] = len(live_all), len(reference_all)
    out["same_connections"] = live_all == reference_all
    if out["same_connections"]:  # (nothing began or ended while only one capture ran)
        counted = file_commands(reference_path)
        out["frames_by_command_equal_reference"] = dict(counted) == last["commands"]
        if not out["frames_by_command_equal_reference"]:
            out["frames_by_command"] = {"live": last["commands"], "reference": dict(counted)}
    out["equal"] = (out["live_equals_its_capture"] and all(
        out["own_counts_equal_reference"].values()) and out.get(
        "frames_by_command_equal_reference", True))  # fmt: skip
    return out


def own_figures(report: dict, names: list[str]) -> dict:
    rows = own_rows(report, names)
    return {"frames": sum(r["frames_c2s"] + r["frames_s2c"] for r in rows["connections"]),
            "published": sum(r["published"] for r in rows["confirms"]),
            "confirmed": sum(r["confirmed"] for r in rows["confirms"]),
            "delivered": sum(r["records_delivered"] for r in rows["credit"]),
            "chunks_delivered": sum(r["chunks_delivered"] for r in rows["credit"])}  # fmt: skip


def file_report(path: Path) -> dict:
    """`analyze --format json` of a capture file, as the live run was asked."""
    return json.loads(subprocess.run(
        [sys.executable, "-m", "streamdissect", "analyze", "--format", "json", "--port",
         str(PORT), "--no-heuristic", str(path)], capture_output=True, check=True,
        env=env()).stdout)  # fmt: skip


def run_once(rate: float, seconds: float, batch: int, body_size: int, every: float,
             buffer_kib: int, keep: Path | None) -> dict:  # fmt: skip
    """One load run: the figures (see the module's doc)."""
    work = Path(tempfile.mkdtemp(prefix="live-load-", dir=keep))
    token = f"sd-load-{uuid.uuid4().hex[:10]}"
    names = [f"{token}-producer", f"{token}-consumer"]
    pcap = work / "reference.pcap"
    reference = reference_capture(pcap, buffer_kib)
    out, err = open(work / "live.json", "wb"), open(work / "live.stderr", "wb")  # noqa: SIM115
    kept = work / "kept.pcap"  # (analyze's own capture, -w: what it was given)
    analyze = subprocess.Popen([sys.executable, "-m", "streamdissect", "analyze", "-i", "lo",
                                "--port", str(PORT), "--no-heuristic", "--every", str(every),
                                "--format", "json", "-w", str(kept)], stdout=out, stderr=err,
                               env=env(), start_new_session=True)  # fmt: skip
    sampler = Sampler(analyze.pid, every)
    try:
        sampler.start()
        time.sleep(3)  # (its tcpdump listening)
        client = subprocess.run([sys.executable, str(HERE / "load_client.py"), "--token", token,
                                 "--rate", str(rate), "--seconds", str(seconds), "--batch",
                                 str(batch), "--body-size", str(body_size), "--port", str(PORT)],
                                capture_output=True, text=True, timeout=seconds + 120,
                                check=False)  # fmt: skip
        if client.returncode != 0:
            raise SystemExit(f"the client failed: {client.stderr[-2000:]}")
        said = json.loads(client.stdout)
        time.sleep(SETTLE_S)
        stopped = time.monotonic()
        analyze.send_signal(signal.SIGINT)  # (its tcpdump flushes; what was read is reported)
        analyze.wait(timeout=seconds * 4 + 120)
        finish_s = time.monotonic() - stopped
    finally:
        sampler.done.set()
        if analyze.poll() is None:
            os.killpg(analyze.pid, signal.SIGKILL)
            analyze.wait()
        reference.send_signal(signal.SIGINT)
        reference_said = reference.stderr.read().decode(errors="replace")
        reference.wait(timeout=30)
        out.close()
        err.close()
    stderr = (work / "live.stderr").read_text(errors="replace")
    if analyze.returncode != 0:
        raise SystemExit(f"analyze failed ({analyze.returncode}): {stderr[-2000:]}")
    live = json.loads((work / "live.json").read_text())
    of_kept, of_reference = file_report(kept), file_report(pcap)
    lines = summaries(stderr)
    last = summary_counts(lines[-1]) if lines else {}
    drops = {"analyze_tcpdump": last.get("dropped"),
             "reference_tcpdump": tcpdump_counts(reference_said).get("dropped_by_kernel"),
             "reference_tcpdump_by_interface": tcpdump_counts(reference_said).get(
                 "dropped_by_interface"),
             "capture_dropped_anomalies": [a for a in live["anomalies"]
                                           if a["kind"] == "capture_dropped"]}  # fmt: skip
    compared = compare(live, of_kept, of_reference, names, last, pcap)
    lost = bool(drops["analyze_tcpdump"] or drops["reference_tcpdump"]) or not compared["equal"]
    held = said["rate_held"] >= 0.98 * rate and said["consumed"] == said["published"]
    result = {"rate": rate, "seconds": seconds, "batch": batch, "body_size": body_size,
              "client": said, "client_held_rate": held, "drops": drops, "lost": lost,
              "summaries": lines, "finish_after_stop_s": round(finish_s, 1),
              "live_own": own_figures(live, names),
              "reference_own": own_figures(of_reference, names),
              "compared": compared, "rss": sampler.samples, "flatness": flatness(sampler.samples),
              "pcap_bytes": pcap.stat().st_size, "work": str(work)}  # fmt: skip
    if keep is None:
        for f in work.iterdir():
            f.unlink()
        work.rmdir()
    return result


def show(result: dict) -> None:
    c, d, f = result["client"], result["drops"], result["flatness"]
    print(f"rate {result['rate']:,.0f}/s asked, {c['rate_held']:,.0f}/s held for "
          f"{c['publishing_s']} s (batches of {result['batch']}): published {c['published']:,}, "
          f"confirmed {c['confirmed']:,}, consumed {c['consumed']:,}")
    print(f"  live (own connections): {result['live_own']}")
    print(f"  reference (own connections): {result['reference_own']}")
    print(f"  compared: {json.dumps(result['compared'])}")
    print(f"  drops: analyze's tcpdump {d['analyze_tcpdump']}, the reference's "
          f"{d['reference_tcpdump']}; capture_dropped anomalies "
          f"{len(d['capture_dropped_anomalies'])}")
    print(f"  analyze finished {result['finish_after_stop_s']} s after being stopped")
    for s in result["rss"]:
        print(f"  t={s['t_s']:>6} s  analyze {s.get('analyze_rss_mib')} MiB "
              f"(cpu {s.get('analyze_cpu_s')} s)  helper {s.get('helper_rss_mib')} MiB  "
              f"tcpdump {s.get('tcpdump_rss_mib')} MiB  load {s['load_1min']:.1f}")
    print(f"  RSS {f.get('from_mib')} MiB at {f.get('from_t_s')} s -> {f.get('to_mib')} MiB at "
          f"{f.get('to_t_s')} s: {f.get('growth')} ({'flat' if f.get('flat') else 'NOT flat'})")
    print(f"  => {'LOST SOMETHING' if result['lost'] else 'nothing lost'}"
          f"{'' if result['client_held_rate'] else '; the client did not hold the rate'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=20000, help="messages a second")
    parser.add_argument("--seconds", type=float, default=300, help="how long the client publishes")
    parser.add_argument("--batch", type=int, default=100, help="messages a Publish frame")
    parser.add_argument("--body-size", type=int, default=100)
    parser.add_argument("--every", type=float, default=10, help="summaries and RSS samples (s)")
    parser.add_argument("--buffer-kib", type=int, default=65536,
                        help="the reference tcpdump's kernel buffer (-B)")
    parser.add_argument("--find-max", action="store_true",
                        help="step the rate up from --rate by --factor until something is lost")
    parser.add_argument("--factor", type=float, default=1.5)
    parser.add_argument("--max-rate", type=float, default=500_000)
    parser.add_argument("--keep", type=Path, help="keep each run's files under this folder")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if not broker_answers():
        raise SystemExit(f"no broker on 127.0.0.1:{PORT} (scripts/brokers.sh start)")
    runs, rate, clean = [], args.rate, None
    while True:
        result = run_once(rate, args.seconds, args.batch, args.body_size, args.every,
                          args.buffer_kib, args.keep)  # fmt: skip
        runs.append(result)
        show(result)
        if not args.find_max:
            break
        if result["lost"] or not result["client_held_rate"] or rate * args.factor > args.max_rate:
            break
        clean = result
        rate *= args.factor
    figures = {"runs": runs, "load_at_end": os.getloadavg(), "cpus": os.cpu_count()}
    if args.find_max:
        figures["highest_clean_rate"] = clean["rate"] if clean else None
        last = runs[-1]
        why = ("lost something" if last["lost"] else "the client could not hold it"
               if not last["client_held_rate"] else "clean, at --max-rate")  # fmt: skip
        print(f"highest rate with nothing lost: {figures['highest_clean_rate']} (the next "
              f"step: {why})")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    judged = clean if args.find_max else runs[-1]
    return 0 if judged and not judged["lost"] and judged["flatness"].get("flat") else 1


if __name__ == "__main__":
    sys.exit(main())
