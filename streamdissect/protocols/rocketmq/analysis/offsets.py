"""Consumer offsets per broker, group, topic and queue (`rocketmq_offsets`): the last
committed (UPDATE_CONSUMER_OFFSET, or a pull carrying its commitOffset under the commit
flag), the last a QUERY_CONSUMER_OFFSET answered, and the queue's max offset as the broker
last gave it (a pull response's maxOffset, a GET_MAX_OFFSET answer); lag is max offset less
committed offset where the wire shows both."""

from __future__ import annotations

from typing import Any

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.analysis.calls import server_of
from streamdissect.protocols.rocketmq.hot import HotPulled


class OffsetCollector:
    def __init__(self, calls: Any) -> None:
        self._calls = calls
        self._groups: dict[tuple, dict] = {}  # (server, group, topic, queue) -> row
        self._max: dict[tuple, tuple[int, int]] = {}  # (server, topic, queue) -> (max, ts)

    def _row(self, server: str, group: Any, topic: Any, queue_id: Any) -> dict:
        """The row of this server's (server_of a connection) group, topic and queue."""
        key = (server, group, topic, queue_id)
        row = self._groups.get(key)
        if row is None:
            row = self._groups[key] = {
                "server": server, "consumer_group": group, "topic": topic, "queue_id": queue_id,
                "committed_offset": None, "commits": 0, "committed_ts_ns": None,
                "queried_offset": None}  # fmt: skip
        return row

    def on_commit(self, ev: Any) -> None:
        """UPDATE_CONSUMER_OFFSET, or a pull: its commitOffset when the commit flag is set."""
        fields = ev.record.fields
        pull = ev.record.code == spec.PULL_CODE
        if pull and not (fields.get("sysFlag") or 0) & spec.PULL_COMMIT_OFFSET:
            return
        offset = fields.get("commitOffset")
        if offset is None:
            return
        row = self._row(server_of(ev.connection), fields.get("consumerGroup"), fields.get("topic"),
                        fields.get("queueId"))  # fmt: skip
        row.update(committed_offset=offset, committed_ts_ns=ev.ts_ns, commits=row["commits"] + 1)

    def on_query_response(self, ev: Any) -> None:
        request = self._calls.answered
        offset = ev.record.fields.get("offset")
        if request is not None and ev.record.code == 0 and offset is not None:
            self._row(server_of(request.connection), request.group, request.topic,
                      request.queue_id)["queried_offset"] = offset  # fmt: skip

    def on_max_offset(self, ev: Any) -> None:
        """A pull response's maxOffset, or a GET_MAX_OFFSET answer's offset (the request's
        topic, group and queue: calls.Asked's)."""
        request = self._calls.answered
        rec = ev.record
        if rec.__class__ is HotPulled:  # (read light; a field typed None is not held)
            offset = rec.offset if rec.max_offset is None else rec.max_offset
        else:
            fields = rec.fields
            offset = fields.get("maxOffset" if "maxOffset" in fields else "offset")
        if request is None or offset is None:
            return
        server = server_of(request.connection)
        self._max[(server, request.topic, request.queue_id)] = (offset, ev.ts_ns)
        if request.group is not None:  # (a pull's group gets a row)
            self._row(server, request.group, request.topic, request.queue_id)

    def rows(self) -> list[dict]:
        out = []
        for (server, _group, topic, queue), row in self._groups.items():
            max_offset, max_ts = self._max.get((server, topic, queue), (None, None))
            committed = row["committed_offset"]
            lag = None if max_offset is None or committed is None else max_offset - committed
            out.append({**row, "max_offset": max_offset, "max_offset_ts_ns": max_ts, "lag": lag})
        return out
