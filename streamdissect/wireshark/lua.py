"""Python values written as Lua source: the literals of the generated dissector's tables."""

from __future__ import annotations

import re
from typing import Any

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_KEYWORDS = frozenset((
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
    "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
))  # fmt: skip


class Code(str):
    """Lua source taken as it is (a reference such as `base.HEX`), not quoted."""


class Hex(int):
    """An integer written in hexadecimal (wire keys read better so)."""


def string(text: str) -> str:
    """A Lua string literal; anything outside printable ASCII as a decimal escape."""
    out = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif 32 <= byte < 127:
            out.append(char)
        else:
            out.append(f"\\{byte:03d}")
    return '"' + "".join(out) + '"'


def _key(key: Any) -> str:
    if isinstance(key, str) and _NAME.match(key) and key not in _KEYWORDS:
        return key
    return f"[{literal(key)}]"


def literal(value: Any, indent: str = "", width: int = 96) -> str:
    """`value` as a Lua expression: dicts become tables with keys, lists and tuples arrays.

    Short tables stay on one line; longer ones put one entry a line, indented."""
    if isinstance(value, Code):
        return str(value)
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"0x{value:04x}" if isinstance(value, Hex) else str(value)
    if isinstance(value, str):
        return string(value)
    if isinstance(value, dict):
        items = [f"{_key(k)} = {literal(v, indent + '  ', width)}" for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
        items = [literal(v, indent + "  ", width) for v in value]
    else:
        raise TypeError(f"no Lua literal for {type(value).__name__}")
    one_line = "{" + ", ".join(items) + "}"
    if len(indent) + len(one_line) <= width and "\n" not in one_line:
        return one_line
    inner = indent + "  "
    return "{\n" + "".join(f"{inner}{item},\n" for item in items) + indent + "}"
