"""Hostile inputs end to end: each gives a clear error or an anomaly/malformed record, the
rest of the capture is still dissected, and memory stays bounded. Limits a user can hit
(frame size, out-of-order buffer, decompression) are anomalies, never silence."""

from __future__ import annotations

import gzip
import json
import struct
import tracemalloc
import zlib
from pathlib import Path

import pytest
import worsen
from frame_rows import frame_rows

from streamdissect.analysis import analyze_events
from streamdissect.capture import CaptureError
from streamdissect.cli import main
from streamdissect.cli.frames import jsonl_writer
from streamdissect.engine.dissect import Anomaly, Dissector
from streamdissect.protocols.stream import (
    Malformed,
    MalformedEntry,
    decode_amqp_message,
    decode_frame,
    encode_record,
    make_record,
)
from streamdissect.protocols.stream.framing import DELIVER_HEAD, StreamFramer

ENGINES = ["auto", "stream"] if "engine" in Dissector.__init__.__code__.co_varnames else [None]


def run(path: Path, engine: str | None = None, **options) -> tuple[list[tuple], list[Anomaly]]:
    if engine is not None:
        options["engine"] = engine
    return frame_rows(Dissector(**options).run(str(path)))


def data_packets(packets: list) -> list[int]:
    return worsen.data_segments(packets)


def patched(packets: list, index: int, at: int, value: bytes) -> list:
    ts, data, wirelen = packets[index]
    data = data[:at] + value + data[at + len(value) :]
    return packets[:index] + [(ts, data, wirelen)] + packets[index + 1 :]


def frames_before(frames: list[tuple], original: list[tuple], cut_offsets: dict) -> None:
    """Every original frame that ends before the damage (per direction) is still there."""
    got = set(frames)
    for frame in original:
        limit = cut_offsets.get((frame[0], frame[1]))
        record = json.loads(frame[3])
        if limit is None or frame[2] + 4 + record["size"] <= limit:
            assert frame in got, frame


# --- capture files ----------------------------------------------------------------------


def pcap_file(tmp_path: Path, linktype: int, packets: list, **options) -> Path:
    return worsen.write_pcap(tmp_path / "hostile.pcap", linktype, packets, **options)


@pytest.mark.parametrize("engine", ENGINES)
def test_file_header_snaplen_2_31_changes_nothing(real, real_frames, tmp_path, engine):
    (_, linktype, packets), original = real, real_frames
    frames, anomalies = run(pcap_file(tmp_path, linktype, packets, snaplen=2**31), engine)
    assert frames == original and anomalies == []


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("caplen", [0x80000000, 0xFFFFFFFF, 0x7FFFFFFF, 300 * 1024])
def test_negative_or_absurd_record_length_mid_file(real, real_frames, tmp_path, engine, caplen):
    """The record header of packet n lies: packets before it are dissected, the file stops
    there with bad_record, and the connections still end cleanly (truncated/gap)."""
    (_, linktype, packets), original = real, real_frames
    n = len(packets) // 2
    content = bytearray(worsen.pcap_bytes(linktype, packets))
    pos = 24 + sum(16 + len(d) for _, d, _ in packets[:n])
    struct.pack_into("<I", content, pos + 8, caplen)
    path = tmp_path / "lying.pcap"
    path.write_bytes(bytes(content))
    frames, anomalies = run(path, engine)
    assert [a.kind for a in anomalies if a.connection is None] == ["bad_record"]
    assert 0 < len(frames) < len(original)
    assert set(frames) <= set(original)


@pytest.mark.parametrize("engine", ENGINES)
def test_record_length_beyond_the_end_of_the_file(real, real_frames, tmp_path, engine):
    (_, linktype, packets), original = real, real_frames
    content = worsen.pcap_bytes(linktype, packets) + struct.pack("<IIII", 1, 0, 5000, 5000)
    path = tmp_path / "beyond.pcap"
    path.write_bytes(content + b"\x00" * 100)
    frames, anomalies = run(path, engine)
    assert frames == original
    assert [a.kind for a in anomalies] == ["truncated_file"]


def _pcapng(linktype: int, packets: list, extra: dict[int, bytes]) -> bytes:
    def block(block_type: int, body: bytes, length: int | None = None) -> bytes:
        body += b"\x00" * (-len(body) % 4)
        size = 12 + len(body) if length is None else length
        return struct.pack("<II", block_type, size) + body + struct.pack("<I", size)

    out = [
        block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)),
        block(1, struct.pack("<HHI", linktype, 0, 0)),
    ]
    for i, (ts, data, wirelen) in enumerate(packets):
        out.append(extra.get(i, b""))
        units = ts // 1000
        out.append(block(6, struct.pack("<IIIII", 0, units >> 32, units & 0xFFFFFFFF,
                                        len(data), wirelen) + data))  # fmt: skip
    return b"".join(out)


def test_pcapng_unknown_blocks_everywhere_are_skipped(real, real_frames, tmp_path):
    (_, linktype, packets), original = real, real_frames
    junk = {
        i: struct.pack("<II", 0x0BAD0000 + i, 20) + b"unknown!" + struct.pack("<I", 20)
        for i in range(0, len(packets), 3)
    }
    path = tmp_path / "x.pcapng"
    path.write_bytes(_pcapng(linktype, packets, junk))
    frames, anomalies = run(path)
    assert frames == original and anomalies == []


@pytest.mark.parametrize("length", [13, 8, 0, 0xFFFFFFFF])
def test_pcapng_block_with_a_bad_length_mid_file(real, real_frames, tmp_path, length):
    (_, linktype, packets), original = real, real_frames
    n = len(packets) // 2
    bad = struct.pack("<II", 0x0BAD, length) + b"\x00" * 16
    path = tmp_path / "x.pcapng"
    path.write_bytes(_pcapng(linktype, packets, {n: bad}))
    frames, anomalies = run(path)
    assert anomalies[0].kind in ("bad_block", "truncated_file") and anomalies[0].connection is None
    assert 0 < len(frames) < len(original) and set(frames) <= set(original)


def test_not_a_capture_is_a_clear_error(tmp_path):
    path = tmp_path / "x.pcap"
    path.write_bytes(gzip.compress(b"\x00" * 1000))
    with pytest.raises(CaptureError, match="not a pcap or pcapng"):
        Dissector().run(str(path))


# --- link, IP and TCP headers -------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    "what, at, value, kind",
    [
        ("IPv4 IHL 4", 14, b"\x44", "bad_ip_header"),
        ("IPv4 IHL 0", 14, b"\x40", "bad_ip_header"),
        ("TCP data offset 4", 14 + 20 + 12, b"\x40", "bad_tcp_header"),
        ("TCP data offset 0", 14 + 20 + 12, b"\x00", "bad_tcp_header"),
    ],
)
def test_bad_ip_or_tcp_header_is_an_anomaly_and_the_rest_goes_on(
    real, real_frames, tmp_path, engine, what, at, value, kind
):
    (_, linktype, packets), original = real, real_frames
    n = data_packets(packets)[len(data_packets(packets)) // 2]
    frames, anomalies = run(pcap_file(tmp_path, linktype, patched(packets, n, at, value)), engine)
    bad = [a for a in anomalies if a.kind == kind]
    assert len(bad) == 1 and bad[0].connection is None, what
    # the packet's bytes are a hole: a gap in its direction, then framing resumes
    assert "gap" in {a.kind for a in anomalies}
    later = [f for f in frames if f not in set(original)]
    assert len(frames) >= len(original) - 3 and not later


@pytest.mark.parametrize("engine", ENGINES)
def test_ipv6_extension_header_loop_is_bounded(real, real_frames, tmp_path, engine):
    (_, linktype, packets), original = real, real_frames
    looping = worsen.as_ipv6(packets[0][1], (60,) * 50)  # 50 destination-options headers
    hostile = packets[:5] + [(packets[4][0], looping, len(looping))] + packets[5:]
    frames, anomalies = run(pcap_file(tmp_path, linktype, hostile), engine)
    assert frames == original
    assert [a.kind for a in anomalies] == ["bad_ip_header"]
    assert "extension headers" in anomalies[0].detail


# --- frames -----------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_frame_claiming_0xffffffff_bytes(real, real_frames, tmp_path, engine, capsys):
    """Resync after it, nothing buffered for it, and a frame_too_large row in jsonl."""
    (_, linktype, packets), original = real, real_frames
    n = data_packets(packets)[len(data_packets(packets)) // 2]
    tcp = worsen.tcp_of(packets[n][1])
    path = pcap_file(tmp_path, linktype, patched(packets, n, tcp.payload_at, b"\xff\xff\xff\xff"))
    frames, anomalies = run(path, engine)
    too_large = [a for a in anomalies if a.kind == "frame_too_large"]
    assert len(too_large) == 1 and too_large[0].length == 0xFFFFFFFF
    assert "resync" in {a.kind for a in anomalies}
    assert len(frames) >= len(original) - 2 and set(frames) <= set(original)
    assert main(["frames", str(path), "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert any(r["command"] == "Anomaly" and r["kind"] == "frame_too_large" for r in rows)


def test_deliver_chunk_header_claiming_more_than_its_bytes():
    data = struct.pack(">I", 5) + b"hello"

    def deliver(entries: int, records: int) -> bytes:
        header = struct.pack(">BBHIqQQIIIBHB", 0x50, 0, entries, records, 0, 0, 100,
                             zlib.crc32(data), len(data), 0, 0, 0, 0)  # fmt: skip
        body = b"\x01" + header + data
        return struct.pack(">IHH", len(body) + 4, 0x0008, 1) + body

    assert decode_frame(deliver(1, 1)).record_count == 1
    for entries, records in ((60000, 1), (3, 3), (1, 2**32 - 1)):
        record = decode_frame(deliver(entries, records))
        assert isinstance(record, Malformed) and "chunk header claims" in record.reason
    # through the framer: a malformed anomaly, and the next frame is still read
    events: list = []
    framer = StreamFramer(lambda *e: events.append(("frame", e[2])), lambda *a: events.append(a))
    heartbeat = encode_record(make_record("Heartbeat"))
    framer.data(memoryview(deliver(60000, 1) + heartbeat), 1)
    assert [e[0] for e in events] == ["malformed", "frame", "frame"]
    assert isinstance(events[1][1], Malformed) and events[2][1].command == "Heartbeat"


def _deliver_with(entry: bytes, records: int = 1) -> bytes:
    header = struct.pack(">BBHIqQQIIIBHB", 0x50, 0, 1, records, 0, 0, 100, zlib.crc32(entry),
                         len(entry), 0, 0, 0, 0)  # fmt: skip
    body = b"\x01" + header + entry
    return struct.pack(">IHH", len(body) + 4, 0x0008, 1) + body


@pytest.mark.parametrize("claimed", [10, 1 << 30])
def test_sub_batch_zip_bomb_is_bounded_and_named(claimed):
    """32 MiB of zeros in 32 KiB of gzip, claimed as 10 bytes (a lie) or 1 GiB (above the
    cap): a decompression_cap entry, with far less memory than the bomb."""
    bomb = gzip.compress(b"\x00" * (32 << 20))
    entry = struct.pack(">BHII", 0x80 | 1 << 4, 1, claimed, len(bomb)) + bomb
    record = decode_frame(_deliver_with(entry))
    tracemalloc.start()
    results = list(record.messages())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(results) == 1 and isinstance(results[0], MalformedEntry)
    assert results[0].kind == "decompression_cap"
    assert peak < 4 << 20


def nested_lists(depth: int) -> bytes:
    """list32 inside list32 ... around a null, every size honest."""
    heads = [struct.pack(">BII", 0xD0, 4 + 1 + 9 * level, 1) for level in range(depth)]
    return b"".join(reversed(heads)) + b"\x40"


def test_deeply_nested_amqp_values_do_not_recurse_without_bound():
    for depth in (33, 1000, 100_000):
        nested = b"\x00\x53\x77" + nested_lists(depth)
        message = decode_amqp_message(nested)
        assert message.error is not None and "deep" in message.error
        described = b"\x00\x53\x77" + b"\x00" * depth + b"\x40\x40"
        assert decode_amqp_message(described).error is not None
    # inside a Deliver: the record is fine, its message says what is wrong
    payload = b"\x00\x53\x77" + nested_lists(5000)
    record = decode_frame(_deliver_with(struct.pack(">I", len(payload)) + payload))
    (item,) = record.messages()
    assert "deep" in decode_amqp_message(item.data).error


# --- limits -------------------------------------------------------------------------------


class Collect:
    def __init__(self, **options) -> None:
        self.frames: list = []
        self.anomalies: list = []
        self.framer = StreamFramer(
            lambda o, t, r: self.frames.append((o, r)),
            lambda *a: self.anomalies.append(a),
            **options,
        )
        self.max_buffered = 0

    def feed(self, data: bytes, step: int) -> Collect:
        for i in range(0, len(data), step):
            self.framer.data(memoryview(data[i : i + step]), 1)
            held = sum(len(p) for p in self.framer.cur_parts) + len(self.framer.rbuf)
            self.max_buffered = max(self.max_buffered, held)
        return self


def big_publish(size: int) -> bytes:
    return encode_record(make_record("Publish", publisher_id=1, messages=[(1, None, b"m" * size)]))


def test_frame_above_the_negotiated_frame_max_is_an_anomaly_and_not_buffered():
    heartbeat = encode_record(make_record("Heartbeat"))
    data = heartbeat + big_publish(4 << 20) + heartbeat
    c = Collect()
    c.framer.negotiated_frame_max(1 << 20)
    c.feed(data, 65536)
    assert [a[0] for a in c.anomalies] == ["frame_too_large"]
    assert "negotiated frame max 1048576" in c.anomalies[0][4]
    commands = [(r.command, r.truncated) for _, r in c.frames]
    assert commands == [("Heartbeat", False), ("Publish", True), ("Heartbeat", False)]
    assert c.max_buffered <= DELIVER_HEAD + 65536  # never the frame's 4 MiB
    # the same frame before any Tune: within the 8 MiB default, kept whole, no anomaly
    c = Collect().feed(data, 65536)
    assert c.anomalies == [] and not c.frames[1][1].truncated


def test_explicit_max_frame_keeps_such_a_frame_whole_but_still_reports_it():
    c = Collect(max_frame=8 << 20, fixed_max_frame=True)
    c.framer.negotiated_frame_max(1 << 20)
    c.feed(big_publish(2 << 20), 65536)
    assert [a[0] for a in c.anomalies] == ["frame_too_large"]
    assert [r.truncated for _, r in c.frames] == [False]


def test_size_above_max_frame_is_frame_too_large_then_resync():
    heartbeat = encode_record(make_record("Heartbeat"))
    c = Collect(max_frame=1 << 20).feed(big_publish(2 << 20) + heartbeat * 3, 4096)
    assert [a[0] for a in c.anomalies][:2] == ["frame_too_large", "resync"]
    assert c.max_buffered <= (1 << 20) + 64


def test_out_of_order_cap_is_an_anomaly_in_jsonl_and_in_the_analyze_table(tmp_path):
    """A hole at the start of a direction, then more out-of-order data than the cap."""
    heartbeat = encode_record(make_record("Heartbeat"))
    packets, ts = [], 1_700_000_000 * 10**9
    packets.append((ts, worsen.eth_tcp(40000, 5552, 999, 0, 0x02, b""), 54))
    packets.append((ts + 1000, worsen.eth_tcp(5552, 40000, 4999, 1000, 0x12, b""), 54))
    seq = 1000 + 100  # 100 bytes never captured
    for i in range(40):
        chunk = heartbeat * 125  # 1000 bytes
        packets.append((ts + 2000 + i, worsen.eth_tcp(40000, 5552, seq, 5000, 0x18, chunk),
                        54 + len(chunk)))  # fmt: skip
        seq += len(chunk)
    path = worsen.write_pcap(tmp_path / "ooo.pcap", 1, packets)
    events = list(Dissector(ooo_cap=16 * 1024).run(str(path)))
    kinds = [e.kind for e in events if isinstance(e, Anomaly)]
    assert "ooo_cap" in kinds and "gap" in kinds
    lines: list[str] = []

    class Out:
        write = staticmethod(lines.append)

    write = jsonl_writer(Out, show_secrets=False, payloads=False)
    for event in events:
        write(event)
    rows = [json.loads(line) for line in lines]
    assert any(r["command"] == "Anomaly" and r["kind"] == "ooo_cap" for r in rows)
    table = analyze_events(iter(events)).anomalies
    assert "ooo_cap" in set(table["kind"])


def test_u64_ids_and_chunk_ids_beyond_int64_in_every_output(tmp_path, capsys):
    """Publishing ids and chunk ids are u64 on the wire: ids past 2**63 are kept exactly in
    JSON and in the pandas tables (UInt64 columns), a lag that no int64 holds is missing
    (<NA>) there, and the text report, which goes through pandas, does not fail."""
    from test_bulk_engine import _frame, frames_capture

    from streamdissect.analysis import analyze

    top = 2**64 - 1
    publish = _frame(0x0002, 1, struct.pack(">BiQI", 7, 1, top, 3) + b"abc")
    confirm = _frame(0x0003, 1, struct.pack(">BiQ", 7, 1, top))
    chunk = struct.pack(">BBHIqQQIIIBHB", 0x50, 0, 1, 1, 1_700_000_000_000, 1, 0, 0, 12, 0, 0,
                        0, 0)  # fmt: skip
    entry = struct.pack(">I", 8) + b"x" * 8
    deliver = _frame(0x0008, 2, struct.pack(">BQ", 0, top) + chunk + entry)  # committed 2**64-1
    path = frames_capture(tmp_path / "u64.pcap", [publish, confirm, deliver])
    for fmt in ("text", "json"):
        assert main(["analyze", "--format", fmt, str(path)]) == 0
        out = capsys.readouterr().out
        assert "Traceback" not in out
    report = json.loads(out)
    assert {row["lag"] for row in report["consumer_lag"]} == {top}  # (exact in JSON)
    a = analyze(str(path))
    assert str(a.publishes.dtypes["publishing_id"]) == "UInt64"
    assert set(a.publishes["publishing_id"]) == {top}
    deliveries = a.deliveries
    assert set(deliveries["committed_chunk_id"]) == {top}
    assert deliveries["lag"].isna().all()  # (2**64 - 1 - 0 does not fit an int64)
