"""-Y over columns: a comparison's outcome for many frames at once from a column of the
field's values, what Leaf.test gives for each value (tests/test_frames_columns.py holds the
two equal), with no dict per frame."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamdissect.cli._display_filter import ORDERS, Leaf


@dataclass(frozen=True, slots=True)
class Constant:
    """The same value for every frame (MISSING: no frame has the field)."""

    value: Any


@dataclass(frozen=True, slots=True)
class Category:
    """Frame i's value is values[codes[i]]."""

    codes: np.ndarray
    values: Sequence[Any]


@dataclass(frozen=True, slots=True)
class Integers:
    """An integer each (numpy ints); null where `valid` (when given) is False."""

    values: np.ndarray
    valid: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class IntLists:
    """A list of integers each: counts[i] long, its items those of `items` whose `frame_of`
    is i."""

    counts: np.ndarray
    frame_of: np.ndarray
    items: np.ndarray


Column = Constant | Category | Integers | IntLists
COMPARE = {"==": operator.eq, "!=": operator.ne, **ORDERS}


def outcome(leaf: Leaf, column: Column) -> Any:
    """The leaf's outcome for each frame of the column: a bool array, or one bool for all."""
    if column.__class__ is Constant:
        return leaf.test(column.value)
    if column.__class__ is Category:
        return np.array([leaf.test(v) for v in column.values], dtype=bool)[column.codes]
    if column.__class__ is Integers:
        return _integers(leaf, column)
    return _int_lists(leaf, column)


def _integers(leaf: Leaf, column: Integers) -> Any:
    if leaf.op is None:
        result: Any = column.values != 0
    elif leaf.op in COMPARE and leaf.want.__class__ in (int, float):
        result = compare(column.values, leaf.op, leaf.want)
    else:
        # against null, a bool or a string, and with contains or matches, an integer's
        # outcome does not depend on which integer it is
        result = leaf.test(0)
    if column.valid is not None:
        result = np.where(column.valid, result, leaf.test(None))
    return result


def _int_lists(leaf: Leaf, column: IntLists) -> Any:
    if leaf.op is None:
        return column.counts > 0
    if leaf.op == "contains" and leaf.want.__class__ is int:
        hit = np.broadcast_to(compare(column.items, "==", leaf.want), column.items.shape)
        found = np.zeros(len(column.counts), dtype=bool)
        found[column.frame_of[hit]] = True
        return found
    # a list equals no value a filter can name, is in no order with one, matches nothing
    # and holds no string
    return leaf.test([])


def compare(values: np.ndarray, op: str, want: float) -> Any:
    """values OP want for a numpy integer array as Python compares ints with `want` (exactly:
    no rounding of either to a float, no wrap-around of `want` to the array's type)."""
    if want.__class__ is float:
        if not math.isfinite(want):
            return COMPARE[op](0, want)  # (every integer compares alike with it)
        if not want.is_integer():
            if op in ("==", "!="):
                return op == "!="
            # x < 2.5 is x <= 2, x > 2.5 is x > 2
            op, want = {"<": "<=", "<=": "<=", ">": ">", ">=": ">"}[op], math.floor(want)
        want = int(want)
    info = np.iinfo(values.dtype)
    if want > info.max or want < info.min:
        # every value lies on one side of it: the nearest one's outcome is every one's
        return COMPARE[op](int(info.max) if want > info.max else int(info.min), want)
    return COMPARE[op](values, values.dtype.type(want))
