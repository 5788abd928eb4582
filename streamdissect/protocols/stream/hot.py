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
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from streamdissect.capture import blocks
from streamdissect.protocols.stream import layouts
from streamdissect.protocols.stream.spec import BY_KEY, message_spec
from streamdissect.slotted import Slotted, Unequal

PUBLISH_KEY, CONFIRM_KEY, DELIVER_KEY, CREDIT_KEY, HEARTBEAT_KEY = (
    message_spec(command).key
    for command in ("Publish", "PublishConfirm", "Deliver", "Credit", "Heartbeat"))  # fmt: skip
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
HEAD_BYTES = layouts.HEAD_BYTES  # a v2 Deliver's prefix and chunk header: the longest head
PAD = HEAD_BYTES  # zero bytes after a walk's buffer, so that every gather stays inside it
# Each kind's head read as just its own bytes (a gather copies what it reads), as the table
# lays it out (layouts); a Deliver's: (bytes before its chunk data, layout) per version
FRAME_HEAD = layouts.FRAME.dtype()
CREDIT_HEAD = layouts.CREDIT.dtype()
CONFIRM_HEAD = layouts.CONFIRM.dtype()
PUBLISH_HEAD = layouts.PUBLISH.dtype()
DELIVER_HEADS = {version: (layout.size, layout.dtype())
                 for version, layout in layouts.DELIVER.items()}  # fmt: skip
MESSAGE = layouts.MESSAGE.dtype()  # a v1 Publish message's publishing id and entry word
CONFIRM_ID = np.dtype(">" + layouts.CONFIRM_ID.fmt)
FIRST_ID = layouts.CONFIRM.size  # where a PublishConfirm's ids (a Publish's messages) start
# The Deliver columns read from the chunk header as they are: column -> header field
DELIVER_COLUMNS = {"subscription_id": "subscription_id", "chunk_id": "chunk_id",
                   "chunk_timestamp_ms": "timestamp", "num_entries": "num_entries",
                   "chunk_type": "chunk_type", "record_count": "num_records"}  # fmt: skip


class HotColumns(Slotted):
    """Columns of n hot frames: `accepted` (else declined: the record path takes it), the
    nullable fields (values, valid), the publishing ids of Publish and PublishConfirm as
    per-frame counts (-1: none) and starts in the pool `id_values` (frame i's are
    id_values[id_starts[i] : id_starts[i] + id_counts[i]]), and crc_ok (-1 none, 0, 1)."""

    __slots__ = field_names = ("key", "version", "size", "accepted", "fields", "id_counts",
                               "id_starts", "id_values", "crc")  # fmt: skip

    def __init__(self, key: np.ndarray, version: np.ndarray, size: np.ndarray,
                 accepted: np.ndarray, fields: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
                 id_counts: np.ndarray | None = None, id_starts: np.ndarray | None = None,
                 id_values: np.ndarray | None = None, crc: np.ndarray | None = None) -> None:  # fmt: skip
        self.key, self.version, self.size, self.accepted = key, version, size, accepted
        self.fields = {} if fields is None else fields
        self.id_counts, self.id_starts, self.id_values, self.crc = id_counts, id_starts, id_values, crc


def sliding(data: np.ndarray, width: int) -> np.ndarray:
    """`data` (uint8, padded) as `width`-byte items starting at every byte: indexing it with
    positions copies whole items, one memcpy each (capture.blocks.sliding)."""
    return blocks.sliding(data, 0, len(data), width)


def decode(data: np.ndarray, starts: np.ndarray, crc_limit: int | None,
           crcs: dict[int, int] | None = None, whole_chunk: bool = False,
           messages: MessagePositions | None = None) -> HotColumns:  # fmt: skip
    """Fields of the hot frames starting at `starts` in `data` (at least PAD bytes after
    each). Every frame is whole there, but a Deliver in `crcs` (frame number -> CRC-32 of its
    chunk data, computed where its bytes are), of which only the head is needed.
    `crc_limit`: Deliver frames up to this size have their chunk's CRC checked (None: all),
    as the framer keeps their data. `whole_chunk`: the CHUNK_COLUMNS too. `messages`: where
    in `data` the (id, entry word) of each message of some Publish frames are, of which only
    the head is whole at its start."""
    g = _Gathered.of(data, starts, whole_chunk)
    ones = g.version == 1
    # Heartbeat: nothing but its header.
    g.accepted |= (g.key == HEARTBEAT_KEY) & ones & (g.size == 4)
    _credits(g, np.flatnonzero((g.key == CREDIT_KEY) & ones & (g.size == 7)))
    _confirms(g, np.flatnonzero((g.key == CONFIRM_KEY) & ones))
    _publishes(g, np.flatnonzero((g.key == PUBLISH_KEY) & ones
                                 & (g.size + 4 >= PUBLISH_HEAD.itemsize)), messages)  # fmt: skip
    for version, (need, layout) in DELIVER_HEADS.items():
        rows = np.flatnonzero((g.key == DELIVER_KEY) & (g.version == version)
                              & (g.size + 4 >= need))  # fmt: skip
        if len(rows):
            _delivers(g, rows, layout, crc_limit, crcs or {})
    return g.columns()


class _Gathered(Unequal):
    """decode's work: the frames' bytes and starts, their headers, and the columns the
    readers of each kind fill."""

    __slots__ = field_names = ("data", "starts", "key", "version", "size", "accepted", "values",
                               "valid", "id_counts", "id_parts", "crc", "windows", "whole_chunk")

    def __init__(self, data: np.ndarray, starts: np.ndarray, key: np.ndarray,
                 version: np.ndarray, size: np.ndarray, accepted: np.ndarray,
                 values: dict[str, np.ndarray], valid: dict[str, np.ndarray],
                 id_counts: np.ndarray, id_parts: list, crc: np.ndarray, windows: dict,
                 whole_chunk: bool) -> None:  # fmt: skip
        """`id_parts`: (frame numbers, their ids) of each kind; `windows`: width -> the data
        as items of that width (sliding)."""
        self.data, self.starts, self.key, self.version, self.size = data, starts, key, version, size
        self.accepted, self.values, self.valid = accepted, values, valid
        self.id_counts, self.id_parts, self.crc = id_counts, id_parts, crc
        self.windows, self.whole_chunk = windows, whole_chunk

    @classmethod
    def of(cls, data: np.ndarray, starts: np.ndarray, whole_chunk: bool) -> _Gathered:
        n = len(starts)
        head = sliding(data, FRAME_HEAD.itemsize)[starts].view(FRAME_HEAD)
        names = {**FIELD_COLUMNS, **(CHUNK_COLUMNS if whole_chunk else {})}
        return cls(data, starts, head["key"].astype(np.int64), head["version"].astype(np.int64),
                   head["size"].astype(np.int64), np.zeros(n, dtype=bool),
                   {name: np.zeros(n, dtype=dtype) for name, dtype in names.items()},
                   {name: np.zeros(n, dtype=bool) for name in names},
                   np.full(n, -1, dtype=np.int64), [], np.full(n, -1, dtype=np.int8), {},
                   whole_chunk)  # fmt: skip

    def heads(self, rows: np.ndarray, layout: np.dtype) -> np.ndarray:
        """The heads of frames `rows` as `layout` (its bytes from each frame's start)."""
        return self.items(layout.itemsize)[self.starts[rows]].view(layout)

    def items(self, width: int) -> np.ndarray:
        if width not in self.windows:
            self.windows[width] = sliding(self.data, width)
        return self.windows[width]

    def put(self, name: str, rows: np.ndarray, column: np.ndarray) -> None:
        self.values[name][rows] = column
        self.valid[name][rows] = True

    def columns(self) -> HotColumns:
        """The columns, the ids of each kind one after the other in one pool."""
        id_starts = np.zeros(len(self.starts), dtype=np.int64)
        base = 0
        for rows, ids in self.id_parts:
            counts = self.id_counts[rows]
            id_starts[rows] = base + np.cumsum(counts) - counts
            base += len(ids)
        id_values = (np.concatenate([ids for _, ids in self.id_parts]) if self.id_parts
                     else np.zeros(0, dtype=np.uint64))  # fmt: skip
        fields = {name: (self.values[name], self.valid[name]) for name in self.values}
        return HotColumns(self.key, self.version, self.size, self.accepted, fields,
                          self.id_counts, id_starts, id_values, self.crc)  # fmt: skip


def _credits(g: _Gathered, rows: np.ndarray) -> None:
    if len(rows):
        h = g.heads(rows, CREDIT_HEAD)
        g.put("subscription_id", rows, h["subscription_id"])
        g.put("credit", rows, h["credit"])
        g.accepted[rows] = True


def _confirms(g: _Gathered, rows: np.ndarray) -> None:
    if not len(rows):
        return
    h = g.heads(rows, CONFIRM_HEAD)
    count = h["count"].astype(np.int64)
    ok = (count >= 0) & (FIRST_ID + CONFIRM_ID.itemsize * count == g.size[rows] + 4)
    rows, h, count = rows[ok], h[ok], count[ok]
    if len(rows):
        where = positions(g.starts[rows] + FIRST_ID, count, CONFIRM_ID.itemsize)
        ids = g.items(CONFIRM_ID.itemsize)[where].view(CONFIRM_ID)
        g.put("publisher_id", rows, h["publisher_id"])
        g.id_counts[rows] = count
        g.id_parts.append((rows, ids.astype(np.uint64)))
        g.accepted[rows] = True


def _publishes(g: _Gathered, rows: np.ndarray, messages: MessagePositions | None) -> None:
    """Publish v1, simple entries of one size (what clients send one message at a time)."""
    if not len(rows):
        return
    h = g.heads(rows, PUBLISH_HEAD)
    count, word = h["count"].astype(np.int64), h["entry_word"].astype(np.int64)
    stride = MESSAGE.itemsize + word
    ok = (count > 0) & (word < 0x80000000) & (FIRST_ID + count * stride == 4 + g.size[rows])
    rows, count, stride, publisher = rows[ok], count[ok], stride[ok], h["publisher_id"][ok]
    if not len(rows):
        return
    elsewhere = messages is not None and len(messages.frames) > 0
    if not elsewhere and bool((count == 1).all()):
        # A message a frame (what clients send one at a time): the head holds it, read
        # and checked already (its entry word fills the frame).
        _published(g, rows, publisher, count, h["publishing_id"][ok])
        return
    where = positions(g.starts[rows] + FIRST_ID, count, stride)
    if elsewhere:  # (frames whose messages are elsewhere: their positions)
        first = np.cumsum(count) - count
        for row, n, at in messages.items():
            j = int(np.searchsorted(rows, row))
            if j < len(rows) and rows[j] == row and n == count[j]:
                where[first[j] : first[j] + n] = at
    message = g.items(MESSAGE.itemsize)[where].view(MESSAGE)
    frame_of = np.repeat(np.arange(len(rows)), count)
    bad = message["entry_word"].astype(np.int64) + MESSAGE.itemsize != stride[frame_of]
    good = np.ones(len(rows), dtype=bool)
    good[frame_of[bad]] = False
    keep = good[frame_of]
    _published(g, rows[good], publisher[good], count[good], message["publishing_id"][keep])


def _published(g: _Gathered, rows: np.ndarray, publisher: np.ndarray, count: np.ndarray,
               ids: np.ndarray) -> None:  # fmt: skip
    """Publish frames `rows` accepted: their publisher, message count and publishing ids."""
    g.put("publisher_id", rows, publisher)
    g.put("record_count", rows, count)
    g.id_counts[rows] = count
    g.id_parts.append((rows, ids.astype(np.uint64)))
    g.accepted[rows] = True


def _delivers(g: _Gathered, rows: np.ndarray, layout: np.dtype, crc_limit: int | None,
              crcs: dict[int, int]) -> None:  # fmt: skip
    """Deliver of one version, whole (the walk only takes frames that are)."""
    need = layout.itemsize  # (where the chunk data starts)
    h = g.heads(rows, layout)
    entries = h["num_entries"].astype(np.int64)
    data_length = h["data_length"].astype(np.int64)
    ok = ((h["magic_version"] >> 4 == 5) & (entries * 4 <= data_length)
          & (h["num_records"] <= entries * 0xFFFF) & (4 + g.size[rows] - need >= data_length))  # fmt: skip
    rows, h, data_length = rows[ok], h[ok], data_length[ok]
    if not len(rows):
        return
    for column, name in DELIVER_COLUMNS.items():
        g.put(column, rows, h[name])
    if "committed_chunk_id" in layout.names:
        g.put("committed_chunk_id", rows, h["committed_chunk_id"])
    if g.whole_chunk:
        for name in CHUNK_COLUMNS:
            if name != "reserved":
                g.put(name, rows, h[name])
        g.put("reserved", rows,
              (h["reserved_high"].astype(np.int64) << 8) | h["reserved_low"])  # fmt: skip
    checked = np.ones(len(rows), dtype=bool) if crc_limit is None else (
        g.size[rows] <= crc_limit)  # fmt: skip
    if checked.any():
        mine = np.flatnonzero(checked)
        mv = memoryview(g.data)
        computed = [
            crcs[row] if row in crcs else zlib.crc32(mv[a : a + length])
            for row, a, length in zip(rows[mine].tolist(), (g.starts[rows[mine]] + need).tolist(),
                                      data_length[mine].tolist())
        ]  # fmt: skip
        g.crc[rows[mine]] = np.asarray(computed, dtype=np.int64) == h["crc"][mine]
    g.accepted[rows] = True


def positions(firsts: np.ndarray, counts: np.ndarray, strides: np.ndarray | int) -> np.ndarray:
    """Positions of `counts[i]` items `strides[i]` apart from `firsts[i]`, all frames in a
    row."""
    total = int(counts.sum())
    if total == len(counts) and bool((counts == 1).all()):  # (a Publish of one message each)
        return firsts.astype(np.int64)  # (a copy: the caller may write into it)
    before = np.cumsum(counts) - counts  # (the items of the frames before each)
    index = np.arange(total, dtype=np.int64)
    # (firsts[frame] + (index - before[frame]) * stride[frame], each frame's by repeats)
    if isinstance(strides, int):
        return np.repeat(firsts - before * strides, counts) + index * strides
    return (np.repeat(firsts, counts)
            + (index - np.repeat(before, counts)) * np.repeat(strides, counts))  # fmt: skip


class MessagePositions(NamedTuple):
    """Where the (id, entry word) of each message of some Publish frames are, when not after
    their heads (frames that cross segments): the frames' numbers (ascending), their message
    counts, and the positions of all their messages, frame after frame (one array: a frame's
    own array each was ~1 us a frame to make and as much to join again)."""

    frames: np.ndarray
    counts: np.ndarray
    where: np.ndarray

    def items(self) -> Iterator[tuple[int, int, np.ndarray]]:
        """(frame, count, positions) of each frame."""
        firsts = (np.cumsum(self.counts) - self.counts).tolist()
        for frame, n, a in zip(self.frames.tolist(), self.counts.tolist(), firsts):
            yield frame, n, self.where[a : a + n]

    def holds(self, frame: int) -> bool:
        return bool((self.frames == frame).any())

    def renumbered(self, numbers: np.ndarray) -> MessagePositions:
        """The same, frame k numbered numbers[k] (the frames in the ascending order of those)."""
        new = numbers[self.frames]
        order = np.argsort(new, kind="stable")
        counts = self.counts[order]
        firsts = (np.cumsum(self.counts) - self.counts)[order]
        return MessagePositions(new[order], counts, self.where[positions(firsts, counts, 1)])

    @staticmethod
    def joined(parts: list[tuple[int, MessagePositions]]) -> MessagePositions:
        """Parts (the number of their first frame, part) of ascending frames as one."""
        parts = [(first, part) for first, part in parts if len(part.frames)]
        if not parts:
            return NO_MESSAGES
        if len(parts) == 1 and parts[0][0] == 0:
            return parts[0][1]
        return MessagePositions(np.concatenate([part.frames + first for first, part in parts]),
                                np.concatenate([part.counts for _, part in parts]),
                                np.concatenate([part.where for _, part in parts]))


_NONE = np.zeros(0, dtype=np.int64)
NO_MESSAGES = MessagePositions(_NONE, _NONE, _NONE)


DIRECTIONS = ("c2s", "s2c")


class HotFrames(Slotted):
    """Consecutive frames of a block with no other event between them, all hot and
    well-formed, as columns (one row per frame, in the streaming engine's order): ts_ns,
    stream_offset, key, version, size; `connection` numbers into `connections`, `direction`
    into DIRECTIONS; the nullable fields (values, valid) of FIELD_COLUMNS; the publishing ids
    of frame i are id_values[id_starts[i] : id_starts[i] + id_counts[i]] when id_counts[i]
    >= 0 (a pool in no particular order); crc: -1 not checked, 0 bad, 1 good."""

    __slots__ = field_names = ("ts_ns", "connection", "connections", "direction",
                               "stream_offset", "key", "version", "size", "fields", "id_counts",
                               "id_starts", "id_values", "crc")  # fmt: skip

    def __init__(self, ts_ns: np.ndarray, connection: np.ndarray, connections: list[str],
                 direction: np.ndarray, stream_offset: np.ndarray, key: np.ndarray,
                 version: np.ndarray, size: np.ndarray,
                 fields: dict[str, tuple[np.ndarray, np.ndarray]], id_counts: np.ndarray,
                 id_starts: np.ndarray, id_values: np.ndarray, crc: np.ndarray) -> None:  # fmt: skip
        self.ts_ns, self.connection, self.connections = ts_ns, connection, connections
        self.direction, self.stream_offset = direction, stream_offset
        self.key, self.version, self.size, self.fields = key, version, size, fields
        self.id_counts, self.id_starts, self.id_values, self.crc = id_counts, id_starts, id_values, crc

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

    def take(self, rows: np.ndarray) -> HotFrames:
        """The frames `rows` (numbers in the run, in order), as a HotFrames."""
        return _rows(self, rows)

    def id_positions(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(for each id of the frames `rows`, in order: the number of its frame in `rows`,
        its place in id_values)."""
        counts = np.maximum(self.id_counts[rows], 0)
        frame_of = np.repeat(np.arange(len(rows)), counts)
        return frame_of, positions(self.id_starts[rows], counts, 1)


class HotChunk(Slotted):
    """The accepted hot frames of one walk (one connection and direction of a block), with
    the (row, slot) that place them among the block's events."""

    __slots__ = field_names = ("row", "slot", "ts_ns", "stream_offset", "connection",
                               "direction", "columns")  # fmt: skip

    def __init__(self, row: np.ndarray, slot: np.ndarray, ts_ns: np.ndarray,
                 stream_offset: np.ndarray, connection: str, direction: int,
                 columns: HotColumns) -> None:  # fmt: skip
        self.row, self.slot, self.ts_ns, self.stream_offset = row, slot, ts_ns, stream_offset
        self.connection, self.direction, self.columns = connection, direction, columns


def select(columns: HotColumns, a: int, keep: np.ndarray) -> HotColumns:
    """The frames a, a + 1, ... of `columns` where `keep` (one flag each) holds."""
    c = _frames(columns, a, a + len(keep))
    if keep.all():
        return c
    return HotColumns(
        c.key[keep], c.version[keep], c.size[keep], c.accepted[keep],
        {name: (v[keep], ok[keep]) for name, (v, ok) in c.fields.items()},
        c.id_counts[keep], c.id_starts[keep], c.id_values, c.crc[keep],
    )  # fmt: skip


def _frames(c: HotColumns, a: int, b: int) -> HotColumns:
    """Frames a to b of the columns (views; the ids of those frames)."""
    if a == 0 and b == len(c.key):
        return c
    return HotColumns(
        c.key[a:b], c.version[a:b], c.size[a:b], c.accepted[a:b],
        {name: (v[a:b], ok[a:b]) for name, (v, ok) in c.fields.items()},
        c.id_counts[a:b], c.id_starts[a:b], c.id_values, c.crc[a:b],
    )  # fmt: skip


def order_keys(row: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """The order of hot frames (and events) in a block: by packet row, then event slot."""
    return (row.astype(np.int64) << 40) + (slot.astype(np.int64) << 10)


def in_order(chunks: list[HotChunk]) -> tuple[HotFrames, np.ndarray]:
    """The chunks' frames as one HotFrames in the block's order, and their order keys."""
    names: dict[str, int] = {}
    conn_parts, dir_parts = [], []
    for c in chunks:
        number = names.setdefault(c.connection, len(names))
        conn_parts.append(np.full(len(c.row), number, dtype=np.int64))
        dir_parts.append(np.full(len(c.row), c.direction, dtype=np.int8))
    row = np.concatenate([c.row for c in chunks])
    slot = np.concatenate([c.slot for c in chunks])
    order_key = order_keys(row, slot)
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

    def joined(parts: list) -> np.ndarray:  # (take: a quarter quicker than [order] here)
        return np.concatenate(parts).take(order)

    every = HotFrames(
        joined([c.ts_ns for c in chunks]), joined(conn_parts), list(names), joined(dir_parts),
        joined([c.stream_offset for c in chunks]), joined([c.key for c in cols]),
        joined([c.version for c in cols]), joined([c.size for c in cols]),
        {name: (joined([c.fields[name][0] for c in cols]),
                joined([c.fields[name][1] for c in cols])) for name in cols[0].fields},
        joined([c.id_counts for c in cols]), id_starts, id_values, joined([c.crc for c in cols]),
    )  # fmt: skip
    return every, order_key[order]


def place(every: HotFrames, keys: np.ndarray, events: list[tuple], cut_by: type | None) -> list:
    """The block's events ((row, slot, event), sorted) and its hot frames (`every`, in order,
    `keys` their order_keys) merged in order: the events, with a HotFrames for the hot frames
    between two of them. With `cut_by` (the frame event class), an event of another kind (an
    anomaly) does not cut a run: it comes right after the run it falls in."""
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
    return _rows(run, slice(a, b))


def _rows(run: HotFrames, index: slice | np.ndarray) -> HotFrames:
    return HotFrames(
        run.ts_ns[index], run.connection[index], run.connections, run.direction[index],
        run.stream_offset[index], run.key[index], run.version[index], run.size[index],
        {name: (v[index], ok[index]) for name, (v, ok) in run.fields.items()},
        run.id_counts[index], run.id_starts[index], run.id_values, run.crc[index],
    )  # fmt: skip
