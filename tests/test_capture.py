"""Capture reading: formats, byte orders, gzip, damaged and hostile files."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import pytest
import worsen

from streamdissect.capture import CaptureError, open_capture


def read_all(path: Path) -> tuple[list[tuple[int, int, bytes, int]], list[tuple]]:
    anomalies: list[tuple] = []
    packets = [
        (ts, lt, bytes(data), orig)
        for ts, lt, data, orig, _ in open_capture(str(path), lambda *a: anomalies.append(a))
    ]
    return packets, anomalies


def test_classic_pcap_gives_every_packet_with_ns_timestamps(real):
    path, linktype, expected = real
    packets, anomalies = read_all(path)
    assert anomalies == []
    assert [(ts, lt, d, o) for ts, lt, d, o in packets] == [
        (ts, linktype, d, o) for ts, d, o in expected
    ]


@pytest.mark.parametrize("nanoseconds", [False, True])
@pytest.mark.parametrize("big_endian", [False, True])
def test_both_magics_and_byte_orders(real, tmp_path, nanoseconds, big_endian):
    _, linktype, expected = real
    path = worsen.write_pcap(
        tmp_path / "x.pcap", linktype, expected, nanoseconds=nanoseconds, big_endian=big_endian
    )
    packets, anomalies = read_all(path)
    assert anomalies == []
    assert [p[2] for p in packets] == [d for _, d, _ in expected]
    assert [p[0] for p in packets] == [
        ts // 1000 * 1000 if not nanoseconds else ts for ts, _, _ in expected
    ]


def test_pcapng_and_gzip_copies_read_the_same(real, tmp_path):
    path, _, _ = real
    original, _ = read_all(path)
    ng = worsen.to_pcapng(path, tmp_path / "x.pcapng")
    for copy in (
        ng,
        worsen.gzip_copy(path, tmp_path / "x.bin"),
        worsen.gzip_copy(ng, tmp_path / "y.pcap"),
    ):  # names lie: magic decides
        packets, anomalies = read_all(copy)
        assert anomalies == []
        assert packets == original


# --- pcapng built by hand: interfaces, resolutions, block kinds -----------------------


def block(block_type: int, body: bytes, order: str = "<") -> bytes:
    body += b"\x00" * (-len(body) % 4)
    length = 12 + len(body)
    return struct.pack(order + "II", block_type, length) + body + struct.pack(order + "I", length)


def section(order: str = "<") -> bytes:
    return block(0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1), order)


def interface(linktype: int, tsresol: int | None, order: str = "<", snaplen: int = 0) -> bytes:
    options = b""
    if tsresol is not None:
        options = struct.pack(order + "HH", 9, 1) + bytes([tsresol, 0, 0, 0])
    options += struct.pack(order + "HH", 0, 0)
    return block(1, struct.pack(order + "HHI", linktype, 0, snaplen) + options, order)


def enhanced(iface: int, units: int, data: bytes, order: str = "<") -> bytes:
    return block(
        6,
        struct.pack(order + "IIIII", iface, units >> 32, units & 0xFFFFFFFF, len(data), len(data))
        + data,
        order,
    )


def test_pcapng_interfaces_resolutions_simple_blocks_and_unknown_blocks(real, tmp_path):
    _, _, expected = real
    a, b, c = (d for _, d, _ in expected[:3])
    content = (
        section()
        + interface(1, None)  # default: microseconds
        + interface(1, 9)  # nanoseconds
        + interface(1, 0x80 | 20)  # 2**-20 seconds
        + block(0x0BAD, b"not ours, skipped")
        + enhanced(0, 1_500_000, a)  # 1.5 s in µs
        + enhanced(1, 2_000_000_123, b)  # 2.000000123 s in ns
        + enhanced(2, 3 << 20, c)  # 3 s in 2**-20 units
        + block(3, struct.pack("<I", len(a)) + a)  # simple packet: interface 0, no time
        + section(">")
        + interface(1, 3, ">")
        + enhanced(0, 4_000, b, ">")  # ms, big-endian
    )
    path = tmp_path / "hand.pcapng"
    path.write_bytes(content)
    packets, anomalies = read_all(path)
    assert anomalies == []
    assert [(ts, d) for ts, _, d, _ in packets] == [
        (1_500_000_000, a),
        (2_000_000_123, b),
        (3_000_000_000, c),
        (3_000_000_000, a),
        (4_000_000_000, b),
    ]


# --- not a capture, truncated, hostile ----------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [b"", b"hi", b"hello, I am a text file\n" * 10, gzip.compress(b"GIF89a and so on" * 10)],
    # (named: the gzip header holds the time, and pytest-xdist's workers must collect alike)
    ids=["empty", "two-bytes", "text", "gzip-of-text"],
)
def test_not_a_capture_is_a_clear_error(tmp_path, content):
    path = tmp_path / "notes.pcap"
    path.write_bytes(content)
    with pytest.raises(CaptureError, match="not a"):
        open_capture(str(path))


def test_missing_file_is_a_capture_error(tmp_path):
    with pytest.raises(CaptureError, match="cannot open"):
        open_capture(str(tmp_path / "nope.pcap"))


@pytest.mark.parametrize("gz", [False, True])
def test_truncated_file_gives_packets_before_and_an_anomaly(real, tmp_path, gz):
    _, linktype, expected = real
    content = worsen.pcap_bytes(linktype, expected)
    cut = content[: len(content) - len(expected[-1][1]) // 2]  # mid last record
    if gz:
        cut = gzip.compress(cut)
    target = tmp_path / "cut.pcap"
    target.write_bytes(cut)
    packets, anomalies = read_all(target)
    assert len(packets) == len(expected) - 1
    assert [a[0] for a in anomalies] == ["truncated_file"]


def test_cut_gzip_stream_gives_what_was_decompressed(real, tmp_path):
    _, linktype, expected = real
    content = gzip.compress(worsen.pcap_bytes(linktype, expected))
    target = tmp_path / "cut.pcap.gz"
    target.write_bytes(content[: len(content) * 2 // 3])
    packets, anomalies = read_all(target)
    assert 0 < len(packets) < len(expected)
    assert [a[0] for a in anomalies] == ["truncated_file"]


def test_hostile_snaplen_in_file_header_is_ignored(real, tmp_path):
    _, linktype, expected = real
    path = worsen.write_pcap(tmp_path / "x.pcap", linktype, expected, snaplen=2**31)
    packets, anomalies = read_all(path)
    assert len(packets) == len(expected) and anomalies == []


@pytest.mark.parametrize("caplen", [2**31, 300 * 1024, 0xFFFFFFFF])
def test_absurd_record_length_stops_with_an_anomaly(real, tmp_path, caplen):
    _, linktype, expected = real
    good = worsen.pcap_bytes(linktype, expected[:3])
    bad = struct.pack("<IIII", 1, 0, caplen, caplen) + b"\x00" * 64
    path = tmp_path / "x.pcap"
    path.write_bytes(good + bad)
    packets, anomalies = read_all(path)
    assert len(packets) == 3
    assert [a[0] for a in anomalies] == ["bad_record"]


def test_record_length_beyond_the_file_is_truncation(real, tmp_path):
    _, linktype, expected = real
    good = worsen.pcap_bytes(linktype, expected[:3])
    path = tmp_path / "x.pcap"
    path.write_bytes(good + struct.pack("<IIII", 1, 0, 200_000, 200_000) + b"\x00" * 100)
    packets, anomalies = read_all(path)
    assert len(packets) == 3 and [a[0] for a in anomalies] == ["truncated_file"]


@pytest.mark.parametrize(
    "length, kind",
    [(30, "bad_block"), (8, "bad_block"), (1 << 30, "bad_block"), (4096, "truncated_file")],
)
def test_hostile_pcapng_block_lengths(real, tmp_path, length, kind):
    _, _, expected = real
    data = expected[0][1]
    good = section() + interface(1, None) + enhanced(0, 1, data)
    bad = struct.pack("<II", 0x0BAD, length) + b"\x00" * 64
    path = tmp_path / "x.pcapng"
    path.write_bytes(good + bad + enhanced(0, 2, data))
    packets, anomalies = read_all(path)
    assert len(packets) == 1
    assert anomalies[0][0] == kind


def test_huge_unknown_block_within_the_file_is_skipped_without_holding_it(real, tmp_path):
    _, _, expected = real
    data = expected[0][1]
    huge = 20 * 1024 * 1024  # above the block cap: skipped in chunks, never held
    content = (
        section() + interface(1, None) + block(0x0BAD, b"\x00" * (huge - 12)) + enhanced(0, 2, data)
    )
    path = tmp_path / "x.pcapng"
    path.write_bytes(content)
    packets, anomalies = read_all(path)
    assert [p[2] for p in packets] == [data]
    assert [a[0] for a in anomalies] == ["bad_block"]


def test_pcapng_packet_beyond_its_block_or_interface_is_skipped(real, tmp_path):
    _, _, expected = real
    data = expected[0][1]
    lying = block(6, struct.pack("<IIIII", 0, 0, 1, 5000, 5000) + data)
    no_iface = enhanced(7, 1, data)
    path = tmp_path / "x.pcapng"
    path.write_bytes(section() + interface(1, None) + lying + no_iface + enhanced(0, 3, data))
    packets, anomalies = read_all(path)
    assert len(packets) == 1
    assert [a[0] for a in anomalies] == ["bad_block", "bad_block"]
