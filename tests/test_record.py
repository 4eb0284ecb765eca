"""pyebpf._record.record: NamedTuple-style records without typing."""
from __future__ import annotations

import pickle

import pytest

from pyebpf._record import record
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
