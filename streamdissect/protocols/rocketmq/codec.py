"""RocketMQ remoting frames to records and back (I/O-free).

A frame is `total:i32` (the bytes after it), `word:i32` (high byte: the header's
serialization, spec.JSON or spec.ROCKETMQ; low 3 bytes: its length), the header, the body.

    decode_frame(frame) -> RemotingCommand | Malformed     (never raises)
    encode_command(command) -> bytes                       (total length included)
    make_command(code, fields=..., ...) -> RemotingCommand (a record to encode)

A JSON header is an object with code, language (a name), version, opaque, flag, remark,
extFields (values text, numbers or booleans, as the client wrote them) and
serializeTypeCurrentRPC; a ROCKETMQ header is code:i16, language:u8, version:i16,
opaque:i32, flag:i32, remark (i32 length, bytes), ext fields (i32 length, then key i16
length + key, value i32 length + value, repeated). The ext fields a header of spec.py knows
are also `fields`, named and typed; a body is read as the code says (spec.py): messages, a
batch, a pull response's stored messages, fastjson.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from streamdissect.protocols.rocketmq import fastjson, spec
from streamdissect.protocols.rocketmq.messages import (
    BodyError,
    batch_messages,
    sent_message,
    stored_messages,
)
from streamdissect.protocols.rocketmq.records import Malformed, RemotingCommand

_HEAD = struct.Struct(">Ii")
_BINARY = struct.Struct(">hBhii")  # code, language, version, opaque, flag
_i16 = struct.Struct(">h").unpack_from
_i32 = struct.Struct(">i").unpack_from
_JSON_ORDER = ("code", "extFields", "flag", "language", "opaque", "remark",
               "serializeTypeCurrentRPC", "version")  # fastjson's (by name)  # fmt: skip
_HEADER_KEYS = frozenset(spec.JSON_KEYS[:-1])  # read into a command's fields, not json_extra
_ALL_JSON_KEYS = frozenset(spec.JSON_KEYS)
JSON_START = b'{"'
_JSON_DECODE = json.JSONDecoder().decode  # (json.loads's own default decoder's settings)
JOINT = b",null,"  # between the headers json_headers reads together
NOT_PARSED = object()  # (decode_frame: the header is read from the frame)
# spec's constants read once a frame or more: bound here (a global, not a module attribute)
_STR, _INT, _BOOL, _RESPONSE = spec.STR, spec.INT, spec.BOOL, spec.RESPONSE_FLAG
_SERIALIZE_NAMES, _LENGTH_MASK, _JSON = spec.SERIALIZE_NAMES, spec.HEADER_LENGTH_MASK, spec.JSON
_MESSAGE_BODY_CODES, _BATCH_CODE = spec.MESSAGE_BODY_CODES, spec.BATCH_CODE
_PULL_RESPONSE_KEYS = spec.PULL_RESPONSE_KEYS


class HeaderError(ValueError):
    def __init__(self, reason: str, offset: int):
        super().__init__(reason)
        self.offset = offset


def decode_frame(frame: bytes, *, declared_size: int | None = None,
                 parsed_header: Any = NOT_PARSED) -> RemotingCommand | Malformed:
    """A frame from its total length field on; `declared_size`: the total length when fewer
    bytes are there (a cut frame: the record is made of what is there, `truncated`);
    `parsed_header`: its JSON header's value, when json_headers read it already."""
    frame = bytes(frame)
    if len(frame) < _HEAD.size:
        return Malformed(declared_size, "frame shorter than its 8-byte head", 0,
                         frame[: spec.MALFORMED_KEPT], True)  # fmt: skip
    total, word = _HEAD.unpack_from(frame)
    size = total if declared_size is None else declared_size
    truncated = len(frame) < 4 + size
    kind, header_length = (word >> 24) & 0xFF, word & _LENGTH_MASK

    if size >= 2**31:
        return _malformed(frame, size, truncated, f"negative total length {size - 2**32}", 0)
    if word < 0 or kind not in _SERIALIZE_NAMES:
        return _malformed(frame, size, truncated, f"unknown header serialization {kind}", 4)
    if header_length > size - 4:
        return _malformed(frame, size, truncated,
                          f"header length {header_length} above the frame's {size - 4} bytes", 4)
    header = frame[8 : 8 + header_length]
    if len(header) < header_length:
        return _malformed(frame, size, truncated,
                          f"header cut short: {len(header)} of {header_length} bytes", 8)
    try:
        if kind == _JSON:
            parts = _json_header(header, parsed_header)
        else:
            parts = _binary_header(header)
    except HeaderError as e:
        return _malformed(frame, size, truncated, str(e), 8 + e.offset)
    code, language, version, opaque, flag, remark, ext, json_extra, json_keys, json_tail = parts
    # (by position: a dataclass's __init__ by keyword costs twice as much, once a frame)
    command = RemotingCommand(size, kind, header_length, code, language, version, opaque, flag,
                              remark, ext, frame[8 + header_length : 4 + size],
                              _fields_of(code, flag, ext), None, None, None, None, None,
                              truncated, None, json_extra, json_keys, json_tail)  # fmt: skip
    if not truncated:
        _read_body(command, 8 + header_length)
    return command


def _malformed(frame: bytes, size: int, truncated: bool, reason: str, offset: int) -> Malformed:
    """(Not a closure in decode_frame: one would be made a frame, and its variables cells.)"""
    return Malformed(size, reason, offset, frame[: spec.MALFORMED_KEPT], truncated)


# --- headers -------------------------------------------------------------------------------


def _json_loads(header: bytes) -> Any:
    """json.loads(header): what it does for bytes that start `{"` (UTF-8, as its encoding
    detection finds) without the detection; other bytes through json.loads itself."""
    if header[:2] == JSON_START:
        return _JSON_DECODE(header.decode("utf-8", "surrogatepass"))
    return json.loads(header)


def _number(obj: dict, key: str, default: int | None = None) -> int | None:
    """A JSON header's integer (HeaderError when it holds something else)."""
    value = obj.get(key, default)
    if value is not None and value.__class__ is not int and (
            not isinstance(value, int) or isinstance(value, bool)):  # fmt: skip
        raise HeaderError(f"JSON header's {key} is not an integer: {value!r}", 0)
    return value


def json_headers(headers: list[bytes]) -> list | None:
    """What _json_loads gives for each of these headers (each starting `{"`, none holding
    `null`), read by one parse of them joined as `[h1,null,h2,...]`: the parser's call and
    its keys' strings shared by all. None when the joined text does not read as the headers
    one by one: then each is read alone. (Exact: the only `null`s are the joints, so when
    the N-1 of them are the list's odd items, each header is the one value between two.)"""
    if not headers:
        return []
    joined = b"[" + JOINT.join(headers) + b"]"
    if joined.count(b"null") != len(headers) - 1:
        return None
    try:
        values = _JSON_DECODE(joined.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError):
        return None
    if len(values) != 2 * len(headers) - 1 or any(v is not None for v in values[1::2]):
        return None
    return values[0::2]


# A header's parts, as _json_header and _binary_header give them: code, language, version,
# opaque, flag, remark, ext, json_extra, json_keys, json_tail (a tuple: no dict a frame)
HeaderParts = tuple


def _json_header(header: bytes, parsed: Any = NOT_PARSED) -> HeaderParts:
    if parsed is not NOT_PARSED:
        obj = parsed
    else:
        try:
            obj = _json_loads(header)
        except (ValueError, RecursionError) as e:
            raise HeaderError(f"header is not JSON: {e}", 0) from None
    if not isinstance(obj, dict):
        raise HeaderError("JSON header is not an object", 0)
    get = obj.get
    code, opaque, version, flag = get("code"), get("opaque", 0), get("version"), get("flag", 0)
    if not (code.__class__ is int and opaque.__class__ is int and flag.__class__ is int
            and (version is None or version.__class__ is int)):  # fmt: skip
        # (not all plain ints: each read by _number, in its order, for the error it gives)
        code, opaque = _number(obj, "code"), _number(obj, "opaque", 0)
        if code is None:
            raise HeaderError("JSON header has no code", 0)
        version = flag = None  # (after the ext fields and remark are checked)
    ext = get("extFields") or {}
    remark = get("remark")
    if not isinstance(ext, dict) or not (remark is None or isinstance(remark, str)):
        raise HeaderError("JSON header's extFields is not an object or its remark no text", 0)
    if flag is None:
        version, flag = _number(obj, "version"), _number(obj, "flag", 0)
        if flag is None:  # (null: every reader of a command takes its flag's bits)
            raise HeaderError("JSON header's flag is not an integer: None", 0)
    keys, rpc_key = _KEY_ORDERS.get(keys := tuple(obj)) or _key_order(keys)
    if rpc_key is None:  # (keys not all known: any of them may be extra)
        extra = {k: v for k, v in obj.items() if k not in _HEADER_KEYS} or None
    else:  # (the known keys' only extra one: serializeTypeCurrentRPC, the Java client's)
        extra = {_RPC_KEY: obj[_RPC_KEY]} if rpc_key else None
    return (code, get("language"), version, opaque, flag, remark, ext, extra, keys,
            header[len(header.rstrip()):].decode() or None)  # fmt: skip


# the key orders of JSON headers whose keys are all known (spec.JSON_KEYS: nothing a hostile
# header names is kept): each one tuple for all the headers with it, and whether it holds
# the one known key that is json_extra
_KEY_ORDERS: dict[tuple, tuple[tuple, bool]] = {}
MAX_KEY_ORDERS = 256  # (a capture's clients write a few orders; hostile headers: no more)
(_RPC_KEY,) = _ALL_JSON_KEYS - _HEADER_KEYS


def _key_order(keys: tuple) -> tuple[tuple, bool | None]:
    """A JSON header's keys in their order, and whether _RPC_KEY is among them (None: not
    known, the keys not being all known); kept for the next header with them."""
    if not _ALL_JSON_KEYS.issuperset(keys):
        return keys, None
    order = keys, _RPC_KEY in keys
    if len(_KEY_ORDERS) < MAX_KEY_ORDERS:
        _KEY_ORDERS[keys] = order
    return order


def _binary_header(header: bytes) -> HeaderParts:
    end = len(header)
    if end < _BINARY.size + 8:
        raise HeaderError(f"ROCKETMQ header of {end} bytes, under its fixed {_BINARY.size + 8}", 0)
    code, language, version, opaque, flag = _BINARY.unpack_from(header)
    at = _BINARY.size
    (remark_length,) = _i32(header, at)
    at += 4
    if not 0 <= remark_length <= end - at - 4:
        raise HeaderError(f"remark length {remark_length} beyond the header", at - 4)
    remark = header[at : at + remark_length].decode("utf-8", "replace") if remark_length else None
    at += remark_length
    (ext_length,) = _i32(header, at)
    at += 4
    if not 0 <= ext_length <= end - at:
        raise HeaderError(f"ext fields length {ext_length} beyond the header", at - 4)
    return (code, spec.LANGUAGES.get(language, language), version, opaque, flag, remark,
            _binary_ext(header, at, at + ext_length), None, None, None)  # fmt: skip


def _binary_ext(header: bytes, at: int, stop: int) -> dict[str, str]:
    ext = {}
    while at < stop:
        if at + 2 > stop:
            raise HeaderError("ext fields cut short in a key length", at)
        (key_length,) = _i16(header, at)
        at += 2
        if not 0 <= key_length <= stop - at - 4:
            raise HeaderError(f"ext key length {key_length} beyond the ext fields", at - 2)
        key = header[at : at + key_length].decode("utf-8", "replace")
        at += key_length
        (value_length,) = _i32(header, at)
        at += 4
        if not 0 <= value_length <= stop - at:
            raise HeaderError(f"ext value length {value_length} beyond the ext fields", at - 4)
        ext[key] = header[at : at + value_length].decode("utf-8", "replace")
        at += value_length
    return ext


def header_of(code: int, response: bool) -> spec.Header | None:
    return spec.RESPONSE_HEADER if response else spec.REQUEST_HEADERS.get(code)


_INT_TEXT = 24  # an integer field's text is longer than no int64's


def typed_value(value: Any, kind: str) -> Any:
    """An ext value as its field's type says, or None when it is not one. (Text first: the
    JSON and binary headers carry most values as text.)"""
    if isinstance(value, str):
        if kind == _STR:
            return value
        if kind == _INT:
            if len(value) >= _INT_TEXT:
                return None
            try:
                return int(value)
            except ValueError:
                return None
        lowered = value.lower()  # (a BOOL)
        return lowered == "true" if lowered in ("true", "false") else None
    if isinstance(value, bool):
        return value if kind == _BOOL else None
    return value if kind == _INT and isinstance(value, int) else None


def _known_keys(header: spec.Header) -> dict[str, tuple[str, str]]:
    """A header's wire keys -> (field name, type)."""
    return {f.key: (f.name, f.type) for f in header.fields}


# made once, found by code (a cache keyed by the Header would hash its every field a frame)
_REQUEST_KNOWN = {code: _known_keys(header) for code, header in spec.REQUEST_HEADERS.items()}
_RESPONSE_KNOWN = _known_keys(spec.RESPONSE_HEADER)


def _fields_of(code: int, flag: int, ext: dict[str, Any]) -> dict[str, Any]:
    """The ext fields the header of a command of this code and flag knows, by name and typed
    (`typed_value`; a value of another type is left out here and stays in `ext`)."""
    if flag & _RESPONSE:
        known = _RESPONSE_KNOWN
    else:
        known = _REQUEST_KNOWN.get(code)
        if known is None:
            return {}
    out = {}
    lookup = known.get
    for key, value in ext.items():
        f = lookup(key)
        if f is not None:
            typed = typed_value(value, f[1])
            if typed is not None:
                out[f[0]] = typed
    return out


# --- bodies -------------------------------------------------------------------------------


def _read_body(command: RemotingCommand, body_at: int) -> None:
    body, fields, code = command.body, command.fields, command.code
    response = command.flag & _RESPONSE  # (command.response, without its call)
    try:
        if not response and code in _MESSAGE_BODY_CODES:
            command.messages = [sent_message(body, fields)]
        elif not response and code == _BATCH_CODE:
            command.messages = batch_messages(body, fields.get("topic"), fields.get("queueId"))
        elif response and code == 0 and _PULL_RESPONSE_KEYS <= command.ext.keys():
            command.messages = stored_messages(body, lazy=True)
        elif body[:1] in (b"{", b"["):
            command.body_json = fastjson.parse(body)
            if command.body_json is None:
                command.body_text = body.decode("utf-8", "replace")
    except BodyError as e:
        command.messages = e.messages
        command.body_error, command.body_error_offset = str(e), body_at + e.offset
        return
    for i, message in enumerate(command.messages or ()):
        if message.inflate_error:
            command.body_error = f"message {i}: {message.inflate_error}"
            command.body_error_offset = body_at
            return


# --- encoding ------------------------------------------------------------------------------


def encode_command(command: RemotingCommand) -> bytes:
    """The frame of a record (total length included): its envelope, header and body."""
    if command.serialize_type == spec.JSON:
        header = _encode_json_header(command)
    else:
        header = _encode_binary_header(command)
    word = (command.serialize_type << 24) | len(header)
    return _HEAD.pack(4 + len(header) + len(command.body), word) + header + command.body


def _encode_json_header(command: RemotingCommand) -> bytes:
    values = {"code": command.code, "extFields": command.ext or None, "flag": command.flag,
              "language": command.language, "opaque": command.opaque,
              "remark": command.remark, "version": command.version}  # fmt: skip
    values.update(command.json_extra or {})
    if command.json_keys is not None:  # as it came: these keys in this order
        values["extFields"] = command.ext
        obj = {k: values.get(k) for k in command.json_keys}
    else:  # as fastjson writes it: by name, no nulls
        obj = {k: values[k] for k in _JSON_ORDER if values.get(k) is not None}
        obj.update((k, v) for k, v in values.items() if k not in obj and v is not None)
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return (text + (command.json_tail or "")).encode()


def _encode_binary_header(command: RemotingCommand) -> bytes:
    """(ValueError for what a ROCKETMQ header cannot hold: a code beyond int16, a language
    it has no number for, a key longer than 32767 bytes.)"""
    language = command.language
    if isinstance(language, str):
        language = spec.LANGUAGE_CODES.get(language, language)
    remark = (command.remark or "").encode()
    try:
        ext = b"".join(
            struct.pack(">h", len(k := str(key).encode())) + k
            + struct.pack(">i", len(v := _wire_text(value).encode())) + v
            for key, value in command.ext.items())  # fmt: skip
        fixed = _BINARY.pack(command.code, language or 0, command.version or 0, command.opaque,
                             command.flag)  # fmt: skip
    except struct.error as e:
        raise ValueError(f"not writable as a ROCKETMQ header: {e}") from None
    return fixed + struct.pack(">i", len(remark)) + remark + struct.pack(">i", len(ext)) + ext


def _wire_text(value: Any) -> str:
    """A field's value as the Java client writes it into ext fields."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def make_command(code: int, *, response: bool = False, oneway: bool = False, opaque: int = 0,
                 fields: dict[str, Any] | None = None, ext: dict[str, Any] | None = None,
                 body: bytes = b"", remark: str | None = None, language: str | int = "JAVA",
                 version: int = 0, serialize_type: int = spec.JSON) -> RemotingCommand:
    """A record to encode: `fields` by name (turned into the header's wire keys and text, as
    the Java client sends them: SEND_MESSAGE_V2's letters), `ext` as is, added after them."""
    wire: dict[str, Any] = {}
    header = header_of(code, response)
    by_name = {f.name: f.key for f in header.fields} if header else {}
    for name, value in (fields or {}).items():
        if name not in by_name:
            raise ValueError(f"{spec.request_name(code)} has no header field {name!r}")
        wire[by_name[name]] = _wire_text(value)
    wire.update(ext or {})
    flag = (spec.RESPONSE_FLAG if response else 0) | (spec.ONEWAY_FLAG if oneway else 0)
    command = RemotingCommand(size=0, serialize_type=serialize_type, header_length=0, code=code,
                              language=language, version=version, opaque=opaque, flag=flag,
                              remark=remark, ext=wire, body=body)  # fmt: skip
    decoded = decode_frame(encode_command(command))
    if isinstance(decoded, Malformed):
        raise ValueError(f"cannot be encoded: {decoded.reason}")  # noqa: TRY004  (a value)
    return decoded
