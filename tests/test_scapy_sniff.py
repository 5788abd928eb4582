"""sniff(offline=..., session=TCPSession) with the layer: the frames of `streamdissect frames`,
the wire's bytes, gaps shown and never zero-filled, bad input never an exception."""

from __future__ import annotations

import functools
import json
import struct
import subprocess
import sys
import tracemalloc
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import worsen
from scapy.all import IP, TCP, Ether, Raw, sniff, wrpcap
from scapy.sessions import TCPSession

from streamdissect.protocols.stream import encode_record, make_record
from streamdissect.scapy import (
    BOUND_PORTS,
    Deliver,
    Publish,
    StreamFrame,
    StreamMalformed,
    StreamSegment,
    StreamTruncated,
    bind_port,
    stream_frames,
    unbind_port,
)

CAPTURES = worsen.corpus_captures()
KEY_FIELDS = ("publisher_id", "subscription_id", "stream", "credit", "committed_chunk_id",
              "closing_code", "frame_max", "heartbeat", "mechanism")  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def port_5553():
    """The 4.0 broker's captures are on 5553."""
    bind_port(5553)
    yield
    unbind_port(5553)


@functools.cache  # (a capture's frames and sniff are made once, for the tests of both)
def reference_frames(path: Path) -> dict[tuple[str, str], list[dict]]:
    """`streamdissect frames --format jsonl`, per connection and direction."""
    out = subprocess.run(
        [sys.executable, "-m", "streamdissect", "frames", "--format", "jsonl", "--port", "5552", "--port", "5553",
         "--no-heuristic", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    frames: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for line in out.splitlines():
        row = json.loads(line)
        if row["command"] != "Anomaly":
            wanted = {k: row.get(k) for k in ("key", "version", "size", "correlation_id", "code")}
            wanted |= {k: row[k] for k in KEY_FIELDS if row.get(k) is not None}
            if row.get("publishing_ids") is not None:
                wanted["publishing_ids"] = row["publishing_ids"]
            if row.get("record_count") is not None:
                wanted["record_count"] = row["record_count"]
            frames[(row["connection"], row["direction"])].append(wanted)
    return frames


def connection_of(packet: Any, frame: StreamFrame) -> tuple[str, str]:
    ip, tcp = packet[IP], packet[TCP]
    if frame.sender == "client":
        return f"{ip.src}:{tcp.sport}-{ip.dst}:{tcp.dport}", "c2s"
    return f"{ip.dst}:{tcp.dport}-{ip.src}:{tcp.sport}", "s2c"


def scapy_fields(frame: StreamFrame) -> dict[str, Any]:
    """What the layer's own fields say (not the codec's reading of the bytes)."""
    body = frame.payload
    # (only the body's own fields: scapy's attribute lookup goes on to the next frame)
    names = {f.name for f in body.fields_desc}
    got = {"key": frame.key, "version": frame.version, "size": frame.size,
           "correlation_id": body.correlation_id if "correlation_id" in names else None,
           "code": body.code if "code" in names else None}  # fmt: skip
    for name in KEY_FIELDS:
        if name in names and getattr(body, name) is not None:
            got[name] = getattr(body, name)
    if isinstance(body, Publish):
        got["publishing_ids"] = [m.publishing_id for m in body.messages]
        got["record_count"] = sum(
            1 if isinstance(m.entry, bytes) else m.entry.num_records for m in body.messages
        )
    elif "publishing_ids" in names:
        got["publishing_ids"] = body.publishing_ids
    if isinstance(body, Deliver):
        got["record_count"] = body.num_records
    return got


@functools.cache
def sniffed(path: Path) -> tuple[list[Any], dict[tuple[str, str], list[StreamFrame]]]:
    packets = sniff(offline=str(path), session=TCPSession)
    frames: dict[tuple[str, str], list[StreamFrame]] = defaultdict(list)
    for packet in packets:
        for frame in stream_frames([packet]):
            frames[connection_of(packet, frame)].append(frame)
    return packets, frames


def wire_streams(path: Path) -> dict[tuple[str, str], bytes]:
    """Each direction's bytes from the SYN on, put together from the capture with worsen's
    own reader (not with streamdissect nor the layer)."""
    _, packets = worsen.read_pcap(path)
    pieces: dict[tuple, dict[int, bytes]] = defaultdict(dict)
    starts: dict[tuple, int] = {}
    for _, data, _ in packets:
        tcp = worsen.tcp_of(data)
        if tcp is None:
            continue
        if tcp.flags & 0x02:
            starts[tcp.flow] = tcp.seq + 1
        if tcp.payload_len:
            pieces[tcp.flow][tcp.seq] = data[tcp.payload_at : tcp.payload_at + tcp.payload_len]
    streams = {}
    for flow, by_seq in pieces.items():
        src, sport, dst, dport = flow
        client = dport in (5552, 5553)
        ends = (src, sport, dst, dport) if client else (dst, dport, src, sport)
        name = "{}:{}-{}:{}".format(".".join(map(str, ends[0])), ends[1],
                                    ".".join(map(str, ends[2])), ends[3])  # fmt: skip
        out = bytearray()
        for seq in sorted(by_seq):
            offset = seq - starts[flow]
            out[offset : offset + len(by_seq[seq])] = by_seq[seq]
        streams[(name, "c2s" if client else "s2c")] = bytes(out)
    return streams


@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_sniff_gives_the_frames_of_streamdissect_frames(path):
    expected = reference_frames(path)
    _, frames = sniffed(path)
    got = {key: [scapy_fields(f) for f in found] for key, found in frames.items()}
    assert got == dict(expected)
    assert sum(map(len, got.values())) > 0


@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_every_frame_builds_back_to_the_wire_bytes(path):
    streams = wire_streams(path)
    _, frames = sniffed(path)
    checked = 0
    for key, found in frames.items():
        for frame in found:
            data = frame.frame_bytes()
            offset = frame.stream_offset
            assert streams[key][offset : offset + len(data)] == data
            assert bytes(StreamFrame(data)) == data
            assert frame.gap_before == 0 and frame.anomalies == []
            checked += 1
    assert checked == sum(map(len, reference_frames(path).values()))


def test_summary_reads_like_a_frames_line():
    path = worsen.CAPTURES / "raw-errors-3.10.pcap"
    lines = subprocess.run(
        [sys.executable, "-m", "streamdissect", "frames", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    texts = [line.split(None, 3)[3] for line in lines]  # after number, time, connection
    packets = sniff(offline=str(path), session=TCPSession)
    summaries = []
    for packet in packets:
        summary = packet.summary()
        if StreamFrame in packet:
            assert summary.startswith("Ether / IP / TCP 127.0.0.1:")
            summaries += [part for part in summary.split(" / ") if part[:1] in "→←"]
    assert summaries == texts


def dropped_copy(tmp_path: Path) -> tuple[Path, Path, int, int, tuple[str, str]]:
    """The slow-consumer capture with one server data segment in the middle of a Deliver cut
    out: (cut copy, original, first and end stream offsets of the lost bytes, direction)."""
    original = worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap"
    linktype, packets = worsen.read_pcap(original)
    streams = wire_streams(original)
    server_segments = [i for i in worsen.data_segments(packets)
                       if worsen.tcp_of(packets[i][1]).flow[1] == 5552]  # fmt: skip
    # the busiest server direction (the consumer's Delivers), a full-sized segment mid-way
    busiest = max({worsen.tcp_of(packets[i][1]).flow for i in server_segments},
                  key=lambda flow: sum(worsen.tcp_of(packets[i][1]).flow == flow
                                       for i in server_segments))  # fmt: skip
    mine = [i for i in server_segments if worsen.tcp_of(packets[i][1]).flow == busiest]
    middle = mine[len(mine) // 3 : 2 * len(mine) // 3]
    victim = max(middle, key=lambda i: worsen.tcp_of(packets[i][1]).payload_len)
    tcp = worsen.tcp_of(packets[victim][1])
    syn = next(t.seq for _, d, _ in packets
               if (t := worsen.tcp_of(d)) and t.flow == tcp.flow and t.flags & 0x02)  # fmt: skip
    start = tcp.seq - syn - 1
    client_port = tcp.flow[3]
    key = next(k for k in streams if k[1] == "s2c" and k[0].split("-")[0].endswith(f":{client_port}"))
    cut = worsen.write_pcap(tmp_path / "cut.pcap", linktype, worsen.drop(packets, {victim}))
    return cut, original, start, start + tcp.payload_len, key


def test_a_lost_segment_is_shown_and_never_decoded_as_zeros(tmp_path):
    cut, original, gap_start, gap_end, key = dropped_copy(tmp_path)
    full = wire_streams(original)[key]
    _, before = sniffed(original)
    packets, after = sniffed(cut)
    # scapy's own buffer holds zeros where the segment was; no frame holds them
    for frame in after[key]:
        data = frame.frame_bytes()
        assert full[frame.stream_offset : frame.stream_offset + len(data)] == data
    assert all(f.frame_bytes().count(b"\x00" * 64) == 0 or f.stream_offset + len(f.frame_bytes())
               <= gap_start for f in after[key])  # fmt: skip
    old = [(f.stream_offset, f.size) for f in before[key]]
    new = [(f.stream_offset, f.size) for f in after[key]]
    whole_before = [o for o in old if o[0] + 4 + o[1] <= gap_start]
    resumed = [o for o in old if o[0] >= gap_end]
    assert new[: len(whole_before)] == whole_before
    assert new[-len(resumed) :] == resumed and len(resumed) > 5  # the frames after the gap
    lost = [o for o in old if o not in new]
    assert lost and all(o[0] < gap_end and o[0] + 4 + o[1] > gap_start for o in lost)
    # the gap is shown on the first frame after it
    first_after = next(f for f in after[key] if f.stream_offset >= gap_end)
    assert first_after.gap_before > 0
    assert any("gap" in note for note in first_after.anomalies)
    assert "bytes not framed before it]" in next(
        p for p in packets if StreamFrame in p and first_after in stream_frames([p])
    ).summary()


def after_starts(worsen_with: Any, packets: list, keep: int = 3) -> list:
    """worsen_with applied to each connection's packets after its first `keep` data segments
    in each direction (the rest of the capture kept in place)."""
    firsts: set[int] = set()
    counts: dict[tuple, int] = defaultdict(int)
    for i in worsen.data_segments(packets):
        flow = worsen.tcp_of(packets[i][1]).flow
        counts[flow] += 1
        if counts[flow] <= keep:
            firsts.add(i)
    start = max(firsts) + 1 if firsts else 0
    return packets[:start] + worsen_with(packets[start:])


@pytest.mark.parametrize("worsen_with", [worsen.reorder, worsen.duplicate])
def test_reordered_and_retransmitted_segments_give_the_same_frames(tmp_path, worsen_with):
    original = worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap"
    linktype, packets = worsen.read_pcap(original)
    # (past each direction's first segments: see the next test)
    path = worsen.write_pcap(tmp_path / "worse.pcap", linktype, after_starts(worsen_with, packets))
    _, frames = sniffed(path)
    got = {key: [scapy_fields(f) for f in found] for key, found in frames.items()}
    assert got == dict(reference_frames(original))
    assert any(f.anomalies for found in frames.values() for f in found)  # and they are said


def test_a_reordered_first_segment_is_said_not_misread(tmp_path):
    """TCPSession shows no SYN: the stream is taken to start at a direction's first data
    segment, so one that comes before it (swapped) cannot be placed. It is said, and
    everything after is framed as on the wire."""
    original = worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap"
    linktype, packets = worsen.read_pcap(original)
    path = worsen.write_pcap(tmp_path / "swapped.pcap", linktype, worsen.reorder(packets))
    streams = wire_streams(original)
    _, frames = sniffed(path)
    notes = [n for found in frames.values() for f in found for n in f.anomalies]
    assert any(n.startswith("segment_before_start") for n in notes)
    reference = reference_frames(original)
    for key, found in frames.items():
        assert [scapy_fields(f) for f in found] == reference[key][-len(found) :]
        for frame in found:  # (stream offsets count from the first segment seen)
            assert frame.frame_bytes() in streams[key]


def tcp_packets(payloads: list[bytes], sport: int = 40000) -> list[Any]:
    """A client connection to 5552 carrying `payloads` (handshake included)."""
    seq = 1000
    packets = [Ether() / IP(src="127.0.0.1", dst="127.0.0.1") / TCP(sport=sport, dport=5552,
                                                                    flags="S", seq=seq - 1)]  # fmt: skip
    for n, payload in enumerate(payloads):
        packet = Ether() / IP(src="127.0.0.1", dst="127.0.0.1") / TCP(
            sport=sport, dport=5552, flags="PA", seq=seq, ack=1
        ) / Raw(payload)
        packet.time = 1_700_000_000 + n / 1000
        packets.append(packet)
        seq += len(payload)
    return packets


def test_hostile_bytes_never_escape_sniff(tmp_path):
    heartbeat = encode_record(make_record("Heartbeat"))
    credit = encode_record(make_record("Credit", subscription_id=1, credit=2))
    bad_map = b"\x00\x00\x00\x0c\x00\x11\x00\x01\x00\x00\x00\x01\x7f\xff\xff\xff"
    payloads = [credit, bad_map, b"\xff\xff\xff\xf0\x00\x08\x00\x01" + b"\xab" * 300,
                b"\x00" * 100, heartbeat + credit, b"\xff" + bytes(range(256)) * 4, credit,
                heartbeat]  # fmt: skip
    path = tmp_path / "hostile.pcap"
    wrpcap(str(path), tcp_packets(payloads))
    packets = sniff(offline=str(path), session=TCPSession)
    frames = list(stream_frames(packets))
    malformed = [f for f in frames if isinstance(f.payload, StreamMalformed)]
    assert malformed and "map" in malformed[0].payload.reason
    assert [f.payload.__class__.__name__ for f in frames if not f in malformed][:1] == ["Credit"]
    # resynchronised on the last Credit (a resync trusts a frame once the next header is in)
    assert [f.payload.__class__.__name__ for f in frames[-2:]] == ["Credit", "Heartbeat"]
    assert frames[-2].gap_before == 1 + 256 * 4
    notes = [n for f in frames for n in f.anomalies]
    assert any("frame_too_large" in n for n in notes) and any("resync" in n for n in notes)
    assert any(StreamSegment in p for p in packets)  # bytes that ended no frame, still shown
    for packet in packets:
        packet.summary()


def test_an_absurd_size_allocates_nothing(tmp_path):
    # 2**32 - 16 bytes announced, then a few kilobytes of garbage and a real frame
    credit = encode_record(make_record("Credit", subscription_id=1, credit=2))
    heartbeat = encode_record(make_record("Heartbeat"))
    payloads = [b"\xff\xff\xff\xf0\x00\x02\x00\x01" + b"\x11" * 1400 for _ in range(20)]
    payloads += [credit, heartbeat]
    path = tmp_path / "absurd.pcap"
    wrpcap(str(path), tcp_packets(payloads))
    tracemalloc.start()
    packets = sniff(offline=str(path), session=TCPSession)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 * 1024 * 1024
    assert list(stream_frames(packets))[-2].payload.credit == 2


def test_other_ports_are_bound_on_request(tmp_path):
    linktype, packets = worsen.read_pcap(worsen.CAPTURES / "rstream-heartbeat-3.10.pcap")
    path = worsen.write_pcap(tmp_path / "moved.pcap", linktype,
                             worsen.rewrite_port(packets, 5552, 5999))  # fmt: skip
    assert 5999 not in BOUND_PORTS
    assert not list(stream_frames(sniff(offline=str(path), session=TCPSession)))
    bind_port(5999)
    try:
        frames = list(stream_frames(sniff(offline=str(path), session=TCPSession)))
        assert len(frames) == sum(map(len, reference_frames(worsen.CAPTURES /
                                                            "rstream-heartbeat-3.10.pcap").values()))  # fmt: skip
    finally:
        unbind_port(5999)


def mss_copy(path: Path, out: Path) -> Path:
    """The capture as a real network carries it: segments of at most 1448 bytes (the
    benchmark's own re-cut, which does not use streamdissect)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from make_large import recut

    _, packets = worsen.read_pcap(path)
    clients = {(t.flow[0], t.flow[1]) for _, d, _ in packets
               if (t := worsen.tcp_of(d)) and t.flow[3] == 5552}  # fmt: skip
    recut(path, out, 5552, clients)
    return out


def test_frames_larger_than_a_segment_come_whole(big_capture, tmp_path):
    """Publish frames of 400 kB and Deliver chunks above 64 KiB, over hundreds of segments
    of a real capture: each comes whole, in the packet that ends it, as the core frames it."""
    from conftest import MESSAGE_SIZE, MESSAGES

    from streamdissect.engine.dissect import Dissector, FrameEvent

    path = mss_copy(big_capture, tmp_path / "mss.pcap")
    events = Dissector(deliver_keep_limit=None).run(str(path))
    core = [e.record for e in events if isinstance(e, FrameEvent)]
    frames = list(stream_frames(sniff(offline=str(path), session=TCPSession)))
    assert [f.to_record() for f in frames] == core
    big_publishes = [f for f in frames if Publish in f and f.size > MESSAGE_SIZE]
    assert sum(len(f[Publish].messages) for f in big_publishes) == MESSAGES
    assert max(f.size for f in big_publishes) > 65536
    big_delivers = [f for f in frames if Deliver in f and f.size > 64 * 1024]
    assert big_delivers and all(f.to_record().crc_ok for f in big_delivers)
    assert all(len(f[Deliver].chunk_payload) == f[Deliver].data_length for f in big_delivers)


def test_what_scapy_cannot_read_of_a_64k_segment_is_missing_not_zero(big_capture):
    """scapy reads at most 65535 bytes of a packet: a full loopback segment (65,549 bytes
    with its Ethernet header) loses 14. Those frames are truncated and said so."""
    streams = wire_streams(big_capture)
    packets, frames = sniffed(big_capture)
    cut = [f for found in frames.values() for f in found if isinstance(f.payload, StreamTruncated)]
    assert cut, "no 64 KiB loopback segment in the capture"
    notes = [n for found in frames.values() for f in found for n in f.anomalies]
    assert any(n.startswith("not_captured len 14:") for n in notes)
    # said once, on the packet: not again as the core's run of cut segments
    assert not any(n.startswith("not_captured at ") for n in notes)
    for key, found in frames.items():
        for frame in found:
            data = frame.frame_bytes()
            assert streams[key][frame.stream_offset : frame.stream_offset + len(data)] == data
    assert all("[truncated]" in p.summary() for p in packets if StreamFrame in p
               and any(f in cut for f in stream_frames([p])))  # fmt: skip


def test_ipv6_connections_give_the_same_frames(tmp_path):
    """A broker reached over IPv6: the same frames."""
    original = worsen.CAPTURES / "rstream-consume-credit-3.10.pcap"
    linktype, packets = worsen.read_pcap(original)
    v6 = [(ts, worsen.as_ipv6(data, ()), n) for ts, data, n in packets]
    path = worsen.write_pcap(tmp_path / "v6.pcap", linktype, v6)
    frames = list(stream_frames(sniff(offline=str(path), session=TCPSession)))
    expected = [f.to_record() for f in stream_frames(sniff(offline=str(original),
                                                            session=TCPSession))]  # fmt: skip
    assert [f.to_record() for f in frames] == expected and len(expected) == 103


def test_anomalies_kept_for_one_frame_are_bounded(tmp_path):
    """The same segment retransmitted 500 times before the next frame: 64 notes, then a
    count, not 500 notes."""
    credit = encode_record(make_record("Credit", subscription_id=1, credit=2))
    packets = tcp_packets([credit])
    again = packets[-1]
    packets += [again.copy() for _ in range(500)]
    after = tcp_packets([credit, credit])[-1]
    packets.append(after)
    path = tmp_path / "retransmitted.pcap"
    wrpcap(str(path), packets)
    frames = list(stream_frames(sniff(offline=str(path), session=TCPSession)))
    assert len(frames) == 2
    notes = frames[1].anomalies
    assert len(notes) == 65 and notes[-1] == "and more anomalies: 436"
    assert all(n.startswith("retransmission") for n in notes[:-1])


def test_ipv6_extension_headers_leave_the_same_segment():
    """(scapy's TCPSession itself cannot follow IPv6 with extension headers: its connection
    key reads the addresses from the layer under TCP. The segment is read right all the same,
    for whoever hands such packets over.)"""
    from streamdissect.scapy.reassembly import segment_of

    _, packets = worsen.read_pcap(worsen.CAPTURES / "rstream-consume-credit-3.10.pcap")
    data = packets[worsen.data_segments(packets)[0]][1]
    plain = segment_of(Ether(worsen.as_ipv6(data, ())))
    extended = segment_of(Ether(worsen.as_ipv6(data, (0, 60))))
    assert plain[1] and extended[1] == plain[1]
    assert extended[0][4:7] == plain[0][4:7] and extended[0][8] == plain[0][8] == len(plain[1])


# --- frames released after a lost segment come out on a packet of their own direction --------

PORTS = (5552, 5553)


def reference_spans(path: Path) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """(stream offset, frame length) of every frame of `streamdissect frames` (the core, which
    the corpus' truth files hold), per connection and direction."""
    out = subprocess.run(
        [sys.executable, "-m", "streamdissect", "frames", "--format", "jsonl", "--port", "5552",
         "--port", "5553", "--no-heuristic", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    spans: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for line in out.splitlines():
        row = json.loads(line)
        if row["command"] != "Anomaly":
            spans[(row["connection"], row["direction"])].append((row["stream_offset"],
                                                                 4 + row["size"]))  # fmt: skip
    return spans


def own_direction(packet: Any) -> tuple[str, str]:
    """The (connection, direction) a packet's own addresses and ports say."""
    ip, tcp = packet[IP], packet[TCP]
    if tcp.dport in PORTS:
        return f"{ip.src}:{tcp.sport}-{ip.dst}:{tcp.dport}", "c2s"
    return f"{ip.dst}:{tcp.dport}-{ip.src}:{tcp.sport}", "s2c"


def lost_bytes(packets: list, victim: int) -> tuple[tuple[str, str], int, int]:
    """The direction and the [start, end) stream offsets of the victim segment's bytes."""
    tcp = worsen.tcp_of(packets[victim][1])
    syn = next(t.seq for _, d, _ in packets
               if (t := worsen.tcp_of(d)) and t.flow == tcp.flow and t.flags & 0x02)  # fmt: skip
    src, sport, dst, dport = tcp.flow
    ends = [".".join(map(str, src)) + f":{sport}", ".".join(map(str, dst)) + f":{dport}"]
    client = dport in PORTS
    key = ("-".join(ends if client else ends[::-1]), "c2s" if client else "s2c")
    start = (tcp.seq - syn - 1) & 0xFFFFFFFF
    return key, start, start + tcp.payload_len


def acked_past(packets: list, victim: int) -> bool:
    """Does a later packet of the peer acknowledge past the victim's bytes (the capture
    missed them, the peer did not)?"""
    tcp = worsen.tcp_of(packets[victim][1])
    end = (tcp.seq + tcp.payload_len) & 0xFFFFFFFF
    back = (tcp.flow[2], tcp.flow[3], tcp.flow[0], tcp.flow[1])
    for _, data, _ in packets[victim + 1 :]:
        peer = worsen.tcp_of(data)
        if peer and peer.flow == back and peer.flags & 0x10:
            ack = struct.unpack_from(">I", data, 14 + (data[14] & 15) * 4 + 8)[0]
            if 0 < (ack - end) & 0xFFFFFFFF < 1 << 31 or ack == end:
                return True
    return False


def check_released_frames(original: Path, cut: Path, key: tuple[str, str], start: int,
                          end: int) -> list[StreamFrame]:  # fmt: skip
    """Every frame on a packet of its own direction, each direction's frames in stream order
    with the wire's bytes, every frame of the reference that does not touch the lost bytes
    there, and the gap on the first frame after them. The frames of `key`, in order."""
    streams = wire_streams(original)
    reference = reference_spans(original)
    packets = sniff(offline=str(cut), session=TCPSession)
    got: dict[tuple[str, str], list[StreamFrame]] = defaultdict(list)
    for packet in packets:
        for frame in stream_frames([packet]):
            side = own_direction(packet)
            assert frame.sender == SENDERS[side[1]], (packet.summary(), frame.sender)
            got[side].append(frame)
    for side, frames in got.items():
        offsets = [f.stream_offset for f in frames]
        assert offsets == sorted(set(offsets)), side  # stream order, each frame once
        for frame in frames:
            data = frame.frame_bytes()
            assert streams[side][frame.stream_offset : frame.stream_offset + len(data)] == data
        whole = [(f.stream_offset, len(f.frame_bytes())) for f in frames
                 if not isinstance(f.payload, StreamTruncated)]  # fmt: skip
        untouched = [(o, n) for o, n in reference[side]
                     if side != key or o + n <= start or o >= end]  # fmt: skip
        assert set(untouched) <= {(f.stream_offset, f.size + 4) for f in frames}, side
        if side != key:
            assert whole == untouched, side
    mine = got[key]
    after = [n for n, f in enumerate(mine) if f.stream_offset + f.size + 4 > start]
    assert after, "no frame after the lost bytes"
    n = after[0]
    first = mine[n]  # the first frame not wholly before the lost bytes: the gap is said there
    assert any(note.startswith("gap") for note in first.anomalies), first.anomalies
    if first.stream_offset >= start:  # (else it is the frame the bytes were lost from)
        previous = mine[n - 1].stream_offset + mine[n - 1].size + 4 if n else 0
        assert first.gap_before == first.stream_offset - previous > 0
    return mine


SENDERS = {"c2s": "client", "s2c": "server"}
RELEASE_CAPTURES = ["rstream-publish-confirm-3.10.pcap", "rstream-consume-credit-3.10.pcap",
                    "rbfly-publish-consume-3.10.pcap"]  # fmt: skip


def victims(packets: list, client: bool, spans: dict, most: int = 6) -> list[int]:
    """Data segments of one side, spread over the capture, that the peer acknowledges past
    and that a frame of their direction follows (so it waits behind the hole); past each
    flow's first three (TCPSession shows no SYN: a flow starts at its first segment)."""
    seen: dict[tuple, int] = defaultdict(int)
    mine = []
    for i in worsen.data_segments(packets):
        flow = worsen.tcp_of(packets[i][1]).flow
        seen[flow] += 1
        if (flow[3] in PORTS) == client and seen[flow] > 3 and acked_past(packets, i):
            key, _, end = lost_bytes(packets, i)
            if any(offset >= end for offset, _ in spans[key]):
                mine.append(i)
    return mine[:: max(1, len(mine) // most)][:most]


@pytest.mark.parametrize("side", ["server", "client"])
@pytest.mark.parametrize("name", RELEASE_CAPTURES)
def test_frames_after_a_lost_segment_come_out_on_their_own_direction(tmp_path, name, side):
    """One segment removed (the peer acknowledges past it, so the capture lost it, not the
    peer): the frames that waited behind the hole come out on packets of their own
    direction (addresses and ports), in stream order, with the wire's bytes, the gap on the
    first of them."""
    original = worsen.CAPTURES / name
    linktype, packets = worsen.read_pcap(original)
    chosen = victims(packets, client=side == "client", spans=reference_spans(original))
    assert chosen
    for victim in chosen:
        key, start, end = lost_bytes(packets, victim)
        cut = worsen.write_pcap(tmp_path / f"cut{victim}.pcap", linktype,
                                worsen.drop(packets, {victim}))  # fmt: skip
        check_released_frames(original, cut, key, start, end)


def with_tail_resent(path: Path, out: Path) -> Path:
    """The capture with the segment that ends its last large Deliver sent twice, 50 ms
    apart, as Linux's tail loss probe does when the peer is slow to acknowledge (CI's big
    capture once had one: the test chose the resent copy as the segment to lose)."""
    linktype, packets = worsen.read_pcap(path)
    key, (offset, length) = last_big_deliver(reference_spans(path))
    last = next(i for i in worsen.data_segments(packets)
                if (found := lost_bytes(packets, i))[0] == key and found[1] < offset + length <= found[2])  # fmt: skip
    ts_ns, data, wirelen = packets[last]
    return worsen.write_pcap(out, linktype, [*packets[: last + 1], (ts_ns + 50_000_000, data, wirelen),
                                             *packets[last + 1 :]])  # fmt: skip


def last_big_deliver(reference: dict) -> tuple[tuple[str, str], tuple[int, int]]:
    """The last Deliver above 64 KiB: (direction, (offset, length))."""
    return max(((k, span) for k, spans in reference.items() if k[1] == "s2c"
                for span in spans if span[1] > 64 * 1024),
               key=lambda item: item[1][0])  # fmt: skip


@pytest.mark.parametrize("tail", ["as_recorded", "resent"])
def test_a_frame_behind_a_hole_at_the_end_of_the_capture_still_comes_out(big_capture, tmp_path, tail):
    """A 64 KB Deliver of a real capture (re-cut to 1448-byte segments) loses its next to
    last segment, and the capture ends with its last one: nothing releases the hole but the
    end of the capture. The Deliver still comes out when sniff ends, on a server packet,
    with the bytes before the hole, and the gap said. Also with the last segment resent."""
    if tail == "resent":
        big_capture = with_tail_resent(big_capture, tmp_path / "resent.pcap")
    path = mss_copy(big_capture, tmp_path / "mss.pcap")
    linktype, packets = worsen.read_pcap(path)
    reference = reference_spans(path)
    segments = [i for i in worsen.data_segments(packets)
                if worsen.tcp_of(packets[i][1]).flow[1] == 5552]  # fmt: skip
    key, (offset, length) = last_big_deliver(reference)
    # The capture is cut after the packet that brings the frame's last byte first; a real
    # capture may carry bytes twice (a tail loss probe resends the last segment), so the
    # victim is a segment no other packet up to there repeats: its bytes are truly lost.
    inside = []
    for i in segments:
        seg_key, start, end = lost_bytes(packets, i)
        if seg_key == key and offset < start and end <= offset + length:
            inside.append((i, start, end))
    last = min((s for s in inside if s[2] == offset + length), key=lambda item: item[0])
    before = [s for s in inside if s[0] < last[0]]
    victim, start, end = max((s for s in before if s[2] < last[1]
                              and not any(o[0] != s[0] and o[1] < s[2] and s[1] < o[2] for o in before)),
                             key=lambda item: item[1])  # fmt: skip
    ended = worsen.write_pcap(tmp_path / "ended.pcap", linktype, packets[: last[0] + 1])
    cut = worsen.write_pcap(tmp_path / "cut.pcap", linktype,
                            worsen.drop(packets[: last[0] + 1], {victim}))  # fmt: skip
    packets_out = sniff(offline=str(cut), session=TCPSession)
    frames = [(p, f) for p in packets_out for f in stream_frames([p])]
    carrier, deliver = next((p, f) for p, f in frames if f.stream_offset == offset
                            and f.sender == "server" and own_direction(p) == key)  # fmt: skip
    assert deliver.key == 0x0008 and deliver.size + 4 == length
    assert isinstance(deliver.payload, StreamTruncated)  # (its bytes after the hole are lost)
    data = deliver.frame_bytes()
    assert 0 < start - offset <= len(data) and wire_streams(path)[key][offset : offset + len(data)] == data
    assert any(note.startswith("gap") for note in deliver.anomalies), deliver.anomalies
    assert packets_out[-1] is carrier  # (it came out when the capture ended)
    check_released_frames(ended, cut, key, start, end)
