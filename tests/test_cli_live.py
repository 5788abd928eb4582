"""Live captures against the real 3.10 broker on 127.0.0.1:5552: `frames -i lo` and a
tcpdump pipe into `frames -` print each frame as soon as its packets are in, not when more
traffic comes,
`analyze -i lo --duration` reports a real client's traffic, `-w` keeps a capture that reads
back the same, and a missing tool or interface is a clear message."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

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


# A client that publishes a message each time it reads a line on its standard input (the
# test's go-ahead), saying "sent" once the broker confirmed it, and ends on an empty line.
STEPPED_CLIENT = textwrap.dedent("""
    import asyncio, sys, uuid
    from rstream import Producer

    async def main():
        stream = "sd-live-" + uuid.uuid4().hex[:8]
        async with Producer("127.0.0.1", 5552, username="guest", password="guest") as p:
            await p.create_stream(stream)
            print(stream, flush=True)
            number = 0
            while sys.stdin.readline().strip():
                await p.send_wait(stream, b"live %d" % number)
                number += 1
                print("sent", flush=True)
            await p.delete_stream(stream)
    asyncio.run(main())
""")
# How long a line may take before the test calls it held back: not a speed target (no
# traffic follows a message until the next go-ahead, so a frame held for more input never
# comes), only a bound so a failing run ends.
HELD_BACK = 30.0


class Lines:
    """A process's output lines, read as they come."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.fd, self.pending, self.lines = proc.stdout.fileno(), b"", []

    def until(self, wanted, timeout: float = HELD_BACK) -> bool:
        """Read until wanted(self.lines) holds (True) or `timeout` seconds pass (False)."""
        deadline = time.monotonic() + timeout
        while not wanted(self.lines):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return False
            data = os.read(self.fd, 65536)
            if not data:
                return wanted(self.lines)
            self.pending += data
            *done, self.pending = self.pending.split(b"\n")
            self.lines += [line.decode() for line in done]
        return True


def connection_of(line: str) -> str:
    return line.split()[2]


def ours(lines: list[str], stream: str) -> list[str]:
    """The lines of the connection that declared a publisher to `stream` (the broker may have
    other people's traffic meanwhile)."""
    declared = {connection_of(line) for line in lines
                if " DeclarePublisher v" in line and f"stream={stream} " in line}  # fmt: skip
    return [line for line in lines if connection_of(line) in declared]


def publishes(lines: list[str]) -> int:
    return sum(" Publish v" in line for line in lines)


def confirms(lines: list[str]) -> int:
    return sum(" PublishConfirm v" in line for line in lines)


def in_lockstep(proc: subprocess.Popen, messages: int) -> list[str]:
    """A real client publishes `messages` messages one at a time, the next only once `proc`
    printed the last one's Publish and PublishConfirm lines (meanwhile no traffic but TCP's
    acknowledgements: a frame held back for more input would not come); `proc`'s lines of
    the client's publishing connection."""
    client = subprocess.Popen([sys.executable, "-c", STEPPED_CLIENT], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    out = Lines(proc)
    try:
        stream = client.stdout.readline().strip()
        for number in range(messages):
            client.stdin.write("go\n")
            client.stdin.flush()
            assert client.stdout.readline().strip() == "sent", "the client failed"
            printed = out.until(lambda lines, n=number + 1: min(publishes(ours(lines, stream)),
                                                                confirms(ours(lines, stream))) >= n)  # fmt: skip
            assert printed, f"message {number}'s frames not printed: {out.lines[-5:]}"
        client.stdin.write("\n")
        client.stdin.flush()
        assert client.wait(60) == 0
        out.until(lambda lines: any(" DeletePublisherResponse " in line
                                    for line in ours(lines, stream)))  # fmt: skip
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    return ours(out.lines, stream)


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


def test_frames_live_prints_each_frame_as_its_packets_come():
    proc = start(["frames", "-i", "lo", "--port", "5552", "--no-heuristic"])
    try:
        lines = in_lockstep(proc, 3)
    finally:
        stop(proc)
    assert publishes(lines) == confirms(lines) == 3
    assert any(" PeerProperties v" in line for line in lines)  # (the connection from its start)


def test_tcpdump_pipe_prints_each_frame_as_its_packets_come():
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "--immediate-mode", "-U", "-w", "-",
                             "tcp port 5552"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    proc = subprocess.Popen([*CLI, "frames", "-"], stdin=dump.stdout, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    dump.stdout.close()
    try:
        time.sleep(1.5)  # (tcpdump listening)
        lines = in_lockstep(proc, 3)
    finally:
        dump.terminate()
        dump.wait(10)
        stop(proc)
    assert publishes(lines) == confirms(lines) == 3


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
    [final] = [
        line for line in err.decode().splitlines() if line.startswith("streamdissect: tcpdump")
    ]
    assert int(final.split()[2].replace(",", "")) >= received


def test_live_filter_keeps_only_the_ports_asked_for(tmp_path):
    # connections to RocketMQ's default ports (answered or refused: packets either way) while
    # `--port 5552 --no-heuristic` captures: none of their packets is in the capture
    from streamdissect.capture import open_capture, tcp_segment

    kept = tmp_path / "live.pcap"
    proc = start(["frames", "-i", "lo", "--port", "5552", "--no-heuristic", "-w", str(kept),
                  "--duration", "4"])  # fmt: skip
    try:
        for port in (9876, 10911, 5552):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 5):
                pass
        proc.communicate(timeout=30)
    finally:
        stop(proc)
    ports = set()
    for _, linktype, data, _, _ in open_capture(str(kept)):
        segment = tcp_segment(linktype, data)
        ports.add(min(segment[1], segment[3]))  # (the server's: the lower)
    assert ports == {5552}


# A client that publishes its stream's first message, says the stream's name, then on a line
# of its standard input publishes N more at once (each confirmed before the next) and says
# "done N+1"; it stays connected, idle, until an empty line.
BURST_CLIENT = textwrap.dedent("""
    import asyncio, sys, uuid
    from rstream import Producer

    async def main():
        stream = "sd-tail-" + uuid.uuid4().hex[:8]
        loop = asyncio.get_running_loop()
        async with Producer("127.0.0.1", 5552, username="guest", password="guest") as p:
            await p.create_stream(stream)
            await p.send_wait(stream, b"first")
            print(stream, flush=True)
            sent = 1
            while (await loop.run_in_executor(None, sys.stdin.readline)).strip():
                for number in range(int(sys.argv[1])):
                    await p.send_wait(stream, b"tail %d" % number)
                sent += int(sys.argv[1])
                print("done", sent, flush=True)
            await p.delete_stream(stream)
    asyncio.run(main())
""")


def confirms_of(report: dict, kept, stream: str) -> tuple[int, int]:
    """(published, confirmed) of the connection that declared a publisher to `stream` (found
    in the kept capture: the broker has other people's traffic too)."""
    lines = subprocess.run([*CLI, "frames", str(kept)], capture_output=True, text=True,
                           check=True).stdout.splitlines()  # fmt: skip
    found = {connection_of(line) for line in lines
             if " DeclarePublisher v" in line and f"stream={stream} " in line}  # fmt: skip
    assert len(found) == 1, f"the client's DeclarePublisher captured {len(found)} times"
    [connection] = found
    [row] = [row for row in report["confirms"] if row["connection"] == connection]
    return row["published"], row["confirmed"]


@pytest.mark.parametrize("stop_by", ["Ctrl-C", "SIGTERM"])
def test_a_stop_keeps_the_packets_of_its_last_second(stop_by, tmp_path):
    # Without immediate mode the kernel hands packets over up to a second late: stopped just
    # after a burst, the analysis still has every message the client had confirmed
    kept = tmp_path / "live.pcap"
    proc = start(["analyze", "-i", "lo", "--port", "5552", "--no-heuristic", "--format",
                  "json", "-w", str(kept)])  # fmt: skip
    client = subprocess.Popen([sys.executable, "-c", BURST_CLIENT, "50"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        stream = client.stdout.readline().strip()
        time.sleep(2)  # (its connection's start handed over well before the stop)
        client.stdin.write("go\n")
        client.stdin.flush()
        said, sent = client.stdout.readline().split()
        assert said == "done", "the client failed"
        if stop_by == "Ctrl-C":  # (as a terminal does: to the command's process group)
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        client.stdin.write("\n")
        client.stdin.flush()
        assert client.wait(60) == 0
    finally:
        stop(proc)
        if client.poll() is None:
            client.kill()
            client.wait()
    assert proc.returncode == 0, err
    assert b"packets received" in err  # (the tool's last counts, its drops, still said)
    assert confirms_of(json.loads(out), kept, stream) == (int(sent), int(sent))


def capture_tool(pid: int) -> int:
    """The pid of a command's capture tool (its child tcpdump or dumpcap)."""
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        for child in f.read().split():
            with open(f"/proc/{child}/comm") as comm:
                if comm.read().strip() in ("tcpdump", "dumpcap"):
                    return int(child)
    raise AssertionError("no capture tool")


def signalled(pid: int) -> bool:
    """A signal waits for the (stopped) process."""
    with open(f"/proc/{pid}/status") as f:
        pending = dict(line.split(":", 1) for line in f if line.startswith(("ShdPnd", "SigPnd")))
    return any(int(mask, 16) for mask in pending.values())


def test_a_duration_stop_keeps_what_the_kernel_still_holds(tmp_path):
    # The capture tool stopped (SIGSTOP) while a burst goes by, so the kernel holds all of
    # it; continued only once --duration's stop reached it (a signal waits for it): the
    # analysis still has every message the client had confirmed, none captured after the stop
    kept = tmp_path / "live.pcap"
    proc = start(["analyze", "-i", "lo", "--port", "5552", "--no-heuristic", "--format",
                  "json", "-w", str(kept), "--duration", "10"])  # fmt: skip
    client = subprocess.Popen([sys.executable, "-c", BURST_CLIENT, "50"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    tool = None
    try:
        stream = client.stdout.readline().strip()
        tool = capture_tool(proc.pid)
        os.kill(tool, signal.SIGSTOP)
        client.stdin.write("go\n")
        client.stdin.flush()
        said, sent = client.stdout.readline().split()
        assert said == "done", "the client failed"
        assert not signalled(tool), "the burst ended after the stop: nothing to hold it to"
        deadline = time.monotonic() + 60
        while not signalled(tool) and time.monotonic() < deadline:
            time.sleep(0.1)
        os.kill(tool, signal.SIGCONT)
        out, err = proc.communicate(timeout=60)
        client.stdin.write("\n")
        client.stdin.flush()
        assert client.wait(60) == 0
    finally:
        if tool is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(tool, signal.SIGCONT)
        stop(proc)
        if client.poll() is None:
            client.kill()
            client.wait()
    assert proc.returncode == 0, err
    assert confirms_of(json.loads(out), kept, stream) == (int(sent), int(sent))
