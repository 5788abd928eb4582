"""RocketMQ's hot frames as the analyses read them: light records made from a frame's parsed
JSON header (plain_walk reads a block's headers together) in place of a RemotingCommand.

When the bulk engine runs for the analyses alone (DissectionState `columns="analysis"`),
the plain walk makes a SEND_MESSAGE_V2 request (a plain one: no flag bit, its message not
compressed) into a `HotSend`, a PULL_MESSAGE request (no flag bit, no body) into a
`HotPull`, a pull response whose stored messages are all usual ones,
none compressed, into a `HotPulled` (their count and bytes), and any other response into a
`HotAnswer`: what the collectors read of them (analysis/collectors.py), typed as codec's
`_fields_of` types them, without the command's header dicts, its messages, a message's
properties map. A frame is light only when its record would be a clean command (the header
checks `_json_header` makes, no body that could fail to read): anything else is decoded as
before. A response's request is known only once the connection's block is named in time
order (plain_walk's `end_connection`): one whose request's collectors do not read it light
(`light_for`: a HotAnswer the sends', a HotPulled the pulls') is then decoded (`command`)
as the framer decodes it.

The records the analyses then make are the record path's: tests/test_rocketmq_hot.py holds
every table of the shipped captures and made-worse copies to it, fuzz targets too.
"""

from __future__ import annotations

import sys
from typing import Any

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.codec import _INT_TEXT, decode_frame, typed_value
from streamdissect.protocols.rocketmq.messages import plain_sizes
from streamdissect.protocols.rocketmq.wire import parse_properties

SEND_V2_CODE = 310
_KEY = {f.name: f.key for f in spec.SEND_V2.fields}
_GROUP, _TOPIC, _QUEUE, _SYSFLAG, _PROPERTIES = (
    _KEY["producerGroup"], _KEY["topic"], _KEY["queueId"], _KEY["sysFlag"], _KEY["properties"])
_INT, _RESPONSE = spec.INT, spec.RESPONSE_FLAG
_UNIQ_KEY, _TAGS, _KEYS = spec.UNIQ_KEY, spec.TAGS, spec.KEYS
_PULL_KEYS = spec.PULL_RESPONSE_KEYS
SEND_CODES = spec.SEND_CODES
PULL_CODE = spec.PULL_CODE
# A pull request's header fields the pulls', offsets' and calls' collectors read (their
# names, each with its wire key and type: spec.REQUEST_HEADERS)
_PULL_READ = ("consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag",
              "commitOffset", "suspendTimeoutMillis")  # fmt: skip
PULL_FIELDS = tuple((f.name, f.key, f.type) for f in spec.REQUEST_HEADERS[PULL_CODE].fields
                    if f.name in _PULL_READ)  # fmt: skip


class OwnEvent:
    """A light send or answer that is its own frame event (the compiled reader's `place`
    makes it so, in place of a FrameEvent holding it: one object a hot frame fewer, made
    and freed): the event's fields in its slots, its `record` itself. (Made elsewhere, by
    the Python reader, it is a FrameEvent's record as ever: those slots then unset.)"""

    __slots__ = ("connection", "direction", "stream_offset", "ts_ns")

    @property
    def record(self) -> OwnEvent:
        return self


class HotSend(OwnEvent):
    """A plain SEND_MESSAGE_V2 request: its header's producer group, topic and queue, its
    message's ids (UNIQ_KEY), tags, keys and body length (the group, topic and tags
    interned, as the sends' rows keep them); `frame` makes the command again
    when asked (`command`). (Not the parsed header: a block's thousands of them kept would
    be scanned and promoted by the garbage collector, and freed late.)"""

    __slots__ = ("frame", "group", "keys", "msg_id", "opaque", "queue_id", "tags", "topic",
                 "wire")  # fmt: skip
    code = SEND_V2_CODE
    flag = 0
    oneway = False  # (framing.OpenRequests reads it)
    code_name = spec.request_name(SEND_V2_CODE)

    def command(self) -> Any:
        """The RemotingCommand the framer makes of this frame (its header parsed alone, as
        codec.json_headers parses it with others)."""
        return decode_frame(self.frame)


class HotPull:
    """A PULL_MESSAGE request (no flag bit, no body): its opaque and the header fields its
    collectors read (`fields`: those of PULL_FIELDS the header holds, typed as codec's
    `_fields_of` types them; not the others, subscription and its version, which no
    collector reads); `frame` makes the command again when asked (`command`)."""

    __slots__ = ("fields", "frame", "opaque")
    code = PULL_CODE
    flag = 0
    oneway = False
    code_name = spec.request_name(PULL_CODE)

    def command(self) -> Any:
        """The RemotingCommand the framer makes of this frame."""
        return decode_frame(self.frame)


class HotAnswer(OwnEvent):
    """A response whose body cannot fail to read (no pull response's stored messages): its
    code, opaque, remark and the send response's fields (msgId, queueId, queueOffset);
    `request_code` set when the connection's block is named."""

    __slots__ = ("code", "frame", "msg_id", "opaque", "queue_id", "queue_offset", "remark",
                 "request_code")  # fmt: skip
    flag = _RESPONSE
    oneway = False
    light_for = SEND_CODES  # the request codes whose collectors read it light

    @property
    def code_name(self) -> str:
        return spec.response_name(self.code)

    def command(self) -> Any:
        """The RemotingCommand the framer makes of this frame (its request code as named)."""
        command = decode_frame(self.frame)
        command.request_code = self.request_code
        return command


class HotPulled(HotAnswer):
    """A pull response (code 0, the pull's offsets) whose stored messages are all usual ones
    (messages.plain_sizes), none compressed: how many and their bodies' bytes, the offsets
    the pulls' and offsets' collectors read."""

    __slots__ = ("bytes", "max_offset", "messages", "min_offset", "next_begin_offset",
                 "offset", "suggested_broker_id")  # fmt: skip
    light_for = frozenset((spec.PULL_CODE,))


def hot_record(frame: bytes, obj: Any) -> HotSend | HotPull | HotAnswer | None:
    """The light record of a whole frame (a JSON header within it) whose header parsed to
    `obj`, or None: decode it as a command (codec.decode_frame)."""
    if obj.__class__ is not dict:
        return None
    get = obj.get
    code, opaque, version, flag = get("code"), get("opaque", 0), get("version"), get("flag", 0)
    # (what codec._json_header accepts without a HeaderError, no less: else not hot)
    if not (code.__class__ is int and opaque.__class__ is int and flag.__class__ is int
            and (version is None or version.__class__ is int)):  # fmt: skip
        return None
    ext = get("extFields") or {}
    remark = get("remark")
    if ext.__class__ is not dict or not (remark is None or remark.__class__ is str):
        return None
    # (a text field's value: the value when it is text, as codec.typed_value gives it for
    # spec.STR from a JSON value; an integer field's by _integer)
    if flag == _RESPONSE:
        if code == 0 and _PULL_KEYS <= ext.keys():
            answer = _pulled(frame, ext)
            if answer is None:
                return None
        else:
            answer = HotAnswer()
        answer.code, answer.opaque, answer.remark, answer.request_code = code, opaque, remark, None
        answer.frame = frame
        value = ext.get("msgId")
        answer.msg_id = value if value.__class__ is str else None
        answer.queue_id = _integer(ext.get("queueId"))
        answer.queue_offset = _integer(ext.get("queueOffset"))
        return answer
    if flag == 0 and code == PULL_CODE:
        return _pull(frame, ext, opaque)
    if flag or code != SEND_V2_CODE:
        return None  # (a oneway send: decoded as ever)
    value = ext.get(_SYSFLAG)
    if value is not None and value != "0" and typed_value(value, _INT):
        return None  # (a compressed message: decoded as ever)
    send = HotSend()
    send.opaque, send.frame = opaque, frame
    send.group, send.topic = _shared_text(ext.get(_GROUP)), _shared_text(ext.get(_TOPIC))
    send.queue_id = _integer(ext.get(_QUEUE))
    value = ext.get(_PROPERTIES)
    properties = parse_properties(value if value.__class__ is str else "")
    send.msg_id = properties.get(_UNIQ_KEY) or None  # (messages.Message.msg_id)
    send.tags, send.keys = _shared_text(properties.get(_TAGS)), properties.get(_KEYS)
    # (the frame is whole: its body is what follows the header, the word's low 3 bytes)
    send.wire = len(frame) - 8 - int.from_bytes(frame[5:8], "big")
    return send


def _pull(frame: bytes, ext: dict, opaque: int) -> HotPull | None:
    """A pull request's light record (hot_record checked its header), or None: one with a
    body is decoded as ever."""
    if len(frame) != 8 + int.from_bytes(frame[5:8], "big"):
        return None
    pull = HotPull()
    pull.opaque, pull.frame = opaque, frame
    pull.fields = fields = {}
    for name, key, kind in PULL_FIELDS:
        value = ext.get(key)
        if value is not None:
            value = _integer(value) if kind == _INT else typed_value(value, kind)
            if value is not None:
                fields[name] = value
    return pull


def _shared_text(value: Any) -> str | None:
    """A text field's value (None: not text), interned: a HotSend's group, topic and tags
    are what every send row of them holds (analysis/rows.py `shared`), one string for all."""
    return sys.intern(value) if value.__class__ is str else None


def _integer(value: Any) -> int | None:
    """An integer field's value (codec.typed_value for spec.INT, its usual text inline)."""
    if value.__class__ is str and len(value) < _INT_TEXT:
        try:
            return int(value)
        except ValueError:
            return None
    return typed_value(value, _INT)


def _pulled(frame: bytes, ext: dict) -> HotPulled | None:
    """A pull response's light record, with what only a pull response has (hot_record sets
    what every response has), or None: its stored messages are decoded as ever."""
    sizes = plain_sizes(frame[8 + int.from_bytes(frame[5:8], "big") :])
    if sizes is None:
        return None
    pulled = HotPulled()
    pulled.messages, pulled.bytes = sizes
    pulled.next_begin_offset = _integer(ext.get("nextBeginOffset"))
    pulled.min_offset = _integer(ext.get("minOffset"))
    pulled.max_offset = _integer(ext.get("maxOffset"))
    pulled.offset = _integer(ext.get("offset"))
    pulled.suggested_broker_id = _integer(ext.get("suggestWhichBrokerId"))
    return pulled


class HotRun:
    """Consecutive frame events of a block (two or more, nothing else between them in its
    order) whose records are light send requests and light answers to sends (`joined_runs`):
    one event for the analyses, which take them a run at a time
    (analysis/send_runs.py). As an event it is its own record; its connection is its first
    frame's (a RocketMQ one), its time its last frame's (`first_ts_ns`: its first's)."""

    __slots__ = ("connection", "events", "first_ts_ns", "ts_ns")

    def __init__(self, events: list) -> None:
        self.events = events
        first = events[0]
        self.connection, self.first_ts_ns, self.ts_ns = (
            first.connection, first.ts_ns, events[-1].ts_ns)  # fmt: skip

    @property
    def record(self) -> HotRun:
        return self


def joined_runs(events: list) -> list:
    """A block's events in order, each run of two or more consecutive frame events whose
    records are HotSends, or HotAnswers named by a send's code, as one HotRun (the compiled
    reader's `joined` does the same: native.py)."""
    out: list = []
    run: list = []
    for ev in events:
        record = getattr(ev, "record", None)
        cls = record.__class__
        if cls is HotSend or (cls is HotAnswer and record.request_code in SEND_CODES):
            run.append(ev)
            continue
        if run:
            out.append(HotRun(run) if len(run) > 1 else run[0])
            run = []
        out.append(ev)
    if run:
        out.append(HotRun(run) if len(run) > 1 else run[0])
    return out
