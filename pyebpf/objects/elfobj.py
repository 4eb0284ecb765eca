"""The parts of a clang-built BPF ELF object the loader reads: sections,
symbols and the relocations of each section (ELF64, little-endian, ET_REL).

Offsets, sizes and indices are checked against the file: damage raises
:class:`~pyebpf.errors.ObjectFileError`, never another exception.
"""
from __future__ import annotations

import os
import struct

from .errors import ObjectError, ObjectFileError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ObjSection", "ObjSymbol", "ObjElf", "SHT_PROGBITS", "SHT_NOBITS", "SHF_EXECINSTR"]

SHT_PROGBITS = 1
SHT_SYMTAB = 2
SHT_STRTAB = 3
SHT_REL = 9
SHT_NOBITS = 8
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
STT_SECTION = 3
STT_FUNC = 2
STB_LOCAL = 0
#: symbol visibilities (``st_other & 3``) that keep a global out of other objects
STV_HIDDEN_ONES = (1, 2)        # STV_INTERNAL, STV_HIDDEN
EM_BPF = 247
#: the largest .bss-like section accepted (a map value is far smaller)
_NOBITS_MAX = 1 << 30
_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_REL = struct.Struct("<QQ")


class ObjSection:
    """One section: ``index``, ``name``, ``type``, ``flags``, ``size``, ``data``
    (zeros for SHT_NOBITS; copied out of the file when first asked for: the
    debug sections nobody reads are most of an object), ``link``, ``info``."""

    __slots__ = ("index", "name", "type", "flags", "size", "_data", "_file", "_offset",
                 "link", "info", "relocs")

    def __init__(self, index: int, name: str, type: int, flags: int, size: int,
                 data: bytes | None, link: int, info: int, file: bytes = b"",
                 offset: int = 0) -> None:
        self.index, self.name, self.type, self.flags = index, name, type, flags
        self.size, self._data, self.link, self.info = size, data, link, info
        self._file, self._offset = file, offset
        #: byte offset in this section -> symbol index (from its SHT_REL section)
        self.relocs: dict[int, int] = {}

    @property
    def data(self) -> bytes:
        """The section's bytes."""
        if self._data is None:
            self._data = (b"\0" * self.size if self.type == SHT_NOBITS
                          else self._file[self._offset:self._offset + self.size])
            self._file = b""
        return self._data

    @property
    def is_code(self) -> bool:
        """An executable (program or ``.text``) section."""
        return bool(self.flags & SHF_EXECINSTR) and self.type == SHT_PROGBITS


class ObjSymbol:
    """One symbol: ``name``, ``value``, ``size``, ``type`` (STT_*), ``bind``
    (STB_*), ``shndx`` (0: undefined, i.e. an extern), ``visibility``
    (STV_*: 0 default, 1 internal, 2 hidden, 3 protected)."""

    __slots__ = ("index", "name", "value", "size", "type", "bind", "shndx", "visibility")

    def __init__(self, index: int, name: str, value: int, size: int, type: int, bind: int,
                 shndx: int, visibility: int = 0) -> None:
        self.index, self.name, self.value, self.size = index, name, value, size
        self.type, self.bind, self.shndx, self.visibility = type, bind, shndx, visibility

    @property
    def is_hidden_global(self) -> bool:
        """A global or weak symbol that other objects cannot see (``__hidden``)."""
        return self.bind != STB_LOCAL and self.visibility in STV_HIDDEN_ONES


def _mapped(fh: Any) -> Any:
    """A read-only mapping of the open file ``fh``, or None where it cannot be mapped."""
    import mmap
    try:
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None


def _cstr(data: bytes, at: int) -> str:
    end = data.find(b"\0", at)
    return data[at:end if end >= 0 else len(data)].decode("utf-8", "replace")


#: files from this size on are mapped to be parsed, not read
_MAP_FROM = 64 * 1024
#: sections copied out of a mapped file only when asked for (DWARF: most of a ``-g`` object)
_LATER = (".debug", ".rel.debug")


class _Later:
    """Stands for the file of a section copied out of it only when asked
    for: the bytes of :attr:`ObjElf.data` (read again from the file)."""

    __slots__ = ("elf",)

    def __init__(self, elf: ObjElf) -> None:
        self.elf = elf

    def __getitem__(self, span: slice) -> bytes:
        return self.elf.data[span]


class ObjElf:
    """A parsed BPF object file (see the module docstring)."""

    @classmethod
    def read(cls, path: str, data: bytes | None = None, *, bpf: bool = True) -> ObjElf:
        """The object file at ``path``, parsed from ``data`` when given (else
        read from the file: one that cannot be read is an :class:`ObjectError`).
        ``bpf``: as for the constructor.

        A large file is mapped while it is parsed, and the sections the
        loader reads are copied out of it (a ``-g`` object is mostly DWARF,
        which nothing loads: reading it all cost a cold process ~0.4 ms for
        an object built with a ``vmlinux.h``); :attr:`data` and the debug
        sections' bytes are then read from the file when first asked for,
        refused if it changed since."""
        if data is not None:
            return cls(data, path, bpf=bpf)
        try:
            with open(path, "rb") as fh:
                st = os.fstat(fh.fileno())
                mapped = _mapped(fh) if st.st_size >= _MAP_FROM else None
                if mapped is None:
                    return cls(fh.read(), path, bpf=bpf)
        except OSError as exc:
            raise ObjectError(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            elf = cls(mapped, path, bpf=bpf)
            later = _Later(elf)
            for sec in elf.sections:
                if sec._data is None and sec.type != SHT_NOBITS:
                    if sec.name.startswith(_LATER):
                        sec._file = later            # type: ignore[assignment]
                    else:
                        sec._data = mapped[sec._offset:sec._offset + sec.size]
                        sec._file = b""
        finally:
            mapped.close()
        elf._data = None
        elf._stat = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)
        return elf

    def __init__(self, data: bytes, path: str = "<bytes>", *, bpf: bool = True) -> None:
        """Parse ``data`` (``path`` names it in messages).  With ``bpf`` (the
        default) an object of another machine or ELF type is refused; without,
        any 64-bit little-endian ELF file is read, checked as strictly (the
        disassembler lists a section of any such file): :attr:`is_bpf` tells."""
        self.path = path
        self._data: bytes | None = data
        #: (size, mtime, inode, device) of the file read again for ``data`` (see read)
        self._stat: tuple[int, int, int, int] | None = None
        if len(data) < _EHDR.size or data[:4] != b"\x7fELF":
            raise ObjectFileError(f"{path}: not an ELF file")
        if data[4] != 2 or data[5] != 1:
            raise ObjectFileError(f"{path}: not a 64-bit little-endian ELF object "
                                  "(build it with clang -target bpf)")
        (_, e_type, machine, _, _, _, shoff, _, _, _, _, shentsize, shnum,
         shstrndx) = _EHDR.unpack_from(data, 0)
        #: a relocatable BPF object (ELF machine 247, type ET_REL)
        self.is_bpf = machine == EM_BPF and e_type == 1
        if bpf and machine != EM_BPF:
            raise ObjectFileError(f"{path}: ELF machine {machine} is not BPF (247); "
                                  "build it with clang -target bpf")
        if bpf and e_type != 1:
            raise ObjectFileError(f"{path}: not a relocatable object (ELF type {e_type})")
        if shentsize != _SHDR.size or shoff + shnum * shentsize > len(data):
            raise ObjectFileError(f"{path}: the section table runs past the end of the file")
        raw = [_SHDR.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
        if shstrndx >= shnum:
            raise ObjectFileError(f"{path}: section-name table index {shstrndx} out of range")
        names = self._bytes(raw[shstrndx])
        self.sections: list[ObjSection] = []
        for i, (name, typ, flags, _, off, size, link, info, _, _) in enumerate(raw):
            if typ == SHT_NOBITS and size > _NOBITS_MAX:
                raise ObjectFileError(f"{path}: section {i} claims {size} bytes of zeros "
                                      f"(at most {_NOBITS_MAX} make sense in a BPF object)")
            sname = _cstr(names, name)
            if typ != SHT_NOBITS and off + size > len(data):
                raise ObjectFileError(f"{path}: section {i} ({sname or 'unnamed'}) runs past the "
                                      f"end of the file (bytes {off} to {off + size} of "
                                      f"{len(data)}: is it truncated?)")
            self.sections.append(ObjSection(i, sname, typ, flags, size, None, link, info,
                                            data, off))
        self.symbols: list[ObjSymbol] = []
        for sec in self.sections:
            if sec.type == SHT_SYMTAB:
                self._read_symbols(sec)
                break
        nsyms = len(self.symbols)
        for sec in self.sections:
            if sec.type != SHT_REL or sec.info >= len(self.sections):
                continue
            target = self.sections[sec.info]
            if not target.flags & SHF_ALLOC:
                continue            # debug info, .BTF: nothing the loader patches
            body = sec.data[:len(sec.data) - len(sec.data) % _REL.size]
            for r_off, r_info in _REL.iter_unpack(body):
                symi = r_info >> 32
                if symi >= nsyms:
                    raise ObjectFileError(f"{path}: relocation in {sec.name} names "
                                          f"symbol {symi} of {nsyms}")
                target.relocs[r_off] = symi

    @property
    def data(self) -> bytes:
        """The file's bytes (read from the file when first asked for after a
        mapped :meth:`read`; :class:`ObjectError` if it changed since)."""
        if self._data is None:
            try:
                with open(self.path, "rb") as fh:
                    st = os.fstat(fh.fileno())
                    if (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev) != self._stat:
                        raise ObjectError(f"{self.path} changed since it was opened")
                    self._data = fh.read()
            except OSError as exc:
                raise ObjectError(f"cannot read {self.path} again: "
                                  f"{exc.strerror or exc}") from None
        return self._data

    def _bytes(self, hdr: tuple) -> bytes:  # type: ignore[type-arg]
        off, size = hdr[4], hdr[5]
        if off + size > len(self.data):
            raise ObjectFileError(f"{self.path}: the section-name table runs past the end of "
                                  f"the file (bytes {off} to {off + size} of {len(self.data)})")
        return self.data[off:off + size]

    def _read_symbols(self, symtab: ObjSection) -> None:
        if symtab.link >= len(self.sections):
            raise ObjectFileError(f"{self.path}: the symbol table's string table is missing")
        strs = self.sections[symtab.link].data
        d = symtab.data
        for i, off in enumerate(range(0, len(d) - _SYM.size + 1, _SYM.size)):
            name, info, other, shndx, value, size = _SYM.unpack_from(d, off)
            sname = _cstr(strs, name)
            if info & 0xF == STT_SECTION and shndx < len(self.sections):
                sname = self.sections[shndx].name
            self.symbols.append(ObjSymbol(i, sname, value, size, info & 0xF, info >> 4, shndx,
                                          other & 3))

    def section(self, name: str) -> ObjSection | None:
        """The section called ``name``, or None."""
        for sec in self.sections:
            if sec.name == name:
                return sec
        return None
