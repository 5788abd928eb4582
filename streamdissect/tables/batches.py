"""Frames as Arrow record batches, built column by column: the currency of bulk work.

    for batch in frame_batches("capture.pcap"):   # pyarrow.RecordBatch, schema.FRAMES
        ...

Each frame appends its envelope (time, connection, direction, offset, key, version, size,
correlation id, code, truncated) to plain lists, and only the key fields its command has to
sparse (row, value) lists; command names, the response flag and code names are mapped per
distinct key and code when a batch is made. No per-frame dict, and no JSON for the frames
that make up bulk traffic (Publish, Deliver, Credit, PublishConfirm, Heartbeat: all their
fields are typed columns); the rare commands' other fields go to the `fields` JSON column.
Payload bytes (Publish messages, Deliver chunk data) are left out, as `frames` does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from operator import attrgetter
from typing import Any

from streamdissect.engine.dissect import Dissector, FrameEvent
from streamdissect.protocols.stream.codes import RESPONSE_BIT, code_name
from streamdissect.protocols.stream.hot import COMMAND_OF, DIRECTIONS, HotFrames
from streamdissect.protocols.stream.records import (
    COMMON_COLUMNS,
    Malformed,
    Record,
    Unknown,
    jsonable,
)
from streamdissect.protocols.stream.spec import BY_KEY
from streamdissect.tables import schema

ROWS_PER_BATCH = 16_384
# Key fields read from the record's attribute of the same name.
TYPED_ATTRIBUTES = ("publisher_id", "subscription_id", "stream", "record_count", "credit",
                    "publishing_ids", "committed_chunk_id", "offset_type", "offset",
                    "frame_max", "heartbeat")  # fmt: skip
# Key fields read from a Deliver's chunk header: column -> header field.
CHUNK_COLUMNS = {"chunk_id": "chunk_id", "chunk_timestamp_ms": "timestamp",
                 "num_entries": "num_entries", "chunk_type": "chunk_type"}  # fmt: skip
SPARSE = (*TYPED_ATTRIBUTES, *CHUNK_COLUMNS, "crc_ok", "fields")
# Never in the table: payload bytes, and what the typed columns already hold.
LEFT_OUT = frozenset(("messages", "chunk_payload", "chunk", "entry_count", "crc_ok"))


def frame_batches(
    paths: str | Sequence[str],
    ports: Iterable[int] = (5552,),
    heuristic: bool = True,
    max_frame: int | None = None,
    show_secrets: bool = False,
    rows_per_batch: int = ROWS_PER_BATCH,
    **options: Any,
) -> Iterator[Any]:
    """The frames of a capture (several paths: one capture in time order) as
    pyarrow.RecordBatch with `schema.arrow_schema("frames")`. Options go to Dissector
    (`helper_process`: a helper forked on another CPU, by default only when this process
    has no other thread: a script, not a notebook kernel)."""
    options.setdefault("publish_messages", False)  # (the table has no message bodies)
    options.setdefault("helper_process", None)  # (only where forking is safe: Dissector)
    options.setdefault("columns", True)  # (the bulk engine's hot frames come as columns)
    dissector = Dissector(ports, heuristic, max_frame, **options)
    builder = FrameColumns(show_secrets)
    for event in dissector.run(paths):
        cls = event.__class__
        if cls is FrameEvent:
            builder.add(event)
        elif cls is HotFrames:
            builder.add_run(event)
        else:
            continue
        if builder.rows >= rows_per_batch:
            yield from builder.batches(rows_per_batch)
    if builder.rows:
        yield from builder.batches(rows_per_batch)


def frames_arrow(paths: str | Sequence[str], **options: Any) -> Any:
    """All the frames of a capture as one pyarrow.Table."""
    import pyarrow as pa

    return pa.Table.from_batches(list(frame_batches(paths, **options)),
                                 schema=schema.arrow_schema("frames"))  # fmt: skip


class FrameColumns:
    """Frame events in, record batches out. Events are kept as they come; each column is then
    made for the whole batch at once (attrgetter over the records, grouped by record class),
    so the work per frame is a list append. The bulk engine's HotFrames (columns already)
    become batches of their own, in their place."""

    def __init__(self, show_secrets: bool = False) -> None:
        self.show_secrets = show_secrets
        self.plans: dict[type, ClassPlan] = {}
        self.events: list[FrameEvent] = []
        self.pieces: list[Any] = []  # batches made so far, in order
        self.rows = 0

    def add(self, event: FrameEvent) -> None:
        self.events.append(event)
        self.rows += 1

    def add_run(self, run: HotFrames) -> None:
        if self.events:
            self.pieces.append(self.batch())
        self.pieces.append(run_batch(run))
        self.rows += len(run)

    def batches(self, most: int = ROWS_PER_BATCH) -> list[Any]:
        """The frames so far as pyarrow.RecordBatches of at most `most` rows (slices, no
        copies); the builder starts over."""
        if self.events:
            self.pieces.append(self.batch())
        pieces, self.pieces, self.rows = self.pieces, [], 0
        return [piece.slice(at, most) for piece in pieces for at in range(0, piece.num_rows, most)]

    def batch(self) -> Any:
        """The frame events so far as one pyarrow.RecordBatch (they are taken)."""
        import numpy as np
        import pyarrow as pa

        events, self.events = self.events, []
        n = len(events)
        records = list(map(_RECORD, events))
        columns: dict[str, Any] = {
            name: list(map(attrgetter(name), events))
            for name in ("ts_ns", "connection", "direction", "stream_offset")
        }  # fmt: skip
        for name in ("key", "version", "size", "correlation_id", "code", "truncated"):
            columns[name] = list(map(attrgetter(name), records))
        keys = np.array([0 if k is None else k for k in columns["key"]], dtype=np.int64)
        columns["response"] = pa.array((keys & RESPONSE_BIT) != 0, memory_pool=pool())
        names = {code: code_name(code) for code in set(columns["code"]) - {None}}
        columns["code_name"] = pa.array([names.get(c) for c in columns["code"]], pa.string(),
                                        memory_pool=pool())  # fmt: skip
        commands: list[str | None] = [None] * n
        sparse: dict[str, tuple[list[int], list]] = {name: ([], []) for name in SPARSE}
        for cls, rows in _rows_by_class(records).items():
            plan = self.plans.get(cls)
            if plan is None:
                plan = self.plans[cls] = ClassPlan(cls, self.show_secrets)
            mine = [records[i] for i in rows]
            plan.fill(mine, rows, commands, sparse)
        columns["command"] = commands
        for name, (rows, values) in sparse.items():
            columns[name] = _sparse(n, rows, values, _KIND[name])
        arrays = [_as_array(columns[c.name], c.kind) for c in schema.FRAMES]
        return pa.RecordBatch.from_arrays(arrays, schema=schema.arrow_schema("frames"))


_RECORD = attrgetter("record")
# HotFrames columns by their FRAMES names (the envelope and hot.FIELD_COLUMNS)
_ENVELOPE = ("ts_ns", "stream_offset", "key", "version", "size")


def run_batch(run: HotFrames) -> Any:
    """A HotFrames as a pyarrow.RecordBatch of schema.FRAMES, column by column."""
    import numpy as np
    import pyarrow as pa

    n = len(run)
    columns: dict[str, Any] = {name: getattr(run, name) for name in _ENVELOPE}
    columns["connection"] = _take(run.connections, run.connection)
    columns["direction"] = _take(DIRECTIONS, run.direction)
    keys = run.key.astype(np.int64)
    known = sorted(COMMAND_OF)
    command_at = np.searchsorted(known, keys)
    columns["command"] = _take([COMMAND_OF[k] for k in known], command_at)
    columns["response"] = (keys & RESPONSE_BIT) != 0
    columns["truncated"] = np.zeros(n, dtype=bool)
    for name, (values, valid) in run.fields.items():
        if name in _KIND:  # (not the rest of a Deliver's chunk header)
            columns[name] = pa.array(values, schema.arrow_type(_KIND[name]), mask=~valid,
                                     memory_pool=pool())  # fmt: skip
    has_ids = run.id_counts >= 0
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.maximum(run.id_counts, 0), out=offsets[1:])
    _, where = run.id_positions(np.arange(n))
    columns["publishing_ids"] = pa.ListArray.from_arrays(
        pa.array(offsets), pa.array(run.id_values[where], pa.uint64()),
        mask=pa.array(~has_ids), pool=pool())  # fmt: skip
    columns["crc_ok"] = pa.array(run.crc == 1, pa.bool_(), mask=run.crc < 0, memory_pool=pool())
    arrays = []
    for c in schema.FRAMES:
        arrow_type = schema.arrow_type(c.kind)
        value = columns.get(c.name)
        if value is None:
            arrays.append(null_array(n, arrow_type))
        elif isinstance(value, np.ndarray):
            arrays.append(pa.array(value, arrow_type, memory_pool=pool()))
        else:
            arrays.append(value if value.type == arrow_type else value.cast(arrow_type,
                                                                             memory_pool=pool()))
    return pa.RecordBatch.from_arrays(arrays, schema=schema.arrow_schema("frames"))


def _rows_by_class(records: list) -> dict[type, list[int]]:
    """Row numbers of each record class (numbered, then grouped by numpy, not one by one)."""
    import numpy as np

    classes = list(map(type, records))
    number: dict[type, int] = {}
    for cls in set(classes):
        number[cls] = len(number)
    ids = np.fromiter(map(number.__getitem__, classes), dtype=np.int64, count=len(classes))
    order = np.argsort(ids, kind="stable")
    bounds = np.searchsorted(ids[order], np.arange(len(number) + 1))
    by_number = {n: cls for cls, n in number.items()}
    return {by_number[n]: order[bounds[n] : bounds[n + 1]].tolist() for n in range(len(number))}


class ClassPlan:
    """What one record class contributes beyond the envelope, decided once per class."""

    def __init__(self, cls: type, show_secrets: bool) -> None:
        self.show_secrets = show_secrets
        self.record = issubclass(cls, Record)
        if not self.record:  # Malformed, Unknown: reason, offset, raw as JSON
            self.command = None
            self.attributes: list[str] = []
            self.chunk = False
            self.crc = False
            self.rest: set[str] | None = None
            self.json = True
            return
        names = set(cls.body_fields) | {f.name for f in cls.spec.derived}
        self.command = cls.spec.command
        self.attributes = [name for name in TYPED_ATTRIBUTES if name in names]
        self.chunk = "chunk" in names
        self.crc = "crc_ok" in names
        self.rest = names - set(TYPED_ATTRIBUTES) - LEFT_OUT
        self.json = bool(self.rest)

    def fill(self, records: list, rows: list[int], commands: list, sparse: dict) -> None:
        if self.record:
            for row in rows:
                commands[row] = self.command
        else:
            for row, record in zip(rows, records):
                commands[row] = _command_of(record)
        for name in self.attributes:
            _put(sparse[name], rows, list(map(attrgetter(name), records)))
        if self.chunk:
            headers = list(map(attrgetter("chunk"), records))
            for column, field in CHUNK_COLUMNS.items():
                _put(sparse[column], rows, [h[field] if h is not None else None for h in headers])
        if self.crc:
            _put(sparse["crc_ok"], rows, list(map(attrgetter("crc_ok"), records)))
        if self.json:
            _put(sparse["fields"], rows, [self._json(r) for r in records])

    def _json(self, record: Any) -> str | None:
        data = record.to_dict(show_secrets=self.show_secrets)
        wanted = self.rest
        rest = {n: jsonable(v) for n, v in data.items()  # (in the record's own order)
                if n not in COMMON and (wanted is None or n in wanted)}  # fmt: skip
        return json.dumps(rest, default=str) if rest else None


COMMON = frozenset(COMMON_COLUMNS)  # (every record's own columns: the envelope has them)


def _put(column: tuple[list[int], list], rows: list[int], values: list) -> None:
    """Add the values that are there (not None) to a sparse column."""
    where, kept = column
    if None not in values:  # (the usual case: one pass in C)
        where.extend(rows)
        kept.extend(values)
        return
    for row, value in zip(rows, values):
        if value is not None:
            where.append(row)
            kept.append(value)


_KIND = {c.name: c.kind for c in schema.FRAMES}


def _command_of(record: Any) -> str | None:
    """A Malformed frame is named by its key when the table knows it (as to_dict does)."""
    if isinstance(record, Malformed):
        message = BY_KEY.get(record.key)
        return message.command if message else None
    return None if isinstance(record, Unknown) else record.command


def _as_array(values: Any, kind: str) -> Any:
    import pyarrow as pa

    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    return typed_array(values, kind)


def _sparse(n: int, rows: list[int], values: list, kind: str) -> Any:
    """A column of `n` rows holding `values` at `rows`, null elsewhere."""
    import numpy as np
    import pyarrow as pa

    arrow_type = schema.arrow_type(kind)
    if not rows:
        return null_array(n, arrow_type)
    if len(rows) == n:  # (every row has it; rows come class by class, so put them in order)
        if any(row != at for at, row in enumerate(rows)):
            values = [values[i] for i in np.argsort(np.asarray(rows), kind="stable")]
        return typed_array(values, kind)
    if pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type):
        present = typed_array(values, kind)
        if present.null_count == 0:
            where = np.asarray(rows, dtype=np.int64)
            data = np.zeros(n, dtype=present.type.to_pandas_dtype())
            data[where] = present.to_numpy(zero_copy_only=False)
            mask = np.ones(n, dtype=bool)
            mask[where] = False
            return pa.array(data, arrow_type, mask=mask, memory_pool=pool())
    full: list = [None] * n
    for row, value in zip(rows, values):
        full[row] = value
    return typed_array(full, kind)


def pool() -> Any:
    """The memory pool of the frames' Arrow arrays: the system allocator's, whose freed
    memory numpy and pandas then reuse (pyarrow's default pool keeps it for Arrow alone: a
    frames table's peak RSS is ~10 MB higher with it)."""
    import pyarrow as pa

    return pa.system_memory_pool()


def _take(names: Any, numbers: Any) -> Any:
    """The strings `names[numbers[i]]` as a string column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.take(pa.array(names, pa.string()), numbers, memory_pool=pool())


_zeros: list = []  # one buffer of zero bytes that every all-null column reads


def null_array(n: int, arrow_type: Any) -> Any:
    """An all-null column of `n` rows whose buffers are slices of one shared zero buffer
    (pa.nulls allocates n values of zeros per column; a hot batch has a dozen such columns)."""
    import pyarrow as pa

    need = 8 * (n + 1)
    if not _zeros or _zeros[0].size < need:
        _zeros[:] = [pa.py_buffer(bytes(max(need, 1 << 20)))]
    zeros = _zeros[0]
    bits = zeros.slice(0, (n + 7) // 8)
    if pa.types.is_string(arrow_type):
        buffers = [bits, zeros.slice(0, 4 * (n + 1)), zeros.slice(0, 0)]
    elif pa.types.is_list(arrow_type):
        empty = pa.array([], arrow_type.value_type)
        return pa.Array.from_buffers(arrow_type, n, [bits, zeros.slice(0, 4 * (n + 1))],
                                     null_count=n, children=[empty])  # fmt: skip
    else:
        buffers = [bits, zeros.slice(0, max(arrow_type.bit_width // 8, 1) * n)]
    return pa.Array.from_buffers(arrow_type, n, buffers, null_count=n)


def typed_array(values: list, kind: str) -> Any:
    """pa.array of `values` as the column of `kind` holds them (schema.fit: what the type
    cannot hold is null, invalid UTF-8 replaced), never an exception."""
    import pyarrow as pa

    arrow_type = schema.arrow_type(kind)
    try:
        return pa.array(values, arrow_type, memory_pool=pool())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError,
            UnicodeError):  # fmt: skip
        return pa.array([schema.fit(kind, v) for v in values], arrow_type, memory_pool=pool())
