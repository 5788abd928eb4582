"""Link layers: find where the IP header starts and which IP version it is."""

from __future__ import annotations

from streamdissect.capture.errors import PacketProblem

ETHERNET, NULL, RAW, LOOP, LINUX_SLL, IPV4, IPV6, LINUX_SLL2 = 1, 0, 101, 108, 113, 228, 229, 276
ETHERTYPE_IPV4, ETHERTYPE_IPV6 = 0x0800, 0x86DD
VLAN_ETHERTYPES = frozenset((0x8100, 0x88A8, 0x9100))
MAX_VLAN_TAGS = 4  # QinQ is two; more is garbage, and the bound keeps us from looping
# BSD address families for IPv6 differ per OS (Linux 10, NetBSD/OpenBSD 24, FreeBSD 28,
# macOS 30); IPv4 is 2 everywhere.
AF_INET6_VALUES = frozenset((10, 24, 28, 30))


def _from_ethertype(ethertype: int, offset: int) -> tuple[int, int] | None:
    if ethertype == ETHERTYPE_IPV4:
        return 4, offset
    if ethertype == ETHERTYPE_IPV6:
        return 6, offset
    return None


def ethernet_ip_offset(data: memoryview) -> tuple[int, int] | None:
    offset = 12
    for _ in range(MAX_VLAN_TAGS + 1):
        if len(data) < offset + 2:
            return None
        ethertype = (data[offset] << 8) | data[offset + 1]
        if ethertype not in VLAN_ETHERTYPES:
            return _from_ethertype(ethertype, offset + 2)
        offset += 4  # a tag is TPID (read above) + TCI; the real ethertype follows
    raise PacketProblem("bad_link_header", f"more than {MAX_VLAN_TAGS} VLAN tags")


def _from_family(family: int) -> tuple[int, int] | None:
    if family == 2:
        return 4, 4
    if family in AF_INET6_VALUES:
        return 6, 4
    return None


def ip_offset(linktype: int, data: memoryview) -> tuple[int, int] | None:
    """(IP version, offset of the IP header) or None for a packet that is not IP."""
    if linktype == ETHERNET:
        return ethernet_ip_offset(data)
    if len(data) < 20:
        return None
    if linktype == LINUX_SLL:
        return _from_ethertype((data[14] << 8) | data[15], 16)
    if linktype == LINUX_SLL2:
        return _from_ethertype((data[0] << 8) | data[1], 20)
    if linktype == NULL:
        # The family is in the capturing host's byte order: big-endian leaves byte 0 zero.
        family = int.from_bytes(data[:4], "big" if data[0] == 0 and data[1] == 0 else "little")
        return _from_family(family)
    if linktype == LOOP:
        return _from_family(int.from_bytes(data[:4], "big"))
    if linktype in (RAW, IPV4, IPV6):
        version = data[0] >> 4
        return (version, 0) if version in (4, 6) else None
    return None
