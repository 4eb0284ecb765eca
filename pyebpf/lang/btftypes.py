"""Kernel structs in the language, from the running kernel's BTF
(``/sys/kernel/btf/vmlinux``), as bpftrace 0.17 types them with BTF:

- ``(struct task_struct *)curtask`` is a pointer to a ``record`` whose
  ``btf`` is the struct's type id (its members are looked up when used);
- ``p->member`` / ``rec.member``: the member's type -- an integer of its C
  size and signedness (enums too), a pointer (to a record, a ``char`` for
  ``char *``, else a ``uint64``), a string for a ``char`` array, a buffer
  for another array, a record for an embedded struct or union; anonymous
  members are searched through as C does; bit fields are refused.

Kernel enumerators (``TCP_FIN_WAIT1``) are constants of type ``uint64``, as
bpftrace 0.17 resolves a bare name that is no builtin.

The BTF is read once, when a script first names a struct or an unknown
identifier.
"""
from __future__ import annotations

from .types import Type, int_type, string_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..btf.reader import Btf

__all__ = ["struct_type", "member", "type_name", "enum_value"]

_VMLINUX: list[Btf] = []
#: every enumerator of the kernel's BTF -> its value (built on first use)
_ENUMERATORS: dict[str, int] = {}


def _btf() -> Btf:
    if not _VMLINUX:
        from ..btf.reader import Btf
        _VMLINUX.append(Btf.vmlinux())
    return _VMLINUX[0]


def struct_type(name: str) -> Type | None:
    """``struct NAME`` / ``union NAME`` as a record type, None when the
    kernel's BTF has no such type (or there is no BTF)."""
    from ..errors import PyebpfError
    try:
        btf = _btf()
        tid = btf.type_id(name)
        return Type("record", btf.size_of(tid), btf=tid)
    except (PyebpfError, OSError):
        return None


def enum_value(name: str) -> int | None:
    """The value of the kernel enumerator ``name`` (``TCP_FIN_WAIT1``: 4),
    None when the kernel's BTF has none of that name (or there is no BTF).
    The first call indexes every enumerator (some tens of milliseconds)."""
    if not _ENUMERATORS:
        from ..btf.types import Kind
        from ..errors import PyebpfError
        try:
            btf = _btf()
            if f"\0{name}\0".encode() not in btf.strings():
                return None      # not even a string of the BTF: skip the index
            for tid in btf.ids():
                if btf.kind(tid) in (Kind.ENUM, Kind.ENUM64):
                    for v in btf[tid].values:
                        _ENUMERATORS.setdefault(v.name, v.value)
        except (PyebpfError, OSError):
            return None
    return _ENUMERATORS.get(name)


def type_name(rec: Type) -> str:
    """A BTF record's C name (``struct task_struct``)."""
    return _btf().format(rec.btf)


def member(rec: Type, name: str) -> tuple[int, Type] | None:
    """``(byte offset, type)`` of member ``name`` of the BTF record ``rec``;
    None when it has no such member. A bit field's type is ``none``."""
    from ..btf.errors import BtfError
    btf = _btf()
    try:
        chain = btf.member_path(rec.btf, name)
    except BtfError:
        return None
    bits = sum(m.bit_offset for _, m in chain)
    last = chain[-1][1]
    if last.bitfield_size or bits % 8:
        return bits // 8, Type("none")
    return bits // 8, _lang_type(btf, last.type)


def _lang_type(btf: Btf, type_id: int) -> Type:
    from ..btf.types import INT_SIGNED, Kind
    tid = btf.resolve(type_id)
    t = btf[tid]
    if t.kind == Kind.INT:
        return int_type(t.size if t.size in (1, 2, 4, 8) else 8, bool(t.encoding & INT_SIGNED))
    if t.kind in (Kind.ENUM, Kind.ENUM64):
        return int_type(t.size if t.size in (1, 2, 4, 8) else 8, bool(t.kind_flag))
    if t.kind == Kind.PTR:
        target = btf.resolve(t.ref) if t.ref else 0
        tt = btf[target] if target else None
        if tt is not None and tt.is_composite:
            return Type("pointer", 8, elem=Type("record", tt.size, btf=target))
        if tt is not None and tt.kind == Kind.INT and tt.size == 1:
            return Type("pointer", 8, elem=int_type(1, bool(tt.encoding & INT_SIGNED)))
        return Type("pointer", 8, elem=int_type(8, False))
    if t.kind == Kind.ARRAY:
        elem = btf[btf.resolve(t.elem)]
        if elem.kind == Kind.INT and elem.size == 1:
            return string_type(t.nelems)
        return Type("buffer", btf.size_of(tid))
    if t.is_composite:
        return Type("record", t.size, btf=tid)
    return Type("none")
