"""Hot frames as columns: what bulk traffic is made of, decoded for a whole walk at once.

The bulk engine's columns mode (DissectionState `columns=True`) walks one direction's
in-order bytes of a block as one contiguous buffer, notes where each hot frame starts
(Publish, PublishConfirm, Credit, Heartbeat, Deliver up to the lowest frame limit), and
hands the starts here: their fields are gathered with numpy and checked as the codec's field
parsers check them (codec.credit_fields, confirm_fields, deliver_fields; a v1 Publish of
simple entries of one size, as the bulk engine's Publish path reads it). A frame that fails
a check is `declined`: the engine decodes it as a record, which explains it. The columns
carry the names of schema.FRAMES.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from streamdissect.protocols.stream.spec import BY_KEY

PUBLISH_KEY, CONFIRM_KEY, DELIVER_KEY, CREDIT_KEY, HEARTBEAT_KEY = 0x02, 0x03, 0x08, 0x09, 0x17
HOT_KEYS = frozenset((PUBLISH_KEY, CONFIRM_KEY, DELIVER_KEY, CREDIT_KEY, HEARTBEAT_KEY))
COMMAND_OF = {key: BY_KEY[key].command for key in HOT_KEYS}
# Nullable integer columns a hot frame may fill: name -> numpy dtype.
FIELD_COLUMNS = {
    "publisher_id": np.int64, "subscription_id": np.int64, "record_count": np.int64,
    "credit": np.int64, "committed_chunk_id": np.uint64, "chunk_id": np.uint64,
    "chunk_timestamp_ms": np.int64, "num_entries": np.int64, "chunk_type": np.int64,
}  # fmt: skip
# The rest of a Deliver's chunk header, when asked for (the frames jsonl shows it whole).
CHUNK_COLUMNS = {
    "magic_version": np.int64, "epoch": np.uint64, "crc": np.int64, "data_length": np.int64,
    "trailer_length": np.int64, "bloom_size": np.int64, "reserved": np.int64,
}  # fmt: skip
HEAD_BYTES = 65  # a v2 Deliver's prefix and chunk header: the longest head read here
PAD = HEAD_BYTES  # zero bytes after a walk's buffer, so that every gather stays inside it


def head_layout(*fields: tuple, width: int = HEAD_BYTES) -> np.dtype:
    """A `width`-byte item (0: just the fields) read as these (name, numpy format) fields,
    one after the other."""
    names, formats, offsets, at = [], [], [], 0
    for name, fmt in fields:
        names.append(name)
        formats.append(fmt)
        offsets.append(at)
        at += np.dtype(fmt).itemsize
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": width or at})  # fmt: skip


FRAME_FIELDS = (("size", ">u4"), ("key", ">u2"), ("version", ">u2"))
CHUNK_LAYOUT = (("magic", "u1"), ("chunk_type", "u1"), ("entries", ">u2"), ("records", ">u4"),
          ("timestamp", ">i8"), ("epoch", ">u8"), ("chunk_id", ">u8"), ("crc", ">u4"),
          ("data_length", ">u4"), ("trailer_length", ">u4"), ("bloom_size", "u1"),
          ("reserved_high", ">u2"), ("reserved_low", "u1"))  # fmt: skip
# Each kind's head read as just its own bytes (a gather copies what it reads).
FRAME_HEAD = head_layout(*FRAME_FIELDS, width=0)
CREDIT_HEAD = head_layout(*FRAME_FIELDS, ("sid", "u1"), ("credit", ">i2"), width=0)
CONFIRM_HEAD = head_layout(*FRAME_FIELDS, ("publisher", "u1"), ("count", ">i4"), width=0)
PUBLISH_HEAD = head_layout(*FRAME_FIELDS, ("publisher", "u1"), ("count", ">i4"), ("id", ">u8"),
                           ("word", ">u4"), width=0)  # fmt: skip
DELIVER_HEADS = {  # version -> (bytes before the chunk data, layout)
    1: (57, head_layout(*FRAME_FIELDS, ("sid", "u1"), *CHUNK_LAYOUT, width=0)),
    2: (65, head_layout(*FRAME_FIELDS, ("sid", "u1"), ("committed", ">u8"), *CHUNK_LAYOUT, width=0)),
}
_U64 = np.dtype(">u8")


@dataclass(slots=True)
class HotColumns:
    """Columns of n hot frames: `accepted` (else declined: the record path takes it), the
    nullable fields (values, valid), the publishing ids of Publish and PublishConfirm as
    per-frame counts (-1: none) and starts in the pool `id_values` (frame i's are
    id_values[id_starts[i] : id_starts[i] + id_counts[i]]), and crc_ok (-1 none, 0, 1)."""

    key: np.ndarray
    version: np.ndarray
    size: np.ndarray
    accepted: np.ndarray
    fields: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    id_counts: np.ndarray | None = None
    id_starts: np.ndarray | None = None
    id_values: np.ndarray | None = None
    crc: np.ndarray | None = None


def sliding(data: np.ndarray, width: int) -> np.ndarray:
    """`data` (uint8, padded) as `width`-byte items starting at every byte: indexing it with
    positions copies whole items, one memcpy each."""
    items = np.ndarray(shape=(len(data) - width + 1,), dtype=np.dtype(f"V{width}"),
                       buffer=data, offset=0, strides=(1,))  # fmt: skip
    items.flags.writeable = False
    return items


def decode(data: np.ndarray, starts: np.ndarray, crc_limit: int | None,
           crcs: dict[int, int] | None = None, whole_chunk: bool = False,
           messages: dict[int, np.ndarray] | None = None) -> HotColumns:  # fmt: skip
    """Fields of the hot frames starting at `starts` in `data` (at least PAD bytes after
    each). Every frame is whole there, but a Deliver in `crcs` (frame number -> CRC-32 of its
    chunk data, computed where its bytes are), of which only the head is needed.
    `crc_limit`: Deliver frames up to this size have their chunk's CRC checked (None: all),
    as the framer keeps their data. `whole_chunk`: the CHUNK_COLUMNS too. `messages`: frame
    number -> where in `data` the (id, entry word) of each message of a Publish are, of
    which only the head is whole at its start."""
    n = len(starts)
    windows: dict[int, np.ndarray] = {}

    def heads(rows: np.ndarray, layout: np.dtype) -> np.ndarray:
        """The heads of frames `rows` as `layout` (its bytes from each frame's start)."""
        width = layout.itemsize
        if width not in windows:
            windows[width] = sliding(data, width)
        return windows[width][starts[rows]].view(layout)

    head = sliding(data, FRAME_HEAD.itemsize)[starts].view(FRAME_HEAD)
    key = head["key"].astype(np.int64)
    version = head["version"].astype(np.int64)
    size = head["size"].astype(np.int64)
    out = HotColumns(key, version, size, np.zeros(n, dtype=bool))
    names = {**FIELD_COLUMNS, **(CHUNK_COLUMNS if whole_chunk else {})}
    values = {name: np.zeros(n, dtype=dtype) for name, dtype in names.items()}
    valid = {name: np.zeros(n, dtype=bool) for name in names}
    id_counts = np.full(n, -1, dtype=np.int64)
    id_starts = np.zeros(n, dtype=np.int64)
    crc = np.full(n, -1, dtype=np.int8)
    id_parts: list[tuple[np.ndarray, np.ndarray]] = []  # (frame numbers, their ids)

    def put(name: str, rows: np.ndarray, column: np.ndarray) -> None:
        values[name][rows] = column
        valid[name][rows] = True

    ones = version == 1
    # Heartbeat: nothing but its header.
    out.accepted |= (key == HEARTBEAT_KEY) & ones & (size == 4)
    # Credit
    rows = np.flatnonzero((key == CREDIT_KEY) & ones & (size == 7))
    if len(rows):
        h = heads(rows, CREDIT_HEAD)
        put("subscription_id", rows, h["sid"])
        put("credit", rows, h["credit"])
        out.accepted[rows] = True
    # PublishConfirm
    rows = np.flatnonzero((key == CONFIRM_KEY) & ones)
    if len(rows):
        h = heads(rows, CONFIRM_HEAD)
        count = h["count"].astype(np.int64)
        ok = (count >= 0) & (9 + 8 * count == size[rows])
        rows, h, count = rows[ok], h[ok], count[ok]
        if len(rows):
            ids = sliding(data, 8)[positions(starts[rows] + 13, count, 8)].view(_U64)
            put("publisher_id", rows, h["publisher"])
            id_counts[rows] = count
            id_parts.append((rows, ids.astype(np.uint64)))
            out.accepted[rows] = True
    # Publish v1, simple entries of one size (what clients send one message at a time)
    rows = np.flatnonzero((key == PUBLISH_KEY) & ones & (size + 4 >= 25))
    if len(rows):
        h = heads(rows, PUBLISH_HEAD)
        count, word = h["count"].astype(np.int64), h["word"].astype(np.int64)
        stride = 12 + word
        ok = (count > 0) & (word < 0x80000000) & (13 + count * stride == 4 + size[rows])
        rows, count, stride, publisher = rows[ok], count[ok], stride[ok], h["publisher"][ok]
        if len(rows):
            where = positions(starts[rows] + 13, count, stride)
            if messages:  # (frames whose messages are elsewhere: their positions)
                first = np.cumsum(count) - count
                for row, at in messages.items():
                    j = int(np.searchsorted(rows, row))
                    if j < len(rows) and rows[j] == row and len(at) == count[j]:
                        where[first[j] : first[j] + count[j]] = at
            message = sliding(data, 12)[where].view([("id", ">u8"), ("word", ">u4")])
            frame_of = np.repeat(np.arange(len(rows)), count)
            bad = message["word"].astype(np.int64) + 12 != stride[frame_of]
            good = np.ones(len(rows), dtype=bool)
            good[frame_of[bad]] = False
            keep = good[frame_of]
            rows, count = rows[good], count[good]
            put("publisher_id", rows, publisher[good])
            put("record_count", rows, count)
            id_counts[rows] = count
            id_parts.append((rows, message["id"][keep].astype(np.uint64)))
            out.accepted[rows] = True
    # Deliver v1 and v2, whole (the walk only takes frames that are)
    for v, (need, layout) in DELIVER_HEADS.items():
        rows = np.flatnonzero((key == DELIVER_KEY) & (version == v) & (size + 4 >= need))
        if not len(rows):
            continue
        h = heads(rows, layout)
        entries = h["entries"].astype(np.int64)
        data_length = h["data_length"].astype(np.int64)
        ok = ((h["magic"] >> 4 == 5) & (entries * 4 <= data_length)
              & (h["records"] <= entries * 0xFFFF) & (4 + size[rows] - need >= data_length))  # fmt: skip
        rows, h, data_length = rows[ok], h[ok], data_length[ok]
        if not len(rows):
            continue
        put("subscription_id", rows, h["sid"])
        if v == 2:
            put("committed_chunk_id", rows, h["committed"])
        put("chunk_id", rows, h["chunk_id"])
        put("chunk_timestamp_ms", rows, h["timestamp"])
        put("num_entries", rows, h["entries"])
        put("chunk_type", rows, h["chunk_type"])
        put("record_count", rows, h["records"])
        if whole_chunk:
            for name, part in (("magic_version", "magic"), ("epoch", "epoch"), ("crc", "crc"),
                               ("data_length", "data_length"), ("bloom_size", "bloom_size"),
                               ("trailer_length", "trailer_length")):  # fmt: skip
                put(name, rows, h[part])
            put("reserved", rows,
                (h["reserved_high"].astype(np.int64) << 8) | h["reserved_low"])  # fmt: skip
        checked = np.ones(len(rows), dtype=bool) if crc_limit is None else (
            size[rows] <= crc_limit)  # fmt: skip
        if checked.any():
            mine = np.flatnonzero(checked)
            mv = memoryview(data)
            known = crcs or {}
            computed = [
                known[row] if row in known else zlib.crc32(mv[a : a + length])
                for row, a, length in zip(rows[mine].tolist(), (starts[rows[mine]] + need).tolist(),
                                          data_length[mine].tolist())
            ]  # fmt: skip
            crc[rows[mine]] = np.asarray(computed, dtype=np.int64) == h["crc"][mine]
        out.accepted[rows] = True
    out.fields = {name: (values[name], valid[name]) for name in names}
    # the ids of each kind, one after the other, in one pool
    base = 0
    for rows, ids in id_parts:
        counts = id_counts[rows]
        id_starts[rows] = base + np.cumsum(counts) - counts
        base += len(ids)
    out.id_counts, out.id_starts = id_counts, id_starts
    out.id_values = (np.concatenate([ids for _, ids in id_parts]) if id_parts
                     else np.zeros(0, dtype=np.uint64))  # fmt: skip
    out.crc = crc
    return out


def positions(firsts: np.ndarray, counts: np.ndarray, strides: np.ndarray | int) -> np.ndarray:
    """Positions of `counts[i]` items `strides[i]` apart from `firsts[i]`, all frames in a
    row."""
    total = int(counts.sum())
    frame_of = np.repeat(np.arange(len(counts)), counts)
    index = np.arange(total, dtype=np.int64) - (np.cumsum(counts) - counts)[frame_of]
    step = strides if isinstance(strides, int) else strides[frame_of]
    return firsts[frame_of] + index * step


DIRECTIONS = ("c2s", "s2c")


@dataclass(slots=True)
class HotFrames:
    """Consecutive frames of a block with no other event between them, all hot and
    well-formed, as columns (one row per frame, in the streaming engine's order): ts_ns,
    stream_offset, key, version, size; `connection` numbers into `connections`, `direction`
    into DIRECTIONS; the nullable fields (values, valid) of FIELD_COLUMNS; the publishing ids
    of frame i are id_values[id_starts[i] : id_starts[i] + id_counts[i]] when id_counts[i]
    >= 0 (a pool in no particular order); crc: -1 not checked, 0 bad, 1 good."""

    ts_ns: np.ndarray
    connection: np.ndarray
    connections: list[str]
    direction: np.ndarray
    stream_offset: np.ndarray
    key: np.ndarray
    version: np.ndarray
    size: np.ndarray
    fields: dict[str, tuple[np.ndarray, np.ndarray]]
    id_counts: np.ndarray
    id_starts: np.ndarray
    id_values: np.ndarray
    crc: np.ndarray

    def __len__(self) -> int:
        return len(self.ts_ns)

    def ids(self, i: int) -> list[int] | None:
        """Frame i's publishing ids (None: it has none)."""
        count = int(self.id_counts[i])
        if count < 0:
            return None
        start = int(self.id_starts[i])
        return self.id_values[start : start + count].tolist()

    def slice(self, a: int, b: int) -> HotFrames:
        """Frames a to b of the run (views), as a HotFrames."""
        return _slice(self, a, b)

    def id_positions(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(for each id of the frames `rows`, in order: the number of its frame in `rows`,
        its place in id_values)."""
        counts = np.maximum(self.id_counts[rows], 0)
        frame_of = np.repeat(np.arange(len(rows)), counts)
        return frame_of, positions(self.id_starts[rows], counts, 1)


@dataclass(slots=True)
class HotChunk:
    """The accepted hot frames of one walk (one connection and direction of a block), with
    the (row, slot) that place them among the block's events."""

    row: np.ndarray
    slot: np.ndarray
    ts_ns: np.ndarray
    stream_offset: np.ndarray
    connection: str
    direction: int
    columns: HotColumns


def chunk(columns: HotColumns, a: int, keep: np.ndarray, row: np.ndarray, slot: np.ndarray,
          ts_ns: np.ndarray, stream_offset: np.ndarray, connection: str,
          direction: str) -> HotChunk:  # fmt: skip
    """The frames a, a + 1, ... of `columns` where `keep` (one flag each) holds, as a
    HotChunk (`row`, `slot`, `ts_ns`, `stream_offset`: theirs)."""
    c = _frames(columns, a, a + len(keep))
    if not keep.all():
        c = HotColumns(
            c.key[keep], c.version[keep], c.size[keep], c.accepted[keep],
            {name: (v[keep], ok[keep]) for name, (v, ok) in c.fields.items()},
            c.id_counts[keep], c.id_starts[keep], c.id_values, c.crc[keep],
        )  # fmt: skip
    return HotChunk(row, slot, ts_ns, stream_offset, connection, DIRECTIONS.index(direction), c)


def _frames(c: HotColumns, a: int, b: int) -> HotColumns:
    """Frames a to b of the columns (views; the ids of those frames)."""
    if a == 0 and b == len(c.key):
        return c
    return HotColumns(
        c.key[a:b], c.version[a:b], c.size[a:b], c.accepted[a:b],
        {name: (v[a:b], ok[a:b]) for name, (v, ok) in c.fields.items()},
        c.id_counts[a:b], c.id_starts[a:b], c.id_values, c.crc[a:b],
    )  # fmt: skip


def place(chunks: list[HotChunk], events: list[tuple], cut_by: type | None) -> list:
    """The block's events ((row, slot, event), sorted) and hot chunks merged in order: the
    events, with a HotFrames for the hot frames between two of them. With `cut_by` (the frame
    event class), an event of another kind (an anomaly) does not cut a run: it comes right
    after the run it falls in."""
    names: dict[str, int] = {}
    conn_parts, dir_parts = [], []
    for c in chunks:
        number = names.setdefault(c.connection, len(names))
        conn_parts.append(np.full(len(c.row), number, dtype=np.int64))
        dir_parts.append(np.full(len(c.row), c.direction, dtype=np.int8))
    row = np.concatenate([c.row for c in chunks])
    slot = np.concatenate([c.slot for c in chunks])
    order_key = (row.astype(np.int64) << 40) + (slot.astype(np.int64) << 10)
    order = np.argsort(order_key, kind="stable")
    cols = [c.columns for c in chunks]
    # the chunks' id pools (one, when they come from one block's decode) as one
    pools: dict[int, tuple[int, np.ndarray]] = {}
    for c in cols:
        if id(c.id_values) not in pools:
            pools[id(c.id_values)] = (sum(len(p) for _, p in pools.values()), c.id_values)
    id_values = (next(iter(pools.values()))[1] if len(pools) == 1
                 else np.concatenate([p for _, p in pools.values()]))  # fmt: skip
    id_starts = np.concatenate([c.id_starts + pools[id(c.id_values)][0] for c in cols])[order]

    def joined(parts: list) -> np.ndarray:
        return np.concatenate(parts)[order]

    every = HotFrames(
        joined([c.ts_ns for c in chunks]), joined(conn_parts), list(names), joined(dir_parts),
        joined([c.stream_offset for c in chunks]), joined([c.key for c in cols]),
        joined([c.version for c in cols]), joined([c.size for c in cols]),
        {name: (joined([c.fields[name][0] for c in cols]),
                joined([c.fields[name][1] for c in cols])) for name in cols[0].fields},
        joined([c.id_counts for c in cols]), id_starts, id_values, joined([c.crc for c in cols]),
    )  # fmt: skip
    keys = order_key[order]
    event_keys = np.fromiter(((r << 40) + int(s * 1024) for r, s, _ in events), np.int64,
                             len(events))  # fmt: skip
    before = np.searchsorted(keys, event_keys).tolist()
    out: list = []
    waiting: list = []  # other events inside the current run
    at = 0
    for (_, _, event), upto in zip(events, before):
        if cut_by is not None and event.__class__ is not cut_by:
            waiting.append(event)
            continue
        if upto > at:
            out.append(_slice(every, at, upto))
            at = upto
        out += waiting
        waiting.clear()
        out.append(event)
    if at < len(keys):
        out.append(_slice(every, at, len(keys)))
    return out + waiting


def _slice(run: HotFrames, a: int, b: int) -> HotFrames:
    if a == 0 and b == len(run):
        return run
    return HotFrames(
        run.ts_ns[a:b], run.connection[a:b], run.connections, run.direction[a:b],
        run.stream_offset[a:b], run.key[a:b], run.version[a:b], run.size[a:b],
        {name: (v[a:b], ok[a:b]) for name, (v, ok) in run.fields.items()},
        run.id_counts[a:b], run.id_starts[a:b], run.id_values, run.crc[a:b],
    )  # fmt: skip
