"""pyebpf.elf's layouts and writer: images written for every class and byte
order read back the same through both header parsers (struct and
pyelftools), with their symbols; the writer's layout rules hold."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from pyebpf.elf import ElfError, ElfFile, ElfWriter
from pyebpf.elf import layouts as L
from pyebpf.elf.writer import StringTable, pack_note, pack_symbols, sysv_hash, sysv_hash_table

CLASSES = [(64, True), (64, False), (32, True), (32, False)]


def _image(elfclass: int, little: bool, machine: int = L.EM_X86_64) -> bytes:
    strs = StringTable()
    w = ElfWriter(type=L.ET_DYN, machine=machine, elfclass=elfclass, little_endian=little)
    sym = L.layout("Sym", elfclass, little)
    w.add_section(".dynsym", L.SHT_DYNSYM, L.SHF_ALLOC, size=3 * sym.size, align=8,
                  link=".dynstr", info=2, entsize=sym.size)    # locals first
    names = [strs.add("func"), strs.add("counter")]
    w.add_section(".dynstr", L.SHT_STRTAB, L.SHF_ALLOC, data=bytes(strs.data))
    w.add_section(".text", L.SHT_PROGBITS, L.SHF_ALLOC | L.SHF_EXECINSTR, data=b"\x90\xc3",
                  align=16)
    w.add_section(".data", L.SHT_PROGBITS, L.SHF_ALLOC | L.SHF_WRITE, data=b"\1" * 8, align=8)
    w.add_section(".bss", L.SHT_NOBITS, L.SHF_ALLOC | L.SHF_WRITE, size=0x100, align=8)
    w.add_section(".comment", L.SHT_PROGBITS, 0, data=b"pyebpf\0")
    w.layout()
    w.set_data(".dynsym", pack_symbols(
        [(0, 0, 0, 0, 0, 0),
         (names[1], (L.STB_LOCAL << 4) | L.STT_OBJECT, 0, w.index(".bss"),
          w.address(".bss") + 8, 8),
         (names[0], (L.STB_GLOBAL << 4) | L.STT_FUNC, 0, w.index(".text"), w.address(".text"),
          2)], elfclass=elfclass, little_endian=little))
    return w.build()


def _pyelftools(path: str) -> ElfFile:
    slow = object.__new__(ElfFile)
    slow.path = path
    slow._data = None
    slow._parse_pyelftools(path)
    return slow


@pytest.mark.parametrize("elfclass,little", CLASSES)
def test_written_images_read_back_through_both_parsers(tmp_path, elfclass, little):
    data = _image(elfclass, little)
    path = tmp_path / "img.so"
    path.write_bytes(data)
    fast = object.__new__(ElfFile)
    fast.path, fast._data = str(path), None
    assert fast._parse_fast(str(path))              # struct, through the layouts
    slow = _pyelftools(str(path))
    for attr in ("type", "machine", "elfclass", "little_endian", "entry", "segments",
                 "sections"):
        assert getattr(fast, attr) == getattr(slow, attr), attr
    ef = ElfFile.from_bytes(data, "mem.so")
    assert (ef.elfclass, ef.little_endian, ef.type) == (elfclass, little, "ET_DYN")
    text, data_seg = ef.segments[1], ef.segments[2]
    assert text.executable and not text.writable
    assert data_seg.writable and data_seg.memsz == data_seg.filesz + 0x100
    assert {(s.name, s.bind_name, s.type_name, s.table) for s in ef.symbols()} == {
        ("func", "GLOBAL", "FUNC", ".dynsym"), ("counter", "LOCAL", "OBJECT", ".dynsym")}
    assert ef.symbol("func").address == ef.section(".text").addr
    assert ef.read(ef.section(".text").addr, 2) == b"\x90\xc3"


def test_layout_rules():
    ef = ElfFile.from_bytes(_image(64, True))
    loads = ef.segments
    assert [str(s).split()[-1] for s in loads] == ["R--", "R-X", "RW-"]
    assert loads[0].offset == 0 and loads[0].vaddr == 0           # the headers are loaded
    for seg in loads[1:]:
        assert seg.offset % 0x1000 == 0 and seg.vaddr == seg.offset
    for sec in ef.sections:
        if sec.addr:
            assert sec.addr == sec.offset                          # vaddr = offset
    bss = ef.section(".bss")
    assert bss.type == "SHT_NOBITS" and bss.addr == loads[2].vaddr + loads[2].filesz
    assert loads[2].memsz == loads[2].filesz + bss.size
    assert ef.section(".comment").addr == 0


def test_nobits_must_end_its_segment():
    w = ElfWriter()
    w.add_section(".bss", L.SHT_NOBITS, L.SHF_ALLOC | L.SHF_WRITE, size=8)
    w.add_section(".data", L.SHT_PROGBITS, L.SHF_ALLOC | L.SHF_WRITE, data=b"x")
    with pytest.raises(ElfError, match=".bss must come last"):
        w.layout()


def test_writer_refuses_misuse():
    w = ElfWriter()
    w.add_section(".text", L.SHT_PROGBITS, L.SHF_ALLOC | L.SHF_EXECINSTR, size=4)
    with pytest.raises(ElfError, match="after layout"):
        w.address(".text")
    with pytest.raises(ElfError, match="already has"):
        w.add_section(".text", L.SHT_PROGBITS)
    w.layout()
    with pytest.raises(ElfError, match="laid out with 4 bytes"):
        w.set_data(".text", b"\x90")
    with pytest.raises(ElfError, match="no section"):
        w.index(".nope")
    with pytest.raises(ElfError, match="has no field"):
        L.layout("Shdr").build(sh_bogus=1)


def test_structures_are_declared_for_both_classes():
    for name, by_class in L.STRUCTURES.items():
        assert set(by_class) == {32, 64}, name
        s32, s64 = L.layout(name, 32), L.layout(name, 64)
        assert sorted(s32.fields) == sorted(s64.fields), name
    # the sizes the specification gives
    assert [L.layout(n, 64).size for n in ("Ehdr", "Phdr", "Shdr", "Sym", "Dyn")] == \
        [64, 56, 64, 24, 16]
    assert [L.layout(n, 32).size for n in ("Ehdr", "Phdr", "Shdr", "Sym", "Dyn")] == \
        [52, 32, 40, 16, 8]
    hdr = L.layout("Phdr", 32, False)
    assert hdr.fields_of(hdr.build(p_type=1, p_flags=5))["p_flags"] == 5


def test_hash_and_notes():
    assert sysv_hash(b"") == 0 and sysv_hash(b"printf") == 0x077905A6   # the spec's function
    table = sysv_hash_table([b"", b"a", b"b"], 1)
    assert len(table) == 4 * (2 + 1 + 3)
    note = pack_note(b"GNU\0", 3, b"\xab" * 5)
    assert len(note) == 12 + 4 + 8 and note[16:21] == b"\xab" * 5


@pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils' readelf not installed")
@pytest.mark.parametrize("elfclass,little", CLASSES)
def test_readelf_reads_written_images(tmp_path, elfclass, little):
    path = tmp_path / "img.so"
    path.write_bytes(_image(elfclass, little))
    out = subprocess.run(["readelf", "-lSs", "-W", str(path)], capture_output=True,
                         text=True, check=True)
    assert "Warning" not in out.stderr and "Error" not in out.stderr, out.stderr
    assert ".bss" in out.stdout and "func" in out.stdout and "counter" in out.stdout
