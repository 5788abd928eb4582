"""From a captured link-layer packet to one TCP segment, as a plain tuple.

A segment is (src addr, src port, dst addr, dst port, seq, ack, flags, payload, wire_len):
addresses are 4 or 16 raw bytes, `payload` is the captured part of the TCP payload (a
memoryview) and `wire_len` its length on the wire, which is larger when the capture's
snaplen cut the packet. A tuple, not an object: this runs once per packet.
"""

from __future__ import annotations

import struct

from streamdissect.capture.errors import PacketProblem
from streamdissect.capture.ip import ipv4, ipv6
from streamdissect.capture.link import ETHERNET, ip_offset

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10
Segment = tuple[bytes, int, bytes, int, int, int, int, memoryview, int]

_tcp_header = struct.Struct(">HHIIBB").unpack_from
# Ethernet + IPv4 without options + TCP: the common case, read with one unpack.
_ETH_IPV4_TCP = struct.Struct(">12xHBxH2xHxB2x4s4sHHIIBB")
_eth_ipv4_tcp = _ETH_IPV4_TCP.unpack_from


def tcp_segment(linktype: int, data: memoryview) -> Segment | None:
    """The TCP segment in a packet, None for anything else; PacketProblem for bad headers."""
    if linktype == ETHERNET and len(data) >= _ETH_IPV4_TCP.size:
        (
            ethertype,
            version_ihl,
            total,
            fragment,
            protocol,
            src,
            dst,
            sport,
            dport,
            seq,
            ack,
            offset_byte,
            flags,
        ) = _eth_ipv4_tcp(data)
        if (
            ethertype == 0x0800
            and version_ihl == 0x45
            and protocol == 6
            and total >= 40
            and not fragment & 0x3FFF
            and offset_byte >= 0x50
        ):
            start = 34 + (offset_byte >> 4) * 4
            ip_end = 14 + total
            if start <= ip_end:
                return src, sport, dst, dport, seq, ack, flags, data[start:ip_end], ip_end - start
        # anything unusual takes the general path below, which also names the problem
    if linktype == ETHERNET and len(data) >= 34 and data[12] == 8 and data[13] == 0:
        found = ipv4(data, 14)
    else:
        where = ip_offset(linktype, data)
        if where is None:
            return None
        version, at = where
        found = ipv4(data, at) if version == 4 else ipv6(data, at)
    if found is None:
        return None
    src, dst, at, ip_end = found
    if len(data) < at + 14:
        raise PacketProblem("bad_tcp_header", "TCP header cut short")
    sport, dport, seq, ack, offset_byte, flags = _tcp_header(data, at)
    header_len = (offset_byte >> 4) * 4
    if header_len < 20:
        raise PacketProblem("bad_tcp_header", f"TCP data offset {header_len // 4} < 5")
    start = at + header_len
    if start > ip_end:
        raise PacketProblem("bad_tcp_header", "TCP data offset beyond the IP payload")
    if start > len(data):
        # The snaplen cut the options: the payload is all missing but its length is known.
        return src, sport, dst, dport, seq, ack, flags, data[0:0], ip_end - start
    return src, sport, dst, dport, seq, ack, flags, data[start:ip_end], ip_end - start
