"""Display filters over frames, named as in tshark (`-Y`): an expression over the field names
of the frames jsonl, parsed into a tree (no eval) and matched against each frame's dict.

    command == "Deliver" and subscription_id == 1
    code != 1 or response
    connection contains ":5553" and not (command == "Heartbeat")
    ts_ns > 1795308251144356000

Grammar: `or` / `||`, `and` / `&&`, `not` / `!`, parentheses; a comparison is FIELD OP VALUE
with OP one of == != < <= > >= contains matches (a regular expression); a bare FIELD is
true when the frame has it and it is neither null, false, 0 nor empty. Values: numbers
(decimal or 0x hex), "strings" (JSON escapes), true, false, null. Fields are the top-level
keys of a jsonl line (`chunk.chunk_id`: a key inside an object); an anomaly is a frame whose
command is "Anomaly" (with its kind, stream_offset, length, detail). A field a frame does
not have compares as null: `==` is false and `!=` true, except against null.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

OPERATORS = ("==", "!=", "<=", ">=", "<", ">", "contains", "matches")
_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<number>-?(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?))
  | (?P<op>==|!=|<=|>=|<|>|&&|\|\||!|\(|\))
  | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
""", re.VERBOSE)  # fmt: skip
_WORD_OPS = {"and": "&&", "or": "||", "not": "!"}


class FilterError(ValueError):
    """A filter that cannot be read: the message says what and at which character."""

    def __init__(self, expression: str, position: int, message: str) -> None:
        pointer = " " * position + "^"
        super().__init__(f"{message} at character {position + 1}\n  {expression}\n  {pointer}")
        self.position = position


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # string, number, op, word, end
    text: str
    at: int


def _tokens(expression: str) -> list[_Token]:
    out, at = [], 0
    while at < len(expression):
        m = _TOKEN.match(expression, at)
        if m is None:
            raise FilterError(expression, at, f"unexpected {expression[at]!r}")
        kind = m.lastgroup or ""
        if kind != "space":
            text = m.group()
            if kind == "word" and text in _WORD_OPS:
                kind, text = "op", _WORD_OPS[text]
            elif kind == "word" and text in ("contains", "matches"):
                kind = "op"
            out.append(_Token(kind, text, at))
        at = m.end()
    out.append(_Token("end", "", len(expression)))
    return out


Frame = dict[str, Any]
Test = Callable[[Frame], bool]


def compile_filter(expression: str, fields: frozenset[str] | None = None) -> Test:
    """A function frame dict -> bool for `expression`; FilterError for a syntax error or a
    field not in `fields` (the known field names: a typo is an error, not an empty
    output)."""
    return _Parser(expression, fields).parse()


class _Parser:
    def __init__(self, expression: str, fields: frozenset[str] | None) -> None:
        self.expression = expression
        self.fields = fields
        self.tokens = _tokens(expression)
        self.at = 0

    def parse(self) -> Test:
        if self.tokens[0].kind == "end":
            raise FilterError(self.expression, 0, "empty filter")
        test = self._or()
        token = self.tokens[self.at]
        if token.kind != "end":
            raise FilterError(self.expression, token.at, f"unexpected {token.text!r}")
        return test

    def _peek(self) -> _Token:
        return self.tokens[self.at]

    def _take(self) -> _Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def _or(self) -> Test:
        parts = self._joined("||", self._and)
        return parts[0] if len(parts) == 1 else (lambda f: any(p(f) for p in parts))

    def _and(self) -> Test:
        parts = self._joined("&&", self._not)
        return parts[0] if len(parts) == 1 else (lambda f: all(p(f) for p in parts))

    def _joined(self, operator: str, operand: Callable[[], Test]) -> list[Test]:
        """operand (operator operand)*: the operands."""
        parts = [operand()]
        while self._peek().text == operator:
            self._take()
            parts.append(operand())
        return parts

    def _not(self) -> Test:
        if self._peek().text == "!":
            self._take()
            inner = self._not()
            return lambda f: not inner(f)
        return self._primary()

    def _primary(self) -> Test:
        token = self._take()
        if token.text == "(":
            inner = self._or()
            close = self._take()
            if close.text != ")":
                raise FilterError(self.expression, close.at, "expected ')'")
            return inner
        if token.kind != "word":
            what = "the end" if token.kind == "end" else repr(token.text)
            raise FilterError(self.expression, token.at, f"expected a field name, got {what}")
        path = token.text.split(".")
        if self.fields is not None and path[0] not in self.fields:
            raise FilterError(self.expression, token.at, f"unknown field {path[0]!r}")
        get = _getter(path)
        op = self._peek()
        if op.kind != "op" or op.text not in OPERATORS:
            return lambda f: _truthy(get(f))
        self._take()
        value = self._value(op.text)
        return _comparison(get, op.text, value)

    def _value(self, op: str) -> Any:
        token = self._take()
        if token.kind == "string":
            value: Any = json.loads(token.text)
        elif token.kind == "number":
            text = token.text
            value = int(text, 16) if text.lower().lstrip("-").startswith("0x") else (
                float(text) if any(c in text for c in ".eE") else int(text))  # fmt: skip
        elif token.kind == "word" and token.text in ("true", "false", "null"):
            value = {"true": True, "false": False, "null": None}[token.text]
        else:
            what = "the end" if token.kind == "end" else repr(token.text)
            raise FilterError(self.expression, token.at, f"expected a value after {op}, got {what}")
        if op == "matches":
            if not isinstance(value, str):
                raise FilterError(self.expression, token.at, "matches takes a \"string\"")
            try:
                value = re.compile(value)
            except re.error as exc:
                raise FilterError(self.expression, token.at, f"bad regular expression: {exc}") from None
        if op == "contains" and (isinstance(value, bool) or not isinstance(value, (str, int))):
            raise FilterError(self.expression, token.at, "contains takes a string or a number")
        return value


_MISSING = object()


def _getter(path: list[str]) -> Callable[[Frame], Any]:
    if len(path) == 1:
        name = path[0]
        return lambda f: f.get(name, _MISSING)

    def get(frame: Frame) -> Any:
        value: Any = frame
        for name in path:
            if not isinstance(value, dict) or name not in value:
                return _MISSING
            value = value[name]
        return value

    return get


def _truthy(value: Any) -> bool:
    return value is not _MISSING and bool(value)


def _comparison(get: Callable[[Frame], Any], op: str, want: Any) -> Test:
    if op == "==":
        return lambda f: _equal(get(f), want)
    if op == "!=":
        return lambda f: not _equal(get(f), want)
    if op == "contains":
        return lambda f: _contains(get(f), want)
    if op == "matches":
        return lambda f: isinstance(v := get(f), str) and want.search(v) is not None
    order = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
             ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}[op]  # fmt: skip

    def ordered(frame: Frame) -> bool:
        value = get(frame)
        if value is _MISSING or value is None or want is None:
            return False
        if isinstance(value, bool) or isinstance(want, bool):
            return False
        if isinstance(value, (int, float)) and isinstance(want, (int, float)):
            return order(value, want)
        if isinstance(value, str) and isinstance(want, str):
            return order(value, want)
        return False

    return ordered


def _equal(value: Any, want: Any) -> bool:
    if value is _MISSING:
        value = None
    if isinstance(value, bool) != isinstance(want, bool):
        return False
    return value == want


def _contains(value: Any, want: Any) -> bool:
    if isinstance(value, str):
        return isinstance(want, str) and want in value
    if isinstance(value, list):
        return want in value
    if isinstance(value, dict):
        return want in value
    return False
