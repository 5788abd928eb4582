"""A frame as the pipeline hands it on: its record with where and when it was found (the
engine makes them, engine.state; a protocol's frames table turns back into them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class FrameEvent:
    """A frame's record with where and when it was found."""

    ts_ns: int  # capture time of the packet that completed the frame
    connection: str
    direction: str  # "c2s" or "s2c"
    stream_offset: int  # of the frame's size field in its direction's byte stream
    record: Any  # protocol Record, Malformed or Unknown
