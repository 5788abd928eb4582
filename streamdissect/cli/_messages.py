"""What `frames` shows of messages: the options (-V, --messages, --max-body, --no-bodies),
the tree under each text line (-V), one jsonl line a message (--messages), and `-Y` over
message fields. The protocol knowledge is each protocol's, through the seam
(Protocol.frame_view, Protocol.message_reader: protocols/base.py); a run's messages are
analysis/messages.py's MessageRun; this module wires them to the command line."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, TextIO

from streamdissect.analysis.messages import MessageRun
from streamdissect.cli._display_filter import FilterError, Leaf, Test
from streamdissect.engine.dissect import FrameEvent
from streamdissect.protocols import registry
from streamdissect.protocols.view import DEFAULT_MAX_BODY

MESSAGE = "message"  # the filter field whose names are a message's (message.properties.subject)


def add_message_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-V", "--verbose", action="store_true", dest="verbose",
        help="text: each frame as a tree of every field, with its messages (properties, "
        "bodies); jsonl: each frame's messages decoded",
    )  # fmt: skip
    parser.add_argument(
        "--messages", action="store_true",
        help="one line per message of the frames that carry messages (Publish, Deliver, "
        "a send, a pull's response), no line per frame",
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


def message_field_names() -> frozenset[str]:
    """What `-Y` may name after `message.`: every protocol's message fields."""
    return frozenset().union(*(p.message_fields for p in registry.PROTOCOLS))


def names_messages(test: Test | None, expression: str) -> bool:
    """Whether the filter names message fields; FilterError for a name no message has."""
    found = False
    known = message_field_names()
    for leaf in leaves(test) if test is not None else ():
        if leaf.path[0] != MESSAGE:
            continue
        found = True
        if len(leaf.path) > 1 and leaf.path[1] not in known:  # (bare: has one)
            name = ".".join(leaf.path)
            at = max(expression.find(name), 0)
            raise FilterError(expression, at, f"unknown message field {name!r} (message."
                              f"{{{', '.join(sorted(known))}}})")  # fmt: skip
    return found


def message_run(args: argparse.Namespace, protocol_of: Callable[[str], Any]) -> MessageRun:
    """The run's messages as the options ask (--max-body, --no-bodies)."""
    return MessageRun(args.max_body, not args.no_bodies, protocol_of)


def message_test(test: Test, frame_row: Callable[[Any], dict], run: MessageRun
                 ) -> Callable[[Any], bool]:  # fmt: skip
    """`test` over a frame event's row and each of its messages (`message.` names): a frame is
    selected when the filter holds for any of its messages (for one without messages, with
    none). Bodies are whole here: `contains` looks through all of a body."""

    def frame_test(event: Any) -> bool:
        row = frame_row(event)
        if event.__class__ is FrameEvent:
            reader = run.reader(event)
            messages = reader.messages(event)
            for message in messages:  # (one at a time: the first that holds is enough)
                if test(row | {MESSAGE: reader.fields(message, None)}):
                    return True
            if messages:
                return False
        return test(row | {MESSAGE: None})

    return frame_test


def verbose_tree(args: argparse.Namespace) -> Callable[..., tuple[str, str]]:
    """-V in text: a record's line and the tree under it (and a blank line after), as its
    connection's protocol (None: the default) shows it."""

    def tree(record: Any, protocol: Any = None) -> tuple[str, str]:
        line, below = (protocol or registry.protocol()).frame_view(
            record, args.show_secrets, args.max_body, not args.no_bodies)  # fmt: skip
        return line, below + "\n"

    return tree


def selected_messages(args: argparse.Namespace, test: Test | None,
                      frame_row: Callable[[Any], dict], run: MessageRun,
                      ) -> Callable[[Any], list[dict]]:  # fmt: skip
    """--messages: a frame event's message rows (MessageReader.row), those `test` selects
    when given (tested on the frame's fields and each message's, its body whole), up to -c
    of them in all (`select.done()`: the count is reached)."""
    left = [args.count]

    def select(event: Any) -> list[dict]:
        reader, messages = run.messages(event)
        frame = frame_row(event) if messages and test is not None else None
        found = [reader.row(event, m, run.frame) for m in messages
                 if frame is None or test(frame | {MESSAGE: reader.fields(m, None)})]
        if left[0] is not None:
            found = found[: left[0]]
            left[0] -= len(found)
        return found

    select.done = lambda: left[0] is not None and left[0] <= 0  # type: ignore[attr-defined]
    return select


def message_lines_writer(out: TextIO, args: argparse.Namespace, test: Test | None,
                         frame_row: Callable[[Any], dict], anomaly_row: Callable[[Any], dict],
                         run: MessageRun) -> Callable[[Any], None]:  # fmt: skip
    """--messages --format jsonl: one JSON object a message (anomalies inline, as in the
    frames jsonl); with -Y, the messages (and anomalies) the filter selects."""
    select = selected_messages(args, test, frame_row, run)

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


def message_text(args: argparse.Namespace, test: Test | None,
                 frame_row: Callable[[Any], dict], run: MessageRun,
                 ) -> Callable[[Any], list[str]]:  # fmt: skip
    """--messages in text: a frame event's message lines (MessageReader.line); `done()`: -c
    messages are written."""
    select = selected_messages(args, test, frame_row, run)

    def lines(event: Any) -> list[str]:
        rows = select(event)
        return [run.reader(event).line(row) for row in rows] if rows else []

    lines.done = select.done  # type: ignore[attr-defined]
    return lines


def with_messages(args: argparse.Namespace, run: MessageRun) -> Callable[[dict, Any], dict]:
    """-V in jsonl: a frame's line with its messages decoded (`decoded_messages`: each as
    --messages has it, without the frame's fields), for the frames that carry messages."""

    def add(row: dict, event: Any) -> dict:
        reader = run.reader(event)
        messages = reader.messages(event)
        if messages:
            row["decoded_messages"] = [reader.fields(m, args.max_body) for m in messages]
        return row

    return add
