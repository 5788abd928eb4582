"""decode_frame / encode_record / make_record / record_from_dict, compiled from the spec table.

Each (key, version) of the table is compiled once, at its first frame (COMPILED), into a
list of small closures (runs of fixed-width integers merged into one struct.Struct), so
decoding a frame never interprets field descriptions. The hottest commands (Deliver,
Publish, PublishConfirm, Credit, Heartbeat) get hand-written fast paths for well-formed,
complete frames; anything unusual falls back to the compiled path, which owns every error
and truncation decision.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from streamdissect.protocols.stream import layouts, osiris, publish
from streamdissect.protocols.stream.primitives import (
    U16,
    U32,
    DecodeError,
    IntType,
    OffsetValueType,
    TrailingType,
    WireType,
)
from streamdissect.protocols.stream.records import (
    RECORD_CLASSES,
    AnyRecord,
    Malformed,
    Record,
    Unknown,
)
from streamdissect.protocols.stream.spec import (
    BY_KEY,
    BY_NAME,
    CHUNK_HEADER,
    PUBLISH_MESSAGES,
    REST,
    Field,
    Message,
)
from streamdissect.slotted import Unequal

FRAME_HEADER = struct.Struct(">IHH")  # size, key, version
U64 = struct.Struct(">Q")
I64 = struct.Struct(">q")

Step = Callable[[Any, int, int, list], int]  # (buf, pos, end, values) -> new pos
Emit = Callable[[bytearray, list, int], int]  # (out, values, index) -> next index


# ---------------------------------------------------------------------------------------
# Decoding steps


def _int_run_step(types: list[IntType]) -> Step:
    """One struct unpack for consecutive fixed-width integers."""
    packer = struct.Struct(">" + "".join(t.fmt for t in types))
    unpack_from, size = packer.unpack_from, packer.size
    singles = [(t.packer.unpack_from, t.size) for t in types]

    def step(buf: Any, pos: int, end: int, values: list) -> int:
        if end - pos >= size:
            values.extend(unpack_from(buf, pos))
            return pos + size
        for unpack_one, n in singles:  # keep the integers that are present (truncation)
            if end - pos < n:
                raise DecodeError(f"integer field: needs {n} bytes, {end - pos} left", pos, True)
            values.append(unpack_one(buf, pos)[0])
            pos += n
        raise AssertionError("unreachable")

    return step


def _reader_step(wire_type: WireType) -> Step:
    read = wire_type.reader()

    def step(buf: Any, pos: int, end: int, values: list) -> int:
        value, pos = read(buf, pos, end)
        values.append(value)
        return pos

    return step


def _offset_value_step(buf: Any, pos: int, end: int, values: list) -> int:
    """8 bytes after offset types 4 (u64) and 5 (i64 timestamp); nothing after the others."""
    offset_type = values[-1]
    if offset_type not in (4, 5):
        values.append(None)
        return pos
    return _read_offset(buf, pos, end, values, offset_type)


def _last_offset_value_step(buf: Any, pos: int, end: int, values: list) -> int:
    """As above, but 8 bytes ending the frame are read whatever the type (rstream's form)."""
    offset_type = values[-1]
    if offset_type not in (4, 5) and end == pos:
        values.append(None)
        return pos
    # 1 to 7 bytes: the start of rstream's 8 bytes (cut by snaplen) or garbage
    return _read_offset(buf, pos, end, values, offset_type)


def _read_offset(buf: Any, pos: int, end: int, values: list, offset_type: int) -> int:
    if end - pos < 8:
        raise DecodeError("offset: needs 8 bytes", pos, True)
    values.append((U64 if offset_type == 4 else I64).unpack_from(buf, pos)[0])
    return pos + 8


def _chunk_header_step(buf: Any, pos: int, end: int, values: list) -> int:
    if end - pos < osiris.HEADER_SIZE:
        cut = osiris.parse_cut_header(buf, pos, end)  # (a cut frame keeps what is whole)
        magic = cut["magic_version"]
        if magic is not None and magic >> 4 != 5:
            raise DecodeError(f"bad chunk magic 0x{magic:02x}", pos)
        raise DecodeError("chunk header: needs 48 bytes", pos, True,
                          partial=cut if magic is not None else None)  # fmt: skip
    header = osiris.parse_header(buf, pos)
    if header["magic_version"] >> 4 != 5:
        raise DecodeError(f"bad chunk magic 0x{header['magic_version']:02x}", pos)
    entries, records = header["num_entries"], header["num_records"]
    if entries * osiris.MIN_ENTRY_SIZE > header["data_length"]:
        raise DecodeError(f"chunk header claims {entries} entries in {header['data_length']} "
                          "bytes of data", pos + 2)  # fmt: skip
    if records > entries * osiris.MAX_SUB_BATCH_RECORDS:
        raise DecodeError(f"chunk header claims {records} records in {entries} entries", pos + 4)
    values.append(header)
    return pos + osiris.HEADER_SIZE


def _rest_step(buf: Any, pos: int, end: int, values: list) -> int:
    values.append(memoryview(buf)[pos:end])
    return end


def _publish_messages_step(version: int) -> Step:
    def step(buf: Any, pos: int, end: int, values: list) -> int:
        try:
            _, _, stop = publish.scan(buf, pos, end, version, [])
        except DecodeError as exc:
            if exc.short:  # (a cut frame keeps its count and the ids that are whole)
                exc.partial = publish.whole_ids(buf, pos, end, version)
                if exc.partial is not None:
                    exc.count, exc.records = exc.partial.count, exc.partial.records
            raise
        values.append(publish.PublishMessages(memoryview(buf)[pos:stop], version))
        return stop

    return step


def _compile_steps(wire_fields: list[WireType], version: int) -> list[Step]:
    steps: list[Step] = []
    run: list[IntType] = []
    for wire_type in wire_fields + [None]:  # type: ignore[list-item]
        if isinstance(wire_type, IntType):
            run.append(wire_type)
            continue
        if run:
            steps.append(_int_run_step(run))
            run = []
        if wire_type is None:
            break
        if isinstance(wire_type, OffsetValueType):
            last = wire_type.last_may_carry
            steps.append(_last_offset_value_step if last else _offset_value_step)
        elif wire_type is CHUNK_HEADER:
            steps.append(_chunk_header_step)
        elif wire_type is REST:
            steps.append(_rest_step)
        elif wire_type is PUBLISH_MESSAGES:
            steps.append(_publish_messages_step(version))
        else:
            steps.append(_reader_step(wire_type))
    return steps


# ---------------------------------------------------------------------------------------
# Encoding steps


def _emitter(wire_type: WireType, version: int) -> Emit:
    if isinstance(wire_type, OffsetValueType):
        last = wire_type.last_may_carry

        def emit_offset(out: bytearray, values: list, i: int) -> int:
            offset_type = values[i - 1]
            if offset_type in (4, 5) or (last and values[i] is not None):
                out += (U64 if offset_type == 4 else I64).pack(values[i])
            return i + 1

        return emit_offset
    if wire_type is CHUNK_HEADER:
        write: Callable[[bytearray, Any], None] = lambda out, v: out.extend(osiris.pack_header(v))
    elif wire_type is REST:
        write = lambda out, v: out.extend(v)
    elif wire_type is PUBLISH_MESSAGES:
        write = lambda out, v: out.extend(publish.encode_messages(v, version))
    else:
        write = wire_type.writer()

    def emit(out: bytearray, values: list, i: int) -> int:
        write(out, values[i])
        return i + 1

    return emit


# ---------------------------------------------------------------------------------------
# Derived fields (stored on the record, never encoded)


def _derive_publish(fields: dict[str, Any], truncated: bool) -> None:
    messages = fields.get("messages")
    if isinstance(messages, publish.CutMessages):  # its records are not known
        fields["messages"] = None
        fields["publishing_ids"], fields["record_count"] = messages.ids, None
        return
    if messages is None:
        fields["publishing_ids"], fields["record_count"] = None, None
        return
    ids: list[int] = []
    _, records, _ = publish.scan(messages.data, 0, len(messages.data), messages.version, ids)
    fields["publishing_ids"], fields["record_count"] = ids, records


def _derive_deliver(fields: dict[str, Any], truncated: bool) -> None:
    chunk = fields.get("chunk")
    fields["record_count"] = chunk["num_records"] if chunk else None
    fields["entry_count"] = chunk["num_entries"] if chunk else None
    payload = fields.get("chunk_payload")
    if chunk and not truncated and payload is not None and len(payload) < chunk["data_length"]:
        raise DecodeError("chunk data_length exceeds the frame", 0)


DERIVE: dict[str, Callable[[dict[str, Any], bool], None]] = {
    "Publish": _derive_publish,
    "Deliver": _derive_deliver,
}


# ---------------------------------------------------------------------------------------
# Compiled messages


class Compiled(Unequal):
    """One (key, version) of the table compiled: its read steps, emitters and record class."""

    __slots__ = field_names = ("message", "version", "cls", "steps", "emitters", "names",
                               "direct")  # fmt: skip
    message: Message
    version: int
    cls: type[Record]
    steps: list[Step]
    emitters: list[Emit]
    names: tuple[str, ...]  # body field names of this version, in wire order
    direct: bool  # body values map positionally onto the class fields

    def __init__(self, message: Message, version: int, cls: type[Record], steps: list[Step],
                 emitters: list[Emit], names: tuple[str, ...], direct: bool) -> None:  # fmt: skip
        self.message = message
        self.version = version
        self.cls = cls
        self.steps = steps
        self.emitters = emitters
        self.names = names
        self.direct = direct

    def read(self, buf: Any, pos: int, end: int, values: list) -> int:
        for step in self.steps:
            pos = step(buf, pos, end, values)
        return pos

    def build(self, key: int, size: int, values: list, truncated: bool) -> Record:
        message = self.message
        head = message.correlation_id + message.code
        total = head + len(self.names)
        if len(values) < total:
            values = values + [None] * (total - len(values))
        corr = values[0] if message.correlation_id else None
        code = values[head - 1] if message.code else None
        if self.direct:
            return self.cls(key, self.version, size, corr, code, truncated, *values[head:])
        fields = dict(zip(self.names, values[head:]))
        derive = DERIVE.get(message.command)
        if derive is not None:
            derive(fields, truncated)
        return self.cls(key, self.version, size, corr, code, truncated, **fields)

    def build_cut(self, key: int, size: int, values: list, length: int,
                  short: DecodeError | None) -> Record:  # fmt: skip
        """A record of a frame whose bytes stop at `length`: every field whole before the
        cut, what was whole of the field it cuts (`short.partial`), the rest None; its
        `cut` says where the bytes stop, which field they stop in, that field's count and,
        for a list of records' holders (a Publish's messages), the records it holds at least."""
        index = len(values) - self.message.correlation_id - self.message.code
        if short is None:  # every field read: the last one ran to the cut
            index -= 1
        elif short.partial is not None:
            values = values + [short.partial]
        record = self.build(key, size, values, True)
        cut: dict[str, Any] = {"at": length}
        if 0 <= index < len(self.names):
            cut["field"] = self.names[index]
        if short is not None and short.count is not None:
            cut["count"] = short.count
        if short is not None and short.records is not None:
            cut["records"] = short.records
        record._cut = cut
        return record

    def encode_body(self, record: Record) -> bytearray:
        values: list[Any] = []
        if self.message.correlation_id:
            values.append(record.correlation_id)
        if self.message.code:
            values.append(record.code)
        values += [getattr(record, name) for name in self.names]
        out = bytearray()
        i = 0
        for emit in self.emitters:
            i = emit(out, values, i)
        return out


def _header_fields(message: Message) -> list[WireType]:
    return [U32] * message.correlation_id + [U16] * message.code


def _compile(message: Message, version: int) -> Compiled:
    body = message.fields_for(version)
    wire = _header_fields(message) + [f.type for f in body]
    cls = RECORD_CLASSES[message.key]
    names = tuple(f.name for f in body)
    return Compiled(
        message=message,
        version=version,
        cls=cls,
        steps=_compile_steps(wire, version),
        emitters=[_emitter(t, version) for t in wire],
        names=names,
        direct=names == cls.body_fields and message.command not in DERIVE,
    )


class _CompiledTable(dict):
    """(key, version) -> its Compiled, compiled at its first frame (a capture carries a
    dozen of the table's 57; compiling them all at import was ~1 ms of every start). A
    lookup (`[]`, `get`) finds every one the table has; `in` and iterating see those
    compiled so far."""

    def __missing__(self, key_version: tuple[int, int]) -> Compiled:
        key, version = key_version
        message = BY_KEY.get(key)
        if message is None or version not in message.versions:
            raise KeyError(key_version)
        compiled = self[key_version] = _compile(message, version)
        return compiled

    def get(self, key_version: tuple[int, int], default: Any = None) -> Any:
        return _compiled(key_version) or default


def _compiled(key_version: tuple[int, int]) -> Compiled | None:
    """The Compiled of (key, version), None if the table has no such message: the dict's own
    lookup once it is compiled (the decoder's per-frame path)."""
    found = dict.get(COMPILED, key_version)
    if found is not None:
        return found
    try:
        return COMPILED[key_version]
    except KeyError:
        return None


COMPILED: dict[tuple[int, int], Compiled] = _CompiledTable()


# ---------------------------------------------------------------------------------------
# Fast paths: complete, well-formed frames of the hottest commands. They return None for
# anything else so that the compiled path decides (and explains) errors.

_Deliver, _Publish = RECORD_CLASSES[0x0008], RECORD_CLASSES[0x0002]
_Confirm, _Credit, _Heartbeat = (
    RECORD_CLASSES[0x0003],
    RECORD_CLASSES[0x0009],
    RECORD_CLASSES[0x0017],
)
# The heads after the frame header, as the table lays them out (layouts)
_DELIVER_V1, _DELIVER_V2 = (layouts.DELIVER[v].struct(FRAME_HEADER.size) for v in (1, 2))
_DELIVER_V1_START, _DELIVER_V2_START = (layouts.DELIVER[v].size for v in (1, 2))  # chunk data
_CONFIRM_HEAD = layouts.CONFIRM.struct(FRAME_HEADER.size)
_CONFIRM_IDS = layouts.CONFIRM.size  # where its publishing ids start, _CONFIRM_ID bytes each
_CONFIRM_ID, _CONFIRM_ID_FORMAT = layouts.CONFIRM_ID.size, layouts.CONFIRM_ID.fmt
_U64S: dict[int, Callable] = {}  # count -> unpack_from of that many u64 (confirms' ids)
_CREDIT = layouts.CREDIT.struct(FRAME_HEADER.size)
_CREDIT_SIZE = layouts.CREDIT.size
_PUBLISHER_ID = struct.Struct(">B")


def deliver_fields(frame: bytes, size: int, version: int, head: bool = False) -> tuple | None:
    """A well-formed Deliver's (subscription id, committed chunk id or None, the 12 chunk
    header fields in CHUNK_FIELDS order, where its data starts), else None. `head`: `frame`
    is only the first bytes of the frame (the chunk header is enough)."""
    if version == 1:
        start, committed = _DELIVER_V1_START, None
        if len(frame) < start:
            return None
        subscription_id, *chunk = _DELIVER_V1.unpack_from(frame, 8)
    elif version == 2:
        start = _DELIVER_V2_START
        if len(frame) < start:
            return None
        subscription_id, committed, *chunk = _DELIVER_V2.unpack_from(frame, 8)
    else:
        return None
    magic, _, entries, records, _, _, _, _, data_length = chunk[:9]
    if (
        magic >> 4 != 5
        or (len(frame) - start < data_length and not head)
        or entries * 4 > data_length  # impossible counts: the compiled path explains
        or records > entries * 0xFFFF
    ):
        return None
    chunk[11] = (chunk[11] << 8) | chunk.pop()  # reserved: u8 + u16 as one number
    return subscription_id, committed, chunk, start


# The chunk header as Deliver records keep it (a dict), in wire order.
CHUNK_FIELDS = osiris.HEADER_FIELDS


def _fast_deliver(frame: bytes, size: int, version: int, head: bool = False) -> Record | None:
    """`head`: `frame` is only the first bytes of the frame (the chunk header is enough)."""
    fields = deliver_fields(frame, size, version, head)
    if fields is None:
        return None
    subscription_id, committed, chunk, start = fields
    payload = None if head else memoryview(frame)[start:]
    return _Deliver(8, version, size, None, None, False, subscription_id, committed,
                    dict(zip(CHUNK_FIELDS, chunk)), payload, chunk[3], chunk[2])  # fmt: skip


def decode_deliver_head(head: bytes, size: int) -> AnyRecord:
    """A Deliver of which only `head` (its first bytes, chunk header included) was kept, as
    the framer reports it: chunk header read, `chunk_payload` None, not truncated."""
    if len(head) >= 8 and FRAME_HEADER.unpack_from(head)[:2] == (size, 0x0008):
        record = _fast_deliver(head, size, FRAME_HEADER.unpack_from(head)[2], head=True)
        if record is not None:
            return record
    record = decode_frame(head, declared_size=size)
    if record.key == 0x0008 and not isinstance(record, Malformed | Unknown):
        record.truncated = False
        record.chunk_payload = None
    return record


def _fast_publish(frame: bytes, size: int, version: int) -> Record | None:
    if version not in (1, 2) or len(frame) < 13:
        return None
    ids: list[int] = []
    try:
        _, records, stop = publish.scan(frame, 9, len(frame), version, ids)
    except DecodeError:
        return None
    if stop != len(frame):
        return None
    messages = publish.PublishMessages(memoryview(frame)[9:], version)
    return _Publish(0x0002, version, size, None, None, False, frame[8], messages, ids, records)


def confirm_fields(frame: bytes, size: int, version: int) -> tuple | None:
    """A well-formed PublishConfirm's (publisher id, publishing ids), else None."""
    if version != 1 or len(frame) < _CONFIRM_IDS:
        return None
    publisher_id, count = _CONFIRM_HEAD.unpack_from(frame, 8)
    if count < 0 or _CONFIRM_IDS + _CONFIRM_ID * count != len(frame):
        return None
    ids_of = _U64S.get(count)
    if ids_of is None:
        ids_of = struct.Struct(f">{count}{_CONFIRM_ID_FORMAT}").unpack_from
        if count <= 256:  # the usual counts only: hostile ones must not grow the cache
            _U64S[count] = ids_of
    return publisher_id, list(ids_of(frame, _CONFIRM_IDS))


def _fast_confirm(frame: bytes, size: int, version: int) -> Record | None:
    fields = confirm_fields(frame, size, version)
    return None if fields is None else _Confirm(0x0003, 1, size, None, None, False, *fields)


def credit_fields(frame: bytes, size: int, version: int) -> tuple | None:
    """A well-formed Credit request's (subscription id, credit), else None."""
    if version != 1 or len(frame) != _CREDIT_SIZE:
        return None
    return _CREDIT.unpack_from(frame, 8)


def _fast_credit(frame: bytes, size: int, version: int) -> Record | None:
    fields = credit_fields(frame, size, version)
    return None if fields is None else _Credit(0x0009, 1, size, None, None, False, *fields)


def heartbeat_fields(frame: bytes, size: int, version: int) -> tuple | None:
    """() for a well-formed Heartbeat, else None."""
    return () if version == 1 and len(frame) == 8 else None


def _fast_heartbeat(frame: bytes, size: int, version: int) -> Record | None:
    return None if heartbeat_fields(frame, size, version) is None else _Heartbeat(
        0x0017, 1, size, None, None, False)


FAST_PATHS: dict[int, Callable[[bytes, int, int], Record | None]] = {
    0x0008: _fast_deliver,
    0x0002: _fast_publish,
    0x0003: _fast_confirm,
    0x0009: _fast_credit,
    0x0017: _fast_heartbeat,
}


# ---------------------------------------------------------------------------------------
# Public API


def decode_frame(
    frame: bytes | bytearray | memoryview, *, declared_size: int | None = None
) -> AnyRecord:
    """Decode one frame starting at its 4-byte size field. Never raises.

    `declared_size` is the size field's value when `frame` was cut short (snaplen); the
    record then carries what is present and `truncated=True`. Pass `bytes` for zero-copy:
    other buffers are copied once so records never pin a caller's resizable buffer.
    """
    if type(frame) is not bytes:
        frame = bytes(frame)
    try:
        return _decode(frame, declared_size)
    except Exception as exc:  # noqa: BLE001 - a bug must not stop a capture run
        key, version = FRAME_HEADER.unpack_from(frame)[1:] if len(frame) >= 8 else (None, None)
        return Malformed(key, version, declared_size, f"internal error: {exc!r}", 0, frame)  # type: ignore[arg-type]


def _decode(frame: bytes, declared_size: int | None) -> AnyRecord:
    length = len(frame)
    if length < 8:
        size = declared_size
        if size is None and length >= 4:
            size = U32.packer.unpack_from(frame)[0]
        if size is not None and size > length - 4:  # cut before key/version: nothing to name
            return Unknown(None, None, size, frame, truncated=True)  # type: ignore[arg-type]
        return Malformed(None, None, size, "frame shorter than size, key and version", 0, frame)  # type: ignore[arg-type]
    size, key, version = FRAME_HEADER.unpack_from(frame)
    if declared_size is not None and declared_size != size:
        return Malformed(key, version, size, "size field differs from declared_size", 0, frame)
    if length - 4 > size:
        return Malformed(key, version, size, "trailing bytes", 4 + size, frame)
    truncated = length - 4 < size
    if not truncated:
        fast = FAST_PATHS.get(key)
        if fast is not None:
            record = fast(frame, size, version)
            if record is not None:
                return record
    compiled = _compiled((key, version))
    if compiled is None:
        return Unknown(key, version, size, frame, truncated=truncated)
    values: list[Any] = []
    try:
        pos = compiled.read(frame, 8, length, values)
        if pos != length:
            raise DecodeError("trailing bytes", pos)
        if truncated:
            return compiled.build_cut(key, size, values, length, None)
        return compiled.build(key, size, values, truncated)
    except DecodeError as exc:
        if exc.short and truncated:
            return compiled.build_cut(key, size, values, length, exc)
        message = compiled.message
        corr = values[0] if message.correlation_id and values else None
        code_at = int(message.correlation_id)
        code = values[code_at] if message.code and len(values) > code_at else None
        return Malformed(key, version, size, exc.reason, exc.offset, frame, corr, code, truncated)


def encode_record(record: AnyRecord) -> bytes:
    """The frame's bytes, size field included; identical to what the record was decoded from."""
    if isinstance(record, (Malformed, Unknown)):
        return bytes(record.raw)
    if record.truncated:
        raise ValueError("a truncated record cannot be encoded: its bytes are not all known")
    compiled = _compiled((record.key, record.version))
    if compiled is None:
        raise ValueError(f"no layout for key 0x{record.key:04x} version {record.version}")
    body = compiled.encode_body(record)
    return FRAME_HEADER.pack(len(body) + 4, record.key, record.version) + body


def _default(field: Field) -> Any:
    if isinstance(field.type, (OffsetValueType, TrailingType)):
        return None
    if field.type.column.startswith("list<"):
        return []
    if field.type.column.startswith("map<"):
        return {}
    raise TypeError(f"missing field {field.name!r}")


def make_record(command: str, *, response: bool = False, version: int = 1, **fields: Any) -> Record:
    """Build a record to encode (size and derived fields are computed by encoding it).

    Correlation ids default to 0 and codes to 1 (OK); lists and maps default to empty,
    optional trailing fields and offsets to absent.
    """
    message = BY_NAME[(command, response)]
    if version not in message.versions:
        raise ValueError(f"{command} has no version {version}")
    compiled = COMPILED[(message.key, version)]
    header = {
        "correlation_id": fields.pop("correlation_id", 0) if message.correlation_id else None,
        "code": fields.pop("code", 1) if message.code else None,
    }
    body = {}
    for field in message.fields_for(version):
        body[field.name] = fields.pop(field.name) if field.name in fields else _default(field)
    derived = {f.name for f in message.derived}
    unexpected = set(fields) - derived
    if unexpected:
        raise TypeError(f"{command} has no field(s) {sorted(unexpected)}")
    draft = compiled.cls(message.key, version, None, **header, **body)
    decoded = decode_frame(encode_record(draft))
    if not isinstance(decoded, Record):
        raise ValueError(f"fields do not make a valid frame: {decoded.reason}")  # noqa: TRY004
    return decoded


def _from_json(wire_type: WireType, value: Any) -> Any:
    """Undo records.jsonable for one field, guided by its wire type."""
    if value is None:
        return None
    if isinstance(wire_type, TrailingType):
        return _from_json(wire_type.inner, value)
    if wire_type.column == "binary":
        return bytes.fromhex(value)
    return value


def record_from_dict(data: dict[str, Any]) -> AnyRecord:
    """Rebuild a record from Record.to_dict() output."""
    raw = data.get("raw")
    if data.get("malformed"):
        return Malformed(data["key"], data["version"], data["size"], data["reason"],
                         data["offset"], bytes.fromhex(raw), data.get("correlation_id"),
                         data.get("code"), data.get("truncated", False))  # fmt: skip
    if data.get("unknown"):
        return Unknown(data["key"], data["version"], data["size"], bytes.fromhex(raw),
                       truncated=data.get("truncated", False))  # fmt: skip
    message = BY_KEY[data["key"]]
    compiled = COMPILED[(message.key, data["version"])]
    body = {
        f.name: _from_json(f.type, data.get(f.name)) for f in message.fields_for(data["version"])
    }
    if data.get("truncated"):  # cannot be re-encoded: rebuild the fields as they were
        stored = {name: data.get(name) for name in compiled.cls.body_fields}
        stored |= {k: v for k, v in body.items() if k != "messages"}
        if body.get("chunk_payload") is not None:
            stored["chunk_payload"] = body["chunk_payload"]
        record = compiled.cls(data["key"], data["version"], data["size"],
                              data.get("correlation_id"), data.get("code"), True, **stored)
        if data.get("cut") is not None:
            record._cut = dict(data["cut"])
        return record
    draft = compiled.cls(data["key"], data["version"], data["size"], data.get("correlation_id"),
                         data.get("code"), False, **body)  # fmt: skip
    return decode_frame(encode_record(draft))
