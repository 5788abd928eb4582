"""Light sends and their answers taken a run at a time (protocols/rocketmq/analysis/
send_runs.py) make every table the collectors make taking them one at a time (the
reference), and leave the sends' RowTable as they leave it (rows written, open, late: a
send's row its key's next send replaced stays open): on random sequences of light sends
(hot.hot_record of encoded frames), their answers (SEND_OK and errors, with and without
msgId and offsets), answers to no open call, reused opaques, other commands between
(pulls, heartbeats, a send decoded as a command), an answer named by another request's
code, with the bound on open calls and the run's length made small. The recorded captures are held by tests/test_rocketmq_hot.py's
three-way tests (the analyze report takes runs)."""

from __future__ import annotations

import json
import random

import pytest
from rocketmq_support import CAPTURES
from test_rocketmq_call_rows import HEARTBEAT, PULL, SEND, request

from streamdissect.framing.events import FrameEvent
from streamdissect.protocols.rocketmq import hot, native, plain_walk, spec
from streamdissect.protocols.rocketmq.analysis import calls, collectors
from streamdissect.protocols.rocketmq.analysis.collectors import Collectors
from streamdissect.protocols.rocketmq.analysis.rows import RowTable
from streamdissect.protocols.rocketmq.codec import encode_command, make_command
from streamdissect.protocols.rocketmq.hot import HotAnswer, HotRun, HotSend, hot_record
from streamdissect.protocols.rocketmq.wire import format_properties

SEND_V2 = 310
CONNECTIONS = ("127.0.0.1:40001-127.0.0.1:10911", "127.0.0.1:40002-127.0.0.1:10911",
               "127.0.0.1:40003-127.0.0.1:10912")  # fmt: skip


class PerFrame(Collectors):
    """The reference: every light send and answer taken one at a time."""

    runs = False


def _light(command) -> object:
    frame = encode_command(command)
    length = int.from_bytes(frame[5:8], "big")
    record = hot_record(frame, json.loads(frame[8 : 8 + length]))
    assert record is not None
    return record


def _send(rng: random.Random, opaque: int) -> HotSend:
    properties = {"UNIQ_KEY": f"ID{rng.randrange(1000)}", "TAGS": rng.choice(("TagA", "TagB")),
                  "KEYS": f"k{rng.randrange(50)}"}  # fmt: skip
    if rng.random() < 0.1:
        del properties[rng.choice(sorted(properties))]
    record = _light(make_command(SEND_V2, opaque=opaque, body=b"x" * rng.randrange(40),
                                 fields={"producerGroup": "G", "topic": rng.choice("TU"),
                                         "queueId": rng.randrange(4),
                                         "properties": format_properties(properties)}))  # fmt: skip
    assert record.__class__ is HotSend
    return record


def _answer(rng: random.Random, opaque: int, request_code: int) -> HotAnswer:
    code = 0 if rng.random() < 0.8 else rng.choice((1, 10, 17))
    ext = {}
    if rng.random() < 0.9:
        ext["msgId"] = rng.choice(("", "AB01", "AB02,AB03", ",AB04"))
    for key in ("queueId", "queueOffset"):
        if rng.random() < 0.9:
            ext[key] = str(rng.randrange(100))
    remark = None if code == 0 and rng.random() < 0.7 else f"remark {code}"
    record = _light(make_command(code, response=True, opaque=opaque, ext=ext, remark=remark))
    assert record.__class__ is HotAnswer
    record.request_code = request_code  # (as the walk names it)
    return record


def _response(code: int, opaque: int, request_code: int):
    record = make_command(code, response=True, opaque=opaque, remark="bad" if code else None)
    record.request_code = request_code  # (as the walk names it)
    return record


def _events(seed: int) -> list[FrameEvent]:
    rng = random.Random(seed)
    asked: list[tuple[str, int, int]] = []  # (connection, opaque, code) of every request
    out = []
    for ts in range(1, 600):
        connection = rng.choice(CONNECTIONS)
        roll = rng.random()
        if asked and roll < 0.45:  # an answer, mostly to a request asked
            connection, opaque, code = rng.choice(asked[-8:] if rng.random() < 0.8 else asked)
            if rng.random() < 0.05:
                opaque = rng.randrange(1000, 1010)  # (to no call: an orphan)
            if code in spec.SEND_CODES and rng.random() < 0.95:
                named = code if rng.random() < 0.95 else HEARTBEAT  # (misnamed: not in runs)
                record = _answer(rng, opaque, named)
            else:
                record = _response(1 if rng.random() < 0.1 else 0, opaque, code)
            out.append(FrameEvent(ts, connection, "s2c", 0, record))
            continue
        opaque = rng.randrange(16)  # (reused often)
        if roll < 0.85:
            code, record = SEND_V2, _send(rng, opaque)
        else:
            code = rng.choice((SEND, PULL, HEARTBEAT))
            record = request(code, opaque)
        direction = "s2c" if rng.random() < 0.03 else "c2s"  # (a server's own requests)
        out.append(FrameEvent(ts, connection, direction, 0, record))
        asked.append((connection, opaque, code))
    return out


def _tables(made: Collectors, events: list) -> dict:
    for ev in events:
        handlers, _ = made.handlers(ev.record)
        for handler in handlers:
            handler(ev)
    # (a run gathered and not yet taken, and the rows of those taken held, given to the
    # tables as the end gives them)
    made.settle_runs()
    # (the sends' RowTable as the frames left it: rows written, open, late, before the end)
    table = made.sends._table
    state = (table._written, len(table), sorted(table._open), sorted(table._late))
    made.finish([], events[-1].ts_ns)
    tables = {name: [tuple(row.values()) if isinstance(row, dict) else tuple(row)
                     for row in source()]
              for name, source in made.sources([]).items()}  # fmt: skip
    return {**tables, "sends' RowTable": state}


@pytest.mark.parametrize("seed", range(24))
@pytest.mark.usefixtures("walk_mode")  # (the run's loop compiled, and the Python one)
def test_runs_make_every_table_as_frame_by_frame(monkeypatch, seed):
    # (bounds made small: the run then paired in it where none can be reached, else frame
    # by frame; the RowTable's window small too for some)
    if seed % 2:
        monkeypatch.setattr(calls, "MAX_OPEN_CALLS", 5 + seed % 7)
    if seed % 3 == 1:
        monkeypatch.setattr(RowTable, "WINDOW", 4 + seed)
    monkeypatch.setattr(collectors, "RUN", 1 + seed * 3)
    taken, by_frame = [], []
    real = collectors.send_runs.take_run
    monkeypatch.setattr(collectors.send_runs, "take_run",
                        lambda c, run: taken.append(len(run)) or real(c, run))  # fmt: skip
    one_at_a_time = Collectors.one_at_a_time
    monkeypatch.setattr(Collectors, "one_at_a_time",
                        lambda c, run: by_frame.append(len(run)) or one_at_a_time(c, run))  # fmt: skip
    events = _events(seed)
    by_runs = Collectors.made(report_only=True)
    assert by_runs.runs
    got = _tables(by_runs, events)
    assert sum(taken) > 100 and (max(taken) > 1 or seed == 0)  # (runs were taken)
    assert len(by_frame) < len(taken)  # (some paired in the run)
    if seed % 2:
        assert by_frame  # (and some where the small bound could be reached)
    taken.clear()
    expected = _tables(PerFrame.made(report_only=True), events)
    assert not taken
    assert got == expected
    assert got["rocketmq_sends"] and got["rocketmq_errors"] and got["rocketmq_latency"]


def test_runs_only_for_the_report_with_every_collector_fed():
    assert Collectors.made(report_only=True).runs
    assert not Collectors.made(report_only=False).runs  # (a row a call: one at a time)
    assert not Collectors.made(report_only=True, tables=["rocketmq_sends"]).runs


def _unjoined_events(path) -> list:
    """The analyses' frame events of a capture (light records), no run joined."""
    from streamdissect.engine.dissect import Dissector

    dissector = Dissector(columns="analysis", deliver_keep_limit=0, publish_messages=False,
                          helper_process=False)  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plain_walk, "joined", lambda events: events)
        return list(dissector.run([str(path)]))


def _flat(events: list) -> list:
    return [e for ev in events for e in (ev.events if ev.__class__ is HotRun else (ev,))]


def _shape(events: list) -> list:
    return [tuple(map(id, ev.events)) if ev.__class__ is HotRun else id(ev) for ev in events]


@pytest.mark.skipif(native._compiled() is None, reason="the compiled reader was not built")
@pytest.mark.parametrize("name", ["rmq-java-json", "rmq-errors", "rmq-long-poll"])
def test_runs_joined_by_the_compiled_reader_as_by_python(name):
    compiled = native._compiled()
    compiled.plain_event(FrameEvent)  # (as native.py registers it when loaded)
    events = _unjoined_events(CAPTURES / f"{name}.pcap")
    rng = random.Random(name)
    for cut in range(20):  # (the whole, and random stretches of it)
        a = 0 if cut == 0 else rng.randrange(len(events))
        part = events[a : len(events) if cut == 0 else a + rng.randrange(1, 60)]
        by_python = hot.joined_runs(part)
        assert _flat(by_python) == part
        assert all(len(ev.events) > 1 and ev.ts_ns == ev.events[-1].ts_ns
                   and ev.first_ts_ns == ev.events[0].ts_ns
                   and ev.connection == ev.events[0].connection
                   for ev in by_python if ev.__class__ is HotRun)  # fmt: skip
        by_compiled = compiled.joined(part, HotSend, HotAnswer, spec.SEND_CODES, HotRun)
        assert _shape(by_compiled) == _shape(by_python)
    joined = sum(len(ev.events) for ev in hot.joined_runs(events) if ev.__class__ is HotRun)
    assert joined > 1 or name != "rmq-java-json"


@pytest.mark.usefixtures("walk_mode")
def test_the_report_takes_the_joined_runs(monkeypatch):
    from rocketmq_support import analysis_tables

    gathered = []
    on_run = Collectors.on_run
    monkeypatch.setattr(Collectors, "on_run",
                        lambda c, ev: gathered.append(len(ev.events)) or on_run(c, ev))  # fmt: skip
    tables = analysis_tables(CAPTURES / "rmq-java-json.pcap", True)
    assert sum(gathered) > 1
    assert tables["rocketmq_sends"].count("\n") > 2


@pytest.mark.skipif(native._compiled() is None, reason="the compiled reader was not built")
@pytest.mark.parametrize("seed", range(6))
def test_runs_of_random_events_joined_by_the_compiled_reader_as_by_python(seed):
    from streamdissect.engine.anomalies import Anomaly

    compiled = native._compiled()
    compiled.plain_event(FrameEvent)
    rng = random.Random(seed)
    events = _events(seed)
    for _ in range(40):  # (anomalies between: no frame event, no record)
        events.insert(rng.randrange(len(events)),
                      Anomaly(1, "c", "c2s", "malformed", 0, 0, "x"))  # fmt: skip
    by_python = hot.joined_runs(events)
    assert _flat(by_python) == events
    assert sum(ev.__class__ is HotRun for ev in by_python) > 10
    by_compiled = compiled.joined(events, HotSend, HotAnswer, spec.SEND_CODES, HotRun)
    assert _shape(by_compiled) == _shape(by_python)
