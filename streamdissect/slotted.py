"""Plain classes that look like dataclasses: the repr, == and (frozen) hash of a dataclass,
written once here over the class's `field_names`.

A dataclass compiles its __init__, __repr__, __eq__ (and, frozen, __setattr__, __delattr__
and __hash__) from generated source when its module is imported: ~0.2-0.5 ms a class, ~10 ms
of every start of `analyze` for the classes on its path. A class built on these writes its
__init__ out and names its fields in order:

    class Point(Slotted):
        __slots__ = field_names = ("x", "y")

        def __init__(self, x: int, y: int = 0) -> None:
            self.x, self.y = x, y

It is not a dataclass: `dataclasses.fields`, `asdict` and `replace` do not take it.
"""

from __future__ import annotations

import reprlib
from typing import Any, ClassVar


class Slotted:
    """repr and == as a dataclass's over `field_names`; unhashable, as a mutable
    dataclass with == is."""

    __slots__ = ()
    field_names: ClassVar[tuple[str, ...]] = ()

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.field_names)
        return f"{type(self).__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in self.field_names)


class Unequal(Slotted):
    """A Slotted class never compared by value: == is identity, hashing by identity."""

    __slots__ = ()
    __eq__ = object.__eq__  # type: ignore[assignment]
    __hash__ = object.__hash__  # type: ignore[assignment]


class Frozen(Slotted):
    """A frozen dataclass's behaviour: fields set once by __init__ (through `_set`), hashed
    as the tuple of its fields is; pickled and copied through __init__ by position."""

    __slots__ = ()

    def _set(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise _frozen_error(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise _frozen_error(f"cannot delete field {name!r}")

    def __hash__(self) -> int:
        return hash(self._values())

    def __reduce__(self) -> tuple:
        return type(self), self._values()


class FrozenUnequal(Frozen):
    """A frozen class never compared by value (a frozen dataclass with eq=False)."""

    __slots__ = ()
    __eq__ = object.__eq__  # type: ignore[assignment]
    __hash__ = object.__hash__  # type: ignore[assignment]


def _frozen_error(text: str) -> Exception:
    """dataclasses' FrozenInstanceError, imported only when one is raised (dataclasses
    imports inspect: ~25 million instructions of a start that makes no dataclass)."""
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(text)
