"""A probe's own session written as a pcap: each connection's bytes, as sent and received
(the plain text under TLS), in Ethernet/IP/TCP packets made up here with the real
addresses, ports and times: a three-way handshake, data segments, FINs at the end.
`streamdissect frames` reads the file like any capture."""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterable

from streamdissect.probe.wire import Wire

PCAP_HEADER = struct.Struct("<IHHiIII")
RECORD_HEADER = struct.Struct("<IIII")
NANOSECOND_MAGIC = 0xA1B23C4D
LINKTYPE_ETHERNET = 1
SNAPLEN = 262_144
MAX_SEGMENT = 65_000  # payload a packet: an IPv4 packet holds at most 65,535 bytes in all
SYN, FIN, ACK, PSH = 0x02, 0x01, 0x10, 0x08
CLIENT_ISN, SERVER_ISN = 1_000, 5_000
ETHERNET = struct.Struct(">6s6sH")
IPV4 = struct.Struct(">BBHHHBBH4s4s")
IPV6 = struct.Struct(">IHBB16s16s")
TCP = struct.Struct(">HHIIBBHHH")


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f">{len(data) // 2}H", data))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


class _Flow:
    """The packets of one connection, both directions, with their sequence numbers."""

    def __init__(self, wire: Wire) -> None:
        self.client = (ipaddress.ip_address(wire.client[0]), wire.client[1])
        self.server = (ipaddress.ip_address(wire.server[0]), wire.server[1])
        self.seq = {"c2s": CLIENT_ISN, "s2c": SERVER_ISN}
        self.ip_id = 0
        self.last_ns = 0  # times never go back within a connection (a clock step would)
        self.packets: list[tuple[int, bytes]] = []

    def packet(self, ts_ns: int, direction: str, flags: int, payload: bytes = b"") -> None:
        ts_ns = self.last_ns = max(ts_ns, self.last_ns)
        (src, sport), (dst, dport) = (
            (self.client, self.server) if direction == "c2s" else (self.server, self.client)
        )
        other = "s2c" if direction == "c2s" else "c2s"
        seq, ack = self.seq[direction], self.seq[other] if flags & ACK else 0
        self.seq[direction] = seq + len(payload) + (1 if flags & (SYN | FIN) else 0)
        header = TCP.pack(sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags,
                          65535, 0, 0)  # fmt: skip
        segment = header + payload
        length = len(segment)
        if src.version == 4:
            pseudo = src.packed + dst.packed + struct.pack(">BBH", 0, 6, length)
        else:
            pseudo = src.packed + dst.packed + struct.pack(">IxxxB", length, 6)
        segment = segment[:16] + struct.pack(">H", checksum(pseudo + segment)) + segment[18:]
        if src.version == 4:
            self.ip_id = (self.ip_id + 1) & 0xFFFF
            ip = IPV4.pack(0x45, 0, 20 + length, self.ip_id, 0x4000, 64, 6, 0, src.packed,
                           dst.packed)  # fmt: skip
            ip = ip[:10] + struct.pack(">H", checksum(ip)) + ip[12:]
            ethertype = 0x0800
        else:
            ip = IPV6.pack(6 << 28, length, 6, 64, src.packed, dst.packed)
            ethertype = 0x86DD
        link = ETHERNET.pack(b"\x02\0\0\0\0\x02", b"\x02\0\0\0\0\x01", ethertype)
        self.packets.append((ts_ns, link + ip + segment))

    def build(self, wire: Wire) -> list[tuple[int, bytes]]:
        self.packet(wire.opened_ns, "c2s", SYN)
        self.packet(wire.opened_ns, "s2c", SYN | ACK)
        self.packet(wire.opened_ns, "c2s", ACK)
        last = wire.opened_ns
        for chunk in wire.chunks:
            for at in range(0, len(chunk.data), MAX_SEGMENT):
                self.packet(chunk.ts_ns, chunk.direction, PSH | ACK,
                            chunk.data[at : at + MAX_SEGMENT])  # fmt: skip
            last = chunk.ts_ns
        if wire.closed_ns is not None:
            first = "s2c" if wire.closed_by == "server" else "c2s"
            second = "c2s" if first == "s2c" else "s2c"
            end = max(wire.closed_ns, last)
            self.packet(end, first, FIN | ACK)
            self.packet(end, second, FIN | ACK)
            self.packet(end, first, ACK)
        return self.packets


def write_pcap(path: str, wires: Iterable[Wire]) -> int:
    """Every wire's session into one pcap (nanosecond times); the number of packets."""
    packets: list[tuple[int, bytes]] = []
    for wire in wires:
        packets.extend(_Flow(wire).build(wire))
    packets.sort(key=lambda p: p[0])  # (stable: a connection's own order is kept)
    with open(path, "wb") as out:
        out.write(PCAP_HEADER.pack(NANOSECOND_MAGIC, 2, 4, 0, 0, SNAPLEN, LINKTYPE_ETHERNET))
        for ts_ns, data in packets:
            seconds, nanos = divmod(ts_ns, 1_000_000_000)
            out.write(RECORD_HEADER.pack(seconds, nanos, len(data), len(data)))
            out.write(data)
    return len(packets)
