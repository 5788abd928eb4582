"""`streamdissect probe URI`: what a live broker says and does now, from the protocol."""

from __future__ import annotations

import argparse
import sys

from streamdissect.cli._broker import (
    INTERRUPTED,
    add_broker_options,
    fail,
    interrupt_on_sigterm,
    status,
)


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "probe",
        help="talk to a live broker: properties, SASL, tune, command versions, round trips",
        description="Connect to a broker with streamdissect's own codec (no client library) "
        "and report its peer properties, SASL mechanisms, tune values, Open's connection "
        "properties, command versions, the named streams' metadata and stats, and round-trip "
        "times of read-only commands. Exit status: 0 done, 2 usage, 3 a step failed (named "
        "on stderr), 130 interrupted.",
    )
    add_broker_options(p)
    p.add_argument(
        "--stream",
        action="append",
        default=[],
        dest="streams",
        metavar="NAME",
        help="report this stream's metadata and stats (repeatable)",
    )
    p.add_argument(
        "--samples",
        type=int,
        default=5,
        metavar="N",
        help="round trips of each read-only command, and messages with --allow-writes (default 5)",
    )
    p.add_argument(
        "--idle",
        type=float,
        default=0.0,
        metavar="S",
        help="stay connected S seconds at the end, exchanging heartbeats",
    )
    p.add_argument(
        "--pcap",
        metavar="OUT",
        help="write the probe's own session as a capture (synthesised TCP/IP "
        "headers; the TLS plain text; the SASL password masked)",
    )
    p.set_defaults(handler=run)
    return p


def run(args) -> int:
    from streamdissect.cli._broker import connector
    from streamdissect.cli._text_report import json_write
    from streamdissect.probe.checks import Probe, ProbeOptions
    from streamdissect.probe.errors import ProbeError
    from streamdissect.probe.pcap import write_pcap
    from streamdissect.probe.text import probe_text

    if args.samples < 1:
        print("streamdissect probe: error: --samples must be 1 or more", file=sys.stderr)
        return 2
    try:
        conn = connector(args)
    except ProbeError as exc:
        return fail("probe", exc)
    options = ProbeOptions(
        streams=tuple(args.streams),
        samples=args.samples,
        allow_writes=args.allow_writes,
        idle=max(args.idle, 0.0),
    )
    probe = Probe(conn, options, status("probe"))
    report, code = None, 0
    with interrupt_on_sigterm():
        try:
            report = probe.run()
        except ProbeError as exc:
            code = fail("probe", exc, conn.target)
        except KeyboardInterrupt:
            print("streamdissect probe: interrupted", file=sys.stderr)
            code = INTERRUPTED
        finally:
            for wire in conn.wires:
                wire.close()
            if args.pcap:
                try:
                    packets = write_pcap(args.pcap, conn.wires)
                    status("probe")(f"wrote {packets} packets to {args.pcap}")
                except OSError as exc:
                    print(f"streamdissect probe: error: {args.pcap}: {exc.strerror or exc}",
                          file=sys.stderr)  # fmt: skip
                    code = code or 2
    if report is None:
        return code
    if args.format == "json":
        json_write(report, sys.stdout.write)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(probe_text(report))
    return code
