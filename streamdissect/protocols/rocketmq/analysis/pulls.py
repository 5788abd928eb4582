"""Every PULL_MESSAGE (`rocketmq_pulls`): what was asked (group, topic, queue, offset, how
many, whether the broker may hold it: a long poll) and what came back (code and remark, the
messages, the next, min and max offsets); a long poll's latency is how long the broker held
it."""

from __future__ import annotations

from typing import Any

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.analysis.calls import PerCall, answer, server_of
from streamdissect.protocols.rocketmq.analysis.rows import RowShape, shared
from streamdissect.protocols.rocketmq.hot import HotPulled
from streamdissect.protocols.rocketmq.tables import PULLS

P = RowShape(PULLS)
_pull_row = P.maker("connection", "server", "request_ts_ns", "opaque", "consumer_group", "topic",
                    "queue_id", "queue_offset", "max_msg_nums", "long_poll",
                    "suspend_timeout_ms")  # fmt: skip


class PullCollector(PerCall):
    shape = P

    def on_request(self, ev: Any) -> None:
        """A PULL_MESSAGE request (a command, or read light: hot.HotPull, its `fields`)."""
        rec = ev.record
        fields = rec.fields
        connection = ev.connection
        self.add_row(_pull_row(connection, server_of(connection), ev.ts_ns, rec.opaque,
                               shared(fields.get("consumerGroup")), shared(fields.get("topic")),
                               fields.get("queueId"), fields.get("queueOffset"),
                               fields.get("maxMsgNums"),
                               bool((fields.get("sysFlag") or 0) & spec.PULL_SUSPEND),
                               fields.get("suspendTimeoutMillis")))  # fmt: skip
        self.keep(ev)

    def answered(self, request: Any, rows: list, ev: Any) -> None:
        rec = ev.record
        (row,) = rows
        answer(row, P, request, ev)
        if rec.__class__ is HotPulled:  # (read light: its counts and fields)
            row[P.messages], row[P.bytes] = rec.messages, rec.bytes
            row[P.next_begin_offset] = rec.next_begin_offset
            row[P.min_offset], row[P.max_offset] = rec.min_offset, rec.max_offset
            row[P.suggested_broker_id] = rec.suggested_broker_id
        else:
            fields = rec.fields
            messages = rec.messages or ()
            row[P.messages] = len(messages)
            row[P.bytes] = sum(len(m.body) for m in messages)
            row[P.next_begin_offset] = fields.get("nextBeginOffset")
            row[P.min_offset], row[P.max_offset] = fields.get("minOffset"), fields.get("maxOffset")
            row[P.suggested_broker_id] = fields.get("suggestWhichBrokerId")
        if row[P.long_poll]:
            row[P.held_ms] = row[P.latency_ms]
