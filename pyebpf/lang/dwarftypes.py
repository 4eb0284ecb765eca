"""A user program's C types in the language, from its DWARF debug
information (:mod:`pyebpf.elf.dwarf`), as bpftrace 0.17 types them:

- ``args`` of a uprobe on a function the program's DWARF describes: a
  ``record`` of its parameters (``args->c``, ``args->foo1->a``), each read
  from its argument register;
- ``(struct Foo *)arg0`` in a uprobe of that program: a pointer to the
  program's ``struct Foo``.

A C type becomes: an integer of its size and sign (enums, bool and char
too), a pointer (to a record for a struct or union, to its integer for an
integer, else a ``uint64``), a string for a ``char`` array, a buffer for
another array, a record whose ``fields`` are the members (name, byte offset,
type) for a struct or union. A bit field or a float is ``none`` (refused
where it is read). Records nest up to :data:`DEPTH` pointers deep (a linked
list's ``next->next->...`` stops there).

(A small module on purpose: when the language's record model for C types
arrives, this fills it instead of ``fields``.)
"""
from __future__ import annotations

from .types import Type, int_type, string_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..elf.dwarf import CType

__all__ = ["lang_type", "args_record", "struct_type", "DEPTH"]

#: how many pointers deep records keep their fields
DEPTH = 4


def lang_type(ct: CType, depth: int = 0) -> Type:
    """The language's type of the C type ``ct`` (see the module docs)."""
    if ct.kind in ("int", "bool", "enum"):
        return int_type(ct.size if ct.size in (1, 2, 4, 8) else 8, ct.signed)
    if ct.kind == "pointer":
        target = ct.target
        if target.kind in ("struct", "union") and depth < DEPTH:
            return Type("pointer", 8, elem=_record(target, depth + 1))
        if target.kind in ("int", "bool", "enum", "pointer"):
            return Type("pointer", 8, elem=lang_type(target, depth + 1))
        return Type("pointer", 8, elem=int_type(8, False))
    if ct.kind == "array":
        elem = ct.target
        if elem.kind == "int" and elem.size == 1:
            return string_type(ct.count)
        return Type("buffer", ct.size)
    if ct.kind in ("struct", "union"):
        return _record(ct, depth)
    return Type("none")


def _record(ct: CType, depth: int) -> Type:
    fields = tuple((m.name, m.offset, Type("none") if m.bits else lang_type(m.type, depth))
                   for m in ct.members if m.name)
    return Type("record", ct.size, fields=fields)


def args_record(source: Any) -> Type | None:
    """``args`` of a uprobe (its source, :class:`~pyebpf.trace.probes.UprobeSource`):
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
