"""`compare`: a capture's read-only requests replayed against a live broker, and the
differences, request by request; capabilities, tune values, server version and latency.

PeerProperties and SaslHandshake are the live handshake's own (it sends the capture's first
client properties); every other read-only request is sent again with the captured fields.
With writes allowed, a capture that published gets the probe's round trip on a temporary
stream (never the capture's streams) and its confirm lag set against the captured one.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from streamdissect.analysis.percentiles import summarize_ms
from streamdissect.probe.captured import Captured, Exchange
from streamdissect.probe.checks import NOT_SUPPORTED, Asker, version_rows
from streamdissect.probe.diff import diff_response, row
from streamdissect.probe.errors import ProbeError
from streamdissect.probe.session import Connector, Reply, Session
from streamdissect.probe.writes import round_trip
from streamdissect.protocols.stream import message_spec

HANDSHAKE = ("PeerProperties", "SaslHandshake")
SERVER_KEYS = ("product", "version", "platform", "cluster_name")


@dataclass(frozen=True)
class CompareOptions:
    allow_writes: bool = False
    messages: int = 10  # the write round trip's messages


def _versions_text(rows: list[dict] | str | None, command: str) -> str | None:
    if rows is None or isinstance(rows, str):
        return rows
    found = next((r for r in rows if r["command"] == command), None)
    if found is None:
        return "not listed"
    return f"{found['min_version']}..{found['max_version']}"


class Compare(Asker):
    def __init__(self, connector: Connector, captured: Captured, options: CompareOptions,
                 status: Callable[[str], None] = lambda message: None) -> None:  # fmt: skip
        super().__init__(connector, status)
        self.captured, self.options = captured, options
        if captured.client_properties:
            connector.client_properties = captured.client_properties
        self.live_rtt: dict[str, list[float]] = defaultdict(list)
        self.failed: Counter = Counter()

    def run(self) -> dict:
        captured = self.captured
        session = self.open()
        handshake = {c: session.replies[c] for c in HANDSHAKE}
        live_offer, tune, server = session.tune_offer, session.tune, session.server_properties
        rows: list[dict] = []
        replayed: Counter = Counter()
        differing: Counter = Counter()
        for exchange in captured.exchanges:
            if exchange.response is None:  # (the capture has no answer to compare with)
                continue
            if exchange.command in HANDSHAKE:
                reply, failure = handshake[exchange.command], None
                self.live_rtt[exchange.command].append(reply.rtt_ms)
            else:
                session, reply, failure = self.replay(session, exchange)
            replayed[exchange.command] += 1
            if reply is None:
                found = [row(exchange.command, "response", exchange.response.code_name, failure,
                             "protocol")]  # fmt: skip
            else:
                found = diff_response(exchange.command, exchange.response, reply.record,
                                      reply.quirk)  # fmt: skip
            differing[exchange.command] += bool(found)
            rows += found
        session, live_versions = self.command_versions(session)
        rows += self.tune_rows(live_offer)
        capabilities = self.capabilities(live_versions)
        rows += [
            row(c["command"], "versions", c["used"], c["live"], "protocol")
            for c in capabilities["used_in_capture"]
            if c["ok"] is False and c["live"] != "refused"
        ]  # (refusals: rows above)
        writes = None
        if self.options.allow_writes and captured.published:
            session, writes = round_trip(self.connector, session, self.options.messages,
                                         self.status)  # fmt: skip
        session.close()
        differences = _counted(rows)
        return {
            "capture": captured.paths,
            "target": self.connector.target.display,
            "server": {
                "captured": self.captured_server(),
                "live": {k: server.get(k) for k in SERVER_KEYS},
            },
            "tune": {
                "captured": _distinct(captured.tune_offers),
                "live": live_offer,
                "accepted": tune,
            },
            "differences": differences,
            "summary": {
                kind: sum(d["count"] for d in differences if d["kind"] == kind)
                for kind in ("protocol", "server", "state")
            },
            "requests": [
                {"command": c, "replayed": n, "differing": differing[c]}
                for c, n in replayed.items()
            ],
            "capabilities": capabilities,
            "latency": self.latency(writes),
            "writes": writes,
            "connections": len(self.connector.wires),
        }

    def replay(self, session: Session,
               exchange: Exchange) -> tuple[Session, Reply | None, str | None]:  # fmt: skip
        """The live reply to the captured request, or None and why (a new session follows
        when the broker closed this one)."""
        request, command = exchange.request, exchange.command
        fields = {f.name: getattr(request, f.name)
                  for f in message_spec(command).fields_for(request.version)}  # fmt: skip
        if self.supported(command) is False:  # (refused before: not asked again)
            return session, None, "refused (the broker closes the connection on it)"
        try:
            reply = session.call(command, f"replay {command}", version=request.version, **fields)
        except ProbeError as exc:
            if exc.kind == "refused":
                self.refused.append(command)
            self.failed[command] += 1
            if exc.kind == "refused":
                why = "refused (the broker closes the connection on it)"
            else:
                why = f"failed: {exc.message}"
            session.abort()
            return self.open(), None, why
        self.answered.add(command)
        self.live_rtt[command].append(reply.rtt_ms)
        return session, reply, None

    def captured_server(self) -> dict | None:
        answered = self.captured.answered("PeerProperties")
        if not answered:
            return None
        props = answered[0].response.properties or {}
        return {k: props.get(k) for k in SERVER_KEYS}

    def tune_rows(self, live_offer: dict) -> list[dict]:
        rows = []
        for offer in _distinct(self.captured.tune_offers):
            for name in ("frame_max", "heartbeat"):
                if offer[name] != live_offer[name]:
                    rows.append(row("Tune", name, offer[name], live_offer[name], "server"))
        return rows

    def capabilities(self, live_versions: list[dict] | str) -> dict:
        """The command versions the capture's frames use against what the live broker
        offers; what it refused."""
        answered = self.captured.answered("ExchangeCommandVersions")
        captured_offer = version_rows(answered[0].response.commands) if answered else None
        used = []
        for command, versions in self.captured.versions_used.items():
            key = message_spec(command).key
            high = max(versions)
            live = _versions_text(live_versions, command)
            if command in self.refused:
                ok, live = False, "refused"
            elif live == NOT_SUPPORTED:
                # without ExchangeCommandVersions nothing above version 1 can be agreed
                ok = None if high == 1 else False
                live = "1 only (no ExchangeCommandVersions)" if high > 1 else "unknown"
            elif live == "not listed":  # (4.0.5 lists neither Deliver nor the handshake)
                ok = None
            else:
                low_live, high_live = (int(v) for v in live.split(".."))
                ok = low_live <= min(versions) and high <= high_live
            used.append({"command": command, "key": key,
                         "used": ", ".join(f"v{v}" for v in sorted(versions)),
                         "captured": _versions_text(captured_offer, command), "live": live,
                         "ok": ok})  # fmt: skip
        return {
            "captured_command_versions": captured_offer,
            "live_command_versions": live_versions,
            "used_in_capture": sorted(used, key=lambda r: r["key"]),
            "refused_live": sorted(set(self.refused)),
        }

    def latency(self, writes: dict | None) -> list[dict]:
        """Per replayed command: captured p50 against live p50 (ms)."""
        captured: dict[str, list[float]] = defaultdict(list)
        for exchange in self.captured.exchanges:
            if exchange.latency_ms is not None:
                captured[exchange.command].append(exchange.latency_ms)
        rows = []
        for command in dict.fromkeys(e.command for e in self.captured.exchanges):
            rows.append({"command": command,
                         "captured_p50_ms": summarize_ms(captured[command])["p50_ms"],
                         "live_p50_ms": summarize_ms(self.live_rtt[command])["p50_ms"],
                         "captured_samples": len(captured[command]),
                         "live_samples": len(self.live_rtt[command])})  # fmt: skip
        if writes is not None:
            rows.append({"command": "Publish→PublishConfirm",
                         "captured_p50_ms": self.captured.confirm_p50_ms,
                         "live_p50_ms": (writes["confirm_ms"] or {}).get("p50"),
                         "captured_samples": len(self.captured.confirm_lag_ms),
                         "live_samples": writes["confirmed"]})  # fmt: skip
        return rows


def _distinct(dicts: list[dict]) -> list[dict]:
    seen = []
    for d in dicts:
        if d not in seen:
            seen.append(d)
    return seen


def _counted(rows: list[dict]) -> list[dict]:
    """Equal rows once, with how many requests showed them."""
    counts: dict[tuple, dict] = {}
    for r in rows:
        key = (r["command"], r["field"], repr(r["captured"]), repr(r["live"]), r["kind"])
        if key in counts:
            counts[key]["count"] += 1
        else:
            counts[key] = r | {"count": 1}
    order = {"protocol": 0, "server": 1, "state": 2}
    return sorted(counts.values(), key=lambda r: order[r["kind"]])
