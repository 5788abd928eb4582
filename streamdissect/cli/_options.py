"""Options that more than one subcommand takes, defined once."""

from __future__ import annotations

import argparse


def add_analysis_options(p: argparse.ArgumentParser, times: str) -> None:
    """Which traffic is read (--port, --no-heuristic, --max-frame), how times are shown
    (--utc, --local: `times` says what, e.g. 'text: capture times') and --at-once-ms."""
    p.add_argument("--port", type=int, action="append", dest="ports",
                   help="server port of the Stream protocol (repeatable; default 5552)")
    p.add_argument("--no-heuristic", action="store_true",
                   help="only the given ports, no recognition of the protocol on other ports")
    p.add_argument("--max-frame", type=int, default=None,
                   help="largest frame accepted (default: negotiated frame max, else 8 MiB)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--utc", dest="local", action="store_false", default=False,
                      help=f"{times} in UTC (the default)")
    when.add_argument("--local", dest="local", action="store_true",
                      help=f"{times} in this machine's time zone")
    p.add_argument("--at-once-ms", type=float, default=50.0,
                   help="a Deliver this soon after a Credit shows the broker had more data")
