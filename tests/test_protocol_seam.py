"""The protocol seam (protocols.base, protocols.registry): a second protocol plugs in by one
object in the registry, and the Stream's results do not move.

The second protocol here is a toy written for the test: `size:u32`, the magic "TOY1", an
opaque id (u32, its high bit set on a response), then text."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
import worsen

from streamdissect.engine.dissect import Anomaly, Dissector, FrameEvent
from streamdissect.framing.framer import NO, WAIT, YES, Framer
from streamdissect.protocols import registry
from streamdissect.protocols.base import Protocol
from streamdissect.protocols.stream.protocol import STREAM
from streamdissect.tables.batches import frame_batches
from streamdissect.tables.columns import arrow_schema_of, columns

MAGIC = b"TOY1"
RESPONSE = 0x8000_0000
TOY_FRAMES = columns(("connection", "string"), ("direction", "string"),
                     ("stream_offset", "int64"), ("opaque", "int64"), ("text", "string"))


@dataclass
class ToyRecord:
    opaque: int
    text: str
    truncated: bool = False


class ToyFramer(Framer):
    HEAD_KEPT = 64
    __slots__ = ()

    def _decode(self, offset, ts_ns, frame, size, cut):
        self.emit(offset, ts_ns, ToyRecord(*_toy(frame), truncated=cut))

    def _emit_head(self, offset, ts_ns, head, size):
        self.emit(offset, ts_ns, ToyRecord(*_toy(head), truncated=True))

    def frame_starts(self, buf, start):
        at = buf.find(MAGIC, start + 4)
        while at >= 0:
            yield at - 4
            at = buf.find(MAGIC, at + 1)

    def plausible(self, buf, pos, max_size, final):
        if len(buf) - pos < 12:
            return WAIT
        size = struct.unpack_from(">I", buf, pos)[0]
        return YES if 8 <= size <= max_size and buf[pos + 4 : pos + 8] == MAGIC else NO


def _toy(frame: bytes) -> tuple[int, str]:
    return struct.unpack_from(">I", frame, 8)[0], frame[12:].decode()


class FrameRows:
    """The toy's frames table builder (Protocol.frame_columns)."""

    def __init__(self) -> None:
        self.kept: list[dict] = []

    @property
    def rows(self) -> int:
        return len(self.kept)

    def add(self, event) -> None:
        self.kept.append({"connection": event.connection, "direction": event.direction,
                          "stream_offset": event.stream_offset,
                          "opaque": event.record.opaque, "text": event.record.text})

    def batches(self, most: int) -> list:
        import pyarrow as pa

        rows, self.kept = self.kept, []
        return [pa.RecordBatch.from_pylist(rows, schema=arrow_schema_of(TOY_FRAMES))]


class ToyProtocol(Protocol):
    """The toy behind the seam: its server on port 7777, or wherever its first bytes say."""

    name = "toy"
    title = "a toy request/response protocol"
    ports = (7777,)
    framer_class = ToyFramer

    def looks_like(self, data):
        return None if len(data) < 8 else data[4:8] == MAGIC

    frames_table = "toy_frames"

    def sent_by_server(self, data):
        return bool(struct.unpack_from(">I", data, 8)[0] & RESPONSE)

    def pairing(self, record):
        return record.opaque & ~RESPONSE, bool(record.opaque & RESPONSE)

    @property
    def tables(self):
        return {"toy_frames": TOY_FRAMES}

    def frame_columns(self, show_secrets=False):
        return FrameRows()


TOY = ToyProtocol()


def toy_frame(opaque: int, text: str) -> bytes:
    body = MAGIC + struct.pack(">I", opaque) + text.encode()
    return struct.pack(">I", len(body)) + body


CLIENT, SERVER = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])


def _eth_tcp(side: int, sport: int, dport: int, seq: int, ack: int, flags: int,
             payload: bytes) -> bytes:  # fmt: skip
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, 0x50, flags, 65535, 0, 0)
    ends = (CLIENT, SERVER) if side == 0 else (SERVER, CLIENT)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0x4000, 64, 6,
                     0, *ends)  # fmt: skip
    return b"\x00" * 12 + b"\x08\x00" + ip + tcp + payload


def conversation(ts: int, client_port: int, server_port: int, payloads: list[tuple[int, bytes]],
                 syn: bool = True) -> list[worsen.Packet]:  # fmt: skip
    """Packets of one connection: (side, bytes) in order, side 0 the client's."""
    packets = []
    seq = [1000, 5000]
    if syn:
        packets += [(ts, _eth_tcp(0, client_port, server_port, 999, 0, 0x02, b""), 54),
                    (ts + 1, _eth_tcp(1, server_port, client_port, 4999, 1000, 0x12, b""), 54)]
    for i, (side, payload) in enumerate(payloads):
        ports = (client_port, server_port) if side == 0 else (server_port, client_port)
        data = _eth_tcp(side, *ports, seq[side], seq[1 - side], 0x18, payload)
        packets.append((ts + 10 + i, data, len(data)))
        seq[side] += len(payload)
    return packets


TALK = [(0, toy_frame(1, "ping")), (1, toy_frame(1 | RESPONSE, "pong")),
        (0, toy_frame(2, "split in two")[:7]), (0, toy_frame(2, "split in two")[7:]),
        (1, toy_frame(2 | RESPONSE, "done"))]  # fmt: skip
STREAM_CAPTURE = worsen.CAPTURES / "rstream-publish-confirm-3.10.pcap"


@pytest.fixture
def with_toy(monkeypatch):
    """The registry with the toy after the Stream: one more line."""
    protocols = (STREAM, TOY)
    registry.check(protocols)
    monkeypatch.setattr(registry, "PROTOCOLS", protocols)
    monkeypatch.setattr(registry, "BY_NAME", {p.name: p for p in protocols})


@pytest.fixture
def mixed(tmp_path) -> Path:
    """The Stream capture, with toy connections on the toy's port and on another port (the
    heuristic's), a connection of neither on a third, and one of a toy server that shows no
    SYN (the heuristic's first bytes say which side is the server)."""
    link, packets = worsen.read_pcap(STREAM_CAPTURE)
    start = packets[1][0]
    packets += conversation(start + 1000, 40001, 7777, TALK)
    packets += conversation(start + 2000, 40002, 6000, TALK)
    packets += conversation(start + 3000, 40003, 6001, [(0, b"GET / HTTP/1.1\r\n\r\n")])
    packets += conversation(start + 4000, 40004, 6002, TALK[1:2] + TALK[:1], syn=False)
    packets.sort(key=lambda p: p[0])
    return worsen.write_pcap(tmp_path / "mixed.pcap", link, packets)


def _stream_events(path, **options) -> list:
    """Frame events (as dicts) and anomalies, but those of the toy's connections."""
    return [(e.connection, e.direction, e.stream_offset, e.record.to_dict())
            if isinstance(e, FrameEvent) else e
            for e in Dissector(**options).run(str(path))
            if not (e.connection or "").startswith("10.0.0.")]  # fmt: skip


def test_a_second_protocol_plugs_in_by_one_registry_line(with_toy, mixed):
    dissector = Dissector(engine="stream")
    events = list(dissector.run(str(mixed)))
    toy = [e for e in events if isinstance(e, FrameEvent) and isinstance(e.record, ToyRecord)]
    by_connection: dict[str, list] = {}
    for e in toy:
        by_connection.setdefault(e.connection, []).append((e.direction, e.record.opaque,
                                                           e.record.text))
    talk = [("c2s", 1, "ping"), ("s2c", 1 | RESPONSE, "pong"), ("c2s", 2, "split in two"),
            ("s2c", 2 | RESPONSE, "done")]  # fmt: skip
    assert by_connection == {
        "10.0.0.1:40001-10.0.0.2:7777": talk,  # by port
        "10.0.0.1:40002-10.0.0.2:6000": talk,  # by the heuristic
        # no SYN: the first bytes are the server's response
        "10.0.0.1:40004-10.0.0.2:6002": [("s2c", 1 | RESPONSE, "pong"), ("c2s", 1, "ping")],
    }
    assert {c: p.name for c, p in dissector.protocol_of.items() if p is TOY} == {
        c: "toy" for c in by_connection}
    assert not any("6001" in c.connection for c in dissector.connections)
    pairs = [TOY.pairing(e.record) for e in toy[:2]]
    assert pairs == [(1, False), (1, True)]
    # the Stream's frames and anomalies are those of the Stream alone
    stream_only = _stream_events(STREAM_CAPTURE, engine="stream")
    assert len(stream_only) > 50 and _stream_events(mixed, engine="stream") == stream_only


def test_a_protocol_without_a_fast_path_is_walked_plainly_by_the_block_engine(with_toy, mixed):
    """The toy has no fast path: the block engine walks its connections with the plain walk
    (its framer decodes every frame) and the Stream's with the Stream's fast path, giving
    the events of engine="stream"."""
    def events(dissector):
        return [(type(e).__name__, e.connection, getattr(e, "stream_offset", None),
                 getattr(e, "record", None) and repr(e.record))
                for e in dissector.run(str(mixed))]  # fmt: skip

    auto = Dissector()
    assert events(auto) == events(Dissector(engine="stream")) and auto._bulk
    toy_alone = Dissector(protocols=["toy"])
    assert events(toy_alone) == events(Dissector(protocols=["toy"], engine="stream"))
    assert toy_alone._bulk
    stream_alone = Dissector(protocols=["stream"])  # (the Stream has one: the block engine)
    assert len(events(stream_alone)) > 50 and stream_alone._bulk


def test_frame_batches_take_the_protocols_frames_table(with_toy, mixed):
    (toy,) = frame_batches(str(mixed), protocol="toy", engine="stream")
    assert toy.schema.names == ["connection", "direction", "stream_offset", "opaque", "text"]
    assert toy.column("text").to_pylist() == ["ping", "pong", "split in two", "done"] * 2 + [
        "pong", "ping"]
    stream = frame_batches(str(mixed))  # (the default protocol: only its connections)
    alone = frame_batches(str(STREAM_CAPTURE))
    assert [b.to_pylist() for b in stream] == [b.to_pylist() for b in alone]


def test_ports_name_the_protocols(with_toy):
    assert registry.server_ports(registry.PROTOCOLS) == {5552: STREAM, 7777: TOY}
    # bare numbers are the first protocol's (what --port always meant: the Stream's)
    assert registry.server_ports(registry.PROTOCOLS, (5553,)) == {5553: STREAM, 7777: TOY}
    assert registry.server_ports(registry.PROTOCOLS, {"toy": (1, 2)}) == {1: TOY, 2: TOY}
    assert registry.server_ports(registry.chosen(["toy"]), (9,)) == {9: TOY}
    assert Dissector(ports=(5553,)).port_protocols == {5553: STREAM, 7777: TOY}
    with pytest.raises(ValueError, match="unknown protocol 'rocketmq'"):
        registry.protocol("rocketmq")


def test_the_registry_refuses_clashing_names():
    class Clash(ToyProtocol):
        @property
        def tables(self):
            return {"frames": TOY_FRAMES}

    with pytest.raises(ValueError, match="table 'frames' of toy and of stream"):
        registry.check((STREAM, Clash()))
    with pytest.raises(ValueError, match="two protocols named 'toy'"):
        registry.check((TOY, ToyProtocol()))


def test_the_registered_protocols_pass_the_check():
    registry.check(registry.PROTOCOLS)  # (run by tables.schema, not at the registry's import)


class CountedToy(ToyProtocol):
    """The toy counting how often its tables are read (a protocol's tables module import)."""

    def __init__(self):
        self.read = 0

    @property
    def tables(self):
        self.read += 1
        return {"toy_frames": TOY_FRAMES, "toy_calls": TOY_FRAMES}


def test_schema_reads_a_protocols_tables_only_when_a_name_needs_them():
    from streamdissect.tables import schema

    toy = CountedToy()
    shared = {"anomalies": schema.ANOMALIES, "messages": schema.MESSAGES}
    tables = schema._Tables((STREAM, toy), shared)
    assert tables["frames"] is STREAM.tables["frames"] and tables["anomalies"] is schema.ANOMALIES
    assert tables.get("latency") is STREAM.tables["latency"] and "connections" in tables
    assert toy.read == 0  # the Stream's names and the shared ones found without the toy's
    assert tables["toy_calls"] is TOY_FRAMES and toy.read == 1
    assert tables.get("nothing") is None and "nothing" not in tables
    with pytest.raises(KeyError):
        tables["nothing"]
    eager = {**STREAM.tables, "toy_frames": TOY_FRAMES, "toy_calls": TOY_FRAMES, **shared}
    assert list(tables) == list(eager) and dict(tables) == eager and len(tables) == len(eager)
    assert list(tables.items()) == list(eager.items()) and tables.copy() == eager


def test_schema_checks_the_names_once_it_reads_every_protocols_tables():
    from streamdissect.tables import schema

    class Clash(ToyProtocol):
        @property
        def tables(self):
            return {"frames": TOY_FRAMES}

    tables = schema._Tables((STREAM, Clash()), {"anomalies": schema.ANOMALIES})
    assert tables["frames"] is STREAM.tables["frames"]  # (the Stream's: found first)
    with pytest.raises(ValueError, match="table 'frames' of toy and of stream"):
        list(tables)


def test_stream_pairing_is_the_latency_tables_pairing():
    """A Stream call pairs by correlation id: every record the latency analysis takes as a
    call (but Tune, paired by its own rule) has a pairing key, and every answered request's
    response carries the request's key."""
    # (through the driver: a collector module imported first meets the driver half made)
    from streamdissect.protocols.stream.analysis.latency import NOT_CALLS, LatencyCollector

    calls = keyed = answered = 0
    for path in worsen.corpus_captures():
        latency = LatencyCollector()
        keys: dict[tuple, tuple] = {}
        for e in Dissector(ports=(5552, 5553)).run(str(path)):
            if isinstance(e, Anomaly):
                continue
            latency.on_frame(e)
            command = getattr(e.record, "command", None)
            key = STREAM.pairing(e.record)
            if command not in NOT_CALLS and command not in (None, "Tune"):
                calls += 1
                keyed += key is not None
            if key is not None:
                keys[(e.connection, e.ts_ns, e.record.response)] = key
        for row in latency.rows:
            if row["status"] == "answered" and row["command"] != "Tune":
                request = keys[(row["connection"], row["request_ts_ns"], False)]
                response = keys[(row["connection"], row["response_ts_ns"], True)]
                assert request == (response[0], False) and response[1]
                answered += 1
    assert calls == keyed and answered > 100


def _use_every_lazy_part(tmp_path: Path) -> None:
    """Every registered protocol at work on real captures: `analyze` with the messages table
    (framers, plain walk, pairing), each capture again on ports no protocol claims (the
    heuristics), and `frames -V`'s view of each frame."""
    from streamdissect.analysis import analyze

    rocketmq = worsen.CAPTURES / "rocketmq" / "rmq-java-json.pcap"
    for path, ports in ((STREAM_CAPTURE, (5552,)), (rocketmq, (9876, 10911))):
        assert analyze(str(path), messages=True).messages is not None
        link, packets = worsen.read_pcap(path)
        for n, port in enumerate(ports):
            packets = worsen.rewrite_port(packets, port, 30000 + n)
        moved = worsen.write_pcap(tmp_path / path.name, link, packets)
        analyze(str(moved), messages=True)
        dissector = Dissector(engine="stream")
        for e in dissector.run(str(moved)):
            if isinstance(e, FrameEvent):
                dissector.protocol_of[e.connection].frame_view(e.record)


def test_every_protocol_pickles_as_itself_before_and_after_use(tmp_path):
    """Spark's tasks and the multiprocessing helper may pickle a protocol object: before and
    after a real run (whose lazily imported parts it then holds: a framer class, modules),
    each one unpickles as the registered object itself."""
    import copy
    import pickle
    from types import ModuleType

    def round_trips() -> None:
        for p in registry.PROTOCOLS:
            for level in range(pickle.HIGHEST_PROTOCOL + 1):
                assert pickle.loads(pickle.dumps(p, level)) is p, (p.name, level)
            assert copy.deepcopy(p) is p

    round_trips()
    # (what a package serves through its module __getattr__ pickles by its own module)
    from streamdissect.protocols import rocketmq, stream

    for package, names in ((rocketmq, rocketmq.__all__), (stream, ("AmqpMessage",))):
        for name in names:
            served = getattr(package, name)
            assert pickle.loads(pickle.dumps(served)) is served, name
    _use_every_lazy_part(tmp_path)
    # each now holds what it made lazily, modules among them (which pickle cannot take)
    held = {p.name: {type(v) for v in vars(p).values()} for p in registry.PROTOCOLS}
    assert all(ModuleType in kinds for kinds in held.values()), held
    round_trips()
