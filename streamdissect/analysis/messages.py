"""The messages of a run, whatever protocol carries them: each frame event is counted (to
number frames as `frames` does, every protocol's together) and read by its connection's
protocol's MessageReader (protocols.base), one reader a protocol for the run. The messages
table (analyze(messages=True)) and the command line's `--messages`, `-V` and message
filters take their messages from here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamdissect.protocols import registry
from streamdissect.protocols.base import MessageReader, Protocol
from streamdissect.protocols.view import DEFAULT_MAX_BODY


class MessageRun:
    """`protocol_of(connection)`: the protocol a connection carries (None, or no function:
    the default protocol)."""

    def __init__(self, max_body: int | None = DEFAULT_MAX_BODY, bodies: bool = True,
                 protocol_of: Callable[[str], Protocol | None] | None = None) -> None:  # fmt: skip
        self.max_body, self.bodies = max_body, bodies
        self.protocol_of = protocol_of
        self.frame = 0  # frames counted so far (the last one's number)
        self.readers: dict[Protocol, MessageReader] = {}
        self.table: list[dict[str, Any]] = []  # on_frame's rows

    def reader(self, event: Any) -> MessageReader:
        """The reader of the event's protocol (made at its first frame)."""
        found = None if self.protocol_of is None else self.protocol_of(event.connection)
        protocol = found or registry.protocol()
        reader = self.readers.get(protocol)
        if reader is None:
            reader = self.readers[protocol] = protocol.message_reader(self.max_body, self.bodies)
        return reader

    def messages(self, event: Any) -> tuple[MessageReader, list]:
        """A frame event counted, its reader and its messages."""
        self.frame += 1
        reader = self.reader(event)
        return reader, reader.messages(event)

    def on_frame(self, event: Any) -> None:
        """Every frame event of the run, in order: its messages' rows in the table."""
        reader, messages = self.messages(event)
        self.table.extend(reader.table_row(reader.row(event, message, self.frame))
                          for message in messages)  # fmt: skip
