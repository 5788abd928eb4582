"""The live-capture options that `frames` and `analyze` share: -i, -w, --duration."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator

from streamdissect.capture import CaptureError
from streamdissect.capture.live import LiveCapture
from streamdissect.cli._options import port_map


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
    parser.add_argument("-c", "--count", type=int, metavar="N",
                        help="stop after N frames (with -Y: N it selects; live: the capture "
                        "ends then)")  # fmt: skip
    if parser.prog.endswith("analyze"):
        parser.add_argument("--every", type=float, metavar="S",
                            help="with -i: a running summary on stderr every S seconds")


def running_summary(every: float, err=sys.stderr, live=None):
    """An event watcher (analyze's `watch`) that prints on stderr, every `every` seconds, what
    went by so far (frames by command, connections, anomalies), traffic or not; with a live
    capture, the capture tool's own counts too (its drops never hidden)."""
    from collections import Counter

    import numpy as np

    from streamdissect.engine.dissect import FrameEvent
    from streamdissect.protocols.stream.hot import COMMAND_OF, HotFrames

    commands: Counter = Counter()
    connections: set = set()
    seen = {"anomalies": 0}
    done = threading.Event()

    def report(started: float) -> None:
        while not done.wait(every):
            top = ", ".join(f"{c} {n:,}" for c, n in commands.copy().most_common(5))
            stats = live.statistics() if live is not None else None
            err.write(f"[{time.monotonic() - started:.0f} s] {sum(commands.values()):,} frames"
                      f"{f' ({top})' if top else ''}; {len(connections)} connections; "
                      f"{seen['anomalies']} anomalies{f'; {stats.text()}' if stats else ''}\n")  # fmt: skip
            err.flush()

    def watch(events):
        threading.Thread(target=report, args=(time.monotonic(),), daemon=True).start()
        try:
            for event in events:
                cls = event.__class__
                if cls is FrameEvent:
                    commands[event.record.command or "Malformed"] += 1
                    connections.add(event.connection)
                elif cls is HotFrames:
                    keys, counts = np.unique(event.key, return_counts=True)
                    for key, n in zip(keys.tolist(), counts.tolist()):
                        commands[COMMAND_OF[key]] += n
                    connections.update(event.connections)
                else:
                    seen["anomalies"] += 1
                yield event
        finally:
            done.set()

    return watch


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
    if args.duration is not None and args.duration <= 0:
        return "--duration needs a number of seconds above 0"
    if getattr(args, "count", None) is not None and args.count <= 0:
        return "-c needs a count above 0"
    return None


@contextlib.contextmanager
def sources(args: argparse.Namespace, ports: tuple[int, ...]) -> Iterator[tuple[list, object]]:
    """(the paths to read, the live capture or None). Live: the tool runs for the block;
    SIGINT to this process (Ctrl-C, kill -INT) stops the tool, whose pipe then ends, so what
    was read is still printed; --duration stops it the same way."""
    if not args.interface:
        yield args.captures, None
        return
    live = LiveCapture(args.interface, ports, not args.no_heuristic, args.write)
    previous = signal.getsignal(signal.SIGINT)
    timer = None
    with live:
        signal.signal(signal.SIGINT, lambda *_: live.stop())
        if args.duration:
            timer = threading.Timer(args.duration, live.stop)
            timer.daemon = True
            timer.start()
        try:
            yield [live.path], live
        finally:
            if timer is not None:
                timer.cancel()
            signal.signal(signal.SIGINT, previous)


def with_sources(args: argparse.Namespace, body) -> int:
    """body(paths, live, ports)'s exit status, the sources opened (sources()); a usage
    problem (check_sources) or a tool that would not start: a message and status 2."""
    problem = check_sources(args)
    if problem:
        print(f"streamdissect: error: {problem}", file=sys.stderr)
        return 2
    ports = port_map(args)
    try:
        with sources(args, tuple(sorted({n for each in ports.values() for n in each}))) as (
                paths, live):  # fmt: skip
            return body(paths, live, ports)
    except CaptureError as exc:
        return capture_error(exc, None)


def capture_error(exc: CaptureError, live: object) -> int:
    """A CaptureError (or the live tool's own failure, which explains it better) on stderr."""
    said = live.error() if live is not None else None
    print(f"streamdissect: error: {said or exc}", file=sys.stderr)
    return 2
