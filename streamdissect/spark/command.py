"""The Spark job's command line, shared by `streamdissect spark` (cli/spark.py) and
`spark-submit` (submit.py): its arguments and what it does with them."""

from __future__ import annotations

import argparse
import sys
import time

from streamdissect.capture import CaptureError
from streamdissect.protocols.registry import named_ports, protocol, tcp_port

DESCRIPTION = ("Every file (directories are read recursively; pcap, pcapng, gzip'd) is "
               "analysed as a capture in a Spark task, and the pieces of a rotated capture "
               "(tcpdump -C, -G, -W) are stitched back into one; the tables are written under "
               "--out as analyze --format parquet writes them.")  # fmt: skip


def add_arguments(p: argparse.ArgumentParser) -> None:
    from streamdissect.spark.jobs import OPTIONAL, TABLES

    p.add_argument("inputs", nargs="+", metavar="INPUT", help="a file, a glob or a directory")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--master", metavar="URL",
                   help="local[*] (the default), local[N], or spark://HOST:PORT")
    p.add_argument("--tables", default=",".join(TABLES),
                   help=f"comma-separated, of: {', '.join(TABLES + OPTIONAL)} (default: all "
                   f"but {', '.join(OPTIONAL)}; requests: every Stream request with its "
                   "response; messages: one row a message, as analyze --messages)")
    p.add_argument("--port", type=tcp_port, action="append", dest="ports", metavar="N",
                   help="a Stream port (repeatable; default 5552; with --no-heuristic, "
                        "the Stream's alone, as for analyze)")
    p.add_argument("--no-heuristic", action="store_true")
    p.add_argument("--partitions", type=int, metavar="N",
                   help="at least N tasks (default: Spark's parallelism)")
    p.add_argument("--max-body", type=int, default=256, metavar="N",
                   help="with the messages table: bytes of a body previewed (default 256)")
    p.add_argument("--no-bodies", action="store_true",
                   help="with the messages table: leave message bodies out")


def run(args, spark=None) -> int:
    """The job; on `spark` when given (spark-submit's session, submit.py), else on a session
    of --master."""
    from streamdissect.spark import session
    from streamdissect.spark.jobs import OPTIONAL, TABLES, run_job

    tables = tuple(t for t in args.tables.split(",") if t)
    unknown = sorted(set(tables) - set(TABLES + OPTIONAL))
    if unknown:
        print(f"streamdissect: error: unknown tables {', '.join(unknown)}", file=sys.stderr)
        return 2
    if args.max_body < 0:
        print("streamdissect: error: --max-body takes a number of bytes, 0 or more",
              file=sys.stderr)  # fmt: skip
        return 2
    started = time.monotonic()
    if spark is None:
        spark = session(args.master)
    try:
        ports = named_ports({protocol().name: args.ports or ()}, not args.no_heuristic)
        written = run_job(spark, args.inputs, args.out, tables, ports, not args.no_heuristic,
                          args.partitions, messages={"max_body": args.max_body,
                                                     "bodies": not args.no_bodies})  # fmt: skip
    except (FileNotFoundError, CaptureError) as exc:
        print(f"streamdissect: error: {exc}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    counts = ", ".join(f"{table} {n:,}" for table, n in written.items())
    print(f"wrote {args.out}: {counts} rows in {time.monotonic() - started:.1f} s")
    return 0
