"""Every PULL_MESSAGE (`rocketmq_pulls`): what was asked (group, topic, queue, offset, how
many, whether the broker may hold it: a long poll) and what came back (code and remark, the
messages, the next, min and max offsets); a long poll's latency is how long the broker held
it."""

from __future__ import annotations

from typing import Any

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.analysis.calls import PerCall, answer, server_of


class PullCollector(PerCall):
    def on_request(self, ev: Any) -> None:
        rec = ev.record
        fields = rec.fields
        self.rows.append({
            "connection": ev.connection, "server": server_of(ev.connection),
            "opaque": rec.opaque, "consumer_group": fields.get("consumerGroup"),
            "topic": rec.topic, "queue_id": rec.queue_id,
            "queue_offset": fields.get("queueOffset"), "max_msg_nums": fields.get("maxMsgNums"),
            "long_poll": bool((fields.get("sysFlag") or 0) & spec.PULL_SUSPEND),
            "suspend_timeout_ms": fields.get("suspendTimeoutMillis"), "request_ts_ns": ev.ts_ns,
            "response_ts_ns": None, "latency_ms": None, "held_ms": None, "code": None,
            "code_name": None, "remark": None, "messages": None, "bytes": None,
            "next_begin_offset": None, "min_offset": None, "max_offset": None,
            "suggested_broker_id": None})  # fmt: skip
        self.keep(ev, len(self.rows) - 1)

    def answered(self, request: Any, index: Any, ev: Any) -> None:
        rec = ev.record
        fields = rec.fields
        row = self.rows[index]
        answer(row, request, ev)
        messages = rec.messages or ()
        row.update(messages=len(messages),
                   bytes=sum(len(m.body) for m in messages),
                   next_begin_offset=fields.get("nextBeginOffset"),
                   min_offset=fields.get("minOffset"), max_offset=fields.get("maxOffset"),
                   suggested_broker_id=fields.get("suggestWhichBrokerId"))  # fmt: skip
        if row["long_poll"]:
            row["held_ms"] = row["latency_ms"]
