"""RocketMQ behind the protocol seam: registered beside the Stream (one registry line, as the
test puts it), every shipped Stream capture and fuzz finding dissects exactly as before, the
heuristic says no to every Stream direction, RocketMQ connections are found by port and by
the heuristic in a capture that holds both protocols, and responses pair with requests."""

from __future__ import annotations

from pathlib import Path

import pytest
import worsen
from rocketmq_support import (
    CAPTURES,
    NAMES,
    client_port,
    dissect,
    own_fields,
    rocketmq_registered,
)

from streamdissect.engine.dissect import Anomaly, Dissector, FrameEvent
from streamdissect.engine.state import CLASSIFY_BYTES
from streamdissect.protocols import registry
from streamdissect.protocols.rocketmq.framing import looks_like_rocketmq
from streamdissect.protocols.rocketmq.protocol import ROCKETMQ
from streamdissect.protocols.stream.protocol import STREAM

REGRESSIONS = sorted((Path(__file__).parent / "regressions").glob("*.pcap"))
STREAM_CAPTURES = worsen.corpus_captures() + REGRESSIONS


def _events(path: Path) -> list:
    out = []
    for e in Dissector(engine="stream").run(str(path)):
        if isinstance(e, FrameEvent):
            out.append((e.ts_ns, e.connection, e.direction, e.stream_offset, e.record.to_dict()))
        else:
            out.append(e)
    return out


@pytest.mark.parametrize("path", STREAM_CAPTURES, ids=lambda p: p.name)
def test_stream_captures_dissect_the_same_with_rocketmq_registered(path):
    alone = _events(path)
    with rocketmq_registered():
        beside = _events(path)
    assert beside == alone


def _first_bytes(path: Path) -> list[bytes]:
    """Each direction's first payload bytes of a capture (up to what the heuristic sees)."""
    _link, packets = worsen.read_pcap(path)
    firsts: dict = {}
    for _ts, data, _length in packets:
        tcp = worsen.tcp_of(data)
        if tcp is None or not tcp.payload_len:
            continue
        head = firsts.setdefault(tcp.flow, bytearray())
        if len(head) < CLASSIFY_BYTES:
            head += data[tcp.payload_at : tcp.payload_at + tcp.payload_len]
    return [bytes(b[:CLASSIFY_BYTES]) for b in firsts.values()]


def test_each_heuristic_says_yes_to_its_own_directions_only():
    stream = [b for p in worsen.corpus_captures() for b in _first_bytes(p)]
    assert len(stream) > 50 and not any(looks_like_rocketmq(b) for b in stream)
    rocketmq = [b for n in NAMES for b in _first_bytes(CAPTURES / f"{n}.pcap")]
    assert len(rocketmq) > 50 and all(looks_like_rocketmq(b) for b in rocketmq)
    # and the Stream's heuristic, asked first, leaves every RocketMQ direction alone
    assert not any(STREAM.looks_like(b) for b in rocketmq)
    assert looks_like_rocketmq(b"\x00\x00\x00") is None


def _by_place(frames: list) -> list:
    """Each frame's record by client port, direction and offset."""
    return sorted((client_port(e.connection), e.direction, e.stream_offset, own_fields(e.record))
                  for e in frames)  # fmt: skip


def test_one_capture_with_both_protocols(tmp_path):
    """A Stream capture, a RocketMQ capture on its ports, and the same RocketMQ traffic
    moved to ports no protocol claims (found by the heuristic, the server side told by the
    first bytes where a SYN would): each connection is what it is."""
    link, stream_packets = worsen.read_pcap(worsen.CAPTURES / "rstream-publish-confirm-3.10.pcap")
    _, rmq = worsen.read_pcap(CAPTURES / "rmq-java-json.pcap")
    moved = worsen.rewrite_port(worsen.rewrite_port(rmq, 9876, 19876), 10911, 20911)
    shift = stream_packets[-1][0] - rmq[0][0] + 10**9
    later = [(ts + shift, data, length) for ts, data, length in moved
             if not worsen.tcp_of(data).flags & 0x02]  # no SYN: the heuristic tells the sides
    mixed = worsen.write_pcap(tmp_path / "mixed.pcap", link,
                              sorted(stream_packets + rmq + later, key=lambda p: p[0]))
    frames, anomalies = dissect(mixed)
    stream_alone = [e for e in _events(worsen.CAPTURES / "rstream-publish-confirm-3.10.pcap")
                    if isinstance(e, tuple)]  # fmt: skip
    with rocketmq_registered():
        dissector = Dissector(engine="stream")
        events = list(dissector.run(str(mixed)))
    protocol_of = dissector.protocol_of
    by_port = [e for e in frames if e.connection.endswith((":9876", ":10911"))]
    by_heuristic = [e for e in frames if e.connection.endswith((":19876", ":20911"))]
    rmq_alone, _ = dissect(CAPTURES / "rmq-java-json.pcap")
    # (the TCP layer says each connection without its SYN starts mid-stream; nothing else)
    assert {(a.kind, a.connection.rsplit(":", 1)[1]) for a in anomalies} <= {
        ("midstream_start", "19876"), ("midstream_start", "20911")} and anomalies
    assert _by_place(by_port) == _by_place(rmq_alone)
    # (joined without a SYN, each direction's first frame waits for the next frame's head
    # to be sure of its sync, so frames of several connections may come in another order,
    # and a first response may come before its request: it is not named by it)
    assert _by_place(by_heuristic) == _by_place(rmq_alone)
    assert {protocol_of[e.connection] for e in by_port + by_heuristic} == {ROCKETMQ}
    stream = [(e.ts_ns, e.connection, e.direction, e.stream_offset, e.record.to_dict())
              for e in events if isinstance(e, FrameEvent) and protocol_of[e.connection] is STREAM]
    assert stream == stream_alone
    assert not [e for e in events if isinstance(e, Anomaly) and e.kind != "midstream_start"]


@pytest.mark.parametrize("name", NAMES)
def test_each_response_pairs_with_its_request(name):
    """A response's pairing key is that of a request before it, the other way on its
    connection; every request but the oneway ones and those still open at the end is
    answered."""
    frames, _ = dissect(CAPTURES / f"{name}.pcap")
    open_calls: dict = {}
    answered = 0
    for e in frames:
        key, is_response = ROCKETMQ.pairing(e.record)
        if not is_response:
            if not e.record.oneway:
                open_calls[(e.connection, e.direction, key)] = e.record
            continue
        other = "c2s" if e.direction == "s2c" else "s2c"
        request = open_calls.pop((e.connection, other, key))
        assert request.opaque == e.record.opaque
        answered += 1
    assert answered > 0
    # what stays open: the name server's silence on an unknown code, pulls still held
    assert all(r.code in (9999, 11) for r in open_calls.values()), open_calls


def test_the_registry_takes_rocketmq_as_one_more_line():
    with rocketmq_registered() as protocols:
        assert registry.server_ports(protocols) == {5552: STREAM, 9876: ROCKETMQ,
                                                    10911: ROCKETMQ}
        assert registry.protocol("rocketmq") is ROCKETMQ
    assert registry.PROTOCOLS == (STREAM, ROCKETMQ)  # (its line in the registry)
