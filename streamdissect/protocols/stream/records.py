"""Record classes, one per command and direction, generated from the spec table.

Each is a slotted class: the common header fields (key, version, size, correlation_id,
code, truncated) followed by the body fields of the table in snake_case. A few commands get
behaviour on top through small mixins (Deliver's lazy chunk walking, SASL redaction).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from streamdissect.protocols.stream import osiris
from streamdissect.protocols.stream.codes import RESPONSE_BIT, code_name
from streamdissect.protocols.stream.compression import DEFAULT_MAX_DECOMPRESSED
from streamdissect.protocols.stream.publish import PublishMessages
from streamdissect.protocols.stream.spec import BY_KEY, MESSAGES, Message
from streamdissect.slotted import Slotted

REDACTED = b"***"
COMMON_FIELDS = ("key", "version", "size", "correlation_id", "code", "truncated")
# Derived fields computed on access (properties) instead of being stored at decode time.
LAZY_DERIVED = frozenset({"crc_ok", "username"})


def jsonable(value: Any) -> Any:
    """Bytes as hex, containers recursively; everything else is already JSON-able."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, range):  # publishing ids that go up one by one
        return list(value)
    if isinstance(value, PublishMessages):
        return value.to_list()
    return value


COMMON_COLUMNS = ("key", "command", "response", "version", "size", "correlation_id", "code",
                  "code_name", "truncated")  # fmt: skip


class FrameFacts:
    """What every record, including Malformed and Unknown, answers the same way."""

    __slots__ = ()
    key: int | None
    code: int | None

    @property
    def response(self) -> bool:
        return bool((self.key or 0) & RESPONSE_BIT)

    @property
    def code_name(self) -> str | None:
        return code_name(self.code)

    def common_dict(self) -> dict[str, Any]:
        """COMMON_COLUMNS by name (written out: made for every frame -V and jsonl show)."""
        return {"key": self.key, "command": self.command, "response": self.response,
                "version": self.version, "size": self.size,
                "correlation_id": self.correlation_id, "code": self.code,
                "code_name": self.code_name, "truncated": self.truncated}  # fmt: skip


class Record(FrameFacts, Slotted):
    """A decoded frame: the common header fields, then its command's body fields.

    The 55 record classes are slotted classes made from the spec table; each one's __init__
    is compiled from generated source when its first record is made (a dataclass per class
    cost ~30 ms of every start). Their repr and == are Slotted's, over `field_names`."""

    __slots__ = (*COMMON_FIELDS, "_cut")
    key: int
    version: int
    size: int | None  # the size field: frame length without its own 4 bytes
    correlation_id: int | None
    code: int | None
    truncated: bool  # cut short by snaplen: fields past the cut are None

    spec: ClassVar[Message]
    body_fields: ClassVar[tuple[str, ...]] = ()
    field_names: ClassVar[tuple[str, ...]] = COMMON_FIELDS

    def __init__(self, key: int, version: int = 1, size: int | None = None,
                 correlation_id: int | None = None, code: int | None = None,
                 truncated: bool = False) -> None:  # fmt: skip
        self.key, self.version, self.size = key, version, size
        self.correlation_id, self.code, self.truncated = correlation_id, code, truncated

    @property
    def command(self) -> str:
        return self.spec.command

    @property
    def cut(self) -> dict[str, Any] | None:
        """A truncated record's cut: `at` (the frame's bytes present, its size field
        included: where they stop), `field` (the first field not whole), `count` (that
        field's element count, when its count was whole); None for a whole record."""
        return getattr(self, "_cut", None) if self.truncated else None

    def to_dict(self, show_secrets: bool = False) -> dict[str, Any]:
        """A flat JSON-able dict (bytes as hex); record_from_dict() reverses it."""
        result = self.common_dict()
        for name in self.body_fields:
            result[name] = jsonable(getattr(self, name))
        if self.truncated and (cut := self.cut) is not None:
            result["cut"] = dict(cut)
        return result


class DeliverMethods:
    """Lazy access to the Osiris chunk: nothing here runs unless asked."""

    __slots__ = ()
    chunk: dict[str, int] | None
    chunk_payload: Any

    @property
    def crc_ok(self) -> bool | None:
        if self.chunk is None or self.chunk_payload is None:
            return None
        return osiris.crc_matches(self.chunk, self.chunk_payload)

    @property
    def data(self) -> memoryview:
        """The data-entries section (the bloom filter is never sent; facts §3.2)."""
        return memoryview(self.chunk_payload or b"")[: (self.chunk or {}).get("data_length", 0)]

    @property
    def trailer(self) -> memoryview:
        """Tracking trailer bytes, present only with chunk_selector=all."""
        return memoryview(self.chunk_payload or b"")[(self.chunk or {}).get("data_length", 0) :]

    def entries(self) -> Iterator[osiris.Entry | osiris.MalformedEntry]:
        if self.chunk is None:
            return iter(())
        return osiris.iter_entries(self.data, self.chunk["chunk_id"])

    def messages(
        self, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
    ) -> Iterator[osiris.OsirisRecord | osiris.MalformedEntry]:
        """Records with their offsets (chunk_id + index); sub-batches inflated within bounds."""
        if self.chunk is None or self.chunk["chunk_type"] != 0:
            return iter(())
        return osiris.iter_records(self.data, self.chunk["chunk_id"], max_decompressed)

    def tracking(self) -> list[osiris.TrackingEntry] | osiris.MalformedEntry:
        if self.chunk is None:
            return []
        return osiris.chunk_tracking(self.chunk, self.chunk_payload or b"")

    def to_dict(self, show_secrets: bool = False) -> dict[str, Any]:
        result = Record.to_dict(self, show_secrets)  # type: ignore[arg-type]
        result["crc_ok"] = self.crc_ok
        return result


SASL_KEY = 0x0013
# A desynchronised framer can glue a SaslAuthenticate frame into a bogus one: its header
# (key 0x0013 v1) or a PLAIN mechanism string inside raw bytes marks them as sensitive too.
_SASL_MARKERS = (b"\x00\x13\x00\x01", b"\x00\x05PLAIN")


def raw_holds_credentials(key: int | None, raw: bytes | None) -> bool:
    if ((key or 0) & ~RESPONSE_BIT) == SASL_KEY:
        return True
    return raw is not None and any(marker in raw for marker in _SASL_MARKERS)


def _redacted_repr(self: Any) -> str:
    """The dataclass repr with secrets hidden: a record's repr ends up in logs, tracebacks
    and notebooks, where --show-secrets was never asked for."""
    shown = {name: getattr(self, name) for name in self.field_names}
    if raw_holds_credentials(shown.get("key"), shown.get("raw")):
        if shown.get("raw") is not None:
            shown["raw"] = REDACTED
        if shown.get("sasl_data") is not None:
            shown["sasl_data"] = redact_sasl(shown.get("mechanism"), shown["sasl_data"])
    return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


def split_plain(sasl_data: bytes) -> tuple[bytes, bytes, bytes] | None:
    """PLAIN is `authzid NUL authcid NUL password` (RFC 4616)."""
    parts = sasl_data.split(b"\x00", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


def redact_sasl(mechanism: str | None, sasl_data: bytes) -> bytes:
    """PLAIN keeps its user names and loses the password; other mechanisms lose it all
    (EXTERNAL carries no secret)."""
    if mechanism == "EXTERNAL":
        return sasl_data
    parts = split_plain(sasl_data) if mechanism == "PLAIN" else None
    return REDACTED if parts is None else b"\x00".join(parts[:2] + (REDACTED,))


class SaslAuthenticateMethods:
    __slots__ = ()
    mechanism: str | None
    sasl_data: bytes | None

    @property
    def username(self) -> str | None:
        if self.mechanism != "PLAIN" or self.sasl_data is None:
            return None
        parts = split_plain(self.sasl_data)
        return None if parts is None else parts[1].decode("utf-8", "replace")

    def to_dict(self, show_secrets: bool = False) -> dict[str, Any]:
        result = Record.to_dict(self, show_secrets)  # type: ignore[arg-type]
        result["username"] = self.username
        if not show_secrets and self.sasl_data is not None:
            result["sasl_data"] = redact_sasl(self.mechanism, self.sasl_data).hex()
        return result


MIXINS: dict[tuple[str, bool], type] = {
    ("Deliver", False): DeliverMethods,
    ("SaslAuthenticate", False): SaslAuthenticateMethods,
}


def _stored_names(message: Message) -> list[str]:
    names = [f.name for f in message.fields]
    names += [f.name for f in message.derived if f.name not in LAZY_DERIVED]
    return list(dict.fromkeys(names))


def _compiled_init(cls: type) -> Any:
    """cls.__init__ as compiled source: positional and keyword arguments in field order."""
    params = "".join(f", {name}=None" for name in cls.body_fields)
    body = "".join(f"\n    self.{name} = {name}" for name in cls.field_names)
    namespace: dict[str, Any] = {}
    exec(f"def __init__(self, key, version=1, size=None, correlation_id=None, code=None,"  # noqa: S102
         f" truncated=False{params}):{body}", namespace)  # fmt: skip
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__name__}.__init__"
    return init


def _first_init(self: Record, *args: Any, **kwargs: Any) -> None:
    """Every record class's __init__ until its first record: compiles the real one (most
    captures use a dozen of the 55 classes; compiling all at import took ~8 ms a start)."""
    for owner in type(self).__mro__:  # the generated class, should a user subclass it
        if owner.__dict__.get("__init__") is _first_init:
            owner.__init__ = _compiled_init(owner)  # type: ignore[misc]
            owner.__init__(self, *args, **kwargs)
            return
    raise TypeError(f"{type(self).__name__}: no record class to initialise")


def _make_classes(messages: tuple[Message, ...] | list[Message]) -> dict[int, type[Record]]:
    classes = {}
    for message in messages:
        stored = _stored_names(message)
        mixin = MIXINS.get((message.command, message.response))
        classes[message.key] = type(message.class_name, (mixin, Record) if mixin else (Record,), {
            "__slots__": tuple(stored),
            "__module__": __name__,
            "__doc__": f"The {message.class_name} record.",
            "__init__": _first_init,
            "spec": message,
            "body_fields": tuple(stored),
            "field_names": (*COMMON_FIELDS, *stored),
        })  # fmt: skip
    return classes


RECORD_CLASSES: dict[int, type[Record]] = _make_classes(MESSAGES)
RECORD_CLASSES[SASL_KEY].__repr__ = _redacted_repr  # type: ignore[method-assign]
globals().update({cls.__name__: cls for cls in RECORD_CLASSES.values()})


class Malformed(FrameFacts, Slotted):
    """A frame whose bytes do not fit its command's layout."""

    __slots__ = field_names = ("key", "version", "size", "reason", "offset", "raw",
                               "correlation_id", "code", "truncated")  # fmt: skip
    key: int
    version: int
    size: int | None
    reason: str
    offset: int  # byte offset within the frame (the size field is at 0)
    raw: bytes
    correlation_id: int | None
    code: int | None
    truncated: bool

    def __init__(self, key: int, version: int, size: int | None, reason: str, offset: int,
                 raw: bytes, correlation_id: int | None = None, code: int | None = None,
                 truncated: bool = False) -> None:  # fmt: skip
        self.key, self.version, self.size, self.reason = key, version, size, reason
        self.offset, self.raw, self.correlation_id = offset, raw, correlation_id
        self.code, self.truncated = code, truncated

    @property
    def command(self) -> str | None:
        message = BY_KEY.get(self.key)
        return message.command if message else None

    def to_dict(self, show_secrets: bool = False) -> dict[str, Any]:
        result = self.common_dict()
        result |= {"malformed": True, "reason": self.reason, "offset": self.offset}
        # raw frames may hold credentials (a broken SaslAuthenticate): hide unless asked
        sensitive = not show_secrets and raw_holds_credentials(self.key, self.raw)
        result["raw"] = REDACTED.hex() if sensitive else self.raw.hex()
        return result

    __repr__ = _redacted_repr


class Unknown(FrameFacts, Slotted):
    """A frame whose key or version the table does not know; kept as raw bytes."""

    __slots__ = field_names = ("key", "version", "size", "raw", "correlation_id", "code",
                               "truncated")  # fmt: skip
    key: int
    version: int
    size: int | None
    raw: bytes
    correlation_id: int | None
    code: int | None
    truncated: bool
    command: ClassVar[None] = None

    def __init__(self, key: int, version: int, size: int | None, raw: bytes,
                 correlation_id: int | None = None, code: int | None = None,
                 truncated: bool = False) -> None:  # fmt: skip
        self.key, self.version, self.size, self.raw = key, version, size, raw
        self.correlation_id, self.code, self.truncated = correlation_id, code, truncated

    def to_dict(self, show_secrets: bool = False) -> dict[str, Any]:
        # an unknown version of SaslAuthenticate still carries the credentials
        sensitive = not show_secrets and raw_holds_credentials(self.key, self.raw)
        raw = REDACTED.hex() if sensitive else self.raw.hex()
        return self.common_dict() | {"unknown": True, "raw": raw}

    __repr__ = _redacted_repr


AnyRecord = Record | Malformed | Unknown


def record_class(command: str, response: bool = False) -> type[Record]:
    for cls in RECORD_CLASSES.values():
        if cls.spec.command == command and cls.spec.response == response:
            return cls
    raise KeyError(f"no such command: {command!r} (response={response})")


__all__ = ["RECORD_CLASSES", "Malformed", "Record", "Unknown", "jsonable", "record_class"]
