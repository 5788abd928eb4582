"""Brokers registering with a name server (`rocketmq_broker_registrations`): every
REGISTER_BROKER and UNREGISTER_BROKER with the broker's name, address, cluster and id, the
topics of its topic configuration (the registration's fastjson body; none when the body is
compressed or does not parse) and the name server's answer."""

from __future__ import annotations

from typing import Any

from streamdissect.protocols.rocketmq.analysis.calls import PerCall, answer, server_of
from streamdissect.protocols.rocketmq.analysis.rows import RowShape
from streamdissect.protocols.rocketmq.tables import BROKER_REGISTRATIONS


def _topic_names(body: Any) -> list[str] | None:
    wrapper = body.get("topicConfigSerializeWrapper") if isinstance(body, dict) else None
    table = wrapper.get("topicConfigTable") if isinstance(wrapper, dict) else None
    return sorted(str(name) for name in table) if isinstance(table, dict) else None


B = RowShape(BROKER_REGISTRATIONS)
_registration_row = B.maker("connection", "server", "request_ts_ns", "request_name",
                            "cluster_name", "broker_name", "broker_addr", "broker_id",
                            "ha_server_addr", "topics", "topic_names")  # fmt: skip


class BrokerCollector(PerCall):
    shape = B

    def on_request(self, ev: Any) -> None:
        rec = ev.record
        fields = rec.fields
        topics = _topic_names(rec.body_json)
        connection = ev.connection
        self.add_row(_registration_row(
            connection, server_of(connection), ev.ts_ns, rec.code_name,
            fields.get("clusterName"), fields.get("brokerName"), fields.get("brokerAddr"),
            fields.get("brokerId"), fields.get("haServerAddr"),
            None if topics is None else len(topics),
            None if topics is None else ",".join(topics)))  # fmt: skip
        self.keep(ev)

    def answered(self, request: Any, rows: list, ev: Any) -> None:
        (row,) = rows
        answer(row, B, request, ev)
        row[B.master_addr] = ev.record.fields.get("masterAddr")
