"""Kernel structs in the language, from the running kernel's BTF
(``/sys/kernel/btf/vmlinux``), as bpftrace 0.17 types them with BTF:

- ``(struct task_struct *)curtask`` is a pointer to a ``record`` whose
  ``struct`` is a :class:`~pyebpf.lang.records.Record` filled from the BTF
  (its fields read from the BTF when first used);
- ``p->member`` / ``rec.member``: the member's type -- an integer of its C
  size and signedness (enums too), a pointer (to a record, a ``char`` for
  ``char *``, else a ``uint64``), a string for a ``char`` array, an array
  of another, a record for an embedded struct or union; anonymous members
  are searched through as C does; bit fields are read as C reads them.

Kernel enumerators (``TCP_FIN_WAIT1``) are constants of type ``uint64``, as
bpftrace 0.17 resolves a bare name that is no builtin.

The BTF is read once, when a script first names a struct or an unknown
identifier.
"""
from __future__ import annotations

from .records import Bitfield, Field, Record
from .types import Type, array_type, int_type, record_type, string_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..btf.reader import Btf

__all__ = ["struct_type", "record", "enum_value"]

_VMLINUX: list[Btf] = []
#: kernel type id -> its record (made once)
_RECORDS: dict[int, Record] = {}
#: every enumerator of the kernel's BTF -> its value (built on first use)
_ENUMERATORS: dict[str, int] = {}


def _btf() -> Btf:
    if not _VMLINUX:
        from ..btf.reader import Btf
        _VMLINUX.append(Btf.vmlinux())
    return _VMLINUX[0]


def record(name: str) -> Record | None:
    """The kernel's ``struct NAME`` / ``union NAME`` as a record, None when
    the kernel's BTF has no such type (or there is no BTF)."""
    from ..errors import PyebpfError
    try:
        btf = _btf()
        tid = btf.type_id(name)
    except (PyebpfError, OSError):
        return None
    return _record(btf, btf.resolve(tid))


def struct_type(name: str) -> Type | None:
    """``struct NAME`` / ``union NAME`` as a record type, None when the
    kernel's BTF has no such type (or there is no BTF)."""
    rec = record(name)
    return None if rec is None else record_type(rec)


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


def _record(btf: Btf, tid: int) -> Record:
    rec = _RECORDS.get(tid)
    if rec is None:
        t = btf[tid]
        name = btf.format(tid) if t.name else f"{btf.format(tid)} (anonymous)"
        rec = _RECORDS[tid] = Record(name, t.size, btf.align_of(tid), origin="btf",
                                     load=lambda: _fields(btf, tid))
    return rec


def _fields(btf: Btf, tid: int) -> list[Field]:
    out = []
    for m in btf[tid].members:
        if m.bitfield_size:
            signed = _signed(btf, btf.resolve(m.type))
            shift = m.bit_offset % 8
            width = next((w for w in (1, 2, 4, 8) if w * 8 >= shift + m.bitfield_size), 8)
            out.append(Field(m.name, m.bit_offset // 8, int_type(width, signed),
                             Bitfield(shift, m.bitfield_size)))
        else:
            out.append(Field(m.name, m.bit_offset // 8, _lang_type(btf, m.type)))
    return out


def _signed(btf: Btf, tid: int) -> bool:
    from ..btf.types import INT_SIGNED, Kind
    t = btf[tid]
    if t.kind == Kind.INT:
        return bool(t.encoding & INT_SIGNED)
    return t.kind in (Kind.ENUM, Kind.ENUM64) and bool(t.kind_flag)


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
            return Type("pointer", 8, elem=record_type(_record(btf, target)))
        if tt is not None and tt.kind == Kind.INT and tt.size == 1:
            return Type("pointer", 8, elem=int_type(1, bool(tt.encoding & INT_SIGNED)))
        return Type("pointer", 8, elem=int_type(8, False))
    if t.kind == Kind.ARRAY:
        etid = btf.resolve(t.elem)
        elem = btf[etid]
        if elem.kind == Kind.INT and elem.size == 1:      # char[N]: a string
            return string_type(t.nelems)
        et = _lang_type(btf, etid)
        if et.size == 0:
            return Type("buffer", btf.size_of(tid))
        return array_type(et, t.nelems)
    if t.is_composite:
        return record_type(_record(btf, tid))
    return Type("none")
