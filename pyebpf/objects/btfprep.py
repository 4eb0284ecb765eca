"""The object's BTF made loadable, in two kinds of fix-up (libbpf's split):

* what clang leaves for the loader, always done: DATASEC sizes and variable
  offsets; extern variables and functions rewritten as libbpf does (a
  ``.ksyms`` kfunc's DATASEC entry points at a dummy ``int`` VAR, and its
  prototype's unnamed parameters -- ``bpf_iter_num_new(struct bpf_iter_num *,
  int, int)`` -- get that VAR's name, which the kernel requires: "Invalid
  arg#1"); a DATASEC of an empty section (clang 14 writes a size-0
  ``.data.*`` for a zero-length array, which the kernel refuses: "size ==
  0") given one byte per variable; hidden global subprograms (``__hidden``)
  marked static, as libbpf marks them, so the kernel verifies them in their
  callers' context, not on their own;
* what this kernel lacks, as :class:`KernelBtf` says (filled from the
  BTF-kind probes of :mod:`pyebpf.kernel.features`): DECL_TAG made an
  anonymous 1-byte INT, TYPE_TAG a CONST, FLOAT an empty STRUCT of its
  size, global FUNCs static (libbpf's sanitize step).  ENUM64 on a kernel
  older than 6.0 is left as it is (the kernel then refuses the BTF, and
  the object loads without it, saying so).

As libbpf does, the blob is patched in place (a copy of it): type ids and
string offsets stay as clang wrote them, so func_info, line_info, map
key/value ids and CO-RE ids stay valid, and only the few DATASEC, VAR and
FUNC records are decoded.  An INT (extern variables of ``.ksyms`` are
retyped to ``int``, as libbpf does) and the dummy VAR of kfuncs may be
appended.
"""
from __future__ import annotations

import struct

from ..btf import Btf, Kind
from ..btf.reader import HEADER, MAGIC

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

__all__ = ["PreparedBtf", "prepare_btf", "KernelBtf", "kernel_btf"]

_LINKAGE_STATIC = 0
_LINKAGE_GLOBAL = 1
_U32 = struct.Struct("<I")
_SECINFO = struct.Struct("<III")


class KernelBtf:
    """What the kernel's BTF loader takes, as far as the fix-ups go: one
    flag per BTF kind that some kernels lack (``float``: 5.13, ``decl_tag``:
    5.16, ``type_tag``: 5.17, ``enum64``: 6.0) and ``func_global`` (5.6).
    The default takes everything (no kernel-lack fix-up)."""

    __slots__ = ("float", "decl_tag", "type_tag", "enum64", "func_global")

    def __init__(self, *, float: bool = True, decl_tag: bool = True, type_tag: bool = True,
                 enum64: bool = True, func_global: bool = True) -> None:
        self.float, self.decl_tag, self.type_tag = float, decl_tag, type_tag
        self.enum64, self.func_global = enum64, func_global

    def __repr__(self) -> str:
        lacks = [n for n in self.__slots__ if not getattr(self, n)]
        return f"KernelBtf(lacks: {', '.join(lacks) or 'nothing'})"


_PROBED = {Kind.FLOAT: "float", Kind.DECL_TAG: "decl_tag", Kind.TYPE_TAG: "type_tag",
           Kind.ENUM64: "enum64"}


def kernel_btf(btf: Btf) -> KernelBtf:
    """The :class:`KernelBtf` of the running kernel, asked only for the
    kinds ``btf`` holds: a kernel of the version that brought a kind takes
    it (kinds are never taken away); an older one (or one with backports)
    is asked by a probe, one BPF_BTF_LOAD a process."""
    from ..kernel.btfprobe import (BTF_FUNC_GLOBAL, BTF_KINDS, btf_func_global_probe,
                                   btf_kind_probe)
    from ..kernel.version import kernel_version
    running = kernel_version()
    newest = max(tuple(int(n) for n in since.split(".")) for _, since in
                 (*BTF_KINDS.values(), BTF_FUNC_GLOBAL))
    if running >= newest:           # (no need to look at the kinds)
        return KernelBtf()

    def taken(kind: int | None) -> bool:
        """(``kind`` None: global FUNC linkage)"""
        since = BTF_KINDS[kind][1] if kind is not None else BTF_FUNC_GLOBAL[1]
        if running >= tuple(int(n) for n in since.split(".")):
            return True
        return (btf_kind_probe(kind) if kind is not None else btf_func_global_probe())[0]

    present = {btf.kind(i) for i in btf.ids()}
    flags = {attr: taken(int(kind)) for kind, attr in _PROBED.items() if kind in present}
    if Kind.FUNC in present:
        flags["func_global"] = taken(None)
    return KernelBtf(**flags)


class PreparedBtf:
    """The blob to load (``blob``) and the offsets of strings in it
    (:meth:`string`, for line_info records)."""

    def __init__(self, blob: bytes, strs_at: int, strs_len: int) -> None:
        self.blob = blob
        self._strs = blob[strs_at:strs_at + strs_len]
        self._at: dict[str, int] = {"": 0}
        self._misses = 0

    def string(self, text: str) -> int:
        """The offset of ``text`` in the blob's string table (it must be there:
        clang put every name, file and line of .BTF.ext in it)."""
        at = self._at.get(text)
        self._misses += at is None
        if at is None and self._misses == 64:
            # every string at once (one pass; a large line_info asks for thousands)
            pos = 0
            for raw in self._strs.split(b"\0"):
                self._at.setdefault(raw.decode("utf-8", "replace"), pos)
                pos += len(raw) + 1
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
                static_funcs: frozenset[str] = frozenset(),
                kernel: KernelBtf | None = None) -> PreparedBtf:
    """``btf`` fixed up for BPF_BTF_LOAD.

    ``section_size(name)`` is an ELF section's size (None if absent),
    ``symbol_offset(section, name)`` a variable's offset in it; the
    ``.kconfig`` DATASEC takes ``kconfig_offsets``/``kconfig_size`` (the
    layout of the map pyebpf builds for it); the global FUNCs named in
    ``static_funcs`` become static; ``kernel`` says what the kernel lacks
    (default: nothing).
    """
    kernel = kernel or KernelBtf()
    types_at, types_len, strs_at, strs_len = btf.sections()
    data = bytearray(btf.data)
    wanted = (Kind.DATASEC, Kind.VAR, Kind.FUNC)
    lacking = {k for k, attr in _PROBED.items() if not getattr(kernel, attr)} - {Kind.ENUM64}
    touched = set(wanted) | lacking
    kind = btf.kind
    ids = [i for i in btf.ids() if kind(i) in touched]
    ksym_vars: set[int] = set()
    kfuncs: list[int] = []
    for i in ids:
        t = btf[i]
        if t.kind == Kind.DATASEC and t.name == ".ksyms":
            ksym_vars.update(v.type for v in t.secinfo)
            kfuncs += [v.type for v in t.secinfo if btf.kind(v.type) == Kind.FUNC]
    # appended: an int (the type of the .ksyms variables), then the dummy VAR
    # standing in the .ksyms DATASEC for each kfunc
    extra = bytearray()
    more_strs = bytearray()
    n_types = len(btf)
    int_id = 0
    if any(btf[i].kind == Kind.VAR and btf[i].linkage not in (_LINKAGE_STATIC,
                                                               _LINKAGE_GLOBAL)
           for i in ids) or kfuncs:
        int_id = next((i for i in btf.find("int", Kind.INT) if btf[i].size == 4), 0)
        if not int_id:             # a signed 4-byte INT named "int", appended
            int_id = n_types
            n_types += 1
            extra += struct.pack("<IIII", btf.strings_size, Kind.INT << 24, 4, (1 << 24) | 32)
            more_strs += b"int\0"
    dummy_id = dummy_name = 0
    if kfuncs:
        dummy_id = n_types
        dummy_name = btf.strings_size + len(more_strs)
        more_strs += b"dummy_ksym\0"
        extra += struct.pack("<IIII", dummy_name, Kind.VAR << 24, int_id, _LINKAGE_GLOBAL)
        for f in kfuncs:
            _name_params(btf, btf[f].ref, data, dummy_name)
    for i in ids:
        t = btf[i]
        if t.kind == Kind.DATASEC:
            _fix_datasec(btf, i, data, section_size, symbol_offset, kconfig_offsets,
                         kconfig_size, dummy_id)
        elif t.kind == Kind.VAR and t.linkage not in (_LINKAGE_STATIC, _LINKAGE_GLOBAL):
            at = btf.record_at(i)
            if i in ksym_vars:
                _U32.pack_into(data, at + 8, int_id)
            _U32.pack_into(data, at + 12, _LINKAGE_GLOBAL)
        elif t.kind == Kind.FUNC:
            linkage = t.linkage
            if linkage == _LINKAGE_GLOBAL and (t.name in static_funcs or not kernel.func_global):
                linkage = _LINKAGE_STATIC
            elif linkage not in (_LINKAGE_STATIC, _LINKAGE_GLOBAL):
                linkage = _LINKAGE_GLOBAL if kernel.func_global else _LINKAGE_STATIC
            at = btf.record_at(i) + 4
            (info,) = _U32.unpack_from(data, at)
            _U32.pack_into(data, at, (info & ~0xFFFF) | linkage)
        else:
            _replace_lacking(btf, i, data)
    types = bytes(data[types_at:types_at + types_len]) + bytes(extra)
    strs = bytes(data[strs_at:strs_at + strs_len]) + bytes(more_strs)
    head = HEADER.pack(MAGIC, 1, btf.flags, HEADER.size, 0, len(types), len(types), len(strs))
    return PreparedBtf(head + types + strs, HEADER.size + len(types), len(strs))


def _name_params(btf: Btf, proto: int, data: bytearray, name_off: int) -> None:
    """Give each unnamed parameter of FUNC_PROTO ``proto`` the name at ``name_off``."""
    t = btf[proto]
    if t.kind != Kind.FUNC_PROTO:
        return
    at = btf.record_at(proto) + 12
    for n, p in enumerate(t.params):
        if not p.name and p.type:
            _U32.pack_into(data, at + 8 * n, name_off)


def _replace_lacking(btf: Btf, tid: int, data: bytearray) -> None:
    """Rewrite a record of a kind the kernel lacks as one it takes, of the
    same length (so that no id moves)."""
    t = btf[tid]
    at = btf.record_at(tid)
    if t.kind == Kind.DECL_TAG:          # an anonymous 1-byte INT
        struct.pack_into("<IIII", data, at, 0, Kind.INT << 24, 1, 8)
    elif t.kind == Kind.TYPE_TAG:        # a CONST of the same type
        struct.pack_into("<II", data, at, 0, Kind.CONST << 24)
    elif t.kind == Kind.FLOAT:           # an anonymous empty STRUCT of its size
        struct.pack_into("<II", data, at, 0, Kind.STRUCT << 24)


def _fix_datasec(btf: Btf, tid: int, data: bytearray,
                 section_size: Callable[[str], int | None],
                 symbol_offset: Callable[[str, str], int | None],
                 kconfig_offsets: dict[str, int], kconfig_size: int, dummy_id: int) -> None:
    t = btf[tid]
    at = btf.record_at(tid)
    if t.name == ".ksyms":
        size: int | None = max(4 * len(t.secinfo), 4)
        infos = [(dummy_id if btf.kind(v.type) == Kind.FUNC else v.type, 4 * n, 4)
                 for n, v in enumerate(t.secinfo)]
    elif t.name == ".kconfig":
        size = max(kconfig_size, 1)
        infos = [(v.type, kconfig_offsets.get(btf[v.type].name, 0), v.size) for v in t.secinfo]
    else:
        size = section_size(t.name)
        if size is None and t.size:
            return                   # (sized already: a linked object's)
        infos = []
        for v in t.secinfo:
            off = symbol_offset(t.name, btf[v.type].name)
            infos.append((v.type, v.offset if off is None else off, v.size))
        if not size:                 # an empty or absent section: a byte (at least) a variable
            infos, size = [], 0
            for v in t.secinfo:
                width = max(btf.size_of(btf[v.type].ref), 1)
                infos.append((v.type, size, width))
                size += width
            size = max(size, 1)
    _U32.pack_into(data, at + 8, size)
    for n, info in enumerate(infos):
        _SECINFO.pack_into(data, at + 12 + 12 * n, *info)
