"""Anomaly records and the bounded log that keeps them for the anomalies table.

Every anomaly is streamed to the caller as it happens; the table kept for after the run holds
at most `per_kind` of each kind, so a capture with millions of retransmissions cannot grow it
without bound. What is left out is counted, and the table ends with one `suppressed` row per
kind saying how many were not kept (like Zeek's weird sampling).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from streamdissect.slotted import Slotted

DEFAULT_PER_KIND = 5000


class Anomaly(Slotted):
    """Something wrong seen in the capture: when, where, what kind, and what."""

    __slots__ = field_names = ("ts_ns", "connection", "direction", "kind", "stream_offset",
                               "length", "detail")  # fmt: skip
    ts_ns: int | None
    connection: str | None  # None for damage in the file or in headers
    direction: str | None
    kind: str
    stream_offset: int | None  # the file offset for damage in the file
    length: int
    detail: str

    def __init__(self, ts_ns: int | None, connection: str | None, direction: str | None,
                 kind: str, stream_offset: int | None, length: int, detail: str) -> None:  # fmt: skip
        self.ts_ns = ts_ns
        self.connection = connection
        self.direction = direction
        self.kind = kind
        self.stream_offset = stream_offset
        self.length = length
        self.detail = detail


class AnomalyLog:
    """A list-like table of anomalies, bounded per kind."""

    __slots__ = ("_kept", "_last_ts", "_per_kind", "kept_by_kind", "suppressed")

    def __init__(self, per_kind: int = DEFAULT_PER_KIND) -> None:
        self._kept: list[Anomaly] = []
        self._per_kind = per_kind
        self.kept_by_kind: Counter[str] = Counter()
        self.suppressed: Counter[str] = Counter()
        self._last_ts: int | None = None

    def append(self, anomaly: Anomaly) -> None:
        if anomaly.ts_ns is not None:
            self._last_ts = anomaly.ts_ns
        kind = anomaly.kind
        if self.kept_by_kind[kind] < self._per_kind:
            self.kept_by_kind[kind] += 1
            self._kept.append(anomaly)
        else:
            self.suppressed[kind] += 1

    def extend(self, anomalies: Iterable[Anomaly]) -> None:
        for anomaly in anomalies:
            self.append(anomaly)

    def summary_rows(self) -> list[Anomaly]:
        return [
            Anomaly(self._last_ts, None, None, "suppressed", None, n,
                    f"{n} more '{kind}' anomalies not kept in the table "
                    f"(first {self._per_kind} of each kind are)")
            for kind, n in sorted(self.suppressed.items())
        ]

    def __iter__(self) -> Iterator[Anomaly]:
        yield from self._kept
        yield from self.summary_rows()

    def __len__(self) -> int:
        return len(self._kept) + len(self.suppressed)

    def __getitem__(self, index):
        return list(self)[index]

    def __bool__(self) -> bool:
        return bool(self._kept)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AnomalyLog):
            return list(self) == list(other)
        if isinstance(other, list):
            return list(self) == other
        return NotImplemented

    __hash__ = None  # mutable, like a list
