"""Consumer lag per Deliver and throughput per second.

Lag (Deliver v2 only) = committed chunk id - the chunk's first offset: how far the consumer
reads behind what the stream has committed. Delivery latency = capture time - the chunk's
timestamp; the chunk timestamp is the broker's clock and the capture time the capturing
host's, so the figure is only as good as their agreement (exact when both are one machine).
"""

from __future__ import annotations

from collections import defaultdict

from .fields import get

NS_PER_S = 1_000_000_000


class DeliveryCollector:
    def __init__(self, keep_rows: bool = True, crc: bool = True) -> None:
        self.keep_rows = keep_rows
        self.crc = crc  # False: crc_ok is left None (the report does not show it)
        self.rows: list[tuple] = []

    def on_deliver(self, ev) -> None:
        if not self.keep_rows:
            return
        rec = ev.record
        chunk = getattr(rec, "chunk", None)
        if isinstance(chunk, dict):
            first, chunk_ts = chunk.get("chunk_id"), chunk.get("timestamp")
            num_records, num_entries = chunk.get("num_records"), chunk.get("num_entries")
            chunk_type = chunk.get("chunk_type")
        else:
            first, chunk_ts = get(chunk, "chunk_id"), get(chunk, "timestamp")
            num_records, num_entries = get(chunk, "num_records"), get(chunk, "num_entries")
            chunk_type = get(chunk, "chunk_type")
        committed = getattr(rec, "committed_chunk_id", None)
        lag = committed - first if committed is not None and first is not None else None
        latency = ev.ts_ns / 1e6 - chunk_ts if chunk_ts is not None else None
        self.rows.append(
            (
                ev.ts_ns,
                ev.connection,
                getattr(rec, "subscription_id", None),
                first,
                num_records,
                num_entries,
                chunk_type,
                chunk_ts,
                committed,
                lag,
                latency,
                getattr(rec, "size", None),
                getattr(rec, "crc_ok", None) if self.crc else None,
            )
        )


class ThroughputCollector:
    """Messages and bytes per one-second bucket of capture time."""

    def __init__(self) -> None:
        # second -> [published_msgs, published_bytes, confirmed, delivered_msgs, delivered_bytes]
        self._buckets: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])

    def on_publish(self, ev) -> None:
        b = self._buckets[ev.ts_ns // NS_PER_S]
        rec = ev.record
        b[0] += getattr(rec, "record_count", None) or 0
        b[1] += (getattr(rec, "size", None) or 0) + 4

    def on_confirm(self, ev) -> None:
        self._buckets[ev.ts_ns // NS_PER_S][2] += len(getattr(ev.record, "publishing_ids", None) or ())

    def on_deliver(self, ev) -> None:
        b = self._buckets[ev.ts_ns // NS_PER_S]
        rec = ev.record
        b[3] += getattr(rec, "record_count", None) or 0
        b[4] += (getattr(rec, "size", None) or 0) + 4

    def rows(self) -> list[tuple]:
        return [(sec * NS_PER_S, *vals) for sec, vals in sorted(self._buckets.items())]
