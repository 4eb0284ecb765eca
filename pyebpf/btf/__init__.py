"""BTF, the BPF Type Format, in pure Python (no kernel): read it, query it,
write it, and resolve CO-RE relocations against it.

* :class:`Btf` -- a parsed blob: ``Btf.vmlinux()``, ``Btf.load(path)`` (raw
  BTF or an ELF object's ``.BTF``), split BTF with ``base=``; ``btf[id]`` is a
  :class:`Type`; ``find``/``type_id`` by name, ``resolve``, ``size_of``,
  ``member_offset``, ``format`` (C declarations) and ``dump_c`` (definitions)
* :class:`BtfExt` -- ``.BTF.ext``: func_info, line_info, CO-RE relocations
* :class:`BtfBuilder` -- writes a valid blob (types + string table)
* :mod:`.core` -- CO-RE relocation resolution, as libbpf computes it
* :mod:`.own` -- the BTF of pyebpf's own maps (key/value types from their
  codecs) and programs (func_info, line_info from each instruction's origin)

Damaged input raises :class:`BtfError` with the offset where it was found.
Loading a blob into the kernel is :func:`pyebpf.kernel.btf.btf_load`.

The names are imported on first use (``pyebpf.btf.own`` is on the path of
every map creation and program load, and needs none of the others).
"""
from __future__ import annotations

from .._lazy import lazy_dir, lazy_getattr

TYPE_CHECKING = False
if TYPE_CHECKING:       # what __getattr__ imports on first use, as type checkers see it
    from .errors import BtfError as BtfError
    from .ext import (BtfExt as BtfExt, CoreRelo as CoreRelo, FuncInfo as FuncInfo,
                      LineInfo as LineInfo)
    from .reader import Btf as Btf
    from .types import (EnumValue as EnumValue, Kind as Kind, Member as Member, Param as Param,
                        Type as Type, VarSecinfo as VarSecinfo)
    from .writer import BtfBuilder as BtfBuilder

__all__ = ["Btf", "BtfExt", "BtfBuilder", "BtfError", "Kind", "Type", "Member", "EnumValue",
           "Param", "VarSecinfo", "FuncInfo", "LineInfo", "CoreRelo"]

#: module -> the names it lends to this package
_HOME = {"Btf": "reader", "BtfExt": "ext", "FuncInfo": "ext", "LineInfo": "ext",
         "CoreRelo": "ext", "BtfBuilder": "writer", "BtfError": "errors", "Kind": "types",
         "Type": "types", "Member": "types", "EnumValue": "types", "Param": "types",
         "VarSecinfo": "types"}


__getattr__ = lazy_getattr(globals(), _HOME)
__dir__ = lazy_dir(globals(), _HOME)
