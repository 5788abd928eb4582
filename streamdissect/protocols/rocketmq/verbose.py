"""A RocketMQ frame as a tree of every field (`frames -V`), as tshark's `-V` shows one.

The envelope and header (code named, as a request or as a response to its request;
language, version, opaque, the flag's bits, remark, the ext fields as sent and the ones the
header knows, named and typed), then the body: each message of a send, a batch or a pull
response (topic, queue, offsets, ids, tags, keys, the properties map, a stored one's hosts,
times and body CRC checked, its body inflated when compressed, as text or a hex dump cut at
`max_body` bytes), or a fastjson body. Damage is said where it is found: a body whose
messages lie (after the messages before it), a body that does not inflate, a CRC that does
not match. Each line is indented four spaces a level.
"""

from __future__ import annotations

import json
from typing import Any

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.message_view import Held, frame_messages, message_fields
from streamdissect.protocols.rocketmq.records import Malformed, RemotingCommand
from streamdissect.protocols.rocketmq.summary import frame_summary
from streamdissect.protocols.view import DEFAULT_MAX_BODY, hex_lines, wall_clock_ms

INDENT = "    "
MOST_ITEMS = 64  # entries of a map or list shown before "... N more"
FLAG_BITS = ((spec.RESPONSE_FLAG, "response"), (spec.ONEWAY_FLAG, "oneway"))


def frame_view(record: Any, max_body: int | None = DEFAULT_MAX_BODY,
               bodies: bool = True) -> tuple[str, str]:  # fmt: skip
    """(the frame's line, as summary.frame_summary writes it; the tree under it)."""
    lines: list[str] = []
    if isinstance(record, Malformed):
        _malformed(lines, record)
    else:
        _header(lines, record)
        _body(lines, record, max_body, bodies)
    return frame_summary(record), "".join(line + "\n" for line in lines)


def _add(lines: list[str], depth: int, text: str) -> None:
    lines.append(INDENT * depth + text)


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _malformed(lines: list[str], record: Malformed) -> None:
    _add(lines, 1, f"size: {record.size}")
    _add(lines, 1, f"[malformed] at byte {record.offset}: {record.reason}")
    if record.truncated:
        _add(lines, 1, "truncated: true (bytes of the frame are missing)")
    _add(lines, 1, f"raw: {len(record.raw)} bytes kept")
    for line in hex_lines(record.raw):
        _add(lines, 2, line)


def _header(lines: list[str], record: RemotingCommand) -> None:
    kind = "response" if record.response else "request"
    _add(lines, 1, f"size: {record.size}")
    _add(lines, 1, f"serialization: {record.serialize_name} (header {record.header_length} "
                   f"bytes)")  # fmt: skip
    _add(lines, 1, f"code: {record.code} ({record.code_name}, a {kind} code)")
    if record.response:
        asked = ("not in the capture" if record.request_code is None else
                 f"{spec.request_name(record.request_code)} ({record.request_code})")
        _add(lines, 1, f"answers: {asked}")
    _add(lines, 1, f"language: {_text(record.language)}")
    _add(lines, 1, f"version: {record.version}")
    _add(lines, 1, f"opaque: {record.opaque}")
    bits = [name for bit, name in FLAG_BITS if record.flag & bit]
    _add(lines, 1, f"flag: 0x{record.flag & 0xFFFFFFFF:08x} ("
                   f"{', '.join(bits) if bits else 'request, a response expected'})")  # fmt: skip
    _add(lines, 1, f"remark: {_text(record.remark)}")
    _mapping(lines, 1, "extFields", record.ext)
    if record.fields:
        _mapping(lines, 1, "fields (named, typed)", record.fields)
    if record.json_extra:
        _mapping(lines, 1, "other header keys", record.json_extra)
    if record.truncated:
        _add(lines, 1, "truncated: true (bytes of the frame are missing)")


def _mapping(lines: list[str], depth: int, name: str, mapping: dict) -> None:
    _add(lines, depth, f"{name}:" + ("" if mapping else " {}"))
    for i, (key, value) in enumerate(mapping.items()):
        if i == MOST_ITEMS:
            _add(lines, depth + 1, f"... {len(mapping) - MOST_ITEMS} more")
            return
        _add(lines, depth + 1, f"{key}: {_text(value)}")


def _body(lines: list[str], record: RemotingCommand, max_body: int | None,
          bodies: bool) -> None:  # fmt: skip
    _add(lines, 1, f"body: {len(record.body)} bytes")
    held = frame_messages(record)
    if record.messages is not None:
        _add(lines, 1, f"messages: {len(held)}")
        for one in held:
            _message(lines, 2, one, max_body, bodies)
    elif record.body_json is not None:
        _add(lines, 2, f"fastjson: {_cut(_text(record.body_json), max_body)}")
    elif record.body_text is not None:
        _add(lines, 2, f"text (not fastjson that parses): {_cut(record.body_text, max_body)}")
    if record.body_error is not None:
        at = "" if record.body_error_offset is None else f" at byte {record.body_error_offset}"
        _add(lines, 2, f"[damaged]{at}: {record.body_error}" + (
            " (the messages before it are shown)" if held else ""))  # fmt: skip


def _cut(text: str, most: int | None) -> str:
    return text if most is None or len(text) <= most else f"{text[:most]}... ({len(text)})"


def _message(lines: list[str], depth: int, held: Held, max_body: int | None,
             bodies: bool) -> None:  # fmt: skip
    m = held.message
    fields = message_fields(held, max_body, bodies)
    stored = m.total_size is not None
    _add(lines, depth, f"message {held.index}: topic {_text(m.topic)}, queue {m.queue_id}"
                       + (f", queue offset {m.queue_offset}" if stored else "")
                       + f", {'stored' if stored else 'sent'}")  # fmt: skip
    depth += 1
    _add(lines, depth, f"msgId: {_text(m.msg_id)}")
    if m.offset_msg_id is not None:
        _add(lines, depth, f"offsetMsgId: {m.offset_msg_id}")
    _add(lines, depth, f"tags: {_text(m.tags)}")
    _add(lines, depth, f"keys: {_text(m.keys)}")
    _mapping(lines, depth, "properties", m.properties)
    _add(lines, depth, f"flag: {m.flag}")
    if m.sys_flag is not None:
        _add(lines, depth, f"sysFlag: 0x{m.sys_flag & 0xFFFFFFFF:x}"
                           + (f" (compressed, {m.compression})" if m.compressed else ""))
    if stored:
        _stored(lines, depth, m)
    _message_body(lines, depth, fields, m, max_body)


def _stored(lines: list[str], depth: int, m: Any) -> None:
    _add(lines, depth, f"storeSize: {m.total_size}")
    _add(lines, depth, f"magic: 0x{m.magic & 0xFFFFFFFF:08x}")
    crc = "matches the body" if m.crc_ok else "does NOT match the body"
    _add(lines, depth, f"bodyCRC: 0x{m.body_crc & 0xFFFFFFFF:08x} ({crc})")
    _add(lines, depth, f"physicalOffset: {m.physical_offset}")
    _add(lines, depth, f"bornTimestamp: {m.born_timestamp} ({wall_clock_ms(m.born_timestamp)})")
    _add(lines, depth, f"bornHost: {m.born_host}")
    _add(lines, depth, f"storeTimestamp: {m.store_timestamp} "
                       f"({wall_clock_ms(m.store_timestamp)})")  # fmt: skip
    _add(lines, depth, f"storeHost: {m.store_host}")
    _add(lines, depth, f"reconsumeTimes: {m.reconsume_times}")
    _add(lines, depth, f"preparedTransactionOffset: {m.prepared_transaction_offset}")


def _message_body(lines: list[str], depth: int, fields: dict, m: Any,
                  max_body: int | None) -> None:  # fmt: skip
    size = fields["body_size"]
    wire = f", {len(m.body)} on the wire ({m.compression})" if m.compressed else ""
    if fields["error"] is not None:
        _add(lines, depth, f"[damaged] body {len(m.body)} bytes, not inflated: "
                           f"{fields['error']}")  # fmt: skip
        if "body" in fields:  # (the bytes as they are on the wire)
            wire = ""
    if "body" not in fields:
        _add(lines, depth, f"body ({size} bytes{wire}): left out (--no-bodies)")
        return
    cut = f", first {max_body} shown" if fields["body_truncated"] else ""
    if fields["body_encoding"] == "text":
        _add(lines, depth, f"body ({size} bytes{wire}, text{cut}): {_text(fields['body'])}")
        return
    _add(lines, depth, f"body ({size} bytes{wire}, binary{cut}):")
    for line in hex_lines(bytes.fromhex(fields["body"])):
        _add(lines, depth + 1, line)
