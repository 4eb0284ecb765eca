"""A user program's C types in the language, from its DWARF debug
information (:mod:`pyebpf.elf.dwarf`), as bpftrace 0.17 types them:

- ``args`` of a uprobe on a function the program's DWARF describes: a
  ``record`` of its parameters (``args->c``, ``args->foo1->a``), each read
  from its argument register;
- ``(struct Foo *)arg0`` in a uprobe of that program: a pointer to the
  program's ``struct Foo``.

A C type becomes: an integer of its size and sign (enums, bool and char
too), a pointer (to a record for a struct or union, to its integer for an
integer, else a ``uint64``), a string for a ``char`` array, an array of
another, a record for a struct or union: a
:class:`~pyebpf.lang.records.Record` (``origin="dwarf"``) whose fields are
read from the DWARF when first used, bit fields included. A float is
``none`` (refused where it is read).
"""
from __future__ import annotations

from .records import Bitfield, Field, Record
from .types import Type, array_type, int_type, record_type, string_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..elf.dwarf import CType

__all__ = ["lang_type", "args_record", "struct_type"]

#: the record made of each struct or union met (one per C type: members
#: point to the same record, a linked list's ``next`` to its own)
_RECORDS: dict[CType, Record] = {}


def lang_type(ct: CType) -> Type:
    """The language's type of the C type ``ct`` (see the module docs)."""
    if ct.kind in ("int", "bool", "enum"):
        return int_type(ct.size if ct.size in (1, 2, 4, 8) else 8, ct.signed)
    if ct.kind == "pointer":
        target = ct.target
        if target.kind in ("struct", "union", "int", "bool", "enum", "pointer"):
            return Type("pointer", 8, elem=lang_type(target))
        return Type("pointer", 8, elem=int_type(8, False))
    if ct.kind == "array":
        elem = ct.target
        if elem.kind == "int" and elem.size == 1:
            return string_type(ct.count)
        et = lang_type(elem)
        if et.kind == "none" or not et.size or et.size * ct.count != ct.size:
            return Type("buffer", ct.size)
        return array_type(et, ct.count)
    if ct.kind in ("struct", "union"):
        return record_type(_record(ct))
    return Type("none")


def _align(ct: CType) -> int:
    """A C type's alignment (x86-64: its size for scalars, its largest
    member's for a struct)."""
    if ct.kind in ("struct", "union"):
        return max((_align(m.type) for m in ct.members), default=1)
    if ct.kind == "array":
        return _align(ct.target)
    return min(max(ct.size, 1), 16)


def _record(ct: CType) -> Record:
    rec = _RECORDS.get(ct)
    if rec is None:
        name = f"{ct.kind} {ct.name}" if ct.name else f"{ct.kind} (anonymous)"
        rec = _RECORDS[ct] = Record(name, ct.size, _align(ct), origin="dwarf",
                                    load=lambda: _fields(ct))
    return rec


def _fields(ct: CType) -> list[Field]:
    out = []
    for m in ct.members:
        if m.bits:
            width = next((w for w in (1, 2, 4, 8) if w * 8 >= m.bit_offset + m.bits), 8)
            out.append(Field(m.name, m.offset, int_type(width, m.type.signed),
                             Bitfield(m.bit_offset, m.bits)))
        else:
            out.append(Field(m.name, m.offset, lang_type(m.type)))
    return out


def args_record(source: Any) -> Type | None:
    """``args`` of a uprobe (its source, :class:`~pyebpf.probes.sources.UprobeSource`):
    a record of the function's parameters (offset ``8 * N`` for parameter
    N, read from the N-th argument), None when its DWARF does not describe
    the function."""
    params = source.params() if hasattr(source, "params") else None
    if params is None:
        return None
    fields = tuple((p.name, 8 * n, lang_type(p.type)) for n, p in enumerate(params))
    return Type("record", 8 * len(fields), fields=fields)


def struct_type(path: str, name: str) -> Type | None:
    """``struct NAME`` (``union``, ``enum``) as program ``path``'s DWARF
    defines it, None when it does not."""
    from ..elf.dwarf import dwarf_types
    try:
        ct = dwarf_types(path).struct(name)
    except OSError:
        return None
    return lang_type(ct) if ct is not None else None
