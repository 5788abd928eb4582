"""`streamdissect wireshark [-o FILE] [CAPTURE...]`: the Wireshark Lua dissector generated from
the protocol table; with captures, tshark's view of them through it."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from streamdissect.protocols.registry import tcp_port


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "wireshark",
        help="write the Wireshark/tshark Lua dissector (with captures: show them through it)",
        description="Write a Wireshark Lua dissector for RabbitMQ Stream, generated from the "
        "protocol table (every command, version and field; protocol rabbitmq_stream). With "
        "captures, run tshark (two passes) with it on each and print what tshark prints.",
    )
    p.add_argument("captures", nargs="*", metavar="CAPTURE",
                   help="captures to show through tshark with the dissector")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the dissector to FILE (default: standard output, or a "
                   "temporary file when captures are given)")
    p.add_argument("-V", "--verbose", action="store_true",
                   help="with captures: every packet's tree (tshark -V)")
    p.add_argument("-Y", "--display-filter", metavar="FILTER",
                   help="with captures: a Wireshark display filter, e.g. "
                   "'rabbitmq_stream.time > 0.01'")
    p.add_argument("--show-secrets", action="store_true",
                   help="with captures: show SASL PLAIN passwords (hidden by default)")
    p.add_argument("--port", type=tcp_port, action="append", default=[], metavar="N",
                   help="with captures: a server port of RabbitMQ Stream, instead of 5552, in "
                   "the dissector's ports preference (repeatable; without it the heuristic "
                   "finds other ports, unless another dissector owns a client's port)")
    p.set_defaults(handler=run)
    return p


def run(args) -> int:
    from streamdissect.wireshark import generate
    from streamdissect.wireshark.tshark import TsharkError, show

    text = generate()
    if args.output:
        Path(args.output).write_text(text)
    elif not args.captures:
        sys.stdout.write(text)
        return 0
    if not args.captures:
        return 0
    options = {"verbose": args.verbose, "display_filter": args.display_filter,
               "show_secrets": args.show_secrets, "ports": args.port}  # fmt: skip
    try:
        if args.output:
            return show(args.output, args.captures, **options)
        with tempfile.TemporaryDirectory() as scratch:
            plugin = Path(scratch) / "rabbitmq_stream.lua"
            plugin.write_text(text)
            return show(plugin, args.captures, **options)
    except TsharkError as exc:
        print(f"streamdissect: error: {exc}", file=sys.stderr)
        return 2
