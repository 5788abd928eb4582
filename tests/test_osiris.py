"""Deliver's Osiris chunks: header fields, entries, every compression, CRC, tracking, bombs."""

from __future__ import annotations

import gzip
import struct
import tracemalloc

import lz4.frame
import pytest
import snappy
import zstandard
from test_codec_wire import chunk, deliver, simple_entry, sub_batch, tracking, u64

from streamdissect.protocols.stream import (
    CompressionType,
    MalformedEntry,
    OsirisRecord,
    decode_frame,
    encode_record,
    osiris,
    record_from_dict,
)

COMPRESSORS = {
    CompressionType.NONE: lambda data: data,
    CompressionType.GZIP: gzip.compress,
    CompressionType.SNAPPY: lambda data: snappy.StreamCompressor().add_chunk(data),
    CompressionType.LZ4: lz4.frame.compress,
    CompressionType.ZSTD: lambda data: zstandard.ZstdCompressor().compress(data),
}


def plain_records(records: list[bytes]) -> bytes:
    return b"".join(struct.pack(">I", len(r)) + r for r in records)


def test_every_header_field_is_decoded() -> None:
    raw = deliver(chunk([simple_entry(b"x")], 1, chunk_id=2**40, epoch=9, timestamp=-1,
                        bloom_size=16), committed=2**40 - 1)  # fmt: skip
    record = decode_frame(raw)
    assert record.chunk == {
        "magic_version": 0x50, "chunk_type": 0, "num_entries": 1, "num_records": 1,
        "timestamp": -1, "epoch": 9, "chunk_id": 2**40, "crc": record.chunk["crc"],
        "data_length": 5, "trailer_length": 0, "bloom_size": 16, "reserved": 0,
    }  # fmt: skip
    assert record.crc_ok is True
    assert record.committed_chunk_id == 2**40 - 1
    assert encode_record(record) == raw


@pytest.mark.parametrize("compression", list(CompressionType), ids=lambda c: c.name)
def test_sub_batches_with_every_compression(compression: CompressionType) -> None:
    records = [b"alpha", b"", b"gamma" * 100]
    body = COMPRESSORS[compression](plain_records(records))
    entries = [simple_entry(b"first"), sub_batch(compression, records, compressed=body),
               simple_entry(b"last")]  # fmt: skip
    raw = deliver(chunk(entries, 5, chunk_id=1000))
    record = decode_frame(raw)
    assert record.record_count == 5 and record.entry_count == 3
    kinds = [(e.sub_batch, e.compression, e.num_records, e.offset) for e in record.entries()]
    assert kinds == [(False, 0, 1, 1000), (True, compression, 3, 1001), (False, 0, 1, 1004)]
    messages = list(record.messages())
    assert all(isinstance(m, OsirisRecord) for m in messages)
    assert [(m.offset, bytes(m.data)) for m in messages] == [
        (1000, b"first"),
        (1001, b"alpha"),
        (1002, b""),
        (1003, b"gamma" * 100),
        (1004, b"last"),
    ]
    assert encode_record(record) == raw
    assert record_from_dict(record.to_dict()) == record


def test_counting_records_does_not_decompress_or_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("decompressed while counting")

    monkeypatch.setattr("streamdissect.protocols.stream.osiris.decompress", forbidden)
    big = gzip.compress(plain_records([b"x" * 1000] * 1000))
    raw = deliver(
        chunk([sub_batch(CompressionType.GZIP, [b"x" * 1000] * 1000, compressed=big)], 1000)
    )
    record = decode_frame(raw)
    assert record.record_count == 1000 and record.entry_count == 1
    assert [e.num_records for e in record.entries()] == [1000]  # walking is not inflating
    assert record.chunk_payload.obj is raw  # a view into the frame, not a copy


def test_crc_mismatch_is_reported_not_fatal() -> None:
    raw = deliver(chunk([simple_entry(b"payload")], 1, crc=0xDEADBEEF))
    record = decode_frame(raw)
    assert record.crc_ok is False and record.to_dict()["crc_ok"] is False
    assert [bytes(m.data) for m in record.messages()] == [b"payload"]
    assert encode_record(record) == raw


def test_payload_length_comes_from_the_frame_not_from_bloom_or_trailer() -> None:
    # header announces a bloom filter and a trailer, but consumers get neither (facts §3.2)
    raw = deliver(chunk([simple_entry(b"a")], 1, bloom_size=32, trailer=b"t" * 20))
    record = decode_frame(raw)
    assert record.chunk["trailer_length"] == 20 and record.chunk["bloom_size"] == 32
    assert len(record.chunk_payload) == 5 and record.crc_ok is True
    assert record.tracking() == []
    assert encode_record(record) == raw


def test_data_length_beyond_the_frame_is_malformed() -> None:
    good = chunk([simple_entry(b"abcdef")], 1)
    raw = deliver(good[:-3])
    record = decode_frame(raw)
    assert record.__class__.__name__ == "Malformed" and "data_length" in record.reason


def test_trailer_with_chunk_selector_all_holds_sequence_tracking() -> None:
    trailer = tracking(0, "producer-1", u64(41)) + tracking(0, "p2", u64(7))
    raw = deliver(chunk([simple_entry(b"a")], 1, trailer=trailer, send_trailer=True))
    record = decode_frame(raw)
    assert [(t.type, t.id, t.value) for t in record.tracking()] == [(0, "producer-1", 41),
                                                                      (0, "p2", 7)]  # fmt: skip
    assert record.crc_ok is True  # the CRC covers the data section only
    assert encode_record(record) == raw


def test_tracking_delta_chunk() -> None:
    blocks = tracking(1, "consumer-a", u64(1500)) + tracking(2, "ts", struct.pack(">q", -7))
    raw = deliver(chunk([simple_entry(blocks)], 1, chunk_type=1))
    record = decode_frame(raw)
    assert record.chunk["chunk_type"] == 1
    assert [(t.type, t.id, t.value) for t in record.tracking()] == [(1, "consumer-a", 1500),
                                                                      (2, "ts", -7)]  # fmt: skip
    assert list(record.messages()) == []  # tracking chunks carry no user records


def test_tracking_snapshot_chunk_sequence_entries_carry_a_chunk_id() -> None:
    blocks = tracking(0, "producer", u64(3000) + u64(99)) + tracking(1, "consumer", u64(12))
    record = decode_frame(deliver(chunk([simple_entry(blocks)], 1, chunk_type=2)))
    entries = record.tracking()
    assert [(t.type, t.id, t.value, t.chunk_id) for t in entries] == [
        (0, "producer", 99, 3000),
        (1, "consumer", 12, None),
    ]


def test_broken_tracking_is_reported() -> None:
    record = decode_frame(deliver(chunk([simple_entry(b"\x00\x09abc")], 1, chunk_type=1)))
    assert isinstance(record.tracking(), MalformedEntry)


def test_bad_sub_batch_data_is_a_malformed_entry_not_a_crash() -> None:
    bad = sub_batch(CompressionType.GZIP, [b"a"], compressed=b"not gzip at all")
    record = decode_frame(deliver(chunk([simple_entry(b"ok"), bad], 2)))
    results = list(record.messages())
    assert bytes(results[0].data) == b"ok"
    assert isinstance(results[1], MalformedEntry) and "gzip" in results[1].reason


def test_entry_sizes_beyond_the_data_are_malformed_entries() -> None:
    data = struct.pack(">I", 1000) + b"abc"
    assert isinstance(next(iter(osiris.iter_entries(data, 0))), MalformedEntry)
    data = struct.pack(">BHII", 0x80, 1, 5, 500) + b"abc"
    assert isinstance(next(iter(osiris.iter_entries(data, 0))), MalformedEntry)


@pytest.mark.parametrize("compression", [c for c in CompressionType if c], ids=lambda c: c.name)
def test_zip_bombs_are_bounded(compression: CompressionType) -> None:
    """100 MiB of zeros, claimed honestly (above the cap) or as 10 bytes (a lie)."""
    zeros = b"\x00" * (100 * 1024 * 1024)
    body = COMPRESSORS[compression](zeros)
    del zeros
    for claimed in (100 * 1024 * 1024, 10):
        entry = struct.pack(">BHII", 0x80 | compression << 4, 1, claimed, len(body)) + body
        record = decode_frame(deliver(chunk([entry], 1)))
        tracemalloc.start()
        results = list(record.messages())
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert len(results) == 1 and isinstance(results[0], MalformedEntry), results
        assert peak < 8 * 1024 * 1024, peak


def test_claimed_length_mismatch_is_reported() -> None:
    body = gzip.compress(plain_records([b"abc"]))
    entry = struct.pack(">BHII", 0x90, 1, 100, len(body)) + body
    (result,) = decode_frame(deliver(chunk([entry], 1))).messages()
    assert isinstance(result, MalformedEntry) and "claims 100" in result.reason
