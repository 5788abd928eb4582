"""RocketMQ's compiled hot-frame reader (_native.c), when it was built and is wanted.

Built beside the Stream's loops by setup.py (optional); the Python path it replaces (the
headers parsed by the json module, hot.hot_record) is the fallback and the reference.
STREAMDISSECT_NATIVE says which, as for every compiled part (capture.native.optional): "0"
the Python path, "1" the compiled reader or an ImportError, unset the compiled one when built.

`loaded`: the extension module, or None (plain_walk reads it at each block, so tests can set
it to None).
"""

from __future__ import annotations

from types import ModuleType

from streamdissect.capture.native import optional
from streamdissect.framing.events import FrameEvent
from streamdissect.protocols.rocketmq import hot, messages, spec

# What the C code knows of the spec: the V2 send's keys of its producer group, topic, queue,
# system flag and properties, the properties' separators and names, the response flag, the
# JSON serialization, the header length's mask, the pull response's keys, the stored
# messages' magics, their system flag's compressed and IPv6 hosts bits, their fixed part,
# the pull request's code and the fields read of it (name, ext key, type)
_SPEC_READ = ("abefi", "\x01", "\x02", ("UNIQ_KEY", "TAGS", "KEYS"), 1, 0, 0xFFFFFF,
              frozenset(("nextBeginOffset", "minOffset", "maxOffset")),
              {-626843481: 1, -626843477: 2}, 0x1, 0x10, 0x20,
              ">iiiiiqqiq4siq4siiqi", 11,
              (("consumerGroup", "consumerGroup", "str"), ("topic", "topic", "str"),
               ("queueId", "queueId", "int"), ("queueOffset", "queueOffset", "int"),
               ("maxMsgNums", "maxMsgNums", "int"), ("sysFlag", "sysFlag", "int"),
               ("commitOffset", "commitOffset", "int"),
               ("suspendTimeoutMillis", "suspendTimeoutMillis", "int")))  # fmt: skip


def _spec_now() -> tuple:
    by_name = {f.name: f.key for f in spec.SEND_V2.fields}
    letters = "".join(by_name[n] for n in ("producerGroup", "topic", "queueId", "sysFlag",
                                           "properties"))  # fmt: skip
    return (letters, spec.NAME_VALUE_SEPARATOR, spec.PROPERTY_SEPARATOR,
            (spec.UNIQ_KEY, spec.TAGS, spec.KEYS), spec.RESPONSE_FLAG, spec.JSON,
            spec.HEADER_LENGTH_MASK, spec.PULL_RESPONSE_KEYS, spec.STORED_MAGICS,
            spec.SYSFLAG_COMPRESSED, spec.SYSFLAG_BORNHOST_V6, spec.SYSFLAG_STOREHOST_V6,
            messages._PLAIN_FIXED.format, hot.PULL_CODE, hot.PULL_FIELDS)  # fmt: skip


def _compiled() -> ModuleType | None:
    """The extension module when built (whatever STREAMDISSECT_NATIVE says: the tests')."""
    try:
        from streamdissect.protocols.rocketmq import _native
    except ImportError:
        return None
    return _native


def _load() -> ModuleType | None:
    behind = _spec_now() != _SPEC_READ  # (the table changed: the C code is behind)
    return optional(
        "streamdissect.protocols.rocketmq._native",
        stale="the compiled RocketMQ reader reads another spec" if behind else None,
    )


def _registered(module: ModuleType | None) -> ModuleType | None:
    """The module, told that the engine's frame events are made by their fields alone (a
    slotted class: its __init__ assigns them in order), which `place` then writes, and
    which light records it makes their own events instead (hot.OwnEvent)."""
    if module is not None:
        assert FrameEvent.field_names == EVENT_FIELDS
        module.plain_event(FrameEvent)
        module.self_events(hot.HotSend, hot.HotAnswer)  # (place's own events: hot.OwnEvent)
    return module


EVENT_FIELDS = ("ts_ns", "connection", "direction", "stream_offset", "record")
loaded = _registered(_load())
