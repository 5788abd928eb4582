"""RocketMQ's help in the bulk engine's walk (protocols/rocketmq/plain_walk.py: JSON frames
taken off the walk, their headers parsed together by codec.json_headers) changes no event:
the bulk engine gives what the reference engine (packet by packet, every frame decoded by the
framer) gives, on every recorded capture and on made-worse copies, with the options of
`analyze` and of `frames`; and json_headers reads each header as json.loads reads it alone,
or declines the block. Every test runs with the compiled walk of JSON frames
(protocols/rocketmq/_native.c's json_run) and without it (native_modes), and copies whose
segments are cut at random places hold the compiled walk to the frame-by-frame one."""

from __future__ import annotations

import json
import random
import struct
from array import array
from typing import Any

import pytest
import worsen
from rocketmq_support import CAPTURES, NAMES, both_protocols, rocketmq_registered

from streamdissect.engine.dissect import Dissector, FrameEvent
from streamdissect.protocols.rocketmq import codec, native, plain_walk

pytestmark = pytest.mark.usefixtures("walk_mode")  # (conftest.py loads native_modes)

WORSE = {
    "reordered": lambda p: worsen.duplicate(worsen.reorder(p)),
    "late": lambda p: worsen.midstream(p, 5),
    "snaplen96": lambda p: worsen.snaplen(p, 96),
    "snaplen300": lambda p: worsen.snaplen(p, 300),
    "lost": lambda p: worsen.drop(p, set(worsen.data_segments(p)[3::7])),
}
# analyze's options (engine.dissect.Dissector as analysis.driver.analyze makes it), and
# frames' (a record a frame, every body kept)
OPTIONS = {"analyze": {"columns": True, "deliver_keep_limit": 0, "publish_messages": False},
           "frames": {}}  # fmt: skip


def _events(path, engine: str, options: dict) -> list:
    out = []
    with rocketmq_registered():
        for e in Dissector(engine=engine, **options).run(str(path)):
            if isinstance(e, FrameEvent):
                out.append((e.ts_ns, e.connection, e.direction, e.stream_offset,
                            _fields(e.record)))  # fmt: skip
            else:
                out.append(repr(e))
    return out


def _fields(record) -> dict:
    """A record's dict, a RocketMQ one's with its bytes (the Stream's have no such option)."""
    if type(record).__module__.startswith("streamdissect.protocols.rocketmq"):
        return record.to_dict(payloads=True)
    return record.to_dict()


@pytest.fixture
def read_together(monkeypatch):
    """How many headers the walk read together (a test that took no frame off the walk
    would hold nothing)."""
    count = [0]
    real = plain_walk.json_headers

    def spy(headers):
        values = real(headers)
        count[0] += 0 if values is None else len(values)
        return values

    monkeypatch.setattr(plain_walk, "json_headers", spy)
    return count


def _same_both_ways(path, read_together, taken: bool = True, options_list=None) -> None:
    """`taken`: the walk must have taken frames off (of a copy made worse, most may go to
    the framer: the cut ones, those after a hole)."""
    for options in options_list or OPTIONS.values():
        before = read_together[0]
        bulk = _events(path, "bulk", options)
        assert bulk == _events(path, "stream", options) and bulk
        assert read_together[0] > before or not taken


@pytest.mark.parametrize("name", NAMES)
def test_the_bulk_engine_gives_the_reference_events(name, read_together):
    _same_both_ways(CAPTURES / f"{name}.pcap", read_together)


@pytest.mark.parametrize("worse", sorted(WORSE))
@pytest.mark.parametrize("name", ["rmq-java-json", "rmq-java-compressed", "rmq-js", "rmq-cpp"])
def test_made_worse_the_same(tmp_path, name, worse, read_together):
    link, packets = worsen.read_pcap(CAPTURES / f"{name}.pcap")
    path = worsen.write_pcap(tmp_path / f"{name}-{worse}.pcap", link, WORSE[worse](packets))
    _same_both_ways(path, read_together, taken=(name, worse) in _TAKEN)


_TAKEN = {("rmq-java-json", "late"), ("rmq-java-json", "lost"), ("rmq-js", "reordered")}


def _segments_cut(packets: list, rng: random.Random) -> list:
    """Half of the data segments cut in two to four at random places (headers and frames
    across segments, a segment ending inside a frame's first 8 bytes), a microsecond apart."""
    out = []
    for ts, data, _length in packets:
        tcp = worsen.tcp_of(data)
        if tcp is None or tcp.payload_len < 4 or rng.random() < 0.5:
            out.append((ts, data, len(data)))
            continue
        head = data[: tcp.payload_at]
        payload = data[tcp.payload_at : tcp.payload_at + tcp.payload_len]
        cuts = sorted(rng.sample(range(1, len(payload)), rng.randint(1, 3)))
        seq_at = tcp.ip_at + (data[tcp.ip_at] & 15) * 4 + 4
        for k, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(payload)])):
            piece = bytearray(head)
            struct.pack_into(">H", piece, tcp.ip_at + 2, len(head) - tcp.ip_at + b - a)
            struct.pack_into(">I", piece, seq_at, (tcp.seq + a) & 0xFFFFFFFF)
            out.append((ts + 1000 * k, bytes(piece) + payload[a:b], len(piece) + b - a))
    return out


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("name", ["rmq-java-json", "rmq-js", "rmq-cpp", "rmq-long-poll"])
def test_segments_cut_anywhere_the_same(tmp_path, name, seed, read_together, monkeypatch):
    walked = [0]
    if native.loaded is not None:  # (how many frames the compiled walk noted)
        compiled = native.loaded

        class Counting:
            def __getattr__(self, name):
                return getattr(compiled, name)

            def json_run(self, *args):
                pos, jj, run = compiled.json_run(*args)
                walked[0] += len(run) // 64  # (8 int64 a frame)
                return pos, jj, run

        monkeypatch.setattr(native, "loaded", Counting())
    link, packets = worsen.read_pcap(CAPTURES / f"{name}.pcap")
    cut = _segments_cut(packets, random.Random(seed))
    cut = worsen.reorder(cut) if seed == 2 else cut  # (the buffer's order not the stream's)
    path = worsen.write_pcap(tmp_path / f"{name}-cut{seed}.pcap", link, cut)
    _same_both_ways(path, read_together, taken=seed != 2)
    assert walked[0] > 0 or native.loaded is None or seed == 2


def test_a_capture_of_both_protocols(tmp_path, read_together):
    path = both_protocols(tmp_path / "both.pcap",
                          worsen.CAPTURES / "rstream-publish-confirm-3.10.pcap",
                          CAPTURES / "rmq-java-json.pcap")  # fmt: skip
    # (not as columns: the Stream's hot frames would come as HotFrames from the bulk engine)
    _same_both_ways(path, read_together, options_list=[
        OPTIONS["frames"], {"deliver_keep_limit": 0, "publish_messages": False}])


def _alone(header: bytes):
    try:
        return "value", codec._json_loads(header)
    except (ValueError, RecursionError):
        return "error", None


def _recorded_headers() -> list[bytes]:
    headers = []
    real = codec._json_header

    def spy(header, parsed=codec.NOT_PARSED):
        headers.append(bytes(header))
        return real(header, parsed)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(codec, "_json_header", spy)
        for name in NAMES:
            _events(CAPTURES / f"{name}.pcap", "stream", {})
    return [h for h in headers if h[:2] == codec.JSON_START and b"null" not in h]


def test_recorded_headers_read_together_as_alone():
    headers = _recorded_headers()
    assert len(headers) > 300
    values = codec.json_headers(headers)
    assert values is not None
    assert [("value", v) for v in values] == [_alone(h) for h in headers]


# pieces a hostile header may be made of: each header starts `{"` and may leave brackets
# or strings open for the next one to close
PIECES = ['{"', '"', 'a', ':', '1', '[', ']', '{', '}', ',', ' ', '\\', '"x"', '{"k":2}',
          '\n', 'nul', 'true', '\u00e9', '1e999', '-']  # fmt: skip


def _header(rng: random.Random) -> bytes:
    """A JSON object (blanks after it, at times) or a hostile piece of one."""
    if rng.random() < 0.7:
        value = {rng.choice("abc"): rng.choice([1, "x]", "{", [1, {"d": "\u00e9"}], True])
                 for _ in range(rng.randrange(1, 4))}  # fmt: skip
        return (json.dumps(value, ensure_ascii=rng.random() < 0.5)
                + rng.choice(["", "", "\n", " \t"])).encode()
    return ('{"' + "".join(rng.choice(PIECES) for _ in range(rng.randrange(8)))).encode()


def test_hostile_blocks_are_read_as_alone_or_declined():
    rng = random.Random(26)
    took = declined = 0
    for _ in range(30_000):
        headers = [_header(rng) for _ in range(rng.randrange(1, 5))]
        headers = [h for h in headers if b"null" not in h]
        values = codec.json_headers(headers)
        if values is None:
            declined += 1
            continue
        took += 1
        assert [("value", v) for v in values] == [_alone(h) for h in headers], headers
    assert took > 1000 and declined > 1000


def test_headers_that_would_pass_for_others_are_declined():
    # together they parse, to as many objects as headers, but no one of them alone
    forged = [b'{"a":[{"x":1}', b'{"y":2}]}', b'{"z":3},{"w":4}']
    assert [_alone(h)[0] for h in forged] == ["error", "error", "error"]
    assert json.loads(b"[" + b",".join(forged) + b"]") and codec.json_headers(forged) is None
    assert codec.json_headers([b'{"a":1}', b'{"b":2}\n']) == [{"a": 1}, {"b": 2}]
    assert codec.json_headers([b'{"a":null}', b'{"b":2}']) is None  # (read alone instead)
    assert codec.json_headers([b'{"a":"\xff"}']) is None


def test_a_json_header_whose_length_looks_like_a_deliver_key(tmp_path):
    """A header of 0x80000 bytes or more puts 0x0008 where the walk reads a Stream frame's
    key (a Deliver's, kept as its head when big): the walk asks the framer's own rule, and
    the frame is read whole, as the reference engine reads it (it was cut to its head, a
    malformed record)."""
    big = codec.make_command(105, opaque=1, ext={"topic": "t", "pad": "x" * (0x80000 + 100)})
    data = codec.encode_command(big) + codec.encode_command(
        codec.make_command(105, opaque=2, ext={"topic": "t"}))  # fmt: skip
    assert data[4:8] >= b"\x00\x08\x00\x00"  # (the walk's key: 8)
    ts, client, server = 1_700_000_000_000_000_000, 40000, 10911
    packets = [worsen.eth_tcp(client, server, 100, 0, 0x02, b""),
               worsen.eth_tcp(server, client, 500, 101, 0x12, b"")]  # fmt: skip
    packets += [worsen.eth_tcp(client, server, 101 + at, 501, 0x18, data[at : at + 1448])
                for at in range(0, len(data), 1448)]  # fmt: skip
    path = worsen.write_pcap(tmp_path / "big-header.pcap", 1,
                             [(ts + k * 1000, d, len(d)) for k, d in enumerate(packets)])
    for options in OPTIONS.values():
        bulk = _events(path, "bulk", options)
        assert bulk == _events(path, "stream", options)
        assert [e[4]["opaque"] for e in bulk] == [1, 2] and not bulk[0][4]["truncated"]


def test_a_framer_class_that_watches_its_frames_sees_every_frame():
    """A framer subclass that overrides `_decode` (the tests' keeping framer; a face may keep
    each frame's bytes so) is handed every frame by the bulk engine too: the walk takes none
    off for it."""
    from rocketmq_support import _KeepingFramer

    path = str(CAPTURES / "rmq-java-json.pcap")
    _KeepingFramer.kept = []
    with rocketmq_registered():
        dissector = Dissector(engine="bulk", protocols=["rocketmq"])
        dissector.framer_class = _KeepingFramer
        frames = [e for e in dissector.run(path) if isinstance(e, FrameEvent)]
    assert frames and len(_KeepingFramer.kept) == len(frames)
    # (each frame's own bytes; kept a direction at a time, the events in capture order)
    assert sorted(f for _, f in _KeepingFramer.kept) == sorted(
        codec.encode_command(e.record) for e in frames)  # fmt: skip


REGRESSIONS = sorted((CAPTURES.parent.parent / "tests" / "regressions" / "rocketmq").glob("*.pcap"))


@pytest.mark.parametrize("path", REGRESSIONS, ids=lambda p: p.name)
def test_responses_named_in_time_order(path, read_together):
    """Captures the fuzz campaign made (benchmarks/fuzz_rocketmq.py) where a direction
    walked first held responses to requests the other direction sent earlier in the same
    block: the bulk engine named them by walk order (a request_code the reference engine
    does not give, or none where it gives one); now both directions' commands are named in
    time order once the block is walked."""
    for options in ({}, {"ooo_cap": 64 * 1024}):
        bulk = _events(path, "bulk", options)
        assert bulk == _events(path, "stream", options) and bulk


def test_the_regressions_are_there():
    assert len(REGRESSIONS) >= 3


def _run(path, options: dict, framer_class=None) -> tuple[list, list]:
    """The bulk engine's events and connections table."""
    with rocketmq_registered():
        dissector = Dissector(engine="bulk", **options)
        dissector.framer_class = framer_class
        events = [(e.ts_ns, e.connection, e.direction, e.stream_offset, _fields(e.record))
                  if isinstance(e, FrameEvent) else repr(e) for e in dissector.run(str(path))]
        return events, dissector.connections


@pytest.mark.parametrize("name", NAMES)
def test_commands_emitted_and_named_by_the_walk_as_by_the_framer(name, monkeypatch,
                                                                 tmp_path):  # fmt: skip
    """The walk emits a clean command straight into its slot, with the state's count
    (RocketMQFramer.lane), and names a block's commands both ways at once: the same events,
    frame counts and names as the framer's emit_decoded and a framer's own `name` give
    (a framer class that renames `name` is named its way)."""
    from streamdissect.protocols.rocketmq.framing import RocketMQFramer
    from streamdissect.protocols.rocketmq.protocol import RocketMQProtocol

    class OwnNaming(RocketMQFramer):
        __slots__ = ()

        def name(self, record):
            super().name(record)

    real_framer = RocketMQProtocol.framer

    def without_lane(self, *args, **kwargs):
        framer = real_framer(self, *args, **kwargs)
        framer.lane = None
        return framer

    link, packets = worsen.read_pcap(CAPTURES / f"{name}.pcap")
    lost = worsen.write_pcap(tmp_path / f"{name}-lost.pcap", link, WORSE["lost"](packets))
    for path in (CAPTURES / f"{name}.pcap", lost):
        for options in OPTIONS.values():
            walked = _run(path, options)
            assert walked[0] and walked[1]
            assert walked == _run(path, options, framer_class={"rocketmq": OwnNaming})
            with monkeypatch.context() as patch:
                patch.setattr(RocketMQProtocol, "framer", without_lane)
                assert walked == _run(path, options)


@pytest.mark.skipif(native._compiled() is None, reason="the compiled reader was not built")
def test_the_compiled_helpers_refuse_inconsistent_inputs_and_slice_as_python():
    from array import array

    compiled = native._compiled()  # (built: also in the python mode)
    buf = bytes(range(256)) * 4
    mv = memoryview(buf)
    # (start, end, size, ts, row, slot, at, seg_end): within a segment, clamped at the
    # buffer's end as a memoryview slice is, and across segments (read)
    items = [(0, 10, 6, 1, 2, 0, 5, 20), (0, 30, 26, 1, 2, 1, 1020, 40),
             (0, 10, 6, 1, 2, 2, 2000, 20), (15, 25, 6, 1, 2, 3, 5, 20)]  # fmt: skip
    read = lambda a, b: b"read %d %d" % (a, b)
    assert compiled.frames_of(mv, packed(items), read) == [
        bytes(mv[at : at + end - start]) if end <= seg_end else read(start, end)
        for start, end, _size, _ts, _row, _slot, at, seg_end in items]  # fmt: skip
    with pytest.raises(TypeError):  # (items packed: 8 int64 a frame)
        compiled.frames_of(mv, [(1, 2)], read)
    with pytest.raises(TypeError):
        compiled.frames_of(mv, array("q", [1, 2]), read)
    with pytest.raises(TypeError):
        compiled.frames_of(mv, array("i", range(8)), read)
    q = array("q", [0, 1])
    with pytest.raises(ValueError):  # (segment arrays of different lengths)
        compiled.json_run(buf, q, array("q", [5]), q, q, q, 10, 0, 0, 100, 100, 0)
    with pytest.raises(ValueError):  # (jj outside the segments)
        compiled.json_run(buf, q, q, q, q, q, 10, 0, 5, 100, 100, 0)
    with pytest.raises(ValueError):  # (a record or None a frame)
        compiled.place([None], packed([]), tuple, "c", "d", [None])
    with pytest.raises(IndexError):  # (a slot outside the events)
        compiled.place([object()], packed([(0, 1, 1, 1, 1, 9, 0, 1)]), lambda *a: a, "c", "d",
                       [None])  # fmt: skip
    with pytest.raises(IndexError):
        compiled.place([object()], packed([(0, 1, 1, 1, 1, -1, 0, 1)]), lambda *a: a, "c",
                       "d", [None])  # fmt: skip
    slots = [None, None]
    left = compiled.place([None, "r"], packed([items[0], (7, 9, 2, 3, 4, 1, 0, 9)]),
                          lambda *a: a, "c", "d", slots)  # fmt: skip
    assert left == [0] and slots == [None, (4, 1, (3, "c", "d", 7, "r"))]
    # json_run's frames packed as the walk's 8-tuples would be: a run of two frames
    frame = struct.pack(">II", 12, 8) + b'{"a":1}\0'  # (a JSON header of 8 bytes)
    body = frame * 2
    so, lo, po = array("q", [100]), array("q", [len(body)]), array("q", [0])
    rows, times = array("q", [3]), array("q", [77])
    pos, jj, run = compiled.json_run(body, so, lo, po, rows, times, 100 + len(body), 100, 0,
                                     100, 100, 5)  # fmt: skip
    assert (pos, jj) == (100 + len(body), 0)
    assert run == packed([(100, 116, 12, 77, 3, 5, 0, 100 + len(body)),
                          (116, 132, 12, 77, 3, 6, 16, 100 + len(body))]).tobytes()


@pytest.mark.skipif(native._compiled() is None, reason="the compiled reader was not built")
def test_the_compiled_place_makes_frame_events_as_their_init_does():
    from streamdissect.framing.events import FrameEvent

    compiled = native._compiled()
    compiled.plain_event(FrameEvent)  # (as native.py registers it when loaded)
    record = object()
    slots = [None]
    assert compiled.place([record], packed([(7, 9, 2, 3, 4, 0, 0, 9)]), FrameEvent, "c", "d",
                          slots) == []  # fmt: skip
    ((row, slot, event),) = slots
    assert (row, slot) == (4, 0) and type(event) is FrameEvent
    assert event == FrameEvent(3, "c", "d", 7, record) and event.record is record
    with pytest.raises(TypeError):  # (a class whose fields are not all slots)
        compiled.plain_event(type("NoSlots", (), {}))


@pytest.mark.skipif(native._compiled() is None, reason="the compiled reader was not built")
def test_frames_across_segments_joined_as_in_order_read_joins_them():
    """Given a direction's segment arrays, frames_of joins a frame across segments itself
    as InOrder.read joins it (tcp/vectorized.py), and leaves to read what it does not
    join: random segments (contiguous, with gaps, overlaps, positions out of the buffer)
    and frames from before the first to past the last, each the same bytes or the same
    error as read's."""
    import numpy as np

    from streamdissect.tcp.vectorized import InOrder

    compiled = native._compiled()
    rng = random.Random(2026)
    buf = rng.randbytes(400)
    mv = memoryview(buf)
    ways = {"joined": 0, "read": 0}
    for _ in range(400):
        count, offset = rng.randint(1, 8), rng.randint(0, 50)
        so, lo = [], []
        for _k in range(count):
            so.append(offset)
            lo.append(rng.randint(0, 60))
            offset += lo[-1] + rng.choice([0, 0, 0, 0, 3, -2])  # (a gap, an overlap)
        po = [rng.randint(0, 420 - n) if rng.random() < 0.95 else rng.randint(390, 500)
              for n in lo]  # fmt: skip
        arrays = [array("q", values) for values in (so, lo, po)]
        ints = [np.array(values, dtype=np.int64) for values in (so, lo, po)]
        zeros = np.zeros(count, dtype=np.int64)
        segments = InOrder(0, *arrays, *ints, zeros, zeros, zeros, buf, mv)
        calls = []

        def read(a: int, b: int, segments=segments, calls=calls) -> bytes:
            calls.append((a, b))
            return segments.read(a, b)

        for _k in range(10):
            start = rng.randint(so[0] - 5, offset + 5)
            end = start + rng.randint(1, 150)
            item = (start, end, end - start - 4, 1, 2, 0, 0, start)  # (seg_end: not in it)
            expected = _outcome(segments.read, start, end)
            got = _outcome(compiled.frames_of, mv, packed([item]), read, *arrays)
            assert got == (expected if isinstance(expected, type) else [expected]), (
                so, lo, po, start, end)  # fmt: skip
            ways["read" if calls and calls[-1] == (start, end) else "joined"] += 1
            calls.clear()
    assert ways["joined"] > 1000 and ways["read"] > 500


def _outcome(call: Any, *args: Any) -> Any:
    """What call(*args) returns, or the class of the error it raises."""
    try:
        return call(*args)
    except Exception as error:  # noqa: BLE001 (any error: the same one both ways)
        return type(error)


def packed(items: list) -> Any:
    """8-tuples of deferred frames as the compiled helpers take them: 8 int64 each."""
    from array import array

    return array("q", [v for item in items for v in item])
