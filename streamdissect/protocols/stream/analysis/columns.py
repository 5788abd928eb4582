"""Analyses over columns: frame batches in (schema.FRAMES), a table's rows out.

Each function takes the frames of one or more connections as a pyarrow.Table (or batches)
and computes with numpy over whole columns, no per-frame Python: the same code can run per
connection group (Spark) and over a whole capture. The record-based collectors
(consumption.py) stay the reference: tests and the fuzz campaign hold these equal to them.

    frames = frame_batches.frames_arrow("capture.pcap")
    columns.deliveries(frames)     # the deliveries table (consumer lag), pyarrow
    columns.throughput(frames)     # the throughput table
    publishes, confirms, backlog = columns.confirm_ledger(frames)
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from streamdissect.analysis.percentiles import summarize_ms
from streamdissect.tables import schema

NS_PER_S = 1_000_000_000


def deliveries(frames: Any) -> Any:
    """One row per Deliver frame (schema.DELIVERIES): lag = committed chunk id - the chunk's
    first offset (Deliver v2), delivery latency = capture time - the chunk timestamp."""
    import pyarrow.compute as pc

    frames = _table(frames)
    rows = frames.filter(pc.equal(frames["command"], "Deliver"))
    committed, first = rows["committed_chunk_id"], rows["chunk_id"]
    chunk_ts = rows["chunk_timestamp_ms"]
    columns = {
        "ts_ns": rows["ts_ns"],
        "connection": rows["connection"],
        "subscription_id": rows["subscription_id"],
        "chunk_first_offset": first,
        "num_records": rows["record_count"],
        "num_entries": rows["num_entries"],
        "chunk_type": rows["chunk_type"],
        "chunk_timestamp_ms": chunk_ts,
        "committed_chunk_id": committed,
        "lag": _difference(committed, first),
        "delivery_latency_ms": _latency_ms(rows["ts_ns"], chunk_ts),
        "size": rows["size"],
        "crc_ok": rows["crc_ok"],
    }  # fmt: skip
    return _result("deliveries", columns)


def throughput(frames: Any) -> Any:
    """Messages and bytes per second of capture time (schema.THROUGHPUT): published
    (Publish records, frame bytes), confirmed (PublishConfirm ids), delivered (Deliver
    records, frame bytes). A frame counts its bytes even when its fields could not be read;
    one whose time does not fit int64 (a hostile capture) has no second and is left out."""
    import pyarrow.compute as pc

    frames = _table(frames)
    command = frames["command"]
    kinds = {name: pc.fill_null(pc.equal(command, name), False).to_numpy(zero_copy_only=False)
             for name in ("Publish", "PublishConfirm", "Deliver")}  # fmt: skip
    wanted = kinds["Publish"] | kinds["PublishConfirm"] | kinds["Deliver"]
    ts = frames["ts_ns"].to_numpy(zero_copy_only=False)
    known_ts = ~pc.is_null(frames["ts_ns"]).to_numpy(zero_copy_only=False)
    wanted &= known_ts  # (a time out of range cannot be put in a second: see schema.fit)
    seconds = np.floor_divide(np.where(wanted, ts, 0).astype(np.int64), NS_PER_S)
    records = _int_or_zero(frames["record_count"])
    frame_bytes = _int_or_zero(frames["size"]) + 4
    confirmed = _int_or_zero(pc.list_value_length(frames["publishing_ids"]))
    per_frame = {
        "published_msgs": np.where(kinds["Publish"], records, 0),
        "published_bytes": np.where(kinds["Publish"], frame_bytes, 0),
        "confirmed_msgs": np.where(kinds["PublishConfirm"], confirmed, 0),
        "delivered_msgs": np.where(kinds["Deliver"], records, 0),
        "delivered_bytes": np.where(kinds["Deliver"], frame_bytes, 0),
    }
    buckets, where = np.unique(seconds[wanted], return_inverse=True)
    columns: dict[str, Any] = {"second_ns": buckets * NS_PER_S}
    for name, values in per_frame.items():
        sums = np.zeros(len(buckets), dtype=np.int64)  # (exact integer sums, not bincount's floats)
        np.add.at(sums, where, values[wanted])
        columns[name] = sums
    return _result("throughput", columns)


def _latency_ms(ts_ns: Any, chunk_ts_ms: Any) -> Any:
    """ts / 1e6 - chunk timestamp, rounded as Python computes it (each int to the nearest
    float64 first); null where the chunk timestamp is."""
    import pyarrow as pa
    import pyarrow.compute as pc

    known = pc.and_(pc.is_valid(ts_ns), pc.is_valid(chunk_ts_ms)).to_numpy(zero_copy_only=False)
    ts = pc.fill_null(ts_ns, 0).to_numpy(zero_copy_only=False).astype(np.float64)
    chunk = pc.fill_null(chunk_ts_ms, 0).to_numpy(zero_copy_only=False).astype(np.float64)
    return pa.array(ts / 1e6 - chunk, pa.float64(), mask=~known)


def _table(frames: Any) -> Any:
    import pyarrow as pa

    if isinstance(frames, pa.Table):
        return frames
    return pa.Table.from_batches(list(frames), schema=schema.arrow_schema("frames"))


def _int_or_zero(column: Any) -> Any:
    """An int64 array of the column, 0 where it is null."""
    import pyarrow.compute as pc

    return pc.fill_null(column, 0).to_numpy(zero_copy_only=False).astype(np.int64)


def _difference(a: Any, b: Any) -> Any:
    """a - b of two u64 columns as int64, null where either is null or the difference does
    not fit int64 (what the table's column holds of it: schema.fit)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    valid = pc.and_(pc.is_valid(a), pc.is_valid(b)).to_numpy(zero_copy_only=False)
    x = pc.fill_null(a, 0).to_numpy(zero_copy_only=False).astype(np.uint64)
    y = pc.fill_null(b, 0).to_numpy(zero_copy_only=False).astype(np.uint64)
    ahead = x >= y
    magnitude = np.where(ahead, x - y, y - x)  # (exact in uint64)
    fits = magnitude <= np.uint64(2**63 - 1)
    fits |= ~ahead & (magnitude == np.uint64(2**63))  # -2**63 fits too
    signed = np.where(ahead, magnitude.astype(np.int64),
                      (~magnitude + np.uint64(1)).astype(np.int64))  # fmt: skip
    return pa.array(signed, pa.int64(), mask=~(valid & fits))


def _result(table: str, columns: dict[str, Any]) -> Any:
    import pyarrow as pa

    arrays = []
    for column in schema.TABLES[table]:
        values = columns[column.name]
        arrow_type = schema.arrow_type(column.kind)
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if not isinstance(values, pa.Array):
            values = pa.array(values, arrow_type)
        arrays.append(values if values.type == arrow_type else values.cast(arrow_type))
    return pa.Table.from_arrays(arrays, schema=schema.arrow_schema(table))


LIFECYCLE_COMMANDS = ("Tune", "PeerProperties", "SaslAuthenticate", "Open", "Close")


def connections(frames: Any, tcp_connections: list | None = None) -> Any:
    """One row per connection (schema.CONNECTIONS): the TCP facts of the dissector's
    connections table with what the frames say. Counts and heartbeat silences over columns;
    the few handshake frames (Tune, PeerProperties, SaslAuthenticate, Open, Close) one by
    one, in order. A silence counts when a direction is quiet for more than twice the
    heartbeat negotiated before the frame that ends it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from streamdissect.analysis.fields import get

    frames = _table(frames)
    n = frames.num_rows
    # connections numbered in order of first appearance (Arrow's dictionary encoding, in C)
    conn_names, conn = _connection_numbers(frames)
    names = np.array(conn_names, dtype=object)
    # (a time past int64, from a hostile capture, is null in the frames: taken as 0 here)
    ts = _int_or_zero(frames["ts_ns"])
    c2s = pc.fill_null(pc.equal(frames["direction"], "c2s"), False).to_numpy(zero_copy_only=False)
    command = frames["command"]
    facts = [_Facts() for _ in names]
    rows = np.arange(n)
    # first and last frame of each connection, in frame order
    first_row = np.full(len(names), n, dtype=np.int64)
    np.minimum.at(first_row, conn, rows)
    last_row = np.full(len(names), -1, dtype=np.int64)
    np.maximum.at(last_row, conn, rows)
    heartbeat = pc.fill_null(pc.equal(command, "Heartbeat"), False).to_numpy(zero_copy_only=False)
    beats_c2s = np.bincount(conn[heartbeat & c2s], minlength=len(names))
    beats_s2c = np.bincount(conn[heartbeat & ~c2s], minlength=len(names))
    for k, fact in enumerate(facts):
        fact.first_ns, fact.last_ns = int(ts[first_row[k]]), int(ts[last_row[k]])
        fact.heartbeats = {"c2s": int(beats_c2s[k]), "s2c": int(beats_s2c[k])}
    # the rare frames, in order; the heartbeat in force after each Tune
    rare = pc.is_in(command, value_set=pa.array(LIFECYCLE_COMMANDS))
    rare_rows = np.flatnonzero(pc.fill_null(rare, False).to_numpy(zero_copy_only=False))
    picked = frames.take(rare_rows).to_pylist()
    tunes: dict[int, tuple[list[int], list]] = {}
    for row, frame in zip(rare_rows.tolist(), picked):
        k = int(conn[row])
        value = _lifecycle_frame(facts[k], frame, json.loads(frame["fields"] or "{}"))
        if frame["command"] == "Tune":
            where, values = tunes.setdefault(k, ([], []))
            where.append(row)
            values.append(value)
    # silences: consecutive frames of one direction further apart than 2 heartbeats
    in_force = np.zeros(n, dtype=np.int64)  # the heartbeat before each frame (0: none)
    for k, (where, values) in tunes.items():
        mine = np.flatnonzero(conn == k)  # (once per connection that has a Tune)
        after = np.searchsorted(np.asarray(where), mine, side="left") - 1  # last Tune before
        known = np.array([0] + [v or 0 for v in values], dtype=np.int64)
        in_force[mine] = known[after + 1]
    order = np.lexsort((rows, c2s, conn))  # by connection, direction, then frame order
    same = (conn[order][1:] == conn[order][:-1]) & (c2s[order][1:] == c2s[order][:-1])
    gap = ts[order][1:] - ts[order][:-1]
    beat = in_force[order][1:]
    missed = same & (beat > 0) & (gap > 2 * beat * NS_PER_S)
    counts = np.bincount(conn[order][1:][missed], minlength=len(names))
    for k, fact in enumerate(facts):
        fact.missed_gaps = int(counts[k])
    ordered = dict(zip(names.tolist(), facts))  # (in order of first appearance)
    return _connections_table(ordered, tcp_connections or [], get)


class _Facts:
    """What the frames say of one connection (lifecycle.LifecycleCollector's _Conn)."""

    def __init__(self) -> None:
        self.first_ns = self.last_ns = None
        self.handshake_ms = self.sasl_mechanism = self.user = self.vhost = None
        self.frame_max = self.heartbeat = None
        self.heartbeats = {"c2s": 0, "s2c": 0}
        self.missed_gaps = 0
        self.client_properties = self.server_properties = None
        self.close_code = self.close_reason = self.closed_by = None


def _lifecycle_frame(c: _Facts, frame: dict, fields: dict) -> Any:
    """One handshake frame, as the collector's on_* method takes it; a Tune returns the
    heartbeat in force after it."""
    command, response = frame["command"], frame["response"]
    if command == "Tune":
        if frame["direction"] == "s2c":
            c.frame_max = c.frame_max if c.frame_max is not None else frame["frame_max"]
            c.heartbeat = c.heartbeat if c.heartbeat is not None else frame["heartbeat"]
        else:  # the client's reply is what the connection runs with
            c.frame_max, c.heartbeat = frame["frame_max"], frame["heartbeat"]
        return c.heartbeat
    if command == "PeerProperties":
        if response:
            c.server_properties = fields.get("properties")
        else:
            c.client_properties = fields.get("properties")
    elif command == "SaslAuthenticate" and not response:
        c.sasl_mechanism = fields.get("mechanism")
        if fields.get("username") is not None:
            c.user = fields["username"]
    elif command == "Open":
        if not response:
            c.vhost = fields.get("virtual_host")
        elif c.handshake_ms is None and frame["ts_ns"] is not None:
            c.handshake_ms = (frame["ts_ns"] - c.first_ns) / 1e6
    elif command == "Close" and not response and c.closed_by is None:
        c.closed_by = "client" if frame["direction"] == "c2s" else "server"
        c.close_code, c.close_reason = fields.get("closing_code"), fields.get("closing_reason")
    return None


def _connections_table(facts: dict, tcp_connections: list, get: Any) -> Any:
    tcp_by_id = {get(t, "connection"): t for t in tcp_connections}
    ids = list(tcp_by_id) + [cid for cid in facts if cid not in tcp_by_id]  # (first seen)
    table: dict[str, list] = {c.name: [] for c in schema.CONNECTIONS}
    for cid in ids:
        c = facts.get(cid) or _Facts()
        t = tcp_by_id.get(cid)
        tcp_end = get(t, "tcp_end") or get(t, "ended_by") or get(t, "end_reason")
        closed_by = c.closed_by
        if closed_by is None and tcp_end in ("fin", "rst"):
            closed_by = "TCP closed without Close"
        row = {
            "connection": cid, "client": get(t, "client"), "server": get(t, "server"),
            "start_ns": get(t, "start_ns", c.first_ns), "end_ns": get(t, "end_ns", c.last_ns),
            "frames_c2s": get(t, "frames_c2s"), "frames_s2c": get(t, "frames_s2c"),
            "bytes_c2s": get(t, "bytes_c2s"), "bytes_s2c": get(t, "bytes_s2c"),
            "handshake_ms": c.handshake_ms, "sasl_mechanism": c.sasl_mechanism, "user": c.user,
            "vhost": c.vhost, "frame_max": c.frame_max, "heartbeat": c.heartbeat,
            "heartbeats_c2s": c.heartbeats["c2s"], "heartbeats_s2c": c.heartbeats["s2c"],
            "missed_heartbeat_gaps": c.missed_gaps,
            "client_properties": _sorted_json(c.client_properties),
            "server_properties": _sorted_json(c.server_properties),
            "close_code": c.close_code, "close_reason": c.close_reason,
            "closed_by": closed_by, "tcp_end": tcp_end,
        }  # fmt: skip
        for column in schema.CONNECTIONS:
            table[column.name].append(schema.fit(column.kind, row[column.name]))
    return _result("connections", table)


def _sorted_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


# --- request/response pairing and errors: over the few rows that are calls ---------------


class _RowEvent:
    """A frame row read as the collectors read an event and its record (attributes)."""

    __slots__ = ("_row", "connection", "direction", "record", "ts_ns")

    def __init__(self, row: dict) -> None:
        self._row = row
        self.ts_ns, self.connection, self.direction = (
            row["ts_ns"],
            row["connection"],
            row["direction"],
        )
        self.record = self

    def __getattr__(self, name: str) -> Any:
        return self._row.get(name)


def _rows_of(frames: Any, commands: Any) -> list[dict]:
    """The rows whose command is one of `commands`, in frame order, as dicts."""
    import pyarrow as pa
    import pyarrow.compute as pc

    wanted = pc.fill_null(pc.is_in(frames["command"], value_set=pa.array(sorted(commands))), False)
    return frames.filter(wanted).to_pylist()


def _pairing(frames: Any) -> Any:
    """The latency collector (latency.py, the same code) fed with the rows that are calls:
    a handful of frames, whatever the traffic."""
    from streamdissect.protocols.stream.analysis.latency import NOT_CALLS, LatencyCollector
    from streamdissect.protocols.stream.spec import COMMANDS

    collector = LatencyCollector()
    for row in _rows_of(_table(frames), set(COMMANDS) - NOT_CALLS):
        if row["ts_ns"] is not None:  # (a time past int64 cannot be paired by time)
            collector.on_frame(_RowEvent(row))
    return collector


def requests(frames: Any) -> Any:
    """Every request with its response, or open, or an orphan response (schema.REQUESTS)."""
    return _rows_result("requests", _pairing(frames).rows)


def latency(frames: Any) -> Any:
    """Per command: calls, answered, open, orphans, duplicate ids, latency percentiles
    (schema.LATENCY), like Wireshark's SRT tables."""
    return _rows_result("latency", _pairing(frames).summary())


def errors(frames: Any) -> Any:
    """Every non-OK code by the command it answers, and PublishError's codes (schema.ERRORS)."""
    import pyarrow.compute as pc

    from streamdissect.protocols.stream.analysis.errors import ErrorCollector

    frames = _table(frames)
    collector = ErrorCollector()
    coded = pc.fill_null(pc.not_equal(frames["code"], 1), False)  # (null codes: no code)
    for row in frames.filter(coded).to_pylist():
        collector.on_response(_RowEvent(row))
    for row in _rows_of(frames, {"PublishError"}):
        fields = json.loads(row["fields"] or "{}")
        collector.on_publish_error(_RowEvent(row | {"errors": fields.get("errors")}))
    return _rows_result("errors", collector.rows())


def _rows_result(table: str, rows: list[dict]) -> Any:
    from streamdissect.tables.batches import typed_array

    kinds = schema.TABLES[table]
    return _result(
        table, {c.name: typed_array([r.get(c.name) for r in rows], c.kind) for c in kinds}
    )


# --- the publish-confirm ledger ----------------------------------------------------------

LEDGER_COMMANDS = ("Publish", "PublishConfirm", "PublishError", "DeclarePublisher")
# A (connection, u8 publisher or subscription id) as one number: connection * ID_SPAN + the id
# + 1, and + 0 for an id that could not be read (None is an id of its own, as in the
# collectors' dictionaries).
ID_SPAN = 512


def _group_of(conn: Any, known: Any, ids: Any) -> Any:
    return conn * ID_SPAN + np.where(known, ids + 1, 0)


def _connection_numbers(frames: Any) -> tuple[list[str], Any]:
    """(connection names, each row's connection number), numbered in order of first
    appearance (Arrow's dictionary encoding, in C)."""
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(frames["connection"]).combine_chunks()
    return encoded.dictionary.to_pylist(), _int_or_zero(encoded.indices)


def _ledger_rows(frames: Any, commands: Any, id_column: str) -> tuple[Any, Any, Any, list, Any]:
    """The rows of `commands` (in frame order) of a ledger keyed by (connection, the u8 in
    `id_column`): (rows, command, response flag, connection names, group number)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    frames = _table(frames)
    t = frames.filter(pc.fill_null(pc.is_in(frames["command"], value_set=pa.array(commands)),
                                   False))  # fmt: skip
    command = np.asarray(t["command"].to_numpy(zero_copy_only=False), dtype=object)
    response = pc.fill_null(t["response"], False).to_numpy(zero_copy_only=False)
    conn_names, conn = _connection_numbers(t)
    known = pc.is_valid(t[id_column]).to_numpy(zero_copy_only=False)
    return t, command, response, conn_names, _group_of(conn, known, _int_or_zero(t[id_column]))


def _ident(g: int, conn_names: list) -> tuple[str, int | None]:
    """(connection, id) of a group number."""
    return conn_names[g // ID_SPAN], (g % ID_SPAN) - 1 if g % ID_SPAN else None


def publishes(frames: Any) -> Any:
    """One row per publishing id with its outcome (schema.PUBLISHES)."""
    return confirm_ledger(frames)[0]


def confirms(frames: Any) -> Any:
    """One row per (connection, publisher id): counts and publish-to-confirm lag
    (schema.CONFIRMS)."""
    return confirm_ledger(frames)[1]


def backlog(frames: Any) -> Any:
    """Publishing ids awaiting confirm after each Publish, PublishConfirm or PublishError
    frame (schema.BACKLOG)."""
    return confirm_ledger(frames)[2]


def confirm_ledger(frames: Any, want: Any = ("publishes", "confirms", "backlog")
                   ) -> tuple[Any, Any, Any]:  # fmt: skip
    """(publishes, confirms, backlog): the three tables of confirms.ConfirmCollector, in one
    pass (publishes(), confirms() and backlog() each make all three). A (connection, publisher id) whose
    ids are all distinct, confirmed at most once, with no PublishError and no DeclarePublisher
    after its first frame (what clients do) is computed over columns; any other goes through
    the collector's own code, row by row. Rows are put in the collector's order by keys:
    (0, frame, position) for what a frame decides, (1, ledger, position) for the ids still
    outstanding at the end."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    t, command, response, conn_names, group = _ledger_rows(frames, LEDGER_COMMANDS,
                                                           "publisher_id")  # fmt: skip
    pid_known = pc.is_valid(t["publisher_id"]).to_numpy(zero_copy_only=False)
    ts = _int_or_zero(t["ts_ns"])
    is_publish, is_confirm = command == "Publish", command == "PublishConfirm"
    is_error = command == "PublishError"
    is_declare = (command == "DeclarePublisher") & ~response
    ledger_frame = is_publish | is_confirm | is_error
    # ledgers in order of creation (their first Publish, PublishConfirm or PublishError)
    ledger_rows = np.flatnonzero(ledger_frame)
    found, first_at = np.unique(group[ledger_rows], return_index=True)
    creation = np.argsort(first_at, kind="stable")
    first_of = dict(zip(found[creation].tolist(), ledger_rows[first_at[creation]].tolist()))
    rank = {g: r for r, g in enumerate(first_of)}
    irregular = {int(g) for g in group[is_error]}
    irregular |= {int(g) for g, i in zip(group[is_declare], np.flatnonzero(is_declare))
                  if g in first_of and i > first_of[g]}  # fmt: skip
    if not np.all(pid_known | ~ledger_frame):  # (a frame whose publisher id could not be read)
        irregular |= {int(g) for g in group[ledger_frame & ~pid_known]}
    # every id, with its frame
    ids = {}
    for name, mask in (("p", is_publish), ("c", is_confirm)):
        lists = t["publishing_ids"].filter(pa.array(mask))
        parent = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
        frame_of = np.flatnonzero(mask)[parent] if len(parent) else np.zeros(0, np.int64)
        flat = pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(np.uint64)
        position = np.arange(len(flat)) - np.searchsorted(parent, parent, side="left")
        ids[name] = pd.DataFrame({"g": group[frame_of], "id": flat, "frame": frame_of,
                                  "pos": position, "ts": ts[frame_of]})  # fmt: skip
    p, c = ids["p"], ids["c"]
    irregular |= set(p["g"][p.duplicated(["g", "id"], keep=False)].tolist())
    irregular |= set(c["g"][c.duplicated(["g", "id"], keep=False)].tolist())
    regular_p, regular_c = p[~p["g"].isin(irregular)], c[~c["g"].isin(irregular)]
    # (an inner merge: a left one would make the publish side float where it found nothing,
    # and nanosecond times do not survive float64)
    joined = regular_c.merge(regular_p, on=["g", "id"], how="inner", suffixes=("", "_p"))
    confirmed = joined[joined["frame_p"] < joined["frame"]]
    matched = regular_p.merge(confirmed[["g", "id"]], on=["g", "id"], how="left", indicator=True)
    outstanding_p = regular_p.loc[(matched["_merge"] == "left_only").to_numpy()]

    def ident(g: int) -> tuple[str, int | None]:
        return _ident(g, conn_names)

    # PUBLISHES: confirmed ids at their confirm, then what is outstanding at the end
    c_g = confirmed["g"].to_numpy(np.int64)
    u_g = outstanding_p["g"].to_numpy(np.int64)
    lag = (confirmed["ts"].to_numpy(np.int64) - confirmed["ts_p"].to_numpy(np.int64)) / 1e6
    u_rank = np.array([rank[g] for g in u_g.tolist()], dtype=np.int64)  # (ledger creation)
    pair_columns = {
        "g": np.concatenate([c_g, u_g]),
        "publishing_id": np.concatenate([confirmed["id"].to_numpy(np.uint64),
                                         outstanding_p["id"].to_numpy(np.uint64)]),
        "publish_ts_ns": np.concatenate([confirmed["ts_p"].to_numpy(np.int64),
                                         outstanding_p["ts"].to_numpy(np.int64)]),
        "outcome_ts_ns": [*confirmed["ts"].to_numpy(np.int64).tolist(), *[None] * len(u_g)],
        "lag_ms": [*lag.tolist(), *[None] * len(u_g)],
        "outcome": ["confirmed"] * len(c_g) + ["unconfirmed"] * len(u_g),
        "code": [None] * (len(c_g) + len(u_g)),
        # the collector's order: (phase, frame or ledger, position...)
        "k0": np.concatenate([np.zeros(len(c_g), np.int64), np.ones(len(u_g), np.int64)]),
        "k1": np.concatenate([confirmed["frame"].to_numpy(np.int64), u_rank]),
        "k2": np.concatenate([confirmed["pos"].to_numpy(np.int64),
                              outstanding_p["frame"].to_numpy(np.int64)]),
        "k3": np.concatenate([np.zeros(len(c_g), np.int64), outstanding_p["pos"].to_numpy(np.int64)]),
    }  # fmt: skip
    # BACKLOG after each frame of a regular ledger: + its new ids, - the confirmed ones
    delta = np.zeros(len(t), dtype=np.int64)
    np.add.at(delta, regular_p["frame"].to_numpy(np.int64), 1)
    np.add.at(delta, confirmed["frame"].to_numpy(np.int64), -1)
    regular_frame = ledger_frame & ~np.isin(group, np.array(sorted(irregular), dtype=np.int64))
    where = np.flatnonzero(regular_frame)
    by_group = where[np.argsort(group[where], kind="stable")]  # frame order within a ledger
    running = np.cumsum(delta[by_group])
    starts = np.r_[0, np.flatnonzero(np.diff(group[by_group])) + 1]
    before = np.repeat(np.r_[0, running][starts], np.diff(np.r_[starts, len(by_group)]))
    outstanding = np.empty(len(t), dtype=np.int64)
    outstanding[by_group] = running - before
    point_columns = {"frame": where, "ts_ns": ts[where], "g": group[where],
                     "outstanding": outstanding[where]}  # fmt: skip
    summaries: dict[int, dict] = {}
    records = _int_or_zero(t["record_count"])
    counts = _int_or_zero(pc.list_value_length(t["publishing_ids"]))
    sent_records = np.where(records > 0, records, counts)
    order = np.argsort(c_g, kind="stable")
    lag_bounds = np.searchsorted(c_g[order], np.array(list(first_of), dtype=np.int64))
    lag_ends = np.searchsorted(c_g[order], np.array(list(first_of), dtype=np.int64), "right")
    for g, lo, hi in zip(first_of, lag_bounds.tolist(), lag_ends.tolist()):
        if g in irregular:
            continue
        mine = group == g
        lags = lag[order][lo:hi]
        name, pub = ident(g)
        published = int(counts[mine & is_publish].sum())
        confirmed_n = len(lags)
        row = {"connection": name, "publisher_id": pub, "published": published,
               "records_published": int(sent_records[mine & is_publish].sum()),
               "confirmed": confirmed_n, "errored": 0,
               "unconfirmed": published - confirmed_n,
               "unmatched_confirms": int(counts[mine & is_confirm].sum()) - confirmed_n,
               "errors_by_code": "{}"}  # fmt: skip
        stats = summarize_ms(lags)
        del stats["min_ms"]
        summaries[g] = row | stats
    extra_pairs: list[tuple[tuple, tuple]] = []
    extra_points: list[tuple[int, tuple]] = []
    if irregular:
        _irregular_ledgers(t, irregular, group, rank, extra_pairs, extra_points, summaries,
                           ident)  # fmt: skip
    summary_rows = [summaries[g] for g in first_of]
    return (  # (a table not in `want` is None: not made)
        _pairs_table(pair_columns, extra_pairs, conn_names) if "publishes" in want else None,
        _rows_result("confirms", summary_rows),
        _points_table(point_columns, extra_points, conn_names) if "backlog" in want else None,
    )


def _names_of(groups: Any, conn_names: list) -> tuple[list, list]:
    """(connection, publisher id) of each group number."""
    groups = np.asarray(groups, dtype=np.int64)
    names = np.array(conn_names, dtype=object)[groups // ID_SPAN].tolist() if len(groups) else []
    pids = [int(p) - 1 if p else None for p in (groups % ID_SPAN).tolist()]
    return names, pids


def _pairs_table(columns: dict, extra: list, conn_names: list) -> Any:
    """PUBLISHES in the collector's order: the regular rows (columns) and the irregular
    ledgers' rows (tuples with their keys), sorted together by key."""
    import pyarrow as pa

    from streamdissect.tables.batches import typed_array

    n = len(columns["g"])
    keys = np.stack([columns["k0"], columns["k1"], columns["k2"], columns["k3"]])
    if extra:  # (the few irregular rows, as the collector made them: lists from here on)
        names, pids = _names_of(columns["g"], conn_names)
        fields = ["publishing_id", "publish_ts_ns", "outcome_ts_ns", "lag_ms", "outcome", "code"]
        values = {"connection": names, "publisher_id": pids}
        values |= {f: list(np.asarray(columns[f], dtype=object)) for f in fields}
        more = np.array([(k + (0, 0, 0, 0))[:4] for k, _ in extra], dtype=np.int64).T
        keys = np.concatenate([keys, more], axis=1)
        for i, name in enumerate(["connection", "publisher_id", *fields]):
            values[name] = values[name] + [row[i] for _, row in extra]
        order = np.lexsort(keys[::-1]).tolist()
        out = {c.name: typed_array([values[c.name][i] for i in order], c.kind)
               for c in schema.PUBLISHES}  # fmt: skip
        return _result("publishes", out)
    order = np.lexsort(keys[::-1]) if n else np.zeros(0, np.int64)
    groups = columns["g"][order]
    confirmed = columns["k0"][order] == 0
    names = pa.array(
        np.array(conn_names, dtype=object)[groups // ID_SPAN] if n else [], pa.string()
    )
    pid = groups % ID_SPAN
    outcome_ts = np.asarray(columns["outcome_ts_ns"], dtype=object)[order]
    lag = np.asarray(columns["lag_ms"], dtype=object)[order]
    out = {
        "connection": names,
        "publisher_id": pa.array(pid - 1, pa.int32(), mask=pid == 0),
        "publishing_id": pa.array(columns["publishing_id"][order], pa.uint64()),
        "publish_ts_ns": pa.array(columns["publish_ts_ns"][order], pa.int64()),
        "outcome_ts_ns": pa.array(np.where(confirmed, outcome_ts, 0).astype(np.int64), pa.int64(),
                                  mask=~confirmed),
        "lag_ms": pa.array(np.where(confirmed, lag, 0.0).astype(np.float64), pa.float64(),
                           mask=~confirmed),
        "outcome": pa.array(np.where(confirmed, "confirmed", "unconfirmed"), pa.string()),
        "code": pa.nulls(n, pa.int32()),
    }  # fmt: skip
    return _result("publishes", out)


def _points_table(columns: dict, extra: list, conn_names: list) -> Any:
    """BACKLOG in frame order: regular ledgers' points and the irregular ones'."""
    names, pids = _names_of(columns["g"], conn_names)
    frames = columns["frame"].tolist() + [frame for frame, _ in extra]
    values = {"ts_ns": columns["ts_ns"].tolist() + [row[0] for _, row in extra],
              "connection": names + [row[1] for _, row in extra],
              "publisher_id": pids + [row[2] for _, row in extra],
              "outstanding": columns["outstanding"].tolist() + [row[3] for _, row in extra]}  # fmt: skip
    order = np.argsort(np.asarray(frames, dtype=np.int64), kind="stable")
    from streamdissect.tables.batches import typed_array

    out = {c.name: typed_array([values[c.name][i] for i in order.tolist()], c.kind)
           for c in schema.BACKLOG}  # fmt: skip
    return _result("backlog", out)


def _irregular_ledgers(t: Any, irregular: set, group: Any, rank: dict, pairs: list,
                       points: list, summaries: dict, ident: Any) -> None:  # fmt: skip
    """The collector's own code over the rows of the irregular ledgers, one by one."""
    from streamdissect.protocols.stream.analysis.confirms import ConfirmCollector

    collector = ConfirmCollector()
    mine = np.flatnonzero(np.isin(group, np.array(sorted(irregular), dtype=np.int64)))
    group_of_ident = {ident(g): g for g in irregular}
    for i, frame in zip(mine.tolist(), t.take(mine).to_pylist()):
        event = _RowEvent(frame)
        before_pairs, before_points = len(collector.pairs), len(collector.backlog)
        command = frame["command"]
        if command == "Publish":
            collector.on_publish(event)
        elif command == "PublishConfirm":
            collector.on_confirm(event)
        elif command == "PublishError":
            errors = json.loads(frame["fields"] or "{}").get("errors")
            collector.on_error(_RowEvent(frame | {"errors": errors}))
        elif command == "DeclarePublisher":
            collector.on_declare(event)
        for k in range(before_pairs, len(collector.pairs)):
            pairs.append(((0, i, k), tuple(collector.pairs[k])))
        for k in range(before_points, len(collector.backlog)):
            points.append((i, collector.backlog[k]))
    finished = len(collector.pairs)
    collector.finish()
    for k in range(finished, len(collector.pairs)):
        row = tuple(collector.pairs[k])
        pairs.append(((1, rank[group_of_ident[(row[0], row[1])]], -1, k), row))
    for row in collector.summary():
        summaries[group_of_ident[(row["connection"], row["publisher_id"])]] = row


# --- credit and stalls ------------------------------------------------------------------

CREDIT_COMMANDS = ("Subscribe", "Unsubscribe", "Credit", "Deliver")


def credit(frames: Any, tcp_connections: list | None = None,
           at_once_ms: float | None = None) -> tuple[Any, Any]:  # fmt: skip
    """(credit, stalls) tables (schema.CREDIT, schema.STALLS): see credit_ledger."""
    return credit_ledger(frames, tcp_connections, at_once_ms)[:2]


def credit_ledger(frames: Any, tcp_connections: list | None = None,
                  at_once_ms: float | None = None,
                  end_ns: int | None = None) -> tuple[Any, Any, Any]:  # fmt: skip
    """(credit, stalls, credit_balance) tables (schema.CREDIT, STALLS, CREDIT_BALANCE). The
    collector's own state
    (credit.CreditCollector) takes the rare frames (Subscribe and its response, Unsubscribe,
    Credit errors) one by one; the Credit and Deliver frames between two of those are
    applied per subscription over columns: the balance as a running sum, stalls opened by a
    Deliver that leaves no credit and closed by a Credit that restores some. Stalls still
    open end at `end_ns`, by default the last frame's time (a connection cut out of a larger
    capture ends with the capture)."""
    import pyarrow.compute as pc

    from streamdissect.analysis.fields import get
    from streamdissect.protocols.stream.analysis.credit import AT_ONCE_MS, CreditCollector

    frames = _table(frames)
    collector = CreditCollector(at_once_ms=AT_ONCE_MS if at_once_ms is None else at_once_ms)
    t, command, response, names, key = _ledger_rows(frames, CREDIT_COMMANDS, "subscription_id")
    hot = ((command == "Credit") & ~response) | (command == "Deliver")
    columns = {
        "ts": _int_or_zero(t["ts_ns"]),
        "amount": _int_or_zero(t["credit"]),
        "records": _int_or_zero(t["record_count"]),
        "ahead": pc.fill_null(pc.greater(t["committed_chunk_id"], t["chunk_id"]), False).to_numpy(
            zero_copy_only=False),
        "credit": command == "Credit",
    }  # fmt: skip
    boundaries = np.flatnonzero(~hot)
    starts = np.r_[0, boundaries + 1]
    stops = np.r_[boundaries, len(t)]
    boundary_rows = t.take(boundaries).to_pylist() if len(boundaries) else []
    for n, (lo, hi) in enumerate(zip(starts.tolist(), stops.tolist())):
        if hi > lo:
            run_keys = key[lo:hi]
            found, first_at = np.unique(run_keys, return_index=True)
            for k in found[np.argsort(first_at)].tolist():  # (subscriptions as first seen)
                rows = lo + np.flatnonzero(run_keys == k)
                name, sub_id = _ident(k, names)
                sub = collector.subscription(name, sub_id)
                _apply_run(sub, collector.at_once_ns, {c: v[rows] for c, v in columns.items()})
        if n < len(boundary_rows):
            row = boundary_rows[n]
            event = _RowEvent(row)
            {"Subscribe": collector.on_subscribe, "Unsubscribe": collector.on_unsubscribe,
             "Credit": collector.on_credit}[row["command"]](event)  # fmt: skip
    # the end, as analyze_events ends it: connections closed by TCP, then the capture's end
    for conn_row in tcp_connections or []:
        if get(conn_row, "tcp_end") in ("fin", "rst") and get(conn_row, "end_ns") is not None:
            collector.end_connection(get(conn_row, "connection"), get(conn_row, "end_ns"))
    if end_ns is None:
        times = pc.drop_null(frames["ts_ns"])
        end_ns = int(times[-1].as_py()) if len(times) else 0
    collector.finish(end_ns)
    return (_rows_result("credit", collector.summary()),
            _rows_result("stalls", collector.stall_rows()),
            _compact_result("credit_balance", collector.balance_rows()))  # fmt: skip


def _compact_result(table: str, rows: Any) -> Any:
    """A table of CompactRows (tuples in schema order) as a pyarrow Table."""
    from streamdissect.tables.batches import typed_array

    kinds = schema.TABLES[table]
    columns = rows.columns() if rows else [([], None)] * len(kinds)
    return _result(table, {c.name: values if isinstance(values, np.ndarray) and none is None
                           else typed_array(list(values), c.kind)
                           for c, (values, none) in zip(kinds, columns)})  # fmt: skip


def _apply_run(sub: Any, at_once_ns: int, run: dict) -> None:
    """Credit requests and Delivers of one subscription, in order, as CreditCollector's
    _granted and deliver apply them one by one."""
    from streamdissect.protocols.stream.analysis.credit import Stall

    is_credit = run["credit"]
    is_deliver = ~is_credit
    ts = run["ts"]
    sub.granted += int(run["amount"][is_credit].sum())
    sub.credit_frames += int(np.count_nonzero(is_credit))
    sub.chunks += int(np.count_nonzero(is_deliver))
    sub.records += int(run["records"][is_deliver].sum())
    delivers = np.flatnonzero(is_deliver)
    if sub.awaiting_deliver is not None and len(delivers):  # (a stall ended before this run)
        if ts[delivers[0]] - sub.awaiting_deliver.end_ns <= at_once_ns:
            sub.awaiting_deliver.broker_had_more = True
        sub.awaiting_deliver = None
    if sub.balance is None:  # no Subscribe seen (or refused): no balance, no stall
        return
    balance = sub.balance + np.cumsum(np.where(is_credit, run["amount"], -1))
    sub.note_many(ts, balance)
    opens = is_deliver & (balance <= 0)
    closes = is_credit & (balance > 0)
    decisive = np.flatnonzero(opens | closes)
    kind = opens[decisive]  # True: a Deliver that leaves no credit; False: a Credit restoring
    before = np.r_[sub.open_stall is not None, kind[:-1]]
    for at, is_open, was_open in zip(decisive.tolist(), kind.tolist(), before.tolist()):
        if is_open and not was_open:
            stall = Stall(sub.connection, sub.subscription_id, int(ts[at]), bool(run["ahead"][at]))
            sub.stalls.append(stall)
            sub.open_stall = stall
        elif not is_open and was_open:
            stall = sub.open_stall
            stall.end_ns = int(ts[at])
            stall.ended_by = "credit"
            stall.duration_ms = (stall.end_ns - stall.start_ns) / 1e6
            sub.open_stall = None
            later = delivers[delivers > at]
            nxt = int(later[0]) if later.size else None
            if nxt is None:
                sub.awaiting_deliver = stall  # (the next Deliver comes in a later run)
            elif ts[nxt] - stall.end_ns <= at_once_ns:
                stall.broker_had_more = True
    sub.balance = int(balance[-1])


TABLES = ("connections", "requests", "latency", "publishes", "confirms", "backlog", "credit",
          "stalls", "credit_balance", "deliveries", "throughput", "errors")  # fmt: skip


def tables(frames: Any, tcp_connections: list | None = None,
           at_once_ms: float | None = None, end_ns: int | None = None,
           only: Any = TABLES) -> dict[str, Any]:  # fmt: skip
    """Every analysis table of `analysis.analyze` (all but frames and anomalies), over
    columns, as pyarrow Tables keyed by schema name; `only` those named. `end_ns`: see
    credit_ledger."""
    frames = _table(frames)
    made: dict[str, Any] = {}
    if {"publishes", "confirms", "backlog"} & set(only):
        made["publishes"], made["confirms"], made["backlog"] = confirm_ledger(frames, only)
    if {"credit", "stalls", "credit_balance"} & set(only):
        made["credit"], made["stalls"], made["credit_balance"] = credit_ledger(
            frames, tcp_connections, at_once_ms, end_ns)  # fmt: skip
    others = {"connections": lambda: connections(frames, tcp_connections),
              "requests": lambda: requests(frames), "latency": lambda: latency(frames),
              "deliveries": lambda: deliveries(frames), "throughput": lambda: throughput(frames),
              "errors": lambda: errors(frames)}  # fmt: skip
    for name, make in others.items():
        if name in only:
            made[name] = make()
    return {name: made[name] for name in TABLES if name in only}
