"""A rotated set analysed in one process, the way the Spark job does it across tasks: each
piece analysed apart, the plan made from their edges, the chains analysed from their frames.
The tests hold it (and the Spark job) equal to `analysis.analyze` of the pieces as one
capture."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streamdissect.rotated.apply import (
    CHAIN,
    CONNECTION_TABLES,
    chain_frames,
    chain_tables,
    cut_frames,
    limit_anomalies,
    piece_rows,
)
from streamdissect.rotated.facts import analyze_piece
from streamdissect.rotated.stitch import plan
from streamdissect.tables import schema

# The tables of analysis.analyze that the stitching changes, and throughput and errors,
# which add up over frames.
TABLES = ("connections", "requests", "confirms", "credit", "stalls", "deliveries",
          "throughput", "errors", "anomalies")  # fmt: skip


def analyze_set(paths: Sequence[str], ports: Sequence[int] = (5552,), heuristic: bool = True,
                **options: Any) -> dict[str, Any]:  # fmt: skip
    """The tables (pyarrow) of the files as one capture: per piece, then stitched."""
    import pyarrow as pa
    import pyarrow.compute as pc

    analyses, pieces = [], []
    for path in paths:
        analysis, facts = analyze_piece(path, ports=ports, heuristic=heuristic,
                                        report_only=True, **options)  # fmt: skip
        analyses.append(analysis)
        pieces.append(facts)
    the_plan = plan(pieces)
    parts: dict[str, list] = {table: [] for table in TABLES}
    for k, analysis in enumerate(analyses):
        for table in TABLES:
            arrow = analysis.arrow(table)
            parts[table].append(piece_rows(arrow, table, k, the_plan))
    if the_plan.chains:
        frames = []
        for k, path in enumerate(paths):
            own = piece_frames(path, ports, heuristic)
            frames.append(chain_frames(own, k, the_plan))
            limited = limit_anomalies(path, own, k, the_plan, ports=ports, heuristic=heuristic,
                                      report_only=True, **options)  # fmt: skip
            if limited is not None:  # (a limit negotiated in an earlier piece)
                parts["anomalies"].append(limited)
        every = pa.concat_tables(frames)
        for key, chain in the_plan.chains.items():
            mine = every.filter(pc.equal(every[CHAIN], key))
            tables = chain_tables(mine, chain, cut_frames(chain))
            for table in TABLES:
                if table in CONNECTION_TABLES:
                    parts[table].append(tables[table])
            for table in ("throughput", "errors"):  # (the chain's less its parts' counts)
                parts[table].append(tables[table])
    if the_plan.anomalies:
        parts["anomalies"].append(anomaly_rows(the_plan.anomalies))
    return {table: sum_up(table, pa.concat_tables(parts[table])) for table in TABLES}


def piece_frames(path: str, ports: Sequence[int], heuristic: bool,
                 report_only: bool = True) -> Any:  # fmt: skip
    """A piece's frames, decoded as analyze(report_only=...) decodes them (its report: no
    Deliver body kept, so no CRC checked)."""
    from streamdissect.framing.framer import DELIVER_KEEP_LIMIT
    from streamdissect.tables.batches import frames_arrow

    return frames_arrow(path, ports=ports, heuristic=heuristic,
                        deliver_keep_limit=0 if report_only else DELIVER_KEEP_LIMIT)  # fmt: skip


def to_arrow(table: str, frame: Any) -> Any:
    """A pandas table of `analyze()` as Arrow, by pyarrow's own conversion (what the tests
    hold Analysis.arrow and the stitched tables to)."""
    import pyarrow as pa

    return pa.Table.from_pandas(frame[schema.column_names(table)],
                                schema=schema.arrow_schema(table), preserve_index=False)  # fmt: skip


def anomaly_rows(anomalies: list) -> Any:
    import pyarrow as pa

    names = schema.column_names("anomalies")
    rows = [{n: getattr(a, n) for n in names} for a in anomalies]
    return pa.Table.from_pylist(rows, schema=schema.arrow_schema("anomalies"))


def sum_up(table: str, arrow: Any) -> Any:
    """Throughput and errors summed per second / per (command, code), as one run counts."""
    import pyarrow.compute as pc

    keys = {"throughput": ["second_ns"], "errors": ["command", "code", "code_name"]}.get(table)
    if keys is None:
        return arrow
    names = schema.column_names(table)
    sums = arrow.group_by(keys).aggregate([(c, "sum") for c in names if c not in keys])
    sums = sums.rename_columns([c.removesuffix("_sum") for c in sums.column_names]).select(names)
    counted = None  # (a key whose counts the stitching took back to nothing is no row)
    for name in names:
        if name not in keys:
            nonzero = pc.not_equal(sums[name], 0)
            counted = nonzero if counted is None else pc.or_(counted, nonzero)
    sums = sums.filter(counted)
    return sums.sort_by(keys[0]) if table == "throughput" else sums


def analyze_servers(paths: Sequence[str], name: str, tables: Sequence[str],
                    ports: Sequence[int] = (5552,), heuristic: bool = True,
                    frames: bool = False) -> dict[str, Any]:  # fmt: skip
    """The tables (pyarrow) of protocol `name`, one analysed per server, of the files as one
    capture, the way the Spark job makes them (each file apart, the plan, a run a server):
    each table's rows of every server, concatenated."""
    import pyarrow as pa

    from streamdissect.rotated.servers import server_of, server_tables, summary_rows

    replays, pieces = [], []
    for path in paths:
        kept: dict = {}
        analysis, facts = analyze_piece(path, ports=ports, heuristic=heuristic,
                                        report_only=True, replays=kept)  # fmt: skip
        replay = kept.get(name)
        replays.append((None if replay is None else pa.Table.from_batches(replay.batches()),
                        summary_rows(analysis.tcp_connections, name)))  # fmt: skip
        pieces.append(facts)
    the_plan = plan(pieces)
    servers = {server_of(c.name) for c in the_plan.chains.values() if c.protocol == name}
    servers |= {row["server"] for _, rows in replays for row in rows}
    made: dict[str, list] = {}
    for server in sorted(servers):
        mine = [(k, t.filter(pa.array([server_of(c) == server for c in
                                        t["connection"].to_pylist()], pa.bool_())))
                for k, (t, _) in enumerate(replays) if t is not None]  # fmt: skip
        summaries = [(k, [r for r in rows if r["server"] == server])
                     for k, (_, rows) in enumerate(replays)]  # fmt: skip
        chains = [c for c in the_plan.chains.values()
                  if c.protocol == name and server_of(c.name) == server]  # fmt: skip
        out = server_tables(name, mine, summaries, chains, [cut_frames(c) for c in chains],
                            the_plan, tables, frames)  # fmt: skip
        for table, arrow in out.items():
            made.setdefault(table, []).append(arrow)
    return {table: pa.concat_tables(parts) for table, parts in made.items()}
