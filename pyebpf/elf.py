"""ELF symbols and addresses for probes and stack symbolization (pure: no kernel).

What it answers
---------------
* **name → file offset**, which is what the kernel's uprobes want::

      elf = open_elf("/lib/x86_64-linux-gnu/libc.so.6")
      loc = elf.resolve("malloc")              # or "malloc@@GLIBC_2.2.5", "malloc+4", "0x9a0c0"
      loc.file_offset, loc.address, loc.symbol

  Names are looked up in ``.dynsym`` and ``.symtab``.  Versioned names work
  like the dynamic linker's: ``name@@VER`` is the default version,
  ``name@VER`` any version called VER, and a plain ``name`` matches an
  unversioned or default-versioned symbol.  ``symbol+offset`` must land on an
  instruction boundary of that function (checked by disassembling it from its
  start with capstone, x86-64/i386; fixed-width ISAs are checked by
  alignment).  A string holding only a number (``"0x401136"``) is an ELF
  virtual address, as ``nm``/``objdump`` print it.
* **instruction starts without symbols**: an address or file offset that no
  function symbol covers (a stripped binary, the PLT, code between symbols)
  is checked by disassembling from the nearest instruction start known
  without symbols -- a function start in ``.eh_frame`` (which ``strip``
  keeps; :func:`parse_eh_frame`), the entry point, an executable section's
  start -- and refused with :class:`InstructionBoundaryError` unless it
  starts one of the instructions decoded (see
  :meth:`ElfFile.check_instruction_address`).  ``check_boundary=False``
  (``unsafe=True`` in :mod:`pyebpf.attach`) skips every such check.
* **virtual address ↔ file offset** through the PT_LOAD segment that holds the
  address (correct for PIE and non-PIE files and for layouts where a
  segment's ``p_vaddr`` differs from its ``p_offset``).
* **address → symbol** (``elf.symbolize(vaddr)``): a sorted table and bisect.
* **library names like bpftrace**: :func:`resolve_library` turns ``"libc"``,
  ``"libc.so.6"`` or ``"c"`` into the path the dynamic linker would load
  (``/etc/ld.so.cache``, else a scan of the standard directories); names of
  programs are looked up on ``$PATH``; a path with a ``/`` is used as is.
* **a process's modules** (:func:`process_modules`) from ``/proc/PID/maps``,
  with paths reachable from here (``/proc/PID/root/...`` when the process
  lives in another mount namespace, i.e. a container).

Files are parsed once and cached per path, inode, size and mtime
(:func:`open_elf`); nothing keeps a file descriptor open between calls.
Headers of 64-bit little-endian files (every file on x86-64/arm64 hosts) are
read with :mod:`struct`, so the common path never imports pyelftools (~30 ms);
other classes, byte orders and unusual layouts go through pyelftools, imported
only then.  The symbol tables themselves are always unpacked with
:mod:`struct` (about 100x faster than per-symbol pyelftools objects, which
matters for binaries with 100k symbols).
"""
from __future__ import annotations

import bisect
import functools
import os
import struct
from _thread import allocate_lock as _allocate_lock

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Sequence

from .errors import PyebpfError, close_matches as _close_matches
from ._record import Record, record

__all__ = [
    "ElfError", "SymbolNotFoundError", "AmbiguousSymbolError", "InstructionBoundaryError",
    "LibraryNotFoundError", "Symbol", "Segment", "Location", "ElfFile", "open_elf",
    "parse_location", "parse_eh_frame", "resolve_library", "ld_so_cache", "library_search_dirs",
    "MapEntry", "Module", "process_maps", "process_modules",
    "STT_NOTYPE", "STT_OBJECT", "STT_FUNC", "STT_GNU_IFUNC",
    "STB_LOCAL", "STB_GLOBAL", "STB_WEAK",
]


# ------------------------------------------------------------------- errors
class ElfError(PyebpfError, ValueError):
    """A file is not a usable ELF file, or an address/offset is not in it."""


class SymbolNotFoundError(ElfError, LookupError):
    """No symbol has the name asked for.

    Attributes: ``name`` (as asked), ``path``, ``close_matches`` (the names
    most like it) and ``symbol_count`` (how many names the file has).
    """

    def __init__(self, message: str, name: str = "", path: str = "",
                 close_matches: Sequence[str] = (), symbol_count: int = 0):
        super().__init__(message)
        self.name = name
        self.path = path
        self.close_matches = list(close_matches)
        self.symbol_count = symbol_count


class AmbiguousSymbolError(ElfError):
    """Several symbols of the same name live at different addresses.

    ``candidates`` lists them; pick one by version (``name@@VER``) or by address.
    """

    def __init__(self, message: str, candidates: Sequence["Symbol"] = ()):
        super().__init__(message)
        self.candidates = list(candidates)


class InstructionBoundaryError(ElfError):
    """A probe address is not (or cannot be proven to be) the first byte of an
    instruction; a uprobe there could corrupt the traced program.

    ``boundaries`` holds instruction starts near it: offsets from the function
    start when a symbol covers the address, else virtual addresses.
    """

    def __init__(self, message: str, boundaries: Sequence[int] = ()):
        super().__init__(message)
        self.boundaries = list(boundaries)


class LibraryNotFoundError(PyebpfError, FileNotFoundError):
    """A library or program name could not be resolved to a file."""

    def __init__(self, message: str, name: str = "", close_matches: Sequence[str] = ()):
        FileNotFoundError.__init__(self, 2, message)
        self.name = name
        self.close_matches = list(close_matches)

    def __str__(self) -> str:
        return self.strerror or ""


# ------------------------------------------------------------------ constants
STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE, STT_COMMON, STT_TLS = range(7)
STT_GNU_IFUNC = 10
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
STB_GNU_UNIQUE = 10
SHN_UNDEF, SHN_ABS, SHN_COMMON = 0, 0xFFF1, 0xFFF2
PF_X, PF_W, PF_R = 1, 2, 4
VERSYM_HIDDEN = 0x8000
_SHF_EXECINSTR = 0x4
#: ISAs whose instructions all have one width (or a multiple of it): the
#: alignment proves a boundary
_FIXED_WIDTH = {"EM_AARCH64": 4, "EM_PPC64": 4, "EM_MIPS": 4, "EM_S390": 2, "EM_RISCV": 2,
                "EM_ARM": 2, "EM_LOONGARCH": 4}
#: ISAs decoded with capstone to find instruction starts
_VARIABLE_WIDTH = ("EM_X86_64", "EM_386")
#: the farthest a linear disassembly goes from a known instruction start
_MAX_SWEEP = 1 << 20
_UNSAFE_HINT = (". To attach there anyway, pass unsafe=True (Python) or --unsafe (command "
                "line)")

_TYPE_NAMES = {STT_NOTYPE: "NOTYPE", STT_OBJECT: "OBJECT", STT_FUNC: "FUNC",
               STT_GNU_IFUNC: "IFUNC"}
_BIND_NAMES = {STB_LOCAL: "LOCAL", STB_GLOBAL: "GLOBAL", STB_WEAK: "WEAK",
               STB_GNU_UNIQUE: "UNIQUE"}
_KEPT_TYPES = (STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_GNU_IFUNC)
# binding preference when one name has several addresses: global > weak > local
_BIND_RANK = {STB_GLOBAL: 0, STB_GNU_UNIQUE: 0, STB_WEAK: 1, STB_LOCAL: 2}


# -------------------------------------------------------------------- records
@record
class Symbol(Record):
    """One defined symbol.

    ``address`` is ``st_value``, the ELF virtual address (relative to the
    load base for PIE executables and shared libraries).  ``version`` is the
    symbol version (``"GLIBC_2.2.5"``) or None; ``default`` tells ``@@``
    (the version a plain name binds to) from ``@`` (hidden, old ABI).
    ``table`` is ``".dynsym"`` or ``".symtab"``.
    """

    name: str
    address: int
    size: int
    type: int
    bind: int
    version: str | None = None
    default: bool = True
    table: str = ".symtab"

    @property
    def versioned_name(self) -> str:
        """``name@@VER``, ``name@VER`` or ``name``."""
        if self.version is None:
            return self.name
        return f"{self.name}{'@@' if self.default else '@'}{self.version}"

    @property
    def is_function(self) -> bool:
        """A function (FUNC or GNU IFUNC)."""
        return self.type in (STT_FUNC, STT_GNU_IFUNC)

    @property
    def type_name(self) -> str:
        """``STT_FUNC``, ``STT_OBJECT``..., or the number when unknown."""
        return _TYPE_NAMES.get(self.type, str(self.type))

    @property
    def bind_name(self) -> str:
        """``STB_GLOBAL``, ``STB_WEAK``..., or the number when unknown."""
        return _BIND_NAMES.get(self.bind, str(self.bind))

    def __str__(self) -> str:
        return (f"{self.versioned_name} at {self.address:#x} (size {self.size}, "
                f"{self.bind_name} {self.type_name}, {self.table})")


@record
class Segment(Record):
    """A PT_LOAD program header."""

    vaddr: int
    memsz: int
    offset: int
    filesz: int
    flags: int
    align: int = 0

    @property
    def executable(self) -> bool:
        """The segment is mapped executable (``PF_X``)."""
        return bool(self.flags & PF_X)

    @property
    def writable(self) -> bool:
        """The segment is mapped writable (``PF_W``)."""
        return bool(self.flags & PF_W)

    def has_address(self, vaddr: int) -> bool:
        """Is ``vaddr`` backed by the file in this segment (not .bss)?"""
        return self.vaddr <= vaddr < self.vaddr + self.filesz

    def has_offset(self, offset: int) -> bool:
        """Is file offset ``offset`` inside this segment's bytes in the file?"""
        return self.offset <= offset < self.offset + self.filesz

    def __str__(self) -> str:
        perms = ("R" if self.flags & PF_R else "-") + ("W" if self.flags & PF_W else "-") \
            + ("X" if self.flags & PF_X else "-")
        return (f"LOAD vaddr {self.vaddr:#x}-{self.vaddr + self.memsz:#x} "
                f"offset {self.offset:#x} filesz {self.filesz:#x} {perms}")


@record
class Location(Record):
    """A resolved probe point in a file.

    ``file_offset`` is what the kernel needs; ``address`` the ELF virtual
    address; ``symbol``/``symbol_offset`` say which function it is in (None
    when the address is not inside a known symbol).
    """

    path: str
    file_offset: int
    address: int
    symbol: Symbol | None = None
    symbol_offset: int = 0

    @property
    def name(self) -> str:
        """``sym``, ``sym+0x4`` or ``0xADDR``."""
        if self.symbol is None:
            return f"{self.address:#x}"
        base = self.symbol.versioned_name
        return f"{base}+{self.symbol_offset:#x}" if self.symbol_offset else base

    def __str__(self) -> str:
        return f"{self.path}:{self.name} (file offset {self.file_offset:#x})"


# ------------------------------------------------------------ location specs
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _number(text: str) -> int | None:
    """``0x1f`` (any case) or ``123`` -> the int; anything else -> None."""
    if text[:2] in ("0x", "0X"):
        digits = text[2:]
        return int(digits, 16) if digits and _HEX_DIGITS.issuperset(digits) else None
    return int(text) if text.isascii() and text.isdigit() else None


@record
class _Spec(Record):
    name: str | None
    version: str | None
    default_only: bool
    offset: int
    address: int | None


def parse_location(spec: "str | int") -> _Spec:
    """Split ``"name[@[@]VER][+off]"`` or a numeric address.

    Returns ``(name, version, default_only, offset, address)``: ``address`` is
    set (and ``name`` None) for a number or a numeric string.
    """
    if isinstance(spec, int):
        return _Spec(None, None, False, 0, spec)
    text = spec.strip()
    if not text:
        raise ElfError("empty probe location")
    address = _number(text)
    if address is not None:
        return _Spec(None, None, False, 0, address)
    name, version, at, off = text, None, "", 0
    head, plus, tail = name.rpartition("+")
    tail_off = _number(tail) if plus else None
    if tail_off is not None:
        name, off = head, tail_off
    if "@" in name:
        head, sep, ver = name.partition("@")
        if ver.startswith("@"):
            at, ver = "@@", ver[1:]
        else:
            at = "@"
        if not head or not ver:
            raise ElfError(f"bad symbol {spec!r}: expected name, name@VERSION or "
                           "name@@VERSION")
        name, version = head, ver
    if not name:
        raise ElfError(f"bad probe location {spec!r}")
    return _Spec(name, version, at == "@@", off, None)


# ---------------------------------------------------------------- ELF files
def _read_at(path: str, offset: int, size: int, what: str | None = None) -> bytes:
    """``size`` bytes of ``path`` at ``offset``.

    With ``what`` (a name for the error) every byte must be in the file, else
    :class:`ElfError`; without it the read stops at the end of the file.
    Nothing is allocated for sizes the file cannot hold.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fsize = os.fstat(fd).st_size
        if offset < 0 or size < 0 or offset + size > fsize:
            if what is not None or offset < 0 or size < 0:
                raise ElfError(f"{path}: {what or 'a read'} (file offset {offset:#x}, "
                               f"{size:#x} bytes) is not inside the file ({fsize:#x} bytes)")
            size = max(0, fsize - offset)
        out = bytearray()
        while len(out) < size:
            chunk = os.pread(fd, size - len(out), offset + len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)
    finally:
        os.close(fd)


@record
class _Section(Record):
    name: str
    type: str
    addr: int
    offset: int
    size: int
    link: int
    entsize: int
    flags: int


# The struct fast path (64-bit little-endian): header layouts and the names
# pyelftools gives e_type, e_machine and sh_type (unknown numbers -> str(n)).
_EHDR64 = struct.Struct("<HHIQQQIHHHHHH")       # after the 16 bytes of e_ident
_PHDR64 = struct.Struct("<IIQQQQQQ")
_SHDR64 = struct.Struct("<IIQQQQIIQQ")
_E_TYPES = {0: "ET_NONE", 1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE",
            0xFF00: "ET_LOPROC", 0xFFFF: "ET_HIPROC"}
_FAST_MACHINES = {62: "EM_X86_64", 183: "EM_AARCH64", 243: "EM_RISCV", 21: "EM_PPC64",
                  258: "EM_LOONGARCH"}
_SH_TYPES = {
    0: "SHT_NULL", 1: "SHT_PROGBITS", 2: "SHT_SYMTAB", 3: "SHT_STRTAB", 4: "SHT_RELA",
    5: "SHT_HASH", 6: "SHT_DYNAMIC", 7: "SHT_NOTE", 8: "SHT_NOBITS", 9: "SHT_REL",
    10: "SHT_SHLIB", 11: "SHT_DYNSYM", 14: "SHT_INIT_ARRAY", 15: "SHT_FINI_ARRAY",
    16: "SHT_PREINIT_ARRAY", 17: "SHT_GROUP", 18: "SHT_SYMTAB_SHNDX", 19: "SHT_RELR",
    20: "SHT_NUM", 0x60000000: "SHT_LOOS", 0x6FFFFFF3: "SHT_SUNW_LDYNSYM",
    0x6FFFFFF5: "SHT_GNU_ATTRIBUTES", 0x6FFFFFF6: "SHT_GNU_HASH",
    0x6FFFFFF7: "SHT_GNU_LIBLIST", 0x6FFFFFFC: "SHT_SUNW_syminfo",
    0x6FFFFFFD: "SHT_GNU_verdef", 0x6FFFFFFE: "SHT_GNU_verneed",
    0x6FFFFFFF: "SHT_GNU_versym", 0x80000000: "SHT_LOUSER", 0xFFFFFFFF: "SHT_HIUSER",
}
_SH_TYPES_BY_MACHINE = {
    62: {**_SH_TYPES, 0x70000001: "SHT_AMD64_UNWIND"},
    183: {**_SH_TYPES, 0x70000003: "SHT_AARCH64_ATTRIBUTES"},
    243: {**_SH_TYPES, 0x70000003: "SHT_RISCV_ATTRIBUTES"},
}


class ElfFile:
    """One ELF file: headers, symbols, address maps.  Use :func:`open_elf`.

    Attributes: ``path``, ``type`` (``"ET_EXEC"``/``"ET_DYN"``), ``machine``
    (``"EM_X86_64"``...), ``elfclass`` (32/64), ``little_endian``,
    ``segments`` (PT_LOAD only), ``sections``.

    A damaged file gives :class:`ElfError` from the constructor or from the
    reader that meets the damage (an offset, size or count that does not fit
    in the file), never another exception.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        if not self._parse_fast(path):
            self._parse_pyelftools(path)
        self._lock = _allocate_lock()
        self._symbols: list[Symbol] | None = None
        self._by_name: dict[str, list[Symbol]] | None = None
        self._sorted: tuple[list[int], list[Symbol]] | None = None
        self._boundaries: dict[int, list[int] | None] = {}
        self._eh_frame: list[tuple[int, int]] | None = None
        self._known: tuple[list[int], dict[int, str]] | None = None
        self._sweeps: dict[tuple[int, int], tuple[list[int], int]] = {}
        self._build_id: bytes | None | bool = False

    def _parse_fast(self, path: str) -> bool:
        """Headers of a well-formed 64-bit little-endian ELF file with :mod:`struct`.

        Returns False (having set nothing) for anything else -- another class
        or byte order, a machine without a name table here, extended section
        or segment counts, tables outside the file, names outside the section
        name table -- and :meth:`_parse_pyelftools` then handles (or rejects)
        the file exactly as before.  The values are the ones pyelftools gives.
        """
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except IsADirectoryError:
            return False
        try:
            try:
                fsize = os.fstat(fd).st_size
                ehdr = os.pread(fd, 64, 0)
                if len(ehdr) < 64 or ehdr[:4] != b"\x7fELF" or ehdr[4] != 2 or ehdr[5] != 1:
                    return False
                (e_type, e_machine, _version, e_entry, e_phoff, e_shoff, _flags, _ehsize,
                 e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx) = \
                    _EHDR64.unpack_from(ehdr, 16)
                machine = _FAST_MACHINES.get(e_machine)
                if machine is None or e_phnum >= 0xFFFF or e_shoff == 0 or e_shnum == 0 \
                        or not 0 < e_shstrndx < min(e_shnum, 0xFF00) \
                        or (e_phnum and e_phentsize != _PHDR64.size) \
                        or e_shentsize != _SHDR64.size \
                        or e_phoff + e_phnum * _PHDR64.size > fsize \
                        or e_shoff + e_shnum * _SHDR64.size > fsize:
                    return False
                segments = []
                if e_phnum:
                    raw = os.pread(fd, e_phnum * _PHDR64.size, e_phoff)
                    if len(raw) != e_phnum * _PHDR64.size:
                        return False
                    for (p_type, p_flags, p_offset, p_vaddr, _paddr, p_filesz, p_memsz,
                         p_align) in _PHDR64.iter_unpack(raw):
                        if p_type == 1:     # PT_LOAD
                            segments.append(Segment(p_vaddr, p_memsz, p_offset, p_filesz,
                                                    p_flags, p_align))
                raw = os.pread(fd, e_shnum * _SHDR64.size, e_shoff)
                if len(raw) != e_shnum * _SHDR64.size:
                    return False
                shdrs = list(_SHDR64.iter_unpack(raw))
                str_hdr = shdrs[e_shstrndx]
                if str_hdr[1] != 3 or str_hdr[4] + str_hdr[5] > fsize:     # SHT_STRTAB
                    return False
                names = os.pread(fd, str_hdr[5], str_hdr[4])
                if len(names) != str_hdr[5]:
                    return False
            finally:
                os.close(fd)
        except OSError:
            return False
        types = _SH_TYPES_BY_MACHINE.get(e_machine, _SH_TYPES)
        sections = []
        for (sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, _info,
             _addralign, sh_entsize) in shdrs:
            end = names.find(b"\0", sh_name)
            if end < 0:
                return False
            name = names[sh_name:end].decode("utf-8", "replace")
            sections.append(_Section(name, types.get(sh_type) or str(sh_type), sh_addr,
                                     sh_offset, sh_size, sh_link, sh_entsize, sh_flags))
        self.type = _E_TYPES.get(e_type) or str(e_type)
        self.machine = machine
        self.elfclass = 64
        self.little_endian = True
        self.entry = e_entry
        self.segments: tuple[Segment, ...] = tuple(segments)
        self.sections: tuple[_Section, ...] = tuple(sections)
        return True

    def _parse_pyelftools(self, path: str) -> None:
        """Headers of any ELF file (32-bit, big-endian, unusual layouts) with pyelftools."""
        from elftools.common.exceptions import ELFError as _PyElfError
        from elftools.elf.elffile import ELFFile

        try:
            fh = open(path, "rb")
        except IsADirectoryError:
            raise ElfError(f"{path} is a directory, not an ELF file") from None
        with fh:
            try:
                ef = ELFFile(fh)
                hdr = ef.header
                self.type = str(hdr.e_type)
                self.machine = str(hdr.e_machine)
                self.elfclass = ef.elfclass
                self.little_endian = ef.little_endian
                self.entry = hdr.e_entry
                self.segments = tuple(
                    Segment(s.header.p_vaddr, s.header.p_memsz, s.header.p_offset,
                            s.header.p_filesz, s.header.p_flags, s.header.p_align)
                    for s in ef.iter_segments() if s.header.p_type == "PT_LOAD")
                self.sections = tuple(
                    _Section(s.name, str(s.header.sh_type), s.header.sh_addr,
                             s.header.sh_offset, s.header.sh_size, s.header.sh_link,
                             s.header.sh_entsize, s.header.sh_flags)
                    for s in ef.iter_sections())
            except _PyElfError as exc:
                raise ElfError(f"{path} is not an ELF file ({exc})") from None
            except Exception as exc:  # noqa: BLE001 - pyelftools' many errors on bad input
                # (struct, construct, seek errors on offsets past the largest file ...)
                raise ElfError(f"{path}: malformed ELF file ({type(exc).__name__}: {exc})") \
                    from None

    def __repr__(self) -> str:
        return f"<ElfFile {self.path} {self.type} {self.machine}>"

    # -- kind
    @property
    def is_shared(self) -> bool:
        """ET_DYN: a shared library or a PIE executable (addresses are relative)."""
        return self.type == "ET_DYN"

    @property
    def build_id(self) -> bytes | None:
        """The GNU build id (``.note.gnu.build-id``), or None when the file has none.

        Raises :class:`ElfError` when that note is malformed (shorter than its
        header, or its fields run past the section).
        """
        if self._build_id is False:
            bid = None
            sec = self.section(".note.gnu.build-id")
            if sec is not None and sec.type != "SHT_NOBITS":
                data = self.section_data(sec)
                e = "<" if self.little_endian else ">"
                if len(data) < 12:
                    raise ElfError(f"{self.path}: the .note.gnu.build-id section is "
                                   f"{len(data)} bytes, shorter than a note header")
                namesz, descsz, ntype = struct.unpack_from(e + "III", data)
                start = 12 + ((namesz + 3) & ~3)
                if start + descsz > len(data):
                    raise ElfError(f"{self.path}: the build-id note (name {namesz} bytes, "
                                   f"id {descsz} bytes) runs past its section "
                                   f"({len(data)} bytes)")
                if ntype == 3:                  # NT_GNU_BUILD_ID
                    bid = data[start:start + descsz] or None
            self._build_id = bid
        return self._build_id  # type: ignore[return-value]

    def section(self, name: str) -> _Section | None:
        """The first section called ``name``, or None."""
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def section_data(self, sec: _Section) -> bytes:
        """The bytes of a section (empty for SHT_NOBITS).

        Raises :class:`ElfError` when the section header puts them (partly)
        outside the file.
        """
        if sec.type == "SHT_NOBITS":
            return b""
        return _read_at(self.path, sec.offset, sec.size, f"section {sec.name or '(unnamed)'}")

    # -- address <-> offset
    def segment_for_address(self, vaddr: int) -> Segment | None:
        """The PT_LOAD segment whose file-backed part holds ``vaddr``."""
        for seg in self.segments:
            if seg.has_address(vaddr):
                return seg
        return None

    def address_to_offset(self, vaddr: int) -> int:
        """ELF virtual address → file offset (``vaddr - p_vaddr + p_offset``)."""
        seg = self.segment_for_address(vaddr)
        if seg is None:
            where = "; ".join(str(s) for s in self.segments) or "no PT_LOAD segments"
            for s in self.segments:
                if s.vaddr <= vaddr < s.vaddr + s.memsz:
                    raise ElfError(f"address {vaddr:#x} of {self.path} is in the zero-filled "
                                   f"(.bss) part of a segment and has no file offset")
            raise ElfError(f"address {vaddr:#x} is not in any loadable segment of "
                           f"{self.path} ({where})")
        return vaddr - seg.vaddr + seg.offset

    def offset_to_address(self, offset: int, *, executable: bool | None = None) -> int:
        """File offset → ELF virtual address.

        When segments share file bytes, an executable one is preferred if
        ``executable`` is True (or a non-executable one if False).
        """
        found = [s for s in self.segments if s.has_offset(offset)]
        if not found:
            raise ElfError(f"file offset {offset:#x} is not in any loadable segment of "
                           f"{self.path}")
        if executable is not None and len(found) > 1:
            found.sort(key=lambda s: s.executable != executable)
        seg = found[0]
        return offset - seg.offset + seg.vaddr

    def read(self, vaddr: int, size: int) -> bytes:
        """``size`` bytes of the file at virtual address ``vaddr`` (fewer when the
        file ends first).  Raises :class:`ElfError` for an address no segment
        maps from the file, or a negative size."""
        return _read_at(self.path, self.address_to_offset(vaddr), size)

    # -- symbols
    def symbols(self) -> list[Symbol]:
        """Every defined FUNC/IFUNC/OBJECT/NOTYPE symbol, ``.dynsym`` first.

        A symbol present in both tables at the same address appears once
        (with its ``.dynsym`` version information).
        """
        if self._symbols is None:
            with self._lock:
                if self._symbols is None:
                    self._symbols = self._load_symbols()
        return self._symbols

    def _version_names(self) -> dict[int, tuple[str, bool]]:
        """Version index → name, from ``.gnu.version_d`` (versions this file
        defines) and ``.gnu.version_r`` (versions it needs, which name the
        copy-relocated data symbols such as ``stdout@GLIBC_2.2.5``)."""
        e = "<" if self.little_endian else ">"
        names: dict[int, tuple[str, bool]] = {}     # index -> (name, defined here)
        for sec in self.sections:
            if sec.type not in ("SHT_GNU_verdef", "SHT_GNU_verneed") or \
                    sec.link >= len(self.sections):
                continue
            data = self.section_data(sec)
            strtab = self.section_data(self.sections[sec.link])
            pos = 0
            for _ in range(0x10000):
                if pos + 16 > len(data):
                    break
                if sec.type == "SHT_GNU_verdef":
                    if pos + 20 > len(data):
                        break
                    _v, _flags, ndx, cnt, _hash, aux, nxt = struct.unpack_from(e + "HHHHIII",
                                                                               data, pos)
                    if cnt and pos + aux + 8 <= len(data):
                        names[ndx] = (_cstr(strtab, struct.unpack_from(e + "I", data,
                                                                       pos + aux)[0]), True)
                else:
                    _v, cnt, _file, aux, nxt = struct.unpack_from(e + "HHIII", data, pos)
                    apos = pos + aux
                    for _k in range(cnt):
                        if apos + 16 > len(data):
                            break
                        _hash, _flags, other, name_off, anext = struct.unpack_from(
                            e + "IHHII", data, apos)
                        names.setdefault(other, (_cstr(strtab, name_off), False))
                        if not anext:
                            break
                        apos += anext
                if not nxt:
                    break
                pos += nxt
        return names

    def _load_symbols(self) -> list[Symbol]:
        e = "<" if self.little_endian else ">"
        is64 = self.elfclass == 64
        fmt = struct.Struct(e + ("IBBHQQ" if is64 else "IIIBBH"))
        out: list[Symbol] = []
        seen: set[tuple[str, int]] = set()
        tables = [s for s in self.sections if s.type == "SHT_DYNSYM"] + \
                 [s for s in self.sections if s.type == "SHT_SYMTAB"]
        for sec in tables:
            if sec.link >= len(self.sections) or sec.size == 0:
                continue
            data = self.section_data(sec)
            strtab = self.section_data(self.sections[sec.link])
            entsize = sec.entsize or fmt.size
            if entsize < fmt.size:
                raise ElfError(f"{self.path}: the symbol table {sec.name or '(unnamed)'} has "
                               f"entries of {entsize} bytes; an ELF{self.elfclass} symbol "
                               f"takes {fmt.size}")
            count = len(data) // entsize
            versym = None
            vernames: dict[int, tuple[str, bool]] = {}
            if sec.type == "SHT_DYNSYM":
                vs = next((s for s in self.sections if s.type == "SHT_GNU_versym"), None)
                if vs is not None:
                    raw = self.section_data(vs)
                    versym = struct.unpack(f"{e}{len(raw) // 2}H", raw[:len(raw) // 2 * 2])
                    vernames = self._version_names()
            table = sec.name or (".dynsym" if sec.type == "SHT_DYNSYM" else ".symtab")
            if entsize == fmt.size:
                records: Iterable[tuple[Any, ...]] = fmt.iter_unpack(data[:count * entsize])
            else:
                records = (fmt.unpack_from(data, i * entsize) for i in range(count))
            for i, rec in enumerate(records):
                if is64:
                    name_off, info, _other, shndx, value, size = rec
                else:
                    name_off, value, size, info, _other, shndx = rec
                stype = info & 0xF
                if stype not in _KEPT_TYPES or shndx == SHN_UNDEF or shndx == SHN_ABS \
                        or not name_off:
                    continue
                name = _cstr(strtab, name_off)
                if not name:
                    continue
                bind = info >> 4
                version, default = None, True
                if versym is not None and i < len(versym):
                    v = versym[i]
                    idx = v & 0x7FFF
                    if idx >= 2 and idx in vernames:
                        # a version this file only needs (a copy-relocated
                        # stdout@GLIBC_2.2.5) is never the file's default one
                        version, defined_here = vernames[idx]
                        default = defined_here and not (v & VERSYM_HIDDEN)
                elif "@" in name:
                    head, _, ver = name.partition("@")
                    if head:
                        default = ver.startswith("@")
                        version = ver[1:] if default else ver
                        name = head
                key = (name, value)
                if sec.type == "SHT_SYMTAB" and key in seen:
                    continue
                seen.add(key)
                out.append(Symbol(name, value, size, stype, bind, version, default, table))
        return out

    def _name_index(self) -> dict[str, list[Symbol]]:
        if self._by_name is None:
            idx: dict[str, list[Symbol]] = {}
            for s in self.symbols():
                idx.setdefault(s.name, []).append(s)
            self._by_name = idx
        return self._by_name

    def find_symbols(self, name: str) -> list[Symbol]:
        """Every symbol matching ``name``, ``name@VER`` or ``name@@VER`` (maybe none).

        A plain name matches unversioned and default-versioned (``@@``)
        symbols; only when none exist does it fall back to hidden versions.
        """
        spec = parse_location(name)
        if spec.name is None:
            return []
        cands = self._name_index().get(spec.name, [])
        if spec.version is not None:
            return [s for s in cands if s.version == spec.version
                    and (s.default or not spec.default_only)]
        visible = [s for s in cands if s.default]
        return visible or list(cands)

    def symbol(self, name: str, *, functions_only: bool = False) -> Symbol:
        """The one symbol called ``name`` (``name@VER`` / ``name@@VER`` allowed).

        Raises :class:`SymbolNotFoundError` (with close matches and the number
        of symbols) or :class:`AmbiguousSymbolError`.  Aliases at the same
        address count as one; among different addresses a GLOBAL symbol wins
        over WEAK, and WEAK over LOCAL (as libbpf does).
        """
        cands = self.find_symbols(name)
        if functions_only:
            funcs = [s for s in cands if s.is_function or s.type == STT_NOTYPE]
            if cands and not funcs:
                s = cands[0]
                raise ElfError(f"{s.versioned_name} in {self.path} is a {s.type_name} symbol "
                               "(data), not a function: it cannot be probed")
            cands = funcs
        if not cands:
            raise self._not_found(name)
        by_addr: dict[int, Symbol] = {}
        for s in cands:
            old = by_addr.get(s.address)
            if old is None or (s.is_function and not old.is_function) or \
                    (old.table == ".symtab" and s.table == ".dynsym"):
                by_addr[s.address] = s
        if len(by_addr) == 1:
            return next(iter(by_addr.values()))
        best = min(_BIND_RANK.get(s.bind, 3) for s in by_addr.values())
        top = [s for s in by_addr.values() if _BIND_RANK.get(s.bind, 3) == best]
        if len(top) == 1:
            return top[0]
        listing = "; ".join(f"{s.versioned_name} at {s.address:#x} ({s.bind_name}, "
                            f"{s.table})" for s in sorted(top, key=lambda s: s.address))
        raise AmbiguousSymbolError(
            f"{name!r} names {len(top)} different symbols in {self.path}: {listing}. "
            "Use name@VERSION / name@@VERSION, or give the address (\"0x...\")", top)

    def _not_found(self, name: str) -> SymbolNotFoundError:
        idx = self._name_index()
        spec = parse_location(name)
        base = spec.name or name
        if not idx:
            return SymbolNotFoundError(
                f"no symbol {name!r} in {self.path}: the file has no symbol table "
                "(stripped); give a file offset or an address instead",
                name, self.path, (), 0)
        if spec.version is not None and base in idx:
            versions = sorted({s.versioned_name for s in idx[base]})
            return SymbolNotFoundError(
                f"{base!r} in {self.path} has no version {spec.version!r}"
                f"{' as default (@@)' if spec.default_only else ''}; it has: "
                f"{', '.join(versions)}", name, self.path, versions, len(idx))
        names = list(idx)
        close = _close_matches(base, names, n=6, cutoff=0.6)
        if len(base) >= 3:
            close += sorted((n for n in names if base in n and n not in close),
                            key=len)[:max(0, 8 - len(close))]
        hint = f"; close matches: {', '.join(close)}" if close else "; no close matches"
        return SymbolNotFoundError(f"no symbol {name!r} in {self.path} "
                                   f"({len(names)} symbol names){hint}",
                                   name, self.path, close, len(names))

    # -- address -> symbol
    def _sorted_table(self) -> tuple[list[int], list[Symbol]]:
        if self._sorted is None:
            syms = [s for s in self.symbols() if s.address]
            # at one address prefer functions, sized, global, .dynsym
            syms.sort(key=lambda s: (s.address, not s.is_function, s.size == 0,
                                     _BIND_RANK.get(s.bind, 3), s.table != ".dynsym"))
            dedup: list[Symbol] = []
            for s in syms:
                if dedup and dedup[-1].address == s.address:
                    continue
                dedup.append(s)
            self._sorted = ([s.address for s in dedup], dedup)
        return self._sorted

    def symbolize(self, vaddr: int) -> tuple[Symbol, int] | None:
        """The symbol containing ELF virtual address ``vaddr`` and the offset in it.

        A sized symbol contains ``[address, address + size)``; a symbol of
        size 0 is taken to extend to the next symbol within its segment.
        """
        addrs, syms = self._sorted_table()
        i = bisect.bisect_right(addrs, vaddr) - 1
        # a sized symbol may be shadowed by a nested one at a higher address
        for j in range(i, max(i - 8, -1), -1):
            s = syms[j]
            if s.size and s.address <= vaddr < s.address + s.size:
                return s, vaddr - s.address
        if i >= 0:
            s = syms[i]
            if s.size == 0:
                nxt = addrs[i + 1] if i + 1 < len(addrs) else None
                seg = self.segment_for_address(s.address)
                if (nxt is None or vaddr < nxt) and seg is not None and seg.has_address(vaddr):
                    return s, vaddr - s.address
        return None

    def function_at(self, vaddr: int) -> tuple[Symbol, int] | None:
        """Like :meth:`symbolize`, but only functions."""
        hit = self.symbolize(vaddr)
        if hit is not None and (hit[0].is_function or hit[0].type == STT_NOTYPE):
            return hit
        return None

    # -- instruction boundaries
    def _decode(self, vaddr: int, size: int) -> tuple[list[int], int]:
        """Disassemble (x86) ``size`` bytes from ``vaddr`` in one linear sweep.

        Returns the addresses where instructions start and the address just
        past the last one decoded (capstone stops at bytes that are no
        instruction).  Never reads past the file-backed part of the segment.
        """
        seg = self.segment_for_address(vaddr)
        if seg is None:
            return [], vaddr
        code = self.read(vaddr, max(0, min(size, seg.vaddr + seg.filesz - vaddr)))
        import capstone
        mode = capstone.CS_MODE_64 if self.machine == "EM_X86_64" else capstone.CS_MODE_32
        starts: list[int] = []
        end = vaddr
        for addr, length, _m, _o in capstone.Cs(capstone.CS_ARCH_X86, mode).disasm_lite(code,
                                                                                       vaddr):
            starts.append(addr)
            end = addr + length
        return starts, end

    def instruction_boundaries(self, sym: Symbol, limit: int | None = None) -> list[int] | None:
        """Offsets (from the function start) where instructions begin.

        Disassembles x86-64/i386 code with capstone from the function's first
        byte, up to its size (or ``limit`` when the size is 0).  Returns None
        for architectures where every aligned offset is a boundary (see
        :meth:`check_instruction_boundary`) or that are not supported.
        """
        if self.machine not in _VARIABLE_WIDTH:
            return None
        cached = self._boundaries.get(sym.address)
        if cached is not None and (sym.size or (limit is not None and cached
                                                and cached[-1] >= limit)):
            return cached
        size = sym.size or max(limit or 0, 0) + 16
        starts = [a - sym.address for a in self._decode(sym.address, size)[0]]
        if sym.size:
            self._boundaries[sym.address] = starts
        return starts

    def check_instruction_boundary(self, sym: Symbol, offset: int) -> None:
        """Raise :class:`InstructionBoundaryError` unless ``sym+offset`` starts an
        instruction (x86: by disassembly; arm64/other fixed-width ISAs: by
        alignment)."""
        if offset == 0:
            return
        if sym.size and offset >= sym.size:
            raise InstructionBoundaryError(
                f"offset {offset:#x} is past the end of {sym.versioned_name} in {self.path} "
                f"(the function is {sym.size:#x} bytes long){_UNSAFE_HINT}")
        align = _FIXED_WIDTH.get(self.machine)
        if align is not None:
            if offset % align:
                raise InstructionBoundaryError(
                    f"{sym.versioned_name}+{offset:#x} in {self.path} is not a multiple of "
                    f"{align}, so it is not an instruction boundary on {self.machine}"
                    f"{_UNSAFE_HINT}")
            return
        starts = self.instruction_boundaries(sym, offset)
        if starts is None or offset in starts:
            return
        covered = starts[-1] if starts else 0
        if not starts or offset > covered + 15:
            raise InstructionBoundaryError(
                f"cannot check {sym.versioned_name}+{offset:#x} in {self.path}: capstone "
                f"stopped decoding at +{covered:#x} (data in code, or a symbol size that is "
                f"wrong); give the offset of a known instruction{_UNSAFE_HINT}", starts)
        k = bisect.bisect_left(starts, offset)
        near = starts[max(0, k - 3):k + 3]
        before = starts[k - 1] if k else 0
        raise InstructionBoundaryError(
            f"{sym.versioned_name}+{offset:#x} in {self.path} is in the middle of the "
            f"instruction that starts at +{before:#x}; a uprobe there would corrupt the "
            f"code. Instructions near it start at: {', '.join(f'+{x:#x}' for x in near)}"
            f"{_UNSAFE_HINT}", near)

    def eh_frame_functions(self) -> list[tuple[int, int]]:
        """``[(start, size), ...]`` of the functions ``.eh_frame`` describes.

        Every FDE of the unwind table gives a function's first address and
        length; :func:`strip` keeps ``.eh_frame`` (unwinding needs it), so
        this finds function starts that no symbol names.  Sorted; empty when
        the file has no ``.eh_frame``; parsed once.  Raises :class:`ElfError`
        for a malformed section.
        """
        if self._eh_frame is None:
            fdes: list[tuple[int, int]] = []
            sec = self.section(".eh_frame")
            if sec is not None and sec.type != "SHT_NOBITS" and sec.size:
                fdes = parse_eh_frame(self.section_data(sec), sec.addr,
                                      address_size=self.elfclass // 8,
                                      little_endian=self.little_endian)
            self._eh_frame = fdes
        return self._eh_frame

    def known_instruction_starts(self) -> dict[int, str]:
        """Addresses known to start an instruction without disassembling,
        each with where that is known from.

        They are: function symbols, function starts in ``.eh_frame``, the
        entry point and the starts of executable sections -- those inside an
        executable segment.  (A malformed ``.eh_frame`` adds nothing.)
        """
        if self._known is None:
            known: dict[int, str] = {}

            def add(addr: int, why: str) -> None:
                seg = self.segment_for_address(addr)
                if addr and seg is not None and seg.executable:
                    known.setdefault(addr, why)

            for sec in self.sections:
                if sec.flags & _SHF_EXECINSTR and sec.size and sec.type != "SHT_NOBITS":
                    add(sec.addr, f"the start of section {sec.name or '(unnamed)'}")
            add(self.entry, "the entry point")
            try:
                fdes = self.eh_frame_functions()
            except ElfError:
                fdes = []
            for start, _size in fdes:
                add(start, "a function start in .eh_frame")
            for sym in self.symbols():
                if sym.is_function:
                    add(sym.address, f"function {sym.versioned_name}")
            self._known = (sorted(known), known)
        return self._known[1]

    def _sweep_from(self, start: int, stop: int) -> tuple[list[int], int]:
        """:meth:`_decode` from a known instruction start up to ``stop`` (the
        next one, or the end of the segment), cached per start."""
        hit = self._sweeps.get((start, stop))
        if hit is None:
            hit = self._sweeps[(start, stop)] = self._decode(start, stop - start)
        return hit

    def check_instruction_address(self, vaddr: int) -> None:
        """Raise :class:`InstructionBoundaryError` unless ``vaddr`` provably
        starts an instruction.

        Inside a function symbol with a size this is
        :meth:`check_instruction_boundary`.  Elsewhere (a stripped binary, code
        between symbols, the PLT, a symbol without a size) the proof
        is a linear disassembly from the nearest :meth:`known_instruction_starts`
        at or below ``vaddr``: the address must start one of the instructions
        decoded.  Fixed-width ISAs need the address aligned; others cannot be
        checked and are refused.  The address must also be in an executable
        segment.
        """
        hit = self.function_at(vaddr)
        if hit is not None and (hit[0].size or not hit[1]):
            self.check_instruction_boundary(*hit)
            return
        # no symbol, or one of size 0 whose extent is a guess (``_init`` is
        # taken to run on into the PLT): disassemble from the nearest known start
        seg = self.segment_for_address(vaddr)
        if seg is None or not seg.executable:
            raise InstructionBoundaryError(
                f"{vaddr:#x} in {self.path} is not in executable code "
                f"({seg or 'in no loadable segment'}), so it cannot start an instruction; a "
                f"uprobe there would never fire, or would corrupt data{_UNSAFE_HINT}")
        align = _FIXED_WIDTH.get(self.machine)
        if align is not None:
            if vaddr % align:
                raise InstructionBoundaryError(
                    f"{vaddr:#x} in {self.path} is not a multiple of {align}, so it is not "
                    f"an instruction boundary on {self.machine}{_UNSAFE_HINT}")
            return
        if self.machine not in _VARIABLE_WIDTH:
            raise InstructionBoundaryError(
                f"cannot check that {vaddr:#x} in {self.path} starts an instruction: no "
                f"symbol covers it and {self.machine} code is not decoded here"
                f"{_UNSAFE_HINT}")
        self._check_by_sweep(vaddr, seg)

    def _check_by_sweep(self, vaddr: int, seg: Segment) -> None:
        why = self.known_instruction_starts()
        known = self._known[0]  # type: ignore[index]
        i = bisect.bisect_right(known, vaddr) - 1
        if i >= 0 and known[i] == vaddr:
            return
        seg_end = seg.vaddr + seg.filesz
        after = known[i + 1] if i + 1 < len(known) and known[i + 1] < seg_end else None
        if i < 0 or not seg.has_address(known[i]):
            raise InstructionBoundaryError(
                f"{vaddr:#x} in {self.path} cannot be proven to start an instruction: no "
                "symbol covers it and no known instruction start (function in .eh_frame, "
                "entry point, section start) precedes it in its segment"
                + (f"; the next known one is {after:#x}" if after is not None else "")
                + _UNSAFE_HINT, [a for a in (after,) if a is not None])
        start = known[i]
        stop = after if after is not None else seg_end
        if vaddr - start > _MAX_SWEEP:
            raise InstructionBoundaryError(
                f"{vaddr:#x} in {self.path} cannot be proven to start an instruction: no "
                f"symbol covers it and the nearest known instruction start, {start:#x} "
                f"({why[start]}), is {vaddr - start:#x} bytes before it"
                + (f" (the next is {after:#x})" if after is not None else "") + _UNSAFE_HINT,
                [a for a in (start, after) if a is not None])
        if stop - start > _MAX_SWEEP:
            starts, end = self._decode(start, vaddr + 16 - start)
        else:
            starts, end = self._sweep_from(start, stop)
        k = bisect.bisect_left(starts, vaddr)
        if k < len(starts) and starts[k] == vaddr:
            return
        if vaddr >= end:
            raise InstructionBoundaryError(
                f"{vaddr:#x} in {self.path} cannot be proven to start an instruction: no "
                f"symbol covers it, and disassembling from {start:#x} ({why[start]}) "
                f"stopped at {end:#x}, before it (data in code?)" + _UNSAFE_HINT,
                starts[-3:] + ([after] if after is not None else []))
        near = starts[max(0, k - 3):k + 3]
        nxt = starts[k] if k < len(starts) else end
        raise InstructionBoundaryError(
            f"{vaddr:#x} in {self.path} is in the middle of an instruction: no symbol covers "
            f"it, and disassembling from {start:#x} ({why[start]}) finds instructions "
            f"starting at {starts[k - 1]:#x} and {nxt:#x} around it; a uprobe there would "
            f"corrupt the traced program. Instructions near it start at: "
            f"{', '.join(f'{x:#x}' for x in near)}{_UNSAFE_HINT}", near)

    # -- resolution
    def resolve(self, where: "str | int", *, check_boundary: bool = True,
                functions_only: bool = True) -> Location:
        """Turn ``"sym"``, ``"sym+off"``, ``"sym@@VER"``, ``"0xADDR"`` (or an int
        address) into a :class:`Location` with the file offset for the kernel.

        Raises :class:`SymbolNotFoundError`, :class:`AmbiguousSymbolError`,
        :class:`InstructionBoundaryError` or :class:`ElfError`.
        """
        spec = parse_location(where)
        if spec.address is not None:
            return self._address_location(spec.address, self.address_to_offset(spec.address),
                                          check_boundary)
        sym = self._symbol_for_spec(spec, functions_only)
        if sym.type == STT_GNU_IFUNC:
            raise ElfError(
                f"{sym.versioned_name} in {self.path} is a GNU indirect function (IFUNC): "
                "its address is a resolver that runs once at load time and picks an "
                "implementation; probe the implementation instead (e.g. a "
                f"__{sym.name}_* variant, listed by `nm -D`/`nm` on the file)")
        vaddr = sym.address + spec.offset
        if check_boundary and spec.offset:
            self.check_instruction_boundary(sym, spec.offset)
        return Location(self.path, self.address_to_offset(vaddr), vaddr, sym, spec.offset)

    def _symbol_for_spec(self, spec: _Spec, functions_only: bool) -> Symbol:
        name = spec.name or ""
        if spec.version is not None:
            name += ("@@" if spec.default_only else "@") + spec.version
        return self.symbol(name, functions_only=functions_only)

    def location_at_offset(self, file_offset: int, *, check_boundary: bool = True) -> Location:
        """A :class:`Location` for a raw file offset (with its symbol when known).

        Checked like an address by :meth:`check_instruction_address` unless
        ``check_boundary`` is False.
        """
        return self._address_location(self.offset_to_address(file_offset, executable=True),
                                      file_offset, check_boundary)

    def _address_location(self, vaddr: int, file_offset: int,
                          check_boundary: bool) -> Location:
        if check_boundary:
            self.check_instruction_address(vaddr)
        hit = self.function_at(vaddr)
        sym, delta = hit if hit is not None else (None, 0)
        return Location(self.path, file_offset, vaddr, sym, delta)


def _cstr(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    if end < 0:
        end = len(table)
    return table[offset:end].decode("utf-8", "surrogateescape")


# ---------------------------------------------------------------- .eh_frame
# DW_EH_PE pointer encodings: the low nibble is the format, bits 4-6 what the
# value is relative to, 0x80 "indirect" (the value is where the pointer is).
_EH_FORMATS = {0x02: "H", 0x03: "I", 0x04: "Q", 0x0A: "h", 0x0B: "i", 0x0C: "q"}
_EH_PCREL, _EH_INDIRECT, _EH_OMIT = 0x10, 0x80, 0xFF


def _uleb(data: bytes, pos: int, limit: int) -> tuple[int, int]:
    """An unsigned LEB128 at ``pos`` (ending before ``limit``): ``(value, next pos)``."""
    value = shift = 0
    while True:
        if pos >= limit:
            raise ElfError("a LEB128 number runs past the end of its section")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos
        if shift > 70:
            raise ElfError("a LEB128 number is longer than 10 bytes")


def _sleb(data: bytes, pos: int, limit: int) -> tuple[int, int]:
    """A signed LEB128 at ``pos`` (ending before ``limit``): ``(value, next pos)``."""
    start = pos
    value, pos = _uleb(data, pos, limit)
    bits = 7 * (pos - start)
    if data[pos - 1] & 0x40:
        value -= 1 << bits
    return value, pos


def _eh_pointer(data: bytes, pos: int, limit: int, enc: int, addr_size: int, e: str,
                base: int) -> tuple[int | None, int]:
    """A DW_EH_PE-encoded pointer at ``pos`` (ending before ``limit``) of a
    section loaded at ``base``.

    Returns ``(value, next pos)``; value is None when it cannot be known
    from the file alone (an indirect pointer, or one relative to the text,
    data or function base), but the field is still skipped.
    """
    fmt = enc & 0x0F
    if fmt == 0x01:
        value, end = _uleb(data, pos, limit)
    elif fmt == 0x09:
        value, end = _sleb(data, pos, limit)
    else:
        code = ("Q" if addr_size == 8 else "I") if fmt == 0 else _EH_FORMATS.get(fmt, "")
        if not code:
            raise ElfError(f"unknown pointer encoding {enc:#04x} in .eh_frame")
        end = pos + struct.calcsize(code)
        if end > limit:
            raise ElfError("a pointer runs past the end of .eh_frame")
        (value,) = struct.unpack_from(e + code, data, pos)
    app = enc & 0x70
    if app == _EH_PCREL:
        value += base + pos
    elif app or enc & _EH_INDIRECT:
        return None, end
    return value & ((1 << (8 * addr_size)) - 1), end


def _eh_cie(data: bytes, pos: int, end: int, addr_size: int, e: str,
            base: int) -> int | None:
    """The FDE pointer encoding a CIE (whose version byte is at ``pos``)
    gives, or None when its augmentation cannot be read."""
    if pos >= end:
        raise ElfError(f"a CIE at {pos:#x} of .eh_frame is truncated")
    version = data[pos]
    aug_end = data.find(b"\0", pos + 1, end)
    if aug_end < 0:
        raise ElfError(f"the augmentation string of the CIE at {pos:#x} has no end")
    aug = data[pos + 1:aug_end]
    p = aug_end + 1
    if aug.startswith(b"eh"):
        p += addr_size                          # old GNU: an eh_data pointer
    if version == 4:
        p += 2                                  # address_size, segment_selector_size
    _code_align, p = _uleb(data, p, end)
    _data_align, p = _sleb(data, p, end)
    if version == 1:
        p += 1
    else:
        _ra, p = _uleb(data, p, end)
    if not aug.startswith(b"z"):
        return 0 if aug in (b"", b"eh") else None
    length, p = _uleb(data, p, end)
    stop = p + length
    if stop > end:
        raise ElfError(f"the augmentation data of the CIE at {pos:#x} runs past its end")
    fde_enc = 0                                 # DW_EH_PE_absptr
    for ch in aug[1:]:
        if ch == 0x52:                          # 'R': the FDE pointer encoding
            if p >= stop:
                raise ElfError(f"the CIE at {pos:#x} lacks its 'R' augmentation byte")
            fde_enc = data[p]
            p += 1
        elif ch == 0x4C:                        # 'L': LSDA encoding
            p += 1
        elif ch == 0x50:                        # 'P': personality encoding and pointer
            if p >= stop:
                raise ElfError(f"the CIE at {pos:#x} lacks its 'P' augmentation byte")
            enc = data[p]
            _pers, p = _eh_pointer(data, p + 1, stop, enc & 0x7F, addr_size, e, base)
        elif ch in b"SBG":                      # signal frame, ARM64 B key, MTE: no data
            continue
        else:
            break                               # unknown: the length skips the rest
    return fde_enc if fde_enc != _EH_OMIT else None


def parse_eh_frame(data: bytes, address: int, *, address_size: int = 8,
                   little_endian: bool = True) -> list[tuple[int, int]]:
    """The functions an ``.eh_frame`` section describes: ``[(start, size), ...]``.

    ``data`` is the section, ``address`` its virtual address (pc-relative
    pointers are relative to it).  Each FDE (frame description entry) gives
    one function's first address and length; the result is sorted by start
    and keeps FDEs whose start can be computed from the file (the usual
    ``DW_EH_PE_pcrel|sdata4`` and absolute encodings).  Raises
    :class:`ElfError` for a malformed section.
    """
    e = "<" if little_endian else ">"
    cies: dict[int, int | None] = {}
    out: list[tuple[int, int]] = []
    pos = 0
    size = len(data)
    while pos + 4 <= size:
        (length,) = struct.unpack_from(e + "I", data, pos)
        id_pos, id_size = pos + 4, 4
        if length == 0xFFFFFFFF:
            if pos + 12 > size:
                raise ElfError(f"the 64-bit length at {pos:#x} of .eh_frame is truncated")
            (length,) = struct.unpack_from(e + "Q", data, pos + 4)
            id_pos, id_size = pos + 12, 8
        end = id_pos + length
        if length == 0:                         # a terminator (crtend.o's) or padding
            pos = end
            continue
        if end > size or length < id_size:
            raise ElfError(f"the .eh_frame entry at {pos:#x} ({length} bytes) runs past the "
                           f"end of the section ({size} bytes)")
        (cie_ptr,) = struct.unpack_from(e + ("Q" if id_size == 8 else "I"), data, id_pos)
        body = id_pos + id_size
        if cie_ptr == 0:                        # a CIE
            cies[pos] = _eh_cie(data, body, end, address_size, e, address)
        else:                                   # an FDE: cie_ptr is the distance back to its CIE
            cie_pos = id_pos - cie_ptr
            if cie_pos not in cies:
                if cie_pos < 0:
                    raise ElfError(f"the FDE at {pos:#x} of .eh_frame points before the "
                                   "section")
                cies[cie_pos] = _eh_cie_at(data, cie_pos, address_size, e, address)
            enc = cies[cie_pos]
            if enc is not None:
                start, p = _eh_pointer(data, body, end, enc, address_size, e, address)
                length_, _p = _eh_pointer(data, p, end, enc & 0x0F, address_size, e,
                                          address)
                if start is not None and length_ is not None:
                    out.append((start, length_))
        pos = end
    out.sort()
    return out


def _eh_cie_at(data: bytes, pos: int, address_size: int, e: str, base: int) -> int | None:
    """The FDE encoding of the CIE that starts at ``pos`` (an FDE's pointer
    to a CIE not met yet, or to something that is not a CIE)."""
    if pos + 8 > len(data):
        raise ElfError(f"an FDE of .eh_frame points to {pos:#x}, outside the section")
    (length, cie_id) = struct.unpack_from(e + "II", data, pos)
    if length == 0xFFFFFFFF or cie_id != 0 or pos + 4 + length > len(data):
        raise ElfError(f"an FDE of .eh_frame points to {pos:#x}, which is not a CIE")
    return _eh_cie(data, pos + 8, pos + 4 + length, address_size, e, base)


_CACHE: dict[tuple[int, int, int, int], ElfFile] = {}
_CACHE_LOCK = _allocate_lock()
_CACHE_MAX = 64


def open_elf(path: str) -> ElfFile:
    """The :class:`ElfFile` for ``path``, parsed once and cached.

    The cache key is the file itself (device, inode, size, mtime), so another
    path to the same file (a symlink, ``/proc/PID/root/...``) shares the
    entry and a rebuilt file is parsed again.  ``/proc/PID/root`` paths are
    never resolved through the magic link, so a container's files stay the
    container's.  Raises FileNotFoundError or :class:`ElfError`.
    """
    path = os.path.abspath(path)
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            if hit.path != path and not os.path.exists(hit.path):
                hit.path = path       # first opened via a /proc/PID/root of a gone process
            return hit
    elf = ElfFile(path)
    with _CACHE_LOCK:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = elf
    return elf


# ------------------------------------------------------------ library names
_LD_CACHE_NEW = b"glibc-ld.so.cache1.1"
_LD_CACHE_OLD = b"ld.so-1.7.0"


@functools.lru_cache(maxsize=4)
def _ld_so_cache_cached(path: str, _key: tuple[int, int, int]) -> tuple[tuple[str, int, str], ...]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return ()
    base = 0
    if data.startswith(_LD_CACHE_OLD):
        if len(data) < len(_LD_CACHE_OLD) + 5:
            return ()
        (nlibs,) = struct.unpack_from("<I", data, len(_LD_CACHE_OLD) + 1)
        base = (len(_LD_CACHE_OLD) + 1 + 4 + nlibs * 12 + 7) & ~7
        pos = data.find(_LD_CACHE_NEW, base)
        if pos < 0:
            return ()
        base = pos
    if data[base:base + len(_LD_CACHE_NEW)] != _LD_CACHE_NEW or len(data) < base + 28:
        return ()
    nlibs, _len_strings = struct.unpack_from("<II", data, base + 20)
    if base + 48 + nlibs * 24 > len(data):
        return ()                               # a damaged cache: the linker ignores it too
    out = []
    for i in range(nlibs):
        flags, key, value = struct.unpack_from("<iII", data, base + 48 + i * 24)
        out.append((_cstr(data, base + key), flags, _cstr(data, base + value)))
    return tuple(out)


def ld_so_cache(path: str = "/etc/ld.so.cache") -> list[tuple[str, int, str]]:
    """Entries of the dynamic linker's cache: ``(soname, flags, path)``, in cache order.

    Parses the ``glibc-ld.so.cache1.1`` format (also when it follows the old
    ``ld.so-1.7.0`` table).  Returns an empty list when the file is missing
    or damaged (its table does not fit in it).
    The ``flags`` say the ABI (``0x303`` = libc6 x86-64); callers filter on
    the ELF machine of the file instead, which works on every architecture.
    """
    try:
        st = os.stat(path)
    except OSError:
        return []
    return list(_ld_so_cache_cached(path, (st.st_ino, st.st_mtime_ns, st.st_size)))


@functools.lru_cache(maxsize=1)
def _host_elf_ident() -> tuple[int, int] | None:
    """(EI_CLASS, e_machine) of this interpreter, to filter foreign-ABI libraries."""
    return _elf_ident("/proc/self/exe")


def _elf_ident(path: str) -> tuple[int, int] | None:
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    e = "<" if head[5] == 1 else ">"
    return head[4], struct.unpack_from(e + "H", head, 18)[0]


def _same_abi(path: str) -> bool:
    host = _host_elf_ident()
    return host is None or _elf_ident(path) == host


def library_search_dirs() -> list[str]:
    """Directories the dynamic linker searches: /etc/ld.so.conf (with includes),
    then the multiarch and default directories."""
    dirs: list[str] = []

    def conf(path: str, depth: int = 0) -> None:
        import glob
        if depth > 8:
            return
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except OSError:
            return
        for line in lines:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("include"):
                pattern = line.split(None, 1)[1] if " " in line or "\t" in line else ""
                if not os.path.isabs(pattern):
                    pattern = os.path.join(os.path.dirname(path), pattern)
                for inc in sorted(glob.glob(pattern)):
                    conf(inc, depth + 1)
            elif line.startswith("hwcap"):
                continue
            else:
                dirs.append(line)

    conf("/etc/ld.so.conf")
    machine = os.uname().machine
    triplet = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu",
               "riscv64": "riscv64-linux-gnu", "s390x": "s390x-linux-gnu",
               "ppc64le": "powerpc64le-linux-gnu", "i686": "i386-linux-gnu"}.get(machine)
    if triplet:
        dirs += [f"/lib/{triplet}", f"/usr/lib/{triplet}"]
    dirs += ["/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib"]
    out: list[str] = []
    for d in dirs:
        if d not in out and os.path.isdir(d):
            out.append(d)
    return out


def _soname_matches(soname: str, name: str) -> int | None:
    """Rank how well a file name matches a library name (lower is better)."""
    if soname == name:
        return 0
    if soname.startswith(name + ".so"):          # libc -> libc.so.6
        return 1
    if not name.startswith("lib") and soname.startswith("lib" + name + ".so"):   # c -> libc.so.6
        return 2
    return None


def _best(cands: Iterable[tuple[int, str]]) -> str | None:
    best = None
    for rank, path in cands:
        if best is None or rank < best[0]:
            best = (rank, path)
    return best[1] if best else None


def _which_elf(name: str) -> str | None:
    """The first ELF executable called ``name`` on $PATH (skipping script shims)."""
    first = None
    for d in os.environ.get("PATH", os.defpath).split(os.pathsep):
        cand = os.path.join(d or ".", name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            first = first or cand
            if _elf_ident(cand) is not None:
                return cand
    return first


def resolve_library(name: str, pid: int | None = None) -> str:
    """The file a library or program name refers to (bpftrace-like).

    * A name with a ``/`` is a path, returned as is (it must exist).
    * With ``pid``: a module that process maps, matched by file name
      (``libc`` → ``.../libc.so.6``), returned as a path usable from here
      (``/proc/PID/root/...`` for a process in another mount namespace).
    * Names that look like libraries (``lib...``, ``....so...``) are looked up
      in ``/etc/ld.so.cache``, then in the standard library directories;
      ``libc``, ``libc.so`` and ``c`` all find ``libc.so.6``.  Only files of
      this machine's ABI count (no 32-bit libc on x86-64).
    * Other names are looked up on ``$PATH`` first (``python3``; the first
      ELF file, so that shell-script shims are skipped), then as libraries.

    Raises :class:`LibraryNotFoundError` with close matches.
    """
    if not name:
        raise LibraryNotFoundError("empty library/program name")
    if "/" in name:
        if not os.path.exists(name):
            raise LibraryNotFoundError(f"{name} does not exist", name)
        return name
    if pid is not None:
        hit = _best(((r, m.open_path) for m in process_modules(pid)
                     for r in [_soname_matches(os.path.basename(m.path), name)]
                     if r is not None))
        if hit:
            return hit
    looks_like_lib = name.startswith("lib") or ".so" in name
    if not looks_like_lib:
        exe = _which_elf(name)
        if exe:
            return exe
    hit = _best(((r, path) for soname, _flags, path in ld_so_cache()
                 for r in [_soname_matches(soname, name)]
                 if r is not None and os.path.exists(path) and _same_abi(path)))
    if hit:
        return hit
    for d in library_search_dirs():
        try:
            entries = sorted(os.listdir(d))
        except OSError:
            continue
        hit = _best(((r, os.path.join(d, f)) for f in entries
                     for r in [_soname_matches(f, name)]
                     if r is not None and _same_abi(os.path.join(d, f))))
        if hit:
            return hit
    if looks_like_lib:
        exe = _which_elf(name)
        if exe:
            return exe
    known = sorted({soname for soname, _f, _p in ld_so_cache()})
    close = _close_matches(name, known, n=6, cutoff=0.5)
    close += [k for k in known if k.startswith(name) and k not in close][:3]
    where = f" mapped by pid {pid}," if pid is not None else ""
    raise LibraryNotFoundError(
        f"no library or program named {name!r}{where} in /etc/ld.so.cache, the standard "
        f"library directories or $PATH"
        + (f"; close matches: {', '.join(close)}" if close else "")
        + "; give the full path instead", name, close)


# ----------------------------------------------------------- process maps
@record
class MapEntry(Record):
    """One line of ``/proc/PID/maps``."""

    start: int
    end: int
    perms: str
    offset: int
    dev: str
    inode: int
    path: str
    deleted: bool = False

    @property
    def executable(self) -> bool:
        """The mapping is executable (``x`` in its permissions)."""
        return "x" in self.perms


@record
class Module(Record):
    """A file mapped by a process (an executable or a shared library).

    ``path`` is the path /proc/PID/maps shows; ``open_path`` one this process
    can open that is the same file (checked by inode): ``path`` itself, or
    ``/proc/PID/root/<path>`` when the target lives in another mount
    namespace (a container), or ``/proc/PID/map_files/...`` (a deleted file).  ``maps`` are its mappings in address order.
    """

    pid: int
    path: str
    open_path: str
    maps: tuple[MapEntry, ...]

    @property
    def start(self) -> int:
        """The lowest address of the module's mappings."""
        return self.maps[0].start

    @property
    def end(self) -> int:
        """The end (exclusive) of the module's last mapping."""
        return self.maps[-1].end

    def contains(self, addr: int) -> bool:
        """Is ``addr`` inside one of the module's mappings?"""
        return any(m.start <= addr < m.end for m in self.maps)

    def file_offset(self, addr: int) -> int:
        """Runtime address in the process → offset in the file."""
        for m in self.maps:
            if m.start <= addr < m.end:
                return addr - m.start + m.offset
        raise ElfError(f"address {addr:#x} is not mapped from {self.path} in pid {self.pid}")

    def elf_address(self, addr: int) -> int:
        """Runtime address → ELF virtual address (for :meth:`ElfFile.symbolize`)."""
        m = next((m for m in self.maps if m.start <= addr < m.end), None)
        if m is None:
            raise ElfError(f"address {addr:#x} is not mapped from {self.path} in pid {self.pid}")
        return open_elf(self.open_path).offset_to_address(addr - m.start + m.offset,
                                                          executable=m.executable)

    def runtime_address(self, vaddr: int) -> int:
        """ELF virtual address → runtime address in the process."""
        off = open_elf(self.open_path).address_to_offset(vaddr)
        for m in self.maps:
            if m.offset <= off < m.offset + (m.end - m.start):
                return off - m.offset + m.start
        raise ElfError(f"{vaddr:#x} of {self.path} is not mapped in pid {self.pid}")


def process_maps(pid: int) -> list[MapEntry]:
    """Parse ``/proc/PID/maps``.  Raises ProcessLookupError when the process is gone."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise ProcessLookupError(3, f"no process with pid {pid}") from None
    out = []
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 5:
            continue
        lo, _, hi = parts[0].partition("-")
        path = parts[5] if len(parts) > 5 else ""
        deleted = path.endswith(" (deleted)")
        if deleted:
            path = path[:-len(" (deleted)")]
        out.append(MapEntry(int(lo, 16), int(hi, 16), parts[1], int(parts[2], 16), parts[3],
                            int(parts[4]), path, deleted))
    return out


def _same_file(path: str, entry: MapEntry) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    if st.st_ino != entry.inode:
        return False
    try:
        major, minor = (int(x, 16) for x in entry.dev.split(":"))
    except ValueError:
        return True
    return (os.major(st.st_dev), os.minor(st.st_dev)) == (major, minor)


def _open_path(pid: int, entry: MapEntry) -> str:
    """A path to the mapped file usable from this process.

    /proc/PID/maps prints paths relative to *our* root when the file is
    reachable from it, else relative to the file's mount (a container's
    overlay, a private tmpfs).  So: the path itself if it is that file (same
    inode), else /proc/PID/root/<path>, else /proc/PID/map_files/<range>
    (root only; it also works for deleted files).
    """
    if not entry.deleted and _same_file(entry.path, entry):
        return entry.path
    in_root = f"/proc/{pid}/root{entry.path}"
    if not entry.deleted and _same_file(in_root, entry):
        return in_root
    by_range = f"/proc/{pid}/map_files/{entry.start:x}-{entry.end:x}"
    if _same_file(by_range, entry):
        return by_range
    return in_root


def process_modules(pid: int) -> list[Module]:
    """The files a process maps (executable first, then libraries, by address)."""
    entries = [m for m in process_maps(pid) if m.path.startswith("/") and m.inode]
    groups: dict[str, list[MapEntry]] = {}
    for m in entries:
        groups.setdefault(m.path, []).append(m)
    mods = []
    for path, maps in groups.items():
        maps.sort(key=lambda m: m.start)
        mods.append(Module(pid, path, _open_path(pid, maps[0]), tuple(maps)))
    exe = None
    try:
        exe = os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except OSError:
        pass
    mods.sort(key=lambda m: (m.path != exe, m.start))
    return mods
