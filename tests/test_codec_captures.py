"""Real frames from the captures corpus (captures/NAME.pcap + NAME.truth.json).

A deliberately tiny, independent pcap reader: the corpus is loopback traffic captured in
order, so the TCP payloads of each direction are concatenated (skipping retransmitted
bytes by sequence number) and split on the size field. The truth files were written by the
client side, never by our parser.
"""

from __future__ import annotations

import json
import struct
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import worsen

from streamdissect.protocols.stream import (
    MESSAGES,
    Record,
    Unknown,
    decode_amqp_message,
    decode_frame,
    encode_record,
)

CAPTURES = worsen.CAPTURES
TRUTHS = worsen.corpus_truths()


def tcp_payloads(path: Path) -> list[tuple[int, int, int, bytes]]:
    """(src port, dst port, seq, payload) of every TCP segment with data (Ethernet, IPv4/6)."""
    data = path.read_bytes()
    magic = data[:4]
    endian = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    link_type = struct.unpack_from(endian + "I", data, 20)[0]
    assert link_type == 1, f"unexpected link type {link_type}"
    segments, pos = [], 24
    while pos + 16 <= len(data):
        incl = struct.unpack_from(endian + "I", data, pos + 8)[0]
        packet = data[pos + 16 : pos + 16 + incl]
        pos += 16 + incl
        ethertype = struct.unpack_from(">H", packet, 12)[0]
        ip = packet[14:]
        if ethertype == 0x0800 and ip[9] == 6:
            header_len, total = (ip[0] & 0x0F) * 4, struct.unpack_from(">H", ip, 2)[0]
            tcp, ip_end = ip[header_len:total], total - header_len
        elif ethertype == 0x86DD and ip[6] == 6:
            tcp, ip_end = ip[40 : 40 + struct.unpack_from(">H", ip, 4)[0]], None
        else:
            continue
        sport, dport, seq = struct.unpack_from(">HHI", tcp)
        payload = tcp[(tcp[12] >> 4) * 4 : ip_end]
        if payload:
            segments.append((sport, dport, seq, payload))
    return segments


def streams(path: Path) -> dict[tuple[int, int], bytes]:
    """In-order bytes per (src port, dst port), retransmitted bytes dropped."""
    out: dict[tuple[int, int], bytearray] = defaultdict(bytearray)
    next_seq: dict[tuple[int, int], int] = {}
    for sport, dport, seq, payload in tcp_payloads(path):
        key = (sport, dport)
        expected = next_seq.setdefault(key, seq)
        skip = (expected - seq) % 2**32
        if skip >= len(payload) or skip > 2**31:  # duplicate, or a gap (not in this corpus)
            continue
        out[key] += payload[skip:]
        next_seq[key] = (seq + len(payload)) % 2**32
    return {k: bytes(v) for k, v in out.items()}


def split_frames(stream: bytes) -> list[bytes]:
    frames, pos = [], 0
    while pos + 4 <= len(stream):
        size = struct.unpack_from(">I", stream, pos)[0]
        frames.append(stream[pos : pos + 4 + size])
        pos += 4 + size
    assert pos == len(stream), "stream does not end on a frame boundary"
    return frames


def decoded_connections(truth_path: Path) -> list[tuple[dict, dict[str, list[Record]]]]:
    truth = json.loads(truth_path.read_text())
    by_ports = streams(CAPTURES / truth["capture"])
    result = []
    for connection in truth["connections"]:
        client, server = connection["client_port"], connection["server_port"]
        directions = {
            "c2s": split_frames(by_ports.get((client, server), b"")),
            "s2c": split_frames(by_ports.get((server, client), b"")),
        }
        decoded = {}
        for direction, frames in directions.items():
            records = []
            for raw in frames:
                record = decode_frame(raw)
                if isinstance(record, Unknown) and record.key not in KNOWN_KEYS:
                    # a key no broker knows, sent on purpose (raw-server-close): kept raw
                    assert encode_record(record) == raw
                    records.append(record)
                    continue
                assert isinstance(record, Record), (direction, record)
                assert not record.truncated
                assert encode_record(record) == raw, record.command
                records.append(record)
            decoded[direction] = records
        result.append((connection, decoded))
    return result


KNOWN_KEYS = {m.key for m in MESSAGES}


def test_corpus_has_truth_files() -> None:
    assert TRUTHS, "captures/ has no truth files"


@pytest.mark.parametrize("truth_path", TRUTHS, ids=[p.name.split(".truth")[0] for p in TRUTHS])
def test_real_frames_decode_and_match_the_truth(truth_path: Path) -> None:
    for connection, decoded in decoded_connections(truth_path):
        for direction in ("c2s", "s2c"):
            counts = Counter(f"0x{r.key:04x} v{r.version}" for r in decoded[direction])
            assert dict(counts) == connection["frames"].get(direction, {}), direction
            if "bytes" in connection:
                total = sum(r.size + 4 for r in decoded[direction])
                assert total == connection["bytes"][direction], direction
        c2s, s2c = decoded["c2s"], decoded["s2c"]
        delivers = [r for r in s2c if r.command == "Deliver"]
        if "delivered_chunks" in connection:
            assert len(delivers) == connection["delivered_chunks"]
        if "delivered_records" in connection:
            user_chunks = [r for r in delivers if r.chunk["chunk_type"] == 0]
            assert sum(r.record_count for r in user_chunks) == connection["delivered_records"]
        if "credits_granted" in connection:
            credits = sum(r.credit for r in c2s if r.command == "Credit")
            assert credits == connection["credits_granted"]
        if "errored" in connection:
            errored = Counter(f"0x{e['code']:02x}" for r in s2c if r.command == "PublishError"
                              for e in r.errors)  # fmt: skip
            assert dict(errored) == connection["errored"]
        if "publishing_ids" in connection:
            ids = sum(len(r.publishing_ids) for r in c2s if r.command == "Publish")
            assert ids == connection["publishing_ids"]


@pytest.mark.parametrize("truth_path", TRUTHS, ids=[p.name.split(".truth")[0] for p in TRUTHS])
def test_real_chunks_pass_crc_and_their_records_are_readable(truth_path: Path) -> None:
    for _, decoded in decoded_connections(truth_path):
        for record in decoded["s2c"]:
            if record.command != "Deliver":
                continue
            assert record.crc_ok is True
            messages = list(record.messages())
            assert all(hasattr(m, "offset") for m in messages), messages
            if record.chunk["chunk_type"] == 0:
                assert len(messages) == record.record_count
                offsets = [m.offset for m in messages]
                start = record.chunk["chunk_id"]
                assert offsets == list(range(start, start + record.record_count))
            for message in messages:
                decode_amqp_message(message.data).summary()  # AMQP or raw, never an error
