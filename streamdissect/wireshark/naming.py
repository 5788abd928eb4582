"""The dissector's filter fields, named from the leaves of the protocol table's layouts.

Every leaf (an integer, a string, an array's count, ...) is a Wireshark field
`rabbitmq_stream.NAME`. NAME is the leaf's own name, so that one filter finds a value wherever
it travels: `rabbitmq_stream.publishing_id == 42` matches the Publish that sent it, its
confirm and its error. An array's scalar elements take the array's name in the singular
(`publishing_ids` -> `publishing_id`). A leaf is qualified by the field it sits in
(`commands.key`, `brokers.reference`) when its own name is a frame header field's or is used
by a leaf of another kind; map keys and values, chunk-header and entry fields are always
qualified (`properties.key`, `chunk.first_offset`). Integer leaves of one name but several
widths or signs share the smallest type that holds them all (Subscribe's u16 and Credit's
i16 `credit`: int32).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

PROTOCOL = "rabbitmq_stream"
# value-name tables of the generated file (NAMES.x) by leaf name, and leaves shown in hex
NAMED = {"code": "codes", "offset_type": "offset_types", "chunk_type": "chunk_types",
         "compression": "compressions", "key": "commands"}  # fmt: skip
HEX = frozenset({"key", "magic_version", "crc"})
_WORDS = {"id": "ID", "crc": "CRC", "ms": "ms", "sasl": "SASL"}


class GenerationError(Exception):
    """The table holds something the dissector cannot show: generation refuses it."""


@dataclass(frozen=True)
class FieldType:
    kind: str  # "int", "string", "bytes", "bool", "none", "framenum", "relative_time"
    width: int = 0  # integers: bytes
    signed: bool = False
    detail: str = ""  # framenum: "REQUEST" or "RESPONSE"


@dataclass(frozen=True)
class Leaf:
    """One value of a layout, before its filter name is settled."""

    name: str
    container: str | None  # the field it sits in; None at a frame's top level
    type: FieldType
    qualified: bool = False  # always named container.name

    @property
    def full(self) -> str:
        return f"{self.container}.{self.name}" if self.container else self.name


def int_type(width: int, signed: bool) -> FieldType:
    return FieldType("int", width, signed)


def merge(a: FieldType, b: FieldType) -> FieldType | None:
    """The type holding values of both, or None when there is none."""
    if a == b:
        return a
    if a.kind != "int" or b.kind != "int":
        return None
    if not a.signed and not b.signed:
        return int_type(max(a.width, b.width), False)
    need = max(t.width if t.signed else 2 * t.width for t in (a, b))
    width = next((w for w in (1, 2, 4, 8) if w >= need), None)
    return None if width is None else int_type(width, True)


def label(name: str) -> str:
    words = name.rsplit(".", 1)[-1].split("_")
    words = [_WORDS.get(w, w) for w in words]
    return " ".join(words)[:1].upper() + " ".join(words)[1:]


def singular(name: str) -> str:
    return name[:-1] if name.endswith("s") else name + "_item"


@dataclass
class Naming:
    """Filter names (without the protocol prefix) of every leaf and the declared types."""

    names: dict[Leaf, str]
    types: dict[str, FieldType]

    def __getitem__(self, leaf: Leaf) -> str:
        return self.names[leaf]


def settle(leaves: Iterable[Leaf], header: dict[str, FieldType]) -> Naming:
    """Name every leaf: its own name where that is unambiguous, else container.name."""
    unique = list(dict.fromkeys(leaves))
    names: dict[Leaf, str] = {}
    types: dict[str, FieldType] = dict(header)
    for leaf in unique:  # top-level leaves first: they own their names
        if leaf.container is not None:
            continue
        if leaf.name in header:
            raise GenerationError(f"field {leaf.name!r} has the name of a frame header field")
        _claim(names, types, leaf, leaf.name, strict=True)
    shared: dict[str, list[Leaf]] = {}
    for leaf in unique:
        if leaf.container is None:
            continue
        if leaf.qualified or leaf.name in header:
            _claim(names, types, leaf, leaf.full, strict=True)
        else:
            shared.setdefault(leaf.name, []).append(leaf)
    for name, group in shared.items():
        fits = name in types or _merged([leaf.type for leaf in group]) is not None
        for leaf in group:
            if not (fits and _claim(names, types, leaf, name, strict=False)):
                _claim(names, types, leaf, leaf.full, strict=True)
    return Naming(names, types)


def _merged(kinds: list[FieldType]) -> FieldType | None:
    result: FieldType | None = kinds[0]
    for kind in kinds[1:]:
        result = None if result is None else merge(result, kind)
    return result


def _claim(names: dict, types: dict, leaf: Leaf, name: str, strict: bool) -> bool:
    known = types.get(name)
    kind = leaf.type if known is None else merge(known, leaf.type)
    if kind is None:
        if strict:
            raise GenerationError(f"{name!r}: a {leaf.type.kind} and a {known.kind} (not shared)")  # type: ignore[union-attr]
        return False
    types[name] = kind
    names[leaf] = name
    return True
