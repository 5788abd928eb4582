"""RocketMQ's frames table (`rocketmq_frames`): `frame_batches(paths, protocol="rocketmq")`
gives every frame of a capture, row for row the reference `frame_row` of its event, with the
table's Arrow schema; and its columns say what the clients traced."""

from __future__ import annotations

import json

import pytest
from rocketmq_support import CAPTURES, NAMES, client_port, dissect, rocketmq_registered, truth

from streamdissect.protocols.rocketmq.frame_table import frame_row
from streamdissect.tables import schema
from streamdissect.tables.batches import frame_batches


def _table(name: str, rows_per_batch: int = 16_384) -> list[dict]:
    with rocketmq_registered():
        batches = list(frame_batches(str(CAPTURES / f"{name}.pcap"), protocol="rocketmq",
                                     rows_per_batch=rows_per_batch))  # fmt: skip
        arrow = schema.arrow_schema("rocketmq_frames")
    assert all(b.schema == arrow for b in batches)
    return [row for b in batches for row in b.to_pylist()]


@pytest.mark.parametrize("name", NAMES)
def test_the_table_is_its_events_row_for_row(name):
    frames, _ = dissect(CAPTURES / f"{name}.pcap")
    rows = _table(name, rows_per_batch=7)
    with rocketmq_registered():
        names = schema.column_names("rocketmq_frames")
    assert rows == [{c: frame_row(e).get(c) for c in names} for e in frames] and rows


def test_the_columns_say_what_the_java_client_traced():
    rows = _table("rmq-java-json")
    sent = [s for c in truth("rmq-java-json")["clients"] for s in c["report"].get("sends", [])]
    answers = [r for r in rows if r["response"] and r["msg_ids"] and r["message_count"] is None]
    assert sorted(r["msg_ids"] for r in answers) == sorted(s["offsetMsgId"] for s in sent)
    requests = {(client_port(r["connection"]), r["opaque"]): r for r in rows if not r["response"]}
    for client in truth("rmq-java-json")["clients"]:
        for f in client["report"]["frames"]:
            if f["dir"] == "c->s request":
                row = requests[(f["clientPort"], f["opaque"])]
                assert (row["code"], row["body_length"]) == (f["code"], f["bodyLength"])
                assert json.loads(row["fields_json"] or "{}").get("topic") == (
                    f["header"].get("topic") or f["header"].get("b"))
