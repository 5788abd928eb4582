"""Made-worse copies of real captures, for tests: a pcap reader/writer of its own (it does
not use streamdissect, so a reader bug cannot hide itself) and packet-list transforms.

A packet is (ts_ns, data, orig_len) of an Ethernet + IPv4 capture (tcpdump -i lo).
"""

from __future__ import annotations

import gzip
import shutil
import struct
import subprocess
from pathlib import Path
from typing import NamedTuple

Packet = tuple[int, bytes, int]
ETHERNET = 1


def read_pcap(path: str | Path) -> tuple[int, list[Packet]]:
    """(link type, packets) of a classic little- or big-endian µs/ns pcap."""
    raw = Path(path).read_bytes()
    magic = raw[:4]
    order = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    frac_ns = 1 if magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d") else 1000
    linktype = struct.unpack_from(order + "I", raw, 20)[0]
    packets, pos = [], 24
    while pos + 16 <= len(raw):
        sec, frac, caplen, wirelen = struct.unpack_from(order + "IIII", raw, pos)
        packets.append((sec * 10**9 + frac * frac_ns, raw[pos + 16 : pos + 16 + caplen], wirelen))
        pos += 16 + caplen
    return linktype, packets


def pcap_bytes(
    linktype: int,
    packets: list[Packet],
    *,
    nanoseconds: bool = False,
    big_endian: bool = False,
    snaplen: int = 262144,
) -> bytes:
    order = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nanoseconds else 0xA1B2C3D4
    out = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for ts, data, wirelen in packets:
        sec, frac = divmod(ts, 10**9)
        out.append(
            struct.pack(
                order + "IIII", sec, frac if nanoseconds else frac // 1000, len(data), wirelen
            )
        )
        out.append(data)
    return b"".join(out)


def write_pcap(path: str | Path, linktype: int, packets: list[Packet], **options) -> Path:
    Path(path).write_bytes(pcap_bytes(linktype, packets, **options))
    return Path(path)


class Tcp(NamedTuple):
    """Where a packet's TCP segment is, for Ethernet + IPv4 frames."""

    flow: tuple[bytes, int, bytes, int]  # src, sport, dst, dport
    seq: int
    flags: int
    ip_at: int
    payload_at: int
    payload_len: int


def tcp_of(data: bytes) -> Tcp | None:
    if len(data) < 34 or data[12:14] != b"\x08\x00" or data[23] != 6:
        return None
    ihl = (data[14] & 15) * 4
    total = struct.unpack_from(">H", data, 16)[0]
    at = 14 + ihl
    sport, dport, seq = struct.unpack_from(">HHI", data, at)
    header = (data[at + 12] >> 4) * 4
    start = at + header
    return Tcp(
        (data[26:30], sport, data[30:34], dport), seq, data[at + 13], 14, start, 14 + total - start
    )


def eth_tcp(sport: int, dport: int, seq: int, ack: int, flags: int, payload: bytes) -> bytes:
    """An Ethernet + IPv4 frame from 127.0.0.1 to 127.0.0.2 carrying one TCP segment."""
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, 0x50, flags, 65535, 0, 0)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0x4000, 64, 6,
                     0, bytes([127, 0, 0, 1]), bytes([127, 0, 0, 2]))  # fmt: skip
    return b"\x00" * 12 + b"\x08\x00" + ip + tcp + payload


def data_segments(packets: list[Packet]) -> list[int]:
    """Indices of packets that carry TCP payload."""
    return [i for i, (_, d, _) in enumerate(packets) if (t := tcp_of(d)) and t.payload_len]


def reorder(packets: list[Packet], every: int = 3, within: int = 4) -> list[Packet]:
    """Swap every `every`-th data segment with the next data segment of its direction when
    that one follows within `within` packets, as networks reorder (timestamps stay with
    their slots so the file stays in time order)."""
    out = list(packets)
    by_flow: dict[tuple, list[int]] = {}
    for i in data_segments(packets):
        by_flow.setdefault(tcp_of(packets[i][1]).flow, []).append(i)
    for indices in by_flow.values():
        for n in range(0, len(indices) - 1, every):
            a, b = indices[n], indices[n + 1]
            if b - a > within:
                continue
            out[a], out[b] = (
                (out[a][0], packets[b][1], packets[b][2]),
                (out[b][0], packets[a][1], packets[a][2]),
            )
    return out


def duplicate(packets: list[Packet], every: int = 4, later: int = 2) -> list[Packet]:
    """Every `every`-th data segment is sent again `later` packets afterwards."""
    out = list(packets)
    for n, i in enumerate(reversed(data_segments(packets))):
        if n % every == 0:
            where = min(i + 1 + later, len(out))
            ts = out[where - 1][0]
            out.insert(where, (ts, packets[i][1], packets[i][2]))
    return out


def drop(packets: list[Packet], indices: set[int]) -> list[Packet]:
    return [p for i, p in enumerate(packets) if i not in indices]


def midstream(packets: list[Packet], skip: int) -> list[Packet]:
    """The capture starts late: the first `skip` packets are gone."""
    return packets[skip:]


def snaplen(packets: list[Packet], length: int) -> list[Packet]:
    return [(ts, data[:length], wirelen) for ts, data, wirelen in packets]


def to_pcapng(src: Path, dst: Path) -> Path:
    subprocess.run(["editcap", "-F", "pcapng", str(src), str(dst)], check=True, capture_output=True)
    return dst


def gzip_copy(src: Path, dst: Path) -> Path:
    with open(src, "rb") as fin, gzip.open(dst, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    return dst


# --- other link layers, rebuilt from Ethernet + IPv4 frames ---------------------------


def _ip_part(data: bytes) -> bytes:
    return data[14:]


def as_linux_sll(data: bytes) -> bytes:
    return struct.pack(">HHH8sH", 0, 772, 6, b"\x00" * 8, 0x0800) + _ip_part(data)


def as_linux_sll2(data: bytes) -> bytes:
    return struct.pack(">HHIHBB8s", 0x0800, 0, 1, 772, 0, 6, b"\x00" * 8) + _ip_part(data)


def as_null(data: bytes, big_endian: bool = False) -> bytes:
    return struct.pack(">I" if big_endian else "<I", 2) + _ip_part(data)


def as_loop(data: bytes) -> bytes:
    return struct.pack(">I", 2) + _ip_part(data)


def as_raw(data: bytes) -> bytes:
    return _ip_part(data)


def with_vlan_tags(data: bytes, tags: int) -> bytes:
    inner = b"".join(
        struct.pack(">HH", 0x88A8 if n == 0 and tags > 1 else 0x8100, 100 + n) for n in range(tags)
    )
    return data[:12] + inner + data[12:]


def as_ipv6(data: bytes, extensions: tuple[int, ...] = (0, 60)) -> bytes:
    """Ethernet + IPv6 (with the given extension headers) carrying the same TCP segment."""
    ihl = (data[14] & 15) * 4
    total = struct.unpack_from(">H", data, 16)[0]
    tcp = data[14 + ihl : 14 + total]
    src = b"\x20\x01\x0d\xb8" + b"\x00" * 11 + data[29:30]
    dst = b"\x20\x01\x0d\xb8" + b"\x00" * 11 + data[33:34]
    chain, next_headers = b"", list(extensions) + [6]
    for n, ext in enumerate(extensions):
        if ext == 44:  # fragment header of an unfragmented packet (offset 0, M=0)
            chain += struct.pack(">BBHI", next_headers[n + 1], 0, 0, 1)
        else:  # 8-byte hop-by-hop / routing / destination options with PadN
            chain += bytes([next_headers[n + 1], 0, 1, 4, 0, 0, 0, 0])
    payload = chain + tcp
    header = struct.pack(">IHBB16s16s", 6 << 28, len(payload), next_headers[0], 64, src, dst)
    return data[:12] + b"\x86\xdd" + header + payload


CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def corpus_captures() -> list[Path]:
    """The real captures shipped in captures/ (each beside its truth file:
    test_framing_corpus checks that)."""
    return sorted(CAPTURES.glob("*.pcap"))


def corpus_truths() -> list[Path]:
    """The corpus's truth files: what the clients that made the captures saw."""
    return sorted(CAPTURES.glob("*.truth.json"))


def real_capture() -> Path:
    """A real capture of real traffic to make worse: the corpus's largest."""
    found = [p for p in corpus_captures() if p.exists()]
    assert found, f"no real captures in {CAPTURES}"
    return max(found, key=lambda p: p.stat().st_size)


def rewrite_port(packets: list[Packet], old: int, new: int) -> list[Packet]:
    """Move a service to another TCP port (checksums are left stale, as offload does)."""
    out = []
    for ts, data, wirelen in packets:
        t = tcp_of(data)
        if t:
            at = 14 + (data[14] & 15) * 4
            sport, dport = struct.unpack_from(">HH", data, at)
            patched = bytearray(data)
            struct.pack_into(
                ">HH", patched, at, new if sport == old else sport, new if dport == old else dport
            )
            data = bytes(patched)
        out.append((ts, data, wirelen))
    return out


# --- pcapng, written here (no editcap), with what real writers do now and then -------------


class Interface(NamedTuple):
    """A pcapng interface: link type, if_tsresol byte (6: µs, 9: ns, 0x94: 2^-20 s...),
    if_tsoffset in seconds."""

    linktype: int = ETHERNET
    tsresol: int = 6
    tsoffset: int = 0


def _units(ts_ns: int, iface: Interface) -> int:
    """A time as an interface's units (exact for the resolutions the tests use)."""
    ns = ts_ns - iface.tsoffset * 10**9
    exponent = iface.tsresol & 0x7F
    if iface.tsresol & 0x80:
        return (ns << exponent) // 10**9
    return ns * 10**exponent // 10**9


def _block(order: str, block_type: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    return struct.pack(order + "II", block_type, len(body) + 12) + body + struct.pack(
        order + "I", len(body) + 12)


def pcapng_section(interfaces: list[Interface], *, big_endian: bool = False) -> tuple[str, bytes]:
    """(byte order, a section header block and the interfaces' description blocks)."""
    order = ">" if big_endian else "<"
    out = [_block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1))]
    for iface in interfaces:
        options = struct.pack(order + "HH", 9, 1) + bytes((iface.tsresol,)) + b"\x00" * 3
        if iface.tsoffset:
            options += struct.pack(order + "HHq", 14, 8, iface.tsoffset)
        options += struct.pack(order + "HH", 0, 0)
        out.append(_block(order, 1, struct.pack(order + "HHI", iface.linktype, 0, 0) + options))
    return order, b"".join(out)


def pcapng_packet(order: str, packet: Packet, interfaces: list[Interface], number: int = 0,
                  kind: str = "epb") -> bytes:  # fmt: skip
    """A packet as an enhanced (epb), obsolete (opb) or simple (spb: interface 0, no time)
    packet block on interface `number`."""
    ts, data, wirelen = packet
    units = _units(ts, interfaces[number])
    hi, lo = units >> 32, units & 0xFFFFFFFF
    if kind == "spb":
        return _block(order, 3, struct.pack(order + "I", wirelen) + data)
    if kind == "opb":
        return _block(order, 2, struct.pack(order + "HHIIII", number, 0, hi, lo, len(data),
                                            wirelen) + data)  # fmt: skip
    comment = struct.pack(order + "HH", 1, 4) + b"note" + struct.pack(order + "HH", 0, 0)
    return _block(order, 6, struct.pack(order + "IIIII", number, hi, lo, len(data), wirelen)
                  + data + (comment if number % 2 else b""))  # fmt: skip


def pcapng_bytes(packets: list[Packet], interfaces: list[Interface] | None = None,
                 choose=lambda k: (0, "epb"), *, big_endian: bool = False) -> bytes:  # fmt: skip
    """One section; packet k goes on interface and block kind choose(k); a packet's bytes
    are taken as they are (make them fit the interface's link type first)."""
    interfaces = interfaces or [Interface()]
    order, head = pcapng_section(interfaces, big_endian=big_endian)
    return head + b"".join(pcapng_packet(order, p, interfaces, *choose(k))
                           for k, p in enumerate(packets))  # fmt: skip


def write_pcapng(path: str | Path, packets: list[Packet], **options) -> Path:
    Path(path).write_bytes(pcapng_bytes(packets, **options))
    return Path(path)


def pieces(path: Path, folder: Path, count: int) -> list[Path]:
    """A capture cut into `count` pcap files of about equal packet counts, as a rotated
    set (tcpdump -C/-G) has it."""
    linktype, packets = read_pcap(path)
    size = -(-len(packets) // count)
    return [write_pcap(folder / f"{path.stem}-{k}.pcap", linktype, packets[k * size:(k + 1) * size])
            for k in range(count) if packets[k * size:(k + 1) * size]]  # fmt: skip
