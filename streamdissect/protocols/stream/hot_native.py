"""hot.decode by the compiled loop (_native.hot_decode), when it is loaded (native.loaded).

One pass over the block's hot frames reads each head once (the Python decode gathers each
column apart with numpy: a cache miss a frame and column for a block of 16 MiB). What it
reads comes from the protocol table: `plan` turns the layouts (layouts.py) into the offsets,
widths and signs the C code reads, and the columns each field goes to (hot.FIELD_COLUMNS,
hot.CHUNK_COLUMNS, hot.DELIVER_COLUMNS). The checks are hot.decode's, and so is the result
(a HotColumns equal to hot.decode's, held by the tests that run both walks); the Deliver
chunks' CRCs are computed here with zlib, over the ranges the C code gives.
"""

from __future__ import annotations

import zlib
from functools import cache
from types import ModuleType

import numpy as np

from streamdissect.protocols.stream import hot, layouts

NO_LIMIT = 1 << 62  # crc_limit None: every Deliver's CRC checked
_DTYPES = {**hot.FIELD_COLUMNS, **hot.CHUNK_COLUMNS}


def _four(layout: layouts.Layout, *names: str) -> list[int]:
    """The offsets of fields the C code reads as 4-byte big-endian words."""
    fields = layout.at()
    for name in names:
        if fields[name][1].size != 4:
            raise ValueError(f"the compiled decode reads {name} as 4 bytes")
    return [fields[name][0] for name in names]


@cache
def plan(whole_chunk: bool) -> tuple[np.ndarray, tuple[str, ...]]:
    """(the plan's int64 words, the column names in the order the C code numbers them)."""
    names = tuple({**hot.FIELD_COLUMNS, **(hot.CHUNK_COLUMNS if whole_chunk else {})})
    number = {name: i for i, name in enumerate(names)}

    def fields(layout: layouts.Layout, puts: list[tuple]) -> list[int]:
        """(column, layout field[, shift, or]) each -> the C code's field list."""
        at = layout.at()
        words = [len(puts)]
        for column, name, *how in puts:
            offset, wire_type = at[name]
            shift, combine = how or (0, 0)
            words += [number[column], offset, wire_type.size, int(wire_type.fmt.islower()),
                      shift, combine]  # fmt: skip
        return words

    credit_size = layouts.CREDIT.size - 4  # (hot.decode: a Credit of size 7)
    words = [hot.HEARTBEAT_KEY, hot.CREDIT_KEY, hot.CONFIRM_KEY, hot.PUBLISH_KEY,
             hot.DELIVER_KEY, credit_size, *_four(layouts.CONFIRM, "count"), hot.FIRST_ID,
             hot.CONFIRM_ID.itemsize, layouts.PUBLISH.size,
             *_four(layouts.PUBLISH, "count", "entry_word"), hot.MESSAGE.itemsize,
             layouts.MESSAGE.at()["publishing_id"][0], *_four(layouts.MESSAGE, "entry_word"),
             len(layouts.DELIVER)]  # fmt: skip
    lists = [
        fields(layouts.CREDIT, [("subscription_id", "subscription_id"), ("credit", "credit")]),
        fields(layouts.CONFIRM, [("publisher_id", "publisher_id")]),
        fields(layouts.PUBLISH, [("publisher_id", "publisher_id"), ("record_count", "count")]),
    ]  # fmt: skip
    for version, layout in layouts.DELIVER.items():
        at = layout.at()
        words += [version, layout.size, at["magic_version"][0], *at["num_entries"][0:1],
                  at["num_entries"][1].size, at["num_records"][0], at["num_records"][1].size,
                  *_four(layout, "data_length", "crc")]  # fmt: skip
        puts = [(column, name) for column, name in hot.DELIVER_COLUMNS.items()]
        if "committed_chunk_id" in at:
            puts.append(("committed_chunk_id", "committed_chunk_id"))
        if whole_chunk:
            puts += [(name, name) for name in hot.CHUNK_COLUMNS if name != "reserved"]
            puts += [("reserved", "reserved_high", 8, 0), ("reserved", "reserved_low", 0, 1)]
        lists.append(fields(layout, puts))
    for words_of_kind in lists:
        words += words_of_kind
    return np.array(words, dtype=np.int64), names


def decode(compiled: ModuleType, data: np.ndarray, starts: np.ndarray, crc_limit: int | None,
           crcs: dict[int, int] | None = None, whole_chunk: bool = False,
           messages: hot.MessagePositions | None = None) -> hot.HotColumns:  # fmt: skip
    """hot.decode (the same arguments and result) by `compiled` (_native)."""
    words, names = plan(whole_chunk)
    n = len(starts)
    values = {name: np.zeros(n, dtype=_DTYPES[name]) for name in names}
    valid = {name: np.zeros(n, dtype=bool) for name in names}
    key, version, size, id_counts = (np.empty(n, dtype=np.int64) for _ in range(4))
    id_starts = np.zeros(n, dtype=np.int64)
    accepted = np.zeros(n, dtype=bool)
    if messages is None:
        messages = hot.NO_MESSAGES
    counts = messages.counts
    firsts = np.cumsum(counts) - counts
    ids, checks = compiled.hot_decode(
        data, np.ascontiguousarray(starts, dtype=np.int64), words,
        [(values[name], valid[name]) for name in names], key, version, size, accepted,
        id_counts, id_starts, NO_LIMIT if crc_limit is None else crc_limit,
        messages.frames, counts, firsts, messages.where)  # fmt: skip
    crc = np.full(n, -1, dtype=np.int8)
    if checks:
        quads = np.frombuffer(checks, dtype=np.int64).reshape(-1, 4)
        crcs = crcs or {}
        mv = memoryview(data)
        computed = [crcs[row] if row in crcs else zlib.crc32(mv[a : a + length])
                    for row, a, length in quads[:, :3].tolist()]  # fmt: skip
        crc[quads[:, 0]] = np.asarray(computed, dtype=np.int64) == quads[:, 3]
    fields = {name: (values[name], valid[name]) for name in names}
    return hot.HotColumns(key, version, size, accepted, fields, id_counts, id_starts,
                          np.frombuffer(ids, dtype=np.uint64), crc)  # fmt: skip
