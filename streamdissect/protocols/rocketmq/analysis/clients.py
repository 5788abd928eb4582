"""Clients as the brokers see them (`rocketmq_clients`): each client id's HEART_BEATs (its
producer and consumer groups and subscriptions, from the heartbeat's fastjson body) and its
UNREGISTER_CLIENT calls."""

from __future__ import annotations

from typing import Any

from streamdissect.protocols.rocketmq.analysis.calls import server_of


def _groups(items: Any) -> list[dict]:
    return [g for g in items if isinstance(g, dict)] if isinstance(items, list) else []


def _add(names: list, new: Any) -> None:
    for name in new:
        if isinstance(name, str) and name not in names:
            names.append(name)


class ClientCollector:
    def __init__(self) -> None:
        self._clients: dict[tuple, dict] = {}  # (server, client id) -> what is known

    def _client(self, ev: Any, client_id: Any) -> dict:
        key = (server_of(ev.connection), client_id if isinstance(client_id, str) else None)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = {
                "server": key[0], "client_id": key[1], "heartbeats": 0,
                "first_heartbeat_ns": None, "last_heartbeat_ns": None, "producer_groups": [],
                "consumer_groups": [], "subscriptions": [], "unregistered_ns": None,
                "unregistered_groups": []}  # fmt: skip
        rec = ev.record
        client.update(connection=ev.connection, language=rec.language, version=rec.version)
        return client

    def on_heartbeat(self, ev: Any) -> None:
        body = ev.record.body_json if isinstance(ev.record.body_json, dict) else {}
        client = self._client(ev, body.get("clientID"))
        client["heartbeats"] += 1
        if client["first_heartbeat_ns"] is None:
            client["first_heartbeat_ns"] = ev.ts_ns
        client["last_heartbeat_ns"] = ev.ts_ns
        producers = _groups(body.get("producerDataSet"))
        consumers = _groups(body.get("consumerDataSet"))
        _add(client["producer_groups"], (g.get("groupName") for g in producers))
        _add(client["consumer_groups"], (g.get("groupName") for g in consumers))
        _add(
            client["subscriptions"],
            (s.get("topic") for g in consumers for s in _groups(g.get("subscriptionDataSet"))),
        )

    def on_unregister(self, ev: Any) -> None:
        fields = ev.record.fields
        client = self._client(ev, fields.get("clientID"))
        client["unregistered_ns"] = ev.ts_ns
        _add(
            client["unregistered_groups"],
            (fields.get("producerGroup"), fields.get("consumerGroup")),
        )

    def rows(self) -> list[dict]:
        lists = ("producer_groups", "consumer_groups", "subscriptions", "unregistered_groups")
        return [{**c, **{name: ",".join(c[name]) or None for name in lists}}
                for c in self._clients.values()]  # fmt: skip
