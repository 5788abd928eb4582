"""`streamdissect frames CAPTURE...`: every frame, one text line or JSON object each."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any, ClassVar, TextIO

import numpy as np

from streamdissect.capture import CaptureError
from streamdissect.capture.chunked import STDIN
from streamdissect.cli._display_filter import FilterError, compile_filter
from streamdissect.cli._hot_fields import run_mask
from streamdissect.cli._jsonl_columns import run_lines
from streamdissect.cli._live import add_live_options, capture_error, with_sources
from streamdissect.cli._messages import (
    MESSAGE,
    add_message_options,
    message_lines_writer,
    message_option_error,
    message_run,
    message_test,
    message_text,
    names_messages,
    verbose_tree,
    with_messages,
)
from streamdissect.cli._options import add_port_options, port_map
from streamdissect.cli._progress import progress_bar
from streamdissect.cli._text_columns import ARROWS, LINE, SIDE, run_text
from streamdissect.engine.dissect import Anomaly, Dissector, FrameEvent
from streamdissect.protocols import registry
from streamdissect.protocols.base import Protocol
from streamdissect.protocols.stream.hot import HotFrames
from streamdissect.protocols.stream.protocol import STREAM
from streamdissect.protocols.stream.records import COMMON_COLUMNS, Record, jsonable, record_class
from streamdissect.protocols.stream.summary import frame_summary as summary

# Raw payload fields left out of jsonl unless --payloads: a Deliver's chunk would put
# megabytes of hex on one line, and the per-message list of a Publish is its own table.
PAYLOAD_FIELDS = ("chunk_payload", "messages")
DELIVER_CLASS = record_class("Deliver")
PAYLOAD_CLASSES = (DELIVER_CLASS, record_class("Publish"))
PLAIN = frozenset((int, str, bool, float, type(None)))  # what jsonable leaves as it is
INT = frozenset((int,))


# --- frames ------------------------------------------------------------------------------


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "frames",
        help="one line (text) or JSON object (jsonl) per frame, like tshark",
        description="List every frame of a capture (pcap, pcapng, gzip'd): RabbitMQ Stream and RocketMQ "
        "remoting. "
        "Anomalies go to stderr (text) or inline with command 'Anomaly' (jsonl).",
    )
    parser.add_argument(
        "captures",
        nargs="*",
        metavar="CAPTURE",
        help="capture file ('-': standard input); several files are read as one, in time order",
    )
    add_live_options(parser)
    parser.add_argument("--format", choices=("text", "jsonl"), default="text")
    add_port_options(parser)
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
    parser.add_argument(
        "-Y", "--display-filter", metavar="EXPR", dest="display_filter",
        help='only the frames (and anomalies) EXPR selects, over the jsonl field names: '
        '\'command == "Deliver" and subscription_id == 1\', \'code != 1\', '
        '\'connection contains ":5553"\', \'not response\', \'command == "Anomaly"\', '
        'message fields: \'message.application_properties.region == "eu"\'',
    )  # fmt: skip
    add_message_options(parser)
    parser.set_defaults(handler=run_frames)


def _stream(connection: str) -> Protocol | None:
    return None  # (the Stream's lines)


def filter_fields() -> frozenset[str]:
    """Every top-level key a frames jsonl line can have (what -Y may name)."""
    from streamdissect.protocols.stream.records import RECORD_CLASSES

    names = {"ts_ns", "connection", "direction", "stream_offset", *COMMON_COLUMNS,
             "kind", "length", "detail", "malformed", "reason", "offset", "raw", "cut",
             MESSAGE}  # fmt: skip
    for cls in RECORD_CLASSES.values():
        names.update(cls.body_fields)
        names.update(f.name for f in cls.spec.derived)
    for other in registry.PROTOCOLS:
        if other is not STREAM:
            names.update(other.filter_fields())
    return frozenset(names)


def filter_containers() -> frozenset[str]:
    """The filter fields a path may go under (`properties.product`, `ext.topic`,
    `message.`): those whose values hold fields of their own, as each protocol says."""
    return frozenset({MESSAGE}).union(*(p.filter_containers() for p in registry.PROTOCOLS))


def selecting(write: Callable[[Any], None], test: Any, show_secrets: bool,
              count: int | None,
              protocol_of: Callable[[str], Protocol | None] = lambda c: None,
              event_test: Any = None) -> Callable[[Any], bool]:  # fmt: skip
    """`write` for the events `test` selects (all, without one), up to `count` frames; the
    result says whether to go on. A HotFrames run is tested over its columns (run_mask) and
    cut where the count ends, without a record. `event_test`: `test` over a frame event
    and its messages (message fields), in place of `test` over its row."""
    left = [count]
    skip = getattr(write, "skip", None)  # (text: the frames not shown still count)

    def select(event: Any) -> bool:
        if event.__class__ is HotFrames:
            return select_run(event)
        is_frame = event.__class__ is FrameEvent
        if test is not None:
            if event_test is not None:
                selected = event_test(event)
            else:
                selected = test(frame_dict(event, show_secrets, protocol=protocol_of(
                    event.connection)) if is_frame else anomaly_dict(event))  # fmt: skip
            if not selected:
                if is_frame and skip is not None:
                    skip(event)
                return True
        write(event)
        if is_frame and left[0] is not None:
            left[0] -= 1
            return left[0] > 0
        return True

    def select_run(run: HotFrames) -> bool:
        rows = np.arange(len(run)) if test is None else np.flatnonzero(run_mask(test, run))
        if left[0] is None or len(rows) < left[0]:
            write.run(run, rows)  # type: ignore[attr-defined]
            if left[0] is not None:
                left[0] -= len(rows)
            return True
        rows = rows[: left[0]]  # (the count ends inside the run: the rest is not read)
        write.run(run.slice(0, int(rows[-1]) + 1), rows)  # type: ignore[attr-defined]
        left[0] = 0
        return False

    return select


def run_frames(args: argparse.Namespace) -> int:
    test, by_message = None, False
    problem = message_option_error(args)
    if problem is not None:
        print(f"streamdissect: {problem}", file=sys.stderr)
        return 2
    if args.display_filter is not None:
        try:
            test = compile_filter(args.display_filter, filter_fields(), filter_containers())
            by_message = names_messages(test, args.display_filter)
        except FilterError as exc:
            print(f"streamdissect: bad display filter: {exc}", file=sys.stderr)
            return 2
    args.by_message = by_message
    # (--messages: its writers apply -Y and -c to messages themselves)
    one_by_one = not args.messages and (test is not None or args.count is not None)
    if STDIN in args.captures or args.interface:  # (each frame out as soon as it is complete)
        sys.stdout.reconfigure(line_buffering=True)
    return with_sources(args, lambda paths, live, _: _frames(args, paths, live, test,
                                                             one_by_one))  # fmt: skip


def _frames(args: argparse.Namespace, paths: list, live: Any, test: Any,
            one_by_one: bool) -> int:  # fmt: skip
    bar = progress_bar(paths)
    # messages are read from records with all their bytes: Publish message lists, whole
    # Delivers (up to the frame limit), no hot frames as columns
    messages = args.verbose or args.messages or args.by_message
    dissector = Dissector(
        ports=port_map(args),
        heuristic=not args.no_heuristic,
        max_frame=args.max_frame,
        on_read=bar.update if bar else None,
        # Publish message lists are only printed with --payloads: not kept (nor copied) else.
        publish_messages=args.payloads or messages,
        helper_process=True,
        # the hot frames straight from the bulk engine's columns (run_lines, run_text; -Y
        # over them: run_mask), but for the payloads of the jsonl and the messages, which
        # only records have
        columns=False if (args.format == "jsonl" and args.payloads) or messages else "lines",
        **({"deliver_keep_limit": None} if messages else {}),
    )
    try:
        events = dissector.run(paths)
    except CaptureError as exc:
        return capture_error(exc, live)
    protocol_of = dissector.protocol_of.get  # (a connection's protocol, once it is known)

    def event_row(ev: Any) -> dict:
        if ev.__class__ is not FrameEvent:
            return anomaly_dict(ev)
        return frame_dict(ev, args.show_secrets, protocol=protocol_of(ev.connection))

    run = message_run(args, protocol_of)  # (the messages of every protocol's frames)
    if args.messages and args.format == "jsonl":
        write = message_lines_writer(sys.stdout, args, test, event_row, anomaly_dict, run)
    elif args.format == "jsonl":
        write = jsonl_writer(sys.stdout, args.show_secrets, args.payloads, protocol_of,
                             with_messages(args, run) if args.verbose else None)  # fmt: skip
    else:
        write = text_writer(sys.stdout, sys.stderr, args.show_secrets, protocol_of,
                            verbose_tree(args) if args.verbose else None,
                            message_text(args, test, event_row, run) if args.messages else None)
    if one_by_one:
        event_test = message_test(test, event_row, run) if args.by_message else None
        write = selecting(write, test, args.show_secrets, args.count, protocol_of, event_test)
    try:
        for event in events:
            if write(event) is False:
                if live is not None:
                    live.stop()
                break
        sys.stdout.flush()
    except BrokenPipeError:
        # `| head` closed our stdout: stop quietly, and keep the interpreter's final flush
        # from raising again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        if bar:
            bar.close()
    return 0


def frame_dict(event: FrameEvent, show_secrets: bool, payloads: bool = False,
               protocol: Protocol | None = None) -> dict[str, Any]:  # fmt: skip
    """A frame's jsonl object; `protocol`: its connection's (None: the Stream)."""
    record = event.record
    row: dict[str, Any] = {
        "ts_ns": event.ts_ns,
        "connection": event.connection,
        "direction": event.direction,
        "stream_offset": event.stream_offset,
    }
    if protocol is not None and protocol is not STREAM:
        row.update(protocol.frame_fields(record, show_secrets, payloads))
        return row
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
        if record.truncated and (cut := record.cut) is not None:
            fields["cut"] = dict(cut)
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


def jsonl_writer(out: TextIO, show_secrets: bool, payloads: bool,
                 protocol_of: Callable[[str], Protocol | None] = _stream,
                 extend: Callable[[dict, FrameEvent], dict] | None = None,
                 ) -> Callable[[Any], None]:  # fmt: skip
    """`protocol_of(connection)`: the protocol a frame's connection carries; `extend(row,
    event)` (-V): what a frame's row becomes."""
    hot = None if payloads or extend is not None else HotLines()

    def write(event: FrameEvent | Anomaly | HotFrames) -> None:
        if event.__class__ is HotFrames:
            out.write(run_lines(event))
            return
        if hot is not None and event.__class__ is FrameEvent:
            line = hot.line(event)
            if line is not None:
                out.write(line)
                return
        if isinstance(event, FrameEvent):
            protocol = protocol_of(event.connection)
            row = frame_dict(event, show_secrets, payloads, protocol)
            if extend is not None:
                row = extend(row, event)
        else:
            row = anomaly_dict(event)
        out.write(json.dumps(row, default=str) + "\n")

    def run(frames: HotFrames, rows: np.ndarray) -> None:
        """The frames `rows` of a run."""
        out.write(run_lines(frames if len(rows) == len(frames) else frames.take(rows)))

    write.run = run  # type: ignore[attr-defined]
    return write


class HotLines:
    """The jsonl lines of the hottest frames (Credit, Heartbeat, PublishConfirm, Publish,
    Deliver) written from a format per record class, without the dict and the json.dumps of
    each frame: the same bytes json.dumps(frame_dict(...)) writes (held equal by
    tests/test_frames_cli.py). A frame with any value that is not a plain int where one is
    meant (truncated, odd) returns None and goes the generic way."""

    CLASSES: ClassVar[dict[type, str]] = {
        record_class(name): name
        for name in ("Credit", "Heartbeat", "PublishConfirm", "Publish", "Deliver")
    }

    def __init__(self) -> None:
        self.connections: dict[str, str] = {}  # connection -> its JSON string

    def line(self, event: FrameEvent) -> str | None:
        record = event.record
        command = self.CLASSES.get(record.__class__)
        if command is None or record.truncated:
            return None
        ts, offset, key, version, size = (event.ts_ns, event.stream_offset, record.key,
                                          record.version, record.size)  # fmt: skip
        if not _ints(ts, offset, key, version, size):
            return None
        connection = self.connections.get(event.connection)
        if connection is None:
            connection = self.connections[event.connection] = json.dumps(event.connection)
        body = getattr(self, "_" + command)(record)
        if body is None:
            return None
        return (f'{{"ts_ns": {ts}, "connection": {connection}, "direction": "{event.direction}", '
                f'"stream_offset": {offset}, "key": {key}, "command": "{command}", '
                f'"response": false, "version": {version}, "size": {size}, '
                f'"correlation_id": null, "code": null, "code_name": null, "truncated": false'
                f"{body}}}\n")  # fmt: skip

    @staticmethod
    def _Credit(record: Any) -> str | None:
        sid, credit = record.subscription_id, record.credit
        return f', "subscription_id": {sid}, "credit": {credit}' if _ints(sid, credit) else None

    @staticmethod
    def _Heartbeat(record: Any) -> str:
        return ""

    @staticmethod
    def _PublishConfirm(record: Any) -> str | None:
        ids = _int_list(record.publishing_ids)
        if ids is None or not _ints(record.publisher_id):
            return None
        return f', "publisher_id": {record.publisher_id}, "publishing_ids": {ids}'

    @staticmethod
    def _Publish(record: Any) -> str | None:
        ids = _int_list(record.publishing_ids)
        if ids is None or not _ints(record.publisher_id, record.record_count):
            return None
        return (f', "publisher_id": {record.publisher_id}, "publishing_ids": {ids}, '
                f'"record_count": {record.record_count}')  # fmt: skip

    @staticmethod
    def _Deliver(record: Any) -> str | None:
        chunk, committed, crc = record.chunk, record.committed_chunk_id, record.crc_ok
        if chunk.__class__ is not dict or not _ints(*chunk.values()):
            return None
        if not _ints(record.subscription_id, record.record_count, record.entry_count):
            return None
        if committed is not None and not _ints(committed):
            return None
        header = ", ".join(f'"{name}": {value}' for name, value in chunk.items())
        committed_json = "null" if committed is None else committed
        crc_json = "null" if crc is None else "true" if crc else "false"
        return (f', "subscription_id": {record.subscription_id}, '
                f'"committed_chunk_id": {committed_json}, "chunk": {{{header}}}, '
                f'"record_count": {record.record_count}, "entry_count": {record.entry_count}, '
                f'"crc_ok": {crc_json}')  # fmt: skip


def _ints(*values: Any) -> bool:
    return all(v.__class__ is int for v in values)


def _int_list(ids: Any) -> str | None:
    """A JSON list of ints as json.dumps writes it, for a list of ints or a range."""
    if ids.__class__ is range or (ids.__class__ is list and _ints(*ids)):
        return "[" + ", ".join(map(str, ids)) + "]"
    return None


def text_writer(out: TextIO, err: TextIO, show_secrets: bool,
                protocol_of: Callable[[str], Protocol | None] = _stream,
                tree: Callable[[Any], tuple[str, str]] | None = None,
                message_lines: Callable[[Any], list[str]] | None = None,
                ) -> Callable[[Any], None]:  # fmt: skip
    """A line a frame; `protocol_of(connection)`: the protocol a frame's connection carries;
    `tree(record, protocol)` (-V): a record's line and what to write under it (its fields);
    `message_lines` (--messages): a frame's lines instead, one a message."""
    state = {"first_ns": None, "number": 0}

    def relative(ts_ns: int | None) -> float:
        if ts_ns is None:
            return 0.0
        if state["first_ns"] is None:
            state["first_ns"] = ts_ns
        return (ts_ns - state["first_ns"]) / 1e9

    def number(event: FrameEvent) -> None:
        """A frame counted (and the clock started), shown or not: numbers and times are the
        capture's, as tshark's are under a display filter."""
        relative(event.ts_ns)
        state["number"] += 1

    def write(event: FrameEvent | Anomaly | HotFrames) -> bool | None:
        if event.__class__ is HotFrames:
            run(event, np.arange(len(event)))
            return None
        seconds = relative(event.ts_ns)
        if isinstance(event, Anomaly):
            where = f"{event.connection} {event.direction}" if event.connection else "file"
            err.write(
                f"anomaly {seconds:.6f} {where} {event.kind} at {event.stream_offset}"
                f" len {event.length}: {event.detail}\n"
            )
            return None
        number(event)
        side = SIDE % (event.connection, ARROWS[event.direction])
        protocol = protocol_of(event.connection)
        stream = protocol is None or protocol is STREAM
        if message_lines is not None:
            out.writelines(LINE % (state["number"], seconds, side, text)
                           for text in message_lines(event))  # fmt: skip
            return not message_lines.done()  # type: ignore[attr-defined]
        if tree is not None:
            line, below = tree(event.record, None if stream else protocol)
            out.write(LINE % (state["number"], seconds, side, line))
            out.write(below)
            return None
        line = (summary(event.record, show_secrets) if stream
                else protocol.frame_line(event.record, show_secrets))  # fmt: skip
        out.write(LINE % (state["number"], seconds, side, line))
        return None

    def run(frames: HotFrames, rows: np.ndarray) -> None:
        """The frames `rows` of a run, every frame of it counted."""
        relative(int(frames.ts_ns[0]))
        out.write(run_text(frames, rows, state["number"] + 1, state["first_ns"]))
        state["number"] += len(frames)

    write.skip = number  # type: ignore[attr-defined]
    write.run = run  # type: ignore[attr-defined]
    return write
