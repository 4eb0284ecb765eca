"""pyebpf._record.record: NamedTuple-style records without typing."""
from __future__ import annotations

import pickle

import pytest

from pyebpf._record import keyed_by, record
from pyebpf.elf import Segment


@record
class Point:
    """A point."""

    x: int
    y: int
    label: str = ""

    @property
    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)

    def __str__(self) -> str:
        return f"{self.label or 'P'}({self.x}, {self.y})"


def test_fields_defaults_and_methods():
    p = Point(1, -2)
    assert p == (1, -2, "") and isinstance(p, tuple)
    assert (p.x, p.y, p.label, p.norm1) == (1, -2, "", 3)
    assert Point._fields == ("x", "y", "label")
    assert p._replace(label="q") == Point(1, -2, "q")
    assert p._asdict() == {"x": 1, "y": -2, "label": ""}
    assert repr(p) == "Point(x=1, y=-2, label='')" and str(p) == "P(1, -2)"
    assert Point.__doc__ == "A point." and Point.__qualname__ == "Point"
    assert hash(p) == hash((1, -2, ""))
    with pytest.raises(AttributeError):
        p.z = 3                              # no __dict__: a real tuple record
    with pytest.raises(TypeError):
        Point(1)


def test_pickles_by_reference():
    s = Segment(0x1000, 0x200, 0x1000, 0x200, 5)
    assert pickle.loads(pickle.dumps(s)) == s
    assert type(pickle.loads(pickle.dumps(s))) is Segment


def test_a_field_without_default_after_one_with_is_refused():
    with pytest.raises(TypeError, match="'b' without a default"):
        @record
        class Bad:
            a: int = 0
            b: int


@keyed_by("key")
class _Keyed:
    """Equal by ``key()``."""

    def __init__(self, a: int, b: int) -> None:
        self.a, self.b = a, b

    def key(self) -> tuple[int, ...]:
        return (self.a,)


class _KeyedSub(_Keyed):
    """A subclass that redefines the key."""

    def key(self) -> tuple[int, ...]:
        return (self.a, self.b)


def test_keyed_by_equality_and_hash():
    assert _Keyed(1, 2) == _Keyed(1, 3) and hash(_Keyed(1, 2)) == hash(_Keyed(1, 3))
    assert _Keyed(1, 2) != _Keyed(2, 2)
    assert len({_Keyed(1, 2), _Keyed(1, 5), _Keyed(2, 2)}) == 2
    # a subclass compares with the class, with its own key (looked up per instance)
    assert _KeyedSub(1, 2) != _KeyedSub(1, 3) and _KeyedSub(1, 2) == _KeyedSub(1, 2)
    assert hash(_KeyedSub(1, 2)) == hash((1, 2))
    # anything else: NotImplemented, so == falls back to identity and is False
    assert _Keyed(1, 2).__eq__((1,)) is NotImplemented
    assert _Keyed(1, 2) != (1,) and (1,) != _Keyed(1, 2)


def test_keyed_by_users_keep_their_equality():
    from pyebpf.isa import Insn
    from pyebpf.program.core import RawSlot

    assert Insn(0xb7, 1, 0, 0, 5) == Insn(0xb7, 1, 0, 0, 5, comment="x")
    assert Insn(0xb7, 1, 0, 0, 5) != Insn(0xb7, 1, 0, 0, 6)
    assert hash(Insn(0xb7, 1, 0, 0, 5)) == hash(Insn(0xb7, 1, 0, 0, 5))
    assert RawSlot(0x18) != Insn(0x18, 0, 0, 0, 0)      # RawSlot's fields() differ
    assert RawSlot(0x18) == RawSlot(0x18) and Insn(0, 0) != "insn"
