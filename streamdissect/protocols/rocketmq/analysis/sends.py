"""Every message sent (`rocketmq_sends`): a SEND_MESSAGE(_V2) is one, a SEND_BATCH_MESSAGE
one a message of its body; each with its topic, queue, ids, size and how the broker
answered (the Java client's SendStatus, or the error), and the call's latency.

A batch's response names one queue and the first message's queue offset, and its `msgId`
lists the messages' offset ids in their order, comma-separated."""

from __future__ import annotations

from typing import Any

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.analysis.calls import PerCall, answer
from streamdissect.protocols.rocketmq.analysis.rows import row_type, shared
from streamdissect.protocols.rocketmq.tables import SENDS

SendRow = row_type("SendRow", SENDS)


class SendCollector(PerCall):
    row_class = SendRow

    def on_request(self, ev: Any) -> None:
        rec = ev.record
        fields = rec.fields
        first = len(self.rows)
        status = "oneway" if rec.oneway else "no_response"
        for index, message in enumerate(rec.messages or (None,)):
            row = self.new_row(ev, opaque=rec.opaque, request_name=rec.code_name,
                               batch_index=index, status=status,
                               producer_group=shared(fields.get("producerGroup")))  # fmt: skip
            if message is None:  # (a body not read: the frame cut short)
                row.topic, row.queue_id = shared(rec.topic), rec.queue_id
                row.wire_length = len(rec.body)
            else:
                wire = len(message.body)
                row.topic, row.queue_id = shared(message.topic), message.queue_id
                row.msg_id = message.msg_id
                row.tags, row.keys = shared(message.tags), message.keys
                row.compressed = message.compressed
                row.size = message.inflated_length if message.compressed else wire
                row.wire_length = wire
        self.keep(ev, (first, len(self.rows)))  # (its rows' range)

    def answered(self, request: Any, span: Any, ev: Any) -> None:
        rec = ev.record
        fields = rec.fields
        status = spec.SEND_STATUS.get(rec.code) or rec.code_name
        offset_ids = (fields.get("msgId") or "").split(",")
        queue_offset = fields.get("queueOffset")
        for index, row in enumerate(self.rows[span[0] : span[1]]):
            answer(row, request, ev)
            row.status = status
            if fields.get("queueId") is not None:
                row.queue_id = fields["queueId"]
            if queue_offset is not None:
                row.queue_offset = queue_offset + index
            if index < len(offset_ids) and offset_ids[index]:
                row.offset_msg_id = offset_ids[index]
