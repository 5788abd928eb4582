"""A frames table (schema.FRAMES) back into the events it was made of: the inverse of
batches.py, so that frames kept as Arrow (a rotated set's chains) are analysed by the same
collectors as a capture (analysis.driver.analyze_events).

    for event in frame_events(frames_arrow("capture.pcap")):   # HotFrames and FrameEvents
        ...

Consecutive hot frames (Publish, PublishConfirm, Credit, Heartbeat, Deliver) whose typed
columns hold every field the collectors read become one HotFrames, as the bulk engine hands
them on; every other frame (Malformed and Unknown ones included: their row has JSON in
`fields`) becomes a FrameEvent whose record is its row as a dict, the `fields` JSON spread in
and a Deliver's chunk header put back together. A frame whose time the table could not hold
(past int64: null) takes the time of the frame before it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import numpy as np

from streamdissect.framing.events import FrameEvent
from streamdissect.protocols.stream.frame_table import chunk_of_row
from streamdissect.protocols.stream.hot import (
    CONFIRM_KEY,
    CREDIT_KEY,
    DELIVER_KEY,
    FIELD_COLUMNS,
    HEARTBEAT_KEY,
    PUBLISH_KEY,
    HotFrames,
)
from streamdissect.protocols.stream.tables import FRAMES
from streamdissect.tables.columns import arrow_schema_of

# The typed columns each hot kind must have (an id as a u8: the wire's) to be taken as a
# hot frame; Heartbeat has none.
NEEDED = {
    PUBLISH_KEY: ("publisher_id", "publishing_ids"),
    CONFIRM_KEY: ("publisher_id", "publishing_ids"),
    CREDIT_KEY: ("subscription_id", "credit"),
    DELIVER_KEY: ("subscription_id", "record_count", "chunk_id", "chunk_timestamp_ms",
                  "num_entries", "chunk_type"),
    HEARTBEAT_KEY: (),
}  # fmt: skip
U8_COLUMNS = ("publisher_id", "subscription_id")


def frame_events(frames: Any) -> Iterator[FrameEvent | HotFrames]:
    """The events of a frames table (a pyarrow.Table or RecordBatches of schema.FRAMES), in
    its row order."""
    table = _table(frames)
    n = table.num_rows
    if not n:
        return
    columns = _Columns(table)
    hot = columns.hot()
    bounds = np.r_[0, np.flatnonzero(np.diff(hot.astype(np.int8))) + 1, n].tolist()
    rare = iter(columns.frame_events(np.flatnonzero(~hot)))
    for a, b in pairwise(bounds):
        if hot[a]:
            yield columns.hot_frames(a, b)
        else:
            yield from (next(rare) for _ in range(a, b))


class _Columns:
    """The table's columns as numpy arrays (nulls as 0, with their valid masks), once."""

    def __init__(self, table: Any) -> None:
        import pyarrow.compute as pc

        self.table = table
        encoded = pc.dictionary_encode(table["connection"]).combine_chunks()
        self.names = encoded.dictionary.to_pylist()
        self.connection = _ints(encoded.indices)
        s2c = _values(pc.equal(table["direction"], "s2c"), bool)
        self.direction = s2c.astype(np.int8)
        self.known_side = s2c | _values(pc.equal(table["direction"], "c2s"), bool)
        self.ts = _carried(_ints(table["ts_ns"]), _valid(table["ts_ns"]))
        self.stream_offset = _ints(table["stream_offset"])
        self.key = np.where(_valid(table["key"]), _ints(table["key"]), -1)
        self.version = _ints(table["version"])
        self.size = _ints(table["size"])
        self.fields = {name: (_values(table[name], dtype), _valid(table[name]))
                       for name, dtype in FIELD_COLUMNS.items()}  # fmt: skip
        ids = table["publishing_ids"].combine_chunks()
        offsets = ids.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        has_ids = _valid(ids)
        self.id_starts = offsets[:-1]
        self.id_counts = np.where(has_ids, np.diff(offsets), -1)
        self.id_values = _values(ids.values, np.uint64)
        crc_ok = table["crc_ok"]
        self.crc = np.where(_valid(crc_ok), _values(crc_ok, np.int8), -1).astype(np.int8)

    def hot(self) -> np.ndarray:
        """Which rows are hot frames with every field the collectors read."""
        valid = {name: ok for name, (_, ok) in self.fields.items()}
        valid["publishing_ids"] = self.id_counts >= 0
        for name in U8_COLUMNS:
            values, ok = self.fields[name]
            valid[name] = ok & (values >= 0) & (values < 256)
        hot = np.zeros(len(self.key), dtype=bool)
        for key, needed in NEEDED.items():
            mine = self.key == key
            for name in needed:
                mine &= valid[name]
            hot |= mine
        no_json = ~_valid(self.table["fields"])  # (Malformed and Unknown frames have JSON)
        connection = _valid(self.table["connection"])
        return hot & no_json & connection & self.known_side

    def hot_frames(self, a: int, b: int) -> HotFrames:
        """Rows a to b (all hot) as HotFrames: connections numbered within it."""
        numbers, connection = np.unique(self.connection[a:b], return_inverse=True)
        return HotFrames(
            self.ts[a:b], connection.astype(np.int64), [self.names[k] for k in numbers.tolist()],
            self.direction[a:b], self.stream_offset[a:b],
            self.key[a:b], self.version[a:b], self.size[a:b],
            {name: (values[a:b], ok[a:b]) for name, (values, ok) in self.fields.items()},
            self.id_counts[a:b], self.id_starts[a:b], self.id_values, self.crc[a:b],
        )  # fmt: skip

    def frame_events(self, rows: np.ndarray) -> list[FrameEvent]:
        """Rows as FrameEvents whose record is a dict of the row, its `fields` JSON spread
        in (the row's own columns first), a Deliver's chunk header (`chunk`) put back
        together."""
        import pyarrow as pa

        out = []
        times = self.ts[rows].tolist()
        for ts, row in zip(times, self.table.take(pa.array(rows, pa.int64())).to_pylist()):
            extra = row.pop("fields")
            record = {**json.loads(extra), **row} if extra else row
            chunk = chunk_of_row(record)
            if chunk is not None:
                record["chunk"] = chunk
            out.append(FrameEvent(ts, row["connection"], row["direction"], row["stream_offset"],
                                  record))  # fmt: skip
        return out


def _table(frames: Any) -> Any:
    import pyarrow as pa

    if not isinstance(frames, pa.Table):
        frames = pa.Table.from_batches(list(frames), schema=arrow_schema_of(FRAMES))
    return frames.select([c.name for c in FRAMES])


def _valid(column: Any) -> np.ndarray:
    import pyarrow.compute as pc

    return pc.is_valid(column).to_numpy(zero_copy_only=False)


def _values(column: Any, dtype: Any) -> np.ndarray:
    """The column as `dtype`, 0 where it is null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    filled = pc.fill_null(column, pa.scalar(False) if pa.types.is_boolean(column.type) else 0)
    return filled.to_numpy(zero_copy_only=False).astype(dtype)


def _ints(column: Any) -> np.ndarray:
    return _values(column, np.int64)


def _carried(ts: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Times, a null one replaced by the time before it (0 at the start)."""
    if not valid.all():
        last = np.maximum.accumulate(np.where(valid, np.arange(len(ts)), -1))
        ts = np.where(last >= 0, ts[np.maximum(last, 0)], 0)
    return ts
