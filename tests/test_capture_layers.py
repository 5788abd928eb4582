"""Link layers, IP and TCP headers: the same real TCP segments under every wrapping."""

from __future__ import annotations

import struct

import pytest
import worsen

from streamdissect.capture import PacketProblem, open_capture, tcp_segment
from streamdissect.capture.link import ETHERNET, IPV4, IPV6, LINUX_SLL, LINUX_SLL2, LOOP, NULL, RAW


@pytest.fixture(scope="module")
def frames() -> list[bytes]:
    linktype, packets = worsen.read_pcap(worsen.real_capture())
    assert linktype == ETHERNET
    return [d for _, d, _ in packets]


def summary(linktype: int, data: bytes) -> tuple:
    """What must survive any wrapping: ports, seq/ack, flags, payload and its wire length."""
    seg = tcp_segment(linktype, memoryview(data))
    assert seg is not None
    _, sport, _, dport, seq, ack, flags, payload, wire_len = seg
    return sport, dport, seq, ack, flags, bytes(payload), wire_len


WRAPPINGS = {
    "sll": (LINUX_SLL, worsen.as_linux_sll),
    "sll2": (LINUX_SLL2, worsen.as_linux_sll2),
    "null little-endian": (NULL, worsen.as_null),
    "null big-endian": (NULL, lambda d: worsen.as_null(d, big_endian=True)),
    "openbsd loop": (LOOP, worsen.as_loop),
    "raw 101": (RAW, worsen.as_raw),
    "ipv4 228": (IPV4, worsen.as_raw),
    "vlan": (ETHERNET, lambda d: worsen.with_vlan_tags(d, 1)),
    "qinq": (ETHERNET, lambda d: worsen.with_vlan_tags(d, 2)),
}


@pytest.mark.parametrize("name", WRAPPINGS)
def test_link_types_give_the_same_segments(frames, name, tmp_path):
    linktype, wrap = WRAPPINGS[name]
    wrapped = [wrap(d) for d in frames]
    # through a real file too, so the link type travels from the header
    path = worsen.write_pcap(
        tmp_path / "x.pcap", linktype, [(i, d, len(d)) for i, d in enumerate(wrapped)]
    )
    got = [summary(lt, bytes(data)) for _, lt, data, _, _ in open_capture(str(path))]
    assert got == [summary(ETHERNET, d) for d in frames]


@pytest.mark.parametrize("extensions", [(), (0,), (0, 60), (43, 44, 60)])
def test_ipv6_with_extension_headers(frames, extensions):
    for data in frames:
        v6 = worsen.as_ipv6(data, extensions)
        src, _, dst, _, *_ = tcp_segment(ETHERNET, memoryview(v6))
        assert len(src) == len(dst) == 16
        assert summary(ETHERNET, v6) == summary(ETHERNET, data)
        assert summary(IPV6, v6[14:]) == summary(ETHERNET, data)
        assert summary(RAW, v6[14:]) == summary(ETHERNET, data)


def test_ipv6_extension_chain_is_bounded(frames):
    looping = worsen.as_ipv6(frames[0], (60,) * 20)
    with pytest.raises(PacketProblem) as err:
        tcp_segment(ETHERNET, memoryview(looping))
    assert err.value.kind == "bad_ip_header"


def test_snaplen_keeps_the_wire_length(frames):
    data = max(frames, key=len)
    _, _, _, _, _, _, _, payload, wire_len = tcp_segment(ETHERNET, memoryview(data[:96]))
    assert len(payload) == 96 - 66 and wire_len == summary(ETHERNET, data)[-1]


def _patched(data: bytes, at: int, value: int) -> memoryview:
    out = bytearray(data)
    out[at] = value
    return memoryview(bytes(out))


def test_hostile_ip_and_tcp_headers_are_problems_not_crashes(frames):
    data = next(d for d in frames if len(d) > 80)
    for bad, kind in [
        (_patched(data, 14, 0x44), "bad_ip_header"),  # IHL 4
        (_patched(data, 14, 0x40), "bad_ip_header"),  # IHL 0
        (_patched(data, 14 + 20 + 12, 0x40), "bad_tcp_header"),  # data offset 4
        (_patched(data, 14 + 20 + 12, 0x00), "bad_tcp_header"),  # data offset 0
        (memoryview(data[:40]), "bad_tcp_header"),
    ]:
        with pytest.raises(PacketProblem) as err:
            tcp_segment(ETHERNET, bad)
        assert err.value.kind == kind


def test_ip_fragments_are_reported(frames):
    data = frames[3]
    later = bytearray(data)
    struct.pack_into(">H", later, 20, 0x0010)  # fragment offset 16 * 8
    first = bytearray(data)
    struct.pack_into(">H", first, 20, 0x2000)  # more fragments
    for bad in (later, first):
        with pytest.raises(PacketProblem) as err:
            tcp_segment(ETHERNET, memoryview(bytes(bad)))
        assert err.value.kind == "ip_fragment"


def test_non_tcp_and_non_ip_are_ignored(frames):
    udp = bytearray(frames[0])
    udp[23] = 17
    assert tcp_segment(ETHERNET, memoryview(bytes(udp))) is None
    arp = bytearray(frames[0])
    arp[12:14] = b"\x08\x06"
    assert tcp_segment(ETHERNET, memoryview(bytes(arp))) is None
    assert tcp_segment(LINUX_SLL, memoryview(b"\x00" * 10)) is None
