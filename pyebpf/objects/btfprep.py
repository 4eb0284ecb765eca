"""The object's BTF made loadable: what clang leaves for the loader to fill
in (DATASEC sizes and variable offsets), and what the kernel does not take
(extern variables and functions) rewritten as libbpf does; and hidden
global subprograms (``__hidden``) marked static, as libbpf marks them, so
the kernel verifies them in their callers' context, not on their own.

Type ids are kept (types are changed in place, one INT may be appended), so
func_info, map key/value ids and CO-RE ids stay valid; strings are written
again, so line_info string offsets come from :func:`prepare_btf`'s builder.
"""
from __future__ import annotations

from ..btf import Btf, BtfBuilder, Kind, Type, VarSecinfo

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

__all__ = ["prepare_btf"]

_LINKAGE_STATIC = 0
_LINKAGE_GLOBAL = 1


def _clone(t: Type, **changes: object) -> Type:
    fields = {name: getattr(t, name) for name in Type.__slots__ if name != "kind"}
    fields.update(changes)
    return Type(t.kind, **fields)


def prepare_btf(btf: Btf, section_size: Callable[[str], int | None],
                symbol_offset: Callable[[str, str], int | None],
                kconfig_offsets: dict[str, int], kconfig_size: int,
                static_funcs: frozenset[str] = frozenset()) -> BtfBuilder:
    """A builder holding ``btf`` fixed up for BPF_BTF_LOAD.

    ``section_size(name)`` is an ELF section's size (None if absent),
    ``symbol_offset(section, name)`` a variable's offset in it; the
    ``.kconfig`` DATASEC takes ``kconfig_offsets``/``kconfig_size`` (the
    layout of the map pyebpf builds for it); the global FUNCs named in
    ``static_funcs`` become static.
    """
    out = BtfBuilder()
    int_id = 0
    need_int = False
    types = [btf[tid] for tid in btf.ids()]
    for i, t in enumerate(types, btf.first_id):
        if t.kind == Kind.INT and t.name == "int" and t.size == 4:
            int_id = int_id or i
        if t.kind == Kind.VAR and t.linkage not in (_LINKAGE_STATIC, _LINKAGE_GLOBAL):
            need_int = True
    if need_int and not int_id:
        int_id = btf.first_id + len(types)
    ksym_vars: set[int] = set()
    for t in types:
        if t.kind == Kind.DATASEC and t.name == ".ksyms":
            ksym_vars.update(v.type for v in t.secinfo)
    for i, t in enumerate(types, btf.first_id):
        if t.kind == Kind.DATASEC:
            t = _fix_datasec(btf, t, section_size, symbol_offset, kconfig_offsets,
                             kconfig_size)
        elif t.kind == Kind.VAR and t.linkage not in (_LINKAGE_STATIC, _LINKAGE_GLOBAL):
            t = _clone(t, linkage=_LINKAGE_GLOBAL,
                       ref=int_id if i in ksym_vars else t.ref)
        elif t.kind == Kind.FUNC and t.linkage == _LINKAGE_GLOBAL and t.name in static_funcs:
            t = _clone(t, linkage=_LINKAGE_STATIC)
        elif t.kind == Kind.FUNC and t.linkage not in (_LINKAGE_STATIC, _LINKAGE_GLOBAL):
            t = _clone(t, linkage=_LINKAGE_GLOBAL)
        out.add(t)
    if need_int and int_id == btf.first_id + len(types):
        out.add_int("int", 4, signed=True)
    return out


def _fix_datasec(btf: Btf, t: Type, section_size: Callable[[str], int | None],
                 symbol_offset: Callable[[str, str], int | None],
                 kconfig_offsets: dict[str, int], kconfig_size: int) -> Type:
    if t.name == ".ksyms":
        infos = tuple(VarSecinfo(v.type, 4 * n, 4) for n, v in enumerate(t.secinfo))
        return _clone(t, size=max(4 * len(infos), 4), secinfo=infos)
    if t.name == ".kconfig":
        infos = tuple(VarSecinfo(v.type, kconfig_offsets.get(btf[v.type].name, 0), v.size)
                      for v in t.secinfo)
        return _clone(t, size=max(kconfig_size, 1), secinfo=infos)
    size = section_size(t.name)
    if size is None:
        return t
    fixed: list[VarSecinfo] = []
    for v in t.secinfo:
        off = symbol_offset(t.name, btf[v.type].name)
        fixed.append(VarSecinfo(v.type, v.offset if off is None else off, v.size))
    return _clone(t, size=size, secinfo=tuple(fixed))
