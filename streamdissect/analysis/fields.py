"""Uniform access to record fields whether the codec hands out objects or mappings."""

from __future__ import annotations

from typing import Any


def get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def cut_count(record: Any, field: str, count: str = "count") -> int:
    """The element count the header of a frame the capture cut gives for `field`, the list
    its bytes stop in (its `cut`: a record's, or a replayed frame's mapping); 0 when none was
    read, or the frame is whole. `count="records"`: the records its elements hold at least,
    where the cut says (a Stream Publish's messages, whose sub-batches hold several)."""
    cut = get(record, "cut")
    return (get(cut, count) or 0) if get(cut, "field") == field else 0


def pair(item: Any, first: str, second: str) -> tuple[Any, Any]:
    """(first, second) from a tuple, a mapping or an object."""
    if isinstance(item, (tuple, list)):
        return item[0], item[1]
    return get(item, first), get(item, second)
