"""A RocketMQ frame's text line and jsonl object (protocols/rocketmq/summary.py), held to what
the clients traced: the line of each traced frame names its code, opaque, topic, queue,
message ids and remark as the client had them; every frame's object is JSON."""

from __future__ import annotations

import json

import pytest
from rocketmq_support import CAPTURES, DIRECTIONS, NAMES, client_port, dissect, truth

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.records import Malformed
from streamdissect.protocols.rocketmq.summary import frame_fields, frame_summary


def _traced(name: str) -> dict:
    """(client port, direction, response, opaque) -> the traced frame."""
    out = {}
    for client in truth(name)["clients"]:
        for f in client["report"].get("frames", []):
            if f.get("dir") in DIRECTIONS and "clientPort" in f:
                direction, response = DIRECTIONS[f["dir"]]
                out[(f["clientPort"], direction, response, f["opaque"])] = f
    return out


@pytest.mark.parametrize("name", NAMES)
def test_lines_say_what_the_clients_traced(name):
    frames, _ = dissect(CAPTURES / f"{name}.pcap")
    traced = _traced(name)
    checked = 0
    for e in frames:
        r = e.record
        line = frame_summary(r)
        fields = frame_fields(r)
        assert json.loads(json.dumps(fields))["opaque"] == r.opaque
        f = traced.get((client_port(e.connection), e.direction, r.response, r.opaque))
        if f is None:
            continue
        names = spec.RESPONSE_CODES if r.response else spec.REQUEST_CODES
        assert line.startswith(names.get(f["code"], f"unknown({f['code']})"))
        assert f" opaque={f['opaque']} " in line
        assert (" response " in line) == r.response
        if f.get("topic"):
            assert f" topic={f['topic']} queueId={int(f['queueId'])} " in line
            assert fields["topic"] == f["topic"]
        if f.get("remark"):
            assert f'remark="{f["remark"].splitlines()[0][:80]}' in line
        uniq = dict(p.split("\x01") for p in (f["header"].get("i") or "").split("\x02") if p)
        if uniq.get("UNIQ_KEY"):
            assert f"msgId={uniq['UNIQ_KEY']}" in line and fields["msg_ids"] == [uniq["UNIQ_KEY"]]
        for m in f.get("messages", [])[:3]:
            assert m["msgId"] in line
        checked += 1
    assert checked == len(traced)


def test_a_malformed_frame_has_its_line():
    record = Malformed(12, "header is not JSON: Expecting value", 8, b"\x00" * 8)
    assert frame_summary(record) == "Malformed header is not JSON: Expecting value size=12"
    assert frame_fields(record)["code_name"] == "Malformed"
