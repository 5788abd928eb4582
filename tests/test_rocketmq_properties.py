"""Properties of the RocketMQ codec: any command in either serialization round-trips; any
bytes decode to a record or a Malformed one, never an exception; a pull body of stored
messages split anywhere keeps the messages before the split."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketmq_support import CAPTURES, NAMES, dissect

from streamdissect.protocols.rocketmq import decode_frame, encode_command, make_command, spec
from streamdissect.protocols.rocketmq.messages import BodyError, stored_messages
from streamdissect.protocols.rocketmq.records import Malformed, RemotingCommand

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
ext = st.dictionaries(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1,
                              max_size=12), text, max_size=6)  # fmt: skip


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(code=st.integers(0, 32767), response=st.booleans(), oneway=st.booleans(),
       opaque=st.integers(-(2**31), 2**31 - 1),
       language=st.sampled_from(sorted(spec.LANGUAGE_CODES)),
       version=st.integers(0, 32767), remark=st.none() | text.filter(bool), ext=ext,
       body=st.binary(max_size=64), serialize_type=st.sampled_from([spec.JSON, spec.ROCKETMQ]))
def test_any_command_round_trips(code, response, oneway, opaque, language, version, remark, ext,
                                 body, serialize_type):  # fmt: skip
    command = make_command(code, response=response, oneway=oneway, opaque=opaque, ext=ext,
                           body=body, remark=remark, language=language, version=version,
                           serialize_type=serialize_type)  # fmt: skip
    frame = encode_command(command)
    back = decode_frame(frame)
    assert isinstance(back, RemotingCommand)
    assert (back.code, back.response, back.oneway, back.opaque, back.language, back.version,
            back.remark, back.ext, back.body) == (code, response, oneway, opaque, language,
                                                  version, remark, ext, body)  # fmt: skip
    assert encode_command(back) == frame


@settings(max_examples=500)
@given(st.binary(max_size=300))
def test_any_bytes_decode_without_raising(data):
    record = decode_frame(data)
    assert isinstance(record, (RemotingCommand, Malformed))


@settings(max_examples=300)
@given(kind=st.sampled_from([0, 1]), header=st.binary(max_size=200), body=st.binary(max_size=100),
       total_delta=st.integers(-8, 8))
def test_any_header_bytes_behind_a_plausible_head(kind, header, body, total_delta):
    total = 4 + len(header) + len(body) + total_delta
    frame = struct.pack(">Ii", max(total, 0), kind << 24 | len(header)) + header + body
    record = decode_frame(frame)
    assert isinstance(record, (RemotingCommand, Malformed))


def _real_pull_body() -> tuple[bytes, list[int]]:
    """The longest pull body of the recorded captures and its messages' sizes."""
    best = None
    for name in NAMES:
        for e in dissect(CAPTURES / f"{name}.pcap")[0]:
            r = e.record
            if r.response and r.messages and (best is None or len(r.messages) > len(best.messages)):
                best = r
    return best.body, [m.total_size for m in best.messages]


PULL_BODY, PULL_SIZES = _real_pull_body()


@settings(max_examples=200)
@given(st.integers(0, len(PULL_BODY)))
def test_a_pull_body_cut_anywhere_keeps_the_messages_before_the_cut(cut):
    assert len(PULL_SIZES) >= 3
    whole = sum(1 for end in _ends(PULL_SIZES) if end <= cut)
    try:
        messages = stored_messages(PULL_BODY[:cut])
    except BodyError as e:
        assert len(e.messages) == whole and cut not in _ends(PULL_SIZES)
    else:
        assert len(messages) == whole and (cut == 0 or cut in _ends(PULL_SIZES))


def _ends(sizes: list[int]) -> list[int]:
    out, at = [], 0
    for size in sizes:
        at += size
        out.append(at)
    return out
