"""The packets of a block of a classic pcap file as columns, parsed with numpy.

Link, IPv4 or IPv6, and TCP headers are gathered for the whole block from each record's
start (Ethernet, Linux cooked v1/v2 as `tcpdump -i any` writes, BSD null/loop, raw IP:
LINK_LAYOUTS); any other packet (VLAN tags, IP options, IPv6 extension headers...) goes
through capture.tcp_segment, the exact per-packet code. A block is parsed MAX_ROWS packets
at a time, so that a file of tiny packets (16 bytes a record) cannot make the per-packet
columns (~250 bytes a packet, temporaries included) grow past ~16 MiB.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from streamdissect.capture import PacketProblem, Segment, tcp_segment
from streamdissect.capture.blocks import sliding
from streamdissect.capture.link import ETHERNET, IPV4, IPV6, LINUX_SLL, LINUX_SLL2, LOOP, NULL, RAW
from streamdissect.capture.pcap import RECORD_HEADER_SIZE
from streamdissect.slotted import Slotted

MAX_ROWS = 1 << 16
# Bytes of each packet's payload read with its headers (Parsed.phead): a RabbitMQ Stream
# frame's size, key and version. The helper process reads them right after the block, so that
# the main process' frame walk need not reach into the block for each segment's (a cache
# miss each: ~50 ns a segment, ~0.02 s of the small-frame capture's main process).
PAYLOAD_HEAD = 8
PAD = 128  # room after a block's data so header gathers never index past the buffer
# Link layers whose IPv4 and IPv6 + TCP packets are parsed as columns, as
# capture.link.ip_offset reads them: linktype -> (link header length, (format, offset) of
# the field that names the network layer, its IPv4 values, its IPv6 values). Raw IP has no
# such field: the IP header's first byte says it.
_AF_INET6 = (10, 24, 28, 30)  # (per OS)
LINK_LAYOUTS = {
    ETHERNET: (14, (">u2", 12), (0x0800,), (0x86DD,)),  # (VLAN tags: the per-packet path)
    LINUX_SLL: (16, (">u2", 14), (0x0800,), (0x86DD,)),  # tcpdump -i any
    LINUX_SLL2: (20, (">u2", 0), (0x0800,), (0x86DD,)),
    # the family in the capturing host's byte order
    NULL: (4, ("<u4", 0), (2, 2 << 24), (*_AF_INET6, *(f << 24 for f in _AF_INET6))),
    LOOP: (4, (">u4", 0), (2,), _AF_INET6),
    RAW: (0, None, (), ()), IPV4: (0, None, (), ()), IPV6: (0, None, (), ()),
}  # fmt: skip
_IPV4_TCP = (("vihl", "u1"), ("tos", "u1"), ("total", ">u2"), ("ipid", ">u2"),
             ("frag", ">u2"), ("ttl", "u1"), ("proto", "u1"), ("ipsum", ">u2"), ("src", ">u4"),
             ("dst", ">u4"))  # fmt: skip
_IPV6_TCP = (("vtc", "u1"), ("flow", "V3"), ("payload", ">u2"), ("next", "u1"), ("hops", "u1"),
             ("src", "V16"), ("dst", "V16"))  # fmt: skip
_TCP = (("sport", ">u2"), ("dport", ">u2"), ("seq", ">u4"), ("ack", ">u4"), ("off", "u1"),
        ("flags", "u1"))  # fmt: skip


def _header_dtype(order: str, link: tuple, ip: tuple = _IPV4_TCP) -> np.dtype:
    """A record header, the link header `link` (LINK_LAYOUTS), the IP header's fields `ip`
    (_IPV4_TCP, _IPV6_TCP) and TCP up to the flags."""
    length, field = link[:2]
    names, formats, offsets = ["sec", "frac", "caplen", "wirelen"], [order + "u4"] * 4, [0, 4, 8, 12]
    if field is not None:
        names.append("link")
        formats.append(field[0])
        offsets.append(RECORD_HEADER_SIZE + field[1])
    at = RECORD_HEADER_SIZE + length
    for name, fmt in (*ip, *_TCP):
        names.append(name)
        formats.append(fmt)
        offsets.append(at)
        at += np.dtype(fmt).itemsize
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": at})


class PacketLayout(NamedTuple):
    """How a file's packets are read: its link type and LINK_LAYOUTS entry (None: no packet
    is parsed as columns), nanoseconds per timestamp fraction, and the IPv4 and IPv6 header
    layouts gathered from every record start."""

    linktype: int
    link: tuple | None
    frac_ns: int
    dtypes: tuple[np.dtype, np.dtype]

    @classmethod
    def of(cls, order: str, frac_ns: int, linktype: int) -> PacketLayout:
        link = LINK_LAYOUTS.get(linktype)
        either = link or LINK_LAYOUTS[ETHERNET]
        return cls(linktype, link, frac_ns,
                   (_header_dtype(order, either), _header_dtype(order, either, _IPV6_TCP)))  # fmt: skip

    @property
    def ip_at(self) -> int:
        """Where the IP header starts in a record."""
        return RECORD_HEADER_SIZE + (self.link[0] if self.link else 0)

    def views(self, memory: Any, at: int, size: int) -> tuple:
        """The IPv4 and IPv6 header views and the payload head view over memory[at : at +
        size] (blocks.sliding)."""
        return (*(sliding(memory, at, size, dtype.itemsize) for dtype in self.dtypes),
                sliding(memory, at, size, PAYLOAD_HEAD))  # fmt: skip


class Parsed(NamedTuple):
    """What parse_packets finds without any state: per packet (row), its captured length,
    time, TCP flags, sequence and acknowledgement numbers, payload start and length in the
    buffer, TCP payload length on the wire, whether it was parsed here (else one by one),
    its flow number (-1: none) and the first PAYLOAD_HEAD bytes from its payload start as
    they are (an int64 of raw bytes; past a shorter payload, what follows it; not filled in
    for a packet parsed one by one); per flow, its addresses (IPv4: both in one number;
    IPv6: 0, read from its first packet), ports (both in one number) and first row."""

    caplen: np.ndarray
    ts: np.ndarray
    flags: np.ndarray
    seq: np.ndarray
    ack: np.ndarray
    pstart: np.ndarray
    plen: np.ndarray
    wlen: np.ndarray
    fast: np.ndarray
    fid: np.ndarray
    phead: np.ndarray
    flow_addresses: np.ndarray
    flow_ports: np.ndarray
    flow_first: np.ndarray


_PER_PACKET = Parsed._fields[:-3]
# The columns of a helper's slot (one int64 row each): the per-packet ones, then FLOW_COLUMNS
# on, three per flow, then the record starts; for blocks of at most MAX_ROWS records.
FLOW_COLUMNS = len(_PER_PACKET)
STARTS = FLOW_COLUMNS + 3
COLUMNS = STARTS + 1


def parse_packets(headers: tuple, starts: np.ndarray, layout: PacketLayout) -> Parsed:
    """The part of a block that needs no state: each record's headers gathered and parsed,
    and the flows of the IPv4 and IPv6 + TCP packets. `headers`: the layout's views of the
    block (PacketLayout.views). The helper process runs it for the block it has just read;
    this process, for the others."""
    n = len(starts)
    link = layout.link
    h = headers[0][starts].view(layout.dtypes[0])
    caplen = h["caplen"].astype(np.int64)
    ts = h["sec"].astype(np.int64) * 1_000_000_000 + h["frac"].astype(np.int64) * layout.frac_ns
    flags = h["flags"].astype(np.int64)
    seq = h["seq"].astype(np.int64)
    ack = h["ack"].astype(np.int64)
    total = h["total"].astype(np.int64)
    off = h["off"].astype(np.int64)
    length = 0 if link is None else link[0]
    tcp_start = length + 20 + (off >> 4) * 4  # in the packet
    ip_end = length + total
    fast = _ipv4_fast(h, caplen, tcp_start <= ip_end, link)
    fast_rows = np.flatnonzero(fast)
    rows6, h6 = _ipv6_rows(headers[1], starts, h, caplen, layout)
    if len(rows6):
        flags[rows6] = h6["flags"]
        seq[rows6] = h6["seq"]
        ack[rows6] = h6["ack"]
        tcp_start[rows6] = length + 40 + (h6["off"].astype(np.int64) >> 4) * 4
        ip_end[rows6] = length + 40 + h6["payload"].astype(np.int64)
        fast[rows6] = True
    pstart = starts + RECORD_HEADER_SIZE + tcp_start
    payload_heads = headers[2]  # (a packet's header fields may point past the block: kept in)
    phead = payload_heads[np.minimum(pstart, len(payload_heads) - 1)].view(np.int64)
    plen = np.maximum(np.minimum(ip_end, caplen) - tcp_start, 0)
    wlen = ip_end - tcp_start
    fid = np.full(n, -1, dtype=np.int64)
    flows = _flows(h, fast_rows, fid, rows6, h6)
    return Parsed(caplen, ts, flags, seq, ack, pstart, plen, wlen, fast, fid, phead, *flows)


def _ipv4_fast(h: np.ndarray, caplen: np.ndarray, tcp_inside: np.ndarray,
               link: tuple | None) -> np.ndarray:  # fmt: skip
    """Which packets capture.tcp_segment takes without a question: IPv4 without options or
    fragments, TCP with a sane data offset, the whole TCP header captured."""
    if link is None:
        return np.zeros(len(h), dtype=bool)
    fast = (
        (caplen >= link[0] + 34)
        & (h["vihl"] == 0x45)
        & (h["proto"] == 6)
        & (h["total"] >= 40)
        & ((h["frag"] & 0x3FFF) == 0)
        & (h["off"] >= 0x50)
        & tcp_inside
    )
    if link[1] is not None:
        fast &= np.isin(h["link"], link[2])
    return fast


def _flows(h: np.ndarray, fast_rows: np.ndarray, fid: np.ndarray, rows6: np.ndarray,
           h6: np.ndarray | None) -> tuple:  # fmt: skip
    """The flows of the packets parsed here (their numbers into `fid`): (addresses, ports,
    first row) of each."""
    uniq_a = uniq_p = np.zeros(0, dtype=np.uint64)
    firsts = np.zeros(0, dtype=np.int64)
    if len(fast_rows):
        a = (h["src"][fast_rows].astype(np.uint64) << np.uint64(32)) | h["dst"][
            fast_rows
        ].astype(np.uint64)
        p = (h["sport"][fast_rows].astype(np.uint64) << np.uint64(16)) | h["dport"][fast_rows]
        # Ports tell flows apart almost always; the addresses are checked to be sure.
        uniq_p, index, inverse = np.unique(p, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        uniq_a = a[index]
        if not np.array_equal(uniq_a[inverse], a):
            k = np.empty(len(fast_rows), dtype=[("a", "u8"), ("p", "u8")])
            k["a"], k["p"] = a, p
            uniq_k, index, inverse = np.unique(k, return_index=True, return_inverse=True)
            inverse = inverse.reshape(-1)
            uniq_a, uniq_p = uniq_k["a"], uniq_k["p"]
        firsts = fast_rows[index]
        fid[fast_rows] = inverse
    if len(rows6):
        # IPv6 flows after the IPv4 ones: their addresses are read from their first packet
        # (flow_keys), the column keeps only their ports
        k = np.empty(len(rows6), dtype=[("src", "V16"), ("dst", "V16"), ("p", "u8")])
        k["src"], k["dst"] = h6["src"], h6["dst"]
        k["p"] = (h6["sport"].astype(np.uint64) << np.uint64(16)) | h6["dport"]
        uniq_k, index, inverse = np.unique(k, return_index=True, return_inverse=True)
        fid[rows6] = len(uniq_p) + inverse.reshape(-1)
        uniq_a = np.concatenate((uniq_a, np.zeros(len(uniq_k), dtype=np.uint64)))
        uniq_p = np.concatenate((uniq_p, uniq_k["p"]))
        firsts = np.concatenate((firsts, rows6[index]))
    return uniq_a, uniq_p, firsts


def _ipv6_rows(headers6: np.ndarray, starts: np.ndarray, h: np.ndarray, caplen: np.ndarray,
               layout: PacketLayout) -> tuple:  # fmt: skip
    """(rows, their IPv6 headers) of the IPv6 + TCP packets capture.tcp_segment takes without
    a question: TCP right after the IPv6 header, a payload length (no jumbogram), a sane
    data offset, the whole TCP header captured."""
    none = (np.zeros(0, dtype=np.int64), None)
    if layout.link is None:
        return none
    length, field, _, ipv6_values = layout.link
    named = np.isin(h["link"], ipv6_values) if field is not None else (h["vihl"] >> 4) == 6
    rows = np.flatnonzero(named & (caplen >= length + 54))
    if not len(rows):
        return none
    h6 = headers6[starts[rows]].view(layout.dtypes[1])
    off = h6["off"].astype(np.int64)
    payload = h6["payload"].astype(np.int64)
    ok = (((h6["vtc"] >> 4) == 6) & (h6["next"] == 6) & (payload > 0) & (off >= 0x50)
          & ((off >> 4) * 4 <= payload))  # fmt: skip
    return rows[ok], h6[ok]


# --- a helper's slot columns --------------------------------------------------------------


def slot_columns(memory: Any, at: int) -> np.ndarray:
    """The COLUMNS x MAX_ROWS int64 columns at memory[at:]."""
    return np.ndarray((COLUMNS, MAX_ROWS), dtype=np.int64, buffer=memory, offset=at)


def write_parsed(columns: np.ndarray, parsed: Parsed, starts: np.ndarray) -> int:
    """(In the helper process.) parse_packets' results for a block written into a slot's
    columns; the number of flows."""
    n = len(starts)
    for i, name in enumerate(_PER_PACKET):
        columns[i, :n] = getattr(parsed, name)
    columns[STARTS, :n] = starts
    flows = len(parsed.flow_addresses)
    for i, values in enumerate((parsed.flow_addresses.view(np.int64),
                                parsed.flow_ports.view(np.int64), parsed.flow_first)):  # fmt: skip
        columns[FLOW_COLUMNS + i, :flows] = values
    return flows


def read_parsed(columns: np.ndarray, n: int, flows: int) -> tuple[np.ndarray, Parsed]:
    """(record starts, parse_packets' results) as the helper left them in a slot's columns
    (views)."""
    per_packet = [columns[i, :n] for i in range(FLOW_COLUMNS)]
    per_packet[_PER_PACKET.index("fast")] = per_packet[_PER_PACKET.index("fast")].astype(bool)
    uniq_a, uniq_p, firsts = (columns[FLOW_COLUMNS + i, :flows] for i in range(3))
    parsed = Parsed(*per_packet, uniq_a.view(np.uint64), uniq_p.view(np.uint64), firsts)
    return columns[STARTS, :n], parsed


# --- the whole piece: flows named, the other packets parsed one by one ---------------------


class Packets(Slotted):
    """A piece of a block (at most MAX_ROWS records) parsed: parse_packets' columns (rows the
    exact code parsed filled in too), the four-tuple and first row of each flow, the
    segments parsed one by one (row -> capture.Segment) and the packets that are no TCP
    segment we can read (row -> PacketProblem)."""

    __slots__ = field_names = ("starts", "columns", "keys", "first_row", "slow", "problems",
                               "buf", "mv")  # fmt: skip
    starts: np.ndarray
    columns: Parsed
    keys: list[tuple]
    first_row: list[int]
    slow: dict[int, Segment]
    problems: dict[int, PacketProblem]
    buf: Any  # the block buffer (a bytearray, or a view of a helper's slot)
    mv: memoryview  # ... as a memoryview

    def __init__(self, starts: np.ndarray, columns: Parsed, keys: list[tuple],
                 first_row: list[int], slow: dict[int, Segment],
                 problems: dict[int, PacketProblem], buf: Any, mv: memoryview) -> None:  # fmt: skip
        self.starts = starts
        self.columns = columns
        self.keys = keys
        self.first_row = first_row
        self.slow = slow
        self.problems = problems
        self.buf = buf
        self.mv = mv

    def segment(self, r: int) -> Segment:
        """Row r's TCP segment (its payload a view of the block buffer)."""
        seg = self.slow.get(r)
        if seg is None:
            c = self.columns
            src, sport, dst, dport = self.keys[c.fid[r]]
            p = int(c.pstart[r])
            seg = (src, sport, dst, dport, int(c.seq[r]), int(c.ack[r]), int(c.flags[r]),
                   self.mv[p : p + int(c.plen[r])], int(c.wlen[r]))  # fmt: skip
        return seg


def packets(starts: np.ndarray, parsed: Parsed, layout: PacketLayout, buf: Any,
            mv: memoryview) -> Packets:  # fmt: skip
    """The piece's flows named (their four-tuples), and the packets parse_packets left
    parsed one by one with the exact code (capture.tcp_segment)."""
    keys: list[tuple] = []
    key_ids: dict[tuple, int] = {}
    first_row: list[int] = []
    ip_at = layout.ip_at
    for j, (a, p, r) in enumerate(zip(parsed.flow_addresses.tolist(), parsed.flow_ports.tolist(),
                                      parsed.flow_first.tolist())):  # fmt: skip
        at = int(starts[r]) + ip_at
        if buf[at] >> 4 == 6:  # an IPv6 flow: its addresses from its first packet
            key = (bytes(buf[at + 8 : at + 24]), p >> 16, bytes(buf[at + 24 : at + 40]),
                   p & 0xFFFF)  # fmt: skip
        else:
            key = ((a >> 32).to_bytes(4, "big"), p >> 16, (a & 0xFFFFFFFF).to_bytes(4, "big"),
                   p & 0xFFFF)  # fmt: skip
        key_ids[key] = j
        keys.append(key)
        first_row.append(r)
    piece = Packets(starts, parsed, keys, first_row, {}, {}, buf, mv)
    if not parsed.fast.all():
        _one_by_one(piece, key_ids, layout.linktype)
    return piece


def _one_by_one(piece: Packets, key_ids: dict[tuple, int], linktype: int) -> None:
    """The packets parse_packets did not take, through the exact per-packet code."""
    c = piece.columns
    keys, first_row = piece.keys, piece.first_row
    for r in np.flatnonzero(~c.fast).tolist():
        s = int(piece.starts[r]) + RECORD_HEADER_SIZE
        try:
            seg = tcp_segment(linktype, piece.mv[s : s + int(c.caplen[r])])
        except PacketProblem as problem:
            piece.problems[r] = problem
            continue
        if seg is None:
            continue
        key = (seg[0], seg[1], seg[2], seg[3])
        j = key_ids.get(key)
        if j is None:
            j = key_ids[key] = len(keys)
            keys.append(key)
            first_row.append(r)
        elif r < first_row[j]:
            first_row[j] = r
        c.fid[r] = j
        piece.slow[r] = seg
        c.seq[r], c.ack[r], c.flags[r], c.wlen[r] = seg[4], seg[5], seg[6], seg[8]
        c.plen[r] = len(seg[7])
