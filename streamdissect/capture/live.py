"""Live capture: tcpdump (or dumpcap) as a subprocess writing pcap to a pipe, which the
dissector reads as packets arrive (`frames -i IFACE`, `analyze -i IFACE`).

    with LiveCapture("lo", ports=(5552,), heuristic=False) as live:
        for event in Dissector().run(live.path): ...    # live.path: the pipe, /dev/fd/N
        live.finish()                                   # (or --duration, or Ctrl-C)

The tool is asked for immediate mode (each packet handed over at once, not held for up to a
second by libpcap's buffer; `frames`), or not (`analyze`, `report`: the kernel's buffer then
holds many more packets while the analysis catches up), and packet-buffered output. The
filter keeps the Stream ports; with the heuristic (the protocol recognised on other ports)
every TCP packet. The tool's output goes by a thread of ours on its way to the dissector
(and to `write_to`, the raw capture kept): `finish()` stops the tool only once every packet
captured before it has gone by, since the tool, interrupted, drops what the kernel still
holds for it (up to a second of packets without immediate mode, and any backlog). The tool
runs in a process group of its own, so a Ctrl-C reaches it only that way (were our process
killed outright, the tool ends at its next packet, its pipe closed: its dropped privileges
keep PR_SET_PDEATHSIG from reaching it).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterable
from typing import BinaryIO, NamedTuple

from streamdissect.capture.errors import CaptureError
from streamdissect.capture.limits import BUFFER_MIB
from streamdissect.capture.pcap_clock import PcapClock

TOOLS = ("tcpdump", "dumpcap")
SAID_KEPT = 1 << 16  # the tail of the tool's stderr kept: its last counts are in it
# Without immediate mode, libpcap's timeout (tcpdump's: 1 s): the kernel hands a block of
# packets over when it is full or this old, so a stop waits this long for its last packets
HANDOVER_S = 1.0
# A stop's last packets have all gone by when one captured after the stop has, or when the
# tool, past HANDOVER_S, has written nothing for this long, and nothing for this long after
# answering an ask for its counts (a quiet link)
QUIET_S = 0.5


class CaptureStatistics(NamedTuple):
    """What the capture tool counted: packets it received (after its filter) and those the
    kernel or the interface dropped before it saw them."""

    tool: str
    received: int
    dropped: int
    stale: bool = False  # asked, the tool did not answer in time: these are its last counts

    def text(self) -> str:
        said = f"{self.tool}: {self.received:,} packets received, {self.dropped:,} dropped"
        return f"{said} (its last counts: asked, it did not answer)" if self.stale else said


# tcpdump's counts (at its end, and on SIGUSR1: "N packets received by filter, N packets
# dropped by kernel", and "by interface" where libpcap knows it); dumpcap's line at its end
# ("Packets received/dropped on interface 'lo': R/D (pcap:...)")
_TCPDUMP_RECEIVED = re.compile(rb"(\d+) packets? received by filter")
_TCPDUMP_DROPPED = re.compile(rb"(\d+) packets? dropped by (?:kernel|interface)")
_DUMPCAP = re.compile(rb"Packets received/dropped on interface .*?: (\d+)/(\d+)")


def parse_statistics(tool: str, said: bytes) -> CaptureStatistics | None:
    """The last counts a capture tool's stderr holds, or None. Only whole lines are read:
    tcpdump writes a line in pieces (its stderr is unbuffered), and a line read before its
    "dropped by kernel" part came would say nothing was dropped."""
    said = said[: said.rfind(b"\n") + 1]
    if tool == "dumpcap":
        found = _DUMPCAP.findall(said)
        if not found:
            return None
        return CaptureStatistics(tool, sum(int(r) for r, _ in found),
                                 sum(int(d) for _, d in found))  # fmt: skip
    received = _TCPDUMP_RECEIVED.findall(said)
    if not received:
        return None
    # (the last report: its "dropped by" lines follow its "received" line)
    last = said.rfind(b"received by filter")
    dropped = _TCPDUMP_DROPPED.findall(said[last:])
    return CaptureStatistics(tool, int(received[-1]), sum(int(d) for d in dropped))


def capture_filter(ports: Iterable[int], heuristic: bool) -> str:
    """The BPF filter: the Stream ports, or every TCP packet for the heuristic."""
    if heuristic:
        return "tcp"
    return " or ".join(f"tcp port {int(p)}" for p in sorted(set(ports)))


def tool_command(tool: str, interface: str, bpf: str, buffer_mib: int = BUFFER_MIB,
                 immediate: bool = True) -> list[str]:  # fmt: skip
    """The tool's command line. `buffer_mib`: the kernel's buffer for the capture (-B), what
    it holds while the tool waits on a full pipe (beyond it, packets are dropped, and
    counted). `immediate`: each packet handed over at once; on Linux that buffer is then
    cut in slots of the largest packet (TPACKET_V2: 64 KiB on lo, some 500 packets in 32
    MiB), where otherwise packets are packed in it (TPACKET_V3) and handed over in blocks,
    within libpcap's timeout (1 s)."""
    if tool == "dumpcap":  # (Wireshark's: pcapng to stdout; -B in MiB)
        return ["dumpcap", "-q", "-i", interface, "-f", bpf, "-B", str(buffer_mib), "-w", "-"]
    return ["tcpdump", "-i", interface, *(["--immediate-mode"] if immediate else []), "-U",
            "-s", "0", "-B", str(buffer_mib * 1024), "-w", "-", bpf]  # fmt: skip (-B: KiB)


class LiveCapture:
    """A running capture tool whose pcap output is readable at `path`."""

    def __init__(self, interface: str, ports: Iterable[int] = (5552,), heuristic: bool = True,
                 write_to: str | None = None, tool: str | None = None,
                 buffer_mib: int = BUFFER_MIB, immediate: bool = True) -> None:  # fmt: skip
        self.interface = interface
        self.buffer_mib, self.immediate = buffer_mib, immediate
        self.bpf = capture_filter(ports, heuristic)
        self.write_to = write_to
        self.tool = tool or next((t for t in TOOLS if shutil.which(t)), None)
        if self.tool is None or shutil.which(self.tool) is None:
            raise CaptureError(
                "live capture needs tcpdump (Debian: apt-get install tcpdump) or dumpcap")
        self.process: subprocess.Popen | None = None
        self.said = b""  # what the tool wrote on stderr so far (read by statistics())
        self.path = ""
        self._read_fd = -1
        self._copier: threading.Thread | None = None
        self._said_lock = threading.Lock()  # (the summaries and the stop both ask for counts)
        self._clock = PcapClock()  # the newest packet gone by to the dissector
        self._waiting_since: float | None = None  # the copier waiting for the tool, since
        self._finishing: threading.Thread | None = None

    def __enter__(self) -> LiveCapture:  # noqa: PYI034
        command = tool_command(self.tool, self.interface, self.bpf, self.buffer_mib,
                               self.immediate)  # fmt: skip
        try:  # (its own process group: the terminal's Ctrl-C is ours to pass on, by finish())
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, process_group=0)  # fmt: skip
        except OSError as exc:
            raise CaptureError(f"cannot start {self.tool}: {exc.strerror or exc}") from exc
        sink = None
        if self.write_to is not None:
            try:
                sink = open(self.write_to, "wb")  # (the copier closes it)
            except OSError as exc:
                self.stop()
                raise CaptureError(f"{self.write_to}: cannot write: {exc.strerror}") from exc
        self._read_fd, write_fd = os.pipe()
        self._copier = threading.Thread(target=self._copy, args=(self.process.stdout, sink,
                                                                 write_fd), daemon=True)  # fmt: skip
        self._copier.start()
        self.path = f"/dev/fd/{self._read_fd}"
        return self

    def stop(self) -> None:
        """End the capture now: the tool flushes what it has read and exits (what the kernel
        still holds for it is lost); the pipe then ends. For -c N, and at the end."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)

    def finish(self) -> None:
        """End the capture once every packet captured so far has gone by to the dissector
        (in a thread: the caller, a signal handler or a timer, returns at once and the
        dissector keeps reading meanwhile); asked again, stop() at once."""
        if self._finishing is not None:
            self.stop()
            return
        self._finishing = threading.Thread(target=self._finish, args=(time.time_ns(),),
                                           daemon=True)  # fmt: skip
        self._finishing.start()

    def _finish(self, stop_ns: int) -> None:
        """stop() once a packet captured after `stop_ns` has gone by, or nothing more is
        coming (_quiet)."""
        handover = time.monotonic() + (0 if self.immediate else HANDOVER_S)
        while self.process is not None and self.process.poll() is None:
            newest = self._clock.newest_ns
            if (newest is not None and newest >= stop_ns) or self._quiet(handover):
                break
            time.sleep(0.05)
        self.stop()

    def _quiet(self, handover: float) -> bool:
        """Past the kernel's handover, the copier has waited QUIET_S for the tool, and the
        tool (tcpdump), asked for its counts, answers (it runs: not stopped, nor starved of
        CPU) and writes nothing for QUIET_S more: it holds nothing captured before."""
        since, now = self._waiting_since, time.monotonic()
        if since is None or now < handover + QUIET_S or now - since < QUIET_S:
            return False
        if self.tool == "tcpdump":  # (dumpcap gives its counts only at its end)
            counts = self.statistics(wait=QUIET_S)
            if counts is None or counts.stale:
                return False
            time.sleep(QUIET_S)
        return self._waiting_since == since  # (the same read, still waiting)

    def _copy(self, source: BinaryIO, sink: BinaryIO | None, write_fd: int) -> None:
        """The tool's output to the dissector's pipe (and the file), as it comes, its
        packets' times followed."""
        reading = True  # (the dissector: once it stopped, the file is still written)
        try:
            with sink if sink is not None else contextlib.nullcontext():
                while True:
                    self._waiting_since = time.monotonic()
                    data = source.read1(1 << 16)
                    self._waiting_since = None
                    if not data:
                        break
                    if sink is not None:
                        sink.write(data)
                        sink.flush()
                    if reading:
                        reading = _write_all(write_fd, data)
                    self._clock.feed(data)  # (after: what it says has gone by)
        finally:
            os.close(write_fd)

    def statistics(self, ask: bool = True, wait: float = 0.5) -> CaptureStatistics | None:
        """The tool's counts so far: asked for (tcpdump prints them on SIGUSR1; dumpcap only
        at its end) and read from its stderr for up to `wait` seconds; after the tool's end,
        its final counts. `stale` is set when the tool, asked, did not answer in time
        (tcpdump answers once its write to a full pipe is done): the counts are its last."""
        with self._said_lock:
            return self._statistics(ask, wait)

    def _statistics(self, ask: bool, wait: float) -> CaptureStatistics | None:
        process = self.process
        if process is None:
            return None
        running = process.poll() is None
        asked = running and ask and self.tool == "tcpdump"
        if asked:
            process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + (wait if running else 5.0)
        stream = process.stderr
        fresh = b""  # what it said since asked
        while True:
            left = deadline - time.monotonic()
            ready = select.select([stream], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                break
            chunk = os.read(stream.fileno(), 1 << 16)
            if not chunk:
                break
            self.heard(chunk)
            fresh += chunk
            if running and parse_statistics(self.tool, fresh) is not None:
                break
        counts = parse_statistics(self.tool, self.said)
        if counts is not None and asked and parse_statistics(self.tool, fresh) is None:
            counts = counts._replace(stale=True)
        return counts

    def heard(self, said: bytes) -> None:
        """What the tool wrote on stderr, added to `said`: its last SAID_KEPT bytes only (it
        writes its counts at every summary, for as long as the capture runs)."""
        self.said = (self.said + said)[-SAID_KEPT:]

    def waiting(self) -> tuple[int, int] | None:
        """(bytes written to the pipe and not read yet, the pipe's capacity), or None when
        there is no pipe: the capture's backlog, bounded by the pipe. When it is full the
        tool waits, and what the kernel cannot hold meanwhile it drops, and counts."""
        if self._read_fd < 0:
            return None
        try:
            waiting = fcntl.ioctl(self._read_fd, termios.FIONREAD, b"\0\0\0\0")
            capacity = fcntl.fcntl(self._read_fd, fcntl.F_GETPIPE_SZ)
        except OSError:  # (closed at the end)
            return None
        return int.from_bytes(waiting, sys.byteorder), capacity

    def error(self) -> str | None:
        """What the tool said when it ended on its own with a failure (no permission, no such
        interface), for the user; None when it ran."""
        if self.process is None:
            return None
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None
        if code in (0, -signal.SIGINT, -signal.SIGTERM):
            return None
        self.heard(self.process.stderr.read())
        said = self.said.decode(errors="replace").strip().splitlines()
        chatter = ("listening on", "tcpdump: verbose")
        lines = [line for line in said if not line.startswith(chatter)]
        return f"{self.tool} failed (exit {code}): " + (" ".join(lines[-2:]) or "no message")

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self.process is not None:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._copier is not None:
            self._copier.join(timeout=10)
            os.close(self._read_fd)


def _write_all(fd: int, data: bytes) -> bool:
    """`data` written to the pipe; False when its reader is gone (the dissector stopped: the
    file is still written)."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BrokenPipeError:
        return False
    return True

