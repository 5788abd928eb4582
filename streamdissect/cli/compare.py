"""`streamdissect compare CAPTURE URI`: a capture's read-only requests replayed against a
live broker, and how the answers differ."""

from __future__ import annotations

import argparse
import sys

from streamdissect.cli._broker import (
    INTERRUPTED,
    USAGE,
    add_broker_options,
    fail,
    interrupt_on_sigterm,
    status,
)
from streamdissect.protocols.registry import tcp_port

DIFFERENT = 1  # the exit status when protocol differences were found


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "compare",
        help="replay a capture's read-only requests against a live broker and diff the answers",
        description="Replay the capture's read-only requests (PeerProperties, SaslHandshake, "
        "Metadata, QueryOffset, QueryPublisherSequence, StreamStats, Route, Partitions, "
        "ExchangeCommandVersions) against a live broker and report, request by request, how "
        "the live responses differ (kind protocol, server or state), the command versions "
        "the capture uses against what the broker offers, tune values, server version and "
        "latency. Exit status: 0 no protocol difference, 1 protocol differences, 2 usage, "
        "3 a step failed, 130 interrupted.",
    )
    p.add_argument("capture", metavar="CAPTURE", help="pcap, pcapng or gzip'd capture file")
    add_broker_options(p, uri_required=True)
    p.add_argument("--port", type=tcp_port, action="append", dest="ports", default=[],
                   help="a Stream server port of the capture (repeatable; 5551-5554 and the "
                   "heuristic are always on)")  # fmt: skip
    p.add_argument(
        "--messages",
        type=int,
        default=10,
        metavar="N",
        help="with --allow-writes: messages of the round trip (default 10)",
    )
    p.set_defaults(handler=run)
    return p


def run(args) -> int:
    from streamdissect.capture import CaptureError
    from streamdissect.cli._broker import connector
    from streamdissect.cli._text_report import json_write
    from streamdissect.probe.captured import read_capture
    from streamdissect.probe.compare import Compare, CompareOptions
    from streamdissect.probe.errors import ProbeError
    from streamdissect.probe.text import compare_text

    try:
        conn = connector(args)
    except ProbeError as exc:
        return fail("compare", exc)
    try:
        captured = read_capture([args.capture], args.ports)
    except CaptureError as exc:
        print(f"streamdissect compare: error: {exc}", file=sys.stderr)
        return USAGE
    options = CompareOptions(allow_writes=args.allow_writes, messages=max(args.messages, 1))
    with interrupt_on_sigterm():
        try:
            report = Compare(conn, captured, options, status("compare")).run()
        except ProbeError as exc:
            return fail("compare", exc, conn.target)
        except KeyboardInterrupt:
            print("streamdissect compare: interrupted", file=sys.stderr)
            return INTERRUPTED
        finally:
            for wire in conn.wires:
                wire.close()
    if args.format == "json":
        json_write(report, sys.stdout.write)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(compare_text(report))
    return DIFFERENT if report["summary"]["protocol"] else 0
