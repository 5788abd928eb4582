"""The command line: `streamdissect SUBCOMMAND ...`, one argparse subcommand per face.

A subcommand is added with a `register_*` function that adds its parser and sets
`handler`; main() only dispatches.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from . import cli_env  # noqa: F401  (first: it sets what numpy reads on import)
from .capture import CaptureError
from .cli_analyze import add_parser as register_analyze
from .dissect import Anomaly, Dissector, FrameEvent
from .progress import progress_bar
from .protocol.records import Record, jsonable, record_class
from .protocol.summary import frame_summary as summary

# Raw payload fields left out of jsonl unless --payloads: a Deliver's chunk would put
# megabytes of hex on one line, and the per-message list of a Publish is its own table.
PAYLOAD_FIELDS = ("chunk_payload", "messages")
DELIVER_CLASS = record_class("Deliver")
PAYLOAD_CLASSES = (DELIVER_CLASS, record_class("Publish"))
PLAIN = frozenset((int, str, bool, float, type(None)))  # what jsonable leaves as it is
INT = frozenset((int,))
ARROWS = {"c2s": "→", "s2c": "←"}


# --- frames ------------------------------------------------------------------------------


def register_frames(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "frames",
        help="one line (text) or JSON object (jsonl) per frame, like tshark",
        description="List every RabbitMQ Stream frame of a capture (pcap, pcapng, gzip'd). "
        "Anomalies go to stderr (text) or inline with command 'Anomaly' (jsonl).",
    )
    parser.add_argument(
        "captures",
        nargs="+",
        metavar="CAPTURE",
        help="capture file; several files are read as one, in time order",
    )
    parser.add_argument("--format", choices=("text", "jsonl"), default="text")
    parser.add_argument(
        "--port",
        type=int,
        action="append",
        dest="ports",
        metavar="N",
        help="a Stream port (repeatable; default 5552)",
    )
    parser.add_argument(
        "--no-heuristic",
        action="store_true",
        help="only the given ports: do not recognise the protocol elsewhere",
    )
    parser.add_argument(
        "--max-frame",
        type=int,
        metavar="N",
        help="largest frame kept whole, in bytes (default: the negotiated frame max, else 8 MiB);"
        " a frame above it is an anomaly (frame_too_large)",
    )
    parser.add_argument(
        "--show-secrets",
        action="store_true",
        help="print SASL PLAIN passwords instead of redacting them",
    )
    parser.add_argument(
        "--payloads",
        action="store_true",
        help="jsonl: include raw payload fields (chunk_payload, messages)",
    )
    parser.set_defaults(handler=run_frames)


def run_frames(args: argparse.Namespace) -> int:
    bar = progress_bar(args.captures)
    dissector = Dissector(
        ports=args.ports or (5552,),
        heuristic=not args.no_heuristic,
        max_frame=args.max_frame,
        on_read=bar.update if bar else None,
        # Publish message lists are only printed with --payloads: not kept (nor copied) else.
        publish_messages=args.payloads,
        helper_process=True,
    )
    try:
        events = dissector.run(args.captures)
    except CaptureError as exc:
        print(f"streamdissect: error: {exc}", file=sys.stderr)
        return 2
    if args.format == "jsonl":
        write = jsonl_writer(sys.stdout, args.show_secrets, args.payloads)
    else:
        write = text_writer(sys.stdout, sys.stderr, args.show_secrets)
    try:
        for event in events:
            write(event)
        sys.stdout.flush()
    except BrokenPipeError:
        # `| head` closed our stdout: stop quietly, and keep the interpreter's final flush
        # from raising again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        if bar:
            bar.close()
    return 0


def frame_dict(event: FrameEvent, show_secrets: bool, payloads: bool = False) -> dict[str, Any]:
    record = event.record
    row: dict[str, Any] = {
        "ts_ns": event.ts_ns,
        "connection": event.connection,
        "direction": event.direction,
        "stream_offset": event.stream_offset,
    }
    cls = record.__class__
    if (not payloads and cls in PAYLOAD_CLASSES) or cls.to_dict is Record.to_dict:
        # to_dict (less the payload fields), without turning megabytes of payload into hex
        # first, nor copying lists of publishing ids one int at a time
        fields = record.common_dict()
        for name in record.body_fields:
            if payloads or name not in PAYLOAD_FIELDS:
                value = getattr(record, name)
                plain = value.__class__ in PLAIN or (
                    value.__class__ is list and set(map(type, value)) <= INT
                )
                fields[name] = value if plain else jsonable(value)
        if cls is DELIVER_CLASS:
            fields["crc_ok"] = record.crc_ok
        row.update(fields)
        return row
    fields = record.to_dict(show_secrets=show_secrets)
    if fields.get("command") is None:
        fields["command"] = type(record).__name__  # Malformed or Unknown of an unknown key
    if not payloads:
        for name in PAYLOAD_FIELDS:
            fields.pop(name, None)
    row.update(fields)
    return row


def anomaly_dict(anomaly: Anomaly) -> dict[str, Any]:
    return {
        "ts_ns": anomaly.ts_ns,
        "connection": anomaly.connection,
        "direction": anomaly.direction,
        "command": "Anomaly",
        "kind": anomaly.kind,
        "stream_offset": anomaly.stream_offset,
        "length": anomaly.length,
        "detail": anomaly.detail,
    }


def jsonl_writer(out: TextIO, show_secrets: bool, payloads: bool) -> Callable[[Any], None]:
    def write(event: FrameEvent | Anomaly) -> None:
        row = (
            frame_dict(event, show_secrets, payloads)
            if isinstance(event, FrameEvent)
            else anomaly_dict(event)
        )
        out.write(json.dumps(row, default=str) + "\n")

    return write


def text_writer(out: TextIO, err: TextIO, show_secrets: bool) -> Callable[[Any], None]:
    state = {"first_ns": None, "number": 0}

    def relative(ts_ns: int | None) -> float:
        if ts_ns is None:
            return 0.0
        if state["first_ns"] is None:
            state["first_ns"] = ts_ns
        return (ts_ns - state["first_ns"]) / 1e9

    def write(event: FrameEvent | Anomaly) -> None:
        seconds = relative(event.ts_ns)
        if isinstance(event, Anomaly):
            where = f"{event.connection} {event.direction}" if event.connection else "file"
            err.write(
                f"anomaly {seconds:.6f} {where} {event.kind} at {event.stream_offset}"
                f" len {event.length}: {event.detail}\n"
            )
            return
        state["number"] += 1
        out.write(
            f"{state['number']:>6} {seconds:>11.6f} {event.connection} "
            f"{ARROWS[event.direction]} {summary(event.record, show_secrets)}\n"
        )

    return write


# --- entry point --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamdissect", description="Dissect and analyse RabbitMQ Stream captures."
    )
    subparsers = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    register_frames(subparsers)
    register_analyze(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


def command() -> None:
    """The `streamdissect` command: main(), then out of the process at once.

    The objects made while importing live as long as the process: frozen, the cyclic
    garbage collector stops walking them again and again during a run. The records and
    events of a run make no reference cycles, so the collector runs every 10,000
    allocations instead of 700 (~0.03 s of 1 s on the benchmark capture, same peak RSS). At
    the end, the interpreter's teardown (freeing every module and object one by one, ~0.05 s
    after a large capture) does nothing a finished command needs, so the output is flushed
    and the process exits without it."""
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a reader gone, or closed: nothing to flush to
            pass
    os._exit(code)


if __name__ == "__main__":
    command()
