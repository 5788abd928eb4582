"""Every PULL_MESSAGE (`rocketmq_pulls`): what was asked (group, topic, queue, offset, how
many, whether the broker may hold it: a long poll) and what came back (code and remark, the
messages, the next, min and max offsets); a long poll's latency is how long the broker held
it."""

from __future__ import annotations

from typing import Any

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.analysis.calls import PerCall, answer
from streamdissect.protocols.rocketmq.analysis.rows import row_type, shared
from streamdissect.protocols.rocketmq.tables import PULLS

PullRow = row_type("PullRow", PULLS)


class PullCollector(PerCall):
    row_class = PullRow

    def on_request(self, ev: Any) -> None:
        rec = ev.record
        fields = rec.fields
        self.new_row(ev, opaque=rec.opaque, consumer_group=shared(fields.get("consumerGroup")),
                     topic=shared(rec.topic), queue_id=rec.queue_id,
                     queue_offset=fields.get("queueOffset"),
                     max_msg_nums=fields.get("maxMsgNums"),
                     long_poll=bool((fields.get("sysFlag") or 0) & spec.PULL_SUSPEND),
                     suspend_timeout_ms=fields.get("suspendTimeoutMillis"))  # fmt: skip
        self.keep(ev)

    def answered(self, request: Any, rows: list, ev: Any) -> None:
        rec = ev.record
        fields = rec.fields
        (row,) = rows
        answer(row, request, ev)
        messages = rec.messages or ()
        row.messages = len(messages)
        row.bytes = sum(len(m.body) for m in messages)
        row.next_begin_offset = fields.get("nextBeginOffset")
        row.min_offset, row.max_offset = fields.get("minOffset"), fields.get("maxOffset")
        row.suggested_broker_id = fields.get("suggestWhichBrokerId")
        if row.long_poll:
            row.held_ms = row.latency_ms
