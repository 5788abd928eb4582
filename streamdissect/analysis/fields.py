"""Uniform access to record fields whether the codec hands out objects or mappings."""

from __future__ import annotations

from typing import Any


def get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def pair(item: Any, first: str, second: str) -> tuple[Any, Any]:
    """(first, second) from a tuple, a mapping or an object."""
    if isinstance(item, (tuple, list)):
        return item[0], item[1]
    return get(item, first), get(item, second)
