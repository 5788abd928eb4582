"""A frame as a tree of every field, as tshark's `-V` shows one (`frames -V`).

The header fields and the command's own, a Deliver's chunk header and each data entry, a
Publish's messages; sub-batches inflated (their codec named) and each message's AMQP 1.0
sections (messages.py walks them, with osiris.py, compression.py and amqp.py decoding).
Bodies are text when they are printable UTF-8, else a hex dump, cut at `max_body` bytes;
`bodies=False` leaves them out. Damage is said where it is found, after what came before it.
Each line is indented by four spaces a level; the caller writes the frame's own first line.
"""

from __future__ import annotations

import json
import re
from itertools import islice
from typing import Any

from streamdissect.protocols.stream.codes import ChunkType, code_name, offset_type_name
from streamdissect.protocols.stream.compression import DEFAULT_MAX_DECOMPRESSED
from streamdissect.protocols.stream.messages import (
    DEFAULT_MAX_BODY,
    TIME_PROPERTIES,
    EntryView,
    Message,
    amqp_body,
    compression_name,
    deliver_data_kept,
    frame_entries,
)
from streamdissect.protocols.stream.records import COMMON_COLUMNS, Record, jsonable
from streamdissect.protocols.stream.spec import BY_KEY
from streamdissect.protocols.stream.summary import SUMMARY_FIELDS, fields_summary
from streamdissect.protocols.view import hex_lines, wall_clock_ms

INDENT = "    "
PAYLOAD_FIELDS = frozenset(("chunk_payload", "messages"))  # shown as entries, not as bytes
MOST_ITEMS = 64  # items of a list or map shown before "... N more"
PADS = [INDENT * depth for depth in range(16)]
PLAIN = frozenset((int, str, bool, float, type(None)))  # what jsonable leaves as it is
# a string json.dumps writes as it is, between quotes (the usual one: no escape to make)
AS_IS = re.compile(r'[^"\\\x00-\x1f\x7f]*\Z')
ANNOTATED = frozenset(("key", "code", "closing_code", "offset_type"))
CHUNK_ANNOTATED = frozenset(("chunk_type", "timestamp", "magic_version", "crc"))
CHUNK_TYPES: dict[int, str] = {}  # a known chunk type's name, made once
KEY_TEXT: dict[int, str] = {}  # a known key as its line shows it, made once
# a record's common fields as their lines show them, by (class, depth, values): most frames
# of a capture share a few (a Publish's differ by size only)
HEADS: dict[tuple, str] = {}
SHOWN: dict[type, Any] = {}  # a record class's fields as _record_fields reads them
SUMMARY_PRESENT: dict[type, tuple[str, ...]] = {}  # the SUMMARY_FIELDS its dicts have
MOST_HEADS = 4096


class Tree:
    """Lines of text, each at a depth."""

    def __init__(self, max_body: int | None, bodies: bool,
                 max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> None:  # fmt: skip
        self.lines: list[str] = []
        self.max_body = max_body
        self.bodies = bodies
        self.max_decompressed = max_decompressed

    def add(self, depth: int, text: str) -> None:
        self.lines.append(_pad(depth) + text)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n" if self.lines else ""


def _pad(depth: int) -> str:
    """The indent of a line at `depth`."""
    return PADS[depth] if depth < len(PADS) else INDENT * depth


def frame_tree(record: Any, show_secrets: bool = False, max_body: int | None = DEFAULT_MAX_BODY,
               bodies: bool = True, depth: int = 1,
               max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> str:  # fmt: skip
    """The tree of a record's fields (Record, Malformed or Unknown), as text lines; a
    sub-batch inflates to at most `max_decompressed` bytes (else it is said damaged)."""
    return _tree(record, _record_fields(record, show_secrets), max_body, bodies, depth,
                 max_decompressed)  # fmt: skip


def frame_view(record: Any, show_secrets: bool = False, max_body: int | None = DEFAULT_MAX_BODY,
               bodies: bool = True) -> tuple[str, str]:  # fmt: skip
    """(the frame's line, as summary.frame_summary writes it; its tree, as frame_tree), from
    one reading of its fields."""
    fields = _record_fields(record, show_secrets)
    present = SUMMARY_PRESENT.get(record.__class__)
    if present is None:
        present = SUMMARY_PRESENT[record.__class__] = tuple(
            name for name in SUMMARY_FIELDS if name in fields)
    line = fields_summary(fields, fields.get("command") or type(record).__name__, None, present)
    return line, _tree(record, fields, max_body, bodies, 1, DEFAULT_MAX_DECOMPRESSED)


def _tree(record: Any, fields: dict[str, Any], max_body: int | None, bodies: bool, depth: int,
          max_decompressed: int) -> str:  # fmt: skip
    tree = Tree(max_body, bodies, max_decompressed)
    lines, pad = tree.lines, _pad(depth)
    items = iter(fields.items())
    if isinstance(record, Record):  # (its first fields: COMMON_COLUMNS, the codec's values)
        head = (record.__class__, depth, record.key, record.version, record.size,
                record.correlation_id, record.code, record.truncated)  # fmt: skip
        text = HEADS.get(head)
        if text is None:
            text = _head(fields, depth)
            if len(HEADS) >= MOST_HEADS:
                HEADS.clear()
            HEADS[head] = text
        lines.append(text)
        items = islice(items, len(COMMON_COLUMNS), None)
    for name, value in items:
        cls = value.__class__
        if cls is int and name not in ANNOTATED:  # (the usual field, written at once)
            lines.append(f"{pad}{name}: {value}")
        elif value is None:
            lines.append(f"{pad}{name}: null")
        elif cls is str and name not in ANNOTATED and name != "raw" and AS_IS.match(value):
            lines.append(f'{pad}{name}: "{value}"')
        elif cls is bool:
            lines.append(f"{pad}{name}: {'true' if value else 'false'}")
        elif cls is list and all(v.__class__ is int for v in value):  # (publishing ids)
            lines.append(f"{pad}{name}: [{', '.join(map(str, value))}]")
        elif name == "chunk" and isinstance(value, dict):
            _chunk(tree, depth, value, fields["crc_ok"] if "crc_ok" in fields
                   else getattr(record, "crc_ok", None))  # fmt: skip
        elif name == "raw" and isinstance(value, str):
            tree.add(depth, f"raw: {len(value) // 2} bytes")
            _hex_dump(tree, depth + 1, bytes.fromhex(value), max_body)
        else:
            _field(tree, depth, name, value)
    if record.__class__.__name__ == "Deliver" and record.chunk is not None:
        _deliver_data(tree, depth, record)
    elif getattr(record, "command", None) == "Publish" and getattr(record, "messages", None):
        _entries(tree, depth, record, publish=True)
    return tree.text()


def _head(fields: dict[str, Any], depth: int) -> str:
    """The common fields' lines (a record's first ones) as one text."""
    tree = Tree(None, False)
    for name in COMMON_COLUMNS:
        _field(tree, depth, name, fields[name])  # (as _tree's loop writes each)
    return "\n".join(tree.lines)


def _record_fields(record: Any, show_secrets: bool) -> dict[str, Any]:
    """The record's dict (to_dict: secrets redacted) without the payload bytes, which are
    shown as entries and messages; a payload class's dict made without hexing them first."""
    shown = SHOWN.get(record.__class__)
    if shown is None:
        shown = SHOWN[record.__class__] = _shown_fields(record)
    if shown:
        fields = record.common_dict()
        for name in shown[0]:
            value = getattr(record, name)
            cls = value.__class__
            plain = cls in PLAIN or (cls is list and all(v.__class__ is int for v in value)) or (
                cls is dict and all(v.__class__ in PLAIN for v in value.values()))  # (a chunk)
            fields[name] = value if plain else jsonable(value)
        if record.truncated and (cut := record.cut) is not None:  # (as to_dict)
            fields["cut"] = dict(cut)
        if shown[1]:
            fields["crc_ok"] = record.crc_ok
        return fields
    fields = record.to_dict(show_secrets=show_secrets)
    return {name: value for name, value in fields.items() if name not in PAYLOAD_FIELDS}


def _shown_fields(record: Any) -> tuple[tuple[str, ...], bool] | tuple[()]:
    """A record class's body fields read one by one (not its payloads), and whether it has
    crc_ok; () for a class whose to_dict makes its fields (secrets redacted there)."""
    names = getattr(record, "body_fields", ())
    if PAYLOAD_FIELDS.intersection(names) or type(record).to_dict is Record.to_dict:
        return tuple(n for n in names if n not in PAYLOAD_FIELDS), hasattr(record, "crc_ok")
    return ()


def _annotated(name: str, value: Any) -> str:
    """A field's value with what it means where a number alone says little."""
    if name not in ANNOTATED or value is None:
        return _scalar(value)
    if name == "key" and value in KEY_TEXT:
        return KEY_TEXT[value]
    if name == "key" and isinstance(value, int):
        message = BY_KEY.get(value)
        text = f"0x{value:04x}" + (f" ({message.class_name})" if message else " (unknown)")
        if message is not None:
            KEY_TEXT[value] = text
        return text
    if name in ("code", "closing_code") and isinstance(value, int):
        return f"0x{value:02x} ({code_name(value)})"
    if name == "offset_type" and isinstance(value, int):
        return f"{value} ({offset_type_name(value)})"
    return _scalar(value)


def _field(tree: Tree, depth: int, name: str, value: Any) -> None:
    if value.__class__ in PLAIN:
        tree.add(depth, f"{name}: {_annotated(name, value)}")
    elif isinstance(value, dict):
        tree.add(depth, f"{name}:" + ("" if value else " {}"))
        _mapping(tree, depth + 1, value)
    elif isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        tree.add(depth, f"{name}: {len(value)} items")
        _items(tree, depth + 1, value)
    else:
        tree.add(depth, f"{name}: {_annotated(name, value)}")


def _chunk(tree: Tree, depth: int, chunk: dict[str, Any], ok: bool | None) -> None:
    """A Deliver's chunk header; `ok`: whether its CRC matches the data (None: not kept)."""
    tree.add(depth, "chunk:")
    lines, pad = tree.lines, _pad(depth + 1)
    for name, value in chunk.items():
        shown = str(value) if value.__class__ is int else _scalar(value)
        if name in CHUNK_ANNOTATED:
            shown = _chunk_field(name, value, shown, ok)
        lines.append(f"{pad}{name}: {shown}")


def _chunk_field(name: str, value: Any, shown: str, ok: bool | None) -> str:
    """A chunk header field that says more than its number: its type's name, the time, hex."""
    if name == "chunk_type" and isinstance(value, int):
        return shown + f" ({_chunk_type(value)})"
    if name == "timestamp" and isinstance(value, int):
        return shown + f" ({wall_clock_ms(value)}, the broker's clock)"
    if name in ("magic_version", "crc") and isinstance(value, int):
        shown = f"0x{value:0{2 if name == 'magic_version' else 8}x}"
        if name == "crc":
            shown += {True: " (matches the data)", False: " (does NOT match the data)",
                      None: " (data not kept: not checked)"}[ok]  # fmt: skip
    return shown


def _chunk_type(value: int) -> str:
    text = CHUNK_TYPES.get(value)
    if text is None:
        try:
            text = ChunkType(value).name.lower().replace("_", " ")
        except ValueError:
            return "unknown"
        CHUNK_TYPES[value] = text
    return text


def _deliver_data(tree: Tree, depth: int, record: Any) -> None:
    if not deliver_data_kept(record):
        tree.add(depth, "data: not kept (only the chunk's head was read)")
        return
    chunk_type = record.chunk["chunk_type"]
    if chunk_type != ChunkType.USER:
        tracking = record.tracking()
        tree.add(depth, f"tracking ({_chunk_type(chunk_type)}):")
        if isinstance(tracking, list):
            for entry in tracking:
                extra = "" if entry.chunk_id is None else f" chunk_id={entry.chunk_id}"
                tree.add(depth + 1, f"type {entry.type} id {json.dumps(entry.id)}: "
                                    f"{entry.value}{extra}")  # fmt: skip
        else:
            tree.add(depth + 1, f"[damaged] at byte {tracking.position}: {tracking.reason}")
        return
    _entries(tree, depth, record, publish=False)
    if record.trailer:
        tracking = record.tracking()
        tree.add(depth, f"trailer: {len(record.trailer)} bytes of tracking")
        if isinstance(tracking, list):
            for entry in tracking:
                tree.add(depth + 1, f"type {entry.type} id {json.dumps(entry.id)}: {entry.value}")
        else:
            tree.add(depth + 1, f"[damaged] at byte {tracking.position}: {tracking.reason}")


def _entries(tree: Tree, depth: int, record: Any, publish: bool) -> None:
    """The entries one at a time (one sub-batch's inflated records held at once), their
    count written above them once known."""
    head = len(tree.lines)
    tree.add(depth, "")
    entries = messages = 0
    for entry in frame_entries(record, tree.max_decompressed):
        entries += 1
        messages += len(entry.messages)
        _entry(tree, depth + 1, entry, publish)
    tree.lines[head] += f"{'messages' if publish else 'data'}: {entries} entries, " \
                        f"{messages} messages"  # fmt: skip


def _entry(tree: Tree, depth: int, entry: EntryView, publish: bool) -> None:
    if publish:
        where = "entry" if entry.publishing_id is None else f"publishing id {entry.publishing_id}"
    else:
        where = f"entry at byte {entry.position}"
    if entry.error is not None and not entry.size:
        tree.add(depth, f"{where}: [damaged] {entry.error}")
        return
    if entry.sub_batch:
        what = (f"sub-batch, {compression_name(entry.compression)}, {entry.num_records} records,"
                f" {entry.size} bytes ({entry.uncompressed_length} uncompressed)")  # fmt: skip
    else:
        what = f"simple, {entry.size} bytes"
    if not publish and entry.offset is not None:
        last = entry.offset + max(entry.num_records - 1, 0)
        what += f", offset {entry.offset}" + (f"..{last}" if last != entry.offset else "")
    if entry.filter_value is not None:
        what += f", filter value {json.dumps(entry.filter_value, ensure_ascii=False)}"
    tree.add(depth, f"{where}: {what}")
    for message in entry.messages:
        message_tree(tree, depth + 1, message)
    if entry.error is not None:
        tree.add(depth + 1, f"[damaged] {entry.error}")


def message_tree(tree: Tree, depth: int, message: Message) -> None:
    """A message's AMQP 1.0 sections (or its raw bytes), each section a branch."""
    amqp = message.amqp
    place = f", offset {message.offset}" if message.offset is not None else ""
    kind = "AMQP 1.0" if amqp.is_amqp else "not AMQP 1.0"
    tree.lines.append(f"{_pad(depth)}message {message.index}{place}: {len(message.data)} bytes,"
                      f" {kind}")  # fmt: skip
    depth += 1
    if amqp.header is not None:
        _section(tree, depth, "header", amqp.header)
    if amqp.delivery_annotations is not None:
        _section(tree, depth, "delivery_annotations", amqp.delivery_annotations)
    if amqp.message_annotations is not None:
        _section(tree, depth, "message_annotations", amqp.message_annotations)
    if amqp.properties is not None:
        tree.add(depth, "properties:")
        for name, value in amqp.properties.items():
            if value is None:
                continue
            if name in TIME_PROPERTIES and isinstance(value, int):
                tree.add(depth + 1, f"{name}: {wall_clock_ms(value)} ({value} ms)")
            else:
                _value(tree, depth + 1, name, value)
    if amqp.application_properties is not None:
        _section(tree, depth, "application_properties", amqp.application_properties)
    _body(tree, depth, message, amqp)
    if amqp.footer is not None:
        _section(tree, depth, "footer", amqp.footer)
    if amqp.error is not None:
        tree.add(depth, f"[damaged] {amqp.error} (the sections before it are shown)")


def _section(tree: Tree, depth: int, name: str, value: Any) -> None:
    if isinstance(value, dict) and "value" in value and len(value) == 1 and name == "header":
        value = value["value"]  # (a header that is not a list: shown as it came)
    if isinstance(value, dict):
        tree.add(depth, f"{name}:" + ("" if value else " {}"))
        _mapping(tree, depth + 1, value)
    else:
        _value(tree, depth, name, value)


def _body(tree: Tree, depth: int, message: Message, amqp: Any) -> None:
    kind = amqp.body_kind or "data"
    if kind == "data" and amqp.is_amqp and not amqp.body:
        return  # (no body section)
    if not tree.bodies:
        tree.add(depth, f"body ({kind}, {amqp.body_size} bytes): left out (--no-bodies)")
        return
    body = amqp_body(amqp, message.data, tree.max_body)
    cut = f", first {tree.max_body} shown" if body.truncated else ""
    if body.encoding == "text":
        text = body.value  # (as _scalar writes a string)
        text = f'"{text}"' if AS_IS.match(text) else json.dumps(text, ensure_ascii=False)
        tree.lines.append(f"{_pad(depth)}body ({kind}, {body.size} bytes, text{cut}): {text}")
    elif body.encoding == "hex":
        tree.add(depth, f"body ({kind}, {body.size} bytes, binary{cut}):")
        _hex_dump(tree, depth + 1, bytes.fromhex(body.value), None)
    else:
        label = f"body ({kind}, {_type_name(body.value)}{cut})"
        if isinstance(body.value, (dict, list)):
            tree.add(depth, f"{label}:")
            (_mapping if isinstance(body.value, dict) else _items)(tree, depth + 1, body.value)
        else:
            tree.add(depth, f"{label}: {_scalar(body.value)}")


def _hex_dump(tree: Tree, depth: int, data: bytes, limit: int | None) -> None:
    for line in hex_lines(data, limit):
        tree.add(depth, line)


# --- AMQP values ---------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    from streamdissect.protocols.stream.amqp import Described, Opaque, Symbol

    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    names = ((int, "integer"), (float, "floating point"), (str, "string"), (bytes, "binary"),
             (Symbol, "symbol"), (dict, "map"), (list, "list"), (Described, "described"),
             (Opaque, "undecoded type"))  # fmt: skip
    for cls, name in names:
        if isinstance(value, cls):
            return name
    return type(value).__name__.lower()  # (uuid)


def _scalar(value: Any) -> str:
    """A value on one line: JSON strings, true/false/null, symbols and binaries marked."""
    cls = value.__class__
    if cls is int:
        return str(value)
    if cls is str and AS_IS.match(value):
        return f'"{value}"'
    if cls is list and all(v.__class__ is int for v in value):  # (publishing ids)
        return "[" + ", ".join(map(str, value)) + "]"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    from streamdissect.protocols.stream.amqp import Opaque, Symbol

    if isinstance(value, Symbol):
        return f"symbol {json.dumps(value.name, ensure_ascii=False)}"
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        return f"binary {raw[:MOST_ITEMS].hex()}" + (f"... ({len(raw)} bytes)"
                                                      if len(raw) > MOST_ITEMS else "")  # fmt: skip
    if isinstance(value, Opaque):
        return f"type 0x{value.code:02x} {value.raw[:MOST_ITEMS].hex()}"
    if isinstance(value, (dict, list, tuple)):
        from streamdissect.protocols.stream.amqp import to_json

        return json.dumps(to_json(value), ensure_ascii=False)
    return str(value)


def _value(tree: Tree, depth: int, name: str, value: Any) -> None:
    from streamdissect.protocols.stream.amqp import Described

    if isinstance(value, dict):
        tree.add(depth, f"{name}: map" + ("" if value else " {}"))
        _mapping(tree, depth + 1, value)
    elif isinstance(value, (list, tuple)):
        tree.add(depth, f"{name}: list of {len(value)}")
        _items(tree, depth + 1, list(value))
    elif isinstance(value, Described):
        tree.add(depth, f"{name}: described, descriptor {_scalar(value.descriptor)}")
        _value(tree, depth + 1, "value", value.value)
    else:
        tree.add(depth, f"{name}: {_scalar(value)}")


def _mapping(tree: Tree, depth: int, mapping: dict) -> None:
    for i, (key, value) in enumerate(mapping.items()):
        if i == MOST_ITEMS:
            tree.add(depth, f"... {len(mapping) - MOST_ITEMS} more")
            return
        _value(tree, depth, key if isinstance(key, str) else _scalar(key), value)


def _items(tree: Tree, depth: int, items: list) -> None:
    for i, value in enumerate(items):
        if i == MOST_ITEMS:
            tree.add(depth, f"... {len(items) - MOST_ITEMS} more")
            return
        if isinstance(value, tuple) and len(value) == 2:  # (a map with unhashable keys: pairs)
            _value(tree, depth, f"[{i}] key {_scalar(value[0])}", value[1])
        else:
            _value(tree, depth, f"[{i}]", value)
