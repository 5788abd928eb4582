"""docs/protocol-rocketmq.md and spec.py say the same: the two code tables, the languages,
every known header's fields and types, the V2 short keys."""

from __future__ import annotations

import re
from pathlib import Path

from streamdissect.protocols.rocketmq import spec

DOC = (Path(__file__).resolve().parent.parent / "docs" / "protocol-rocketmq.md").read_text()


def _section(title: str) -> str:
    start = DOC.index(title)
    end = DOC.find("\n#", start + len(title))
    return DOC[start : end if end > 0 else None]


def _code_table(title: str) -> dict[int, str]:
    return {int(code): name for code, name in
            re.findall(r"\| (\d+) \| ([A-Z0-9_]+) (?=\|)", _section(title))}  # fmt: skip


def test_the_code_tables_are_the_specs():
    assert _code_table("### 2.1 Request codes") == spec.REQUEST_CODES
    assert _code_table("### 2.2 Response codes") == spec.RESPONSE_CODES


def test_the_languages_are_the_specs():
    named = dict(re.findall(r"([A-Z_]+) (\d+)[,.]", _section("## 4. Languages")))
    assert {int(code): name for name, code in named.items()} == spec.LANGUAGES


def test_the_headers_are_the_specs():
    rows = re.findall(r"^\| (\d+) ([A-Z0-9_]+) \| (\w+) \| (.*) \|$", _section("## 3. Headers"),
                      re.MULTILINE)  # fmt: skip
    documented = {}
    for code, name, class_name, fields in rows:
        assert spec.request_name(int(code)) == name
        parsed = re.findall(r"(?:`(\w+)` )?(\w+) \((str|int|bool)\)", fields)
        documented[int(code)] = (class_name, [(key or field, field, kind)
                                              for key, field, kind in parsed])  # fmt: skip
    assert documented == {code: (h.name, [(f.key, f.name, f.type) for f in h.fields])
                          for code, h in spec.REQUEST_HEADERS.items()}  # fmt: skip
    letters = re.findall(r"`([a-n])`\s+(\w+)", _section("SEND_MESSAGE_V2 (310)"))
    assert dict(letters) == spec.V2_NAMES
