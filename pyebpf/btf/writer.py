"""Writing BTF: :class:`BtfBuilder` collects types and writes a blob (header,
type section, deduplicated string table) that the kernel's BPF_BTF_LOAD and
:class:`~.reader.Btf` accept.

    b = BtfBuilder()
    u32 = b.add_int("unsigned int", 4)
    pair = b.add_struct("pair", 8, [("a", u32, 0), ("b", u32, 32)])
    blob = b.build()
"""
from __future__ import annotations

import struct

from .errors import BtfError
from .reader import HEADER, MAGIC, MAX_VLEN
from .types import (INT_BOOL, INT_CHAR, INT_SIGNED, EnumValue, Kind, Member, Param, Type,
                    VarSecinfo, kind_name)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Iterable

    from .reader import Btf

__all__ = ["BtfBuilder", "encode_type"]

_MEMBER = tuple[str, int, int] | tuple[str, int, int, int] | Member


class BtfBuilder:
    """Appends types (each ``add_*`` returns the new type's id, from 1) and
    writes them with :meth:`build`.  Ids given as references are checked
    against the types added when the blob is built.

    With ``base`` (a :class:`~.reader.Btf`) the blob is split BTF on top of
    it: ids continue after the base's and may refer to its types, string
    offsets continue after its string table.
    """

    def __init__(self, base: Btf | None = None) -> None:
        self.base = base
        self.types: list[Type] = []
        self._first = len(base) if base is not None else 1
        self._str_base = base.strings_size if base is not None else 0
        self._strs = bytearray(b"\0")
        self._str_at: dict[str, int] = {"": 0}

    def __len__(self) -> int:
        """The number of ids, void (and the base's) included."""
        return self._first + len(self.types)

    def string(self, text: str) -> int:
        """The offset of ``text`` in the string table (added once)."""
        at = self._str_at.get(text)
        if at is None:
            raw = text.encode()
            if b"\0" in raw:
                raise BtfError(f"a BTF string cannot hold a NUL: {text!r}")
            at = self._str_at[text] = self._str_base + len(self._strs)
            self._strs += raw + b"\0"
        return at

    # ------------------------------------------------------------ adding types
    def add(self, t: Type) -> int:
        """Append a :class:`~.types.Type`; return its id."""
        self.types.append(t)
        return len(self) - 1

    def add_int(self, name: str, size: int, signed: bool = False, *, char: bool = False,
                bool_: bool = False, bits: int | None = None, bit_offset: int = 0) -> int:
        """An INT (``bits`` defaults to ``8 * size``); at most one of ``signed``,
        ``char``, ``bool_`` (the kernel takes one encoding)."""
        if signed + char + bool_ > 1:
            raise BtfError(f"INT {name!r}: signed, char and bool_ exclude each other")
        enc = (INT_SIGNED if signed else 0) | (INT_CHAR if char else 0) | (INT_BOOL if bool_ else 0)
        return self.add(Type(Kind.INT, name, size=size, encoding=enc,
                             bits=8 * size if bits is None else bits, bit_offset=bit_offset))

    def add_float(self, name: str, size: int) -> int:
        """A FLOAT (``float`` 4, ``double`` 8)."""
        return self.add(Type(Kind.FLOAT, name, size=size))

    def add_ptr(self, target: int) -> int:
        """A pointer to ``target``."""
        return self.add(Type(Kind.PTR, ref=target))

    def add_array(self, elem: int, nelems: int, index: int | None = None) -> int:
        """``elem[nelems]`` (``index``: the index type; default: the first INT added)."""
        if index is None:
            index = next((i + self._first for i, t in enumerate(self.types)
                          if t.kind == Kind.INT), 0)
            if not index:
                raise BtfError("an array needs an index type: add an INT first")
        return self.add(Type(Kind.ARRAY, elem=elem, index=index, nelems=nelems))

    def add_struct(self, name: str, size: int, members: Iterable[_MEMBER],
                   union: bool = False) -> int:
        """A STRUCT (UNION with ``union``); members are :class:`Member` or
        ``(name, type, bit_offset[, bitfield_size])``.  kind_flag is set when
        a member is a bitfield."""
        ms = tuple(m if isinstance(m, Member) else Member(*m) for m in members)
        kflag = any(m.bitfield_size for m in ms)
        return self.add(Type(Kind.UNION if union else Kind.STRUCT, name, size=size, members=ms,
                             kind_flag=kflag))

    def add_union(self, name: str, size: int, members: Iterable[_MEMBER]) -> int:
        """A UNION (see :meth:`add_struct`)."""
        return self.add_struct(name, size, members, union=True)

    def add_enum(self, name: str, values: Iterable[tuple[str, int]], size: int = 4,
                 signed: bool | None = None) -> int:
        """An ENUM (size <= 4) or ENUM64 (size 8) of ``(name, value)`` pairs."""
        vals = tuple(EnumValue(n, v) for n, v in values)
        if signed is None:
            signed = any(v.value < 0 for v in vals)
        kind = Kind.ENUM64 if size == 8 else Kind.ENUM
        return self.add(Type(kind, name, size=size, values=vals, kind_flag=signed))

    def add_fwd(self, name: str, union: bool = False) -> int:
        """A forward declaration ``struct name;`` (``union name;``)."""
        return self.add(Type(Kind.FWD, name, kind_flag=union))

    def add_typedef(self, name: str, target: int) -> int:
        """``typedef target name;``"""
        return self.add(Type(Kind.TYPEDEF, name, ref=target))

    def add_const(self, target: int) -> int:
        """``const target``."""
        return self.add(Type(Kind.CONST, ref=target))

    def add_volatile(self, target: int) -> int:
        """``volatile target``."""
        return self.add(Type(Kind.VOLATILE, ref=target))

    def add_restrict(self, target: int) -> int:
        """``restrict target``."""
        return self.add(Type(Kind.RESTRICT, ref=target))

    def add_type_tag(self, tag: str, target: int) -> int:
        """``__attribute__((btf_type_tag(tag))) target``."""
        return self.add(Type(Kind.TYPE_TAG, tag, ref=target))

    def add_func_proto(self, ret: int, params: Iterable[tuple[str, int] | Param] = ()) -> int:
        """A function prototype (a param ``("", 0)`` last: variadic)."""
        ps = tuple(p if isinstance(p, Param) else Param(*p) for p in params)
        return self.add(Type(Kind.FUNC_PROTO, ref=ret, params=ps))

    def add_func(self, name: str, proto: int, linkage: int = 1) -> int:
        """A FUNC of prototype ``proto`` (linkage 0 static, 1 global, 2 extern)."""
        return self.add(Type(Kind.FUNC, name, ref=proto, linkage=linkage))

    def add_var(self, name: str, type_id: int, linkage: int = 1) -> int:
        """A VAR (linkage 0 static, 1 global-allocated, 2 extern)."""
        return self.add(Type(Kind.VAR, name, ref=type_id, linkage=linkage))

    def add_datasec(self, name: str, size: int,
                    entries: Iterable[tuple[int, int, int] | VarSecinfo]) -> int:
        """A DATASEC (``.data``, ``.bss``...) of ``(var id, offset, size)`` entries."""
        es = tuple(e if isinstance(e, VarSecinfo) else VarSecinfo(*e) for e in entries)
        return self.add(Type(Kind.DATASEC, name, size=size, secinfo=es))

    def add_decl_tag(self, tag: str, target: int, component_idx: int = -1) -> int:
        """``btf_decl_tag(tag)`` on ``target`` (a member/param index, or -1)."""
        return self.add(Type(Kind.DECL_TAG, tag, ref=target, component_idx=component_idx))

    def copy_from(self, btf: Btf) -> BtfBuilder:
        """Append every own type of ``btf`` (ids are kept when this builder is
        empty and ``btf`` is not split BTF)."""
        for tid in btf.ids():
            self.add(btf[tid])
        return self

    # ------------------------------------------------------------- the blob
    def build(self) -> bytes:
        """The BTF blob: header, types, strings."""
        n = len(self)
        body = bytearray()
        for i, t in enumerate(self.types, self._first):
            try:
                body += encode_type(t, self.string, n)
            except BtfError as exc:
                raise BtfError(exc.reason, type_id=i) from None
        strs = bytes(self._strs)
        header = HEADER.pack(MAGIC, 1, 0, HEADER.size, 0, len(body), len(body), len(strs))
        return header + bytes(body) + strs


def _u32(value: int, what: str) -> int:
    if not 0 <= value < 1 << 32:
        raise BtfError(f"{what} {value} does not fit in 32 bits")
    return value


def encode_type(t: Type, string: Callable[[str], int], count: int) -> bytes:
    """The bytes of one type record; ``string`` gives string offsets and
    ``count`` is the number of ids (references must be below it)."""
    k = t.kind

    def ref(tid: int, what: str) -> int:
        if not 0 <= tid < count:
            raise BtfError(f"{what} refers to type [{tid}], but ids go up to {count - 1}")
        return tid

    vlen = t.vlen
    if k == Kind.FUNC:
        vlen = t.linkage
    if vlen > MAX_VLEN:
        raise BtfError(f"{vlen} entries: BTF allows at most {MAX_VLEN}")
    info = (int(k) << 24) | vlen | (int(t.kind_flag) << 31)
    if k in (Kind.INT, Kind.STRUCT, Kind.UNION, Kind.ENUM, Kind.ENUM64, Kind.DATASEC, Kind.FLOAT):
        st = _u32(t.size, "size")
    elif k in (Kind.ARRAY, Kind.FWD):
        st = 0
    elif k == Kind.UNKN:
        raise BtfError("void (kind 0) is implicit, id 0; it cannot be added")
    else:
        st = ref(t.ref, kind_name(k).lower())
    out = [string(t.name), info, st]
    if k == Kind.INT:
        if t.bits > 128 or t.bit_offset > 255 or t.encoding > 15:
            raise BtfError(f"INT bits {t.bits}, offset {t.bit_offset}, encoding {t.encoding}")
        out.append((t.encoding << 24) | (t.bit_offset << 16) | t.bits)
    elif k == Kind.ARRAY:
        out += [ref(t.elem, "array element"), ref(t.index, "array index"), _u32(t.nelems, "nelems")]
    elif k in (Kind.STRUCT, Kind.UNION):
        for m in t.members:
            if t.kind_flag:
                if m.bitfield_size > 255 or m.bit_offset >= 1 << 24:
                    raise BtfError(f"member {m.name!r}: bitfield {m.bitfield_size} at "
                                   f"bit {m.bit_offset} does not fit (8 and 24 bits)")
                off = (m.bitfield_size << 24) | m.bit_offset
            else:
                if m.bitfield_size:
                    raise BtfError(f"member {m.name!r} is a bitfield but kind_flag is not set")
                off = _u32(m.bit_offset, "bit offset")
            out += [string(m.name), ref(m.type, f"member {m.name!r}"), off]
    elif k == Kind.ENUM:
        for v in t.values:
            if not -(1 << 31) <= v.value < 1 << 32:
                raise BtfError(f"enumerator {v.name} = {v.value} does not fit in 32 bits")
            out += [string(v.name), v.value & 0xFFFFFFFF]
    elif k == Kind.ENUM64:
        for v in t.values:
            if not -(1 << 63) <= v.value < 1 << 64:
                raise BtfError(f"enumerator {v.name} = {v.value} does not fit in 64 bits")
            val = v.value & (1 << 64) - 1
            out += [string(v.name), val & 0xFFFFFFFF, val >> 32]
    elif k == Kind.FUNC_PROTO:
        for p in t.params:
            out += [string(p.name), ref(p.type, f"parameter {p.name!r}")]
    elif k == Kind.DATASEC:
        for e in t.secinfo:
            out += [ref(e.type, "datasec entry"), _u32(e.offset, "offset"), _u32(e.size, "size")]
    elif k == Kind.VAR:
        out.append(_u32(t.linkage, "linkage"))
    elif k == Kind.DECL_TAG:
        out.append(t.component_idx & 0xFFFFFFFF)
    return struct.pack(f"<{len(out)}I", *out)
