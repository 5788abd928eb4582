"""The Stream fast path's compiled loops (_native.c), when they were built and are wanted.

`pip install` builds the C extension when a C compiler and the Python headers are there
(setup.py, optional); without them the install goes on and the pure-Python code runs, which
is also the reference the compiled loops are tested against (tests run both). The
environment variable STREAMDISSECT_NATIVE says which (capture.native.optional): "0" the
pure-Python code, "1" the compiled loops or an ImportError, unset (or anything else) the
compiled loops when built.

`loaded`: the extension module, or None (the callers read it at each walk, so tests can
set it to None).
"""

from __future__ import annotations

from types import ModuleType

from streamdissect.capture.native import optional
from streamdissect.protocols.stream import layouts
from streamdissect.protocols.stream.primitives import U16, U32

# What the C code reads of a frame (its size and key, big-endian, from its first byte)
_HEADER_READ = (("size", U32), ("key", U16))


def _load() -> ModuleType | None:
    behind = layouts.SIZE_KEY.fields != _HEADER_READ  # (the table changed: the C code is behind)
    return optional(
        "streamdissect.protocols.stream._native",
        stale="the compiled Stream walk reads another frame header" if behind else None,
    )


loaded = _load()


def hot_mask(keys: frozenset) -> bytes:
    """One byte a 16-bit key, 1 for the keys given (the C walk's hot keys)."""
    mask = bytearray(1 << 16)
    for key in keys:
        mask[key] = 1
    return bytes(mask)
