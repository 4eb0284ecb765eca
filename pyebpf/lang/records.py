"""C structs and unions as the language sees them: one record model that
several producers fill.

A :class:`Record` is a struct or union by name (``struct Foo``), its size
and alignment, and its :class:`Field` s -- each a name, a byte offset, a
language :class:`~pyebpf.lang.types.Type` and, for a bit field, a
:class:`Bitfield`. The producers:

- C definitions written in a script (``struct Foo { int a; }``), parsed by
  :mod:`pyebpf.lang.cdefs` and laid out by :func:`layout` (x86-64 System V
  rules, as gcc and clang place members and bit fields);
- the running kernel's BTF (:mod:`pyebpf.lang.btftypes`): a kernel struct
  whose fields are read from the BTF the first time they are asked for
  (``task_struct`` has hundreds, most never used);
- DWARF of a user program (uprobe arguments): fill a :class:`Record` the
  same way, with ``origin="dwarf"``.

A :class:`Records` registry holds them by name; definitions written in the
script come first, then its fallback (the kernel's BTF), so a script may
redefine a kernel struct as bpftrace allows.

A field of an anonymous struct or union member is found through it, as C
does (:meth:`Record.member`).
"""
from __future__ import annotations

from .._record import Record as _Tuple
from .._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Iterable, Iterator

    from .types import Type

__all__ = ["Bitfield", "Field", "Record", "Records", "Member", "CField", "layout"]


@record
class Bitfield(_Tuple):
    """A bit field's place in the bytes read at its field's offset (the
    field's type says how many: 1, 2, 4 or 8): ``shift`` bits up from the
    lowest, ``width`` bits wide (little-endian)."""
    shift: int
    width: int


@record
class Field(_Tuple):
    """A member of a record: ``name`` (``""`` for an anonymous struct or
    union member), byte ``offset`` from the record's start, its language
    ``type``, and ``bitfield`` for a bit field."""
    name: str
    offset: int
    type: Type
    bitfield: Bitfield | None = None


@record
class Member(_Tuple):
    """A field found by :meth:`Record.member`: its offset from the start of
    the record it was asked of (through anonymous members), and the field."""
    offset: int
    field: Field


class Record:
    """A struct or union: ``name`` as C spells it (``struct Foo``), ``size``
    and ``align`` in bytes, ``origin`` (``"script"``, ``"btf"``,
    ``"dwarf"``), and its fields -- given, or loaded on first use by
    ``load`` (a producer's callable returning them)."""

    __slots__ = ("name", "size", "align", "origin", "_fields", "_load")

    def __init__(self, name: str, size: int, align: int, fields: Iterable[Field] | None = None,
                 *, origin: str = "script",
                 load: Callable[[], Iterable[Field]] | None = None) -> None:
        self.name = name
        self.size = size
        self.align = align
        self.origin = origin
        self._fields = tuple(fields) if fields is not None else None
        self._load = load

    @property
    def fields(self) -> tuple[Field, ...]:
        """The fields in declaration order (loaded when first asked for)."""
        if self._fields is None:
            self._fields = tuple(self._load()) if self._load is not None else ()
        return self._fields

    @property
    def is_union(self) -> bool:
        """A union (its fields all at offset 0)."""
        return self.name.startswith("union ")

    def member(self, name: str) -> Member | None:
        """The field ``name``, searched through anonymous members as C does;
        None when there is none."""
        for f in self.fields:
            if f.name == name:
                return Member(f.offset, f)
        for f in self.fields:
            inner = f.type.struct if not f.name else None
            if inner is not None:
                got = inner.member(name)
                if got is not None:
                    return Member(f.offset + got.offset, got.field)
        return None

    def __repr__(self) -> str:
        return f"Record({self.name!r}, size={self.size}, origin={self.origin!r})"


class Records:
    """Records by name: those defined here (a script's C definitions)
    first, then ``fallback`` (a name -> Record or None: the kernel's BTF)."""

    def __init__(self, fallback: Callable[[str], Record | None] | None = None) -> None:
        self._own: dict[str, Record] = {}
        self.fallback = fallback

    def define(self, rec: Record) -> None:
        """Register ``rec`` under its name (replacing a kernel type of that name)."""
        self._own[rec.name] = rec

    def defined(self, name: str) -> bool:
        """Whether ``name`` was defined here (not found through the fallback)."""
        return name in self._own

    def get(self, name: str) -> Record | None:
        """The record called ``name`` (``struct Foo``), None when unknown."""
        rec = self._own.get(name)
        if rec is None and self.fallback is not None:
            rec = self.fallback(name)
        return rec

    def __iter__(self) -> Iterator[Record]:
        return iter(self._own.values())


# ---------------------------------------------------------------- layout
@record
class CField(_Tuple):
    """A member as a C declaration gives it, before layout: ``name``, its
    ``type``, ``size`` and ``align`` in bytes, and ``bits`` for a bit field
    (its declared width; 0 for ``int : 0``)."""
    name: str
    type: Type
    size: int
    align: int
    bits: int | None = None


def layout(name: str, members: Iterable[CField]) -> Record:
    """The record ``name`` (``struct X``/``union X``) of ``members`` laid out
    as the x86-64 System V ABI lays out C (gcc's and clang's layout): each
    member at the next offset aligned to its alignment; a bit field in the
    storage unit of its declared type when it fits there, else from the
    next unit; ``: 0`` closes the unit; a union's members all at 0; the
    size rounded up to the largest alignment. Bit fields come out as
    integers of the smallest width (1, 2, 4, 8) covering their bits."""
    from .types import int_type
    union = name.startswith("union ")
    fields: list[Field] = []
    bit = 0            # the next free bit
    top = 1
    size = 0
    for m in members:
        if m.bits is not None:
            unit = m.size * 8
            if union:
                bit = 0
            if m.bits == 0:
                bit = -(-bit // unit) * unit
                continue
            if bit // unit != (bit + m.bits - 1) // unit:
                bit = -(-bit // unit) * unit
            if m.name:
                top = max(top, m.align)
                byte, shift = bit // 8, bit % 8
                width = next(w for w in (1, 2, 4, 8) if w * 8 >= shift + m.bits)
                fields.append(Field(m.name, byte, int_type(width, m.type.signed),
                                    Bitfield(shift, m.bits)))
            bit += m.bits
            size = max(size, -(-bit // 8))
            if union:
                bit = 0
            continue
        top = max(top, m.align)
        off = 0 if union else -(-(-(-bit // 8)) // m.align) * m.align
        fields.append(Field(m.name, off, m.type))
        size = max(size, off + m.size)
        if not union:
            bit = (off + m.size) * 8
    size = -(-size // top) * top
    return Record(name, size, top, fields)
