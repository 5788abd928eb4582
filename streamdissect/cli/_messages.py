"""What `frames` shows of messages: the options (-V, --messages, --max-body, --no-bodies),
the tree under each text line (-V), one jsonl line a message (--messages), and `-Y` over
message fields. The protocol knowledge is protocols/stream/verbose.py and messages.py; this
module wires them to the command line."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, TextIO

from streamdissect.cli._display_filter import FilterError, Leaf, Test
from streamdissect.engine.dissect import FrameEvent
from streamdissect.protocols.stream.messages import (
    DEFAULT_MAX_BODY,
    MESSAGE_FIELDS,
    MessageRows,
    frame_messages,
    message_fields,
)

MESSAGE = "message"  # the filter field whose names are a message's (message.properties.subject)


def add_message_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-V", "--verbose", action="store_true", dest="verbose",
        help="text: each frame as a tree of every field, with its messages' AMQP sections",
    )  # fmt: skip
    parser.add_argument(
        "--messages", action="store_true",
        help="jsonl: one line per message of Publish and Deliver frames (no line per frame)",
    )  # fmt: skip
    parser.add_argument(
        "--max-body", type=int, default=DEFAULT_MAX_BODY, metavar="N",
        help=f"bytes of a message body shown by -V and --messages (default {DEFAULT_MAX_BODY})",
    )  # fmt: skip
    parser.add_argument(
        "--no-bodies", action="store_true",
        help="leave message bodies out everywhere (-V, --messages, --payloads, -Y)",
    )  # fmt: skip


def message_option_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the message options together, or None."""
    if args.max_body < 0:
        return "--max-body takes a number of bytes, 0 or more"
    if args.payloads and args.no_bodies:
        return "--payloads prints message bytes, --no-bodies leaves them out: choose one"
    return None


def leaves(test: Test) -> list[Leaf]:
    """The comparisons of a compiled filter."""
    if isinstance(test, Leaf):
        return [test]
    parts = getattr(test, "parts", None) or (getattr(test, "inner", None),)
    return [leaf for part in parts if part is not None for leaf in leaves(part)]


def names_messages(test: Test | None, expression: str) -> bool:
    """Whether the filter names message fields; FilterError for a name a message lacks."""
    found = False
    for leaf in leaves(test) if test is not None else ():
        if leaf.path[0] != MESSAGE:
            continue
        found = True
        if len(leaf.path) > 1 and leaf.path[1] not in MESSAGE_FIELDS:  # (bare: has one)
            name = ".".join(leaf.path)
            at = max(expression.find(name), 0)
            raise FilterError(expression, at, f"unknown message field {name!r} (message."
                              f"{{{', '.join(sorted(MESSAGE_FIELDS))}}})")  # fmt: skip
    return found


def message_test(test: Test, frame_row: Callable[[Any], dict], bodies: bool
                 ) -> Callable[[Any], bool]:  # fmt: skip
    """`test` over a frame event's row and each of its messages (`message.` names): a frame is
    selected when the filter holds for any of its messages (for one without messages, with
    none). Bodies are whole here: `contains` looks through all of a body."""

    def frame_test(event: Any) -> bool:
        row = frame_row(event)
        if event.__class__ is FrameEvent:
            carried = False  # (the messages one at a time: the first that holds is enough)
            for message in frame_messages(event.record):
                carried = True
                if test(row | {MESSAGE: message_fields(message, None, bodies)}):
                    return True
            if carried:
                return False
        return test(row | {MESSAGE: None})

    return frame_test


def verbose_tree(args: argparse.Namespace) -> Callable[..., tuple[str, str]]:
    """-V in text: a record's line and the tree under it (and a blank line after); a frame
    of another protocol (`protocol`): its line and its jsonl fields as a tree (no bodies)."""
    from streamdissect.protocols.stream.verbose import fields_tree, frame_view

    def tree(record: Any, protocol: Any = None) -> tuple[str, str]:
        if protocol is not None:
            fields = protocol.frame_fields(record, args.show_secrets, False)
            return protocol.frame_line(record, args.show_secrets), fields_tree(fields) + "\n"
        line, below = frame_view(record, args.show_secrets, args.max_body, not args.no_bodies)
        return line, below + "\n"

    return tree


def selected_messages(args: argparse.Namespace, test: Test | None,
                      frame_row: Callable[[Any], dict]) -> Callable[[Any], list[dict]]:  # fmt: skip
    """--messages: a frame event's message rows (MessageRows), those `test` selects when
    given (tested on the frame's fields and each message's, its body whole), up to -c of
    them in all (`select.done()`: the count is reached)."""
    rows = MessageRows(args.max_body, not args.no_bodies)
    bodies = not args.no_bodies
    left = [args.count]

    def select(event: Any) -> list[dict]:
        messages = rows.messages(event)
        frame = frame_row(event) if messages and test is not None else None
        found = [rows.row(event, m) for m in messages
                 if frame is None or test(frame | {MESSAGE: message_fields(m, None, bodies)})]
        if left[0] is not None:
            found = found[: left[0]]
            left[0] -= len(found)
        return found

    select.done = lambda: left[0] is not None and left[0] <= 0  # type: ignore[attr-defined]
    return select


def message_lines_writer(out: TextIO, args: argparse.Namespace, test: Test | None,
                         frame_row: Callable[[Any], dict],
                         anomaly_row: Callable[[Any], dict]) -> Callable[[Any], None]:  # fmt: skip
    """--messages --format jsonl: one JSON object a message (anomalies inline, as in the
    frames jsonl); with -Y, the messages (and anomalies) the filter selects."""
    select = selected_messages(args, test, frame_row)

    def write(event: Any) -> bool:
        """Whether to go on (-c: not when its count of messages is written)."""
        if event.__class__ is not FrameEvent:
            row = anomaly_row(event)
            if test is None or test(row | {MESSAGE: None}):
                out.write(json.dumps(row, default=str) + "\n")
            return True
        for row in select(event):
            out.write(json.dumps(row, default=str, ensure_ascii=False) + "\n")
        return not select.done()  # type: ignore[attr-defined]

    return write


def message_summary(row: dict) -> str:
    """A message's text line (--messages in text): where it is, its size, the properties
    and application properties set, and its body as --messages has it."""
    place = (f"publishing_id={row['publishing_id']}" if row["command"] == "Publish"
             else f"offset={row['offset']}")  # fmt: skip
    parts = [f"{row['command']} message {row['index']} {place}"]
    if row["stream"] is not None:
        parts.append(f"stream={row['stream']}")
    if row["filter_value"] is not None:
        parts.append(f"filter_value={row['filter_value']}")
    if row["compression"] is not None:
        parts.append(f"compression={row['compression']}")
    parts.append(f"size={row['size']}")
    for name, value in (row["properties"] or {}).items():
        parts.append(f"{name}={json.dumps(value, ensure_ascii=False, default=str)}")
    if row["application_properties"] is not None:
        parts.append("application_properties=" + json.dumps(
            row["application_properties"], ensure_ascii=False, default=str))  # fmt: skip
    body = f"body={row['body_kind']}:{row['body_size']}"
    if "body" in row:
        body += " " + json.dumps(row["body"], ensure_ascii=False, default=str)
        if row["body_truncated"]:
            body += "..."
    parts.append(body)
    if row["error"] is not None:
        parts.append(f"[damaged: {row['error']}]")
    return " ".join(parts)


def message_text(args: argparse.Namespace, test: Test | None,
                 frame_row: Callable[[Any], dict]) -> Callable[[Any], list[str]]:  # fmt: skip
    """--messages in text: a frame event's message lines (message_summary); `done()`: -c
    messages are written."""
    select = selected_messages(args, test, frame_row)

    def lines(event: Any) -> list[str]:
        return [message_summary(row) for row in select(event)]

    lines.done = select.done  # type: ignore[attr-defined]
    return lines


def with_messages(args: argparse.Namespace) -> Callable[[dict, Any], dict]:
    """-V in jsonl: a frame's line with its messages decoded (`decoded_messages`: each as
    --messages has it, without the frame's fields), for Publish and Deliver frames."""
    bodies = not args.no_bodies

    def add(row: dict, event: Any) -> dict:
        messages = list(frame_messages(event.record))
        if messages:
            row["decoded_messages"] = [message_fields(m, args.max_body, bodies)
                                       for m in messages]  # fmt: skip
        return row

    return add
