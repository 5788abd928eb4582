"""Every message sent (`rocketmq_sends`): a SEND_MESSAGE(_V2) is one, a SEND_BATCH_MESSAGE
one a message of its body; each with its topic, queue, ids, size and how the broker
answered (the Java client's SendStatus, or the error), and the call's latency.

A batch's response names one queue and the first message's queue offset, and its `msgId`
lists the messages' offset ids in their order, comma-separated."""

from __future__ import annotations

from typing import Any

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.analysis.calls import (
    ONEWAY_FLAG,
    PerCall,
    answer,
    server_of,
)
from streamdissect.protocols.rocketmq.analysis.rows import RowShape, shared
from streamdissect.protocols.rocketmq.hot import HotAnswer, HotSend
from streamdissect.protocols.rocketmq.tables import SENDS

S = RowShape(SENDS)
_request_row = S.maker("connection", "server", "request_ts_ns", "opaque", "request_name",
                       "batch_index", "status", "producer_group", "topic", "queue_id",
                       "wire_length")  # fmt: skip
_message_row = S.maker("connection", "server", "request_ts_ns", "opaque", "request_name",
                       "batch_index", "status", "producer_group", "topic", "queue_id",
                       "msg_id", "tags", "keys", "compressed", "size", "wire_length")  # fmt: skip


class SendCollector(PerCall):
    shape = S

    def on_request(self, ev: Any) -> None:
        rec = ev.record
        status = _status(rec.flag)
        opaque, name = rec.opaque, rec.code_name
        group = shared(rec.fields.get("producerGroup"))
        connection, ts_ns = ev.connection, ev.ts_ns
        server = server_of(connection)
        # (every value given at once: a row may be written as soon as it is made)
        if not rec.messages:  # (a body not read: the frame cut short)
            self.add_row(_request_row(connection, server, ts_ns, opaque, name, 0, status, group,
                                      shared(rec.topic), rec.queue_id, len(rec.body)))  # fmt: skip
        for index, message in enumerate(rec.messages or ()):
            wire = len(message.body)
            compressed = message.compressed
            self.add_row(_message_row(connection, server, ts_ns, opaque, name, index, status,
                                      group, shared(message.topic), message.queue_id,
                                      message.msg_id, shared(message.tags), message.keys,
                                      compressed, message.inflated_length if compressed
                                      else wire, wire))  # fmt: skip
        self.keep(ev)

    def on_hot_send(self, ev: Any) -> None:
        """A send request as a light record (hot.HotSend: one message, not compressed, its
        topic and queue the header's, as messages.sent_message makes it; its group, topic
        and tags come interned, as `shared` keeps them)."""
        rec = ev.record
        connection, wire = ev.connection, rec.wire
        self.add_row(_message_row(connection, server_of(connection), ev.ts_ns, rec.opaque,
                                  rec.code_name, 0, _HOT_STATUS, rec.group, rec.topic,
                                  rec.queue_id, rec.msg_id, rec.tags, rec.keys, False, wire,
                                  wire))  # fmt: skip
        self.keep(ev)

    def answered(self, request: Any, rows: list, ev: Any) -> None:
        rec = ev.record
        if rec.__class__ is HotAnswer:
            msg_ids, queue_id, queue_offset = rec.msg_id, rec.queue_id, rec.queue_offset
        else:
            fields = rec.fields
            msg_ids = fields.get("msgId")
            queue_id, queue_offset = fields.get("queueId"), fields.get("queueOffset")
        status = spec.SEND_STATUS.get(rec.code) or rec.code_name
        offset_ids = (msg_ids or "").split(",")
        for index, row in enumerate(rows):
            answer(row, S, request, ev)
            row[S.status] = status
            if queue_id is not None:
                row[S.queue_id] = queue_id
            if queue_offset is not None:
                row[S.queue_offset] = queue_offset + index
            if index < len(offset_ids) and offset_ids[index]:
                row[S.offset_msg_id] = offset_ids[index]


def _status(flag: int) -> str:
    """A send's status until its response comes."""
    return "oneway" if flag & ONEWAY_FLAG else "no_response"


_HOT_STATUS = _status(HotSend.flag)  # (a HotSend's flag is its class's: never oneway)
