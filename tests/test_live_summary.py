"""`analyze --every`'s running summary (cli._live.running_summary) and what it says of the
capture (issue 28): its last line, when the events end, counts every command's frames; a
RocketMQ frame is counted by its code's name; the capture tool's drops are said as packets
never seen, and a capture pipe more than half full as the analysis falling behind, with the
bytes waiting; the tool's stderr is kept within a bound, its counts read from whole lines
only, and counts it did not answer with are said to be its last."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from streamdissect.capture.live import (
    SAID_KEPT,
    CaptureStatistics,
    LiveCapture,
    parse_statistics,
    tool_command,
)
from streamdissect.cli._live import capture_said, running_summary
from streamdissect.engine.dissect import Dissector, FrameEvent

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
REPORT = b"tcpdump: %d packets captured, %d packets received by filter, %d packets dropped by kernel\n"


def last_line(capture: Path, every: float = 3600) -> tuple[int, list[str]]:
    """The events the watcher passed on, and the summary lines it wrote."""
    err = io.StringIO()
    watch = running_summary(every, err=err)
    passed = sum(1 for _ in watch(Dissector().run(str(capture))))
    return passed, err.getvalue().splitlines()


def counts_of(line: str) -> dict[str, int]:
    listed = re.search(r"frames \(([^)]*)\)", line).group(1)
    return {name: int(n.replace(",", "")) for name, n in
            (part.rsplit(" ", 1) for part in listed.split(", "))}  # fmt: skip


def test_the_last_line_counts_every_command_of_the_capture():
    capture = CAPTURES / "rstream-publish-confirm-3.10.pcap"
    passed, lines = last_line(capture)
    [line] = lines  # (no summary before the end: the events took less than `every`)
    assert re.match(r"\[\d+ s, end\] ", line)
    # the reference engine's records, one by one, against the watcher's hot frames as columns
    reference = Counter(event.record.command for event in
                        Dissector(engine="stream").run(str(capture))
                        if isinstance(event, FrameEvent))  # fmt: skip
    assert counts_of(line) == dict(reference)
    frames = int(re.search(r"\] ([\d,]+) frames", line).group(1).replace(",", ""))
    assert frames == sum(reference.values()) and passed >= 1
    assert len(counts_of(line)) > 5  # (every command, where a running summary shows five)


def test_rocketmq_frames_are_counted_by_their_code_name():
    capture = CAPTURES / "rocketmq" / "rmq-cpp.pcap"
    truth = json.loads(capture.with_suffix(".truth.json").read_text())
    [producer] = [c for c in truth["clients"] if c["name"] == "producer"]
    _, [line] = last_line(capture)
    assert counts_of(line)["SEND_MESSAGE"] == len(producer["report"]["sends"])


def test_drops_and_falling_behind_are_said():
    live = LiveCapture.__new__(LiveCapture)
    read_fd, write_fd = os.pipe()
    try:
        live._read_fd = read_fd
        capacity = live.waiting()[1]
        os.write(write_fd, b"x" * 100)
        assert live.waiting() == (100, capacity)
        stats = CaptureStatistics("tcpdump", 5000, 0)
        said = capture_said(stats, live, None)
        assert said == "; tcpdump: 5,000 packets received, 0 dropped"  # (keeping up)
        os.write(write_fd, b"x" * (capacity * 3 // 4 - 100))
        newest_ns = time.time_ns() - 2_500_000_000
        said = capture_said(CaptureStatistics("tcpdump", 5000, 1234), live, newest_ns)
        assert "1,234 dropped (the capture fell behind: those packets were never seen)" in said
        assert f"falling behind: {capacity * 3 // 4:,} of the pipe's {capacity:,} bytes waiting" in said
        age = float(re.search(r"newest frame analysed ([\d.]+) s old", said).group(1))
        assert 2.5 <= age < 60
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_the_tools_words_are_kept_within_a_bound():
    live = LiveCapture.__new__(LiveCapture)
    live.said = b""
    for n in range(1, 5001):  # (a summary a second for 83 minutes)
        live.heard(REPORT % (n, n, n // 10))
    assert len(live.said) <= SAID_KEPT
    assert parse_statistics("tcpdump", live.said) == CaptureStatistics("tcpdump", 5000, 500)


def test_a_line_half_written_is_not_read():
    # (tcpdump writes a report in pieces: before its drops came, it would read as none)
    whole = REPORT % (10, 20, 7)
    assert parse_statistics("tcpdump", whole + b"tcpdump: 30 packets captured, 40 packets "
                            b"received by filter, ") == CaptureStatistics("tcpdump", 20, 7)  # fmt: skip
    assert parse_statistics("tcpdump", whole[:-30]) is None


def test_counts_the_tool_did_not_answer_with_are_said_to_be_its_last():
    silent = [sys.executable, "-c", ("import signal, time; signal.signal(signal.SIGUSR1, "
                                     "signal.SIG_IGN); print(flush=True); time.sleep(30)")]
    live = LiveCapture.__new__(LiveCapture)
    live.tool, live.said = "tcpdump", REPORT % (10, 20, 3)
    live._said_lock = threading.Lock()
    live.process = subprocess.Popen(silent, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        live.process.stdout.readline()  # (its SIGUSR1 ignored from now on)
        stats = live.statistics(wait=0.3)
    finally:
        live.process.kill()
        live.process.wait()
    assert stats == CaptureStatistics("tcpdump", 20, 3, stale=True)
    assert stats.text() == ("tcpdump: 20 packets received, 3 dropped (its last counts: asked, "
                            "it did not answer)")  # fmt: skip


def test_the_kernel_buffer_and_immediate_mode_asked_of_the_tool():
    # (tcpdump's -B counts KiB, dumpcap's MiB: their manuals)
    frames = tool_command("tcpdump", "lo", "tcp port 5552", 32, immediate=True)
    analysis = tool_command("tcpdump", "lo", "tcp port 5552", 8, immediate=False)
    assert "--immediate-mode" in frames and "--immediate-mode" not in analysis
    assert frames[frames.index("-B") + 1] == "32768" and analysis[analysis.index("-B") + 1] == "8192"
    dumpcap = tool_command("dumpcap", "lo", "tcp port 5552", 32)
    assert dumpcap[dumpcap.index("-B") + 1] == "32"
