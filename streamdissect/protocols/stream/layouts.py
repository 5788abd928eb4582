"""The hot commands' fixed heads, made once from the protocol table (spec.py).

A head is what a frame starts with, field by field, up to its first field of variable
length: the frame header (size, key, version), then the command's fields as the table
gives them for that version. An array or Publish's message list gives its int32 count (and
a v1 Publish its first message's head, spec.PublishMessagesType.message_head); the Osiris
chunk header is read with osiris.HEADER's layout (its 3-byte `reserved` as a u16 and a u8).

Each head serves both readers of those bytes: the codec's fast paths unpack it with a
struct (`Layout.struct`), the columns decoders gather it for a whole block and view it with
a numpy layout (`Layout.dtype`; numpy is imported only there, the codec needs none).
"""

from __future__ import annotations

import struct
from functools import cache
from typing import Any, NamedTuple

from streamdissect.protocols.stream import osiris
from streamdissect.protocols.stream.primitives import (
    I8,
    INT16,
    INT32,
    INT64,
    U8,
    U16,
    U32,
    U64,
    ArrayType,
    IntType,
)
from streamdissect.protocols.stream.spec import CHUNK_HEADER, PUBLISH_MESSAGES, message_spec

FRAME_HEADER = (("size", U32), ("key", U16), ("version", U16))
_BY_CODE = {t.fmt: t for t in (U8, U16, U32, U64, I8, INT16, INT32, INT64)}
# osiris.HEADER's fields as wire types; its last two codes are the 3-byte `reserved`
_CODES = osiris.HEADER.format.lstrip("<>!=@")
CHUNK_HEADER_FIELDS = (*zip(osiris.HEADER_FIELDS[:-1], map(_BY_CODE.get, _CODES[:-2])),
                ("reserved_high", _BY_CODE[_CODES[-2]]), ("reserved_low", _BY_CODE[_CODES[-1]]))  # fmt: skip


class Layout(NamedTuple):
    """Fixed-width fields one after the other from a frame's start: (name, wire type)."""

    fields: tuple[tuple[str, IntType], ...]

    @property
    def size(self) -> int:
        return sum(t.size for _, t in self.fields)

    def at(self) -> dict[str, tuple[int, IntType]]:
        """Field name -> (its offset from the frame's start, its wire type)."""
        return _at(self.fields)

    def struct(self, start: int = 0) -> struct.Struct:
        """The fields from byte `start` on (8: the body after the frame header) as a struct."""
        return _struct(self.fields, start)

    def dtype(self, width: int = 0) -> Any:
        """The fields as a numpy layout of `width` bytes (0: just the fields), for items
        gathered from each frame's start."""
        return _dtype(self.fields, width)


@cache
def _at(fields: tuple) -> dict[str, tuple[int, IntType]]:
    found, at = {}, 0
    for name, wire_type in fields:
        found[name] = (at, wire_type)
        at += wire_type.size
    return found


@cache
def _struct(fields: tuple, start: int) -> struct.Struct:
    at, codes = 0, []
    for _, wire_type in fields:
        if at >= start:
            codes.append(wire_type.fmt)
        at += wire_type.size
    return struct.Struct(">" + "".join(codes))


@cache
def _dtype(fields: tuple, width: int) -> Any:
    import numpy as np

    at = _at(fields)
    formats = [(">" if t.size > 1 else "") + t.fmt for _, t in at.values()]
    return np.dtype({"names": list(at), "formats": formats,
                     "offsets": [offset for offset, _ in at.values()],
                     "itemsize": width or sum(t.size for _, t in fields)})  # fmt: skip


def head(command: str, version: int) -> Layout:
    """A request's head (the hot commands are all requests) as the table gives it."""
    message = message_spec(command)
    fields = list(FRAME_HEADER)
    if message.correlation_id:
        fields.append(("correlation_id", U32))
    if message.code:
        fields.append(("code", U16))
    for field in message.fields_for(version):
        if isinstance(field.type, IntType):
            fields.append((field.name, field.type))
        elif field.type is CHUNK_HEADER:
            fields += CHUNK_HEADER_FIELDS
        elif isinstance(field.type, ArrayType) or field.type is PUBLISH_MESSAGES:
            fields.append(("count", INT32))  # (primitives.read_count)
            if field.type is PUBLISH_MESSAGES and version == 1:
                fields += PUBLISH_MESSAGES.message_head
            break
        else:
            break
    return Layout(tuple(fields))


FRAME = Layout(FRAME_HEADER)
SIZE_KEY = Layout(FRAME_HEADER[:2])  # (what a walk over frames reads first)
CREDIT = head("Credit", 1)
CONFIRM = head("PublishConfirm", 1)
PUBLISH = head("Publish", 1)  # (with its first message's publishing id and entry word)
DELIVER = {version: head("Deliver", version) for version in message_spec("Deliver").versions}
# A v1 Publish message's head, and a PublishConfirm's publishing id
MESSAGE = Layout(PUBLISH_MESSAGES.message_head)
CONFIRM_ID = message_spec("PublishConfirm").fields[-1].type.element
HEAD_BYTES = max(layout.size for layout in (CREDIT, CONFIRM, PUBLISH, *DELIVER.values()))
