"""fastjson text as RocketMQ writes its bodies (routes, registrations, heartbeats): JSON, but
for maps with integer keys, which fastjson may write without quotes (`{0:"127.0.0.1:10911"}`).

`parse` quotes such keys (outside strings only) and reads the text with the standard json
module; text that still does not parse, or nests deeper than the interpreter allows, is
None (the record keeps it as text).
"""

from __future__ import annotations

import json
import re

# a bare integer where a key goes: after { or , (and blanks), before :
_BARE_KEY = re.compile(rb"([{,]\s*)(-?\d+)(\s*:)")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _quote_keys(text: bytes) -> bytes:
    out, pos = [], 0
    for string in _STRING.finditer(text):
        out.append(_BARE_KEY.sub(rb'\1"\2"\3', text[pos : string.start()]))
        out.append(string.group())
        pos = string.end()
    out.append(_BARE_KEY.sub(rb'\1"\2"\3', text[pos:]))
    return b"".join(out)


def parse(body: bytes):
    """The value of a fastjson body, or None when it is not one."""
    if not body or body.lstrip()[:1] not in (b"{", b"["):
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        pass
    try:
        return json.loads(_quote_keys(body))
    except (ValueError, RecursionError):
        return None
