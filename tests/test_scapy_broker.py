"""The scapy layer against the real brokers: crafted frames sent with sr1 on a StreamSocket,
and the same conversation sniffed live on lo with TCPSession."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from pathlib import Path

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
    # The client sends its Tune once its SaslAuthenticate is answered, without waiting for
    # the server's offer (handshake()): which of the two Tunes the wire carries first is a
    # race, so each direction's order is held, and each answer to come after its request.
    assert [name for sender, name in frames[:10] if sender == "client"] == [
        "PeerProperties", "SaslHandshake", "SaslAuthenticate", "Tune", "Open"]
    assert [name for sender, name in frames[:10] if sender == "server"] == [
        "PeerPropertiesResponse", "SaslHandshakeResponse", "SaslAuthenticateResponse", "Tune",
        "OpenResponse"]  # fmt: skip
    for request in ("PeerProperties", "SaslHandshake", "SaslAuthenticate", "Open"):
        assert frames.index(("client", request)) < frames.index(("server", request + "Response"))
    assert frames.index(("server", "SaslAuthenticateResponse")) < frames.index(("server", "Tune"))
    sasl = next(f for f in stream_frames(mine) if f.payload.__class__.__name__ == "SaslAuthenticate")
    assert "guest\\x00guest" not in sasl.show(dump=True)  # the password stays masked


# --- a real client's big batches (rstream's send_batch: one Publish frame per batch) ----------

BATCHES = (101, 1_000, 10_000)  # messages per Publish frame; scapy's own list limit is 100
BATCH_CLIENT = """
import asyncio, json, sys, uuid
from rstream import Consumer, ConsumerOffsetSpecification, OffsetType, Producer

TOKEN, BATCHES = sys.argv[1], [int(n) for n in sys.argv[2:]]
TOTAL = sum(BATCHES)

async def main():
    stream = "sd-batches-" + uuid.uuid4().hex[:8]
    batches, confirmed, consumed, chunks = [], [], [], []
    all_confirmed, all_consumed = asyncio.Event(), asyncio.Event()
    async def on_confirm(status):
        if status.is_confirmed:
            confirmed.append(status.message_id)
        if len(confirmed) == TOTAL:
            all_confirmed.set()
    async with Producer("127.0.0.1", 5552, username="guest", password="guest",
                        connection_name=TOKEN) as producer:
        await producer.create_stream(stream)
        for n in BATCHES:  # small messages: 10,000 of them stay under the 1 MiB frame max
            ids = await producer.send_batch(stream, [b"m%05d" % i for i in range(n)],
                                            on_publish_confirm=on_confirm)
            batches.append(ids)
        await asyncio.wait_for(all_confirmed.wait(), 60)
    async def on_message(message, context):
        consumed.append(bytes(message))
        if len(consumed) == TOTAL:
            all_consumed.set()
    async with Consumer("127.0.0.1", 5552, username="guest", password="guest",
                        connection_name=TOKEN) as consumer:
        await consumer.start()
        await consumer.subscribe(stream, on_message, offset_specification=
                                 ConsumerOffsetSpecification(OffsetType.FIRST))
        await asyncio.wait_for(all_consumed.wait(), 60)
        await consumer.delete_stream(stream)
    print(json.dumps({"batches": batches, "confirmed": sorted(confirmed),
                      "consumed": len(consumed)}))

asyncio.run(main())
"""


def own_connections(raw: Path, token: bytes, out: Path, port: int = 5552) -> Path:
    """The connections of `raw` whose client sent `token` (other runs may share the broker),
    re-cut to segments of at most 1448 bytes (scapy reads at most 65535 bytes of a packet:
    a 64 KiB loopback segment would lose its end), with the benchmark's own re-cut."""
    import sys as _sys

    import worsen

    _sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from make_large import recut

    _, packets = worsen.read_pcap(raw)
    clients = set()
    for _, data, _ in packets:
        tcp = worsen.tcp_of(data)
        if tcp and tcp.flow[3] == port and token in data[tcp.payload_at:]:
            clients.add((tcp.flow[0], tcp.flow[1]))
    assert clients, "no connection of this run in the capture"
    recut(raw, out, port, clients)
    return out


@pytest.fixture(scope="module")
def batch_capture(tmp_path_factory) -> tuple[Path, dict]:
    """rstream publishing batches of 101, 1,000 and 10,000 messages to the 3.10 broker, then
    consuming them: (the run's connections re-cut, what the client itself counted)."""
    import json

    folder = tmp_path_factory.mktemp("batches")
    token = f"sd-batch-run-{uuid.uuid4().hex[:8]}"
    from conftest import record_on_lo

    out = record_on_lo(folder / "raw.pcap", BATCH_CLIENT, token, *map(str, BATCHES), timeout=180)
    client = json.loads(out.splitlines()[-1])
    return own_connections(folder / "raw.pcap", token.encode(), folder / "run.pcap"), client


def test_a_real_clients_big_batches_come_whole_with_no_false_gap(batch_capture, caplog):
    """Publish frames of 101, 1,000 and 10,000 messages from rstream: each comes whole, with
    the publishing ids the client gave, scapy's conf.max_list_count untouched; no frame after
    them shows a gap (the capture lost nothing); the confirms and the Deliver chunks (one of
    more than 100 entries) carry every message the client counted."""
    from scapy.all import sniff
    from scapy.config import conf as scapy_conf

    from streamdissect.scapy import Deliver, Publish, PublishConfirm, StreamMalformed

    path, client = batch_capture
    assert scapy_conf.max_list_count == 100
    packets = sniff(offline=str(path), session=TCPSession)
    frames = list(stream_frames(packets))
    publishes = [f[Publish] for f in frames if Publish in f]
    assert [[m.publishing_id for m in p.messages] for p in publishes] == client["batches"]
    assert [p.message_count for p in publishes] == list(BATCHES)
    assert all(m.entry == b"m%05d" % i for p in publishes for i, m in enumerate(p.messages))
    # (loopback retransmits now and then under load: a retransmission is said, and is no gap)
    lost = ("gap", "resync", "truncated", "malformed", "not_captured", "out_of_order")
    noted = [(f.sender, f.stream_offset, f.gap_before, f.anomalies[:3]) for f in frames
             if f.gap_before or any(n.startswith(lost) for n in f.anomalies)]  # fmt: skip
    assert noted == []
    assert not [f for f in frames if isinstance(f.payload, StreamMalformed)]
    assert "Maximum amount of items" not in caplog.text
    confirmed = sorted(i for f in frames if PublishConfirm in f
                       for i in f[PublishConfirm].publishing_ids)  # fmt: skip
    assert confirmed == client["confirmed"] and len(confirmed) == sum(BATCHES)
    delivers = [f for f in frames if Deliver in f]
    assert sum(f[Deliver].num_records for f in delivers) == client["consumed"] == sum(BATCHES)
    assert max(f[Deliver].num_entries for f in delivers) > 100
    assert all(f.to_record().crc_ok for f in delivers)
    assert sum(len(list(f.to_record().messages())) for f in delivers) == client["consumed"]
