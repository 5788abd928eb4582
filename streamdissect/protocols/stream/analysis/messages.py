"""The messages table: one row a message of every Publish and Deliver (messages.MessageRows,
flattened by messages.table_row). Made only when asked for: it needs every frame as a record,
with Publish message lists and whole Delivers (analysis.driver.analyze(messages=True))."""

from __future__ import annotations

from typing import Any

from streamdissect.protocols.stream.messages import DEFAULT_MAX_BODY, MessageRows, table_row


class MessageCollector:
    def __init__(self, max_body: int | None = DEFAULT_MAX_BODY, bodies: bool = True) -> None:
        self.messages = MessageRows(max_body, bodies)
        self.rows: list[dict[str, Any]] = []

    def on_frame(self, ev: Any) -> None:
        """Every frame (counted, to number them as `frames` does); rows for its messages."""
        self.rows.extend(table_row(row) for row in self.messages.feed(ev))
