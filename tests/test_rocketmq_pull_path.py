"""Light pulls and their answers taken in one step each (protocols/rocketmq/analysis/
pull_path.py) make every table the collectors make taking them through `Collectors.command`
one method at a time (the reference), and leave the pulls' RowTable and the open calls as
they leave them: on random sequences of light pulls (hot.hot_record of encoded frames: long
polls, commit offsets carried or not, fields missing), their answers (recorded pull bodies,
offsets missing, errors' codes), answers to no open call, reused opaques, a pull answer
named by another request's code, pulls and answers decoded as commands, offset queries,
GET_MAX_OFFSET and sends between, with the bound on open calls and the row window made
small. The recorded captures are held by tests/test_rocketmq_hot.py's three-way tests (the
analyze report takes this path)."""

from __future__ import annotations

import json
import random

import pytest
from rocketmq_support import recorded_frames
from test_rocketmq_send_runs import PerFrame, _answer, _send
from test_rocketmq_send_runs import _tables as every_table

from streamdissect.framing.events import FrameEvent
from streamdissect.protocols.rocketmq import hot, spec
from streamdissect.protocols.rocketmq.analysis import calls, collectors, pull_path
from streamdissect.protocols.rocketmq.analysis.collectors import Collectors
from streamdissect.protocols.rocketmq.analysis.rows import RowTable
from streamdissect.protocols.rocketmq.codec import encode_command, make_command
from streamdissect.protocols.rocketmq.hot import HotPull, HotPulled

PULL, QUERY, MAX_OFFSET, HEARTBEAT, SEND_V2 = 11, 14, 30, 34, 310
CONNECTIONS = ("127.0.0.1:40001-127.0.0.1:10911", "127.0.0.1:40002-127.0.0.1:10911",
               "127.0.0.1:40003-127.0.0.1:10912")  # fmt: skip


@pytest.fixture(scope="module")
def pull_bodies() -> list[bytes]:
    """The bodies of the recorded captures' pull answers read light (their messages)."""
    bodies = []
    for _, frame in recorded_frames():
        length = int.from_bytes(frame[5:8], "big")
        try:
            header = json.loads(frame[8 : 8 + length])
        except ValueError:
            continue  # (a ROCKETMQ-serialized header)
        record = hot.hot_record(frame, header)
        if record.__class__ is HotPulled and record.messages:
            bodies.append(frame[8 + length :])
    assert len(bodies) > 3
    return bodies[:40]


def _light(command, cls: type):
    frame = encode_command(command)
    length = int.from_bytes(frame[5:8], "big")
    record = hot.hot_record(frame, json.loads(frame[8 : 8 + length]))
    assert record.__class__ is cls
    return record


def _pull(rng: random.Random, opaque: int, light: bool):
    fields = {"consumerGroup": rng.choice(("C", "D")), "topic": rng.choice("TU"),
              "queueId": rng.randrange(3), "queueOffset": rng.randrange(100),
              "maxMsgNums": 32, "sysFlag": rng.choice((0, 1, 2, 3, 6, 7)),
              "commitOffset": rng.randrange(50), "suspendTimeoutMillis": 15000}  # fmt: skip
    for name in rng.sample(sorted(fields), rng.choice((0, 0, 0, 1, 2))):
        del fields[name]  # (a header without some of them)
    command = make_command(PULL, opaque=opaque, fields=fields)
    return _light(command, HotPull) if light else command


def _pulled(rng: random.Random, opaque: int, bodies: list, light: bool):
    ext = {"nextBeginOffset": str(rng.randrange(100)), "minOffset": str(rng.randrange(3)),
           "maxOffset": str(rng.randrange(100))}  # fmt: skip
    if rng.random() < 0.2:
        ext["suggestWhichBrokerId"] = "0"
    if rng.random() < 0.1:
        ext["maxOffset"] = "x"  # (not an integer: typed None, the pull's `offset` read)
        if rng.random() < 0.5:
            ext["offset"] = "7"
    body = rng.choice(bodies) if rng.random() < 0.7 else b""
    remark = "FOUND" if rng.random() < 0.3 else None
    command = make_command(0, response=True, opaque=opaque, ext=ext, body=body, remark=remark)
    return _light(command, HotPulled) if light else command


def _answer_to(rng: random.Random, code: int, opaque: int, bodies: list):
    """An answer to a request of `code`, named as the walk names it (now and then by another
    request's code: a light answer only where that request's collectors read it light, else
    a command)."""
    named = code if rng.random() < 0.95 else rng.choice((PULL, QUERY, HEARTBEAT))
    if code == SEND_V2:
        return _answer(rng, opaque, named if named == SEND_V2 else HEARTBEAT)
    if code == PULL and rng.random() < 0.85:
        record = _pulled(rng, opaque, bodies, light=named == PULL and rng.random() < 0.9)
    else:
        error = rng.random() < 0.15
        ext = {"offset": str(rng.randrange(60))} if rng.random() < 0.8 else {}
        record = make_command(rng.choice((19, 20, 21)) if error else 0, response=True,
                              opaque=opaque, ext=ext, remark="no" if error else None)  # fmt: skip
    record.request_code = named
    return record


def _asking(rng: random.Random, opaque: int) -> tuple:
    """(code, record) of a request: mostly pulls, sends, offset queries, GET_MAX_OFFSET."""
    roll = rng.random()
    if roll < 0.55:
        return PULL, _pull(rng, opaque, light=rng.random() < 0.9)
    if roll < 0.75:
        return SEND_V2, _send(rng, opaque)
    code = rng.choice((QUERY, MAX_OFFSET, HEARTBEAT))
    fields = {"topic": "T", "queueId": 1}
    if code == QUERY:
        fields["consumerGroup"] = "C"
    return code, make_command(code, opaque=opaque, fields=fields if code != HEARTBEAT else None)


def _events(seed: int, bodies: list) -> list[FrameEvent]:
    rng = random.Random(seed)
    calls_asked: list[tuple[str, int, int]] = []  # (connection, opaque, code) of each request
    out = []
    for ts in range(1, 700):
        if calls_asked and rng.random() < 0.45:  # an answer, mostly to a recent request
            recent = calls_asked[-8:] if rng.random() < 0.8 else calls_asked
            connection, opaque, code = rng.choice(recent)
            orphan = rng.random() < 0.05  # (an answer to no call)
            record = _answer_to(rng, code, rng.randrange(1000, 1010) if orphan else opaque,
                                bodies)  # fmt: skip
            out.append(FrameEvent(ts, connection, "s2c", 0, record))
        else:
            connection, opaque = rng.choice(CONNECTIONS), rng.randrange(16)  # (reused often)
            code, record = _asking(rng, opaque)
            direction = "s2c" if rng.random() < 0.03 else "c2s"  # (a server's own requests)
            out.append(FrameEvent(ts, connection, direction, 0, record))
            calls_asked.append((connection, opaque, code))
    return out


def _tables(made: Collectors, events: list) -> dict:
    """Every table (test_rocketmq_send_runs' _tables), and the pulls' RowTable and the open
    calls as the frames left them, before the end."""
    left = {}
    finish = made.finish

    def noting(*args) -> None:
        table = made.pulls._table
        left["pulls' RowTable"] = (table._written, len(table), sorted(table._open),
                                   sorted(table._late))  # fmt: skip
        left["open calls"] = [(key, asked.code, asked.ts_ns, asked.kept, group["request_code"])
                              for key, (_, _, asked, group, _)
                              in made.calls._pending._open.items()]  # fmt: skip
        finish(*args)

    made.finish = noting
    return {**every_table(made, events), **left}


@pytest.mark.parametrize("seed", range(16))
def test_pulls_in_one_step_make_every_table_as_method_by_method(monkeypatch, seed, pull_bodies):
    if seed % 2:
        monkeypatch.setattr(calls, "MAX_OPEN_CALLS", 4 + seed % 7)
    if seed % 3 == 1:
        monkeypatch.setattr(RowTable, "WINDOW", 3 + seed)
    monkeypatch.setattr(collectors, "RUN", 1 + seed * 5)
    taken = {"on_pull": 0, "on_pulled": 0}
    real = pull_path.bound

    def counted(c):
        def count(name, handler):
            return lambda ev: taken.__setitem__(name, taken[name] + 1) or handler(ev)

        return tuple(count(n, h) for n, h in zip(("on_pull", "on_pulled"), real(c)))

    monkeypatch.setattr(pull_path, "bound", counted)
    events = _events(seed, pull_bodies)
    in_one_step = Collectors.made(report_only=True)
    assert in_one_step.runs
    got = _tables(in_one_step, events)
    assert taken["on_pull"] > 100 and taken["on_pulled"] > 80  # (the path was taken)
    taken.update(on_pull=0, on_pulled=0)
    expected = _tables(PerFrame.made(report_only=True), events)
    assert taken == {"on_pull": 0, "on_pulled": 0}
    assert got == expected
    assert got["rocketmq_pulls"] and got["rocketmq_offsets"] and got["rocketmq_errors"]
    assert any(row[-1] is not None for row in got["rocketmq_offsets"])  # (a lag)
    assert any(row[5] for row in got["rocketmq_offsets"])  # (commits counted)


def test_pulls_in_one_step_only_for_the_report_with_every_collector_fed():
    pull = _light(make_command(PULL, opaque=1, fields={"topic": "T"}), HotPull)
    assert Collectors.made(report_only=True).handlers(pull)[0][0].__name__ == "on_pull"
    for made in (Collectors.made(report_only=False),
                 Collectors.made(report_only=True, tables=["rocketmq_pulls"])):  # fmt: skip
        assert made.handlers(pull)[0] == (made.on_command,)
    assert spec.PULL_CODE == PULL


@pytest.mark.usefixtures("walk_mode")  # (the run's loop compiled, and the Python one)
def test_rows_held_across_pulls_reach_the_window_as_frame_by_frame(monkeypatch, pull_bodies):
    # the runs' rows are held across light pulls (send_runs.settle): here, past the small
    # window with the next run's, which then goes frame by frame, a row written open at the
    # bound and answered later (late) as taking every frame one at a time leaves it
    monkeypatch.setattr(RowTable, "WINDOW", 8)
    rng = random.Random(7)
    sender, puller = CONNECTIONS[0], CONNECTIONS[2]
    records = [(sender, "c2s", _send(rng, opaque)) for opaque in range(6)]
    pulled = _pulled(rng, 100, pull_bodies, light=True)
    pulled.request_code = PULL
    records += [(puller, "c2s", _pull(rng, 100, light=True)), (puller, "s2c", pulled)]
    records += [(sender, "c2s", _send(rng, opaque)) for opaque in range(6, 9)]
    records += [(sender, "s2c", _answer(rng, 0, SEND_V2)), *records[6:8]]  # (a pull again)
    records += [(sender, "s2c", _answer(rng, opaque, SEND_V2)) for opaque in range(1, 9)]
    events = [FrameEvent(ts, connection, direction, 0, record)
              for ts, (connection, direction, record) in enumerate(records, 1)]  # fmt: skip
    got = _tables(Collectors.made(report_only=True), events)
    assert got == _tables(PerFrame.made(report_only=True), events)
    assert got["sends' RowTable"][3]  # (a row late)
