"""What the Spark job's tasks do (jobs.py runs them): plain functions over files, so each
runs in a Python worker with the core, and writes its rows as Parquet part files itself.

1. `analyse_pieces`: each file analysed apart (rotated.facts.analyze_piece), every table's
   rows written under `work/TABLE/part-FILE.parquet`; the edge facts of the file returned.
2. `stitch_piece`: a file of a rotated set: its rows rewritten as the whole set has them
   (rotated.apply.piece_rows); the frames of its chain parts written per chain bucket.
3. `analyse_chains`: the chains of one bucket, each analysed from all its frames
   (rotated.apply.chain_tables); their rows written like any file's.
4. `analyse_server`: a protocol analysed per server (Protocol.analysed_per_server:
   RocketMQ): every frame of one server's connections from every file, a rotated set's
   stitched by the plan, analysed in one run (rotated.servers.server_tables); its tables'
   rows written.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from streamdissect.tables import schema

# What the tasks write: the job's tables, with requests in place of latency (and the per-id
# tables when asked for: options["per_id"]).
TASK_TABLES = ("connections", "requests", "confirms", "credit", "stalls", "deliveries",
               "throughput", "errors", "anomalies")  # fmt: skip
FRAMES_DIR = "_chain_frames"
SERVERS_DIR = "_servers"


def timed(task: Callable) -> Callable:
    """The task, its time in the worker added to options["clock"] (a Spark accumulator):
    the job's work, without scheduling and start-up (benchmarks/spark.py)."""

    def run(*args: Any) -> Any:
        started = time.perf_counter()
        try:
            return task(*args)
        finally:
            clock = args[-1].get("clock")
            if clock is not None:
                clock.add(time.perf_counter() - started)

    run.__name__ = task.__name__
    run.__doc__ = task.__doc__
    return run


def part_file(work: str, table: str, name: str) -> str:
    return os.path.join(work, table, f"part-{name}.parquet")


def part_path(work: str, table: str, name: str) -> str:
    """part_file, its folder made."""
    os.makedirs(os.path.join(work, table), exist_ok=True)
    return part_file(work, table, name)


def _write(arrow: Any, work: str, table: str, name: str) -> int:
    if arrow.num_rows:
        write_whole(arrow, part_path(work, table, name))
    return arrow.num_rows


def write_whole(arrow: Any, where: str) -> None:
    """A part file written whole or not at all: under a hidden name, then renamed over
    `where` (a task attempt killed mid-write leaves no cut part; its retry writes it again).
    Hidden files (a leading dot) are not read by Spark, pyarrow or visible_parts."""
    import pyarrow.parquet as pq

    folder, name = os.path.split(where)
    hidden = os.path.join(folder, f".{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    pq.write_table(arrow, hidden)
    os.replace(hidden, where)


def visible_parts(folder: str) -> list[str]:
    """The part files of a folder, by name (not the hidden ones write_whole and
    first_stage make)."""
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return sorted(n for n in names if not n.startswith((".", "_")))


def first_stage(where: str) -> str:
    """The first stage's part file as that stage wrote it: kept (a hard link, hidden) by
    the first stitch attempt before it rewrites the part, and read by every attempt, so a
    retried task writes what the first would have, never the rows stitched twice."""
    folder, name = os.path.split(where)
    kept = os.path.join(folder, f".{name}.first")
    with contextlib.suppress(FileExistsError):
        os.link(where, kept)
    return kept


@timed
def analyse_pieces(item: list[tuple[int, str]], options: dict) -> list[tuple[int, Any]]:
    """(Task.) Each file of the group analysed; its rows written; (file index, facts)."""
    from streamdissect.capture import CaptureError
    from streamdissect.rotated.facts import PieceFacts, analyze_piece

    found = []
    for k, path in item:
        replays: dict | None = {} if options.get("per_server") else None
        try:
            wanted = options.get("messages")
            analysis, facts = analyze_piece(path, ports=options["ports"],
                                            heuristic=options["heuristic"],
                                            report_only=not options["per_id"],
                                            helper_process=False, replays=replays,
                                            messages=wanted is not None,
                                            **(wanted or {}))  # fmt: skip
        except CaptureError as exc:  # (a row of the anomalies table says why; the job goes on)
            _write(unreadable(path, str(exc)), options["work"], "anomalies", f"{k:05d}")
            found.append((k, PieceFacts(path, None, None)))
            continue
        for table in TASK_TABLES + options["per_id"]:
            _write(analysis.arrow(table), options["work"], table, f"{k:05d}")
        if options["frames"]:
            _write(_frames(path, options), options["work"], "frames", f"{k:05d}")
        if replays:
            _write_per_server(k, replays, analysis.tcp_connections, options["work"])
        if wanted is not None:  # (each file's messages, as the file alone numbers its frames)
            _write(analysis.arrow("messages"), options["work"], "messages", f"{k:05d}")
        found.append((k, facts))
    return found


def server_folder(work: str, protocol: str, server: str) -> str:
    """Where the frames and connections of a server of a protocol analysed per server go
    (a folder name of the server's: an IPv6 address has brackets and colons)."""
    import hashlib

    key = hashlib.sha1(server.encode()).hexdigest()[:16]  # (a name, no secret)
    return os.path.join(work, SERVERS_DIR, protocol, key)


def _write_per_server(k: int, replays: dict, connections: list, work: str) -> None:
    """A file's frames (replay tables) and connection summaries of each protocol analysed
    per server, written by server: stage 4's input."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from streamdissect.rotated.servers import server_of, summary_rows

    for name, builder in replays.items():
        replay = pa.Table.from_batches(builder.batches())
        servers = pa.array([server_of(c) for c in replay["connection"].to_pylist()], pa.string())
        summaries = summary_rows(connections, name)
        for server in sorted(set(servers.to_pylist())):
            folder = server_folder(work, name, server)
            _write(replay.filter(pc.equal(servers, server)), folder, "replay", f"{k:05d}")
            mine = [row for row in summaries if row["server"] == server]
            if mine:
                _write(pa.Table.from_pylist(mine), folder, "summaries", f"{k:05d}")


def unreadable(path: str, reason: str) -> Any:
    """The anomalies row of a file that is no readable capture (empty, not a capture)."""
    import pyarrow as pa

    row = {"ts_ns": None, "connection": None, "direction": None, "kind": "unreadable_file",
           "stream_offset": None, "length": None, "detail": reason if path in reason
           else f"{path}: {reason}"}  # fmt: skip
    return pa.Table.from_pylist([row], schema=schema.arrow_schema("anomalies"))


def _frames(path: str, options: dict) -> Any:
    """The file's frames, decoded as its analysis decoded them."""
    from streamdissect.rotated.local import piece_frames

    return piece_frames(path, options["ports"], options["heuristic"],
                        not options["per_id"])


def bucket_of(key: Any, buckets: int) -> Any:
    """The bucket (a stage-3 task) of a chain's key (or a numpy array of keys)."""
    return key % buckets


@timed
def stitch_piece(k: int, path: str, plan: Any, options: dict) -> int:
    """(Task.) A file of a rotated set: its rows as the set has them, its chain frames out."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from streamdissect.rotated.apply import CHAIN, REPLACED, chain_frames, piece_rows

    work = options["work"]
    tables = TASK_TABLES + options["per_id"] + (("frames",) if options["frames"] else ())
    own_frames = None  # (the piece's frames, when the frames table was asked for)
    for table in tables:
        where = part_file(work, table, f"{k:05d}")
        if not os.path.exists(where):
            continue
        rows = pq.read_table(first_stage(where), schema=schema.arrow_schema(table))
        if table == "frames":
            own_frames = rows
            moved = chain_frames(rows, k, plan)  # (the frames table keeps the chains' too)
            kept = moved.filter(pc.invert(moved[REPLACED])).select(schema.column_names(table))
            rows = pa.concat_tables([piece_rows(rows, table, k, plan), kept])
        else:
            rows = piece_rows(rows, table, k, plan)
        write_whole(rows, where)
    if not _chained_here(plan, k):
        return 0
    if own_frames is None:  # (else the frames table's part: no second dissection)
        own_frames = _frames(path, options)
    _add_limit_anomalies(k, path, plan, own_frames, options)
    frames = chain_frames(own_frames, k, plan)
    buckets = options["buckets"]
    which = pa.array(bucket_of(frames[CHAIN].to_numpy(), buckets))
    for b in sorted(set(which.to_pylist())):
        _write(frames.filter(pc.equal(which, b)), os.path.join(work, FRAMES_DIR, f"{b:05d}"),
               "frames", f"{k:05d}")  # fmt: skip
    return frames.num_rows


def _add_limit_anomalies(k: int, path: str, plan: Any, own_frames: Any, options: dict) -> None:
    """The file's frames above a frame max negotiated in an earlier file of its set: their
    frame_too_large rows added to its anomalies part (rotated.apply.limit_anomalies)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from streamdissect.rotated.apply import limit_anomalies

    rows = limit_anomalies(path, own_frames, k, plan, ports=options["ports"],
                           heuristic=options["heuristic"], report_only=not options["per_id"],
                           helper_process=False)  # fmt: skip
    if rows is None:
        return
    where = part_file(options["work"], "anomalies", f"{k:05d}")
    if os.path.exists(where):
        rows = pa.concat_tables([pq.read_table(where, schema=schema.arrow_schema("anomalies")),
                                 rows.cast(schema.arrow_schema("anomalies"))])  # fmt: skip
    _write(rows, options["work"], "anomalies", f"{k:05d}")


def _locals(plan: Any, k: int) -> list[str]:
    return [local for piece, local in plan.names if piece == k]


def _chained_here(plan: Any, k: int) -> bool:
    """Whether a part of the piece is in a chain of stages 2 and 3 (a protocol analysed per
    server has its chains analysed in stage 4)."""
    from streamdissect.protocols.registry import protocol

    keys = {plan.chain_of(k, part) for part in _locals(plan, k)} - {None}
    # (the stages' plan holds their chains only: jobs._stitch)
    return any(key in plan.chains and not protocol(plan.chains[key].protocol).analysed_per_server
               for key in keys)  # fmt: skip


@timed
def analyse_chains(bucket: int, chains: list[tuple[Any, bytes]], options: dict) -> int:
    """(Task.) Each chain of the bucket analysed from its frames; its rows written."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from streamdissect.rotated.apply import CHAIN, CONNECTION_TABLES, chain_tables

    work = options["work"]
    folder = os.path.join(work, FRAMES_DIR, f"{bucket:05d}", "frames")
    files = visible_parts(folder)
    every = pa.concat_tables([pq.read_table(os.path.join(folder, f)) for f in files]) if files \
        else None  # fmt: skip
    parts: dict[str, list] = {}
    for chain, cut_ipc in chains:
        cut = pa.ipc.open_stream(cut_ipc).read_all()
        mine = _no_frames() if every is None else every.filter(pc.equal(every[CHAIN], chain.key))
        tables = chain_tables(mine, chain, cut, only=options["per_id"])
        for table in TASK_TABLES + options["per_id"]:
            if table in CONNECTION_TABLES or table in ("throughput", "errors"):
                parts.setdefault(table, []).append(tables[table])
    rows = 0
    for table, pieces in parts.items():
        rows += _write(pa.concat_tables(pieces), work, table, f"chains-{bucket:05d}")
    return rows


def _no_frames() -> Any:
    """Parts' frames of a chain that has none (only frames across its cuts)."""
    import pyarrow as pa

    from streamdissect.rotated.apply import CHAIN, PIECE, REPLACED, ROW

    table = schema.arrow_schema("frames").empty_table()
    return (table.append_column(CHAIN, pa.array([], pa.int64()))
            .append_column(PIECE, pa.array([], pa.int32()))
            .append_column(ROW, pa.array([], pa.int64()))
            .append_column(REPLACED, pa.array([], pa.bool_())))  # fmt: skip


@timed
def analyse_server(item: tuple, plan: Any, options: dict) -> int:
    """(Task.) One server of a protocol analysed per server: (protocol, its folder, the
    plan's chains of the server, their frames across the cuts as Arrow IPC); its tables'
    rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from streamdissect.rotated.servers import server_tables

    name, folder, chains, cuts_ipc = item
    pieces, summaries = [], []
    for part in visible_parts(os.path.join(folder, "replay")):
        k = int(part.removeprefix("part-").removesuffix(".parquet"))
        pieces.append((k, pq.read_table(os.path.join(folder, "replay", part))))
    for part in visible_parts(os.path.join(folder, "summaries")):
        k = int(part.removeprefix("part-").removesuffix(".parquet"))
        summaries.append((k, pq.read_table(os.path.join(folder, "summaries", part)).to_pylist()))
    cuts = [pa.ipc.open_stream(data).read_all() for data in cuts_ipc]
    from streamdissect.protocols.registry import protocol

    wanted = options["per_server"][name]
    frames_table = protocol(name).frames_table
    tables = server_tables(name, pieces, summaries, chains, cuts, plan,
                           [t for t in wanted if t != frames_table],
                           frames=frames_table in wanted)  # fmt: skip
    rows = 0
    for table, arrow in tables.items():
        rows += _write(arrow, options["work"], table, f"{name}-{os.path.basename(folder)}")
    return rows
