"""Relocation tables: the entries of a file's SHT_RELA and SHT_REL sections.

What ``readelf -r`` lists, read with :mod:`struct` through
:mod:`~pyebpf.elf.layouts`: each entry's offset (an address in a linked
file), type (the machine's ``R_*`` number), symbol index and name, and
addend (0 for SHT_REL, whose addend is in the relocated place).  Every
offset, size and index is checked against the file: a damaged table gives
:class:`~pyebpf.elf.ElfError`, never another exception.
"""
from __future__ import annotations

from .._record import Record, record
from .errors import ElfError
from .layouts import layout
from .symbols import cstr

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .headers import ElfHeaders, Section

__all__ = ["Relocation", "relocations"]


@record
class Relocation(Record):
    """One relocation entry; ``symbol_name`` is ``""`` without a symbol."""

    section: str
    offset: int
    type: int
    symbol: int
    symbol_name: str
    addend: int


def _symbol_names(elf: ElfHeaders, sec: Section) -> tuple[list[str], str]:
    """The names of the symbol table a relocation section links to, by index
    (empty without one), and that table's name for messages."""
    if sec.link == 0:
        return [], ""
    if sec.link >= len(elf.sections):
        raise ElfError(f"{elf.path}: relocation section {sec.name or '(unnamed)'} links to "
                       f"section {sec.link}, but the file has {len(elf.sections)}")
    symtab = elf.sections[sec.link]
    if symtab.type not in ("SHT_DYNSYM", "SHT_SYMTAB") or symtab.link >= len(elf.sections):
        return [], symtab.name
    fmt = layout("Sym", elf.elfclass, elf.little_endian)
    strtab = elf.section_data(elf.sections[symtab.link])
    name_at = fmt.fields.index("st_name")
    names = []
    for i, entry in enumerate(elf.section_entries(symtab, fmt, "symbol table", "symbol")):
        offset = entry[name_at]
        if offset >= len(strtab) and offset:
            raise ElfError(f"{elf.path}: symbol {i} of {symtab.name or '(unnamed)'} names "
                           f"offset {offset:#x} of a {len(strtab):#x}-byte string table")
        names.append(cstr(strtab, offset))
    return names, symtab.name


def _section_relocations(elf: ElfHeaders, sec: Section) -> list[Relocation]:
    rela = sec.type == "SHT_RELA"
    fmt = layout("Rela" if rela else "Rel", elf.elfclass, elf.little_endian)
    where = sec.name or "(unnamed)"
    entries = elf.section_entries(sec, fmt, "relocation section", fmt.name)
    names, table = _symbol_names(elf, sec)
    # r_info: symbol index and type, split at bit 32 (ELF64) or bit 8 (ELF32)
    shift = 32 if elf.elfclass == 64 else 8
    out = []
    for i, fields in enumerate(entries):
        info = fields[1]
        sym = info >> shift
        if sym and sym >= len(names):
            raise ElfError(f"{elf.path}: relocation {i} of {where} refers to symbol {sym}, "
                           f"but {table or 'its symbol table'} has {len(names)}")
        out.append(Relocation(sec.name, fields[0], info & ((1 << shift) - 1), sym,
                              names[sym] if sym else "", fields[2] if rela else 0))
    return out


def relocations(elf: ElfHeaders,
                kinds: tuple[str, ...] = ("SHT_RELA", "SHT_REL")) -> list[Relocation]:
    """Every entry of the sections of ``elf`` whose type is in ``kinds``, in file order."""
    out: list[Relocation] = []
    for sec in elf.sections:
        if sec.type in kinds:
            out.extend(_section_relocations(elf, sec))
    return out
