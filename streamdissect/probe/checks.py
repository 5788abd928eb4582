"""What `streamdissect probe` asks a broker and the report it makes (JSON-able dict).

Read-only unless writes are allowed: PeerProperties, SASL, Tune, Open, ExchangeCommandVersions,
Metadata, StreamStats, QueryOffset and QueryPublisherSequence (for a reference nobody uses),
nothing else. A command the broker does not know makes it close the connection (code 0x0d):
the probe notes it as not supported, connects again and goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from streamdissect.probe.errors import ProbeError
from streamdissect.probe.session import Connector, Reply, Session
from streamdissect.probe.writes import p50_max, round_trip
from streamdissect.protocols.stream import MESSAGES, message_spec
from streamdissect.protocols.stream.codes import ResponseCode, code_name
from streamdissect.protocols.stream.spec import BY_KEY

NOT_SUPPORTED = "not supported"
# the reference QueryOffset and QueryPublisherSequence ask about: reading, never storing
READ_REFERENCE = "streamdissect-probe"


@dataclass(frozen=True)
class ProbeOptions:
    streams: tuple[str, ...] = ()
    samples: int = 5  # round trips of each read-only command (and messages with writes)
    allow_writes: bool = False
    idle: float = 0.0  # seconds to stay connected at the end, heartbeating


def client_command_versions() -> list[dict]:
    """The commands the codec speaks in more than one version (Publish and Deliver 1..2
    today), from the spec table. Only those: 4.0.5 drops the connection when the list
    names a command it does not know (ResolveOffsetSpec, 0x1f), and a command with one
    version has nothing to negotiate."""
    versions: dict[int, set[int]] = {}
    for message in MESSAGES:
        versions.setdefault(message.key & 0x7FFF, set()).update(message.versions)
    return [{"key": key, "min_version": min(v), "max_version": max(v)}
            for key, v in sorted(versions.items()) if len(v) > 1]  # fmt: skip


def command_name(key: int) -> str:
    message = BY_KEY.get(key)
    return message.command if message else f"unknown(0x{key:04x})"


def version_rows(commands: list) -> list[dict]:
    """An ExchangeCommandVersions answer as rows: command, key, min_version, max_version."""
    rows = []
    for item in commands:
        key, low, high = item["key"], item["min_version"], item["max_version"]
        rows.append({"command": command_name(key), "key": key, "min_version": low,
                     "max_version": high})  # fmt: skip
    return sorted(rows, key=lambda row: row["key"])


class Asker:
    """Sessions of one run, and commands a broker may not know: it closes the connection on
    those (code 0x0d), which is noted, and a new session goes on."""

    def __init__(self, connector: Connector,
                 status: Callable[[str], None] = lambda message: None) -> None:  # fmt: skip
        self.connector, self.status = connector, status
        self.offered: set[int] | None = None  # keys ExchangeCommandVersions listed
        self.refused: list[str] = []  # commands the broker closed the connection on
        self.answered: set[str] = set()
        self.sessions: list[Session] = []

    def open(self) -> Session:
        session = self.connector.open()
        self.sessions.append(session)
        return session

    def supported(self, command: str) -> bool | None:
        """False: the broker refused it or did not list it; None: not known yet."""
        if command in self.refused:
            return False
        if command in self.answered:  # (4.0.5 does not list ExchangeCommandVersions itself)
            return True
        if self.offered is not None:
            return message_spec(command).key in self.offered
        return None

    def attempt(self, session: Session, command: str, step: str,
                **fields) -> tuple[Session, Reply | None]:  # fmt: skip
        """The reply, or None (and a new session) when the broker refuses the command."""
        if self.supported(command) is False:
            return session, None
        try:
            reply = session.call(command, step, **fields)
            self.answered.add(command)
            return session, reply
        except ProbeError as exc:
            if exc.kind != "refused":
                raise
        self.refused.append(command)
        return self.open(), None

    def command_versions(self, session: Session) -> tuple[Session, list[dict] | str]:
        """The broker's ExchangeCommandVersions answer as rows, or NOT_SUPPORTED."""
        session, reply = self.attempt(session, "ExchangeCommandVersions",
                                      "exchange_command_versions",
                                      commands=client_command_versions())  # fmt: skip
        if reply is None:
            return session, NOT_SUPPORTED
        rows = version_rows(reply.record.commands)
        self.offered = {row["key"] for row in rows}
        return session, rows

    def heartbeats(self, session: Session) -> dict:
        sessions = set(self.sessions) | {session}
        return {"interval_s": session.heartbeat,
                "sent": sum(s.heartbeats_sent for s in sessions),
                "received": sum(s.heartbeats_received for s in sessions)}  # fmt: skip


class Probe(Asker):
    def __init__(self, connector: Connector, options: ProbeOptions,
                 status: Callable[[str], None] = lambda message: None) -> None:  # fmt: skip
        super().__init__(connector, status)
        self.options = options

    # --- the run ---------------------------------------------------------------------------

    def run(self) -> dict:
        session = self.open()
        wire = session.wire
        report = {
            "target": self.connector.target.display,
            "tls": wire.tls,
            "server_properties": session.server_properties,
            "sasl_mechanisms": session.mechanisms,
            "sasl_mechanism": session.mechanism,
            "tune": {"offered": session.tune_offer, "accepted": session.tune,
                     "limits": {"frame_max": self.connector.limits.frame_max,
                                "heartbeat": self.connector.limits.heartbeat}},
            "connection_properties": session.connection_properties,
            "handshake_ms": session.handshake_ms,
        }  # fmt: skip
        session, report["command_versions"] = self.command_versions(session)
        session, report["streams"] = self.streams(session)
        session, report["rtt_ms"] = self.round_trips(session)
        report["writes"] = None
        if self.options.allow_writes:
            session, report["writes"] = round_trip(
                self.connector, session, self.options.samples, self.status
            )
        if self.options.idle > 0:
            session.idle(self.options.idle)
        session.close()
        report["refused"] = self.refused
        report["heartbeats"] = self.heartbeats(session)
        report["connections"] = len(self.connector.wires)
        return report

    def streams(self, session: Session) -> tuple[Session, list[dict]]:
        rows = []
        for name in self.options.streams:
            record = session.call("Metadata", "metadata", streams=[name]).record
            brokers = {b["reference"]: f"{b['host']}:{b['port']}" for b in record.brokers}
            meta = next((m for m in record.stream_metadata if m["stream"] == name), None)
            row = {"stream": name, "code": code_name(meta["code"]) if meta else None,
                   "leader": None, "replicas": [], "stats": None}  # fmt: skip
            if meta and meta["code"] == ResponseCode.OK:
                row["leader"] = brokers.get(meta["leader_reference"])
                row["replicas"] = [brokers.get(r, str(r)) for r in meta["replicas_references"]]
            session, reply = self.attempt(session, "StreamStats", "stream_stats", stream=name)
            if reply is None:
                row["stats"] = NOT_SUPPORTED
            elif reply.record.code == ResponseCode.OK:
                row["stats"] = dict(reply.record.statistics)
            else:
                row["stats"] = code_name(reply.record.code)
            rows.append(row)
        return session, rows

    def round_trips(self, session: Session) -> tuple[Session, list[dict]]:
        """N samples of every read-only command: rows command, samples, p50, max (ms)."""
        calls = [
            ("Metadata", {"streams": list(self.options.streams)}),
            ("ExchangeCommandVersions", {"commands": client_command_versions()}),
        ]
        for name in self.options.streams:
            calls += [("StreamStats", {"stream": name}),
                      ("QueryOffset", {"reference": READ_REFERENCE, "stream": name}),
                      ("QueryPublisherSequence", {"publisher_reference": READ_REFERENCE,
                                                  "stream": name})]  # fmt: skip
        samples: dict[str, list[float]] = {}
        for _ in range(self.options.samples):
            for command, fields in calls:
                step = f"rtt {command}"
                session, reply = self.attempt(session, command, step, **fields)
                if reply is not None:
                    samples.setdefault(command, []).append(reply.rtt_ms)
        rows = []
        for command in dict.fromkeys(c for c, _ in calls):
            values = samples.get(command, [])
            rows.append({"command": command, "samples": len(values), **p50_max(values)})
        return session, rows
