"""Live captures against the real 3.10 broker on 127.0.0.1:5552: `frames -i lo` and a
tcpdump pipe into `frames -` print each frame within moments of it crossing the wire,
`analyze -i lo --duration` reports a real client's traffic, `-w` keeps a capture that reads
back the same, and a missing tool or interface is a clear message."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import time

CLI = [sys.executable, "-m", "streamdissect.cli"]
# A client that publishes one message at a time with a pause, printing when each went out.
CLIENT = textwrap.dedent("""
    import asyncio, sys, time, uuid
    from rstream import Producer

    async def main():
        stream = "sd-live-" + uuid.uuid4().hex[:8]
        async with Producer("127.0.0.1", 5552, username="guest", password="guest") as p:
            await p.create_stream(stream)
            for i in range(int(sys.argv[1])):
                await p.send_wait(stream, b"live %d" % i)
                print(time.time(), flush=True)
                await asyncio.sleep(float(sys.argv[2]))
            await p.delete_stream(stream)
    asyncio.run(main())
""")


def client(messages: int = 3, pause: float = 0.5) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CLIENT, str(messages), str(pause)],
                          capture_output=True, text=True, check=True, timeout=60)  # fmt: skip


def watch(proc: subprocess.Popen, messages: int, pause: float,
          after: float) -> tuple[list[tuple[float, str]], list[float]]:  # fmt: skip
    """Run the client while reading `proc`'s lines as they come: (arrival time, line) of
    each, until `after` seconds past the client's end; and when the client sent each
    message."""
    sender = subprocess.Popen([sys.executable, "-c", CLIENT, str(messages), str(pause)],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    got, pending, sent = [], b"", []
    fd = proc.stdout.fileno()
    until = None
    while until is None or time.time() < until:
        if until is None and sender.poll() is not None:
            sent = [float(t) for t in sender.stdout.read().split()]
            until = time.time() + after
        ready, _, _ = select.select([fd], [], [], 0.02)
        if ready:
            data = os.read(fd, 65536)
            if not data:
                break
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                got.append((time.time(), line.decode()))
    assert sender.wait(60) == 0
    return got, sent


def publish_delays(lines: list[tuple[float, str]], sent: list[float]) -> list[float]:
    """Seconds from each Publish's send_wait returning to its line being printed."""
    published = [at for at, line in lines if " Publish v" in line]
    assert len(published) == len(sent), (len(published), len(sent))
    return [at - when for at, when in zip(published, sent)]


def start(args: list[str]) -> subprocess.Popen:
    """The command, in a session of its own: stop() ends it with what it starts (tcpdump, the
    bulk engine's helper process)."""
    proc = subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    time.sleep(1.5)  # (tcpdump listening)
    return proc


def live_run(args: list[str], messages: int, pause: float) -> tuple[int, bytes, bytes]:
    """The command started, a client's messages sent, its (status, stdout, stderr) once it
    ends (by --duration or -c)."""
    proc = start(args)
    try:
        client(messages, pause)
        out, err = proc.communicate(timeout=30)
    finally:
        stop(proc)
    return proc.returncode, out, err


def stop(proc: subprocess.Popen) -> None:
    """Terminated; its process group killed when it does not end (a hung run must not leave
    its tcpdump and helper behind), and the test told."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)
        raise


def test_frames_live_prints_each_frame_within_two_seconds():
    proc = start(["frames", "-i", "lo", "--port", "5552", "--no-heuristic"])
    try:
        lines, sent = watch(proc, 3, 0.7, after=3)
    finally:
        stop(proc)
    delays = publish_delays(lines, sent)
    assert all(d < 2 for d in delays), delays
    commands = " ".join(line for _, line in lines)
    assert "PeerProperties" in commands and "PublishConfirm" in commands


def test_tcpdump_pipe_prints_each_frame_within_a_second():
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "--immediate-mode", "-U", "-w", "-",
                             "tcp port 5552"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    proc = subprocess.Popen([*CLI, "frames", "-"], stdin=dump.stdout, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    dump.stdout.close()
    try:
        time.sleep(1.5)
        lines, sent = watch(proc, 3, 0.7, after=2.5)
    finally:
        dump.terminate()
        dump.wait(10)
        stop(proc)
    delays = publish_delays(lines, sent)
    assert all(d < 1 for d in delays), delays


def test_analyze_live_for_a_duration_and_the_kept_capture(tmp_path):
    kept = tmp_path / "live.pcap"
    code, out, err = live_run(["analyze", "-i", "lo", "--port", "5552", "--no-heuristic",
                               "--duration", "5", "--format", "json", "-w", str(kept)], 4, 0.2)  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    confirms = report["confirms"]
    assert confirms and confirms[0]["published"] == 4 and confirms[0]["confirmed"] == 4
    assert any(row["command"] == "Create" for row in report["latency"])
    from_file = subprocess.run([*CLI, "analyze", "--format", "json", str(kept)],
                               capture_output=True, check=True).stdout  # fmt: skip
    assert json.loads(from_file) == report


def test_frames_live_kept_capture_reads_back_the_same(tmp_path):
    kept = tmp_path / "live.pcap"
    _, out, _ = live_run(["frames", "-i", "lo", "--port", "5552", "--no-heuristic", "-w",
                          str(kept), "--duration", "5"], 2, 0.2)  # fmt: skip
    again = subprocess.run([*CLI, "frames", str(kept)], capture_output=True, check=True).stdout
    assert again == out and b"Publish v" in out


def test_count_ends_a_live_capture():
    code, out, _ = live_run(["frames", "-i", "lo", "--port", "5552", "--no-heuristic", "-c",
                             "4"], 2, 0.1)  # fmt: skip
    assert code == 0 and len(out.splitlines()) == 4


def test_no_such_interface_or_tool_is_a_clear_message(tmp_path):
    out = subprocess.run([*CLI, "frames", "-i", "no-such-if0", "--duration", "2"],
                         capture_output=True, timeout=30, check=False)  # fmt: skip
    assert out.returncode == 2 and b"Traceback" not in out.stderr
    assert b"no-such-if0" in out.stderr
    env = {**os.environ, "PATH": str(tmp_path)}  # (no tcpdump, no dumpcap)
    out = subprocess.run([*CLI, "analyze", "-i", "lo"], capture_output=True, env=env,
                         timeout=30, check=False)  # fmt: skip
    assert out.returncode == 2 and b"needs tcpdump" in out.stderr


def test_sources_are_files_or_an_interface():
    for args in (["frames"], ["frames", "-i", "lo", "x.pcap"], ["analyze", "-w", "x.pcap", "y"],
                 ["frames", "-i", "lo", "--duration", "0"], ["analyze", "-i", "lo", "--buffer", "0"]):  # fmt: skip
        out = subprocess.run([*CLI, *args], capture_output=True, timeout=30, check=False)
        assert out.returncode == 2 and b"Traceback" not in out.stderr, args


def test_analyze_live_prints_a_running_summary():
    _, out, err = live_run(["analyze", "-i", "lo", "--port", "5552", "--no-heuristic",
                            "--duration", "5", "--every", "1"], 2, 0.2)  # fmt: skip
    summaries = [line for line in err.decode().splitlines() if line.startswith("[")]
    assert len(summaries) >= 3 and "2 connections" in summaries[-1]
    # the last, when the capture ended, counts every command's frames, not the first five
    assert ", end]" in summaries[-1] and not any(", end]" in line for line in summaries[:-1])
    frames = int(re.search(r"\] ([\d,]+) frames", summaries[-1]).group(1).replace(",", ""))
    assert frames >= 30  # (a connection's ~15 and more)
    counted = dict(part.rsplit(" ", 1) for part in re.search(
        r"frames \(([^)]*)\)", summaries[-1]).group(1).split(", "))  # fmt: skip
    assert sum(int(n.replace(",", "")) for n in counted.values()) == frames
    assert {"Publish", "PublishConfirm", "Create", "Delete"} <= set(counted)
    assert b"Publish confirms" in out
    # tcpdump's own counts, asked for at every summary, and its last ones at the end
    counts = [line.rsplit("tcpdump: ", 1)[1] for line in summaries if "tcpdump: " in line]
    assert len(counts) == len(summaries)
    received = int(counts[-1].split()[0].replace(",", ""))
    assert received >= 30 and counts[-1].endswith(", 0 dropped")
    [final] = [line for line in err.decode().splitlines() if line.startswith("streamdissect: tcpdump")]
    assert int(final.split()[2].replace(",", "")) >= received
