"""The rows of a call's request (a send's, a pull's) answered exactly when the call collector
pairs the call: as the rule says, its open calls bounded, the oldest forgotten past the bound
(whatever their codes: a heartbeat's call counts too), a reused opaque replacing the call
open under it; a response named by another code than its call's (which the framer's naming
does not give) answers no row. A reference model of that rule over random sequences of requests and
responses, with the bound made small (the bound itself is MAX_OPEN_CALLS, 65,536)."""

from __future__ import annotations

import random
from collections import OrderedDict

import pytest

from streamdissect.framing.events import FrameEvent
from streamdissect.protocols.rocketmq.analysis import calls
from streamdissect.protocols.rocketmq.analysis.collectors import Collectors
from streamdissect.protocols.rocketmq.codec import make_command

BOUND = 6
SEND, PULL, HEARTBEAT = 10, 11, 36
CONNECTIONS = ("127.0.0.1:40001-127.0.0.1:10911", "127.0.0.1:40002-127.0.0.1:10911")


def request(code: int, opaque: int):
    if code == SEND:
        return make_command(SEND, opaque=opaque, body=b"m",
                            fields={"topic": "T", "producerGroup": "G", "queueId": 1})  # fmt: skip
    if code == PULL:
        return make_command(PULL, opaque=opaque,
                            fields={"topic": "T", "consumerGroup": "C", "queueId": 2})  # fmt: skip
    return make_command(HEARTBEAT, opaque=opaque)


def response(request_code: int, opaque: int):
    record = make_command(0, response=True, opaque=opaque)
    record.request_code = request_code  # (as the framer names it)
    return record


@pytest.mark.parametrize("seed", range(12))
def test_rows_answered_as_the_bounded_pairing_answers_calls(monkeypatch, seed):
    monkeypatch.setattr(calls, "MAX_OPEN_CALLS", BOUND)
    rng = random.Random(seed)
    collectors = Collectors.made()
    reference: OrderedDict[tuple, int] = OrderedDict()  # open call -> its request's ts
    expected: dict[tuple[int, int], int | None] = {}  # (code, request ts) -> response ts
    asked: list[tuple] = []  # every request's (connection, opaque)
    latest: dict[tuple, int] = {}  # (connection, opaque) -> the code last asked under it
    for ts in range(1, 400):
        connection = rng.choice(CONNECTIONS)
        if asked and rng.random() < 0.45:  # a response, to some request asked before
            connection, opaque = rng.choice(asked)
            code = latest[connection, opaque]  # (the framer names the response so)
            named = code if rng.random() < 0.9 else rng.choice((SEND, PULL, HEARTBEAT))
            collectors.on_command(FrameEvent(ts, connection, "s2c", 0, response(named, opaque)))
            request_ts = reference.pop((connection, opaque, code), None)
            if request_ts is not None and named == code:  # (misnamed: no row of it answered)
                expected[code, request_ts] = ts
            continue
        code = rng.choice((SEND, SEND, PULL, HEARTBEAT))
        opaque = rng.randrange(12)  # (reused often)
        collectors.on_command(FrameEvent(ts, connection, "c2s", 0, request(code, opaque)))
        for key in [k for k in reference if k[:2] == (connection, opaque)]:
            del reference[key]  # (a reused opaque: the call open under it replaced)
        reference[connection, opaque, code] = ts
        while len(reference) > BOUND:
            reference.popitem(last=False)
        asked.append((connection, opaque))
        latest[connection, opaque] = code
        if code != HEARTBEAT:
            expected[code, ts] = None
    for code, collector in ((SEND, collectors.sends), (PULL, collectors.pulls)):
        columns = collector.shape.columns
        at_request = columns.index("request_ts_ns")
        at_response = columns.index("response_ts_ns")
        got = {(code, row[at_request]): row[at_response] for row in collector.rows()}
        assert got == {k: v for k, v in expected.items() if k[0] == code}
    answered = sum(v is not None for v in expected.values())
    assert 0 < answered < len(expected)  # (both kinds occur)


def test_a_row_made_by_a_shape_holds_each_value_at_its_column():
    from streamdissect.protocols.rocketmq.analysis.rows import RowShape
    from streamdissect.protocols.rocketmq.tables import SENDS

    shape = RowShape(SENDS)
    names = [c.name for c in SENDS]
    rng = random.Random(5)
    for _ in range(20):
        given = rng.sample(names, rng.randrange(len(names) + 1))
        row = shape.maker(*given)(*(f"value of {n}" for n in given))
        assert row == [f"value of {n}" if n in given else None for n in names]
        assert all(row[getattr(shape, n)] == f"value of {n}" for n in given)
    with pytest.raises(TypeError):
        shape.maker("status", "no_such_column")
    with pytest.raises(TypeError):
        shape.maker("status", "status")
