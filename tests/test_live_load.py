"""Live analysis that cannot keep up (issue 28, point 1), against the real 3.10 broker: a real
client (benchmarks/load_client.py, rstream) publishes and consumes at a steady rate while
`analyze -i lo --every` runs; the analysis is stopped (SIGSTOP, its helper process too) for
some seconds, as a starved process would be. The capture's pipe and the kernel's buffer
(--buffer 1: 1 MiB) fill, and the kernel drops: the drops are counted in the summaries and
the report (as the capture having fallen behind), the report is still exactly that of the
capture analyze kept (-w, the packets it was given), and its memory does not grow with
what it could not take (nothing in the live path buffers without a bound)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "streamdissect.cli"]
RATE, SECONDS = 5000, 24  # messages a second, for how long
STALL = (8, 14)  # seconds into the load: analyze stopped, then continued


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def helpers(pid: int) -> list[int]:
    """analyze's children but its capture tool: the bulk engine's helper process."""
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        kids = [int(k) for k in f.read().split()]
    found = []
    for kid in kids:
        with open(f"/proc/{kid}/comm") as f:
            if f.read().strip() not in ("tcpdump", "dumpcap"):
                found.append(kid)
    return found


def test_an_analysis_that_falls_behind_counts_what_the_kernel_dropped(tmp_path):
    kept = tmp_path / "kept.pcap"
    token = f"sd-load-test-{uuid.uuid4().hex[:8]}"
    analyze = subprocess.Popen([*CLI, "analyze", "-i", "lo", "--port", "5552", "--no-heuristic",
                                "--every", "2", "--buffer", "1", "--format", "json", "-w",
                                str(kept)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)  # fmt: skip
    client = None
    try:
        time.sleep(2)  # (tcpdump listening)
        client = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "load_client.py"),
                                   "--token", token, "--rate", str(RATE), "--seconds",
                                   str(SECONDS)], stdout=subprocess.PIPE)  # fmt: skip
        started, rss, stopped = time.monotonic(), [], []
        while client.poll() is None:
            at = time.monotonic() - started
            rss.append((at, rss_mib(analyze.pid)))
            if STALL[0] <= at and not stopped:
                stopped = [analyze.pid, *helpers(analyze.pid)]
                for pid in stopped:
                    os.kill(pid, signal.SIGSTOP)
            if STALL[1] <= at and stopped and stopped[0] is not None:
                for pid in stopped:
                    os.kill(pid, signal.SIGCONT)
                stopped[0] = None
            time.sleep(0.5)
        said = json.loads(client.stdout.read())
        time.sleep(3)
        analyze.send_signal(signal.SIGINT)
        out, err = analyze.communicate(timeout=120)
    finally:
        for proc in (client, analyze):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL) if proc is analyze else proc.kill()
                proc.wait(30)
    assert analyze.returncode == 0, err[-2000:]
    assert said["published"] == RATE * SECONDS
    summaries = [line for line in err.decode().splitlines() if line.startswith("[")]
    last = summaries[-1]
    assert ", end]" in last
    dropped = int(re.search(r"tcpdump: [\d,]+ packets received, ([\d,]+) dropped", last)
                  .group(1).replace(",", ""))  # fmt: skip
    assert dropped > 0 and "(the capture fell behind: those packets were never seen)" in last
    report = json.loads(out)
    [told] = [a for a in report["anomalies"] if a["kind"] == "capture_dropped"]
    assert told["length"] == dropped and f"{dropped:,} dropped" in told["detail"]
    # what it was given, it analysed: the report is that of its own capture, to the row
    from_file = json.loads(subprocess.run([*CLI, "analyze", "--port", "5552", "--no-heuristic",
                                           "--format", "json", str(kept)],
                                          capture_output=True, check=True).stdout)  # fmt: skip
    report["anomalies"].remove(told)
    assert report == from_file
    # and what it was not given, it did not see: the client's messages were not all seen
    mine = {row["connection"] for row in report["peer_properties"]
            if (row["client"] or {}).get("connection_name", "").startswith(token)}  # fmt: skip
    assert len(mine) >= 2  # (the producer's, its locator's, the consumer's)
    published = sum(r["published"] for r in report["confirms"] if r["connection"] in mine)
    delivered = sum(r["records_delivered"] for r in report["credit"] if r["connection"] in mine)
    assert published + delivered < 2 * RATE * SECONDS
    # its memory: the same after the stall as before it (the backlog waited in the kernel)
    before = max(mib for at, mib in rss if at < STALL[0])
    assert max(mib for _, mib in rss) <= before + 16, rss
