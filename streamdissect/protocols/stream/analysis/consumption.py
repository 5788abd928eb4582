"""Consumer lag per Deliver and throughput per second.

Lag (Deliver v2 only) = committed chunk id - the chunk's first offset: how far the consumer
reads behind what the stream has committed. Delivery latency = capture time - the chunk's
timestamp; the chunk timestamp is the broker's clock and the capture time the capturing
host's, so the figure is only as good as their agreement (exact when both are one machine).
"""

from __future__ import annotations

from collections import defaultdict

from streamdissect.analysis.compact import CompactRows
from streamdissect.analysis.fields import get

NS_PER_S = 1_000_000_000


class DeliveryCollector:
    def __init__(self, keep_rows: bool = True, crc: bool = True, compact: bool = False) -> None:
        self.keep_rows = keep_rows
        self.crc = crc  # False: crc_ok is left None (the report does not show it)
        # compact: rows kept as arrays (a capture's deliveries in a tenth of the memory)
        self.rows: list[tuple] | CompactRows = CompactRows(13) if compact else []

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
        self.deliver(ev.connection, ev.ts_ns, getattr(rec, "subscription_id", None),
                     getattr(rec, "committed_chunk_id", None), first, chunk_ts, num_records,
                     num_entries, chunk_type, getattr(rec, "size", None),
                     getattr(rec, "crc_ok", None) if self.crc else None)  # fmt: skip

    def deliver(self, connection: str, ts: int, sid: int | None, committed: int | None,
                first: int | None, chunk_ts: int | None, num_records: int | None,
                num_entries: int | None, chunk_type: int | None, size: int | None,
                crc_ok: bool | None = None) -> None:  # fmt: skip
        """A Deliver's row, from its fields (on_deliver without the record)."""
        if not self.keep_rows:
            return
        lag = committed - first if committed is not None and first is not None else None
        latency = ts / 1e6 - chunk_ts if chunk_ts is not None else None
        self.rows.append((ts, connection, sid, first, num_records, num_entries, chunk_type,
                          chunk_ts, committed, lag, latency, size, crc_ok))  # fmt: skip


class ThroughputCollector:
    """Messages and bytes per one-second bucket of capture time."""

    def __init__(self) -> None:
        # second -> [published_msgs, published_bytes, confirmed, delivered_msgs, delivered_bytes]
        self._buckets: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])

    def on_publish(self, ev) -> None:
        rec = ev.record
        self.published(ev.ts_ns, getattr(rec, "record_count", None), getattr(rec, "size", None))

    def published(self, ts: int, record_count: int | None, size: int | None) -> None:
        b = self._buckets[ts // NS_PER_S]
        b[0] += record_count or 0
        b[1] += (size or 0) + 4

    def on_confirm(self, ev) -> None:
        self.confirmed(ev.ts_ns, len(getattr(ev.record, "publishing_ids", None) or ()))

    def confirmed(self, ts: int, ids: int) -> None:
        self._buckets[ts // NS_PER_S][2] += ids

    def on_deliver(self, ev) -> None:
        rec = ev.record
        self.delivered(ev.ts_ns, getattr(rec, "record_count", None), getattr(rec, "size", None))

    def delivered(self, ts: int, record_count: int | None, size: int | None) -> None:
        b = self._buckets[ts // NS_PER_S]
        b[3] += record_count or 0
        b[4] += (size or 0) + 4

    def rows(self) -> list[tuple]:
        return [(sec * NS_PER_S, *vals) for sec, vals in sorted(self._buckets.items())]
