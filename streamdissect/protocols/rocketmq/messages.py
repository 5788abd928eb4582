"""Messages in RocketMQ bodies: a pull response's stored messages, a SEND_BATCH_MESSAGE
body's items, a single send's message.

Every length read is checked against the bytes there before anything is sliced, so a body
whose messages lie about their sizes ends the list with an error (and where), never an
allocation beyond the frame's bytes; a compressed body's inflated size is found a chunk at
a time and refused past spec.MAX_INFLATED (wire.py).
"""

from __future__ import annotations

import struct

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.records import Message
from streamdissect.protocols.rocketmq.wire import (
    body_crc,
    inflated_length,
    offset_msg_id,
    parse_properties,
)

_i16 = struct.Struct(">h").unpack_from
_i32 = struct.Struct(">i").unpack_from
_u8 = struct.Struct(">B").unpack_from
# totalSize, magic, bodyCRC, queueId, flag, queueOffset, physicalOffset, sysFlag, bornTimestamp
_STORED_HEAD = struct.Struct(">iiiiiqqiq")
_HOST_PORT = struct.Struct(">i")
_STORE_MIDDLE = struct.Struct(">q")  # storeTimestamp
_STORED_TAIL = struct.Struct(">iq")  # reconsumeTimes, preparedTransactionOffset
# both hosts IPv4 (the usual): born host and port, store timestamp, store host and port,
# reconsume times, prepared transaction offset, body length, read at once
_IPV4_MIDDLE = struct.Struct(">4siq4siiqi")
_V6_HOSTS = spec.SYSFLAG_BORNHOST_V6 | spec.SYSFLAG_STOREHOST_V6
# totalSize, magic, bodyCRC, flag, bodyLength: a batch item's head
_BATCH_HEAD = struct.Struct(">iiiii")


class BodyError(ValueError):
    """A body's layout broken at `offset` (from the body's start); `messages`: those read
    before it."""

    def __init__(self, reason: str, offset: int, messages: list | None = None):
        super().__init__(reason)
        self.offset = offset
        self.messages = messages or []


def _note_inflation(message: Message) -> None:
    """A compressed body's inflated size (zlib only: an LZ4 or ZSTD body, RocketMQ 5's, is
    left as it is)."""
    sys_flag = message.sys_flag or 0
    if not sys_flag & spec.SYSFLAG_COMPRESSED:  # (most are not: asked first)
        return
    if spec.COMPRESSION_TYPES.get(sys_flag & spec.SYSFLAG_COMPRESSION_MASK) == "zlib":
        message.inflated_length, message.inflate_error = inflated_length(message.body)


def sent_message(body: bytes, fields: dict) -> Message:
    """A SEND_MESSAGE(_V2) body: one message, its other fields in the header."""
    get = fields.get
    # (positional: body, properties, topic, queue_id, flag, sys_flag)
    message = Message(body, parse_properties(get("properties") or ""), get("topic"),
                      get("queueId"), get("flag"), get("sysFlag"))  # fmt: skip
    if message.sys_flag:
        _note_inflation(message)
    return message


def _need(body: bytes, pos: int, n: int, end: int, what: str) -> None:
    if n < 0 or pos + n > end:
        raise BodyError(f"{what} of {n} bytes at {pos} runs past the message's end {end}", pos)


def _sized(body: bytes, at: int, n: int, stop: int, what: str) -> tuple[bytes, int]:
    """The `n` bytes at `at` (checked to lie within the message) and where they end."""
    _need(body, at, n, stop, what)
    return body[at : at + n], at + n


def _properties(body: bytes, at: int, stop: int) -> tuple[dict[str, str], int]:
    """A properties length (i16) and string, as a map; where they end."""
    _need(body, at, 2, stop, "properties length")
    text, at = _sized(body, at + 2, _i16(body, at)[0], stop, "properties")
    return parse_properties(text.decode("utf-8", "replace")), at


def _ends(at: int, pos: int, total: int, what: str) -> None:
    if at != pos + total:
        raise BodyError(f"{what} at {pos} says {total} bytes, its fields take {at - pos}", pos)


def batch_messages(body: bytes, topic: str | None, queue_id: int | None) -> list[Message]:
    """A SEND_BATCH_MESSAGE body: items of totalSize, magic, bodyCRC, flag, body length and
    body, properties length (i16) and properties (BodyError when they lie)."""
    out = []
    pos, end = 0, len(body)
    while pos < end:
        _need(body, pos, _BATCH_HEAD.size, end, "batch item head")
        total, _magic, _crc, flag, length = _BATCH_HEAD.unpack_from(body, pos)
        if total < _BATCH_HEAD.size + 2 or pos + total > end:
            raise BodyError(f"batch item at {pos} says {total} bytes, {end - pos} left", pos)
        stop = pos + total
        at = pos + _BATCH_HEAD.size
        data, at = _sized(body, at, length, stop, "batch item body")
        properties, at = _properties(body, at, stop)
        _ends(at, pos, total, "batch item")
        out.append(Message(body=data, properties=properties, topic=topic, queue_id=queue_id,
                           flag=flag, sys_flag=0))  # fmt: skip
        pos = stop
    return out


def _host(body: bytes, at: int, v6: bool, stop: int, what: str) -> tuple[bytes, int, int]:
    size = 16 if v6 else 4
    _need(body, at, size + 4, stop, what)
    return body[at : at + size], _HOST_PORT.unpack_from(body, at + size)[0], at + size + 4


def _host_text(address: bytes, port: int) -> str:
    if len(address) == 4:  # (dotted decimal, as ipaddress writes it, without its cost)
        return f"{address[0]}.{address[1]}.{address[2]}.{address[3]}:{port}"
    import ipaddress

    ip = ipaddress.ip_address(address)
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


def stored_message(body: bytes, pos: int, end: int, lazy: bool = False) -> Message:
    """The stored message at body[pos:] (MessageDecoder's layout; BodyError when its sizes
    do not hold). `lazy`: every size checked, but records.LAZY fields left to be read (by
    this, again) when first asked for."""
    _need(body, pos, _STORED_HEAD.size, end, "stored message head")
    (total, magic, crc, queue_id, flag, queue_offset, physical, sys_flag,
     born_ts) = _STORED_HEAD.unpack_from(body, pos)  # fmt: skip
    if total < _STORED_HEAD.size or pos + total > end:
        raise BodyError(f"message at {pos} says {total} bytes, {end - pos} left", pos)
    version = spec.STORED_MAGICS.get(magic)
    if version is None:
        raise BodyError(f"message at {pos}: unknown magic code {magic & 0xFFFFFFFF:#x}", pos + 4)
    stop = pos + total
    at = pos + _STORED_HEAD.size
    if not sys_flag & _V6_HOSTS and at + _IPV4_MIDDLE.size <= stop:  # (the checks below hold)
        (born, born_port, store_ts, store, store_port, reconsume, prepared,
         length) = _IPV4_MIDDLE.unpack_from(body, at)  # fmt: skip
        at += _IPV4_MIDDLE.size
    else:
        born, born_port, at = _host(body, at, bool(sys_flag & spec.SYSFLAG_BORNHOST_V6), stop,
                                    "born host")  # fmt: skip
        _need(body, at, 8, stop, "store timestamp")
        (store_ts,) = _STORE_MIDDLE.unpack_from(body, at)
        store, store_port, at = _host(body, at + 8, bool(sys_flag & spec.SYSFLAG_STOREHOST_V6),
                                      stop, "store host")  # fmt: skip
        _need(body, at, _STORED_TAIL.size + 4, stop, "reconsume times and body length")
        reconsume, prepared = _STORED_TAIL.unpack_from(body, at)
        at += _STORED_TAIL.size
        (length,) = _i32(body, at)
        at += 4
    data, at = _sized(body, at, length, stop, "message body")
    topic_size = 1 if version == 1 else 2  # V2 stores the topic's length in 2 bytes
    _need(body, at, topic_size, stop, "topic length")
    tlen = _u8(body, at)[0] if version == 1 else _i16(body, at)[0]
    topic, at = _sized(body, at + topic_size, tlen, stop, "topic")
    if lazy:  # (the sizes checked as _properties checks them)
        _need(body, at, 2, stop, "properties length")
        at = _sized(body, at + 2, _i16(body, at)[0], stop, "properties")[1]
        _ends(at, pos, total, "message")
        return _lazy_message(body, pos, end, data, total, magic, crc, queue_id, flag,
                             queue_offset, physical, sys_flag, born_ts, store_ts, reconsume,
                             prepared)  # fmt: skip
    properties, at = _properties(body, at, stop)
    _ends(at, pos, total, "message")
    message = Message(
        body=data, properties=properties, topic=topic.decode("utf-8", "replace"),
        queue_id=queue_id, flag=flag, sys_flag=sys_flag, total_size=total, magic=magic,
        body_crc=crc,
        crc_ok=body_crc(data) == crc, queue_offset=queue_offset, physical_offset=physical,
        born_timestamp=born_ts, born_host=_host_text(born, born_port),
        store_timestamp=store_ts, store_host=_host_text(store, store_port),
        reconsume_times=reconsume, prepared_transaction_offset=prepared,
        offset_msg_id=offset_msg_id(store, store_port, physical))
    _note_inflation(message)
    return message


_new_message = Message.__new__


def _lazy_message(body: bytes, pos: int, end: int, data: bytes, total: int, magic: int,
                  crc: int, queue_id: int, flag: int, queue_offset: int, physical: int,
                  sys_flag: int, born_ts: int, store_ts: int, reconsume: int,
                  prepared: int) -> Message:  # fmt: skip
    """A stored message read lazily (stored_message): every field but the LAZY ones, which
    the message reads from `body` at `pos` when one is first asked for. (Made slot by slot:
    the dataclass's __init__ and deleting the LAZY slots again cost 7x as much.)"""
    message = _new_message(Message)
    message.body, message.queue_id, message.flag, message.sys_flag = data, queue_id, flag, sys_flag
    message.total_size, message.magic, message.body_crc = total, magic, crc
    message.queue_offset, message.physical_offset = queue_offset, physical
    message.born_timestamp, message.store_timestamp = born_ts, store_ts
    message.reconsume_times, message.prepared_transaction_offset = reconsume, prepared
    message.inflated_length = message.inflate_error = None
    message._source = (stored_message, body, pos, end)
    if sys_flag & spec.SYSFLAG_COMPRESSED:
        _note_inflation(message)
    return message


# a stored message's head and IPv4 middle (_STORED_HEAD, _IPV4_MIDDLE) at once
_PLAIN_FIXED = struct.Struct(">iiiiiqqiq4siq4siiqi")


def _plain_lazy(body: bytes, pos: int, end: int) -> Message | None:
    """stored_message(body, pos, end, lazy=True) for the usual message: both hosts IPv4, a
    known magic, every size holding (checked as stored_message checks them); None for any
    other, which stored_message reads (and says what does not hold)."""
    fixed = _plain_fixed(body, pos, end)
    if fixed is None:
        return None
    (total, magic, crc, queue_id, flag, queue_offset, physical, sys_flag, born_ts, _born,
     _born_port, store_ts, _store, _store_port, reconsume, prepared, length) = fixed  # fmt: skip
    fixed_end = pos + _PLAIN_FIXED.size
    return _lazy_message(body, pos, end, body[fixed_end : fixed_end + length], total, magic,
                         crc, queue_id, flag, queue_offset, physical, sys_flag, born_ts,
                         store_ts, reconsume, prepared)  # fmt: skip


def plain_sizes(body: bytes) -> tuple[int, int] | None:
    """(how many messages, their bodies' bytes) of a pull response's body when every
    message is a usual one (_plain_lazy's) and none is compressed: what stored_messages
    reads then, without an error; None for any other body."""
    count = size = 0
    pos, end = 0, len(body)
    while pos < end:
        fixed = _plain_fixed(body, pos, end)
        if fixed is None or fixed[7] & spec.SYSFLAG_COMPRESSED:
            return None
        count += 1
        size += fixed[16]
        pos += fixed[0]
    return count, size


def _plain_fixed(body: bytes, pos: int, end: int) -> tuple | None:
    """The fixed fields (_PLAIN_FIXED's) of the usual stored message at `pos`, its sizes
    checked (_plain_lazy); None for any other."""
    fixed_end = pos + _PLAIN_FIXED.size
    if fixed_end > end:
        return None
    fields = _PLAIN_FIXED.unpack_from(body, pos)
    total, magic, sys_flag, length = fields[0], fields[1], fields[7], fields[16]
    stop = pos + total
    version = spec.STORED_MAGICS.get(magic)
    if sys_flag & _V6_HOSTS or version is None or not fixed_end <= stop <= end or length < 0:
        return None
    at = fixed_end + length  # the topic's length (V1: a byte; V2: an int16)
    if version == 1:
        if at + 1 > stop:
            return None
        at += 1 + body[at]
    else:
        if at + 2 > stop:
            return None
        topic_length = _i16(body, at)[0]
        if topic_length < 0:
            return None
        at += 2 + topic_length
    # the properties' length there, and the properties ending the message
    if at + 2 > stop or at + 2 + _i16(body, at)[0] != stop:
        return None
    return fields


def stored_messages(body: bytes, lazy: bool = False) -> list[Message]:
    """A pull response's body: stored messages back to back (BodyError at the first that
    lies; the messages before it are in the error's `messages`); `lazy`: see
    stored_message."""
    out: list[Message] = []
    pos, end = 0, len(body)
    while pos < end:
        message = _plain_lazy(body, pos, end) if lazy else None
        if message is None:
            try:
                message = stored_message(body, pos, end, lazy)
            except BodyError as e:
                raise BodyError(str(e), e.offset, out) from None
        out.append(message)
        pos += message.total_size
    return out
