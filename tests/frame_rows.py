"""A dissection's frames as rows to compare: (connection, direction, stream offset, record
as JSON) each, its anomalies apart. The record path's rows are what the tests of worse
captures, hostile input and other ports hold every other output to."""

from __future__ import annotations

import json
from collections.abc import Iterable

from streamdissect.engine.dissect import Anomaly, FrameEvent

Row = tuple[str, str, int, str]


def frame_rows(events: Iterable[FrameEvent | Anomaly]) -> tuple[list[Row], list[Anomaly]]:
    frames, anomalies = [], []
    for event in events:
        if isinstance(event, FrameEvent):
            record = json.dumps(event.record.to_dict(), sort_keys=True, default=str)
            frames.append((event.connection, event.direction, event.stream_offset, record))
        else:
            anomalies.append(event)
    return frames, anomalies
