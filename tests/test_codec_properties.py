"""Property and fuzz tests: every record type round-trips both ways; hostile bytes never
raise, never take long and never allocate much."""

from __future__ import annotations

import struct
import time
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_codec_frames import CASES
from test_codec_wire import chunk, deliver, simple_entry, sub_batch

from streamdissect.protocols.stream import (
    MESSAGES,
    Malformed,
    Record,
    Unknown,
    decode_amqp_message,
    decode_frame,
    encode_record,
    record_from_dict,
)
from streamdissect.protocols.stream.primitives import (
    BYTES,
    STRING,
    ArrayType,
    IntType,
    MapType,
    OffsetValueType,
    StructType,
    TrailingType,
)
from streamdissect.protocols.stream.publish import PublishedMessage, SubBatch
from streamdissect.protocols.stream.spec import CHUNK_HEADER, PUBLISH_MESSAGES, REST, Message

INT_RANGES = {"B": 8, "H": 16, "I": 32, "Q": 64}
short_text = st.text(max_size=12)
nullable_text = st.none() | short_text


def int_strategy(wire: IntType) -> st.SearchStrategy[int]:
    bits = INT_RANGES.get(wire.fmt.upper(), 64)
    if wire.fmt.islower():
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return st.integers(0, 2**bits - 1)


def strategy_for(wire: Any) -> st.SearchStrategy[Any]:
    if isinstance(wire, IntType):
        return int_strategy(wire)
    if wire is STRING:
        return nullable_text
    if wire is BYTES:
        return st.none() | st.binary(max_size=12)
    if isinstance(wire, TrailingType):
        inner = short_text if wire.inner is STRING else (
            st.binary(max_size=12) if wire.inner is BYTES else strategy_for(wire.inner))  # fmt: skip
        return st.none() | inner
    if isinstance(wire, ArrayType):
        return st.lists(strategy_for(wire.element), max_size=4)
    if isinstance(wire, StructType):
        return st.fixed_dictionaries({n: strategy_for(t) for n, t in wire.fields})
    if isinstance(wire, MapType):
        return st.dictionaries(short_text, strategy_for(wire.value), max_size=4)
    raise AssertionError(f"no strategy for {wire!r}")


def publish_messages(version: int) -> st.SearchStrategy[list[PublishedMessage]]:
    sub = st.builds(SubBatch, st.integers(0, 7), st.integers(0, 65535),
                    st.integers(0, 2**32 - 1), st.binary(max_size=16), st.integers(0, 15))  # fmt: skip
    entry = st.binary(max_size=16) | sub
    filter_value = st.none() if version == 1 else nullable_text
    return st.lists(st.builds(PublishedMessage, st.integers(0, 2**64 - 1), filter_value, entry),
                    max_size=5)  # fmt: skip


@st.composite
def chunk_fields(draw: st.DrawFn) -> dict[str, Any]:
    payload = draw(st.binary(max_size=64))
    data_length = draw(st.integers(0, len(payload)))
    entries = draw(st.integers(0, data_length // 4))  # each entry takes 4 bytes or more
    header = {
        "magic_version": draw(st.integers(0x50, 0x5F)),
        "chunk_type": draw(st.integers(0, 255)),
        "num_entries": entries,
        "num_records": draw(st.integers(0, entries * 0xFFFF)),  # a sub-batch holds < 2**16
        "timestamp": draw(st.integers(-(2**63), 2**63 - 1)),
        "epoch": draw(st.integers(0, 2**64 - 1)),
        "chunk_id": draw(st.integers(0, 2**64 - 1)),
        "crc": draw(st.integers(0, 2**32 - 1)),
        "data_length": data_length,
        "trailer_length": draw(st.integers(0, 2**32 - 1)),
        "bloom_size": draw(st.integers(0, 255)),
        "reserved": draw(st.integers(0, 2**24 - 1)),
    }
    return {"chunk": header, "chunk_payload": payload}


@st.composite
def records(draw: st.DrawFn, message: Message, version: int) -> Record:
    from streamdissect.protocols.stream.records import RECORD_CLASSES

    fields: dict[str, Any] = {}
    for field in message.fields_for(version):
        wire = field.type
        if isinstance(wire, OffsetValueType):
            offset_type = fields["offset_type"]
            signed = st.integers(-(2**63), 2**63 - 1)
            others = (st.none() | signed) if wire.last_may_carry else st.none()
            fields["offset"] = draw(st.integers(0, 2**64 - 1) if offset_type == 4 else
                                    signed if offset_type == 5 else others)  # fmt: skip
        elif field.name == "offset_type" and message.fields_for(version)[-1] is not field:
            fields["offset_type"] = draw(st.integers(0, 6) | st.integers(0, 65535))
        elif wire is PUBLISH_MESSAGES:
            fields["messages"] = draw(publish_messages(version))
        elif wire is CHUNK_HEADER:
            fields |= draw(chunk_fields())
        elif wire is REST:
            continue
        else:
            fields[field.name] = draw(strategy_for(wire))
    corr = draw(st.integers(0, 2**32 - 1)) if message.correlation_id else None
    code = draw(st.integers(0, 65535)) if message.code else None
    return RECORD_CLASSES[message.key](message.key, version, None, corr, code, False, **fields)


ALL_VERSIONS = [(m, v) for m in MESSAGES for v in m.versions]


@pytest.mark.parametrize(("message", "version"), ALL_VERSIONS,
                         ids=[f"{m.class_name}-v{v}" for m, v in ALL_VERSIONS])  # fmt: skip
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_both_ways(message: Message, version: int, data: st.DataObject) -> None:
    record = data.draw(records(message, version))
    wire = encode_record(record)  # record -> bytes
    decoded = decode_frame(wire)  # bytes -> record
    assert isinstance(decoded, Record), getattr(decoded, "reason", decoded)
    for name in ("key", "version", "correlation_id", "code") + tuple(
        f.name for f in message.fields_for(version)
    ):
        assert getattr(decoded, name) == getattr(record, name), name
    assert decoded.size == len(wire) - 4
    assert encode_record(decoded) == wire  # bytes -> record -> bytes
    assert record_from_dict(decoded.to_dict(show_secrets=True)) == decoded


SEED_FRAMES = [c[1] for c in CASES] + [
    deliver(chunk([simple_entry(b"\x00\x53\x75\xa0\x02hi"), sub_batch(0, [b"a", b"b"])], 3),
            committed=5),
]  # fmt: skip


def exercise(record: Any) -> None:
    """Touch every lazy part of a record: none of it may raise."""
    record.to_dict()
    if isinstance(record, Record) and record.command == "Deliver" and not record.truncated:
        for item in record.messages():
            if hasattr(item, "data"):
                decode_amqp_message(item.data)
        list(record.entries())
        record.tracking()
    if isinstance(record, Record) and record.command == "Publish" and record.messages is not None:
        list(record.messages)


@settings(max_examples=1500, deadline=None)
@given(
    seed=st.sampled_from(SEED_FRAMES),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
    cut=st.none() | st.integers(0, 10_000),
    insert=st.none() | st.tuples(st.integers(0, 10_000), st.binary(min_size=1, max_size=6)),
)
def test_mutated_and_truncated_frames_never_raise(
    seed: bytes, edits: list[tuple[int, int]], cut: int | None, insert: Any
) -> None:
    frame = bytearray(seed)
    for at, value in edits:
        frame[at % len(frame)] = value
    if insert is not None:
        at, blob = insert
        frame[at % len(frame) : at % len(frame)] = blob
    declared = None
    if cut is not None:
        declared = len(frame) - 4
        frame = frame[: cut % (len(frame) + 1)]
    started = time.process_time()  # (CPU time: a loaded machine does not fail the bound)
    record = decode_frame(bytes(frame), declared_size=declared)
    exercise(record)
    assert time.process_time() - started < 0.5
    assert isinstance(record, (Record, Malformed, Unknown))
    assert "internal error" not in getattr(record, "reason", "")
    if isinstance(record, Record) and not record.truncated:
        assert encode_record(record) == bytes(frame)  # whatever decodes, re-encodes exactly
    if record.truncated:  # only when fewer bytes are present than the size says
        size = declared if declared is not None else struct.unpack_from(">I", frame)[0]
        assert size > len(frame) - 4


@pytest.mark.parametrize("seed", SEED_FRAMES, ids=[c[0] for c in CASES] + ["deliver_amqp"])
def test_hostile_lengths_do_not_allocate(seed: bytes) -> None:
    """Write 0x7fffffff (and 0x7fff) at every offset: each length or count then claims far
    more than is present, which must be refused before anything is built."""
    tracemalloc.start()
    try:
        for at in range(8, len(seed)):
            for hostile in (b"\x7f\xff\xff\xff", b"\x7f\xff", b"\xff\xff\xff\xf0"):
                frame = seed[:at] + hostile + seed[at + len(hostile) :]
                tracemalloc.reset_peak()
                exercise(decode_frame(frame))
                assert tracemalloc.get_traced_memory()[1] < 2 * 1024 * 1024, (at, hostile)
    finally:
        tracemalloc.stop()


def test_a_huge_array_count_with_ten_bytes_left_fails_fast() -> None:
    frame = struct.pack(">IHHIi", 4 + 4 + 4 + 10, 0x000F, 1, 1, 2**31 - 1) + b"\x00" * 10
    tracemalloc.start()
    record = decode_frame(frame)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert isinstance(record, Malformed) and "cannot fit" in record.reason
    assert peak < 64 * 1024
