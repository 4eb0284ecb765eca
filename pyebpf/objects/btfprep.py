"""The object's BTF made loadable: what clang leaves for the loader to fill
in (DATASEC sizes and variable offsets), and what the kernel does not take
(extern variables and functions) rewritten as libbpf does; and hidden
global subprograms (``__hidden``) marked static, as libbpf marks them, so
the kernel verifies them in their callers' context, not on their own.

As libbpf does, the blob is patched in place (a copy of it): type ids and
string offsets stay as clang wrote them, so func_info, line_info, map
key/value ids and CO-RE ids stay valid, and only the few DATASEC, VAR and
FUNC records are decoded.  One INT may be appended (extern variables of
``.ksyms`` are retyped to ``int``, as libbpf does).
"""
from __future__ import annotations

import struct

from ..btf import Btf, Kind
from ..btf.reader import HEADER, MAGIC

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

__all__ = ["PreparedBtf", "prepare_btf"]

_LINKAGE_STATIC = 0
_LINKAGE_GLOBAL = 1
_U32 = struct.Struct("<I")
_SECINFO = struct.Struct("<III")


class PreparedBtf:
    """The blob to load (``blob``) and the offsets of strings in it
    (:meth:`string`, for line_info records)."""

    def __init__(self, blob: bytes, strs_at: int, strs_len: int) -> None:
        self.blob = blob
        self._strs = blob[strs_at:strs_at + strs_len]
        self._at: dict[str, int] = {"": 0}

    def string(self, text: str) -> int:
        """The offset of ``text`` in the blob's string table (it must be there:
        clang put every name, file and line of .BTF.ext in it)."""
        at = self._at.get(text)
        if at is None:
            at = self._strs.find(text.encode() + b"\0")
            if at < 0:
                from .errors import ObjectError
                raise ObjectError(f"the object's BTF has no string {text!r}")
            self._at[text] = at
        return at


def prepare_btf(btf: Btf, section_size: Callable[[str], int | None],
                symbol_offset: Callable[[str, str], int | None],
                kconfig_offsets: dict[str, int], kconfig_size: int,
                static_funcs: frozenset[str] = frozenset()) -> PreparedBtf:
    """``btf`` fixed up for BPF_BTF_LOAD.

    ``section_size(name)`` is an ELF section's size (None if absent),
    ``symbol_offset(section, name)`` a variable's offset in it; the
    ``.kconfig`` DATASEC takes ``kconfig_offsets``/``kconfig_size`` (the
    layout of the map pyebpf builds for it); the global FUNCs named in
    ``static_funcs`` become static.
    """
    types_at, types_len, strs_at, strs_len = btf.sections()
    data = bytearray(btf.data)
    wanted = (Kind.DATASEC, Kind.VAR, Kind.FUNC)
    ids = [i for i in btf.ids() if btf.kind(i) in wanted]
    ksym_vars: set[int] = set()
    extern_vars = []
    for i in ids:
        t = btf[i]
        if t.kind == Kind.DATASEC:
            if t.name == ".ksyms":
                ksym_vars.update(v.type for v in t.secinfo)
            _fix_datasec(btf, i, data, section_size, symbol_offset, kconfig_offsets,
                         kconfig_size)
        elif t.kind == Kind.VAR and t.linkage not in (_LINKAGE_STATIC, _LINKAGE_GLOBAL):
            extern_vars.append(i)
        elif t.kind == Kind.FUNC:
            linkage = t.linkage
            if linkage == _LINKAGE_GLOBAL and t.name in static_funcs:
                linkage = _LINKAGE_STATIC
            elif linkage not in (_LINKAGE_STATIC, _LINKAGE_GLOBAL):
                linkage = _LINKAGE_GLOBAL
            at = btf.record_at(i) + 4
            (info,) = _U32.unpack_from(data, at)
            _U32.pack_into(data, at, (info & ~0xFFFF) | linkage)
    extra = more_strs = b""
    if extern_vars:
        int_id = next((i for i in btf.find("int", Kind.INT) if btf[i].size == 4), 0)
        if not int_id:             # a signed 4-byte INT named "int", appended
            int_id = len(btf)
            extra = struct.pack("<IIII", btf.strings_size, Kind.INT << 24, 4, (1 << 24) | 32)
            more_strs = b"int\0"
        for i in extern_vars:
            at = btf.record_at(i)
            if i in ksym_vars:
                _U32.pack_into(data, at + 8, int_id)
            _U32.pack_into(data, at + 12, _LINKAGE_GLOBAL)
    types = bytes(data[types_at:types_at + types_len]) + extra
    strs = bytes(data[strs_at:strs_at + strs_len]) + more_strs
    head = HEADER.pack(MAGIC, 1, btf.flags, HEADER.size, 0, len(types), len(types), len(strs))
    return PreparedBtf(head + types + strs, HEADER.size + len(types), len(strs))


def _fix_datasec(btf: Btf, tid: int, data: bytearray,
                 section_size: Callable[[str], int | None],
                 symbol_offset: Callable[[str, str], int | None],
                 kconfig_offsets: dict[str, int], kconfig_size: int) -> None:
    t = btf[tid]
    at = btf.record_at(tid)
    if t.name == ".ksyms":
        size: int | None = max(4 * len(t.secinfo), 4)
        infos = [(v.type, 4 * n, 4) for n, v in enumerate(t.secinfo)]
    elif t.name == ".kconfig":
        size = max(kconfig_size, 1)
        infos = [(v.type, kconfig_offsets.get(btf[v.type].name, 0), v.size) for v in t.secinfo]
    else:
        size = section_size(t.name)
        if size is None:
            return
        infos = []
        for v in t.secinfo:
            off = symbol_offset(t.name, btf[v.type].name)
            infos.append((v.type, v.offset if off is None else off, v.size))
    _U32.pack_into(data, at + 8, size)
    for n, info in enumerate(infos):
        _SECINFO.pack_into(data, at + 12 + 12 * n, *info)
