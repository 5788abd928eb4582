"""RocketMQ's hot frames read as light records for the analyses (protocols/rocketmq/hot.py)
change no figure: every analysis table of `analyze` (which reads them so) equals the record
path's (the bulk engine with a watcher, every frame a RemotingCommand) and the reference
engine's, on every recorded capture, made-worse copies, a capture of both protocols and the
saved regressions; and a light record holds what the command decoded from the same frame
holds, on every recorded frame and on headers changed at random. The compiled reader
(protocols/rocketmq/_native.c) makes the light record hot_record makes of a frame or
declines it, on the same frames and on header texts changed byte by byte; the tables are
held equal in both modes (native_modes)."""

from __future__ import annotations

import copy
import json
import random
import re
import sys

import pytest
import worsen
from rocketmq_support import (
    CAPTURES,
    NAMES,
    analysis_tables,
    both_protocols,
    compiled_record_holds,
    light_record_holds,
    recorded_frames,
)
from test_rocketmq_plain_walk import REGRESSIONS, WORSE

from streamdissect.protocols.rocketmq import codec, native, plain_walk, spec
from streamdissect.protocols.rocketmq.hot import HotAnswer, HotPull, HotPulled, HotSend, hot_record

# the compiled reader and the Python path (conftest.py loads native_modes)
both_modes = pytest.mark.usefixtures("walk_mode")
COMPILED = native._compiled()  # (built, also when switched off)


@pytest.fixture
def made_light(monkeypatch):
    """How many frames the walk read as light records, by class name (a test in which none
    was would hold nothing)."""
    count: dict[str, int] = {}
    real = plain_walk.hot_record

    def spy(frame, parsed):
        record = real(frame, parsed)
        name = type(record).__name__
        count[name] = count.get(name, 0) + 1
        return record

    compiled = plain_walk.compiled_records

    def compiled_spy(frames):
        records = compiled(frames)
        for record in records or ():
            if record is not None:
                name = type(record).__name__
                count[name] = count.get(name, 0) + 1
        return records

    monkeypatch.setattr(plain_walk, "hot_record", spy)
    monkeypatch.setattr(plain_walk, "compiled_records", compiled_spy)
    return count


def _light(made_light: dict) -> int:
    return sum(made_light.get(name, 0) for name in ("HotSend", "HotAnswer", "HotPulled",
                                                    "HotPull"))


def _same_three_ways(path, made_light, light: bool = True) -> None:
    """`light`: the walk must have read some frames light (a copy made worse may have
    none left: the cut ones, those after a hole go to the framer)."""
    for report_only in (False, True):
        before = _light(made_light)
        hot_path = analysis_tables(path, report_only)
        after = _light(made_light)
        assert after > before or not light
        # a watcher reads the events: every frame a command (the record path)
        records = analysis_tables(path, report_only, watch=lambda events: events)
        assert _light(made_light) == after
        reference = analysis_tables(path, report_only, engine="stream")
        assert hot_path == records == reference
        assert any(name.startswith("rocketmq_") and text.count("\n") > 1
                   for name, text in hot_path.items())  # fmt: skip


# (its headers are ROCKETMQ-serialized: no frame of it is read light)
_BINARY_HEADERS = {"rmq-java-rocketmq-batch"}


@pytest.mark.parametrize("name", NAMES)
@both_modes
def test_every_table_as_the_record_path_makes_it(name, made_light):
    _same_three_ways(CAPTURES / f"{name}.pcap", made_light, light=name not in _BINARY_HEADERS)


@both_modes
def test_the_sends_of_the_java_capture_are_read_light(made_light):
    _same_three_ways(CAPTURES / "rmq-java-json.pcap", made_light)
    assert made_light["HotSend"] > 0 and made_light["HotAnswer"] > 0
    assert made_light["HotPulled"] > 0 and made_light["HotPull"] > 0


def _responses_lost(packets: list) -> list:
    """Every third segment the servers sent lost: sends left unanswered, read light."""
    server = [i for i in worsen.data_segments(packets)
              if worsen.tcp_of(packets[i][1]).flow[1] in (9876, 10911)]  # fmt: skip
    return worsen.drop(packets, set(server[1::3]))


MADE_WORSE = {**WORSE, "responses_lost": _responses_lost}


@pytest.mark.parametrize("worse", sorted(MADE_WORSE))
@pytest.mark.parametrize("name", ["rmq-java-json", "rmq-java-compressed", "rmq-errors"])
@both_modes
def test_made_worse_the_same(tmp_path, name, worse, made_light):
    link, packets = worsen.read_pcap(CAPTURES / f"{name}.pcap")
    path = worsen.write_pcap(tmp_path / f"{name}-{worse}.pcap", link,
                             MADE_WORSE[worse](packets))  # fmt: skip
    _same_three_ways(path, made_light, light=(name, worse) in _TAKEN)


# (the copies whose frames the walk still takes, the others going to the framer: the cut
# ones, those after a hole or a reordering)
_TAKEN = {("rmq-java-json", "late"), ("rmq-java-json", "lost"), ("rmq-java-json", "reordered"),
          ("rmq-java-compressed", "late"), ("rmq-java-compressed", "lost"),
          ("rmq-errors", "late"), ("rmq-errors", "lost"), ("rmq-errors", "reordered"),
          ("rmq-errors", "snaplen300"), ("rmq-java-json", "responses_lost"),
          ("rmq-java-compressed", "responses_lost"), ("rmq-errors", "responses_lost")}  # fmt: skip


@both_modes
def test_a_capture_of_both_protocols(tmp_path, made_light):
    path = both_protocols(tmp_path / "both.pcap",
                          worsen.CAPTURES / "rstream-publish-confirm-3.10.pcap",
                          CAPTURES / "rmq-java-json.pcap")  # fmt: skip
    _same_three_ways(path, made_light)


@pytest.mark.parametrize("path", REGRESSIONS, ids=lambda p: p.name)
@both_modes
def test_the_regressions_the_same(path, made_light):
    _same_three_ways(path, made_light, light=False)


# --- a light record against the command of the same frame ---------------------------------


def _recorded_frames() -> list[bytes]:
    """Every whole JSON frame of the recorded captures."""
    return [f for _, f in recorded_frames() if len(f) > 8 and f[4] == spec.JSON]


def _framed(text: bytes, body: bytes) -> bytes:
    """A JSON-headed frame of this header text and body."""
    return ((4 + len(text) + len(body)).to_bytes(4, "big") + len(text).to_bytes(4, "big")
            + text + body)  # fmt: skip


def _frame(header: dict | list | str | int | None, body: bytes) -> bytes:
    return _framed(json.dumps(header, separators=(",", ":")).encode(), body)


@both_modes
def test_recorded_frames_read_light_as_their_commands():
    frames = _recorded_frames()
    seen = [light_record_holds(frame) for frame in frames]
    assert seen.count("send") >= 10 and seen.count("answer") > 10 and seen.count("none") > 10
    assert seen.count("pulled") >= 5 and seen.count("pull") >= 5
    if native.loaded is None:
        return
    # the compiled reader reads every light frame whose ext values are all texts (the Java
    # client's and the broker's; the JS client writes numbers there: the Python way)
    for frame, kind in zip(frames, seen):
        header = codec._json_loads(frame[8 : 8 + int.from_bytes(frame[5:8], "big")])
        read = compiled_record_holds(frame, header)
        texts = all(isinstance(v, str) for v in header.get("extFields", {}).values())
        assert read == ("read" if kind != "none" and texts else read), (kind, header)


VALUES = [None, True, False, 0, 1, -3, 2**70, 1.5, "", "0", "7", " 8", "1_0", "x", "true",
          "TagA", "a\u0001b\u0002", "UNIQ_KEY\u0001\u0002TAGS\u0001t\u0002KEYS\u0001k",
          "UNIQ_KEY\u0001\u0002", "9" * 30, [], {}, {"a": 1}, [1]]  # fmt: skip
HEAD_KEYS = ["code", "opaque", "flag", "version", "remark", "language", "extFields",
             "serializeTypeCurrentRPC"]  # fmt: skip
EXT_KEYS = [*spec.V2_KEYS, "msgId", "queueId", "queueOffset", "nextBeginOffset", "minOffset",
            "maxOffset", "offset", "suggestWhichBrokerId", "consumerGroup", "topic",
            "maxMsgNums", "sysFlag", "commitOffset", "suspendTimeoutMillis", "subscription",
            "other"]  # fmt: skip
BODIES = [b"", b"msg", b"{", b'{"a":1}', b"[1", b"\x00" * 40]


def _body_changed(rng: random.Random, body: bytes) -> bytes:
    """A body cut, or a byte of it changed (a stored message's size, magic, flags: near the
    start of one, at 0, 4, 36, 40 ... of the first), or a message's system flag compressed."""
    what = rng.randrange(3)
    if what == 0:
        return body[: rng.randrange(len(body))]
    changed = bytearray(body)
    if what == 1:
        at = rng.choice([0, 1, 3, 4, 7, 36, 39, 40, 43, 80, 83, rng.randrange(len(body))])
        if at < len(changed):
            changed[at] = rng.randrange(256)
    elif len(changed) > 40:  # (the first stored message's system flag, its compressed bit)
        changed[39] |= spec.SYSFLAG_COMPRESSED
    return bytes(changed)


def _changed(rng: random.Random, header: dict) -> dict | list | None:
    """A recorded header with up to three of its values or ext values changed, removed or
    added."""
    header = json.loads(json.dumps(header))
    for _ in range(rng.randint(1, 3)):
        ext = header.get("extFields")
        if isinstance(ext, dict) and rng.random() < 0.6:
            target, keys = ext, EXT_KEYS
        else:
            target, keys = header, HEAD_KEYS
        key = rng.choice(keys)
        if rng.random() < 0.2:
            target.pop(key, None)
        else:
            target[key] = copy.deepcopy(rng.choice(VALUES))
    if rng.random() < 0.03:
        return rng.choice([None, [header], "text"])
    return header


@both_modes
def test_changed_headers_read_light_only_as_their_commands():
    rng = random.Random(26)
    recorded = []
    for frame in _recorded_frames():
        length = int.from_bytes(frame[5:8], "big")
        header = codec._json_loads(frame[8 : 8 + length])
        if isinstance(header, dict):
            recorded.append((header, frame[8 + length :]))
    seen = []
    for _ in range(12000):
        header, body = rng.choice(recorded)
        if rng.random() < 0.2:
            body = rng.choice(BODIES)
        elif body and rng.random() < 0.3:
            body = _body_changed(rng, body)
        seen.append(light_record_holds(_frame(_changed(rng, header), body)))
    assert seen.count("send") > 100 and seen.count("answer") > 100 and seen.count("none") > 100
    assert seen.count("pulled") > 100 and seen.count("pull") > 100


# --- the compiled reader on header texts changed byte by byte --------------------------------

# what a JSON text may hold that the compiled reader must read as the json module does, or
# decline: blanks, escapes (of ASCII, of other code points, surrogates, bad ones), numbers
# of other forms, keys escaped or repeated, other bytes, nulls, nesting
TEXT_EDITS = [b" ", b"\\t", b"\\n", b"\t", b"\\\\", b'\\"', b"\\/", b"\\u0041", b"\\u0001",
              b"\\u0002", b"\\u007f", b"\\u0080", b"\\u00e9", b"\\ud800", b"\\uZZZZ", b"\\x",
              b"\\", b'"', b"0", b"01", b"-", b"-0", b"1.5", b"1e3", b"99999999999999999999",
              b"\\u0063ode", b'"code":1,', b'"flag":1,', b'"opaque":7,', b'"a":"x",',
              b'"queueId":"1",', b'"i":"UNIQ_KEY\\u0001u\\u0002",', b"null", b"true", b"{}",
              b"[]", b",", b":", b"{", b"}", "\u00e9".encode(), b"\x00", b"\x01", b"\x7f",
              b"\xff"]  # fmt: skip


def _text_changed(rng: random.Random, frame: bytes) -> bytes:
    """A frame's header text with one to three edits (a TEXT_EDITS text put in, or a byte
    taken out or some repeated; half of them where a key starts), its lengths written
    again."""
    length = int.from_bytes(frame[5:8], "big")
    text, body = bytearray(frame[8 : 8 + length]), frame[8 + length :]
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(text) + 1)
        if rng.random() < 0.5:  # (at a key's start: a pair put in before it repeats a key)
            starts = [k + 1 for k, byte in enumerate(text) if byte in b"{,"]
            at = rng.choice(starts) if starts else at
        what = rng.randrange(4)
        if what < 2:
            text[at:at] = rng.choice(TEXT_EDITS)
        elif what == 2:
            del text[at : at + 1]
        else:
            text[at:at] = text[at : at + rng.randint(1, 12)]
    return _framed(bytes(text), body)


@pytest.mark.skipif(COMPILED is None, reason="the compiled reader was not built")
def test_changed_header_texts_read_as_hot_record_reads_them(monkeypatch):
    monkeypatch.setattr(native, "loaded", COMPILED)
    rng = random.Random(2611)
    by_kind: dict[str, list] = {}  # (the recorded frames the compiled reader reads, by kind)
    for frame in _recorded_frames():
        header = codec._json_loads(frame[8 : 8 + int.from_bytes(frame[5:8], "big")])
        if compiled_record_holds(frame, header) == "read":
            by_kind.setdefault(light_record_holds(frame), []).append(frame)
    assert sorted(by_kind) == ["answer", "pull", "pulled", "send"]
    kinds = sorted(by_kind)
    seen = []
    for _ in range(30000):
        frame = _text_changed(rng, rng.choice(by_kind[rng.choice(kinds)]))
        seen.append(light_record_holds(frame))  # (the compiled record checked there too)
    assert min(seen.count(kind) for kind in kinds) > 500 and seen.count("unparsed") > 1000


@pytest.mark.skipif(COMPILED is None, reason="the compiled reader was not built")
def test_records_of_classes_whose_slots_lie_elsewhere_read_the_same():
    """The compiled reader writes a light record's fields where its class keeps them:
    classes of the same fields in other orders, made in turn with the real ones, hold the
    same values."""
    frames = _recorded_frames()
    real = (HotSend, HotAnswer, HotPulled, HotPull)
    wanted = COMPILED.hot_records(frames, *real)
    reordered = tuple(
        type(cls.__name__, (), {"__slots__": tuple(reversed(_fields(cls)))}) for cls in real)
    assert any(type(record) is HotPulled for record in wanted)
    assert any(type(record) is HotPull for record in wanted)
    for round_ in range(3):
        classes = reordered if round_ % 2 else real
        for record, again in zip(wanted, COMPILED.hot_records(frames, *classes)):
            assert (record is None) == (again is None)
            if record is not None:
                assert classes.index(type(again)) == real.index(type(record))
                assert {f: getattr(record, f, None) for f in _fields(type(record))} == {
                    f: getattr(again, f, None) for f in _fields(type(record))}


def _fields(cls: type) -> list[str]:
    """A light record class's slots, its bases' too."""
    return [f for c in reversed(cls.__mro__) for f in getattr(c, "__slots__", ())]


# --- keys one byte off, and tags taken in turn ----------------------------------------------

# the keys the compiled reader reads: the header's, the ext fields' (the V2 send's letters
# of the fields hot_record reads, the responses' and the pull's keys) and a send's
# properties' names (their \u0001 after them, escaped in the header)
_V2_READ = [f.key for f in spec.SEND_V2.fields
            if f.name in ("producerGroup", "topic", "queueId", "sysFlag", "properties")]  # fmt: skip
_EXT_READ = EXT_KEYS[len(spec.V2_KEYS) : -2]  # (not subscription, other)
READ_KEYS = [f'"{key}":'.encode() for key in (*HEAD_KEYS, *_V2_READ, *_EXT_READ)] + [
    name.encode() + b"\\u0001" for name in (spec.UNIQ_KEY, spec.TAGS, spec.KEYS)]


def _one_byte_off(key: bytes) -> list[bytes]:
    """A quoted key or property name with its first, a middle or its last letter changed
    (the same length, the quotes and separator kept)."""
    name = key.split(b'"')[1] if key.startswith(b'"') else key[: -len(b"\\u0001")]
    out = []
    for at in sorted({0, len(name) // 2, len(name) - 1}):
        other = name[:at] + (b"y" if name[at : at + 1] == b"x" else b"x") + name[at + 1 :]
        out.append(key.replace(name, other, 1))
    return out


@pytest.mark.skipif(COMPILED is None, reason="the compiled reader was not built")
def test_keys_one_byte_off_read_as_hot_record_reads_them(monkeypatch):
    """The compiled reader finds a key by its length, then its bytes: each key it reads,
    one byte off in a recorded frame it reads (every place of it: up to a few frames of
    each kind), makes what hot_record makes of the frame, or is declined."""
    monkeypatch.setattr(native, "loaded", COMPILED)
    tried: dict[tuple, int] = {}
    for frame in _recorded_frames():
        length = int.from_bytes(frame[5:8], "big")
        text, body = frame[8 : 8 + length], frame[8 + length :]
        kind = light_record_holds(frame)
        if compiled_record_holds(frame, codec._json_loads(text)) != "read":
            continue
        for key in READ_KEYS:
            if key not in text or tried.get((kind, key), 0) >= 3:
                continue
            tried[(kind, key)] = tried.get((kind, key), 0) + 1
            for other in _one_byte_off(key):
                assert light_record_holds(_framed(text.replace(key, other), body)) != (
                    "not walked")  # (checked against hot_record there)
    assert {kind for kind, _ in tried} == {"answer", "pull", "pulled", "send"}
    assert {key for _, key in tried} == set(READ_KEYS)


@pytest.mark.skipif(COMPILED is None, reason="the compiled reader was not built")
def test_sends_going_through_tags_in_turn_hold_the_interned_tags(monkeypatch):
    """A light send's tags are the interned text of them, as hot_record makes them, when a
    block's sends take 2, 3 ... 9 tags in turn (the compiled reader keeps the last few)."""
    monkeypatch.setattr(native, "loaded", COMPILED)
    sends = [f for f in _recorded_frames() if light_record_holds(f) == "send"
             and compiled_record_holds(f, codec._json_loads(f[8 : 8 + int.from_bytes(
                 f[5:8], "big")])) == "read" and b"TAGS\\u0001" in f]  # fmt: skip
    send = sends[0]
    length = int.from_bytes(send[5:8], "big")
    text, body = send[8 : 8 + length], send[8 + length :]
    tags = re.search(rb"TAGS\\u0001([^\"\\]*)", text).group(1)
    frames = [_framed(text.replace(b"TAGS\\u0001" + tags, b"TAGS\\u0001tag-%d-of-%d" % (k % n, n)),
                      body)
              for n in range(2, 10) for k in range(3 * n)]  # fmt: skip
    for first in range(0, len(frames), 7):  # (in calls of a few sends, as blocks read them)
        batch = frames[first : first + 7]
        for frame, record in zip(batch, COMPILED.hot_records(batch, *plain_walk._HOT)):
            header = codec._json_loads(frame[8 : 8 + int.from_bytes(frame[5:8], "big")])
            expected = hot_record(frame, header)
            assert record.tags == expected.tags and record.tags is expected.tags
            copy_ = record.tags[:1] + record.tags[1:]  # (an equal text, not the same str)
            assert copy_ is not record.tags and sys.intern(copy_) is record.tags


# --- a send's properties read from the header's text ----------------------------------------

# pieces of a send's properties as the header writes them: names read and others, the
# separators escaped, and other escapes (a value with one is read from its unescaped copy)
_PROPERTY_PIECES = [b"UNIQ_KEY", b"TAGS", b"KEYS", b"WAIT", b"KEY", b"TAGSX", b"v", b"v-1",
                    b"", b"\\u0001", b"\\u0001", b"\\u0002", b"\\u0002", b"\\u0000", b"\\u0003",
                    b"\\u0041", b"\\u0011", b"\\u0012", b"\\/", b'\\"', b"\\\\", b"\\n"]  # fmt: skip


@pytest.mark.skipif(COMPILED is None, reason="the compiled reader was not built")
def test_properties_of_every_shape_read_as_hot_record_reads_them(monkeypatch):
    """A light send's msg_id, tags and keys, from properties of random pieces (names read
    twice, items without a separator or with two, other escapes), are hot_record's."""
    monkeypatch.setattr(native, "loaded", COMPILED)
    rng = random.Random(2612)
    send = next(f for f in _recorded_frames() if light_record_holds(f) == "send"
                and b'"i":"' in f)  # fmt: skip
    length = int.from_bytes(send[5:8], "big")
    text, body = send[8 : 8 + length], send[8 + length :]
    value = re.search(rb'"i":"((?:[^"\\]|\\.)*)"', text).group(1)
    kinds = []
    for _ in range(3000):
        pieces = rng.choices(_PROPERTY_PIECES, k=rng.randint(0, 14))
        if rng.random() < 0.5:  # (mostly the usual escapes alone: read from the text)
            pieces = [p for p in pieces if not p.startswith(b"\\") or p[2:5] == b"000"
                      and p[-1:] in b"12"]  # fmt: skip
        frame = _framed(text.replace(value, b"".join(pieces), 1), body)
        kinds.append(compiled_record_holds(frame, codec._json_loads(frame[8:][
            : int.from_bytes(frame[5:8], "big")])))  # fmt: skip
    assert kinds.count("read") > 2500
