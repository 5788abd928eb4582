"""What the RocketMQ tests share: the recorded captures, the registry with RocketMQ beside the
Stream (one more line, as a test puts it), the frames of a capture by connection, and the
captures' truths read as the clients wrote them (captures/README.md, RocketMQ section)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from streamdissect.analysis.driver import analyze
from streamdissect.engine.dissect import Dissector, FrameEvent
from streamdissect.protocols import registry
from streamdissect.protocols.rocketmq import codec, hot, native
from streamdissect.protocols.rocketmq.framing import RocketMQFramer
from streamdissect.protocols.rocketmq.protocol import ROCKETMQ
from streamdissect.protocols.rocketmq.records import RemotingCommand
from streamdissect.protocols.stream.protocol import STREAM
from streamdissect.tables import schema

CAPTURES = Path(__file__).resolve().parent.parent / "captures" / "rocketmq"
NAMES = sorted(p.name[: -len(".pcap")] for p in CAPTURES.glob("*.pcap"))
# a trace's direction -> (the wire's direction, a response)
DIRECTIONS = {"c->s request": ("c2s", False), "s->c response": ("s2c", True),
              "s->c request": ("s2c", False), "c->s response": ("c2s", True)}  # fmt: skip


@contextlib.contextmanager
def rocketmq_registered() -> Iterator[tuple]:
    """The registry with RocketMQ after the Stream, for the time of a `with` (and its tables
    among tables.schema's, which it reads from the registry when first imported)."""
    from streamdissect.tables import schema

    protocols = (STREAM, ROCKETMQ)
    registry.check(protocols)
    saved = registry.PROTOCOLS, registry.BY_NAME, dict(schema.TABLES)
    registry.PROTOCOLS, registry.BY_NAME = protocols, {p.name: p for p in protocols}
    schema.TABLES.update(ROCKETMQ.tables)
    try:
        yield protocols
    finally:
        registry.PROTOCOLS, registry.BY_NAME, tables = saved
        schema.TABLES.clear()
        schema.TABLES.update(tables)


def truth(name: str) -> dict:
    return json.loads((CAPTURES / f"{name}.truth.json").read_text())


def client_port(connection: str) -> int:
    """The client's port of a connection id `ip:port-ip:port`."""
    return int(connection.split("-")[0].rsplit(":", 1)[1])


def own_fields(record) -> dict:
    """A record's dict without what it takes from other frames (the request a response
    answers: a capture made worse may have lost that request, or give it later)."""
    out = record.to_dict()
    out.pop("request_code", None)
    out.pop("request_name", None)
    return out


def dissect(path: Path | str, **options) -> tuple[list[FrameEvent], list]:
    """Frame events and anomalies of a capture, RocketMQ registered."""
    frames, anomalies = [], []
    with rocketmq_registered():
        for event in Dissector(engine="stream", **options).run(str(path)):
            (frames if isinstance(event, FrameEvent) else anomalies).append(event)
    return frames, anomalies


class _KeepingFramer(RocketMQFramer):
    """The framer, keeping each whole frame's bytes (and which direction it came in)."""

    __slots__ = ()
    kept: ClassVar[list] = []

    def _decode(self, offset, ts_ns, frame, size, cut):
        _KeepingFramer.kept.append((id(self), frame))
        super()._decode(offset, ts_ns, frame, size, cut)


def recorded_frames() -> list[tuple[int, bytes]]:
    """Every frame of every recorded capture as on the wire, each with a number naming its
    direction (frames of one direction are in their order)."""
    _KeepingFramer.kept = []
    with rocketmq_registered():
        for name in NAMES:
            dissector = Dissector(engine="stream", protocols=["rocketmq"])
            dissector.framer_class = _KeepingFramer
            list(dissector.run(str(CAPTURES / f"{name}.pcap")))
    return _KeepingFramer.kept


def both_protocols(path: Path, stream_capture: Path, rocketmq_capture: Path) -> Path:
    """One capture of a Stream capture and a RocketMQ capture, the RocketMQ packets moved
    to start just after the Stream's first, interleaved in time."""
    import worsen

    linktype, stream_packets = worsen.read_pcap(stream_capture)
    _, rocketmq_packets = worsen.read_pcap(rocketmq_capture)
    shift = stream_packets[0][0] - rocketmq_packets[0][0]
    both = sorted(stream_packets + [(ts + shift + 1, d, n) for ts, d, n in rocketmq_packets],
                  key=lambda p: p[0])  # fmt: skip
    return worsen.write_pcap(path, linktype, both)


def analysis_tables(path, report_only: bool, **options) -> dict:
    """Every table of the analysis (both protocols' and the anomalies) as CSV text."""
    result = analyze(str(path), report_only=report_only, helper_process=False, **options)
    names = [*schema.analysis_tables(), *result.other_tables()]
    return {name: result.frame(name).to_csv() for name in names}


def compiled_record_holds(frame: bytes, parsed=codec.NOT_PARSED) -> str:
    """What the compiled reader (protocols/rocketmq/_native.c) made of a whole frame whose
    header parsed to `parsed` ("declined", "read"; "not compiled": not loaded), checked
    against hot_record's record of it: the same class, every slot the same value of the same
    type (a header the json module does not read is never read)."""
    compiled = native.loaded
    if compiled is None:
        return "not compiled"
    (record,) = compiled.hot_records([frame], hot.HotSend, hot.HotAnswer, hot.HotPulled,
                                      hot.HotPull)
    if record is None:
        return "declined"
    assert parsed is not codec.NOT_PARSED, "a header the json module does not read was read"
    expected = hot.hot_record(frame, parsed)
    assert record.__class__ is expected.__class__
    for slot in (*hot.HotSend.__slots__, *hot.HotAnswer.__slots__, *hot.HotPulled.__slots__,
                 *hot.HotPull.__slots__):
        if hasattr(expected, slot):
            mine, theirs = getattr(record, slot), getattr(expected, slot)
            assert (mine, mine.__class__) == (theirs, theirs.__class__), slot
    if expected.__class__ is hot.HotSend:  # (the sends' rows keep these as they come)
        for slot in ("group", "topic", "tags"):
            assert _interned(getattr(record, slot)) and _interned(getattr(expected, slot)), slot
    return "read"


def _interned(value) -> bool:
    """Whether a text is the interned string of its value (None: nothing to intern). A copy
    is interned to ask: interning `value` itself would make it so."""
    if value is None or len(value) < 2:  # (the short ones CPython shares anyway)
        return True
    return sys.intern((value + "x")[:-1]) is value


def light_record_holds(frame: bytes) -> str:
    """What hot_record made of the frame ("none", "send", "pull", "answer", "pulled"), checked
    against the
    command decode_frame makes of it ("not walked": not a frame the walk reads so: a whole
    frame, its header JSON of under 64 KiB within it)."""
    if len(frame) < 10 or int.from_bytes(frame[:4], "big") != len(frame) - 4:
        return "not walked"
    length = int.from_bytes(frame[4:8], "big")
    if length >> 16 or length > len(frame) - 8:
        return "not walked"
    try:
        parsed = codec._json_loads(frame[8 : 8 + length])
    except (ValueError, RecursionError):
        parsed = codec.NOT_PARSED
    compiled_record_holds(frame, parsed)
    if parsed is codec.NOT_PARSED:
        return "unparsed"
    record = hot.hot_record(frame, parsed)
    if record is None:
        return "none"
    command = codec.decode_frame(frame, parsed_header=parsed)
    # a light record is only ever made of a frame that makes a clean command
    assert command.__class__ is RemotingCommand and command.body_error is None
    assert not command.truncated
    assert record.command() == command
    assert (record.code, record.opaque, record.flag) == (command.code, command.opaque,
                                                         command.flag)  # fmt: skip
    assert record.code_name == command.code_name
    if isinstance(record, hot.HotPulled):
        messages = command.messages
        assert command.response and command.code == 0 and record.remark == command.remark
        assert (record.messages, record.bytes) == (len(messages),
                                                   sum(len(m.body) for m in messages))
        assert not any(m.compressed for m in messages)
        names = {"next_begin_offset": "nextBeginOffset", "min_offset": "minOffset",
                 "max_offset": "maxOffset", "offset": "offset",
                 "suggested_broker_id": "suggestWhichBrokerId"}  # fmt: skip
        for slot, name in names.items():
            assert getattr(record, slot) == command.fields.get(name), name
        return "pulled"
    if isinstance(record, hot.HotPull):
        assert not command.response and not command.oneway and not command.body
        # what the collectors read of it: every field of PULL_FIELDS as the command has it
        for name, _key, _kind in hot.PULL_FIELDS:
            assert record.fields.get(name) == command.fields.get(name), name
            assert name in record.fields or name not in command.fields, name
        return "pull"
    if isinstance(record, hot.HotAnswer):
        assert record.remark == command.remark and command.response
        assert (record.msg_id, record.queue_id, record.queue_offset) == (
            command.fields.get("msgId"), command.fields.get("queueId"),
            command.fields.get("queueOffset"))  # fmt: skip
        return "answer"
    (message,) = command.messages
    assert not message.compressed and not command.oneway
    assert (record.group, record.topic, record.queue_id) == (
        command.fields.get("producerGroup"), message.topic, message.queue_id)
    assert (record.topic, record.queue_id) == (command.topic, command.queue_id)
    assert (record.msg_id, record.tags, record.keys, record.wire) == (
        message.msg_id, message.tags, message.keys, len(message.body))
    return "send"
