"""Analyses over columns: frame batches in (schema.FRAMES), a table's rows out.

Each function takes the frames of one or more connections as a pyarrow.Table (or batches)
and computes with numpy over whole columns, no per-frame Python: the same code can run per
connection group (Spark) and over a whole capture. The record-based collectors
(consumption.py) stay the reference: tests and the fuzz campaign hold these equal to them.

    frames = frame_batches.frames_arrow("capture.pcap")
    columns.deliveries(frames)     # the deliveries table (consumer lag), pyarrow
    columns.throughput(frames)     # the throughput table
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import schema

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
