"""The Stream's frames table (protocols/stream/tables.FRAMES) as Arrow record batches, built
column by column: the currency of bulk work (tables.batches.frame_batches drives it).

Each frame appends its envelope (time, connection, direction, offset, key, version, size,
correlation id, code, truncated) to plain lists, and only the key fields its command has to
sparse (row, value) lists; command names, the response flag and code names are mapped per
distinct key and code when a batch is made. No per-frame dict, and no JSON for the frames
that make up bulk traffic (Publish, Deliver, Credit, PublishConfirm, Heartbeat: all their
fields are typed columns); the rare commands' other fields go to the `fields` JSON column.
Payload bytes (Publish messages, Deliver chunk data) are left out, as `frames` does.
`frame_row` is the reference: the same row as a dict, one record at a time.
"""

from __future__ import annotations

import json
from operator import attrgetter
from typing import Any

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
from streamdissect.protocols.stream.tables import FRAMES
from streamdissect.tables.arrays import (
    ROWS_PER_BATCH,
    as_array,
    null_array,
    pool,
    sparse_array,
    take_strings,
)
from streamdissect.tables.columns import arrow_schema_of, fit
from streamdissect.tables.columns import arrow_type as kind_type

# Key fields read from the record's attribute of the same name.
TYPED_ATTRIBUTES = ("publisher_id", "subscription_id", "stream", "record_count", "credit",
                    "publishing_ids", "committed_chunk_id", "offset_type", "offset",
                    "frame_max", "heartbeat")  # fmt: skip
# Key fields read from a Deliver's chunk header: column -> header field.
CHUNK_COLUMNS = {"chunk_id": "chunk_id", "chunk_timestamp_ms": "timestamp",
                 "num_entries": "num_entries", "chunk_type": "chunk_type"}  # fmt: skip
SPARSE = (*TYPED_ATTRIBUTES, *CHUNK_COLUMNS, "crc_ok", "fields")


def chunk_of_row(row: dict) -> dict | None:
    """A Deliver's chunk header back from its row (the CHUNK_COLUMNS and record_count; what
    the table leaves out is absent), None when the row holds none of it. A Deliver cut
    inside its chunk header keeps the fields that are whole (chunk_type, num_entries and
    num_records come before chunk_id), so any one of the columns means a header."""
    if all(row.get(column) is None for column in CHUNK_COLUMNS):
        return None
    chunk = {header: row.get(column) for column, header in CHUNK_COLUMNS.items()}
    chunk["num_records"] = row.get("record_count")
    return chunk


# Never in the table: payload bytes, and what the typed columns already hold.
LEFT_OUT = frozenset(("messages", "chunk_payload", "chunk", "entry_count", "crc_ok"))


class FrameColumns:
    """Frame events in, record batches out. Events are kept as they come; each column is then
    made for the whole batch at once (attrgetter over the records, grouped by record class),
    so the work per frame is a list append. The bulk engine's HotFrames (columns already)
    become batches of their own, in their place."""

    def __init__(self, show_secrets: bool = False) -> None:
        self.show_secrets = show_secrets
        self.plans: dict[type, ClassPlan] = {}
        self.events: list[Any] = []  # engine.state.FrameEvent
        self.pieces: list[Any] = []  # batches made so far, in order
        self.rows = 0

    def add(self, event: Any) -> None:
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
            columns[name] = sparse_array(n, rows, values, _KIND[name])
        arrays = [as_array(columns[c.name], c.kind) for c in FRAMES]
        return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema_of(FRAMES))


_RECORD = attrgetter("record")
# HotFrames columns by their FRAMES names (the envelope and hot.FIELD_COLUMNS)
_ENVELOPE = ("ts_ns", "stream_offset", "key", "version", "size")


def run_batch(run: HotFrames) -> Any:
    """A HotFrames as a pyarrow.RecordBatch of FRAMES, column by column."""
    import numpy as np
    import pyarrow as pa

    n = len(run)
    columns: dict[str, Any] = {name: getattr(run, name) for name in _ENVELOPE}
    columns["connection"] = take_strings(run.connections, run.connection)
    columns["direction"] = take_strings(DIRECTIONS, run.direction)
    keys = run.key.astype(np.int64)
    known = sorted(COMMAND_OF)
    command_at = np.searchsorted(known, keys)
    columns["command"] = take_strings([COMMAND_OF[k] for k in known], command_at)
    columns["response"] = (keys & RESPONSE_BIT) != 0
    columns["truncated"] = np.zeros(n, dtype=bool)
    for name, (values, valid) in run.fields.items():
        if name in _KIND:  # (not the rest of a Deliver's chunk header)
            columns[name] = pa.array(values, kind_type(_KIND[name]), mask=~valid,
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
    for c in FRAMES:
        arrow_type = kind_type(c.kind)
        value = columns.get(c.name)
        if value is None:
            arrays.append(null_array(n, arrow_type))
        elif isinstance(value, np.ndarray):
            arrays.append(pa.array(value, arrow_type, memory_pool=pool()))
        else:
            arrays.append(value if value.type == arrow_type else value.cast(arrow_type,
                                                                             memory_pool=pool()))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema_of(FRAMES))


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
        elif self.record:  # a cut frame's `cut` (to_dict's) goes to the JSON too
            cut = [(row, r) for row, r in zip(rows, records) if r.truncated]
            if cut:
                _put(sparse["fields"], [row for row, _ in cut], [self._json(r) for _, r in cut])

    def _json(self, record: Any) -> str | None:
        data = record.to_dict(show_secrets=self.show_secrets)
        wanted = self.rest
        rest = {n: jsonable(v) for n, v in data.items()  # (in the record's own order)
                if n not in COMMON and (wanted is None or n in wanted or n == "cut")}  # fmt: skip
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


_KIND = {c.name: c.kind for c in FRAMES}


def _command_of(record: Any) -> str | None:
    """A Malformed frame is named by its key when the table knows it (as to_dict does)."""
    if isinstance(record, Malformed):
        message = BY_KEY.get(record.key)
        return message.command if message else None
    return None if isinstance(record, Unknown) else record.command


# The reference row of the frames table, one dict per record (the tests hold
# frame_batches' columns equal to it; which columns there are is frame_batches' own
# definition); frames_table itself is built from Arrow batches.


def frame_row(ev, show_secrets: bool = False) -> dict:
    rec = ev.record
    d = rec.to_dict(show_secrets=show_secrets)
    row = {"ts_ns": ev.ts_ns, "connection": ev.connection, "direction": ev.direction,
           "stream_offset": getattr(ev, "stream_offset", None)}
    for name in COMMON_COLUMNS:
        row[name] = d.pop(name, None)
    typed = [c.name for c in FRAMES if c.name not in row and c.name != "fields"]
    known = isinstance(rec, Record)  # (a Malformed frame's `offset` is where it broke)
    taken = set(COMMON_COLUMNS)
    for name in typed:
        present = known and (name in d or name == "crc_ok")
        row[name] = getattr(rec, name, None) if present else None
        if present:
            taken.add(name)
    chunk = getattr(rec, "chunk", None)
    for column, header in CHUNK_COLUMNS.items():
        row[column] = chunk[header] if chunk else None
    if isinstance(row["publishing_ids"], range):
        row["publishing_ids"] = list(row["publishing_ids"])
    left_out = LEFT_OUT if known else ()
    rest = {k: v for k, v in d.items() if k not in taken and k not in left_out}
    row["fields"] = json.dumps(rest, default=str) if rest else None
    return {c.name: fit(c.kind, row[c.name]) for c in FRAMES}
