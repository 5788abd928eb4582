"""`streamdissect analyze CAPTURE...`: every analysis of a capture as text tables or JSON."""

from __future__ import annotations

import argparse
import sys

from streamdissect.analysis import analyze
from streamdissect.capture import CaptureError
from streamdissect.cli._live import (
    add_live_options,
    capture_error,
    first_frames,
    running_summary,
    with_sources,
)
from streamdissect.cli._options import add_analysis_options
from streamdissect.cli._progress import progress_bar
from streamdissect.cli._text_report import json_write, to_json, to_text
from streamdissect.protocols.view import DEFAULT_MAX_BODY

# What run() imports as it goes (the engine and the Stream's fast path and collectors, which
# every analyze imports today, a RocketMQ capture's too), imported by the command before it
# freezes the import-time objects (cli.command): imported after, they were young objects
# that the run's one young collection walked (~2-7 ms, ~1.3 ms without them).
RUN_IMPORTS = (
    "streamdissect.engine.dissect",
    "streamdissect.engine.bulk",
    "streamdissect.capture.sources",
    "streamdissect.protocols.stream.fast_path",
    "streamdissect.protocols.stream.analysis.collectors",
)


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "analyze",
        help="latency, confirm lag, credit stalls, consumer lag, lifecycle, errors; RocketMQ "
        "calls, sends, pulls and lag",
        description="Analyse one capture; several files (a rotated set) are read as one "
        "capture in time order.",
    )
    p.add_argument("captures", nargs="*", metavar="CAPTURE",
                   help="capture file ('-': standard input); several are read as one")
    add_live_options(p)
    p.add_argument("--format", choices=("text", "json", "csv", "parquet"), default="text",
                   help="text tables, a JSON report, or every table as files in -o DIR (csv: "
                   "TABLE.csv; parquet: TABLE/part-00000.parquet, as Spark writes them)")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="where --format csv or parquet writes its files")
    add_analysis_options(p, "text: capture times")
    p.add_argument("--messages", action="store_true",
                   help="the messages table too (one row a message of every Publish and "
                   "Deliver): in the files, the JSON report and the text's first rows")
    p.add_argument("--max-body", type=int, default=DEFAULT_MAX_BODY, metavar="N",
                   help=f"--messages: bytes of each body kept (default {DEFAULT_MAX_BODY})")
    p.add_argument("--no-bodies", action="store_true",
                   help="--messages: leave message bodies out (only their kind and size)")
    p.set_defaults(handler=run)
    return p


def run(args) -> int:
    files = args.format in ("csv", "parquet")
    if args.max_body < 0:
        print("streamdissect: error: --max-body takes a number of bytes, 0 or more",
              file=sys.stderr)  # fmt: skip
        return 2
    if files and not args.output:
        print(f"streamdissect: error: --format {args.format} writes files: say where with "
              "-o DIR", file=sys.stderr)  # fmt: skip
        return 2
    return with_sources(args, lambda paths, live, ports: _analyze(args, paths, live, ports,
                                                                  files),
                        immediate=False)  # fmt: skip


def _watchers(args, live):
    """analyze's `watch`: the running summary (--every) and the frame count (-c), chained."""
    watchers = []
    if args.count is not None:
        watchers.append(first_frames(args.count, live))
    if args.every:
        watchers.append(running_summary(args.every, live=live))
    if not watchers:
        return None

    def watch(events):
        for watcher in watchers:
            events = watcher(events)
        return events

    return watch


def told_drops(result, live) -> None:
    """The capture tool's own counts on stderr, and its drops an anomaly of the report:
    what the kernel dropped was never seen, and is never hidden."""
    from streamdissect.engine.anomalies import Anomaly

    stats = live.statistics(ask=False)
    if stats is None:
        return
    print(f"streamdissect: {stats.text()}", file=sys.stderr)
    if stats.dropped:
        result.add_anomaly(Anomaly(None, None, None, "capture_dropped", None, stats.dropped,
                                   f"{stats.text()}: those packets were never seen"))  # fmt: skip


def _analyze(args, paths: list, live, ports: tuple[int, ...], files: bool) -> int:
    # (a live analysis runs for as long as the capture: the tables that grow with it keep
    # their rows past CompactRows.SPILL_BYTES on disk, as a file's analysis does)
    bar = progress_bar(paths)
    try:
        result = _analysis(args, paths, ports, files, bar, live)
    except CaptureError as exc:
        return capture_error(exc, live)
    finally:
        if bar:
            bar.close()
    return _told(args, result, live, files)


def _analysis(args, paths: list, ports: tuple[int, ...], files: bool, bar, live):
    """The analysis of the capture, as the options say."""
    return analyze(
        paths,
        ports=ports,
        heuristic=not args.no_heuristic,
        max_frame=args.max_frame,
        at_once_ms=args.at_once_ms,
        on_read=bar.update if bar else None,
        report_only=not files,  # (the files hold every table, publishes included)
        helper_process=True,
        watch=_watchers(args, live),
        # -c: frame by frame, so that the tables count the frames read and no more
        engine="stream" if args.count is not None else "auto",
        messages=args.messages, max_body=args.max_body, bodies=not args.no_bodies,
    )


def _told(args, result, live, files: bool) -> int:
    """The report: on stdout, or as files."""
    if live is not None:
        told_drops(result, live)
    if files:
        from streamdissect.tables import schema
        from streamdissect.tables.export import write_tables

        try:
            # (and the tables of the other protocols the capture carried: RocketMQ's)
            tables = [*schema.analysis_tables(on_request=args.messages), *result.other_tables()]
            for path in write_tables(result, args.output, args.format, tables):
                print(path)
        except OSError as exc:
            print(f"streamdissect: error: {args.output}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        return 0
    if args.format == "json":
        json_write(to_json(result, lazy=True, messages=args.messages), sys.stdout.write)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(to_text(result, local=args.local, messages=args.messages))
    return 0
