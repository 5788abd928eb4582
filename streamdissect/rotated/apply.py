"""A stitching plan applied to a piece's own tables (pyarrow), and a chain analysed.

- `piece_rows`: a piece's rows of a table as the whole set has them: connections renamed,
  stream offsets moved, rows of chains left out (their analysis replaces them), anomalies
  of the cuts left out.
- `chain_frames`: a piece's frames of its chain parts, renamed and moved, with their place
  (`_piece`, `_row`) for putting a chain's frames back in capture order.
- `chain_tables`: a chain's frames from every piece and across every cut, in order, and the
  same columnar analysis a whole capture gets (analysis.columns).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from .stitch import Chain, Plan

PIECE, ROW, REPLACED = "_piece", "_row", "_replaced"
# Tables with a row per connection (or per something of one): a chain's rows replace them
# (frames: with the chain's own, chain_frames and cut_frames).
CONNECTION_TABLES = frozenset(("connections", "requests", "confirms", "publishes", "backlog",
                               "credit", "stalls", "credit_balance", "deliveries", "frames"))  # fmt: skip


def _names_and_chained(table: Any, piece: int, plan: Plan) -> tuple[list, np.ndarray]:
    locals_ = table["connection"].to_pylist()
    names = [plan.names.get((piece, c), c) if c is not None else None for c in locals_]
    chained = np.array([n in plan.chains for n in names], dtype=bool)
    return names, chained


def _shifts(table: Any, piece: int, plan: Plan, locals_: list) -> np.ndarray:
    directions = table["direction"].to_pylist()
    return np.array([plan.shifts.get((piece, c, d), 0) for c, d in zip(locals_, directions)],
                    dtype=np.int64)  # fmt: skip


def piece_rows(table: Any, name: str, piece: int, plan: Plan) -> Any:
    """The rows of table `name` of piece `piece` as the whole set has them."""
    import pyarrow as pa

    if "connection" not in table.column_names or not table.num_rows:
        return table
    locals_ = table["connection"].to_pylist()
    names, chained = _names_and_chained(table, piece, plan)
    keep = np.ones(table.num_rows, dtype=bool)
    if name in CONNECTION_TABLES:
        keep &= ~chained
    if name == "anomalies":
        offsets = table["stream_offset"].to_pylist()
        for k, (c, d, kind, off) in enumerate(zip(locals_, table["direction"].to_pylist(),
                                                  table["kind"].to_pylist(), offsets)):  # fmt: skip
            if (piece, c, d, kind, off) in plan.dropped:
                keep[k] = False
        moved = [None if o is None or c is None else o + s for o, c, s in
                 zip(offsets, locals_, _shifts(table, piece, plan, locals_).tolist())]  # fmt: skip
        table = table.set_column(table.schema.get_field_index("stream_offset"), "stream_offset",
                                 pa.array(moved, table.schema.field("stream_offset").type))  # fmt: skip
    table = table.set_column(table.schema.get_field_index("connection"), "connection",
                             pa.array(names, table.schema.field("connection").type))  # fmt: skip
    return table.filter(pa.array(keep))


def chain_frames(frames: Any, piece: int, plan: Plan) -> Any:
    """The frames of the piece's chain parts, renamed, offsets moved, with their place and
    whether the frames across a cut replace them (`_replaced`)."""
    import pyarrow as pa

    locals_ = frames["connection"].to_pylist()
    names, chained = _names_and_chained(frames, piece, plan)
    rows = np.flatnonzero(chained)
    picked = frames.take(pa.array(rows))
    local_offsets = picked["stream_offset"].to_numpy(zero_copy_only=False)
    directions = picked["direction"].to_pylist()
    replaced = np.zeros(len(rows), dtype=bool)
    shifts = np.zeros(len(rows), dtype=np.int64)
    for k, (r, d) in enumerate(zip(rows.tolist(), directions)):
        key = (piece, locals_[r], d)
        shifts[k] = plan.shifts.get(key, 0)
        span = plan.replaced.get(key)
        replaced[k] = span is not None and span[0] <= local_offsets[k] < span[1]
    picked = picked.set_column(picked.schema.get_field_index("stream_offset"), "stream_offset",
                               pa.array(local_offsets + shifts, pa.int64()))  # fmt: skip
    picked = picked.set_column(picked.schema.get_field_index("connection"), "connection",
                               pa.array([names[r] for r in rows.tolist()], pa.string()))  # fmt: skip
    return (picked.append_column(PIECE, pa.array(np.full(len(rows), piece), pa.int32()))
            .append_column(ROW, pa.array(rows, pa.int64()))
            .append_column(REPLACED, pa.array(replaced)))  # fmt: skip


def cut_frames(chain: Chain) -> Any:
    """The frames across a chain's cuts as a frames table, with the piece that completed
    each (`_piece`)."""
    import pyarrow as pa

    from .. import schema
    from ..frame_batches import FrameColumns

    builder = FrameColumns()
    for _, event in chain.frames:
        builder.add(event)
    batches = builder.batches() if builder.rows else []
    table = pa.Table.from_batches(batches, schema=schema.arrow_schema("frames"))
    pieces = [piece for piece, _ in chain.frames]
    return table.append_column(PIECE, pa.array(pieces, pa.int32()))


def in_order(pieces_frames: Any, cut: Any) -> Any:
    """A chain's frames in capture order: each piece's in their order, and each frame across
    a cut before the first of its piece's frames that is not earlier (the cut's frames come
    from the first packets of the piece)."""
    import pyarrow as pa

    from .. import schema

    names = schema.column_names("frames")
    piece = np.concatenate([pieces_frames[PIECE].to_numpy(), cut[PIECE].to_numpy()])
    row = np.concatenate([pieces_frames[ROW].to_numpy(), np.arange(cut.num_rows)])
    ts = np.concatenate([_ts(pieces_frames), _ts(cut)])
    n = pieces_frames.num_rows
    first = np.zeros(len(piece), dtype=np.int8)
    first[:n] = 1  # (a cut's frame goes before a piece's frame of the same time)
    own = np.lexsort((pieces_frames[ROW].to_numpy(), pieces_frames[PIECE].to_numpy()))
    own_ts = ts[:n][own]
    own_piece = piece[:n][own]
    for p in np.unique(own_piece):  # time never goes back within a piece's order
        where = own_piece == p
        own_ts[where] = np.maximum.accumulate(own_ts[where])
    ts[own] = own_ts
    order = np.lexsort((row, first, ts, piece))
    both = pa.concat_tables([pieces_frames.select(names), cut.select(names)])
    return both.take(pa.array(order))


def _ts(frames: Any) -> np.ndarray:
    import pyarrow.compute as pc

    return pc.fill_null(frames["ts_ns"], 0).to_numpy(zero_copy_only=False).astype(np.int64)


def chain_tables(parts_frames: Any, chain: Chain, cut: Any,
                 at_once_ms: float | None = None) -> dict:  # fmt: skip
    """Every analysis table of one chain (analysis.columns.tables), from its parts' frames
    (chain_frames of every piece) and the frames across its cuts (cut_frames). Throughput
    and errors, which add up over frames, are the chain's less what its parts' frames
    counted in their pieces."""
    import pyarrow.compute as pc

    from ..analysis import columns

    kept = parts_frames.filter(pc.invert(parts_frames[REPLACED]))
    frames = in_order(kept, cut)
    directions = frames["direction"].to_pylist()
    summary = replace(chain.summary, frames_c2s=directions.count("c2s"),
                      frames_s2c=directions.count("s2c"))  # fmt: skip
    tables = columns.tables(frames, [summary], at_once_ms, end_ns=chain.capture_end_ns)
    counted = parts_frames.select(schema_names())
    for table in ("throughput", "errors"):
        tables[table] = _less(tables[table], getattr(columns, table)(counted), table)
    return tables


def schema_names() -> list[str]:
    from .. import schema

    return schema.column_names("frames")


def _less(total: Any, counted: Any, table: str) -> Any:
    """`total` and `counted` with its counts negated: summed per key, the difference."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = {"throughput": total.column_names[1:], "errors": ["count"]}[table]
    for name in names:
        i = counted.schema.get_field_index(name)
        counted = counted.set_column(i, name, pc.negate(counted[name]))
    return pa.concat_tables([total, counted])
