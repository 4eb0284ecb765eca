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


# --------------------------------------------------------------- @dataclass
# pyebpf._record.dataclass against the standard library's, on the same classes
def _pair(**options):
    """The same class hierarchy made by both decorators: {"ours": ..., "std": ...}."""
    import dataclasses

    from pyebpf import _record

    out = {}
    for name, make, fld in (("ours", _record.dataclass, _record.field),
                            ("std", dataclasses.dataclass, dataclasses.field)):
        @make(**options)
        class Base:
            pos: int
            note: object = fld(default=None, kw_only=True, compare=False)

        @make(**options)
        class Leaf(Base):
            name: str
            items: list = fld(default_factory=list)
            flag: bool = False

            def twice(self) -> int:
                return self.pos * 2

        out[name] = (Base, Leaf)
    return out


@pytest.mark.parametrize("options", [{"eq": False}, {}, {"frozen": True}])
def test_dataclass_behaves_as_the_standard_one(options):
    pair = _pair(**options)
    results = {}
    for name, (base, leaf) in pair.items():
        a = leaf(1, "a")
        b = leaf(1, "a", [2], flag=True, note="n")
        c = leaf(1, "a")
        row = [a.pos, a.name, a.items, a.flag, a.note, b.items, b.flag, b.note, a.twice(),
               a.items is not c.items, a == c, a == b, a != c, a.__eq__(1),
               repr(a).split("(", 1)[1], repr(base(3)).split("(", 1)[1],
               leaf(1, "a", items=None).items]
        try:
            row.append(hash(a) == hash(c))
        except TypeError as exc:
            row.append(type(exc))
        try:
            a.pos = 5
            row.append(a.pos)
        except AttributeError:
            row.append("frozen")
        for bad in ((), (1,), (1, "a", [], False, "extra")):
            try:
                leaf(*bad)
                row.append("made")
            except TypeError:
                row.append(TypeError)
        results[name] = row
    assert results["ours"] == results["std"]


@pytest.mark.parametrize("options", [{}, {"eq": False}, {"frozen": True}])
def test_dataclass_keeps_an_explicit_hash_as_the_standard_one(options):
    import dataclasses

    from pyebpf import _record

    hashes = {}
    for name, make in (("ours", _record.dataclass), ("std", dataclasses.dataclass)):
        @make(**options)
        class Keyed:
            key: int
            note: str = ""

            def __hash__(self) -> int:
                return self.key * 7

        hashes[name] = (hash(Keyed(3, "x")), Keyed(3, "x") == Keyed(3, "x"))
    assert hashes["ours"] == hashes["std"] == (21, options.get("eq", True))


def test_dataclass_post_init_fields_and_replace():
    from pyebpf._record import dataclass, replace

    seen = []

    @dataclass(frozen=True)
    class Checked:
        kind: str
        size: int = 0

        def __post_init__(self) -> None:
            seen.append(self.kind)
            if self.kind == "bad":
                raise ValueError("bad kind")

    c = Checked("int", 8)
    assert Checked._fields == ("kind", "size") and seen == ["int"]
    assert replace(c, size=4) == Checked("int", 4) and c.size == 8
    with pytest.raises(ValueError):
        replace(c, kind="bad")
    assert len({Checked("a"), Checked("a"), Checked("b")}) == 2
    with pytest.raises(AttributeError):
        del c.kind


def test_the_tree_needs_no_dataclasses_module():
    import pathlib
    import subprocess
    import sys
    code = ("import sys; import pyebpf.lang.parser as p; p.parse('BEGIN { @x[1] = count(); }',"
            " 'f'); print(sorted({'dataclasses', 'typing', 'inspect'} & set(sys.modules)))")
    root = pathlib.Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=root).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("options", [{}, {"frozen": True}])
def test_dataclass_without_fields_compares_as_the_standard_one(options):
    """The equality key is made on the first comparison (``operator`` is not
    imported before); a class with no field compares and hashes as
    dataclasses' does (it raised TypeError)."""
    import dataclasses

    from pyebpf import _record

    rows = {}
    for name, make in (("ours", _record.dataclass), ("std", dataclasses.dataclass)):
        @make(**options)
        class Empty:
            pass

        @make(**options)
        class One(Empty):
            x: int

        row = [Empty() == Empty(), One(1) == One(1), One(1) == One(2), One(1) == Empty()]
        if options:
            row += [hash(Empty()) == hash(Empty()), hash(One(1)) == hash(One(1))]
        rows[name] = row
    assert rows["ours"] == rows["std"]
