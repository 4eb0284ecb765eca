"""pyebpf.elf's relocation reader: the same entries as ``readelf -r`` on
system files, for every class and byte order on written images, and
ElfError (never another exception) on damaged tables."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from systools import PYTHON as SYSTEM_PYTHON

from pyebpf.elf import ElfError, ElfFile, ElfWriter, open_elf, relocations
from pyebpf.elf import layouts as L
from pyebpf.elf.writer import StringTable, pack_symbols

SYSTEM_FILES = [SYSTEM_PYTHON, "/lib/x86_64-linux-gnu/libc.so.6"]
_SECTION = re.compile(r"^Relocation section '([^']*)' at offset \S+ contains (\d+) entr")
_HEX = re.compile(r"[0-9a-f]+")


def _readelf(path: str) -> list[tuple[str, int, int, str, int]]:
    """``readelf -rW``'s entries: (section, offset, info, symbol name, addend).

    A row is ``offset info type``, then either the addend alone (no symbol)
    or ``value name[@VERSION] [+|- addend]``.
    """
    out = subprocess.run(["readelf", "-rW", path], capture_output=True, text=True,
                         check=True).stdout
    rows: list[tuple[str, int, int, str, int]] = []
    section = ""
    for line in out.splitlines():
        m = _SECTION.match(line)
        if m:
            section = m.group(1)
            continue
        words = line.split()
        if not section or len(words) < 3 or not all(_HEX.fullmatch(w) for w in words[:2]):
            continue
        rest = words[3:]
        name, addend = "", 0
        if len(rest) == 1:
            addend = int(rest[0], 16)
        elif rest:
            name = rest[1].split("@")[0]                   # readelf appends @VERSION
            if len(rest) == 4:
                addend = int(rest[3], 16) * (-1 if rest[2] == "-" else 1)
        rows.append((section, int(words[0], 16), int(words[1], 16), name, addend))
    return rows


@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs binutils' readelf")
@pytest.mark.parametrize("path", SYSTEM_FILES)
def test_same_entries_as_readelf(path: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} is not on this machine")
    expected = _readelf(path)
    got = [(r.section, r.offset, (r.symbol << 32) | r.type, r.symbol_name.split("@")[0],
            r.addend) for r in relocations(open_elf(path))]
    assert len(expected) > 10
    assert got == expected


def _image(elfclass: int, little: bool, entries: list[tuple[int, int, int, int]],
           rela: bool = True, entsize: int | None = None) -> bytes:
    """An ET_DYN with one symbol ``counter`` (index 1) and one relocation
    section of ``entries`` (offset, symbol index, type, addend)."""
    strs = StringTable()
    sym = L.layout("Sym", elfclass, little)
    rel = L.layout("Rela" if rela else "Rel", elfclass, little)
    w = ElfWriter(type=L.ET_DYN, machine=L.EM_X86_64, elfclass=elfclass, little_endian=little)
    w.add_section(".dynsym", L.SHT_DYNSYM, L.SHF_ALLOC, size=2 * sym.size, align=8,
                  link=".dynstr", info=1, entsize=sym.size)
    name = strs.add("counter")
    w.add_section(".dynstr", L.SHT_STRTAB, L.SHF_ALLOC, data=bytes(strs.data))
    shift = 32 if elfclass == 64 else 8
    data = b"".join(
        rel.build(r_offset=o, r_info=(s << shift) | t, **({"r_addend": a} if rela else {}))
        for o, s, t, a in entries)
    w.add_section(".rela.dyn" if rela else ".rel.dyn", L.SHT_RELA if rela else L.SHT_REL,
                  L.SHF_ALLOC, data=data, align=8, link=".dynsym",
                  entsize=rel.size if entsize is None else entsize)
    w.add_section(".data", L.SHT_PROGBITS, L.SHF_ALLOC | L.SHF_WRITE, data=b"\0" * 16, align=8)
    w.layout()
    w.set_data(".dynsym", pack_symbols(
        [(0, 0, 0, 0, 0, 0),
         (name, (L.STB_GLOBAL << 4) | L.STT_OBJECT, 0, w.index(".data"), w.address(".data"),
          8)], elfclass=elfclass, little_endian=little))
    return w.build()


@pytest.mark.parametrize("elfclass,little", [(64, True), (64, False), (32, True), (32, False)])
@pytest.mark.parametrize("rela", [True, False])
def test_written_tables_read_back(elfclass: int, little: bool, rela: bool) -> None:
    entries = [(0x1000, 1, 6, 0), (0x1008, 0, 8, -16 if rela else 0), (0x1010, 1, 1, 24 * rela)]
    elf = ElfFile.from_bytes(_image(elfclass, little, entries, rela))
    got = [(r.offset, r.symbol, r.type, r.addend, r.symbol_name) for r in relocations(elf)]
    assert got == [(o, s, t, a, "counter" if s else "") for o, s, t, a in entries]
    assert {r.section for r in relocations(elf)} == {".rela.dyn" if rela else ".rel.dyn"}
    assert relocations(elf, ("SHT_DYNAMIC",)) == []


def test_symbol_index_past_the_table_is_an_elf_error() -> None:
    elf = ElfFile.from_bytes(_image(64, True, [(0x1000, 7, 6, 0)]))
    with pytest.raises(ElfError, match="refers to symbol 7, but .dynsym has 2"):
        relocations(elf)


def test_short_entries_are_an_elf_error() -> None:
    elf = ElfFile.from_bytes(_image(64, True, [(0x1000, 1, 6, 0)], entsize=8))
    with pytest.raises(ElfError, match="entries of 8 bytes; an ELF64 Rela takes 24"):
        relocations(elf)


def test_table_outside_the_file_is_an_elf_error() -> None:
    image = _image(64, True, [(0x1000, 1, 6, 0)] * 4)
    elf = ElfFile.from_bytes(image)
    sec = elf.section(".rela.dyn")
    assert sec is not None
    with pytest.raises(ElfError):
        relocations(ElfFile.from_bytes(image[:sec.offset + 8]))
