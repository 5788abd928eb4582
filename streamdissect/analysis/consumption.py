"""Consumer lag per Deliver and throughput per second.

Lag (Deliver v2 only) = committed chunk id - the chunk's first offset: how far the consumer
reads behind what the stream has committed. Delivery latency = capture time - the chunk's
timestamp; the chunk timestamp is the broker's clock and the capture time the capturing
host's, so the figure is only as good as their agreement (exact when both are one machine).
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Iterator

from .fields import get

NS_PER_S = 1_000_000_000


class CompactRows:
    """A list of equal-length tuples kept as one array per column (8 bytes a value, plus a
    byte saying None) while the values fit; read back as tuples, by index or slice. A value
    an array cannot hold (a string, an int beyond 64 bits) turns its column into a list."""

    def __init__(self, width: int) -> None:
        self._columns: list = [array("q") for _ in range(width)]
        self._kinds = ["q"] * width  # "q" int, "d" float, "o" Python objects (a list)
        self._none = [bytearray() for _ in range(width)]
        self._n = 0

    def append(self, row: tuple) -> None:
        n = self._n
        for i, value in enumerate(row):
            kind = self._kinds[i]
            column = self._columns[i]
            if kind == "o":
                column.append(value)
            elif value is None:
                column.append(0 if kind == "q" else 0.0)
            else:
                if kind == "q" and value.__class__ is float and self._none[i].count(0) == 0:
                    column = self._columns[i] = array("d", bytes(8 * n))  # all None so far
                    kind = self._kinds[i] = "d"
                try:
                    if value.__class__ is not (int if kind == "q" else float):
                        raise TypeError
                    column.append(value)
                except (TypeError, OverflowError):
                    self._as_objects(i)
                    self._columns[i].append(value)
            self._none[i].append(value is None)
        self._n += 1

    def _as_objects(self, i: int) -> None:
        if self._kinds[i] != "o":
            none = self._none[i]
            self._columns[i] = [None if none[k] else v for k, v in enumerate(self._columns[i])]
            self._kinds[i] = "o"

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def _rows(self, start: int, stop: int) -> list[tuple]:
        columns = []
        for kind, values, none in zip(self._kinds, self._columns, self._none):
            part = values[start:stop]
            if kind != "o" and any(none[start:stop]):
                part = [None if n else v for v, n in zip(part, none[start:stop])]
            columns.append(part)
        return list(zip(*columns))

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(self._n)
            rows = self._rows(start, stop)
            return rows if step == 1 else rows[::step]
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError(index)
        return self._rows(index, index + 1)[0]

    def __iter__(self) -> Iterator[tuple]:
        for at in range(0, self._n, 4096):
            yield from self._rows(at, min(at + 4096, self._n))


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
