"""Each message of the protocol table as a layout the dissector's runtime walks.

A layout is a list of nodes, one per wire field, each a dict that becomes a Lua table:
`kind` names the runtime's reader for the wire type (int, string, bytes, array, struct, map,
trailing, offset, chunk_header, rest, publish_messages), `field` the leaf it shows. A wire type
without a reader here, or a derived field without a rule, stops generation: a command added
to the table either reaches the plugin whole or the plugin is not made.
"""

from __future__ import annotations

import struct
from typing import Any

from streamdissect.protocols.stream import osiris
from streamdissect.protocols.stream.codes import RESPONSE_BIT, CommandKey
from streamdissect.protocols.stream.primitives import (
    BYTES,
    STRING,
    ArrayType,
    IntType,
    MapType,
    OffsetValueType,
    StructType,
    TrailingType,
    WireType,
)
from streamdissect.protocols.stream.records import SASL_KEY
from streamdissect.protocols.stream.spec import BOOL, CHUNK_HEADER, PUBLISH_MESSAGES, REST, Message
from streamdissect.protocols.stream.summary import SUMMARY_FIELDS
from streamdissect.wireshark.naming import (
    FieldType,
    GenerationError,
    Leaf,
    int_type,
    label,
    singular,
)

# Derived fields (computed by the codec, never on the wire): (command, field) -> where the
# runtime finds the value, (wire field, name in what that field's reader returns); None:
# the tree shows it already (each Publish message's publishing id).
DERIVED: dict[tuple[str, str], tuple[str, str] | None] = {
    ("Publish", "publishing_ids"): None,
    ("Publish", "record_count"): ("messages", "records"),
    ("Deliver", "record_count"): ("chunk", "num_records"),
    ("Deliver", "entry_count"): ("chunk", "num_entries"),
    ("Deliver", "crc_ok"): ("chunk_payload", "crc_ok"),
    ("SaslAuthenticate", "username"): ("sasl_data", "username"),
}
SECRET = "sasl_data"  # SaslAuthenticate's: PLAIN carries the password (records.redact_sasl)
# The chunk id is the offset of the chunk's first record: the name users filter by.
CHUNK_NAMES = {"chunk_id": "first_offset"}
STRING_TYPE, BYTES_TYPE, BOOL_TYPE = FieldType("string"), FieldType("bytes"), FieldType("bool")
COUNT = int_type(4, False)  # an array's or map's element count (int32 on the wire, >= 0)

# Entries: the same layout in Publish messages and in Osiris chunks (facts §1.5, §3.3).
ENTRY = {
    "offset": Leaf("offset", "entry", int_type(8, False), qualified=True),
    "size": Leaf("size", "entry", int_type(4, False), qualified=True),
    "compression": Leaf("compression", "entry", int_type(1, False), qualified=True),
    "records": Leaf("records", "entry", int_type(2, False), qualified=True),
    "uncompressed_length": Leaf("uncompressed_length", "entry", int_type(4, False), True),
    "length": Leaf("length", "entry", int_type(4, False), qualified=True),
    "data": Leaf("data", "entry", BYTES_TYPE, qualified=True),
}


def chunk_members() -> list[tuple[str, int, bool]]:
    """(codec name, width, signed) of each Osiris header field, from osiris.HEADER: the last
    field spans the format's remaining codes (`reserved` is read as u16 + u8)."""
    codes = osiris.HEADER.format.lstrip("<>!=@")
    names = osiris.HEADER_FIELDS
    widths = [struct.calcsize(">" + code) for code in codes]
    members = [(n, w, c.islower()) for n, w, c in zip(names[:-1], widths, codes, strict=False)]
    members.append((names[-1], sum(widths[len(names) - 1 :]), False))
    if sum(widths) != osiris.HEADER_SIZE:
        raise GenerationError(f"osiris.HEADER is {sum(widths)} bytes, not {osiris.HEADER_SIZE}")
    return members


class Layouts:
    """Walks messages into layouts, collecting every leaf it meets (in `leaves`)."""

    def __init__(self) -> None:
        self.leaves: list[Leaf] = list(ENTRY.values())
        self.secret: str | None = None  # the field of the current message that holds a secret

    def leaf(self, name: str, container: str | None, kind: FieldType, qualified=False) -> Leaf:
        found = Leaf(name, container, kind, qualified)
        self.leaves.append(found)
        return found

    def message(self, message: Message) -> dict[str, Any]:
        where = message.class_name or message.command
        self.secret = SECRET if message.key == SASL_KEY else None
        table: dict[str, Any] = {
            "command": message.command,
            "name": where,
            "response": message.response,
            "sender": message.sender,
            "corr": message.correlation_id,
            "code": message.code,
            "pairing": pairing(message),
            "versions": {
                version: [
                    {"name": f.name, "type": self.node(f.type, f.name, None, where)}
                    for f in message.fields_for(version)
                ]
                for version in message.versions
            },
            "derived": self.derived(message),
        }
        shown = {f.name for f in message.fields + message.derived
                 if isinstance(f.type, IntType) or f.type in (STRING, BOOL)}  # fmt: skip
        table["info"] = [name for name in SUMMARY_FIELDS if name in shown]
        return table

    def derived(self, message: Message) -> list[dict[str, Any]]:
        out = []
        wire = {f.name for f in message.fields}
        for field in message.derived:
            rule_key = (message.command, field.name)
            if rule_key not in DERIVED:
                raise GenerationError(f"{message.command}: no rule for derived field {field.name!r}")
            rule = DERIVED[rule_key]
            if rule is None:
                continue
            if rule[0] not in wire:
                raise GenerationError(f"{message.command}: {field.name!r} comes from {rule[0]!r}, "
                                      "which it does not have")  # fmt: skip
            out.append({"field": self.leaf(field.name, None, scalar_type(field.type, where=field.name)),
                        "from": list(rule)})  # fmt: skip
        return out

    def node(self, wire: WireType, name: str, container: str | None, where: str,
             qualified: bool = False) -> dict[str, Any]:  # fmt: skip
        if isinstance(wire, IntType):
            kind = int_type(wire.size, wire.fmt.islower())
            node: dict[str, Any] = {"kind": "int", "width": wire.size, "signed": kind.signed,
                                    "field": self.leaf(name, container, kind, qualified)}  # fmt: skip
            if name.endswith("timestamp"):
                node["ms_time"] = True
            return node
        if wire is STRING or wire is BYTES:
            text = wire is STRING
            node = {"kind": "string" if text else "bytes", "label": label(name),
                    "field": self.leaf(name, container, STRING_TYPE if text else BYTES_TYPE,
                                       qualified)}  # fmt: skip
            if name == self.secret and container is None:
                node["secret"] = True
            return node
        if isinstance(wire, ArrayType):
            element = wire.element
            if isinstance(element, StructType):
                inner = self.struct(element, singular(name), name, where)
            else:
                inner = self.node(element, singular(name), name, where)
            return {"kind": "array", "field": self.leaf(name, container, COUNT),
                    "min_size": max(element.min_size, 1), "element": inner}  # fmt: skip
        if isinstance(wire, StructType):
            return self.struct(wire, name, name, where)
        if isinstance(wire, MapType):
            return {"kind": "map", "field": self.leaf(name, container, COUNT),
                    "pair_size": wire.key.min_size + wire.value.min_size,
                    "key": self.node(wire.key, "key", name, where, qualified=True),
                    "value": self.node(wire.value, "value", name, where, qualified=True)}  # fmt: skip
        if isinstance(wire, TrailingType):
            return {"kind": "trailing", "inner": self.node(wire.inner, name, container, where)}
        if isinstance(wire, OffsetValueType):
            return {"kind": "offset", "carry_last": wire.last_may_carry,
                    "field": self.leaf(name, container, int_type(8, False)),
                    "timestamp": self.leaf(f"{name}_timestamp", container, int_type(8, True))}  # fmt: skip
        if wire is CHUNK_HEADER:
            return self.chunk_header(name)
        if wire is REST:
            return {"kind": "rest", "field": self.leaf(name, container, BYTES_TYPE),
                    "trailer": self.leaf("trailer", name, BYTES_TYPE, qualified=True)}  # fmt: skip
        if wire is PUBLISH_MESSAGES:
            return {"kind": "publish_messages", "field": self.leaf(name, container, COUNT),
                    "publishing_id": self.leaf("publishing_id", name, int_type(8, False)),
                    "filter_value": self.leaf("filter_value", name, STRING_TYPE)}  # fmt: skip
        raise GenerationError(f"{where}.{name}: no dissector reader for wire type "
                              f"{type(wire).__name__} ({wire.name})")  # fmt: skip

    def struct(self, wire: StructType, name: str, container: str, where: str) -> dict[str, Any]:
        members = [{"name": n, "type": self.node(t, n, container, where)} for n, t in wire.fields]
        return {"kind": "struct", "label": label(name), "members": members}

    def chunk_header(self, name: str) -> dict[str, Any]:
        members = []
        for member, width, signed in chunk_members():
            shown = CHUNK_NAMES.get(member, member)
            entry = {"name": member, "width": width, "signed": signed,
                     "field": self.leaf(shown, name, int_type(width, signed), qualified=True)}  # fmt: skip
            if member.endswith("timestamp"):
                entry["ms_time"] = True
            members.append(entry)
        return {"kind": "chunk_header", "size": osiris.HEADER_SIZE, "members": members,
                "field": self.leaf(name, None, FieldType("none"))}  # fmt: skip


def scalar_type(wire: WireType, where: str) -> FieldType:
    if isinstance(wire, IntType):
        return int_type(wire.size, wire.fmt.islower())
    if wire is STRING:
        return STRING_TYPE
    if wire is BOOL:
        return BOOL_TYPE
    raise GenerationError(f"derived field {where!r}: no dissector type for {wire.name}")


def pairing(message: Message) -> str | None:
    """How the dissector pairs the message, as analysis.latency does: a call by correlation
    id, or Tune (no id): the server's offer answered by the client's Tune."""
    if message.key & ~RESPONSE_BIT == CommandKey.TUNE:
        return "offer"
    return "call" if message.correlation_id else None

