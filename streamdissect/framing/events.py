"""A frame as the pipeline hands it on: its record with where and when it was found (the
engine makes them, engine.state; a protocol's frames table turns back into them)."""

from __future__ import annotations

from typing import Any

from streamdissect.slotted import Slotted


class FrameEvent(Slotted):
    """A frame's record with where and when it was found."""

    __slots__ = field_names = ("ts_ns", "connection", "direction", "stream_offset", "record")
    ts_ns: int  # capture time of the packet that completed the frame
    connection: str
    direction: str  # "c2s" or "s2c"
    stream_offset: int  # of the frame's size field in its direction's byte stream
    record: Any  # protocol Record, Malformed or Unknown

    def __init__(self, ts_ns: int, connection: str, direction: str, stream_offset: int,
                 record: Any) -> None:  # fmt: skip
        self.ts_ns = ts_ns
        self.connection = connection
        self.direction = direction
        self.stream_offset = stream_offset
        self.record = record
