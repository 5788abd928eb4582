"""The live-capture options that `frames` and `analyze` share: -i, -w, --duration."""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from collections.abc import Iterator

from streamdissect.capture import CaptureError
from streamdissect.capture.limits import BUFFER_MIB
from streamdissect.cli._options import capture_ports, port_map


def add_live_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-i", "--interface", metavar="IFACE",
        help="capture live on IFACE with tcpdump (or dumpcap) instead of reading files; "
        "Ctrl-C (or --duration, -c) ends it",
    )  # fmt: skip
    parser.add_argument("-w", "--write", metavar="FILE",
                        help="with -i: keep the raw capture in FILE as well")
    parser.add_argument("--duration", type=float, metavar="S",
                        help="with -i: stop after S seconds")
    parser.add_argument("--buffer", type=int, default=BUFFER_MIB, metavar="MIB",
                        help="with -i: the kernel's buffer for the capture, what it holds "
                        f"while the analysis catches up (default {BUFFER_MIB}); beyond it "
                        "packets are dropped, and counted")  # fmt: skip
    parser.add_argument("-c", "--count", type=int, metavar="N",
                        help="stop after N frames (with -Y: N it selects; live: the capture "
                        "ends then)")  # fmt: skip
    if parser.prog.endswith("analyze"):
        parser.add_argument("--every", type=float, metavar="S",
                            help="with -i: a running summary on stderr every S seconds")


def running_summary(every: float, err=sys.stderr, live=None):
    """An event watcher (analyze's `watch`) that prints on stderr, every `every` seconds, what
    went by so far (frames by command, connections, anomalies), traffic or not; with a live
    capture, the capture tool's own counts too (its drops never hidden), and how far the
    analysis is behind when the capture's pipe fills. A last line, every command's count,
    when the events end."""
    from collections import Counter

    import numpy as np

    from streamdissect.engine.dissect import FrameEvent
    from streamdissect.protocols.stream.hot import COMMAND_OF, HotFrames

    commands: Counter = Counter()
    connections: set = set()
    seen = {"anomalies": 0, "newest_ns": None}
    done = threading.Event()
    started = time.monotonic()

    def line(top: int | None, stats) -> str:
        counts = ", ".join(f"{c} {n:,}" for c, n in commands.copy().most_common(top))
        when = f"{time.monotonic() - started:.0f} s{'' if top else ', end'}"
        return (f"[{when}] {sum(commands.values()):,} frames{f' ({counts})' if counts else ''}; "
                f"{len(connections)} connections; {seen['anomalies']} anomalies"
                f"{capture_said(stats, live, seen['newest_ns']) if live is not None else ''}\n")

    def report() -> None:
        while not done.wait(every):
            err.write(line(5, live.statistics() if live is not None else None))
            err.flush()

    def watch(events):
        reporter = threading.Thread(target=report, daemon=True)
        reporter.start()
        try:
            for event in events:
                cls = event.__class__
                if cls is FrameEvent:
                    commands[frame_name(event.record)] += 1
                    connections.add(event.connection)
                    seen["newest_ns"] = event.ts_ns
                elif cls is HotFrames:
                    keys, counts = np.unique(event.key, return_counts=True)
                    for key, n in zip(keys.tolist(), counts.tolist()):
                        commands[COMMAND_OF[key]] += n
                    connections.update(event.connections)
                    seen["newest_ns"] = int(event.ts_ns[-1])
                else:
                    seen["anomalies"] += 1
                yield event
        finally:
            done.set()
        reporter.join(timeout=5)  # (its line first, if it was writing one: the tool's counts)
        err.write(line(None, live.statistics(ask=False) if live is not None else None))
        err.flush()

    return watch


def frame_name(record) -> str:
    """What a frame is, for the counts: the Stream's command, another protocol's code name
    (RocketMQ's records have no `command`), "Malformed" when the frame did not read."""
    name = getattr(record, "command", None) if hasattr(record, "command") else getattr(
        record, "code_name", None)  # fmt: skip
    return name or "Malformed"


BEHIND = 0.5  # the capture's pipe this full: the analysis is not keeping up


def capture_said(stats, live, newest_ns: int | None) -> str:
    """A summary's words on the capture: the tool's counts, its drops as what was never seen,
    and, when its pipe is filling, how far behind the wire the analysis is."""
    said = ""
    if stats is not None:
        said = f"; {stats.text()}"
        if stats.dropped:
            said += " (the capture fell behind: those packets were never seen)"
    backlog = live.waiting()
    if backlog is not None and backlog[0] >= BEHIND * backlog[1]:
        age = f", the newest frame analysed {time.time() - newest_ns / 1e9:.1f} s old" if (
            newest_ns is not None) else ""  # fmt: skip
        said += (f"; falling behind: {backlog[0]:,} of the pipe's {backlog[1]:,} bytes "
                 f"waiting{age}")
    return said


def first_frames(count: int, live: object):
    """An event watcher that ends the events after `count` frames (and a live capture)."""
    from streamdissect.engine.dissect import FrameEvent
    from streamdissect.protocols.stream.hot import HotFrames

    def watch(events):
        left = count
        for event in events:
            cls = event.__class__
            if cls is HotFrames and len(event) >= left:  # (the run cut to what is left)
                yield event.slice(0, left)
                left = 0
            else:
                yield event
                if cls is FrameEvent:
                    left -= 1
                elif cls is HotFrames:
                    left -= len(event)
            if left <= 0:
                if live is not None:
                    live.stop()
                return

    return watch


def check_sources(args: argparse.Namespace) -> str | None:
    """What is wrong with the capture sources given, for the user; None when nothing."""
    if args.interface and args.captures:
        return "give capture files or -i IFACE, not both"
    if not args.interface and not args.captures:
        return "give a capture file ('-': standard input) or -i IFACE"
    if not args.interface and (args.write or args.duration or getattr(args, "every", None)):
        return "-w, --duration and --every go with -i"
    if args.buffer < 1:
        return "--buffer needs a number of MiB, 1 or more"
    if args.duration is not None and args.duration <= 0:
        return "--duration needs a number of seconds above 0"
    if getattr(args, "count", None) is not None and args.count <= 0:
        return "-c needs a count above 0"
    return None


@contextlib.contextmanager
def sources(args: argparse.Namespace, ports: tuple[int, ...],
            immediate: bool = True) -> Iterator[tuple[list, object]]:  # fmt: skip
    """(the paths to read, the live capture or None). Live: the tool runs for the block;
    SIGINT or SIGTERM to this process (Ctrl-C, kill) stops the tool once the packets it
    captured so far have come (LiveCapture.finish), and its pipe then ends, so all of them
    are printed; --duration stops it the same way."""
    if not args.interface:
        yield args.captures, None
        return
    import signal  # (with the live capture: only when capturing)

    from streamdissect.capture import live as live_capture

    live = live_capture.LiveCapture(args.interface, ports, not args.no_heuristic, args.write,
                       buffer_mib=args.buffer, immediate=immediate)  # fmt: skip
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    timer = None
    with live:
        for sig in previous:  # (a second one stops the capture at once)
            signal.signal(sig, lambda *_: live.finish())
        if args.duration:
            timer = threading.Timer(args.duration, live.finish)
            timer.daemon = True
            timer.start()
        try:
            yield [live.path], live
        finally:
            if timer is not None:
                timer.cancel()
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def with_sources(args: argparse.Namespace, body, immediate: bool = True) -> int:
    """body(paths, live, ports)'s exit status, the sources opened (sources()); a usage
    problem (check_sources) or a tool that would not start: a message and status 2.
    `immediate`: each packet as it comes (frames); an analysis, whose report comes at the
    end, takes them within a second and has the kernel's buffer hold many more."""
    problem = check_sources(args)
    if problem:
        print(f"streamdissect: error: {problem}", file=sys.stderr)
        return 2
    ports = port_map(args)
    try:
        with sources(args, capture_ports(args), immediate) as (paths, live):
            return body(paths, live, ports)
    except CaptureError as exc:
        return capture_error(exc, None)


def capture_error(exc: CaptureError, live: object) -> int:
    """A CaptureError (or the live tool's own failure, which explains it better) on stderr."""
    said = live.error() if live is not None else None
    print(f"streamdissect: error: {said or exc}", file=sys.stderr)
    return 2
