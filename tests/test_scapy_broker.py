"""The scapy layer against the real brokers: crafted frames sent with sr1 on a StreamSocket,
and the same conversation sniffed live on lo with TCPSession."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import pytest
from scapy.all import AsyncSniffer, StreamSocket
from scapy.sessions import TCPSession

from streamdissect.scapy import (
    Create,
    Delete,
    Metadata,
    Open,
    PeerProperties,
    SaslAuthenticate,
    SaslHandshake,
    StreamFrame,
    Subscribe,
    Tune,
    bind_port,
    stream_frames,
    unbind_port,
)

BROKERS = [(5552, "3.10."), (5553, "4.0.")]


def handshake(stream_socket: StreamSocket) -> list[tuple[StreamFrame, StreamFrame | None]]:
    """PeerProperties .. Open, each crafted and sent with sr1; (request, answer) pairs."""
    steps = [
        PeerProperties(correlation_id=1, properties={"product": "streamdissect scapy test"}),
        SaslHandshake(correlation_id=2),
        SaslAuthenticate(correlation_id=3, mechanism="PLAIN", sasl_data=b"\x00guest\x00guest"),
        Tune(frame_max=1048576, heartbeat=0),  # answered by the server's own offer
        Open(correlation_id=4, virtual_host="/"),
    ]
    pairs = []
    for body in steps:
        request = StreamFrame() / body
        pairs.append((request, stream_socket.sr1(request, timeout=5, verbose=False)))
    return pairs


@pytest.fixture
def connection(request):
    port = request.param
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    stream_socket = StreamSocket(sock, StreamFrame)
    yield port, stream_socket
    stream_socket.close()


@pytest.mark.parametrize("connection, version", BROKERS, indirect=["connection"],
                         ids=["rabbitmq-3.10", "rabbitmq-4.0"])  # fmt: skip
def test_sr1_walks_the_handshake_and_asks_for_metadata(connection, version):
    port, stream_socket = connection
    pairs = handshake(stream_socket)
    names = [answer.payload.__class__.__name__ if answer else None for _, answer in pairs]
    assert names == ["PeerPropertiesResponse", "SaslHandshakeResponse",
                     "SaslAuthenticateResponse", "Tune", "OpenResponse"]  # fmt: skip
    peer = pairs[0][1].payload
    assert peer.correlation_id == 1 and peer.code == 1
    assert peer.properties["version"].startswith(version)
    assert "PLAIN" in pairs[1][1].payload.mechanisms
    assert pairs[2][1].payload.code == 1
    assert pairs[3][1].payload.frame_max > 0
    opened = pairs[4][1].payload
    assert opened.code == 1 and opened.connection_properties["advertised_port"] == str(port)

    stream = f"scapy-{uuid.uuid4().hex[:8]}"
    asked = stream_socket.sr1(StreamFrame() / Metadata(correlation_id=5, streams=[stream]),
                              timeout=5, verbose=False)  # fmt: skip
    metadata = asked.payload
    assert metadata.correlation_id == 5
    assert [(m["stream"], m["code"]) for m in metadata.stream_metadata] == [(stream, 2)]
    created = stream_socket.sr1(StreamFrame() / Create(correlation_id=6, stream=stream),
                                timeout=5, verbose=False)  # fmt: skip
    assert created.payload.code == 1
    try:
        subscribed = stream_socket.sr1(
            StreamFrame() / Subscribe(correlation_id=7, subscription_id=1, stream=stream),
            timeout=5, verbose=False,
        )  # fmt: skip
        assert subscribed.payload.__class__.__name__ == "SubscribeResponse"
        assert subscribed.payload.code == 1
        asked = stream_socket.sr1(StreamFrame() / Metadata(correlation_id=8, streams=[stream]),
                                  timeout=5, verbose=False)  # fmt: skip
        assert asked.payload.stream_metadata[0]["code"] == 1
        assert asked.payload.brokers[0]["port"] == port
    finally:
        deleted = stream_socket.sr1(StreamFrame() / Delete(correlation_id=9, stream=stream),
                                    timeout=5, verbose=False)  # fmt: skip
        assert deleted.payload.code == 1


def test_a_wrong_answer_is_not_taken_for_the_right_one():
    """sr1 pairs on the correlation id: a response to another id is not the answer."""
    with socket.create_connection(("127.0.0.1", 5552), timeout=10) as sock:
        stream_socket = StreamSocket(sock, StreamFrame)
        request = StreamFrame() / PeerProperties(correlation_id=41, properties={})
        answer = stream_socket.sr1(request, timeout=5, verbose=False)
        assert answer.payload.correlation_id == 41
        other = StreamFrame() / PeerProperties(correlation_id=42, properties={})
        assert not answer.answers(other) and answer.answers(request)
        assert answer.hashret() == request.hashret() != other.hashret()


def test_live_sniff_on_lo_decodes_the_conversation():
    bind_port(5553)
    ready = threading.Event()
    sniffer = AsyncSniffer(iface="lo", filter="tcp port 5552", session=TCPSession,
                           started_callback=ready.set)  # fmt: skip
    sniffer.start()
    try:
        assert ready.wait(10), "the sniffer did not start"
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", 5552), timeout=10) as sock:
            stream_socket = StreamSocket(sock, StreamFrame)
            pairs = handshake(stream_socket)
            client_port = sock.getsockname()[1]
        assert all(answer is not None for _, answer in pairs)
        time.sleep(0.5)
    finally:
        packets = sniffer.stop()
        unbind_port(5553)
    mine = [p for p in packets if client_port in (p.sport, p.dport)]
    frames = [(f.sender, f.payload.__class__.__name__) for f in stream_frames(mine)]
    assert frames[:10] == [
        ("client", "PeerProperties"), ("server", "PeerPropertiesResponse"),
        ("client", "SaslHandshake"), ("server", "SaslHandshakeResponse"),
        ("client", "SaslAuthenticate"), ("server", "SaslAuthenticateResponse"),
        ("server", "Tune"), ("client", "Tune"),
        ("client", "Open"), ("server", "OpenResponse"),
    ]  # fmt: skip
    sasl = next(f for f in stream_frames(mine) if f.payload.__class__.__name__ == "SaslAuthenticate")
    assert "guest\\x00guest" not in sasl.show(dump=True)  # the password stays masked
