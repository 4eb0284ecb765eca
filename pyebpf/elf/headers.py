"""ELF headers: sections, PT_LOAD segments, notes, and the one vaddr <-> offset rule.

Virtual address -> file offset, once for all of pyebpf
------------------------------------------------------
The offset of ``vaddr`` is always ``vaddr - p_vaddr + p_offset`` of the
PT_LOAD segment whose **memory image** ``[p_vaddr, p_vaddr + p_memsz)``
holds it (:func:`segment_at`; PT_LOAD segments never overlap in memory).
What differs between uses is how much of that image must come from the
file, the ``backing`` of :meth:`Segment.file_offset`:

* ``"file"`` (the default) -- the address has bytes in the file,
  ``vaddr < p_vaddr + p_filesz``.  For everything read from the file:
  code to disassemble, a probe location (the kernel's uprobe offset reads
  the instruction from the file), :meth:`ElfHeaders.read`.
* ``"mapping"`` -- the address lies in the file's *mapping* at run time, up
  to the end of the page holding the segment's last file byte (the dynamic
  linker and the kernel map the segment from the file up to that page end
  and zero its tail; only the pages after it are anonymous memory).  For a
  uprobe reference counter (a USDT semaphore): the kernel's
  ``ref_ctr_offset`` is a file offset that it finds in the process through
  the file's private writable mapping, so a semaphore in ``.bss`` works
  when it shares that last page and can never be updated beyond it.
  libbpf looks the semaphore up by ``p_memsz`` with the same arithmetic; it
  agrees wherever the kernel can reach the counter, and where it cannot
  this refuses instead of giving an offset the kernel silently ignores.

File offset -> address goes the other way through the segments whose file
bytes ``[p_offset, p_offset + p_filesz)`` hold it.
"""
from __future__ import annotations

import os
import struct

from .._record import Record, record
from .errors import ElfError, NoteError
from .layouts import (E_TYPES, MACHINES, NT_GNU_BUILD_ID, PF_R, PF_W, PF_X, PT_LOAD,
                      SHT_STRTAB, layout, sh_type_names)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, BinaryIO, Iterable, Iterator, Sequence

    from .layouts import ElfStruct

__all__ = ["Section", "Segment", "Note", "ElfHeaders", "segment_at", "iter_notes",
           "read_at", "page_size"]

_PAGE_SIZE = 0


def page_size() -> int:
    """This host's page size (the unit the file's segments are mapped in)."""
    global _PAGE_SIZE
    if not _PAGE_SIZE:
        _PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
    return _PAGE_SIZE


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

    def contains(self, vaddr: int) -> bool:
        """Is ``vaddr`` in the segment's memory image, ``[p_vaddr, p_vaddr + p_memsz)``?"""
        return self.vaddr <= vaddr < self.vaddr + self.memsz

    def has_address(self, vaddr: int) -> bool:
        """Is ``vaddr`` backed by the file in this segment (not .bss)?"""
        return self.vaddr <= vaddr < self.vaddr + self.filesz

    def has_offset(self, offset: int) -> bool:
        """Is file offset ``offset`` inside this segment's bytes in the file?"""
        return self.offset <= offset < self.offset + self.filesz

    @property
    def mapped_end(self) -> int:
        """The end of the part of the memory image mapped from the file: the
        page end after the last file byte (capped at ``p_vaddr + p_memsz``)."""
        page = page_size()
        end = -(-(self.vaddr + self.filesz) // page) * page
        return min(end, self.vaddr + self.memsz) if self.filesz else self.vaddr

    def file_offset(self, vaddr: int, backing: str = "file") -> int | None:
        """``vaddr - p_vaddr + p_offset`` when ``vaddr`` is inside the segment
        and backed as asked (``"file"`` or ``"mapping"``, see the module
        docs), else None."""
        end = self.vaddr + self.filesz if backing == "file" else self.mapped_end
        if self.vaddr <= vaddr < end:
            return vaddr - self.vaddr + self.offset
        return None

    def __str__(self) -> str:
        perms = ("R" if self.flags & PF_R else "-") + ("W" if self.flags & PF_W else "-") \
            + ("X" if self.flags & PF_X else "-")
        return (f"LOAD vaddr {self.vaddr:#x}-{self.vaddr + self.memsz:#x} "
                f"offset {self.offset:#x} filesz {self.filesz:#x} {perms}")


@record
class Section(Record):
    """A section header (``type`` is the name, e.g. ``"SHT_NOTE"``)."""

    name: str
    type: str
    addr: int
    offset: int
    size: int
    link: int
    entsize: int
    flags: int
    align: int = 0


@record
class Note(Record):
    """One ELF note: ``name`` (with its NUL), ``type``, and where its
    descriptor and the note itself start in the section's bytes."""

    name: bytes
    type: int
    desc_start: int
    desc_end: int
    start: int


def segment_at(segments: Sequence[Segment], vaddr: int) -> Segment | None:
    """The PT_LOAD segment whose memory image holds ``vaddr`` (see the module docs)."""
    for seg in segments:
        if seg.vaddr <= vaddr < seg.vaddr + seg.memsz:
            return seg
    return None


def iter_notes(data: bytes, *, little_endian: bool = True, align: int = 4) -> Iterator[Note]:
    """The notes of a SHT_NOTE section's bytes, in order.

    ``align`` is 4 or 8 (the section's alignment: name and descriptor are
    padded to it).  Raises :class:`NoteError` on reaching a malformed one.
    """
    hdr = layout("Nhdr", 64, little_endian).unpack_from
    amask = align - 1
    n = len(data)
    pos = 0
    while pos < n:
        if n - pos < 12:
            raise NoteError(f"truncated note header ({n - pos} bytes left, need 12)", pos, True)
        namesz, descsz, ntype = hdr(data, pos)
        name_at = pos + 12
        desc_at = name_at + ((namesz + amask) & ~amask)
        desc_end = desc_at + descsz
        if desc_end > n:
            raise NoteError(f"note runs past the end of its section: name {namesz} and "
                            f"descriptor {descsz} bytes at offset {pos:#x} of a {n:#x}-byte "
                            "section", pos, False)
        yield Note(data[name_at:name_at + namesz], ntype, desc_at, desc_end, pos)
        pos = (desc_end + amask) & ~amask


def read_at(path: str, offset: int, size: int, what: str | None = None) -> bytes:
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


def _bytes_at(data: bytes, path: str, offset: int, size: int, what: str | None) -> bytes:
    """:func:`read_at` for an image held in memory."""
    if offset < 0 or size < 0 or offset + size > len(data):
        if what is not None or offset < 0 or size < 0:
            raise ElfError(f"{path}: {what or 'a read'} (file offset {offset:#x}, "
                           f"{size:#x} bytes) is not inside the file ({len(data):#x} bytes)")
    return data[offset:offset + size]


class ElfHeaders:
    """The headers of one ELF file (see :class:`~pyebpf.elf.ElfFile`, which
    adds symbols and probe locations).

    Attributes: ``path``, ``type`` (``"ET_EXEC"``/``"ET_DYN"``), ``machine``
    (``"EM_X86_64"``...), ``elfclass`` (32/64), ``little_endian``, ``entry``,
    ``segments`` (PT_LOAD only), ``sections``.

    Headers of the common classes and byte orders of known machines are read
    with :mod:`struct` through :mod:`~pyebpf.elf.layouts`; anything else
    (extended section or segment counts, another machine, tables outside the
    file) goes to pyelftools, imported only then.
    """

    path: str
    type: str
    machine: str
    elfclass: int
    little_endian: bool
    entry: int
    segments: tuple[Segment, ...]
    sections: tuple[Section, ...]
    _data: bytes | None

    def __init__(self, path: str, data: bytes | None = None) -> None:
        self.path = path
        self._data = data
        if not self._parse_fast(path):
            self._parse_pyelftools(path)
        self._build_id: bytes | None | bool = False

    # -- parsing
    def _pread(self, fd: int | None, size: int, offset: int) -> bytes:
        if fd is None:
            return (self._data or b"")[offset:offset + size]
        return os.pread(fd, size, offset)

    def _parse_fast(self, path: str) -> bool:
        """Headers of a well-formed ELF file with :mod:`struct`.

        Returns False (having set nothing) for anything else -- a machine
        without a name table here, extended section or segment counts, tables
        outside the file, names outside the section name table -- and
        :meth:`_parse_pyelftools` then handles (or rejects) the file.  The
        values are the ones pyelftools gives.
        """
        fd = None
        data = getattr(self, "_data", None)
        if data is None:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except IsADirectoryError:
                return False
        try:
            try:
                fsize = os.fstat(fd).st_size if fd is not None else len(data or b"")
                ident = self._pread(fd, 16, 0)
                if len(ident) < 16 or ident[:4] != b"\x7fELF" or ident[4] not in (1, 2) \
                        or ident[5] not in (1, 2):
                    return False
                elfclass, little = 32 * ident[4], ident[5] == 1
                ehdr_s = layout("Ehdr", elfclass, little)
                phdr_s = layout("Phdr", elfclass, little)
                shdr_s = layout("Shdr", elfclass, little)
                ehdr = self._pread(fd, ehdr_s.size, 0)
                if len(ehdr) < ehdr_s.size:
                    return False
                (_ident, e_type, e_machine, _version, e_entry, e_phoff, e_shoff, _flags,
                 _ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx) = \
                    ehdr_s.unpack_from(ehdr)
                machine = MACHINES.get(e_machine)
                if machine is None or e_phnum >= 0xFFFF or e_shoff == 0 or e_shnum == 0 \
                        or not 0 < e_shstrndx < min(e_shnum, 0xFF00) \
                        or (e_phnum and e_phentsize != phdr_s.size) \
                        or e_shentsize != shdr_s.size \
                        or e_phoff + e_phnum * phdr_s.size > fsize \
                        or e_shoff + e_shnum * shdr_s.size > fsize:
                    return False
                segments = []
                if e_phnum:
                    raw = self._pread(fd, e_phnum * phdr_s.size, e_phoff)
                    if len(raw) != e_phnum * phdr_s.size:
                        return False
                    is64 = elfclass == 64
                    for ph in phdr_s.iter_unpack(raw):
                        if is64:
                            p_type, p_flags, p_offset, p_vaddr, _pa, p_filesz, p_memsz, \
                                p_align = ph
                        else:
                            p_type, p_offset, p_vaddr, _pa, p_filesz, p_memsz, p_flags, \
                                p_align = ph
                        if p_type == PT_LOAD:
                            segments.append(Segment(p_vaddr, p_memsz, p_offset, p_filesz,
                                                    p_flags, p_align))
                raw = self._pread(fd, e_shnum * shdr_s.size, e_shoff)
                if len(raw) != e_shnum * shdr_s.size:
                    return False
                shdrs = list(shdr_s.iter_unpack(raw))
                str_hdr = shdrs[e_shstrndx]
                if str_hdr[1] != SHT_STRTAB or str_hdr[4] + str_hdr[5] > fsize:
                    return False
                names = self._pread(fd, str_hdr[5], str_hdr[4])
                if len(names) != str_hdr[5]:
                    return False
            finally:
                if fd is not None:
                    os.close(fd)
        except OSError:
            return False
        types = sh_type_names(e_machine)
        sections = []
        for (sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, _info,
             sh_addralign, sh_entsize) in shdrs:
            end = names.find(b"\0", sh_name)
            if end < 0:
                return False
            name = names[sh_name:end].decode("utf-8", "replace")
            sections.append(Section(name, types.get(sh_type) or str(sh_type), sh_addr,
                                    sh_offset, sh_size, sh_link, sh_entsize, sh_flags,
                                    sh_addralign))
        self.type = E_TYPES.get(e_type) or str(e_type)
        self.machine = machine
        self.elfclass = elfclass
        self.little_endian = little
        self.entry = e_entry
        self.segments = tuple(segments)
        self.sections = tuple(sections)
        return True

    def _parse_pyelftools(self, path: str) -> None:
        """Headers of any ELF file (unusual layouts, other machines) with pyelftools."""
        import io

        from elftools.common.exceptions import ELFError as _PyElfError
        from elftools.elf.elffile import ELFFile

        data = getattr(self, "_data", None)
        if data is not None:
            fh: BinaryIO = io.BytesIO(data)
        else:
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
                    Section(s.name, str(s.header.sh_type), s.header.sh_addr,
                            s.header.sh_offset, s.header.sh_size, s.header.sh_link,
                            s.header.sh_entsize, s.header.sh_flags, s.header.sh_addralign)
                    for s in ef.iter_sections())
            except _PyElfError as exc:
                raise ElfError(f"{path} is not an ELF file ({exc})") from None
            except Exception as exc:  # noqa: BLE001 - pyelftools' many errors on bad input
                # (struct, construct, seek errors on offsets past the largest file ...)
                raise ElfError(f"{path}: malformed ELF file ({type(exc).__name__}: {exc})") \
                    from None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path} {self.type} {self.machine}>"

    # -- kind
    @property
    def is_shared(self) -> bool:
        """ET_DYN: a shared library or a PIE executable (addresses are relative)."""
        return self.type == "ET_DYN"

    # -- sections
    def section(self, name: str) -> Section | None:
        """The first section called ``name``, or None."""
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def read_bytes(self, offset: int, size: int, what: str | None = None) -> bytes:
        """``size`` bytes of the file at ``offset`` (see :func:`read_at`)."""
        if self._data is not None:
            return _bytes_at(self._data, self.path, offset, size, what)
        return read_at(self.path, offset, size, what)

    def section_data(self, sec: Section) -> bytes:
        """The bytes of a section (empty for SHT_NOBITS).

        Raises :class:`ElfError` when the section header puts them (partly)
        outside the file.
        """
        if sec.type == "SHT_NOBITS":
            return b""
        return self.read_bytes(sec.offset, sec.size, f"section {sec.name or '(unnamed)'}")

    def section_entries(self, sec: Section, fmt: ElfStruct, what: str,
                        entry: str) -> Iterable[tuple[Any, ...]]:
        """The fixed-size entries of a table section (``fmt`` each), unpacked.

        Raises :class:`ElfError` when its ``sh_entsize`` is smaller than the
        structure (``what`` names the table, ``entry`` one entry, in the
        message) or the section lies outside the file.
        """
        data = self.section_data(sec)
        entsize = sec.entsize or fmt.size
        if entsize < fmt.size:
            raise ElfError(f"{self.path}: the {what} {sec.name or '(unnamed)'} has entries of "
                           f"{entsize} bytes; an ELF{self.elfclass} {entry} takes {fmt.size}")
        count = len(data) // entsize
        if entsize == fmt.size:
            return fmt.iter_unpack(data[:count * entsize])
        return (fmt.unpack_from(data, i * entsize) for i in range(count))

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
                try:
                    note = next(iter_notes(data, little_endian=self.little_endian), None)
                except NoteError as exc:
                    if exc.truncated_header:
                        raise ElfError(f"{self.path}: the .note.gnu.build-id section is "
                                       f"{len(data)} bytes, shorter than a note header") \
                            from None
                    namesz, descsz = struct.unpack_from(
                        "<II" if self.little_endian else ">II", data)
                    raise ElfError(f"{self.path}: the build-id note (name {namesz} bytes, "
                                   f"id {descsz} bytes) runs past its section "
                                   f"({len(data)} bytes)") from None
                if note is not None and note.type == NT_GNU_BUILD_ID:
                    bid = data[note.desc_start:note.desc_end] or None
            self._build_id = bid
        return self._build_id  # type: ignore[return-value]

    # -- address <-> offset
    def segment_for_address(self, vaddr: int) -> Segment | None:
        """The PT_LOAD segment whose file-backed part holds ``vaddr``."""
        for seg in self.segments:
            if seg.has_address(vaddr):
                return seg
        return None

    def address_to_offset(self, vaddr: int, *, backing: str = "file") -> int:
        """ELF virtual address → file offset (``vaddr - p_vaddr + p_offset``).

        ``backing`` says what the offset is for (see :mod:`pyebpf.elf.headers`):
        ``"file"`` (bytes in the file: code, probe locations) or
        ``"mapping"`` (a uprobe ``ref_ctr_offset``).  Raises :class:`ElfError`
        for an address in no segment, or not backed as asked.
        """
        seg = segment_at(self.segments, vaddr)
        off = seg.file_offset(vaddr, backing) if seg is not None else None
        if off is not None:
            return off
        if seg is None:
            where = "; ".join(str(s) for s in self.segments) or "no PT_LOAD segments"
            raise ElfError(f"address {vaddr:#x} is not in any loadable segment of "
                           f"{self.path} ({where})")
        if backing == "file":
            raise ElfError(f"address {vaddr:#x} of {self.path} is in the zero-filled "
                           f"(.bss) part of a segment and has no file offset")
        raise ElfError(f"address {vaddr:#x} of {self.path} is in the zero-filled (.bss) part "
                       f"of a segment, {vaddr - seg.mapped_end:#x} bytes past the last page "
                       f"mapped from the file ({seg}): it is anonymous memory at run time, "
                       "which the kernel cannot reach through the file")

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
        return self.read_bytes(self.address_to_offset(vaddr), size)
