"""A protocol analysed per server (Protocol.analysed_per_server: RocketMQ, whose latency,
offsets and clients are per server): every frame of one server's connections, from every
file of an archive, in one run of its analyses, in capture order. A rotated set's
connections are stitched by the same plan as the Stream's chains (stitch.py): each piece's
frames renamed and moved as the set has them, the frames across the cuts in their places.

The frames come as the protocol's replay tables (Protocol.replay_columns), one a piece,
kept by rotated.facts.analyze_piece; the connections' TCP facts as each piece's connection
summaries (engine.state.ConnectionSummary), a chain's from the plan."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from streamdissect.engine.state import ConnectionSummary
from streamdissect.rotated.apply import PIECE, ROW, in_order, part_summaries, replay_rows
from streamdissect.rotated.stitch import Chain, Plan


def server_of(connection: str) -> str:
    """The server's ip:port of a connection id `client-server[#n]` (IPv6 in brackets)."""
    return connection.split("-", 1)[-1].split("#", 1)[0]


def summary_rows(dissector_connections: Sequence[ConnectionSummary], name: str) -> list[dict]:
    """The summaries of a piece's connections of protocol `name`, as dicts."""
    return [c.as_dict() for c in dissector_connections if c.protocol == name]


def server_tables(name: str, pieces: Sequence[tuple[int, Any]],
                  summaries: Sequence[tuple[int, list[dict]]], chains: Sequence[Chain],
                  cuts: Sequence[Any], plan: Plan, tables: Sequence[str],
                  frames: bool = False) -> dict[str, Any]:  # fmt: skip
    """Protocol `name`'s tables (pyarrow) of one server: `pieces`, (piece, its replay table
    of the server's connections); `summaries`, (piece, its summaries of them); `chains`, the
    plan's chains of the server, and `cuts`, their frames across the cuts (apply.cut_frames);
    `tables`, which of its analysis tables (made alone: a table of a row a call only when
    named); `frames`: its frames table too."""
    import pyarrow as pa

    from streamdissect.analysis.driver import analyze_events
    from streamdissect.protocols.registry import protocol

    carried = protocol(name)
    empty = carried.replay_schema().empty_table()
    parts = [replay_rows(table, k, plan) for k, table in pieces]
    every = pa.concat_tables(parts) if parts else (
        empty.append_column(PIECE, pa.array([], pa.int32()))
        .append_column(ROW, pa.array([], pa.int64())))  # fmt: skip
    cut = pa.concat_tables(cuts) if cuts else empty.append_column(PIECE, pa.array([], pa.int32()))
    events = list(carried.replay_events(in_order(every, cut, by_time=True)))
    counted = Counter((e.connection, e.direction) for e in events)
    connections = [ConnectionSummary(**row) for k, rows in summaries
                   for row in part_summaries(rows, k, plan)]  # fmt: skip
    connections += [chain.summary for chain in chains]
    connections = [c.replaced(frames_c2s=counted[c.connection, "c2s"],
                              frames_s2c=counted[c.connection, "s2c"]) for c in connections]  # fmt: skip
    analysis = analyze_events(iter(events), tcp_connections_after=lambda: connections,
                              report_only=True, tables=tables, protocol=name)  # fmt: skip
    out = {table: analysis.arrow(table) for table in tables}
    if frames:
        builder = carried.frame_columns()
        for event in events:
            builder.add(event)
        batches = builder.batches(max(1, builder.rows)) if builder.rows else []
        from streamdissect.tables import schema

        out[carried.frames_table] = pa.Table.from_batches(
            batches, schema=schema.arrow_schema(carried.frames_table))  # fmt: skip
    return out
