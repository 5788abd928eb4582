"""A bogus frame that swallows a SaslAuthenticate frame must not leak its password."""

from __future__ import annotations

import json
import struct

from streamdissect.protocols.stream import decode_frame, encode_record, make_record

PASSWORD = b"desync-secret-pw"


def sasl_frame() -> bytes:
    return encode_record(make_record("SaslAuthenticate", correlation_id=3, mechanism="PLAIN",
                                     sasl_data=b"\x00guest\x00" + PASSWORD))


def test_unknown_frame_holding_a_sasl_frame_is_redacted():
    inner = sasl_frame()
    bogus = struct.pack(">IHH", 4 + len(inner), 0x0077, 1) + inner
    record = decode_frame(bogus)
    assert type(record).__name__ == "Unknown"
    shown = json.dumps(record.to_dict())
    assert PASSWORD.hex() not in shown and PASSWORD.decode() not in shown
    assert PASSWORD.decode() not in repr(record) and PASSWORD.hex() not in repr(record)
    assert PASSWORD.hex() in json.dumps(record.to_dict(show_secrets=True))


def test_malformed_frame_holding_a_sasl_frame_is_redacted():
    inner = sasl_frame()
    # a Credit frame (3-byte body) claiming the SASL frame as its body: trailing bytes
    bogus = struct.pack(">IHHBh", 4 + 3 + len(inner), 0x0009, 1, 0, 1) + inner
    record = decode_frame(bogus)
    assert type(record).__name__ == "Malformed"
    shown = json.dumps(record.to_dict())
    assert PASSWORD.hex() not in shown
    assert PASSWORD.hex() not in repr(record) and PASSWORD.decode() not in repr(record)
    assert PASSWORD.hex() in json.dumps(record.to_dict(show_secrets=True))


def test_ordinary_unknown_frames_keep_their_bytes():
    record = decode_frame(struct.pack(">IHH", 6, 0x0077, 1) + b"\x00\x01")
    assert record.to_dict()["raw"] == "0000000600770001" + "0001"
