"""Consumer lag per Deliver and throughput per second.

Lag (Deliver v2 only) = committed chunk id - the chunk's first offset: how far the consumer
reads behind what the stream has committed. Delivery latency = capture time - the chunk's
timestamp; the chunk timestamp is the broker's clock and the capture time the capturing
host's, so the figure is only as good as their agreement (exact when both are one machine).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from streamdissect.analysis.compact import CompactRows
from streamdissect.analysis.fields import cut_count, get
from streamdissect.protocols.stream.analysis import hot_input
from streamdissect.protocols.stream.analysis.confirms import cut_publish_counts
from streamdissect.protocols.stream.hot import CONFIRM_KEY, DELIVER_KEY, PUBLISH_KEY, HotFrames

NS_PER_S = 1_000_000_000
# A Deliver's fields in hot frames, as hot_input.frames_of gives them
DELIVER_FIELDS = ("subscription_id", "record_count", "chunk_id", "committed_chunk_id",
                  "chunk_timestamp_ms", "num_entries", "chunk_type")  # fmt: skip


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

    def on_hot(self, run: HotFrames) -> None:
        """The Deliver frames of hot frames as columns: their rows at once."""
        if not self.keep_rows:
            return
        if hot_input.is_short(run):
            self._hot_one_by_one(run)
            return
        rows = np.flatnonzero(run.key == DELIVER_KEY)
        if not len(rows):
            return
        f = run.fields
        ts = run.ts_ns[rows]
        first, committed = f["chunk_id"][0][rows], f["committed_chunk_id"][0][rows]
        has_committed = f["committed_chunk_id"][1][rows]
        chunk_ts = f["chunk_timestamp_ms"][0][rows]
        if max(int(committed.max()), int(first.max())) > hot_input.U63:  # (u64: Python's ints)
            lag = [c - f for c, f in zip(committed.tolist(), first.tolist())]
        else:
            lag = np.where(has_committed, committed.astype(np.int64) - first.astype(np.int64), 0)
        numbers = run.connection[rows]
        if numbers.min() == numbers.max():  # (one connection's: its name, n times)
            names = [run.connections[int(numbers[0])]] * len(rows)
        else:
            names = [run.connections[n] for n in numbers.tolist()]
        columns = [
            (ts, None), (names, None),
            (f["subscription_id"][0][rows], None), (first, None),
            (f["record_count"][0][rows], None), (f["num_entries"][0][rows], None),
            (f["chunk_type"][0][rows], None), (chunk_ts, None),
            (committed, ~has_committed), (lag, ~has_committed),
            (ts / 1e6 - chunk_ts, None), (run.size[rows], None),
            (run.crc[rows] == 1, (run.crc[rows] < 0) | (not self.crc)),
        ]  # fmt: skip
        if isinstance(self.rows, list):  # (not compact: the tuples themselves)
            self.rows.extend(zip(*[hot_input.cells(values, none) for values, none in columns]))
        elif len(rows) < CompactRows.CHUNK:  # (a few, as a live capture's reads give them:
            # with the rows pending, in chunks of CHUNK rows, not a chunk of their own each)
            self.rows.extend(list(zip(*[hot_input.cells(values, none)
                                        for values, none in columns])))  # fmt: skip
        else:
            self.rows.extend_columns(columns, len(rows))

    def _hot_one_by_one(self, run: HotFrames) -> None:
        has_committed = run.fields["committed_chunk_id"][1]
        for frame in hot_input.frames_of(run, (DELIVER_KEY,), DELIVER_FIELDS):
            i, _, ts, connection, _, size, sid, records, first, committed, chunk_ts, entries, \
                chunk_type = frame
            crc = int(run.crc[i])
            crc_ok = None if crc < 0 or not self.crc else crc == 1
            self.deliver(connection, ts, sid, committed if has_committed[i] else None, first,
                         chunk_ts, records, entries, chunk_type, size, crc_ok)  # fmt: skip


class ThroughputCollector:
    """Messages and bytes per one-second bucket of capture time."""

    def __init__(self) -> None:
        # second -> [published_msgs, published_bytes, confirmed, delivered_msgs, delivered_bytes]
        self._buckets: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])

    def on_publish(self, ev) -> None:
        rec = ev.record
        records = getattr(rec, "record_count", None)
        if getattr(rec, "truncated", False):  # (its records as its cut says, at least)
            records = cut_publish_counts(rec)[1]
        self.published(ev.ts_ns, records, getattr(rec, "size", None))

    def published(self, ts: int, record_count: int | None, size: int | None) -> None:
        b = self._buckets[ts // NS_PER_S]
        b[0] += record_count or 0
        b[1] += (size or 0) + 4

    def on_confirm(self, ev) -> None:
        rec = ev.record
        ids = len(getattr(rec, "publishing_ids", None) or ())
        if getattr(rec, "truncated", False):  # (its ids past the cut: as its header says)
            ids = max(ids, cut_count(rec, "publishing_ids"))
        self.confirmed(ev.ts_ns, ids)

    def confirmed(self, ts: int, ids: int) -> None:
        self._buckets[ts // NS_PER_S][2] += ids

    def on_deliver(self, ev) -> None:
        rec = ev.record
        self.delivered(ev.ts_ns, getattr(rec, "record_count", None), getattr(rec, "size", None))

    def delivered(self, ts: int, record_count: int | None, size: int | None) -> None:
        b = self._buckets[ts // NS_PER_S]
        b[3] += record_count or 0
        b[4] += (size or 0) + 4

    def on_hot(self, run: HotFrames) -> None:
        """Hot frames as columns: summed per second with numpy."""
        if hot_input.is_short(run):
            for i, kind, ts, _, _, size, records in hot_input.frames_of(
                    run, (PUBLISH_KEY, CONFIRM_KEY, DELIVER_KEY), ("record_count",)):  # fmt: skip
                if kind == PUBLISH_KEY:
                    self.published(ts, records, size)
                elif kind == CONFIRM_KEY:
                    self.confirmed(ts, int(run.id_counts[i]))
                else:
                    self.delivered(ts, records, size)
            return
        key = run.key
        deliver, confirm = key == DELIVER_KEY, key == CONFIRM_KEY
        wanted = np.flatnonzero((key == PUBLISH_KEY) | deliver | confirm)
        if not len(wanted):
            return
        # (the wanted frames' own columns: a publish's and a deliver's records and bytes,
        # a confirm's ids, each summed per second and kind: slot 3 * second + kind)
        confirm = confirm[wanted]
        counts, counted = run.fields["record_count"]
        amount = np.where(confirm, np.maximum(run.id_counts[wanted], 0),
                          np.where(counted[wanted], counts[wanted], 0)).astype(np.float64)
        size = run.size[wanted] + 4.0  # (a confirm's goes to a slot never read)
        seconds = run.ts_ns[wanted] // NS_PER_S
        low = int(seconds.min())
        if int(seconds.max()) - low < 1 << 16:  # (a run spans a few seconds: no sort)
            where = seconds - low
            present = np.bincount(where)
            found = np.flatnonzero(present) + low
            where = (np.cumsum(present > 0) - 1)[where]
        else:
            found, where = np.unique(seconds, return_inverse=True)
        slot = where * 3 + confirm + deliver[wanted] * 2  # kind: 0 publish, 1 confirm, 2 deliver
        amounts = np.bincount(slot, weights=amount, minlength=3 * len(found)).reshape(-1, 3)
        sizes = np.bincount(slot, weights=size, minlength=3 * len(found)).reshape(-1, 3)
        sums = np.stack((amounts[:, 0], sizes[:, 0], amounts[:, 1], amounts[:, 2], sizes[:, 2]),
                        axis=1).astype(np.int64).tolist()  # fmt: skip
        buckets = self._buckets
        for second, added in zip(found.tolist(), sums):
            bucket = buckets[second]
            for i in range(5):
                bucket[i] += added[i]

    def rows(self) -> list[tuple]:
        return [(sec * NS_PER_S, *vals) for sec, vals in sorted(self._buckets.items())]
