"""The frames jsonl dict of the frames of a HotFrames run (the bulk engine's hot frames as
columns), field by field as columns: what `-Y` compares and the text lines show of a run,
with no record and no dict. The fields are those run_lines writes (tests/test_frames_columns.py
holds the dicts these columns make equal to json.loads of its lines). A hot frame's line has
no field the columns do not carry, so a filter never needs a record for a run's frame; any
other name is a field the frame lacks (MISSING)."""

from __future__ import annotations

from typing import Any

import numpy as np

from streamdissect.cli._display_filter import MISSING, Test
from streamdissect.cli._filter_columns import (
    Category,
    Column,
    Constant,
    Integers,
    IntLists,
    outcome,
)
from streamdissect.protocols.stream import hot
from streamdissect.protocols.stream.hot import HotFrames

# The fields every hot frame has, as the HotFrames attributes holding them (or their one value)
COMMON_COLUMNS = ("ts_ns", "stream_offset", "version", "size")
CONSTANTS = {"response": False, "correlation_id": None, "code": None, "code_name": None,
             "truncated": False}  # fmt: skip
# Each command's own fields, in the order of its jsonl line: the field of HotFrames.fields
# holding each (None: publishing_ids, chunk and crc_ok, made of other columns).
BODIES: dict[int, dict[str, str | None]] = {
    hot.CREDIT_KEY: {"subscription_id": "subscription_id", "credit": "credit"},
    hot.HEARTBEAT_KEY: {},
    hot.CONFIRM_KEY: {"publisher_id": "publisher_id", "publishing_ids": None},
    hot.PUBLISH_KEY: {"publisher_id": "publisher_id", "publishing_ids": None,
                      "record_count": "record_count"},
    hot.DELIVER_KEY: {"subscription_id": "subscription_id",
                      "committed_chunk_id": "committed_chunk_id", "chunk": None,
                      "record_count": "record_count", "entry_count": "num_entries",
                      "crc_ok": None},
}  # fmt: skip
# A Deliver's chunk header as the record's dict has it (codec.CHUNK_FIELDS order), by the
# HotFrames field holding each.
CHUNK_HEADER = (("magic_version", "magic_version"), ("chunk_type", "chunk_type"),
                ("num_entries", "num_entries"), ("num_records", "record_count"),
                ("timestamp", "chunk_timestamp_ms"), ("epoch", "epoch"),
                ("chunk_id", "chunk_id"), ("crc", "crc"), ("data_length", "data_length"),
                ("trailer_length", "trailer_length"), ("bloom_size", "bloom_size"),
                ("reserved", "reserved"))  # fmt: skip
CHUNK_COLUMN = dict(CHUNK_HEADER)
# What `chunk` compares as: a dict of the header's names (a filter can ask whether it holds a
# name, or whether it is there at all; no comparison of a whole dict looks at its values)
CHUNK_KEYS = Constant(dict.fromkeys(CHUNK_COLUMN, 0))
CRC_OK = (None, False, True)  # by HotFrames.crc + 1


def column(run: HotFrames, rows: np.ndarray, key: int, path: tuple[str, ...]) -> Column:
    """The values of field `path` (a name, or chunk.NAME) of the frames `rows` of the run,
    all of command `key`."""
    name, body = path[0], BODIES[key]
    if len(path) > 1:
        inner = CHUNK_COLUMN.get(path[1]) if name == "chunk" and key == hot.DELIVER_KEY else None
        return Constant(MISSING) if inner is None or len(path) > 2 else Integers(
            run.fields[inner][0][rows])  # fmt: skip
    if name in COMMON_COLUMNS:
        return Integers(getattr(run, name)[rows])
    if name in CONSTANTS:
        return Constant(CONSTANTS[name])
    if name == "command":
        return Constant(hot.COMMAND_OF[key])
    if name == "key":
        return Constant(key)
    if name == "connection":
        return Category(run.connection[rows], run.connections)
    if name == "direction":
        return Category(run.direction[rows], hot.DIRECTIONS)
    if name not in body:
        return Constant(MISSING)
    if body[name] is not None:
        values, valid = run.fields[body[name]]
        return Integers(values[rows], None if valid[rows].all() else valid[rows])
    if name == "publishing_ids":
        frame_of, where = run.id_positions(rows)
        return IntLists(np.maximum(run.id_counts[rows], 0), frame_of, run.id_values[where])
    if name == "chunk":
        return CHUNK_KEYS
    return Category(run.crc[rows] + 1, CRC_OK)  # crc_ok


def run_mask(test: Test, run: HotFrames) -> np.ndarray:
    """Which frames of the run `test` selects, a comparison at a time over its columns."""
    groups = [(key, np.flatnonzero(run.key == key)) for key in np.unique(run.key).tolist()]

    def masks(leaf: Any) -> np.ndarray:
        out = np.empty(len(run), dtype=bool)
        for key, rows in groups:
            out[rows] = outcome(leaf, column(run, rows, key, leaf.path))
        return out

    return np.asarray(test.mask(masks), dtype=bool)
