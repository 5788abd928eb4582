"""Request/response pairing by connection and correlation id, and the per-command latency table.

Like Wireshark's SRT/RTD counters: calls, answered, open requests (never answered), orphan
responses (no request seen) and duplicate ids (a request reusing an id still pending).
A request in one direction is answered by the response key in the other direction, so
server-initiated requests (ConsumerUpdate, a server Close) pair independently of the
client's. Tune is a server offer answered by the client's reply (key 0x0014 or 0x8014).
Credit has a response only on error and is not a call; one-way commands are not calls.
"""

from __future__ import annotations

from collections import defaultdict

from streamdissect.analysis.percentiles import summarize_ms

# Commands that are not request/response calls (no correlation id, or answered by a ledger).
NOT_CALLS = frozenset(
    {
        "Publish",
        "PublishConfirm",
        "PublishError",
        "Deliver",
        "Credit",
        "StoreOffset",
        "MetadataUpdate",
        "Heartbeat",
    }
)


def _opposite(direction: str) -> str:
    return "s2c" if direction == "c2s" else "c2s"


class LatencyCollector:
    def __init__(self) -> None:
        # (connection, request direction, correlation id) -> row index in self.rows
        self._pending: dict[tuple[str, str, int], int] = {}
        # (connection) -> row index of the server's Tune offer awaiting the client's reply
        self._tune_offer: dict[str, int] = {}
        self.rows: list[dict] = []
        self._orphans: dict[str, int] = defaultdict(int)
        self._duplicates: dict[str, int] = defaultdict(int)

    def _new_row(self, ev, command: str, corr: int | None) -> int:
        self.rows.append(
            {
                "connection": ev.connection,
                "command": command,
                "direction": ev.direction,
                "correlation_id": corr,
                "request_ts_ns": ev.ts_ns,
                "response_ts_ns": None,
                "latency_ms": None,
                "code": None,
                "code_name": None,
                "status": "open",
            }
        )
        return len(self.rows) - 1

    def _answer(self, idx: int, ev, rec) -> None:
        row = self.rows[idx]
        row["response_ts_ns"] = ev.ts_ns
        row["latency_ms"] = (ev.ts_ns - row["request_ts_ns"]) / 1e6
        row["code"] = getattr(rec, "code", None)
        row["code_name"] = getattr(rec, "code_name", None)
        row["status"] = "answered"

    def on_frame(self, ev) -> None:
        rec = ev.record
        command = getattr(rec, "command", None)
        if command == "Tune":
            self._on_tune(ev, rec)
            return
        if command in NOT_CALLS or command is None:
            return
        corr = getattr(rec, "correlation_id", None)
        if corr is None:
            return
        if not getattr(rec, "response", None):
            key = (ev.connection, ev.direction, corr)
            previous = self._pending.get(key)
            if previous is not None:
                self.rows[previous]["status"] = "duplicate"
                self._duplicates[command] += 1
            self._pending[key] = self._new_row(ev, command, corr)
            return
        idx = self._pending.pop((ev.connection, _opposite(ev.direction), corr), None)
        if idx is None or self.rows[idx]["command"] != command:
            if idx is not None:  # wrong command for that id: the request stays open
                self._pending[(ev.connection, _opposite(ev.direction), corr)] = idx
            self._orphans[command] += 1
            self.rows.append(
                {
                    "connection": ev.connection,
                    "command": command,
                    "direction": _opposite(ev.direction),
                    "correlation_id": corr,
                    "request_ts_ns": None,
                    "response_ts_ns": ev.ts_ns,
                    "latency_ms": None,
                    "code": getattr(rec, "code", None),
                    "code_name": getattr(rec, "code_name", None),
                    "status": "orphan_response",
                }
            )
            return
        self._answer(idx, ev, rec)

    def _on_tune(self, ev, rec) -> None:
        if ev.direction == "s2c":
            self._tune_offer[ev.connection] = self._new_row(ev, "Tune", None)
            return
        idx = self._tune_offer.pop(ev.connection, None)
        if idx is None:
            self._orphans["Tune"] += 1
            return
        row = self.rows[idx]
        row["response_ts_ns"] = ev.ts_ns
        row["latency_ms"] = (ev.ts_ns - row["request_ts_ns"]) / 1e6
        row["status"] = "answered"

    def summary(self) -> list[dict]:
        """One row per command, in order of first appearance."""
        by_command: dict[str, dict] = {}
        samples: dict[str, list[float]] = defaultdict(list)
        for row in self.rows:
            cmd = row["command"]
            stats = by_command.setdefault(
                cmd, {"command": cmd, "calls": 0, "answered": 0, "open_requests": 0}
            )
            if row["status"] == "orphan_response":
                continue
            stats["calls"] += 1
            if row["status"] == "answered":
                stats["answered"] += 1
                samples[cmd].append(row["latency_ms"])
            else:  # open, or a duplicate never answered
                stats["open_requests"] += 1
        out = []
        for cmd, stats in by_command.items():
            stats["orphan_responses"] = self._orphans.get(cmd, 0)
            stats["duplicate_ids"] = self._duplicates.get(cmd, 0)
            stats.update(summarize_ms(samples[cmd]))
            out.append(stats)
        for cmd, n in self._orphans.items():
            if cmd not in by_command:
                row = {
                    "command": cmd,
                    "calls": 0,
                    "answered": 0,
                    "open_requests": 0,
                    "orphan_responses": n,
                    "duplicate_ids": 0,
                }
                row.update(summarize_ms([]))
                out.append(row)
        return out
