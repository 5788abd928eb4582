"""What a capture shows for `compare`: its read-only requests with their responses and
latencies, the broker's Tune offers, the command versions its frames use, its confirm lag."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from streamdissect.analysis.percentiles import summarize_ms
from streamdissect.engine.dissect import FrameEvent, dissect
from streamdissect.protocols.stream import Record
from streamdissect.protocols.stream.analysis.confirms import ConfirmCollector
from streamdissect.tables.schema import PUBLISHES

# the requests compare replays: they read, never change, the broker's state
READ_ONLY = ("PeerProperties", "SaslHandshake", "Metadata", "QueryOffset",
             "QueryPublisherSequence", "StreamStats", "Route", "Partitions",
             "ExchangeCommandVersions")  # fmt: skip
# besides the ports given: the brokers' stream and stream TLS ports (the heuristic finds
# others)
PORTS = (5551, 5552, 5553, 5554)
_LAG = [c.name for c in PUBLISHES].index("lag_ms")
_OUTCOME = [c.name for c in PUBLISHES].index("outcome")


@dataclass
class Exchange:
    connection: str
    command: str
    request: Record
    request_ns: int
    response: Record | None = None
    latency_ms: float | None = None


@dataclass
class Captured:
    paths: list[str]
    exchanges: list[Exchange] = field(default_factory=list)
    tune_offers: list[dict] = field(default_factory=list)  # the broker's Tune, a connection
    versions_used: dict[str, set[int]] = field(default_factory=dict)  # command -> versions
    client_properties: dict | None = None  # of the first PeerProperties request
    published: int = 0  # publishing ids in Publish frames
    confirm_lag_ms: list[float] = field(default_factory=list)

    def answered(self, command: str) -> list[Exchange]:
        return [e for e in self.exchanges if e.command == command and e.response is not None]

    @property
    def confirm_p50_ms(self) -> float | None:
        return summarize_ms(self.confirm_lag_ms)["p50_ms"]


def read_capture(paths: Iterable[str], ports: Iterable[int] = ()) -> Captured:
    """Raises CaptureError when a file is not a readable capture."""
    paths = list(paths)
    captured = Captured(paths)
    pending: dict[tuple[str, int], Exchange] = {}
    confirms = ConfirmCollector(keep_backlog=False)
    on_ledger = {
        "DeclarePublisher": confirms.on_declare,
        "Publish": confirms.on_publish,
        "PublishConfirm": confirms.on_confirm,
        "PublishError": confirms.on_error,
    }
    for event in dissect(paths, ports=tuple(dict.fromkeys((*ports, *PORTS)))):
        record = event.record if isinstance(event, FrameEvent) else None
        if not isinstance(record, Record):
            continue
        command = record.command
        captured.versions_used.setdefault(command, set()).add(record.version)
        if command in on_ledger:
            on_ledger[command](event)
            if command == "Publish":
                captured.published += len(record.publishing_ids or ())
        elif command == "Tune" and event.direction == "s2c":
            captured.tune_offers.append({"frame_max": record.frame_max,
                                         "heartbeat": record.heartbeat})  # fmt: skip
        if command not in READ_ONLY or record.correlation_id is None:
            continue
        key = (event.connection, record.correlation_id)
        if not record.response and event.direction == "c2s":
            if command == "PeerProperties" and captured.client_properties is None:
                captured.client_properties = dict(record.properties or {})
            pending[key] = Exchange(event.connection, command, record, event.ts_ns)
            captured.exchanges.append(pending[key])
        elif record.response and event.direction == "s2c":
            exchange = pending.pop(key, None)
            if exchange is not None and exchange.command == command:
                exchange.response = record
                exchange.latency_ms = (event.ts_ns - exchange.request_ns) / 1e6
    confirms.finish()
    captured.confirm_lag_ms = [row[_LAG] for row in confirms.pairs if row[_OUTCOME] == "confirmed"]
    return captured
