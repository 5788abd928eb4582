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

A compiled filter is a tree: called with a frame's dict it tests that frame; `mask` gives its
outcome for many frames at once from its comparisons' (cli._filter_columns evaluates one
over a column of values, as `frames` does for the bulk engine's hot runs).
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

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
Masks = Callable[["Leaf"], Any]  # a comparison -> its outcome for each frame of a set


class Test:
    """A compiled filter: called with a frame's dict, whether it selects it; `mask(masks)`:
    its outcome for each frame of a set (a bool array), from its comparisons' (`masks`)."""

    def __call__(self, frame: Frame) -> bool:
        raise NotImplementedError

    def mask(self, masks: Masks) -> Any:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Leaf(Test):
    """One comparison: FIELD OP WANT (op None: the bare FIELD); `test` takes the field's
    value (MISSING where a frame has none)."""

    path: tuple[str, ...]
    op: str | None
    want: Any
    test: Callable[[Any], bool]

    def __call__(self, frame: Frame) -> bool:
        value: Any = frame
        for name in self.path:
            if not isinstance(value, dict) or name not in value:
                return self.test(MISSING)
            value = value[name]
        return self.test(value)

    def mask(self, masks: Masks) -> Any:
        return masks(self)


@dataclass(frozen=True, slots=True)
class _Joined(Test):
    """Its parts joined by `and` (`every`) or by `or`."""

    parts: tuple[Test, ...]
    every: bool

    def __call__(self, frame: Frame) -> bool:
        return (all if self.every else any)(p(frame) for p in self.parts)

    def mask(self, masks: Masks) -> Any:
        join = np.logical_and if self.every else np.logical_or
        return join.reduce([p.mask(masks) for p in self.parts])


@dataclass(frozen=True, slots=True)
class _Not(Test):
    inner: Test

    def __call__(self, frame: Frame) -> bool:
        return not self.inner(frame)

    def mask(self, masks: Masks) -> Any:
        return np.logical_not(self.inner.mask(masks))


def compile_filter(expression: str, fields: frozenset[str] | None = None,
                   containers: frozenset[str] | None = None) -> Test:  # fmt: skip
    """A Test (frame dict -> bool) for `expression`; FilterError for a syntax error, a
    field not in `fields` (the known field names: a typo is an error, not an empty
    output), or a path under a field not in `containers` (those of the fields whose values
    hold fields of their own: maps, lists, structs; the others hold one value, under
    which a path would name nothing)."""
    return _Parser(expression, fields, containers).parse()


class _Parser:
    def __init__(self, expression: str, fields: frozenset[str] | None,
                 containers: frozenset[str] | None) -> None:  # fmt: skip
        self.expression = expression
        self.fields = fields
        self.containers = containers
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
        return parts[0] if len(parts) == 1 else _Joined(tuple(parts), every=False)

    def _and(self) -> Test:
        parts = self._joined("&&", self._not)
        return parts[0] if len(parts) == 1 else _Joined(tuple(parts), every=True)

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
            return _Not(self._not())
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
        if self.containers is not None and len(path) > 1 and path[0] not in self.containers:
            raise FilterError(self.expression, token.at, f"{path[0]!r} has no fields: it holds "
                              "one value (a number, text or true/false), not a map, list or "
                              "struct")  # fmt: skip
        op = self._peek()
        if op.kind != "op" or op.text not in OPERATORS:
            return Leaf(tuple(path), None, None, _truthy)
        self._take()
        value = self._value(op.text)
        return Leaf(tuple(path), op.text, value, _comparison(op.text, value))

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


MISSING = object()  # the value of a field a frame does not have


def _truthy(value: Any) -> bool:
    return value is not MISSING and bool(value)


def _comparison(op: str, want: Any) -> Callable[[Any], bool]:
    """The test of a field's value for `op want`."""
    if op == "==":
        return lambda v: _equal(v, want)
    if op == "!=":
        return lambda v: not _equal(v, want)
    if op == "contains":
        return lambda v: _contains(v, want)
    if op == "matches":
        return lambda v: isinstance(v, str) and want.search(v) is not None
    order = ORDERS[op]

    def ordered(value: Any) -> bool:
        if value is MISSING or value is None or want is None:
            return False
        if isinstance(value, bool) or isinstance(want, bool):
            return False
        if isinstance(value, (int, float)) and isinstance(want, (int, float)):
            return order(value, want)
        if isinstance(value, str) and isinstance(want, str):
            return order(value, want)
        return False

    return ordered


ORDERS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _equal(value: Any, want: Any) -> bool:
    if value is MISSING:
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
