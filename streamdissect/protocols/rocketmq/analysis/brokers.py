"""Brokers registering with a name server (`rocketmq_broker_registrations`): every
REGISTER_BROKER and UNREGISTER_BROKER with the broker's name, address, cluster and id, the
topics of its topic configuration (the registration's fastjson body; none when the body is
compressed or does not parse) and the name server's answer."""

from __future__ import annotations

from typing import Any

from streamdissect.protocols.rocketmq.analysis.calls import PerCall, answer
from streamdissect.protocols.rocketmq.analysis.rows import row_type
from streamdissect.protocols.rocketmq.tables import BROKER_REGISTRATIONS


def _topic_names(body: Any) -> list[str] | None:
    wrapper = body.get("topicConfigSerializeWrapper") if isinstance(body, dict) else None
    table = wrapper.get("topicConfigTable") if isinstance(wrapper, dict) else None
    return sorted(str(name) for name in table) if isinstance(table, dict) else None


RegistrationRow = row_type("RegistrationRow", BROKER_REGISTRATIONS)


class BrokerCollector(PerCall):
    row_class = RegistrationRow

    def on_request(self, ev: Any) -> None:
        rec = ev.record
        fields = rec.fields
        topics = _topic_names(rec.body_json)
        self.new_row(ev, request_name=rec.code_name, cluster_name=fields.get("clusterName"),
                     broker_name=fields.get("brokerName"), broker_addr=fields.get("brokerAddr"),
                     broker_id=fields.get("brokerId"), ha_server_addr=fields.get("haServerAddr"),
                     topics=None if topics is None else len(topics),
                     topic_names=None if topics is None else ",".join(topics))  # fmt: skip
        self.keep(ev)

    def answered(self, request: Any, rows: list, ev: Any) -> None:
        (row,) = rows
        answer(row, request, ev)
        row.master_addr = ev.record.fields.get("masterAddr")
