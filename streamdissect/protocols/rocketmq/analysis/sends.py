"""Every message sent (`rocketmq_sends`): a SEND_MESSAGE(_V2) is one, a SEND_BATCH_MESSAGE
one a message of its body; each with its topic, queue, ids, size and how the broker
answered (the Java client's SendStatus, or the error), and the call's latency.

A batch's response names one queue and the first message's queue offset, and its `msgId`
lists the messages' offset ids in their order, comma-separated."""

from __future__ import annotations

from typing import Any

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.analysis.calls import ONEWAY_FLAG, PerCall, answer
from streamdissect.protocols.rocketmq.analysis.rows import row_type, shared
from streamdissect.protocols.rocketmq.tables import SENDS

SendRow = row_type("SendRow", SENDS)


class SendCollector(PerCall):
    row_class = SendRow

    def on_request(self, ev: Any) -> None:
        rec = ev.record
        status = "oneway" if rec.flag & ONEWAY_FLAG else "no_response"
        opaque, name = rec.opaque, rec.code_name
        group = shared(rec.fields.get("producerGroup"))
        # (every value given at once: a row may be written as soon as it is made)
        if not rec.messages:  # (a body not read: the frame cut short)
            self.add_row(ev, SendRow(opaque=opaque, request_name=name, batch_index=0,
                                     status=status, producer_group=group,
                                     topic=shared(rec.topic), queue_id=rec.queue_id,
                                     wire_length=len(rec.body)))  # fmt: skip
        for index, message in enumerate(rec.messages or ()):
            wire = len(message.body)
            compressed = message.compressed
            self.add_row(ev, SendRow(opaque=opaque, request_name=name, batch_index=index,
                                     status=status, producer_group=group,
                                     topic=shared(message.topic), queue_id=message.queue_id,
                                     msg_id=message.msg_id, tags=shared(message.tags),
                                     keys=message.keys, compressed=compressed,
                                     size=message.inflated_length if compressed else wire,
                                     wire_length=wire))  # fmt: skip
        self.keep(ev)

    def answered(self, request: Any, rows: list, ev: Any) -> None:
        rec = ev.record
        fields = rec.fields
        status = spec.SEND_STATUS.get(rec.code) or rec.code_name
        offset_ids = (fields.get("msgId") or "").split(",")
        queue_id = fields.get("queueId")
        queue_offset = fields.get("queueOffset")
        for index, row in enumerate(rows):
            answer(row, request, ev)
            row.status = status
            if queue_id is not None:
                row.queue_id = queue_id
            if queue_offset is not None:
                row.queue_offset = queue_offset + index
            if index < len(offset_ids) and offset_ids[index]:
                row.offset_msg_id = offset_ids[index]
