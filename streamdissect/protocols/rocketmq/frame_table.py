"""RocketMQ's frames table (`rocketmq_frames`) from frame events: `frame_row` (a dict a
frame, the reference) and `FrameRows`, the builder tables.batches.frame_batches drives
(Protocol.frame_columns)."""

from __future__ import annotations

import json
from typing import Any

from streamdissect.protocols.rocketmq.records import Malformed
from streamdissect.protocols.rocketmq.summary import msg_ids
from streamdissect.protocols.rocketmq.tables import FIELD_COLUMNS, FRAMES, column_name
from streamdissect.tables.arrays import typed_array

_FIELD_NAMES = tuple((column_name(f), f) for f in FIELD_COLUMNS)


def frame_row(event: Any) -> dict[str, Any]:
    """One frame event as a row of the frames table."""
    r = event.record
    row: dict[str, Any] = {"ts_ns": event.ts_ns, "connection": event.connection,
                           "direction": event.direction, "stream_offset": event.stream_offset,
                           "size": r.size, "truncated": r.truncated}  # fmt: skip
    if isinstance(r, Malformed):
        row.update(code_name="Malformed", body_error=r.reason)
        return row
    row.update(serialize_type=r.serialize_name, code=r.code, code_name=r.code_name,
               response=r.response, oneway=r.oneway, opaque=r.opaque, flag=r.flag,
               request_code=r.request_code,
               language=None if r.language is None else str(r.language), version=r.version,
               remark=r.remark, body_length=len(r.body), body_error=r.body_error,
               message_count=None if r.messages is None else len(r.messages),
               msg_ids=",".join(msg_ids(r)) or None,
               fields_json=json.dumps(r.fields, ensure_ascii=False) if r.fields else None)
    for column, name in _FIELD_NAMES:
        row[column] = r.fields.get(name)
    return row


class FrameRows:
    """The frames table's builder: rows kept as they come, made into record batches."""

    def __init__(self, show_secrets: bool = False) -> None:
        self.kept: list[dict[str, Any]] = []

    @property
    def rows(self) -> int:
        return len(self.kept)

    def add(self, event: Any) -> None:
        self.kept.append(frame_row(event))

    def add_run(self, columns: Any) -> None:
        raise TypeError("RocketMQ has no fast path: its frames come as frame events")

    def batches(self, most: int) -> list:
        import pyarrow as pa

        out = []
        while self.kept:
            rows, self.kept = self.kept[:most], self.kept[most:]
            arrays = [typed_array([row.get(c.name) for row in rows], c.kind) for c in FRAMES]
            out.append(pa.RecordBatch.from_arrays(arrays, names=[c.name for c in FRAMES]))
        return out
