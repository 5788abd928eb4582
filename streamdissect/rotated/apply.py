"""A stitching plan applied to a piece's own tables (pyarrow), and a chain analysed.

- `piece_rows`: a piece's rows of a table as the whole set has them: connections renamed,
  stream offsets moved, rows of chains left out (their analysis replaces them), anomalies
  of the cuts left out.
- `chain_frames`: a piece's frames of its chain parts, renamed and moved, with their place
  (`_piece`, `_row`) for putting a chain's frames back in capture order.
- `chain_tables`: a chain's frames from every piece and across every cut, in order, turned
  back into events (its protocol's replay_events: the Stream's frame_events) and analysed by
  the collectors a whole capture's events go to (analysis.driver.analyze_events).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamdissect.rotated.stitch import Chain, Plan

CHAIN, PIECE, ROW, REPLACED = "_chain", "_piece", "_row", "_replaced"
# What a chain's analysis makes: the tables the pieces' rows of it are replaced in.
CHAIN_TABLES = ("connections", "requests", "confirms", "credit", "stalls", "deliveries",
                "throughput", "errors")  # fmt: skip
# Tables with a row per connection (or per something of one): a chain's rows replace them
# (frames: with the chain's own, chain_frames and cut_frames).
CONNECTION_TABLES = frozenset(("connections", "requests", "confirms", "publishes", "backlog",
                               "credit", "stalls", "credit_balance", "deliveries", "frames"))  # fmt: skip


def _per_key(table: Any, columns: tuple[str, ...], value: Any,
             dtypes: tuple[Any, ...]) -> tuple[np.ndarray, ...]:  # fmt: skip
    """value(*key), a tuple, for each row (None for a null in the key), computed once per
    distinct key: one array per item of the tuple, of the dtype given for it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not table.num_rows:
        return tuple(np.zeros(0, dtype=dtype) for dtype in dtypes)
    keys = [pc.fill_null(table[c].cast(pa.string()), NULL) for c in columns]
    joined = keys[0] if len(keys) == 1 else pc.binary_join_element_wise(*keys, SEPARATOR)
    if isinstance(joined, pa.ChunkedArray):
        joined = joined.combine_chunks()
    encoded = joined.dictionary_encode()
    values = [value(*(None if part == NULL else part for part in key.split(SEPARATOR)))
              for key in encoded.dictionary.to_pylist()]  # fmt: skip
    rows = encoded.indices.to_numpy(zero_copy_only=False)
    return tuple(np.array([v[i] for v in values], dtype=dtype)[rows]
                 for i, dtype in enumerate(dtypes))  # fmt: skip


NULL, SEPARATOR = "\0", "\1"  # (neither is in a connection id or a direction)


def _names(table: Any, piece: int, plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """Each row's connection as the set names it, and its chain's key (-1: none)."""
    def of(c: str | None) -> tuple[str | None, int]:
        if c is None:
            return None, -1
        return plan.names.get((piece, c), c), plan.part_chain.get((piece, c), -1)

    return _per_key(table, ("connection",), of, (object, np.int64))


def _offsets(table: Any, piece: int, plan: Plan) -> tuple[np.ndarray, ...]:
    """Each row's stream offset shift, the [from, to) of local offsets whose frames the
    frames across a cut replace (empty: none), and the local offset from which the frames
    across the next cut replace them (plan.tails; 2**62: none)."""
    def of(c: str | None, d: str | None) -> tuple[int, int, int, int]:
        return (plan.shifts.get((piece, c, d), 0), *plan.replaced.get((piece, c, d), (0, 0)),
                plan.tails.get((piece, c, d), 1 << 62))  # fmt: skip

    return _per_key(table, ("connection", "direction"), of,
                    (np.int64, np.int64, np.int64, np.int64))  # fmt: skip


def _set_column(table: Any, name: str, values: Any) -> Any:
    import pyarrow as pa

    field = table.schema.field(name)
    array = pa.array(values.tolist() if values.dtype == object else values, field.type)
    return table.set_column(table.schema.get_field_index(name), name, array)


def piece_rows(table: Any, name: str, piece: int, plan: Plan) -> Any:
    """The rows of table `name` of piece `piece` as the whole set has them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "connection" not in table.column_names or not table.num_rows:
        return table
    names, chain = _names(table, piece, plan)
    keep = chain < 0 if name in CONNECTION_TABLES else np.ones(table.num_rows, dtype=bool)
    if name == "anomalies":
        if plan.dropped:
            (dropped,) = _per_key(table, ("connection", "direction", "kind", "stream_offset"),
                                  lambda c, d, k, o: (o is not None and
                                                      (piece, c, d, k, int(o)) in plan.dropped,),
                                  (bool,))  # fmt: skip
            keep &= ~dropped
        offsets = table["stream_offset"]
        moved = pc.add(offsets, pa.array(_offsets(table, piece, plan)[0]))
        has_connection = pc.is_valid(table["connection"])
        table = table.set_column(table.schema.get_field_index("stream_offset"), "stream_offset",
                                 pc.if_else(has_connection, moved, offsets))  # fmt: skip
    table = _set_column(table, "connection", names)
    return table.filter(pa.array(keep))


def chain_frames(frames: Any, piece: int, plan: Plan) -> Any:
    """The frames of the piece's chain parts, renamed, offsets moved, with their chain's key
    (`_chain`), their place (`_piece`, `_row`) and whether the frames across a cut replace
    them (`_replaced`)."""
    import pyarrow as pa

    names, chain = _names(frames, piece, plan)
    rows = np.flatnonzero(chain >= 0)
    picked = frames.take(pa.array(rows))
    local = picked["stream_offset"].to_numpy(zero_copy_only=False)
    shift, lo, hi, tail = _offsets(picked, piece, plan)
    picked = _set_column(picked, "stream_offset", local + shift)
    picked = _set_column(picked, "connection", names[rows])
    return (picked.append_column(CHAIN, pa.array(chain[rows], pa.int64()))
            .append_column(PIECE, pa.array(np.full(len(rows), piece), pa.int32()))
            .append_column(ROW, pa.array(rows, pa.int64()))
            .append_column(REPLACED, pa.array(((lo <= local) & (local < hi))
                                              | (local >= tail))))  # fmt: skip


def replay_rows(replay: Any, piece: int, plan: Plan) -> Any:
    """A piece's replay table (Protocol.replay_columns) as the whole set has it: every
    connection renamed, a chain part's offsets moved and its frames the frames across a
    cut replace left out; with each row's place (`_piece`, `_row`) for in_order."""
    import pyarrow as pa

    names, _ = _names(replay, piece, plan)
    local = replay["stream_offset"].to_numpy(zero_copy_only=False)
    shift, lo, hi, tail = _offsets(replay, piece, plan)  # (0, 0, 0, 2**62: of no chain)
    table = _set_column(replay, "stream_offset", local + shift)
    table = _set_column(table, "connection", names)
    table = (table.append_column(PIECE, pa.array(np.full(len(local), piece), pa.int32()))
             .append_column(ROW, pa.array(np.arange(len(local)), pa.int64())))  # fmt: skip
    return table.filter(pa.array(~(((lo <= local) & (local < hi)) | (local >= tail))))


def part_summaries(rows: list[dict], piece: int, plan: Plan) -> list[dict]:
    """A piece's connection summaries (engine.state.ConnectionSummary as dicts) as the set
    has them: renamed; a chain's parts left out (its summary is the plan's)."""
    return [dict(row, connection=plan.names.get((piece, row["connection"]), row["connection"]))
            for row in rows if (piece, row["connection"]) not in plan.part_chain]  # fmt: skip


ABOVE_NEGOTIATED = "above the negotiated frame max"  # (in the framer's frame_too_large detail)


def limited_parts(frames: Any, piece: int, plan: Plan) -> dict[tuple[str, str], int]:
    """The parts of `piece` that an earlier piece's Tune limits (plan.limits) and that have
    a frame above that limit (`frames`: the piece's own frames table), by (local id,
    direction)."""
    import pyarrow.compute as pc

    found = {}
    for (k, local, direction), frame_max in plan.limits.items():
        if k != piece:
            continue
        above = pc.and_(pc.and_(pc.equal(frames["connection"], local),
                                pc.equal(frames["direction"], direction)),
                        pc.greater(frames["size"], frame_max - 4))  # fmt: skip
        if pc.any(above).as_py():
            found[(local, direction)] = frame_max
    return found


def limit_anomalies(path: str, frames: Any, piece: int, plan: Plan, **options: Any) -> Any:
    """The frame_too_large rows a single run reports for the piece's own frames above a
    limit negotiated in an earlier piece (None: no such frame), as the set has them. The
    piece is dissected again with that limit known from the start, for those rows only:
    the time of each is when its size was read, which no frames table keeps."""
    import pyarrow as pa

    from streamdissect.rotated.facts import analyze_piece

    limits = limited_parts(frames, piece, plan)
    if not limits:
        return None
    analysis, _ = analyze_piece(path, limits=limits, **options)
    rows = analysis.arrow("anomalies")
    keep = []
    for row in rows.select(["connection", "direction", "kind", "stream_offset",
                            "detail"]).to_pylist():  # fmt: skip
        part = (row["connection"], row["direction"])
        # (the frames across the cut reported theirs: those before `upto`, and the frame in
        # progress there when they read its header)
        _, upto = plan.replaced.get((piece, *part), (0, 0))
        upto += (piece, *part) in plan.decided
        keep.append(part in limits and row["kind"] == "frame_too_large"
                    and ABOVE_NEGOTIATED in (row["detail"] or "")
                    and row["stream_offset"] >= upto)  # fmt: skip
    return piece_rows(rows.filter(pa.array(keep, pa.bool_())), "anomalies", piece, plan) \
        if any(keep) else None  # fmt: skip


def cut_frames(chain: Chain) -> Any:
    """The frames across a chain's cuts as its protocol's replay table (the Stream's: its
    frames table), with the piece that completed each (`_piece`)."""
    import pyarrow as pa

    from streamdissect.protocols.registry import protocol

    carried = protocol(chain.protocol)
    builder = carried.replay_columns()
    for _, event in chain.frames:
        builder.add(event)
    batches = builder.batches() if builder.rows else []
    table = pa.Table.from_batches(batches, schema=carried.replay_schema())
    pieces = [piece for piece, _ in chain.frames]
    return table.append_column(PIECE, pa.array(pieces, pa.int32()))


def in_order(pieces_frames: Any, cut: Any, by_time: bool = False) -> Any:
    """A chain's frames in capture order: each piece's in their order, and each frame across
    a cut before the first of its piece's frames that is not earlier (the cut's frames come
    from the first packets of the piece). `by_time`: the frames of several connections and
    pieces, in time first (a piece's own frames kept in their order), not piece by piece."""
    import pyarrow as pa

    names = [name for name in cut.column_names if name != PIECE]
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
    order = np.lexsort((row, first, piece, ts) if by_time else (row, first, ts, piece))
    both = pa.concat_tables([pieces_frames.select(names), cut.select(names)])
    return both.take(pa.array(order))


def _ts(frames: Any) -> np.ndarray:
    import pyarrow.compute as pc

    return pc.fill_null(frames["ts_ns"], 0).to_numpy(zero_copy_only=False).astype(np.int64)


def chain_tables(parts_frames: Any, chain: Chain, cut: Any, at_once_ms: float | None = None,
                 only: tuple[str, ...] = ()) -> dict:  # fmt: skip
    """Every table of CHAIN_TABLES of one chain (and those in `only`: the per-id ones, as a
    piece analysed with report_only off makes them), from its parts' frames (chain_frames
    of every piece) and the frames across its cuts (cut_frames), as pyarrow Tables.
    Throughput and errors, which add up over frames, are the chain's less what its parts'
    frames counted in their pieces."""
    import pyarrow.compute as pc

    from streamdissect.analysis.driver import analyze_events
    from streamdissect.protocols.registry import protocol

    carried = protocol(chain.protocol)
    kept = parts_frames.filter(pc.invert(parts_frames[REPLACED]))
    frames = in_order(kept, cut)
    c2s = pc.sum(pc.equal(frames["direction"], "c2s")).as_py() or 0
    summary = chain.summary.replaced(frames_c2s=c2s, frames_s2c=frames.num_rows - c2s)
    wanted = CHAIN_TABLES + only
    analysis = analyze_events(carried.replay_events(frames),
                              tcp_connections_after=lambda: [summary], at_once_ms=at_once_ms,
                              report_only=not only, tables=wanted, end_ns=chain.capture_end_ns,
                              protocol=carried.name)  # fmt: skip
    tables = {table: analysis.arrow(table) for table in wanted}
    summed = ("throughput", "errors")
    counted = analyze_events(carried.replay_events(parts_frames), tables=summed,
                             protocol=carried.name)  # fmt: skip
    for table in summed:
        tables[table] = _less(tables[table], counted.arrow(table), table)
    return tables


def _less(total: Any, counted: Any, table: str) -> Any:
    """`total` and `counted` with its counts negated: summed per key, the difference."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = {"throughput": total.column_names[1:], "errors": ["count"]}[table]
    for name in names:
        i = counted.schema.get_field_index(name)
        counted = counted.set_column(i, name, pc.negate(counted[name]))
    return pa.concat_tables([total, counted])
