"""The bulk engine gives exactly the streaming engine's output: every frame event and
anomaly (ts, connection, direction, offset, record dict), the anomalies and connections
tables, on every corpus capture and on made-worse copies, with blocks small enough that
frames, segments and records straddle them."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import worsen

from streamdissect.capture import blocks, packet_columns
from streamdissect.engine import bulk
from streamdissect.engine.dissect import Dissector, FrameEvent
from streamdissect.framing.walk import PlainFrames

# every test both ways: the compiled walk and the Python one (native_modes)
pytestmark = pytest.mark.usefixtures("walk_mode")


def outcome(path: Path, engine: str, **options) -> tuple[list, list, list]:
    return outcome_of(Dissector(engine=engine, **options), path)


def outcome_of(dissector: Dissector, paths: Path | list) -> tuple[list, list, list]:
    """(events, anomalies table, connections table) of a run: a path, or several as one."""
    events = []
    for ev in dissector.run(str(paths) if isinstance(paths, (str, Path)) else list(map(str, paths))):
        if isinstance(ev, FrameEvent):
            events.append((ev.ts_ns, ev.connection, ev.direction, ev.stream_offset,
                           ev.record.to_dict(show_secrets=True)))  # fmt: skip
        else:
            events.append((ev.ts_ns, ev.connection, ev.direction, ev.kind, ev.stream_offset,
                           ev.length, ev.detail))  # fmt: skip
    anomalies = [(a.ts_ns, a.connection, a.kind, a.stream_offset, a.length, a.detail)
                 for a in dissector.anomalies]  # fmt: skip
    return events, anomalies, dissector.connections


def assert_same(path: Path, **options) -> None:
    reference = outcome(path, "stream", **options)
    assert reference[0], "nothing to compare"
    # (block bytes, packets dissected at a time): the last splits every block in pieces of
    # 5 packets, so frames and segments straddle the pieces as they straddle blocks
    for block, rows in ((blocks.BLOCK, packet_columns.MAX_ROWS),
                        (70_000, packet_columns.MAX_ROWS), (9_000, packet_columns.MAX_ROWS),
                        (blocks.BLOCK, 5)):  # fmt: skip
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(blocks, "BLOCK", block)
            patch.setattr(packet_columns, "MAX_ROWS", rows)
            got = outcome(path, "bulk", **options)
        for name, ref, new in zip(("events", "anomalies", "connections"), reference, got):
            assert len(new) == len(ref), (name, block, rows)
            for i, (a, b) in enumerate(zip(ref, new)):
                assert a == b, (name, block, rows, i)


@pytest.mark.parametrize("path", worsen.corpus_captures(), ids=lambda p: p.stem)
@pytest.mark.parametrize("publish_messages", [True, False])
def test_corpus_same_as_stream(path, publish_messages):
    assert_same(path, publish_messages=publish_messages)
    if not publish_messages:  # what analyze asks for: no message bodies kept at all
        assert_same(path, publish_messages=False, deliver_keep_limit=0)


@pytest.mark.parametrize("path", worsen.corpus_captures(), ids=lambda p: p.stem)
def test_walk_without_fast_path_same_as_stream(path, monkeypatch):
    """The frame walk with no protocol fast path (framing.walk.PlainFrames: the framer
    decodes every frame) gives the streaming engine's events too."""
    from streamdissect.protocols.registry import protocol

    monkeypatch.setattr(type(protocol("stream")), "fast_path", PlainFrames)
    assert_same(path, columns=True)


@pytest.fixture(scope="module")
def real():
    return worsen.read_pcap(worsen.real_capture())


def _data_rows(packets):
    return worsen.data_segments(packets)


WORSE = {
    "reordered": lambda p: worsen.reorder(p),
    "duplicated": lambda p: worsen.duplicate(p),
    "reordered+duplicated": lambda p: worsen.duplicate(worsen.reorder(p)),
    "midstream": lambda p: worsen.midstream(p, len(p) // 3),
    "dropped": lambda p: worsen.drop(p, {_data_rows(p)[len(_data_rows(p)) // 2]}),
    "snaplen96": lambda p: worsen.snaplen(p, 96),
    "snaplen200": lambda p: worsen.snaplen(p, 200),
    "vlan": lambda p: [(ts, worsen.with_vlan_tags(d, 1), n + 4) for ts, d, n in p],
}


@pytest.mark.parametrize("name", sorted(WORSE))
def test_worsened_same_as_stream(real, tmp_path, name):
    linktype, packets = real
    path = worsen.write_pcap(tmp_path / "w.pcap", linktype, WORSE[name](packets))
    assert_same(path)
    assert_same(path, publish_messages=False, deliver_keep_limit=0)


SNAP_LENGTHS = (96, 128)  # tcpdump -s 96 (old tcpdump's default), -s 128


@pytest.mark.parametrize("snap", SNAP_LENGTHS)
@pytest.mark.parametrize("path", worsen.corpus_captures(), ids=lambda p: p.stem)
def test_snaplen_cut_corpus_same_as_stream(path, snap, tmp_path):
    """Every shipped capture cut by a snap length: the cut bytes' not_captured anomalies
    and the cut frames are the streaming engine's (test_input_forms: as columns too)."""
    linktype, packets = worsen.read_pcap(path)
    cut = worsen.write_pcap(tmp_path / "cut.pcap", linktype, worsen.snaplen(packets, snap))
    assert_same(cut)
    assert_same(cut, publish_messages=False, deliver_keep_limit=0)


LINKS = {  # linktype, Ethernet packet -> the same packet on that link layer
    "sll": (113, worsen.as_linux_sll), "sll2": (276, worsen.as_linux_sll2),
    "null": (0, worsen.as_null), "null-be": (0, lambda d: worsen.as_null(d, big_endian=True)),
    "loop": (108, worsen.as_loop), "raw": (101, worsen.as_raw), "ipv4": (228, worsen.as_raw),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(LINKS))
def test_other_link_layers_are_parsed_as_columns_and_same_as_stream(real, tmp_path, monkeypatch,
                                                                    name):  # fmt: skip
    """tcpdump -i any (Linux cooked), BSD loopback, raw IP: the bulk engine parses their IPv4
    + TCP packets with numpy as it does Ethernet's, and gives the streaming engine's events."""
    linktype, make = LINKS[name]
    path, _ = _relinked(real, make, linktype, tmp_path / f"{name}.pcap")
    assert_same(path)
    # (every packet of the capture is IPv4 + TCP without options)
    assert _parsed_one_by_one(path, monkeypatch) == 0


def _relinked(real, make, linktype: int, path: Path) -> tuple[Path, list]:
    """The real capture with each Ethernet packet made into `make(packet)`."""
    _, packets = real
    made = [(ts, data, n + len(data) - len(d)) for ts, d, n in packets for data in (make(d),)]
    return worsen.write_pcap(path, linktype, made), made


def _parsed_one_by_one(path: Path, monkeypatch) -> int:
    """How many packets the bulk engine hands to capture.tcp_segment (not parsed as columns)."""
    calls = []
    real_segment = packet_columns.tcp_segment
    with monkeypatch.context() as patch:
        patch.setattr(packet_columns, "tcp_segment", lambda *a: calls.append(1) or real_segment(*a))
        outcome(path, "bulk")
    return len(calls)


def _v6(d: bytes) -> bytes:
    return worsen.as_ipv6(d, extensions=())  # Ethernet + IPv6 + the same TCP segment


V6_LINKS = {  # linktype, Ethernet packet -> the same segment over IPv6 on that link layer
    "ethernet": (1, _v6),
    "sll": (113, lambda d: struct.pack(">HHH8sH", 0, 772, 6, b"\x00" * 8, 0x86DD) + _v6(d)[14:]),
    "sll2": (276, lambda d: struct.pack(">HHIHBB8s", 0x86DD, 0, 1, 772, 0, 6, b"\x00" * 8)
             + _v6(d)[14:]),
    "null-linux": (0, lambda d: struct.pack("<I", 10) + _v6(d)[14:]),
    "null-be-bsd": (0, lambda d: struct.pack(">I", 28) + _v6(d)[14:]),
    "loop": (108, lambda d: struct.pack(">I", 24) + _v6(d)[14:]),
    "raw": (101, lambda d: _v6(d)[14:]), "ipv6": (229, lambda d: _v6(d)[14:]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(V6_LINKS))
def test_ipv6_is_parsed_as_columns_and_same_as_stream(real, tmp_path, monkeypatch, name):
    """IPv6 + TCP (a broker reached over ::1) on each link layer: parsed with numpy as IPv4
    is, the streaming engine's events; with extension headers, or mixed with IPv4 packets of
    other connections in one capture, still the same events."""
    linktype, make = V6_LINKS[name]
    path, v6 = _relinked(real, make, linktype, tmp_path / f"{name}.pcap")
    assert_same(path)
    assert _parsed_one_by_one(path, monkeypatch) == 0
    if linktype == 1:
        _, packets = real
        ext = [(ts, worsen.as_ipv6(d), n + 16 + 20) for ts, d, n in packets]  # (two options)
        assert_same(worsen.write_pcap(tmp_path / "ext.pcap", 1, ext))
        # this capture's packets over IPv6, its packets shifted in time over IPv4 as
        # another connection (other ports), in one file
        other = [(ts + 7, d[:34] + struct.pack(">HH", 40001, 5553) + d[38:], n)
                 for ts, d, n in packets]  # fmt: skip
        mixed = sorted(v6 + other, key=lambda p: p[0])
        path = worsen.write_pcap(tmp_path / "mixed.pcap", 1, mixed)
        assert_same(path)
        monkeypatch.setattr(bulk, "can_fork", lambda: True)  # the helper's columns too
        monkeypatch.setattr(blocks, "BLOCK", 9_000)
        assert outcome(path, "bulk", helper_process=True) == outcome(path, "stream")


def test_other_link_layers_and_formats_same_as_stream(real, tmp_path):
    linktype, packets = real
    big = worsen.write_pcap(tmp_path / "be.pcap", linktype, packets, big_endian=True,
                            nanoseconds=True)  # fmt: skip
    assert_same(big)
    assert_same(worsen.to_pcapng(big, tmp_path / "x.pcapng"))
    assert_same(worsen.gzip_copy(big, tmp_path / "x.pcap.gz"))


def test_helper_process_same_as_stream(real, tmp_path, monkeypatch):
    monkeypatch.setattr(bulk, "can_fork", lambda: True)
    linktype, packets = real
    path = worsen.write_pcap(tmp_path / "h.pcap", linktype, worsen.duplicate(packets))
    reference = outcome(path, "stream")
    # the helper parses each block's packets into its columns, MAX_ROWS records an area, two
    # areas a slot; with MAX_ROWS 20 most blocks have more records than the areas hold and
    # this process parses the rest itself
    # the first block is read small, the next ones twice as big up to BLOCK (a first read
    # of 100 bytes holds no whole record)
    for rows, first in ((packet_columns.MAX_ROWS, blocks.FIRST_BLOCK), (20, blocks.FIRST_BLOCK),
                        (packet_columns.MAX_ROWS, 1_000), (packet_columns.MAX_ROWS, 100)):  # fmt: skip
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(blocks, "BLOCK", 9_000)
            patch.setattr(packet_columns, "MAX_ROWS", rows)
            patch.setattr(blocks, "FIRST_BLOCK", first)
            assert outcome(path, "bulk", helper_process=True) == reference, (rows, first)
    whole = path.read_bytes()
    path.write_bytes(whole[:-7])
    assert outcome(path, "bulk", helper_process=True) == outcome(path, "stream")


def test_helper_choice_is_deterministic(real, tmp_path, monkeypatch):
    """The helper runs when a second CPU exists and the file has more than one block,
    whatever the load average says (time and memory must not depend on what ran before)."""
    monkeypatch.setattr(blocks.os, "getloadavg", lambda: (64.0, 64.0, 64.0), raising=False)
    monkeypatch.setattr(blocks.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert blocks.can_fork() == hasattr(blocks.os, "fork")
    monkeypatch.setattr(blocks.os, "sched_getaffinity", lambda pid: {0})
    assert not blocks.can_fork()
    monkeypatch.setattr(bulk, "can_fork", lambda: True)
    used = []
    real_layout = bulk.helper_layout
    monkeypatch.setattr(bulk, "helper_layout", lambda *a: used.append(1) or real_layout(*a))
    linktype, packets = real
    path = worsen.write_pcap(tmp_path / "h.pcap", linktype, packets)
    outcome(path, "bulk", helper_process=True)  # smaller than a block: nothing to overlap
    assert not used
    monkeypatch.setattr(blocks, "BLOCK", 9_000)
    assert path.stat().st_size > 9_000
    outcome(path, "bulk", helper_process=True)
    assert used


def test_cut_file_same_as_stream(real, tmp_path):
    linktype, packets = real
    whole = worsen.pcap_bytes(linktype, packets)
    for cut in (len(whole) - 5, len(whole) - 40, len(whole) * 2 // 3):
        path = tmp_path / f"cut{cut}.pcap"
        path.write_bytes(whole[:cut])
        assert_same(path)


REGRESSIONS = sorted((Path(__file__).parent / "regressions").glob("pcap-*.pcap"))


@pytest.mark.parametrize("path", REGRESSIONS, ids=lambda p: p.name)
def test_fuzz_findings_same_as_stream(path):
    """Inputs on which the fuzz campaign found the engines disagreeing (a Tune changing the
    frame limit in the same block or the other direction, the roles of a SYN-less
    connection)."""
    reference = outcome(path, "stream")
    for block in (blocks.BLOCK, 9_000):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(blocks, "BLOCK", block)
            assert outcome(path, "bulk") == reference


def _eth_tcp(sport: int, dport: int, seq: int, ack: int, flags: int, payload: bytes) -> bytes:
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, 0x50, flags, 65535, 0, 0)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0x4000, 64, 6,
                     0, bytes([127, 0, 0, 1]), bytes([127, 0, 0, 2]))  # fmt: skip
    return b"\x00" * 12 + b"\x08\x00" + ip + tcp + payload


def _frame(key: int, version: int, body: bytes) -> bytes:
    return struct.pack(">IHH", 4 + len(body), key, version) + body


def frames_capture(path: Path, frames: list[bytes]) -> Path:
    """A capture of one connection carrying `frames` three times over, alternately in each
    direction, some split over two segments."""
    ts = 1_700_000_000 * 10**9
    packets = [(ts, _eth_tcp(40000, 5552, 999, 0, 0x02, b""), 54),
               (ts + 1000, _eth_tcp(5552, 40000, 4999, 1000, 0x12, b""), 54)]  # fmt: skip
    seq = [1000, 5000]
    for i, frame in enumerate(frames * 3):
        side = i % 2
        parts = [frame[:5], frame[5:]] if i % 5 == 4 else [frame]
        for part in parts:
            ports = (40000, 5552) if side == 0 else (5552, 40000)
            data = _eth_tcp(*ports, seq[side], seq[1 - side], 0x18, part)
            packets.append((ts + 2000 + len(packets), data, len(data)))
            seq[side] += len(part)
    return worsen.write_pcap(path, 1, packets)


def test_small_hot_frames_same_as_stream(tmp_path):
    """Credit, PublishConfirm and Heartbeat frames the walk decodes by their fast path, and
    odd ones of each (other version, wrong length, impossible count) it must hand on."""
    frames = [
        _frame(0x0017, 1, b""),  # Heartbeat
        _frame(0x0017, 2, b""),
        _frame(0x0017, 1, b"\x00\x01"),
        _frame(0x0009, 1, struct.pack(">Bh", 3, 10)),  # Credit
        _frame(0x0009, 1, struct.pack(">Bh", 3, -2)),
        _frame(0x0009, 1, struct.pack(">Bhx", 3, 10)),
        _frame(0x0009, 2, struct.pack(">Bh", 3, 10)),
        _frame(0x0003, 1, struct.pack(">Bi3Q", 1, 3, 7, 8, 9)),  # PublishConfirm
        _frame(0x0003, 1, struct.pack(">BiQ", 1, 0, 7)),
        _frame(0x0003, 1, struct.pack(">Bi", 1, -1)),
        _frame(0x0003, 1, struct.pack(">Bi", 1, 0)),
        _frame(0x0003, 2, struct.pack(">BiQ", 1, 1, 7)),
    ]
    path = frames_capture(tmp_path / "small.pcap", frames)
    assert_same(path)
    assert_same(path, publish_messages=False, deliver_keep_limit=0)


@pytest.mark.parametrize("path", worsen.corpus_captures(), ids=lambda p: p.stem)
def test_walk_lane_same_as_emit(path, monkeypatch):
    """The walk makes the events of Deliver heads and small hot frames itself (emit.lane):
    the same events, order and frame counts as through the framer's emit."""
    options = {"publish_messages": False, "deliver_keep_limit": 0}
    with_lane = outcome(path, "bulk", **options)
    plain_framer = Dissector._framer

    def framer_without_lane(self, owner, side):
        framer = plain_framer(self, owner, side)
        assert hasattr(framer.emit, "lane")
        del framer.emit.lane
        return framer

    monkeypatch.setattr(Dissector, "_framer", framer_without_lane)
    without = outcome(path, "bulk", **options)
    assert with_lane[0] and with_lane == without


@pytest.mark.parametrize("path", worsen.corpus_captures(), ids=lambda p: p.stem)
def test_publish_id_runs_same_type_as_stream(path):
    """Without message lists, ids that go up one by one are a range in both engines (to_dict,
    which the other tests compare, turns both into lists)."""

    def id_kinds(engine):
        dissector = Dissector(engine=engine, publish_messages=False)
        return [(type(ev.record.publishing_ids), list(ev.record.publishing_ids))
                for ev in dissector.run(str(path))
                if isinstance(ev, FrameEvent) and ev.record.__class__.__name__ == "Publish"]

    stream = id_kinds("stream")
    assert id_kinds("bulk") == stream
    for kind, ids in stream:
        consecutive = bool(ids) and ids == list(range(ids[0], ids[0] + len(ids)))
        assert (kind is range) == consecutive


def test_id_run():
    from streamdissect.protocols.stream.publish import id_run

    assert id_run([5, 6, 7]) == range(5, 8) and type(id_run([5, 6, 7])) is range
    for ids in ([5, 7, 6], [5, 5, 6], [7, 6, 5], [], None, [2**64 - 1]):
        got = id_run(ids)
        assert got is ids or (ids == [2**64 - 1] and got == range(2**64 - 1, 2**64))


def test_publish_ids_in_any_order_same_as_stream(tmp_path):
    """Publish v1 frames the bulk engine reads with numpy: ids going up one by one, and ids
    out of order, repeated or going down (kept as lists), in one block and across frames."""

    def publish(ids: list[int], body: bytes = b"x" * 20) -> bytes:
        messages = b"".join(struct.pack(">QI", i, len(body)) + body for i in ids)
        return _frame(0x0002, 1, struct.pack(">Bi", 7, len(ids)) + messages)

    frames = [publish(ids) for ids in ([1, 2, 3], [4], [6, 5, 7], [8, 8, 9], [12, 11, 10],
                                       [13, 14, 15, 16], [2**64 - 2, 2**64 - 1])]  # fmt: skip
    ts = 1_700_000_000 * 10**9
    packets = [(ts, _eth_tcp(40000, 5552, 999, 0, 0x02, b""), 54),
               (ts + 1000, _eth_tcp(5552, 40000, 4999, 1000, 0x12, b""), 54)]  # fmt: skip
    seq = 1000
    for i, frame in enumerate(frames * 2):
        parts = [frame[:30], frame[30:]] if i % 3 == 2 else [frame]  # some split mid-message
        for part in parts:
            data = _eth_tcp(40000, 5552, seq, 5000, 0x18, part)
            packets.append((ts + 2000 + len(packets), data, len(data)))
            seq += len(part)
    path = worsen.write_pcap(tmp_path / "publishes.pcap", 1, packets)
    assert_same(path, publish_messages=False, deliver_keep_limit=0)
    kinds = [type(ev.record.publishing_ids).__name__
             for ev in Dissector(engine="bulk", publish_messages=False).run(str(path))
             if isinstance(ev, FrameEvent) and ev.record.key == 0x0002]
    assert kinds == ["range", "range", "list", "list", "list", "range", "range"] * 2
