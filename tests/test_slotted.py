"""streamdissect.slotted against the dataclasses it stands in for: the same repr, ==, hash,
frozen errors, pickling and copying as a dataclass of the same fields; and each class made on
it takes its fields in `field_names` order."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import pickle

import pytest

from streamdissect.slotted import Frozen, FrozenUnequal, Slotted, Unequal


@dataclasses.dataclass(slots=True)
class PointDC:
    x: int
    y: object = None


class Point(Slotted):
    __slots__ = field_names = ("x", "y")

    def __init__(self, x: int, y: object = None) -> None:
        self.x, self.y = x, y


@dataclasses.dataclass(slots=True, eq=False)
class LooseDC:
    x: int


class Loose(Unequal):
    __slots__ = field_names = ("x",)

    def __init__(self, x: int) -> None:
        self.x = x


@dataclasses.dataclass(frozen=True, slots=True)
class KeyDC:
    name: str
    size: int = 0


class Key(Frozen):
    __slots__ = field_names = ("name", "size")

    def __init__(self, name: str, size: int = 0) -> None:
        self._set(name=name, size=size)


@dataclasses.dataclass(frozen=True, eq=False)
class TypeDC:
    inner: object


class Type(FrozenUnequal):
    field_names = ("inner",)

    def __init__(self, inner: object) -> None:
        self._set(inner=inner)


def same_repr(ours: object, theirs: object) -> None:
    assert repr(ours).split("(", 1)[1] == repr(theirs).split("(", 1)[1]


def test_repr_and_equality_as_a_dataclass():
    for args in ((1, 2), (1, [3]), (0, "a")):
        same_repr(Point(*args), PointDC(*args))
        assert (Point(*args) == Point(*args)) == (PointDC(*args) == PointDC(*args))
    assert Point(1, 2) != Point(1, 3) and PointDC(1, 2) != PointDC(1, 3)
    assert Point(1) != PointDC(1)  # another class: never equal, as a dataclass
    assert Point.__hash__ is None and PointDC.__hash__ is None
    cycle = Point(1)
    cycle.y = cycle
    looped = PointDC(1)
    looped.y = looped
    same_repr(cycle, looped)


def test_unequal_is_identity():
    a, b = Loose(1), Loose(1)
    assert a == [a][0] and a != b and LooseDC(1) != LooseDC(1)
    assert hash(a) == object.__hash__(a)  # hashable by identity
    same_repr(a, LooseDC(1))


def test_frozen_as_a_frozen_dataclass():
    ours, theirs = Key("a", 3), KeyDC("a", 3)
    same_repr(ours, theirs)
    assert hash(ours) == hash(theirs) == hash(("a", 3))
    assert ours == Key("a", 3) and ours != Key("a", 4)
    for attempt in (lambda k: setattr(k, "name", "b"), lambda k: delattr(k, "size")):
        with pytest.raises(dataclasses.FrozenInstanceError) as ours_error:
            attempt(ours)
        with pytest.raises(dataclasses.FrozenInstanceError) as their_error:
            attempt(theirs)
        assert str(ours_error.value) == str(their_error.value)
    assert pickle.loads(pickle.dumps(ours)) == ours
    assert copy.copy(ours) == ours and copy.deepcopy(ours) == ours


def test_frozen_unequal_keeps_what_its_init_sets():
    inner = object()
    ours = Type(inner)
    assert ours.inner is inner and ours != Type(inner) and hash(ours) == object.__hash__(ours)
    same_repr(ours, TypeDC(inner))
    with pytest.raises(dataclasses.FrozenInstanceError):
        ours.inner = None


def test_mutable_ones_pickle_and_copy():
    point = Point(1, [2])
    assert pickle.loads(pickle.dumps(point)) == point
    assert copy.deepcopy(point) == point and copy.deepcopy(point).y is not point.y


CLASSES = [
    ("streamdissect.protocols.base", "FramerOptions"),
    ("streamdissect.protocols.stream.osiris", "Entry"),
    ("streamdissect.protocols.stream.osiris", "MalformedEntry"),
    ("streamdissect.protocols.stream.osiris", "OsirisRecord"),
    ("streamdissect.protocols.stream.osiris", "TrackingEntry"),
    ("streamdissect.protocols.stream.primitives", "StructType"),
    ("streamdissect.protocols.stream.primitives", "ArrayType"),
    ("streamdissect.protocols.stream.primitives", "MapType"),
    ("streamdissect.protocols.stream.primitives", "TrailingType"),
    ("streamdissect.protocols.stream.spec", "Field"),
    ("streamdissect.protocols.stream.spec", "Message"),
    ("streamdissect.protocols.stream.publish", "PublishMessages"),
    ("streamdissect.protocols.stream.records", "Malformed"),
    ("streamdissect.protocols.stream.records", "Unknown"),
    ("streamdissect.protocols.stream.codec", "Compiled"),
    ("streamdissect.protocols.stream.hot_block", "HotNote"),
    ("streamdissect.protocols.stream.analysis.collectors", "Collectors"),
    ("streamdissect.protocols.stream.analysis.confirms", "_Ledger"),
    ("streamdissect.protocols.stream.analysis.lifecycle", "_Conn"),
    ("streamdissect.protocols.stream.analysis.credit", "_Subscription"),
    ("streamdissect.tcp.vectorized", "InOrder"),
    ("streamdissect.engine.anomalies", "Anomaly"),
    ("streamdissect.framing.events", "FrameEvent"),
    ("streamdissect.framing.walk", "BlockEvents"),
    ("streamdissect.capture.packet_columns", "Packets"),
    ("streamdissect.tables.columns", "Column"),
    ("streamdissect.protocols.rocketmq.records", "Message"),
    ("streamdissect.protocols.rocketmq.records", "RemotingCommand"),
    ("streamdissect.protocols.rocketmq.records", "Malformed"),
    ("streamdissect.protocols.rocketmq.spec", "Field"),
    ("streamdissect.protocols.rocketmq.spec", "Header"),
    ("streamdissect.engine.state", "ConnectionSummary"),
    ("streamdissect.analysis.driver", "_Event"),
    ("streamdissect.protocols.stream.hot", "HotColumns"),
    ("streamdissect.protocols.stream.hot", "_Gathered"),
    ("streamdissect.protocols.stream.hot", "HotFrames"),
    ("streamdissect.protocols.stream.hot", "HotChunk"),
]


@pytest.mark.parametrize(("module", "name"), CLASSES)
def test_fields_in_init_order(module, name):
    """__init__ takes the fields in their order: a caller by position gets what the
    dataclass gave it."""
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, Slotted) and not dataclasses.is_dataclass(cls)
    taken = list(inspect.signature(cls.__init__).parameters)[1:]
    # (_Subscription makes its stall log; InOrder its row_of and time_of; RocketMQ's
    # Message takes its `_source` last, not a field)
    named = [n for n in cls.field_names if (name, n) != ("_Subscription", "stalls")]
    common = min(len(taken), len(named))
    assert taken[:common] == named[:common] and common >= len(named) - 2
    if "__slots__" in cls.__dict__:
        assert set(cls.field_names) <= set(cls.__slots__)


@dataclasses.dataclass(slots=True)
class SummaryDC:
    """engine.state.ConnectionSummary as the dataclass it was (rotated/ read it with
    dataclasses.asdict and replace)."""

    connection: str
    client: str
    server: str
    start_ns: int
    end_ns: int
    frames_c2s: int
    frames_s2c: int
    bytes_c2s: int
    bytes_s2c: int
    tcp_end: str
    protocol: str | None = None


def test_connection_summary_as_the_dataclass():
    """as_dict and replaced give what dataclasses.asdict and replace gave rotated/; the
    repr, == and pickling are the dataclass's."""
    from streamdissect.engine.state import ConnectionSummary

    values = ("10.0.0.1:40000-10.0.0.2:9876", "10.0.0.1:40000", "10.0.0.2:9876", 5, 9, 3, 4,
              120, 340, "fin")
    summary, dc = ConnectionSummary(*values), SummaryDC(*values)
    assert list(summary.as_dict().items()) == list(dataclasses.asdict(dc).items())
    changed = summary.replaced(frames_c2s=7, protocol="rocketmq")
    assert changed.as_dict() == dataclasses.asdict(dataclasses.replace(dc, frames_c2s=7,
                                                                       protocol="rocketmq"))
    assert summary.frames_c2s == 3 and summary.protocol is None  # (a copy: the first unchanged)
    assert repr(summary).split("(", 1)[1] == repr(dc).split("(", 1)[1]
    assert pickle.loads(pickle.dumps(changed)) == changed != summary
