"""The naming of a connection's block in time order compiled (_native_naming.c) does what
its Python loop does (plain_walk.named_in_order, the reference): on random blocks of both
directions' requests and responses (commands, light sends, pulls, answers and pull
answers, oneway requests, reused opaques, answers to no request, answers whose request's
collectors do not read them light, events without a record), with the bounds on open
requests made small (framing.MAX_OPEN_CALLS, GROWN_CALLS, SHRUNK_CALLS): every record
named the same, the same ones made commands, and each direction's open requests left the
same (their order, their grown flag, the shrunk dict's size). The recorded captures are
held by tests/test_rocketmq_plain_walk.py and test_rocketmq_hot.py in both native modes.
The compiled sort of a block's items for it (plain_walk.in_time_order) gives the items
sorted(filter(None, ...)) gives, or leaves them to it (float slots, equal rows and slots,
numbers out of its range, other items)."""

from __future__ import annotations

import json
import random
import sys

import pytest

from streamdissect.engine.anomalies import Anomaly
from streamdissect.framing.events import FrameEvent
from streamdissect.protocols.rocketmq import framing, hot, native, plain_walk, spec
from streamdissect.protocols.rocketmq.codec import encode_command, make_command
from streamdissect.protocols.rocketmq.framing import OpenRequests
from streamdissect.protocols.rocketmq.hot import HotAnswer, HotPull, HotPulled, HotSend
from streamdissect.protocols.rocketmq.records import RemotingCommand

pytestmark = pytest.mark.skipif(native._compiled() is None,
                                reason="the compiled reader was not built")  # fmt: skip

SEND_V2, HEARTBEAT, SEND = 310, 34, 10
PULL_FIELDS = {"consumerGroup": "g", "topic": "T", "queueId": 1, "queueOffset": 5,
               "maxMsgNums": 32, "sysFlag": 0, "commitOffset": 0,
               "suspendTimeoutMillis": 1000}  # fmt: skip
PULLED_EXT = {"nextBeginOffset": "5", "minOffset": "0", "maxOffset": "9"}


def _light(command: RemotingCommand, cls: type) -> object:
    frame = encode_command(command)
    length = int.from_bytes(frame[5:8], "big")
    record = hot.hot_record(frame, json.loads(frame[8 : 8 + length]))
    assert record.__class__ is cls
    return record


def _request(rng: random.Random, opaque: int) -> object:
    roll = rng.random()
    if roll < 0.4:
        return _light(make_command(SEND_V2, opaque=opaque, fields={"topic": "T"}), HotSend)
    if roll < 0.55:
        return _light(make_command(spec.PULL_CODE, opaque=opaque, fields=PULL_FIELDS), HotPull)
    return make_command(rng.choice((SEND, HEARTBEAT, spec.PULL_CODE)), opaque=opaque,
                        oneway=rng.random() < 0.15)  # fmt: skip


def _response(rng: random.Random, opaque: int) -> object:
    roll = rng.random()
    if roll < 0.45:
        return _light(make_command(0, response=True, opaque=opaque, ext={"msgId": "AB"}),
                      HotAnswer)  # fmt: skip
    if roll < 0.65:
        return _light(make_command(0, response=True, opaque=opaque, ext=PULLED_EXT), HotPulled)
    return make_command(rng.choice((0, 1, 17)), response=True, opaque=opaque)


def _block(seed: int, own_events: bool = False) -> list:
    """A connection's block: (row, slot, event) items in time order (made again from the
    seed for each loop: the loops change the records); `own_events`: its light sends and
    answers their own events, as the compiled reader's `place` makes them (hot.OwnEvent)."""
    rng = random.Random(seed)
    items = []
    for slot in range((6, 120, 500)[seed % 3]):
        direction = "c2s" if rng.random() < 0.85 else "s2c"  # (a server's own requests too)
        if rng.random() < 0.03:
            event = Anomaly(slot, "c", direction, "malformed", 0, 0, "x")  # (no record)
        else:
            opaque = rng.randrange(12 if rng.random() < 0.7 else 1_000)  # (reused often)
            make = _response if rng.random() < 0.5 else _request
            event = FrameEvent(slot, "c", direction if make is _request else
                               ("s2c" if direction == "c2s" else "c2s"), 0, make(rng, opaque))  # fmt: skip
        if own_events and event.__class__ is FrameEvent and (
                event.record.__class__ in (HotSend, HotAnswer)):  # fmt: skip
            record = event.record
            record.ts_ns, record.connection, record.direction, record.stream_offset = (
                event.ts_ns, event.connection, event.direction, event.stream_offset)  # fmt: skip
            event = record
        items.append((slot // 3, slot, event))
    return items


def _open(seed: int) -> tuple[dict, dict]:
    """Both directions' open requests, some open already (and grown, a dict's table kept
    big by a burst) before the block."""
    rng = random.Random(-seed)
    client, server = OpenRequests(), OpenRequests()
    for requests in (client, server):
        for opaque in rng.sample(range(1_000), rng.choice((0, 3, 30))):
            requests.calls[opaque] = rng.choice((SEND_V2, spec.PULL_CODE, HEARTBEAT))
        requests.grown = rng.random() < 0.5
        if requests.grown and rng.random() < 0.5:  # (a burst answered: its table kept big)
            burst = range(10_000, 12_000)
            requests.calls.update(dict.fromkeys(burst, SEND_V2))
            for opaque in burst:
                del requests.calls[opaque]
    return {"c2s": client, "s2c": server}, {"c2s": server, "s2c": client}


def _state(items: list, own: dict) -> tuple:
    records = []
    for _row, _slot, event in items:
        record = getattr(event, "record", None)
        kept = (record.__class__, getattr(record, "request_code", None),
                getattr(record, "opaque", None))  # fmt: skip
        records.append(record if record.__class__ is RemotingCommand else kept)
    return records, [(list(r.calls.items()), r.grown, sys.getsizeof(r.calls))
                     for r in own.values()]  # fmt: skip


@pytest.mark.parametrize("seed", range(24))
def test_the_compiled_naming_names_a_block_as_the_python_loop(monkeypatch, seed):
    if seed % 2:  # (the bounds small: forgotten, grown and shrunk often)
        monkeypatch.setattr(framing, "MAX_OPEN_CALLS", 4 + seed % 5)
        monkeypatch.setattr(framing, "GROWN_CALLS", 2 + seed % 3)
        monkeypatch.setattr(framing, "SHRUNK_CALLS", 1 + seed % 2)
    by_python, (own, peer) = _block(seed), _open(seed)
    plain_walk.named_in_order(by_python, own, peer)
    expected = _state(by_python, own)
    by_compiled, (own, peer) = _block(seed), _open(seed)
    monkeypatch.setattr(native, "loaded", native._compiled())
    assert plain_walk.compiled_named(by_compiled, own, peer)
    assert _state(by_compiled, own) == expected
    # (the blocks name, forget and make commands: the comparison is not of nothing)
    records = expected[0]
    if len(records) > 100:
        assert any(r.__class__ is RemotingCommand and r.request_code is not None
                   for r in records)  # fmt: skip
        assert any(r.__class__ is tuple and r[0] is HotAnswer and r[1] is not None
                   for r in records)  # fmt: skip


@pytest.mark.parametrize("seed", range(12))
def test_light_records_that_are_their_own_events_are_named_as_in_frame_events(monkeypatch,
                                                                              seed):  # fmt: skip
    """Light sends and answers that are their own events (the compiled reader's): named by
    both loops as the same records in frame events are, an answer made a command then
    replaced in its slot by a frame event of the command (the block's items given), the
    frames of those left light let go."""
    if seed % 2:
        monkeypatch.setattr(framing, "MAX_OPEN_CALLS", 4 + seed % 5)
    expected_items, (own, peer) = _block(seed), _open(seed)
    plain_walk.named_in_order(list(expected_items), own, peer)
    expected = _state(expected_items, own)
    for named in ("python", "compiled"):
        items, (own, peer) = _block(seed, own_events=True), _open(seed)
        assert len(items) < 100 or any(isinstance(event, HotAnswer) for _, _, event in items)
        if named == "python":
            plain_walk.named_in_order(list(items), own, peer, items)
        else:
            # (registered, as native.py loads it: the events' classes told)
            monkeypatch.setattr(native, "loaded", native._registered(native._compiled()))
            assert plain_walk.compiled_named(list(items), own, peer, items)
        assert _state(items, own) == expected
        replaced = [event for _, _, event in items if event.__class__ is FrameEvent
                    and event.record.__class__ is RemotingCommand and event.direction]  # fmt: skip
        assert all(event.ts_ns is not None for event in replaced)
        # (a light record left its own event lets its frame go once named)
        light = [event for _, _, event in items if event.__class__ in (HotSend, HotAnswer)]
        assert all(event.frame is None for event in light)
        assert len(items) < 100 or light
        if len(items) > 100:
            assert any(r.__class__ is RemotingCommand for r in _state(items, own)[0])


def test_the_blocks_make_commands_of_answers_and_shrink():
    """(What the random blocks hold: answers made commands, named and not.)"""
    made = named = 0
    for seed in range(24):
        items, (own, peer) = _block(seed), _open(seed)
        before = [getattr(event, "record", None) for _, _, event in items]
        plain_walk.named_in_order(items, own, peer)
        for (_, _, event), record in zip(items, before):
            if record.__class__ in (HotAnswer, HotPulled) and event.record is not record:
                made += 1
                named += event.record.request_code is not None
    assert made > 50 and named > 10


def test_a_direction_without_open_requests_is_a_key_error_both_ways(monkeypatch):
    items = [(0, 0, FrameEvent(0, "c", "sideways", 0, make_command(SEND)))]
    own, peer = _open(1)
    with pytest.raises(KeyError):
        plain_walk.named_in_order(items, own, peer)
    monkeypatch.setattr(native, "loaded", native._compiled())
    with pytest.raises(KeyError):
        plain_walk.compiled_named(items, own, peer)


def test_other_open_requests_are_named_by_the_python_loop(monkeypatch):
    class Watched(OpenRequests):
        __slots__ = ()

    monkeypatch.setattr(native, "loaded", native._compiled())
    own, peer = _open(2)
    own["c2s"] = peer["s2c"] = Watched()
    assert not plain_walk.compiled_named(_block(2), own, peer)
    monkeypatch.setattr(native, "loaded", None)
    assert not plain_walk.compiled_named(_block(2), *_open(2))


def _items(rng: random.Random, runs: int, size: int) -> list:
    """A block's items as the walks leave them: each direction's run in order (rows and
    slots rising), the runs one after the other, a few slots not filled (None)."""
    slots = rng.sample(range(size * 4), size)
    rows = sorted(rng.randrange(size * 2) for _ in range(size))
    events = [object() for _ in range(size)]
    items = list(zip(rows, slots, events))
    rng.shuffle(items)
    cuts = sorted(rng.sample(range(1, size), runs - 1)) if 1 < runs < size else []
    parts = [sorted(items[a:b]) for a, b in zip([0, *cuts], [*cuts, size])]
    made = [item for part in parts for item in part]
    for k in rng.sample(range(size), size // 10):
        made[k] = None
    return made


@pytest.mark.parametrize("seed", range(30))
def test_the_compiled_sort_gives_the_items_in_time_order(monkeypatch, seed):
    rng = random.Random(seed)
    items = _items(rng, rng.choice((1, 2, 3, 41)), rng.choice((0, 1, 2, 50, 3_000)) or 1)
    start = rng.randrange(len(items) + 1)
    expected = sorted(filter(None, items[start:]))
    compiled = native._compiled()
    ordered = compiled.in_time_order(items, start)
    assert ordered is not None
    assert [id(item) for item in ordered] == [id(item) for item in expected]
    monkeypatch.setattr(native, "loaded", compiled)
    assert plain_walk.in_time_order(items, start) == expected


@pytest.mark.parametrize("odd", [(3, 1.5), (True, 4), (-1, 4), (2**32, 4), (3, 2**40),
                                 (3, 7), "no item", ()])  # fmt: skip
def test_the_compiled_sort_leaves_odd_items_to_pythons(monkeypatch, odd):
    """A float slot (a malformed report beside its record), a bool, a number out of
    range, the row and slot of another item, an item that is no 3-tuple (or a falsy
    one): the Python sort's (a TypeError where it compares two events)."""
    rng = random.Random(str(odd))
    items = _items(rng, 2, 40)
    items[rng.randrange(40)] = (*odd, object()) if odd.__class__ is tuple and odd else odd
    if odd == (3, 7):  # (two items of the same row and slot: their events compared)
        items += [(3, 7, 1), (3, 7, 2)]
    compiled = native._compiled()
    assert compiled.in_time_order(items, 0) is None
    monkeypatch.setattr(native, "loaded", compiled)
    try:
        expected = sorted(filter(None, items))
    except TypeError:
        with pytest.raises(TypeError):
            plain_walk.in_time_order(items, 0)
    else:
        assert plain_walk.in_time_order(items, 0) == expected
