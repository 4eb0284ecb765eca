"""BTF, the BPF Type Format, in pure Python (no kernel): read it, query it,
write it, and resolve CO-RE relocations against it.

* :class:`Btf` -- a parsed blob: ``Btf.vmlinux()``, ``Btf.load(path)`` (raw
  BTF or an ELF object's ``.BTF``), split BTF with ``base=``; ``btf[id]`` is a
  :class:`Type`; ``find``/``type_id`` by name, ``resolve``, ``size_of``,
  ``member_offset``, ``format`` (C declarations) and ``dump_c`` (definitions)
* :class:`BtfExt` -- ``.BTF.ext``: func_info, line_info, CO-RE relocations
* :class:`BtfBuilder` -- writes a valid blob (types + string table)
* :mod:`.core` -- CO-RE relocation resolution, as libbpf computes it

Damaged input raises :class:`BtfError` with the offset where it was found.
Loading a blob into the kernel is :func:`pyebpf.kernel.btf.btf_load`.
"""
from __future__ import annotations

from .errors import BtfError
from .ext import BtfExt, CoreRelo, FuncInfo, LineInfo
from .reader import Btf
from .types import EnumValue, Kind, Member, Param, Type, VarSecinfo
from .writer import BtfBuilder

__all__ = ["Btf", "BtfExt", "BtfBuilder", "BtfError", "Kind", "Type", "Member", "EnumValue",
           "Param", "VarSecinfo", "FuncInfo", "LineInfo", "CoreRelo"]
