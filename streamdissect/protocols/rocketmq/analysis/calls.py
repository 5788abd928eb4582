"""RocketMQ calls: a request paired with the response of the same opaque on the same
connection, in the other direction (`rocketmq_requests`), and their latency per request code,
server and direction (`rocketmq_latency`, in the shape of the Stream's SRT table).

The other collectors take a response's request from here: the call collector sees every
frame first, and `answered` is then the request event the current response answers (None
for a request, or a response whose request the capture does not hold). A collector that
keeps something per open call keys it by `call_key(request event)`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from streamdissect.analysis.percentiles import summarize_ms
from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.framing import MAX_OPEN_CALLS

_OTHER = {"c2s": "s2c", "s2c": "c2s"}


def server_of(connection: str) -> str:
    """The server's ip:port of a connection id `client-server[#n]`."""
    return connection.split("-", 1)[-1].split("#", 1)[0]


def call_key(request_event: Any) -> tuple[str, str, int]:
    return request_event.connection, request_event.direction, request_event.record.opaque


class OpenCalls:
    """What a collector keeps per open call (a row index), bounded as the framer bounds its
    open calls: past MAX_OPEN_CALLS the oldest is forgotten (its row stays unanswered)."""

    def __init__(self) -> None:
        self._open: dict[tuple, Any] = {}

    def opened(self, request_event: Any, value: Any) -> Any:
        """Keep `value` for the call; what was kept for an open call of the same key."""
        open_calls = self._open
        key = call_key(request_event)
        previous = open_calls.pop(key, None)
        open_calls[key] = value
        if len(open_calls) > MAX_OPEN_CALLS:
            del open_calls[next(iter(open_calls))]
        return previous

    def closed(self, request_event: Any | None) -> Any:
        """What was kept for the call `request_event` asked (None: nothing, or no request)."""
        return None if request_event is None else self.closed_key(call_key(request_event))

    def closed_key(self, key: tuple) -> Any:
        return self._open.pop(key, None)


class PerCall:
    """A collector whose rows are made at a request and completed at its response: `keep`
    what a request's rows are (unless it is oneway); a response of a kept call goes to
    `answered(request event, what was kept, response event)`."""

    def __init__(self, calls: Any) -> None:
        self._calls = calls
        self._open = OpenCalls()
        self.rows: list[dict] = []

    def keep(self, request_event: Any, value: Any) -> None:
        if not request_event.record.oneway:
            self._open.opened(request_event, value)

    def on_response(self, ev: Any) -> None:
        request = self._calls.answered
        kept = self._open.closed(request)
        if kept is not None:
            self.answered(request, kept, ev)

    def answered(self, request_event: Any, kept: Any, response_event: Any) -> None:
        raise NotImplementedError


def answer(row: dict, request_event: Any, response_event: Any) -> None:
    """A row's response columns from its response (and the latency from its request)."""
    rec = response_event.record
    row["response_ts_ns"] = response_event.ts_ns
    row["latency_ms"] = (response_event.ts_ns - request_event.ts_ns) / 1e6
    row["code"] = rec.code
    row["remark"] = rec.remark
    if "code_name" in row:
        row["code_name"] = rec.code_name


class CallCollector:
    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.answered: Any = None  # the request event the current response answers
        self._pending = OpenCalls()  # (row, request event) of each open call

    def on_frame(self, ev: Any) -> None:
        rec = ev.record
        if rec.response:
            self._on_response(ev, rec)
            return
        self.answered = None
        self.rows.append({
            "connection": ev.connection, "server": server_of(ev.connection),
            "direction": ev.direction, "opaque": rec.opaque, "request_code": rec.code,
            "request_name": spec.request_name(rec.code), "topic": rec.topic,
            "request_ts_ns": ev.ts_ns, "response_ts_ns": None, "latency_ms": None,
            "code": None, "code_name": None, "remark": None,
            "status": "oneway" if rec.oneway else "open"})  # fmt: skip
        if rec.oneway:
            return
        previous = self._pending.opened(ev, (len(self.rows) - 1, ev))
        if previous is not None:
            self.rows[previous[0]]["status"] = "duplicate"

    def _on_response(self, ev: Any, rec: Any) -> None:
        key = (ev.connection, _OTHER.get(ev.direction, ev.direction), rec.opaque)
        found = self._pending.closed_key(key)
        if found is None:
            self.answered = None
            self.rows.append({
                "connection": ev.connection, "server": server_of(ev.connection),
                "direction": key[1], "opaque": rec.opaque, "request_code": rec.request_code,
                "request_name": (None if rec.request_code is None
                                 else spec.request_name(rec.request_code)),
                "topic": None, "request_ts_ns": None, "response_ts_ns": ev.ts_ns,
                "latency_ms": None, "code": rec.code, "code_name": rec.code_name,
                "remark": rec.remark, "status": "orphan_response"})  # fmt: skip
            return
        index, self.answered = found
        row = self.rows[index]
        answer(row, self.answered, ev)
        row["status"] = "answered"

    def summary(self) -> list[dict]:
        """One row per (request code, server, direction), in order of first appearance."""
        groups: dict[tuple, dict] = {}
        samples: dict[tuple, list[float]] = defaultdict(list)
        for row in self.rows:
            key = (row["request_code"], row["server"], row["direction"])
            stats = groups.get(key)
            if stats is None:
                stats = groups[key] = {
                    "request_code": key[0], "request_name": row["request_name"],
                    "server": key[1], "direction": key[2], "calls": 0, "answered": 0,
                    "open_requests": 0, "orphan_responses": 0, "duplicate_ids": 0,
                    "oneway": 0}  # fmt: skip
            status = row["status"]
            if status == "orphan_response":
                stats["orphan_responses"] += 1
            elif status == "oneway":
                stats["oneway"] += 1
            else:
                stats["calls"] += 1
                if status == "answered":
                    stats["answered"] += 1
                    samples[key].append(row["latency_ms"])
                else:
                    stats["open_requests"] += 1
                    stats["duplicate_ids"] += status == "duplicate"
        for key, stats in groups.items():
            stats.update(summarize_ms(samples[key]))
        return list(groups.values())
