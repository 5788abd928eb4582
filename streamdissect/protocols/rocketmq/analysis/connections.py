"""RocketMQ connections (`rocketmq_connections`): each connection's TCP facts (client,
server, times, frames and bytes each way, how TCP ended) with its calls (requests each way,
oneway ones, responses) and the times of its first and last command.

RocketMQ has no command that closes a connection: a client or a server ends it by closing
the socket, so a connection ended by FIN or RST is `closed`, as it should be, and one still
open when the capture ends is `open`."""

from __future__ import annotations

from typing import Any

from streamdissect.analysis.fields import get
from streamdissect.protocols.rocketmq import spec

STATUS = {"fin": "closed", "rst": "closed", "open": "open"}


class ConnectionCollector:
    def __init__(self) -> None:
        self._seen: dict[str, dict] = {}  # connection -> its command counts and times

    def on_frame(self, ev: Any) -> None:
        seen = self._seen.get(ev.connection)
        if seen is None:
            seen = self._seen[ev.connection] = {
                "requests_c2s": 0, "requests_s2c": 0, "oneway": 0, "responses": 0,
                "first_command_ns": ev.ts_ns}  # fmt: skip
        flag = ev.record.flag
        if flag & spec.RESPONSE_FLAG:
            seen["responses"] += 1
        elif flag & spec.ONEWAY_FLAG:
            seen["oneway"] += 1
        else:
            seen["requests_" + ev.direction] += 1
        seen["last_command_ns"] = ev.ts_ns

    def rows(self, tcp_connections: list) -> list[dict]:
        """One row per RocketMQ connection the dissector saw (its TCP summary), in its
        order; a connection known only by its frames (a chain analysed from them) too."""
        by_id = {get(t, "connection"): t for t in tcp_connections}
        ids = list(by_id) + [c for c in self._seen if c not in by_id]
        rows = []
        for cid in ids:
            t = by_id.get(cid)
            seen = self._seen.get(cid, {})
            tcp_end = get(t, "tcp_end")
            rows.append({
                "connection": cid, "client": get(t, "client"), "server": get(t, "server"),
                "start_ns": get(t, "start_ns"), "end_ns": get(t, "end_ns"),
                "first_command_ns": seen.get("first_command_ns"),
                "last_command_ns": seen.get("last_command_ns"),
                "frames_c2s": get(t, "frames_c2s"), "frames_s2c": get(t, "frames_s2c"),
                "bytes_c2s": get(t, "bytes_c2s"), "bytes_s2c": get(t, "bytes_s2c"),
                "requests_c2s": seen.get("requests_c2s", 0),
                "requests_s2c": seen.get("requests_s2c", 0),
                "oneway": seen.get("oneway", 0), "responses": seen.get("responses", 0),
                "tcp_end": tcp_end, "status": STATUS.get(tcp_end)})  # fmt: skip
        return rows
