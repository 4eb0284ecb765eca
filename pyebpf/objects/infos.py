"""The func_info and line_info records of each program an object loads:
found once per function (by bisection of its section's records) and packed
once per place a function is put at (see :mod:`.loading`)."""
from __future__ import annotations

import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .btfprep import PreparedBtf
    from .obj import BpfObject

__all__ = ["BtfInfos", "btf_infos", "lines_of"]


class BtfInfos:
    """The func_info and line_info records of each function of the object,
    found once (a bisection of its section's records) and kept relative to
    the function's start: a subprogram linked into 150 programs is looked
    up once."""

    def __init__(self, obj: BpfObject, prepared: PreparedBtf | None) -> None:
        self.obj = obj
        self.prepared = prepared
        self._sections: dict[str, tuple[list[int], list[Any], list[int], list[Any]]] = {}
        self._funcs: dict[tuple[int, int], tuple[list[tuple[int, int]],
                                                 list[tuple[int, int, int, int, Any]]]] = {}
        self._packed: dict[tuple[int, int, int, int], bytes] = {}

    def _section(self, name: str) -> tuple[list[int], list[Any], list[int], list[Any]]:
        got = self._sections.get(name)
        if got is None:
            ext = self.obj.btf_ext
            assert ext is not None
            fi = sorted(ext.func_info.get(name, ()), key=lambda r: r.insn_off)
            li = sorted(ext.line_info.get(name, ()), key=lambda r: r.insn_off)
            got = self._sections[name] = ([r.insn_off for r in fi], fi,
                                          [r.insn_off for r in li], li)
        return got

    def of(self, func: Any) -> tuple[list[tuple[int, int]], list[tuple[int, int, int, int, Any]]]:
        """(func_info, line_info) of ``func``, positions relative to its start."""
        key = (func.section, func.start)
        got = self._funcs.get(key)
        if got is None:
            from ..btf.reader import search_sorted
            prepared = self.prepared
            assert prepared is not None
            fi_offs, fi, li_offs, li = self._section(self.obj.elf.sections[func.section].name)
            lo, hi = func.start * 8, func.end * 8
            funcs = [(r.insn_off // 8 - func.start, r.type_id)
                     for r in fi[search_sorted(fi_offs, lo):search_sorted(fi_offs, hi)]]
            lines = [(r.insn_off // 8 - func.start, prepared.string(r.file_name),
                      prepared.string(r.line_text), (r.line << 10) | r.column, r)
                     for r in li[search_sorted(li_offs, lo):search_sorted(li_offs, hi)]]
            got = self._funcs[key] = (funcs, lines)
        return got

    def packed(self, func: Any, base: int, which: int) -> bytes:
        """The func_info (``which`` 0) or line_info (1) records of ``func``
        placed at ``base``, packed (kept: a program's own function is at 0,
        a subprogram often at the same place in programs alike)."""
        key = (func.section, func.start, base, which)
        got = self._packed.get(key)
        if got is None:
            funcs, lines = self.of(func)
            if which == 0:
                got = b"".join([_FI.pack(base + at, tid) for at, tid in funcs])
            else:
                got = b"".join([_LI.pack(base + at, f, t, lc) for at, f, t, lc, _ in lines])
            self._packed[key] = got
        return got


_FI = struct.Struct("<II")
_LI = struct.Struct("<IIII")


def btf_infos(infos: BtfInfos, linked: Any) -> tuple[bytes, bytes]:
    """func_info and line_info records of a linked program (a function's
    records packed once for each position it is placed at)."""
    if infos.obj.btf_ext is None or infos.prepared is None:
        return b"", b""
    fi = []
    li = []
    for func, base in linked.funcs:
        fi.append(infos.packed(func, base, 0))
        li.append(infos.packed(func, base, 1))
    return b"".join(fi), b"".join(li)


def lines_of(infos: BtfInfos, linked: Any) -> list[tuple[int, Any]]:
    """The line records of a linked program by position (for naming a
    rejected instruction's C line; asked only then)."""
    if infos.obj.btf_ext is None or infos.prepared is None:
        return []
    out = [(base + at, r) for func, base in linked.funcs for at, _, _, _, r in infos.of(func)[1]]
    out.sort(key=lambda x: x[0])
    return out
