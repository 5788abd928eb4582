"""The codec's shortcuts (taken for speed on the benchmark capture's hot frames) give what the
general code they stand in for gives: JSON headers read as json.loads reads them, stored
hosts written as ipaddress writes them; known header fields are named as the field table
says and typed by `typed_value` alone (the one typing rule). Checked on every header of the
recorded captures and on odd inputs."""

from __future__ import annotations

import ipaddress
import json
import random

import pytest
from rocketmq_support import CAPTURES, NAMES

from streamdissect.engine.dissect import Dissector, FrameEvent
from streamdissect.protocols.rocketmq import codec, messages
from streamdissect.protocols.rocketmq.messages import _host_text
from streamdissect.protocols.rocketmq.records import RemotingCommand


def _outcome(call, *args):
    """What a call gives: ("value", its value) or ("error", its exception's type and text)."""
    try:
        return "value", call(*args)
    except (ValueError, RecursionError) as e:
        return "error", (type(e), str(e))


@pytest.fixture(scope="module")
def recorded():
    """(JSON headers as their bytes came, commands) of every recorded capture, read by the
    reference engine; the headers through a spy on the codec's JSON header reader."""
    headers, commands = [], []
    real = codec._json_header

    def spy(header: bytes, *parsed):
        headers.append(bytes(header))
        return real(header, *parsed)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(codec, "_json_header", spy)
        for name in NAMES:
            for ev in Dissector(engine="stream").run(str(CAPTURES / f"{name}.pcap")):
                if isinstance(ev, FrameEvent) and isinstance(ev.record, RemotingCommand):
                    commands.append(ev.record)
    assert len(headers) > 100 and len(commands) > 100
    return headers, commands


ODD_HEADERS = [
    b'{"code":10}', b'{"code":10}\n', b'{"code":1,"x":"\xff"}', b'{"a":"\xed\xa0\x80"}',
    b'{"code":', b'{"code":1}{"', b'{""}', b'{"code":1e400}', b'{"k":' * 3000,
    b'\xef\xbb\xbf{"code":1}', b'{\x00"\x00', b' {"code":1}', b'[1,2]', b'{"', b'{',
    b'{"code":true,"opaque":1.5}', "{\"r\":\"\u00e9\u4e2d\"}".encode(),
]


def test_json_headers_read_as_json_loads_reads_them(recorded):
    headers = recorded[0] + ODD_HEADERS
    for header in headers:
        assert _outcome(codec._json_loads, header) == _outcome(json.loads, header), header


def test_stored_hosts_written_as_ipaddress_writes_them():
    rng = random.Random(26)
    addresses = [bytes(4), b"\xff" * 4, b"\x7f\x00\x00\x01", bytes(16), b"\xfe\x80" + bytes(14)]
    addresses += [rng.randbytes(4) for _ in range(2000)] + [rng.randbytes(16) for _ in range(50)]
    for address in addresses:
        for port in (0, 10911, 65535, -1, 2**31 - 1, -(2**31)):
            ip = ipaddress.ip_address(address)
            expected = f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"
            assert _host_text(address, port) == expected


def _named_by_the_table(command: RemotingCommand) -> dict:
    """The known ext fields as spec's field table names them and `typed_value` types them."""
    header = codec.header_of(command.code, command.response)
    known = {} if header is None else header.by_key()
    out = {}
    for key, value in command.ext.items():
        if key in known and codec.typed_value(value, known[key].type) is not None:
            out[known[key].name] = codec.typed_value(value, known[key].type)
    return out


def test_known_fields_named_and_typed_as_the_field_table_says(recorded):
    commands = recorded[1]
    odd = [codec.make_command(10, ext={"topic": 5, "queueId": "x", "sysFlag": " 7 ",
                                       "unitMode": "TRUE", "batch": 1, "flag": True})]
    for command in commands + odd:
        assert command.fields == _named_by_the_table(command)
        assert list(command.fields) == list(_named_by_the_table(command))


@pytest.mark.parametrize("value,kind,typed", [
    ("TopicTest", "str", "TopicTest"), (5, "str", None), (True, "str", None),
    ("7", "int", 7), (" -7 ", "int", -7), ("x", "int", None), ("9" * 23, "int", int("9" * 23)),
    ("9" * 24, "int", None), (7, "int", 7), (True, "int", None), (1.5, "int", None),
    ("true", "bool", True), ("FALSE", "bool", False), ("yes", "bool", None),
    (True, "bool", True), (1, "bool", None), (None, "bool", None),
])  # fmt: skip
def test_an_ext_value_is_typed_as_its_field_says(value, kind, typed):
    """The typing rules of docs/protocol-rocketmq.md, section 3 (ext values are text on the
    wire; a value that is not of its field's type stays in `ext` only)."""
    got = codec.typed_value(value, kind)
    assert got == typed and type(got) is type(typed)


def test_the_decoder_types_every_known_field_by_typed_alone():
    """One implementation: every known field a frame's header carries is typed by `typed_value`
    (no copy of its text cases in the decoder's loop)."""
    seen, real = [], codec.typed_value

    def spy(value, kind):
        seen.append((value, kind))
        return real(value, kind)

    fields = {"topic": "TopicTest", "queueId": 3, "sysFlag": 0, "unitMode": False}
    frame = codec.encode_command(codec.make_command(10, fields=fields))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(codec, "typed_value", spy)
        command = codec.decode_frame(frame)
    assert command.fields == fields
    assert sorted(seen) == sorted([("TopicTest", "str"), ("3", "int"), ("0", "int"),
                                   ("false", "bool")])  # (as the wire's text)


def _stored_outcome(body: bytes):
    """What stored_messages gives for a pull body: each message's dict, or the error's reason,
    offset and the messages before it."""
    try:
        return "value", [m.to_dict(payloads=True) for m in messages.stored_messages(body)]
    except messages.BodyError as e:
        return "error", (str(e), e.offset, [m.to_dict(payloads=True) for m in e.messages])


class _NeverFits:
    size = 1 << 40  # (no message holds it: every one read field by field)


def test_stored_messages_with_ipv4_hosts_read_as_field_by_field(recorded):
    """The middle of a stored message with IPv4 hosts is read at once (_IPV4_MIDDLE): the same
    messages, and the same errors where they lie, as read field by field (odd sizes, host
    flags switched to IPv6, bodies cut anywhere)."""
    bodies = [c.body for c in recorded[1] if c.messages and c.response]
    assert bodies
    rng = random.Random(2611)
    variants = []
    for body in bodies[:20]:
        variants.append(body)
        variants += [body[:cut] for cut in range(0, min(len(body), 400), 3)]
        for _ in range(60):
            b = bytearray(body)
            at = rng.choice([0, 32, 36, 40, 44, 48, 52, 60, 64, 72, 76, 80, 84, 92])
            if at + 4 <= len(b):
                value = rng.choice([0, 4, 0x10, 0x20, 0x30, rng.randrange(1 << 32)])
                b[at : at + 4] = (value & 0xFFFFFFFF).to_bytes(4, "big")
            variants.append(bytes(b))
    seen = set()
    for body in variants:
        fast = _stored_outcome(body)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(messages, "_IPV4_MIDDLE", _NeverFits)
            assert fast == _stored_outcome(body)
        seen.add(fast[0])
    assert seen == {"value", "error"}


def _lazy_outcome(body: bytes):
    try:
        return "value", [m.to_dict(payloads=True) for m in messages.stored_messages(body, True)]
    except messages.BodyError as e:
        return "error", (str(e), e.offset, [m.to_dict(payloads=True) for m in e.messages])


def test_stored_messages_read_lazily_are_the_same(recorded):
    """A pull response's messages are decoded without their LAZY fields (properties, topic,
    hosts, ids, CRC check), read when first asked for: the same messages (equal, the same
    dict, repr, pickled and copied), and the same errors where a body lies."""
    import copy
    import pickle

    from streamdissect.protocols.rocketmq.records import LAZY

    bodies = [c.body for c in recorded[1] if c.messages and c.response]
    rng = random.Random(2612)
    for body in bodies:
        eager = messages.stored_messages(body)
        lazy = messages.stored_messages(body, lazy=True)
        assert all(m._source is not None for m in lazy)  # (nothing read yet)
        assert lazy == eager and [repr(m) for m in lazy] == [repr(m) for m in eager]
        assert all(m._source is None for m in lazy)  # (read when compared)
        again = messages.stored_messages(body, lazy=True)  # (pickled, copied: read first)
        assert [pickle.loads(pickle.dumps(m)) for m in again] == eager
        assert [copy.copy(m) for m in messages.stored_messages(body, lazy=True)] == eager
        for cut in sorted(rng.sample(range(len(body)), min(len(body), 60))):
            assert _lazy_outcome(body[:cut]) == _stored_outcome(body[:cut])
    fresh = messages.stored_messages(bodies[0], lazy=True)[0]
    with pytest.raises(AttributeError):
        fresh.no_such_field  # noqa: B018
    assert fresh.msg_id and all(hasattr(fresh, name) for name in LAZY)


def test_usual_stored_messages_read_lazily_as_the_general_reader_reads_them(recorded):
    """A pull body's usual messages (IPv4 hosts, a known magic, sizes that hold) are read
    lazily by one struct and a few checks (messages._plain_lazy): the same messages, and the
    same errors where a body lies, as stored_message reads every one (bodies cut anywhere,
    sizes, magics, topic and properties lengths and host flags changed)."""
    bodies = [c.body for c in recorded[1] if c.messages and c.response]
    assert bodies
    rng = random.Random(2613)
    magics = [messages.spec.MAGIC_V1, messages.spec.MAGIC_V2, messages.spec.MAGIC_BLANK, 0]
    variants = []
    for body in bodies[:20]:
        first = messages.stored_messages(body)[0]
        # where the first message's body length, topic length and properties length are
        body_at = 88
        topic_at = body_at + 4 + len(first.body)
        props_at = topic_at + 1 + len(first.topic.encode())
        variants.append(body)
        variants += [body[:cut] for cut in range(0, min(len(body), 400), 3)]
        for _ in range(150):
            b = bytearray(body)
            for _change in range(rng.randint(1, 3)):
                at, width = rng.choice([(0, 4), (4, 4), (36, 4), (84, 4), (topic_at, 1),
                                        (topic_at, 2), (props_at, 2), (props_at + 1, 1)])
                if at == 4:
                    value = rng.choice(magics)
                else:
                    value = rng.choice([0, 1, 2, 0x10, 0x20, 0x7F, 0x80, 0xFF, 0xFFFF,
                                        rng.randrange(1 << 32)])
                if at + width <= len(b):
                    b[at : at + width] = (value & ((1 << 8 * width) - 1)).to_bytes(width, "big")
            variants.append(bytes(b))
    seen = set()
    for body in variants:
        fast = _lazy_outcome(body)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(messages, "_plain_lazy", lambda *args: None)
            assert fast == _lazy_outcome(body)
        seen.add(fast[0])
    assert seen == {"value", "error"}


def test_json_key_orders_shared_and_bounded(recorded, monkeypatch):
    """A JSON header's keys in their order (json_keys) are one tuple for every header with
    the known keys in that order (codec._KEY_ORDERS): equal to the header's own order, its
    json_extra the keys beyond the command's own, and no more than MAX_KEY_ORDERS kept,
    none with a key the codec does not know."""
    headers = recorded[0]
    orders = {}
    for header in headers:
        keys = codec._json_header(header)[8]
        assert keys == tuple(json.loads(header))
        if set(keys) <= set(codec.spec.JSON_KEYS):
            assert orders.setdefault(keys, keys) is keys
    assert orders
    monkeypatch.setattr(codec, "_KEY_ORDERS", {})
    rng = random.Random(2614)
    known = list(codec.spec.JSON_KEYS)
    for k in range(2000):
        keys = ["code"] + rng.sample(known[1:], rng.randrange(len(known)))
        rng.shuffle(keys)
        extra = [f"x{k}"] if k % 3 == 0 else []
        obj = {key: (1 if key in ("code", "opaque", "flag", "version") else None) for key in keys}
        obj.update((key, "v") for key in extra)
        if k % 5 == 0:
            obj["serializeTypeCurrentRPC"] = "JSON"
        header = json.dumps(obj).encode()
        parts = codec._json_header(header)
        assert parts[8] == tuple(obj)
        extra = {k: v for k, v in obj.items() if k not in codec.spec.JSON_KEYS[:-1]}
        assert parts[7] == (extra or None) and list(parts[7] or ()) == list(extra)
    assert 0 < len(codec._KEY_ORDERS) <= codec.MAX_KEY_ORDERS
    assert all(set(order) <= set(known) for order in codec._KEY_ORDERS)


def _header_by_the_rules(obj: dict):
    """What a JSON header object gives as its rules say, each number by codec._number in
    this order: code, opaque (then: a code is there), ext fields and remark, version, flag."""
    try:
        code, opaque = codec._number(obj, "code"), codec._number(obj, "opaque", 0)
        if code is None:
            return "error", "JSON header has no code"
        ext, remark = obj.get("extFields") or {}, obj.get("remark")
        if not isinstance(ext, dict) or not (remark is None or isinstance(remark, str)):
            return "error", "extFields or remark"
        version, flag = codec._number(obj, "version"), codec._number(obj, "flag", 0)
        if flag is None:  # (null: a command needs its flag's bits)
            return "error", "JSON header's flag is not an integer: None"
        return "value", (code, opaque, version, flag)
    except codec.HeaderError as e:
        return "error", str(e)


def test_json_header_numbers_read_inline_as_by_the_rules():
    """A JSON header's code, opaque, version and flag, read inline when all are plain
    integers, else each by _number: the same values, and the same error first, for every
    mix of integers, booleans, floats, text, null and absent keys, with good and bad ext
    fields and remarks."""
    import itertools

    values = [7, 0, True, 1.5, "3", None, "absent"]
    seen = set()
    for code, opaque, version, flag in itertools.product(values, repeat=4):
        for ext, remark in (({"a": "b"}, None), ([1], None), ({}, 5)):
            obj = {"extFields": ext, "remark": remark}
            for key, value in (("code", code), ("opaque", opaque), ("version", version),
                               ("flag", flag)):  # fmt: skip
                if value != "absent":
                    obj[key] = value
            expected = _header_by_the_rules(obj)
            try:
                parts = codec._json_header(json.dumps(obj).encode(), obj)
                got = "value", (parts[0], parts[3], parts[2], parts[4])
            except codec.HeaderError as e:
                got = "error", str(e)
            if expected == ("error", "extFields or remark"):
                assert got[0] == "error" and "extFields" in got[1]
            else:
                assert got == expected, obj
            seen.add(got[0])
    assert seen == {"value", "error"}
