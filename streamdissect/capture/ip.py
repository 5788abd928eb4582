"""IPv4 and IPv6 headers: addresses, the TCP header's offset and the IP payload end."""

from __future__ import annotations

from streamdissect.capture.errors import PacketProblem

TCP = 6
IPV6_HOP_BY_HOP, IPV6_ROUTING, IPV6_FRAGMENT, IPV6_DEST_OPTS, IPV6_AH, IPV6_NONE = (
    0,
    43,
    44,
    60,
    51,
    59,
)
MAX_IPV6_EXTENSIONS = 8  # real packets carry one or two; the cap stops crafted chains


def ipv4(data: memoryview, at: int) -> tuple[bytes, bytes, int, int] | None:
    """(src, dst, TCP header offset, end of the IP payload on the wire) or None if not TCP."""
    if len(data) < at + 20:
        raise PacketProblem("bad_ip_header", "IPv4 header cut short")
    ihl = (data[at] & 0x0F) * 4
    if ihl < 20:
        raise PacketProblem("bad_ip_header", f"IPv4 IHL {ihl // 4} < 5")
    total = (data[at + 2] << 8) | data[at + 3]
    if total == 0:
        total = len(data) - at  # TSO on the capturing host leaves the length out
    elif total < ihl:
        raise PacketProblem("bad_ip_header", f"IPv4 total length {total} < header {ihl}")
    if data[at + 9] != TCP:
        return None
    fragment = ((data[at + 6] & 0x1F) << 8) | data[at + 7]
    if fragment:
        raise PacketProblem("ip_fragment", f"non-first IPv4 fragment at offset {fragment * 8}")
    if data[at + 6] & 0x20:
        # IP reassembly is out of scope: the first fragment alone has a partial payload, so
        # it is reported and skipped too, and TCP sequence accounting sees the hole.
        raise PacketProblem("ip_fragment", "first IPv4 fragment (more fragments follow)")
    return bytes(data[at + 12 : at + 16]), bytes(data[at + 16 : at + 20]), at + ihl, at + total


def ipv6(data: memoryview, at: int) -> tuple[bytes, bytes, int, int] | None:
    if len(data) < at + 40:
        raise PacketProblem("bad_ip_header", "IPv6 header cut short")
    payload_len = (data[at + 4] << 8) | data[at + 5]
    end = at + 40 + payload_len if payload_len else len(data)  # 0: jumbogram
    next_header = data[at + 6]
    pos = at + 40
    for _ in range(MAX_IPV6_EXTENSIONS):
        if next_header == TCP:
            return bytes(data[at + 8 : at + 24]), bytes(data[at + 24 : at + 40]), pos, end
        if next_header not in (
            IPV6_HOP_BY_HOP,
            IPV6_ROUTING,
            IPV6_DEST_OPTS,
            IPV6_FRAGMENT,
            IPV6_AH,
        ):
            return None  # another transport, or no next header
        if len(data) < pos + 8:
            raise PacketProblem("bad_ip_header", "IPv6 extension header cut short")
        if next_header == IPV6_FRAGMENT:
            fragment = ((data[pos + 2] << 8) | data[pos + 3]) >> 3
            if fragment:
                raise PacketProblem("ip_fragment", f"non-first IPv6 fragment at {fragment * 8}")
            if data[pos + 3] & 1:
                raise PacketProblem("ip_fragment", "first IPv6 fragment (more fragments follow)")
            length = 8
        elif next_header == IPV6_AH:
            length = (data[pos + 1] + 2) * 4
        else:
            length = (data[pos + 1] + 1) * 8
        next_header = data[pos]
        pos += length
    raise PacketProblem("bad_ip_header", f"more than {MAX_IPV6_EXTENSIONS} IPv6 extension headers")
