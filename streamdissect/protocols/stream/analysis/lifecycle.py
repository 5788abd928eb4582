"""Connection lifecycle: handshake, SASL, tune, open, heartbeats, close.

One row per connection, like Zeek's conn.log. The SASL PLAIN password is never kept here:
only the user name reaches this table.
"""

from __future__ import annotations

import json

import numpy as np

from streamdissect.analysis.fields import get
from streamdissect.protocols.stream.analysis import hot_input
from streamdissect.protocols.stream.hot import DIRECTIONS, HEARTBEAT_KEY, HotFrames
from streamdissect.slotted import Unequal

NS_PER_S = 1_000_000_000


class _Conn(Unequal):
    """A connection's lifecycle as it goes."""

    __slots__ = field_names = ("connection", "first_ns", "last_ns", "handshake_ms",
                               "sasl_mechanism", "user", "vhost", "frame_max", "heartbeat",
                               "offered_frame_max", "offered_heartbeat", "heartbeats",
                               "last_seen", "missed_gaps", "client_properties",
                               "server_properties", "close_code", "close_reason", "closed_by")  # fmt: skip
    connection: str
    first_ns: int | None
    last_ns: int | None
    handshake_ms: float | None
    sasl_mechanism: str | None
    user: str | None
    vhost: str | None
    frame_max: int | None
    heartbeat: int | None
    offered_frame_max: int | None
    offered_heartbeat: int | None
    heartbeats: dict
    last_seen: dict
    missed_gaps: int
    client_properties: dict | None
    server_properties: dict | None
    close_code: int | None
    close_reason: str | None
    closed_by: str | None

    def __init__(self, connection: str, first_ns: int | None = None,
                 last_ns: int | None = None, handshake_ms: float | None = None,
                 sasl_mechanism: str | None = None, user: str | None = None,
                 vhost: str | None = None, frame_max: int | None = None,
                 heartbeat: int | None = None, offered_frame_max: int | None = None,
                 offered_heartbeat: int | None = None,
                 heartbeats: dict | None = None,
                 last_seen: dict | None = None, missed_gaps: int = 0,
                 client_properties: dict | None = None, server_properties: dict | None = None,
                 close_code: int | None = None, close_reason: str | None = None,
                 closed_by: str | None = None) -> None:  # fmt: skip
        self.connection = connection
        self.first_ns = first_ns
        self.last_ns = last_ns
        self.handshake_ms = handshake_ms
        self.sasl_mechanism = sasl_mechanism
        self.user = user
        self.vhost = vhost
        self.frame_max = frame_max
        self.heartbeat = heartbeat
        self.offered_frame_max = offered_frame_max
        self.offered_heartbeat = offered_heartbeat
        self.heartbeats = {"c2s": 0, "s2c": 0} if heartbeats is None else heartbeats
        self.last_seen = {} if last_seen is None else last_seen
        self.missed_gaps = missed_gaps
        self.client_properties = client_properties
        self.server_properties = server_properties
        self.close_code = close_code
        self.close_reason = close_reason
        self.closed_by = closed_by


class LifecycleCollector:
    def __init__(self) -> None:
        self._conns: dict[str, _Conn] = {}

    def _conn(self, connection: str) -> _Conn:
        c = self._conns.get(connection)
        if c is None:
            c = self._conns[connection] = _Conn(connection)
        return c

    def on_any(self, ev) -> None:
        """Every frame: first/last time and heartbeat silences."""
        self.seen(ev.connection, ev.direction, ev.ts_ns)

    def seen(self, connection: str, direction: str, ts: int) -> None:
        c = self._conns.get(connection) or self._conn(connection)
        if c.first_ns is None:
            c.first_ns = ts
        c.last_ns = ts
        last_seen = c.last_seen
        if c.heartbeat:
            previous = last_seen.get(direction)
            if previous is not None and ts - previous > 2 * c.heartbeat * NS_PER_S:
                c.missed_gaps += 1
        last_seen[direction] = ts

    def on_hot(self, run: HotFrames) -> None:
        """Hot frames as columns: seen() for each, heartbeat() for each Heartbeat, per
        connection and direction at once."""
        if hot_input.is_short(run):
            for _, key, ts, connection, direction, _ in hot_input.frames_of(run, None):
                self.seen(connection, direction, ts)
                if key == HEARTBEAT_KEY:
                    self.heartbeat(connection, direction)
            return
        # first_ns and last_ns: the connection's first and last frames in the run's order
        for number, name in enumerate(run.connections):
            rows = np.flatnonzero(run.connection == number)
            if len(rows):
                c = self._conn(name)
                if c.first_ns is None:
                    c.first_ns = int(run.ts_ns[rows[0]])
                c.last_ns = int(run.ts_ns[rows[-1]])
        group = run.connection * 2 + run.direction
        for g in hot_input.groups(group):
            rows = np.flatnonzero(group == g)
            connection, direction = run.connections[g // 2], DIRECTIONS[g % 2]
            ts = run.ts_ns[rows]
            c = self._conn(connection)
            previous = c.last_seen.get(direction)
            if c.heartbeat:
                gaps = np.diff(ts) if previous is None else np.diff(ts, prepend=previous)
                c.missed_gaps += int(np.count_nonzero(gaps > 2 * c.heartbeat * NS_PER_S))
            c.last_seen[direction] = int(ts[-1])
            c.heartbeats[direction] += int(np.count_nonzero(run.key[rows] == HEARTBEAT_KEY))

    def on_heartbeat(self, ev) -> None:
        self.heartbeat(ev.connection, ev.direction)

    def heartbeat(self, connection: str, direction: str) -> None:
        self._conn(connection).heartbeats[direction] += 1

    def on_peer_properties(self, ev) -> None:
        c = self._conn(ev.connection)
        props = getattr(ev.record, "properties", None)
        if getattr(ev.record, "response", None):
            c.server_properties = props
        else:
            c.client_properties = props

    def on_sasl_authenticate(self, ev) -> None:
        rec = ev.record
        if getattr(rec, "response", None):
            return
        c = self._conn(ev.connection)
        c.sasl_mechanism = getattr(rec, "mechanism", None)
        user = getattr(rec, "username", None)
        if user is not None:
            c.user = user

    def on_tune(self, ev) -> None:
        c = self._conn(ev.connection)
        rec = ev.record
        if ev.direction == "s2c":
            c.offered_frame_max = getattr(rec, "frame_max", None)
            c.offered_heartbeat = getattr(rec, "heartbeat", None)
            c.frame_max = c.frame_max if c.frame_max is not None else c.offered_frame_max
            c.heartbeat = c.heartbeat if c.heartbeat is not None else c.offered_heartbeat
        else:  # the client's reply is what the connection runs with
            c.frame_max = getattr(rec, "frame_max", None)
            c.heartbeat = getattr(rec, "heartbeat", None)

    def on_open(self, ev) -> None:
        c = self._conn(ev.connection)
        rec = ev.record
        if not getattr(rec, "response", None):
            c.vhost = getattr(rec, "virtual_host", None)
        elif c.first_ns is not None and c.handshake_ms is None:
            c.handshake_ms = (ev.ts_ns - c.first_ns) / 1e6

    def on_close(self, ev) -> None:
        rec = ev.record
        if getattr(rec, "response", None):
            return
        c = self._conn(ev.connection)
        if c.closed_by is None:
            c.closed_by = "client" if ev.direction == "c2s" else "server"
            c.close_code = getattr(rec, "closing_code", None)
            c.close_reason = getattr(rec, "closing_reason", None)

    def rows(self, tcp_connections: list | None = None) -> list[dict]:
        """Merge protocol facts with the TCP-level connections table of the dissector."""
        tcp_by_id = {get(t, "connection"): t for t in (tcp_connections or [])}
        ids = list(tcp_by_id) + [cid for cid in self._conns if cid not in tcp_by_id]
        rows = []
        for cid in ids:
            c = self._conns.get(cid) or _Conn(cid)
            t = tcp_by_id.get(cid)
            tcp_end = get(t, "tcp_end") or get(t, "ended_by") or get(t, "end_reason")
            closed_by = c.closed_by
            if closed_by is None and tcp_end in ("fin", "rst"):
                closed_by = "TCP closed without Close"
            rows.append(
                {
                    "connection": cid,
                    "client": get(t, "client"),
                    "server": get(t, "server"),
                    "start_ns": get(t, "start_ns", c.first_ns),
                    "end_ns": get(t, "end_ns", c.last_ns),
                    "frames_c2s": get(t, "frames_c2s"),
                    "frames_s2c": get(t, "frames_s2c"),
                    "bytes_c2s": get(t, "bytes_c2s"),
                    "bytes_s2c": get(t, "bytes_s2c"),
                    "handshake_ms": c.handshake_ms,
                    "sasl_mechanism": c.sasl_mechanism,
                    "user": c.user,
                    "vhost": c.vhost,
                    "frame_max": c.frame_max,
                    "heartbeat": c.heartbeat,
                    "heartbeats_c2s": c.heartbeats["c2s"],
                    "heartbeats_s2c": c.heartbeats["s2c"],
                    "missed_heartbeat_gaps": c.missed_gaps,
                    "client_properties": _json(c.client_properties),
                    "server_properties": _json(c.server_properties),
                    "close_code": c.close_code,
                    "close_reason": c.close_reason,
                    "closed_by": closed_by,
                    "tcp_end": tcp_end,
                }
            )
        return rows


def _json(value) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)
