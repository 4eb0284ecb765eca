"""C types from a program's DWARF debug information (``gcc -g``), read with
pyelftools: a function's parameters and the structs, unions and enums a
program defines -- what bpftrace 0.17 reads with libdw for ``args`` of a
uprobe, ``(struct Foo *)arg0`` and ``bt -lv``.

The types come out as :class:`CType` records, independent of any language:
``kind`` one of ``int``, ``float``, ``bool``, ``void``, ``pointer``,
``array``, ``struct``, ``union``, ``enum``, ``function``; typedefs and
``const``/``volatile`` are seen through (their names kept in ``name``).
Members of a struct are :class:`CMember` records (byte offset, bit field
width and offset). Nested types are read lazily (``CType.target``,
``CType.members``), so that a linked list's ``struct node *next`` is no
endless recursion.

Only the top-level entries of each compilation unit are searched for a
function or a type by name, so a big program is read no deeper than
needed; the file's DWARF is parsed once per :class:`DwarfTypes`.
"""
from __future__ import annotations

from .._record import Record, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator

__all__ = ["DwarfTypes", "CType", "CMember", "CParam", "dwarf_types"]

_KINDS = {"DW_TAG_pointer_type": "pointer", "DW_TAG_array_type": "array",
          "DW_TAG_structure_type": "struct", "DW_TAG_union_type": "union",
          "DW_TAG_enumeration_type": "enum", "DW_TAG_subroutine_type": "function",
          "DW_TAG_base_type": "int"}
_SEE_THROUGH = ("DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type",
                "DW_TAG_restrict_type", "DW_TAG_atomic_type")
# DW_ATE_*: base type encodings
_ATE_BOOLEAN, _ATE_FLOAT, _ATE_SIGNED, _ATE_SIGNED_CHAR = 0x02, 0x04, 0x05, 0x06


@record
class CMember(Record):
    """A struct or union member: ``name`` (``""`` when anonymous), byte
    ``offset``, its type, and for a bit field its ``bits`` and the
    ``bit_offset`` from the byte offset (little-endian, lowest bit first)."""
    name: str
    offset: int
    type: CType
    bits: int = 0
    bit_offset: int = 0


@record
class CParam(Record):
    """A function parameter: its ``name`` and type."""
    name: str
    type: CType


class CType:
    """One C type (see the module docs): ``kind``, ``name`` (``int``,
    ``Foo`` for ``struct Foo``, a typedef's name), ``size`` in bytes,
    ``signed`` (integers, enums), ``count`` (an array's elements, 0 when
    unknown), ``target`` (what a pointer points to, an array's element) and
    ``members`` (a struct's or union's)."""

    __slots__ = ("kind", "name", "size", "signed", "count", "typedef", "_die", "_target",
                 "_members")

    def __init__(self, kind: str, name: str = "", size: int = 0, signed: bool = False,
                 count: int = 0, die: Any = None) -> None:
        self.kind = kind
        self.name = name
        self.size = size
        self.signed = signed
        self.count = count
        #: the typedef it was named through (``uint16_t``), else ""
        self.typedef = ""
        self._die = die
        self._target: CType | None = None
        self._members: tuple[CMember, ...] | None = None

    @property
    def target(self) -> CType:
        """A pointer's pointee or an array's element (``void`` when none)."""
        if self._target is None:
            self._target = _type_of(self._die) if self._die is not None else CType("void")
        return self._target

    @property
    def members(self) -> tuple[CMember, ...]:
        """A struct's or union's members, in order (empty for other kinds)."""
        if self._members is None:
            self._members = tuple(_members(self._die)) if self.kind in ("struct", "union") \
                and self._die is not None else ()
        return self._members

    def c_name(self) -> str:
        """The type as C (and bpftrace's ``-lv``) writes it: ``int``,
        ``struct Foo*``, ``char**``, ``uint16_t`` (a typedef's name)."""
        if self.typedef:
            return self.typedef
        if self.kind == "pointer":
            return self.target.c_name() + "*"
        if self.kind in ("struct", "union", "enum"):
            return f"{self.kind} {self.name}".rstrip()
        if self.kind == "array":
            return f"{self.target.c_name()}[{self.count}]"
        return self.name or self.kind

    def __repr__(self) -> str:
        return f"CType({self.c_name()!r}, size={self.size})"


def _type_of(die: Any) -> CType:
    """The type DIE ``die``'s ``DW_AT_type`` names (``void`` without one)."""
    if "DW_AT_type" not in die.attributes:
        return CType("void")
    return _ctype(die.get_DIE_from_attribute("DW_AT_type"))


def _name(die: Any) -> str:
    at = die.attributes.get("DW_AT_name")
    return at.value.decode(errors="replace") if at is not None else ""


def _ctype(die: Any) -> CType:
    typedef = _name(die) if die.tag == "DW_TAG_typedef" else ""
    seen = 0
    while die.tag in _SEE_THROUGH and seen < 32:
        if "DW_AT_type" not in die.attributes:
            return CType("void", _name(die))
        die = die.get_DIE_from_attribute("DW_AT_type")
        seen += 1
    t = _base_ctype(die)
    t.typedef = typedef
    return t


def _base_ctype(die: Any) -> CType:
    kind = _KINDS.get(die.tag, "void")
    size_at = die.attributes.get("DW_AT_byte_size")
    size = size_at.value if size_at is not None else 0
    name = _name(die)
    if kind == "int":
        enc = die.attributes["DW_AT_encoding"].value if "DW_AT_encoding" in die.attributes else 0
        if enc == _ATE_FLOAT:
            kind = "float"
        elif enc == _ATE_BOOLEAN:
            kind = "bool"
        return CType(kind, name, size, enc in (_ATE_SIGNED, _ATE_SIGNED_CHAR))
    if kind == "pointer":
        return CType("pointer", "", size or 8, die=die)
    if kind == "array":
        count = 0
        for sub in die.iter_children():
            if sub.tag == "DW_TAG_subrange_type":
                if "DW_AT_count" in sub.attributes:
                    count = sub.attributes["DW_AT_count"].value
                elif "DW_AT_upper_bound" in sub.attributes:
                    count = sub.attributes["DW_AT_upper_bound"].value + 1
                break
        elem = _type_of(die)
        t = CType("array", "", elem.size * count, count=count)
        t._target = elem
        return t
    if kind == "enum":
        signed = any(c.attributes["DW_AT_const_value"].value < 0 for c in die.iter_children()
                     if "DW_AT_const_value" in c.attributes)
        return CType("enum", name, size or 4, signed)
    return CType(kind, name, size, die=die)


def _members(die: Any) -> Iterator[CMember]:
    for m in die.iter_children():
        if m.tag != "DW_TAG_member":
            continue
        off = m.attributes.get("DW_AT_data_member_location")
        offset = off.value if off is not None and isinstance(off.value, int) else 0
        bits = m.attributes["DW_AT_bit_size"].value if "DW_AT_bit_size" in m.attributes else 0
        bit_offset = 0
        if "DW_AT_data_bit_offset" in m.attributes:
            total = m.attributes["DW_AT_data_bit_offset"].value
            offset, bit_offset = total // 8, total % 8
        yield CMember(_name(m), offset, _type_of(m), bits, bit_offset)


class DwarfTypes:
    """The DWARF of one ELF file (see the module docs)."""

    def __init__(self, path: str) -> None:
        import io

        from elftools.elf.elffile import ELFFile
        self.path = path
        with open(path, "rb") as f:          # (read whole: no file stays open)
            data = io.BytesIO(f.read())
        try:
            elf = ELFFile(data)
            self._dwarf = elf.get_dwarf_info() if elf.has_dwarf_info() else None
        except Exception:          # (pyelftools' errors on a damaged file)
            self._dwarf = None
        self._top: list[Any] | None = None

    @property
    def has_info(self) -> bool:
        """The file carries DWARF debug information."""
        return self._dwarf is not None and bool(self._entries())

    def _entries(self) -> list[Any]:
        if self._top is None:
            self._top = []
            if self._dwarf is not None:
                for cu in self._dwarf.iter_CUs():
                    self._top += list(cu.get_top_DIE().iter_children())
        return self._top

    def function_params(self, name: str) -> list[CParam] | None:
        """The parameters of function ``name``, in order; None when the
        DWARF has no such function (its definition or declaration)."""
        for die in self._entries():
            if die.tag == "DW_TAG_subprogram" and _name(die) == name:
                params = [CParam(_name(p), _type_of(p)) for p in die.iter_children()
                          if p.tag == "DW_TAG_formal_parameter"]
                if params or "DW_AT_low_pc" in die.attributes:
                    return params
        return None

    def struct(self, name: str) -> CType | None:
        """``struct NAME``, ``union NAME`` or ``enum NAME`` (a complete
        definition), or a typedef of that name; None when there is none."""
        kind, _, bare = name.partition(" ")
        tag = {"struct": "DW_TAG_structure_type", "union": "DW_TAG_union_type",
               "enum": "DW_TAG_enumeration_type"}.get(kind)
        for die in self._entries():
            if tag is None:
                if die.tag == "DW_TAG_typedef" and _name(die) == name:
                    return _ctype(die)
            elif die.tag == tag and _name(die) == bare and \
                    "DW_AT_declaration" not in die.attributes:
                return _ctype(die)
        return None


_CACHE: dict[str, DwarfTypes] = {}


def dwarf_types(path: str) -> DwarfTypes:
    """The :class:`DwarfTypes` of ``path``, read once per process."""
    got = _CACHE.get(path)
    if got is None:
        got = _CACHE[path] = DwarfTypes(path)
    return got
