"""Write ELF files: sections in, a loadable image out.

::

    w = ElfWriter(type=ET_DYN, machine=EM_X86_64)
    w.add_section(".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, data=code, align=16)
    w.add_section(".dynamic", SHT_DYNAMIC, SHF_ALLOC | SHF_WRITE, size=16 * 7, align=8,
                  link=".dynstr", entsize=16)
    w.layout()                          # addresses are known from here on
    w.set_data(".dynamic", pack_dynamic([(DT_HASH, w.address(".hash")), ...]))
    image = w.build()

How it lays a file out (virtual address = file offset everywhere, as a
linker does for a shared object loaded at 0):

* the ELF header and the program headers first;
* the sections with ``SHF_ALLOC``, in the order added, grouped into one
  PT_LOAD segment per run of sections with the same write/execute flags;
  each segment after the first starts on a new page; an ``SHT_NOBITS``
  section (``.bss``) takes memory but no file bytes, so it must end its
  segment (``p_memsz`` > ``p_filesz``);
* PT_DYNAMIC over the ``SHT_DYNAMIC`` section, PT_NOTE over each allocated
  ``SHT_NOTE`` section, and PT_GNU_STACK (not executable);
* then the other sections, ``.shstrtab`` (made here) and the section headers.

Every structure is packed from :mod:`pyebpf.elf.layouts`, the declarations
the readers use.  Helpers build the contents that need them:
:class:`StringTable`, :func:`pack_symbols`, :func:`sysv_hash_table`,
:func:`pack_dynamic`, :func:`pack_note`.
"""
from __future__ import annotations

import struct

from .errors import ElfError
from .layouts import (EM_X86_64, ET_DYN, PF_R, PF_W, PF_X, PT_DYNAMIC, PT_GNU_STACK, PT_LOAD,
                      PT_NOTE, SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHT_DYNAMIC, SHT_NOBITS,
                      SHT_NOTE, SHT_STRTAB, ElfStruct, layout)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, Sequence

__all__ = ["ElfWriter", "WrittenSection", "StringTable", "pack_symbols", "sysv_hash",
           "sysv_hash_table", "sysv_hash_size", "pack_dynamic", "pack_note"]


def _align(x: int, a: int) -> int:
    return -(-x // a) * a if a > 1 else x


class StringTable:
    """A string table (``.dynstr``, ``.strtab``): :meth:`add` gives each
    string's offset; ``data`` is the table's bytes (starting with NUL)."""

    def __init__(self) -> None:
        self.data = bytearray(b"\0")
        self._offsets: dict[str, int] = {"": 0}

    def add(self, text: str) -> int:
        """The offset of ``text`` in the table (added once)."""
        off = self._offsets.get(text)
        if off is None:
            off = self._offsets[text] = len(self.data)
            self.data += text.encode() + b"\0"
        return off

    def name_at(self, offset: int) -> bytes:
        """The NUL-terminated string at ``offset``, without its NUL."""
        return bytes(self.data[offset:self.data.index(0, offset)])


class WrittenSection:
    """One section of an :class:`ElfWriter`: its header fields, its contents
    (``data``; for SHT_NOBITS only ``size``) and, after layout, its
    ``addr`` and ``offset``."""

    def __init__(self, name: str, sh_type: int, flags: int, data: bytes, size: int,
                 align: int, link: str | int, info: int, entsize: int) -> None:
        self.name = name
        self.type = sh_type
        self.flags = flags
        self.data = data
        self.size = size
        self.align = max(1, align)
        self.link = link
        self.info = info
        self.entsize = entsize
        self.addr = 0
        self.offset = 0

    @property
    def alloc(self) -> bool:
        """The section is loaded (``SHF_ALLOC``)."""
        return bool(self.flags & SHF_ALLOC)

    @property
    def segment_flags(self) -> int:
        """The PT_LOAD flags a segment holding this section needs."""
        return PF_R | (PF_W if self.flags & SHF_WRITE else 0) | \
            (PF_X if self.flags & SHF_EXECINSTR else 0)


class ElfWriter:
    """Build an ELF image from sections (see the module docs).

    Args:
        type: ``e_type`` (``ET_DYN``...).
        machine: ``e_machine``.
        elfclass: 32 or 64.
        little_endian: the byte order.
        page: the segment alignment (``p_align`` of PT_LOAD).
        stack: add a PT_GNU_STACK header (a non-executable stack).
    """

    def __init__(self, *, type: int = ET_DYN, machine: int = EM_X86_64, elfclass: int = 64,
                 little_endian: bool = True, page: int = 0x1000, stack: bool = True) -> None:
        self.e_type = type
        self.machine = machine
        self.elfclass = elfclass
        self.little_endian = little_endian
        self.page = page
        self.stack = stack
        self.entry = 0
        self.sections: list[WrittenSection] = []
        self._laid_out = False
        self._phdrs: list[tuple[int, int, int, int, int, int, int]] = []
        self._end = 0

    def _layout(self, name: str) -> ElfStruct:
        return layout(name, self.elfclass, self.little_endian)

    # -- definition
    def add_section(self, name: str, sh_type: int, flags: int = 0, *, data: bytes = b"",
                    size: int | None = None, align: int = 1, link: str | int = 0,
                    info: int = 0, entsize: int = 0) -> WrittenSection:
        """Add a section; give its ``data`` now, or its ``size`` and the data
        later (:meth:`set_data`).  ``link`` is a section name or index."""
        if self._laid_out and flags & SHF_ALLOC:
            raise ElfError(f"cannot add the loaded section {name} after layout()")
        if any(s.name == name for s in self.sections):
            raise ElfError(f"the image already has a section {name}")
        if size is None:
            size = len(data)
        elif data and len(data) != size:
            raise ElfError(f"section {name}: {len(data)} bytes of data for a size of {size}")
        sec = WrittenSection(name, sh_type, flags, bytes(data), size, align, link, info,
                             entsize)
        self.sections.append(sec)
        return sec

    def section(self, name: str) -> WrittenSection:
        """The section called ``name``."""
        for s in self.sections:
            if s.name == name:
                return s
        raise ElfError(f"the image has no section {name}")

    def index(self, name: str) -> int:
        """The section header index of ``name`` (0 is the null section)."""
        return self.sections.index(self.section(name)) + 1

    def address(self, name: str) -> int:
        """The virtual address of loaded section ``name`` (after :meth:`layout`)."""
        if not self._laid_out:
            raise ElfError("addresses are known after layout()")
        return self.section(name).addr

    def set_data(self, name: str, data: bytes) -> None:
        """The contents of section ``name``; a loaded section keeps the size it
        was laid out with."""
        sec = self.section(name)
        if sec.alloc and len(data) != sec.size:
            raise ElfError(f"section {name} was laid out with {sec.size} bytes, not "
                           f"{len(data)}")
        sec.data = bytes(data)
        sec.size = len(data)

    # -- layout
    def _groups(self) -> list[list[WrittenSection]]:
        groups: list[list[WrittenSection]] = []
        for sec in self.sections:
            if not sec.alloc:
                continue
            if groups and groups[-1][-1].type == SHT_NOBITS and \
                    groups[-1][-1].segment_flags == sec.segment_flags:
                raise ElfError(f"section {sec.name} follows the SHT_NOBITS section "
                               f"{groups[-1][-1].name} in its segment: .bss must come last")
            if groups and groups[-1][0].segment_flags == sec.segment_flags:
                groups[-1].append(sec)
            else:
                groups.append([sec])
        return groups

    def layout(self) -> None:
        """Give every loaded section its address and offset (idempotent)."""
        if self._laid_out:
            return
        groups = self._groups()
        notes = [s for s in self.sections if s.alloc and s.type == SHT_NOTE]
        dynamic = [s for s in self.sections if s.alloc and s.type == SHT_DYNAMIC]
        phnum = len(groups) + len(dynamic[:1]) + len(notes) + int(self.stack)
        pos = self._layout("Ehdr").size + phnum * self._layout("Phdr").size
        phdrs = []
        for i, group in enumerate(groups):
            start = 0 if i == 0 else _align(pos, self.page)
            pos = start if i else pos
            file_end = mem_end = pos
            for sec in group:
                pos = _align(pos, sec.align)
                sec.addr = sec.offset = pos
                if sec.type == SHT_NOBITS:
                    mem_end = pos + sec.size
                else:
                    pos += sec.size
                    file_end = mem_end = pos
            phdrs.append((PT_LOAD, group[0].segment_flags, start, start, file_end - start,
                          mem_end - start, self.page))
            pos = file_end
        for sec in dynamic[:1]:
            phdrs.append((PT_DYNAMIC, sec.segment_flags, sec.offset, sec.addr, sec.size,
                          sec.size, sec.align))
        for sec in notes:
            phdrs.append((PT_NOTE, PF_R, sec.offset, sec.addr, sec.size, sec.size, sec.align))
        if self.stack:
            phdrs.append((PT_GNU_STACK, PF_R | PF_W, 0, 0, 0, 0, 16))
        self._phdrs = phdrs
        self._end = pos
        self._laid_out = True

    # -- output
    def build(self) -> bytes:
        """The image: headers, loaded sections, the other sections, ``.shstrtab``
        and the section header table."""
        self.layout()
        shstr = StringTable()
        names = [shstr.add(s.name) for s in self.sections]
        shstr_name = shstr.add(".shstrtab")
        pos = self._end
        for sec in self.sections:
            if not sec.alloc:
                pos = _align(pos, sec.align)
                sec.offset = pos
                pos += 0 if sec.type == SHT_NOBITS else sec.size
        shstr_off = pos
        shoff = _align(shstr_off + len(shstr.data), 8)
        shdr = self._layout("Shdr")
        nsec = len(self.sections) + 2
        img = bytearray(shoff + nsec * shdr.size)
        ehdr = self._layout("Ehdr")
        phdr = self._layout("Phdr")
        ident = b"\x7fELF" + bytes([self.elfclass // 32, 1 if self.little_endian else 2, 1])
        img[0:ehdr.size] = ehdr.build(
            e_ident=ident, e_type=self.e_type, e_machine=self.machine, e_version=1,
            e_entry=self.entry, e_phoff=ehdr.size, e_shoff=shoff, e_ehsize=ehdr.size,
            e_phentsize=phdr.size, e_phnum=len(self._phdrs), e_shentsize=shdr.size,
            e_shnum=nsec, e_shstrndx=nsec - 1)
        for i, (ptype, flags, off, vaddr, filesz, memsz, align) in enumerate(self._phdrs):
            at = ehdr.size + i * phdr.size
            img[at:at + phdr.size] = phdr.build(
                p_type=ptype, p_flags=flags, p_offset=off, p_vaddr=vaddr, p_paddr=vaddr,
                p_filesz=filesz, p_memsz=memsz, p_align=align)
        for sec in self.sections:
            if sec.type != SHT_NOBITS and sec.data:
                img[sec.offset:sec.offset + len(sec.data)] = sec.data
        img[shstr_off:shstr_off + len(shstr.data)] = shstr.data
        headers = [shdr.build(
            sh_name=name, sh_type=s.type, sh_flags=s.flags, sh_addr=s.addr,
            sh_offset=s.offset, sh_size=s.size,
            sh_link=self.index(s.link) if isinstance(s.link, str) else s.link,
            sh_info=s.info, sh_addralign=s.align, sh_entsize=s.entsize)
            for name, s in zip(names, self.sections)]
        headers.append(shdr.build(sh_name=shstr_name, sh_type=SHT_STRTAB, sh_offset=shstr_off,
                                  sh_size=len(shstr.data), sh_addralign=1))
        at = shoff + shdr.size          # after the null section header
        for h in headers:
            img[at:at + shdr.size] = h
            at += shdr.size
        return bytes(img)


# ---------------------------------------------------------------- contents
def pack_symbols(symbols: Iterable[tuple[int, int, int, int, int, int]], *, elfclass: int = 64,
                 little_endian: bool = True) -> bytes:
    """A symbol table from ``(name offset, info, other, section index, value,
    size)`` entries (put the null symbol first yourself)."""
    sym = layout("Sym", elfclass, little_endian)
    return b"".join(sym.build(st_name=n, st_info=i, st_other=o, st_shndx=x, st_value=v,
                              st_size=z) for n, i, o, x, v, z in symbols)


def sysv_hash(name: bytes) -> int:
    """The System V ELF hash of a symbol name (``DT_HASH``)."""
    h = 0
    for c in name:
        h = ((h << 4) + c) & 0xFFFFFFFF
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


def sysv_hash_table(names: Sequence[bytes], nbucket: int, *, little_endian: bool = True) -> bytes:
    """A ``.hash`` section for a symbol table whose symbol ``i`` is called
    ``names[i]`` (``names[0]``, the null symbol, is not hashed)."""
    buckets = [0] * nbucket
    chains = [0] * len(names)
    for i in range(1, len(names)):
        b = sysv_hash(names[i]) % nbucket
        chains[i] = buckets[b]
        buckets[b] = i
    order = "<" if little_endian else ">"
    return struct.pack(f"{order}{2 + nbucket + len(names)}I", nbucket, len(names), *buckets,
                       *chains)


def sysv_hash_size(nsyms: int, nbucket: int) -> int:
    """The size in bytes of a ``.hash`` section (see :func:`sysv_hash_table`)."""
    return 4 * (2 + nbucket + nsyms)


def pack_dynamic(entries: Iterable[tuple[int, int]], *, elfclass: int = 64,
                 little_endian: bool = True) -> bytes:
    """A ``.dynamic`` section from ``(tag, value)`` entries (end with DT_NULL)."""
    dyn = layout("Dyn", elfclass, little_endian)
    return b"".join(dyn.build(d_tag=t, d_val=v) for t, v in entries)


def pack_note(name: bytes, ntype: int, desc: bytes, *, little_endian: bool = True,
              align: int = 4) -> bytes:
    """One note: header, ``name`` (give its NUL) and ``desc``, each padded to ``align``."""
    def pad(b: bytes) -> bytes:
        return b + b"\0" * (-len(b) % align)

    hdr = layout("Nhdr", 64, little_endian).build(n_namesz=len(name), n_descsz=len(desc),
                                                   n_type=ntype)
    return hdr + pad(name) + pad(desc)
