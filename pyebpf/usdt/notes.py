"""``.note.stapsdt`` notes: read every USDT probe site of an ELF file.

Each probe site that sys/sdt.h (``STAP_PROBEn``/``DTRACE_PROBEn``) compiles
leaves one SHT_NOTE entry, name ``"stapsdt"``, type 3, whose descriptor is

    pc, base, semaphore   three addresses of the ELF class's size (4 or 8
                          bytes) in the file's byte order
    provider\\0 name\\0 args\\0

This module reads them with pyelftools (headers, sections, PT_LOAD segments)
and its own loop over the note bytes (the fast path: no object per note
header, no construct parsing), and turns the addresses into what a uprobe
needs:

* ``address``: the pc, adjusted by ``.stapsdt.base``'s sh_addr minus the
  note's base -- only when both are non-zero (prelinked files; libbpf's rule
  since v1.6.0).  The semaphore is adjusted by the same amount (prelink moves
  ``.probes`` with everything else; gdb and systemtap do the same, libbpf does
  not).
* ``offset``: the file offset of that address through the PT_LOAD segment
  that holds it, which must be executable (``vaddr - p_vaddr + p_offset``;
  correct for layouts where vaddr != offset such as lld's).
* ``semaphore_offset``: the semaphore's file offset through a non-executable
  PT_LOAD segment (the kernel's ``ref_ctr_offset``), 0 when there is none.

32-bit and big-endian files are decoded correctly (address sizes follow the
ELF class); :attr:`ElfInfo.traceable` says whether this host can trace them.

Errors: :class:`~pyebpf.errors.UsdtNoteError` for anything malformed (never
another exception, whatever the bytes); ``OSError`` when the file cannot be
read.  An argument spec that cannot be decoded does not raise here: it is an
:class:`~pyebpf.usdt.spec.UndecodableArg` in :attr:`UsdtNote.arguments`.
"""
from __future__ import annotations

import io
import os
import platform
import struct
import sys
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterable, Iterator, NamedTuple, Sequence

from ..errors import UsdtNoteError, UsdtSpecError
from .spec import SUPPORTED_ARCHES, ArgSpec, UndecodableArg, parse_args, split_args

__all__ = ["ElfInfo", "LoadSegment", "UsdtFile", "UsdtNote", "UsdtProbe", "iter_notes",
           "read_notes", "read_probes", "group_probes", "host_arch", "NT_STAPSDT"]

NT_STAPSDT = 3
NOTE_SECTION = ".note.stapsdt"
BASE_SECTION = ".stapsdt.base"
_PF_X = 1

# e_machine -> ({elfclass: arch}, allowed byte orders ("<", ">"))
_MACHINES: dict[str, tuple[dict[int, str], str]] = {
    "EM_X86_64": ({64: "x86_64", 32: "x32"}, "<"),
    "EM_386": ({32: "i386"}, "<"),
    "EM_AARCH64": ({64: "aarch64", 32: "aarch64_ilp32"}, "<>"),
    "EM_ARM": ({32: "arm"}, "<>"),
    "EM_RISCV": ({64: "riscv64", 32: "riscv32"}, "<"),
    "EM_S390": ({64: "s390x", 32: "s390"}, ">"),
    "EM_PPC64": ({64: "ppc64"}, "<>"),
    "EM_PPC": ({32: "ppc"}, "<>"),
    "EM_MIPS": ({64: "mips64", 32: "mips"}, "<>"),
    "EM_LOONGARCH": ({64: "loongarch64", 32: "loongarch32"}, "<"),
    "EM_SPARCV9": ({64: "sparc64"}, ">"),
}


def host_arch() -> str:
    """This machine's architecture in the names :class:`ElfInfo` uses."""
    m = platform.machine().lower()
    return {"amd64": "x86_64", "i686": "i386", "i586": "i386", "i486": "i386",
            "arm64": "aarch64", "armv7l": "arm", "armv6l": "arm", "armv8l": "arm",
            "aarch64_be": "aarch64", "ppc64": "ppc64"}.get(m, m)


class LoadSegment(NamedTuple):
    """One PT_LOAD program header."""

    vaddr: int
    memsz: int
    offset: int
    filesz: int
    flags: int

    @property
    def executable(self) -> bool:
        """True for an executable segment (``PF_X``)."""
        return bool(self.flags & _PF_X)

    def contains(self, vaddr: int) -> bool:
        """Whether virtual address ``vaddr`` lies in the segment's memory image."""
        return self.vaddr <= vaddr < self.vaddr + self.memsz


@dataclass(frozen=True)
class ElfInfo:
    """What the notes of one file share: its identity, layout and whether
    this host can trace it.

    ``arch`` names the architecture (``x86_64``, ``aarch64``, ``s390x``,
    ``ppc64le``...), ``elfclass`` is 32 or 64, ``elf_type`` ``ET_EXEC``/
    ``ET_DYN``/``ET_REL``..., ``stapsdt_base`` the sh_addr of ``.stapsdt.base``
    (None without that section), ``segments`` the PT_LOAD headers.
    ``traceable`` is False, with ``untraceable_reason``, when the file's
    architecture, class or byte order differs from this host's or its type
    cannot be uprobed (a relocatable object).
    """

    path: str
    arch: str
    elfclass: int
    little_endian: bool
    machine: str
    elf_type: str
    stapsdt_base: int | None
    segments: tuple[LoadSegment, ...]
    traceable: bool
    untraceable_reason: str | None

    def segment_for(self, vaddr: int) -> LoadSegment | None:
        """The PT_LOAD segment whose [vaddr, vaddr + memsz) holds ``vaddr``."""
        for seg in self.segments:
            if seg.vaddr <= vaddr < seg.vaddr + seg.memsz:
                return seg
        return None

    def file_offset(self, vaddr: int, executable: bool) -> int:
        """``vaddr``'s file offset through its PT_LOAD segment, which must be
        executable (``executable=True``) or not; raises UsdtNoteError."""
        if self.elf_type == "ET_REL":
            raise UsdtNoteError("a relocatable object (ET_REL) has no final addresses; "
                                "link it first", self.path)
        seg = self.segment_for(vaddr)
        want = "an executable" if executable else "a non-executable"
        if seg is None:
            raise UsdtNoteError(f"address {vaddr:#x} is in no PT_LOAD segment "
                                f"(expected {want} one)", self.path)
        if seg.executable != executable:
            raise UsdtNoteError(f"address {vaddr:#x} is in a{' n' if seg.executable else ''} "
                                f"{'executable' if seg.executable else 'non-executable'} "
                                f"segment [{seg.vaddr:#x}, {seg.vaddr + seg.memsz:#x}); "
                                f"expected {want} one", self.path)
        return vaddr - seg.vaddr + seg.offset


class UsdtNote:
    """One probe site (one stapsdt note).

    Raw fields, as written in the note (``readelf -n`` prints the same):
        ``provider``, ``name``, ``location`` (pc), ``base``, ``semaphore``
        (0 = none), ``args`` (the argument string).
    Derived:
        ``address`` / ``semaphore_address``: adjusted by ``.stapsdt.base``;
        :attr:`offset` / :attr:`semaphore_offset`: file offsets for the
        uprobe and its ref_ctr (raise :class:`~pyebpf.errors.UsdtNoteError`
        when they cannot be resolved);
        :attr:`arguments`: the decoded specs, decoded on first use.
    ``index`` is the note's ordinal among the file's stapsdt notes, ``elf``
    the :class:`ElfInfo` of its file.  Read-only by convention.
    """

    __slots__ = ("elf", "index", "provider", "name", "location", "base", "semaphore", "args",
                 "address", "semaphore_address", "note_offset", "_arguments")

    def __init__(self, elf: ElfInfo, index: int, provider: str, name: str, location: int,
                 base: int, semaphore: int, args: str, note_offset: int | None = None):
        self.elf = elf
        self.index = index
        self.provider = provider
        self.name = name
        self.location = location
        self.base = base
        self.semaphore = semaphore
        self.args = args
        self.note_offset = note_offset
        sb = elf.stapsdt_base
        delta = sb - base if (sb and base) else 0
        mask = (1 << elf.elfclass) - 1
        self.address = (location + delta) & mask
        self.semaphore_address = (semaphore + delta) & mask if semaphore else 0
        self._arguments: tuple[ArgSpec | UndecodableArg, ...] | None = None

    # -- identity --------------------------------------------------------
    @property
    def path(self) -> str:
        """The ELF file the note is in."""
        return self.elf.path

    @property
    def arch(self) -> str:
        """The file's architecture (``x86_64``, ``aarch64``...)."""
        return self.elf.arch

    @property
    def probe(self) -> str:
        """``provider:name``."""
        return f"{self.provider}:{self.name}"

    def __repr__(self) -> str:
        return (f"UsdtNote({self.provider}:{self.name} @ {self.location:#x}, "
                f"sema={self.semaphore:#x}, args={self.args!r})")

    def _key(self) -> tuple[Any, ...]:
        return (self.elf.path, self.provider, self.name, self.location, self.base,
                self.semaphore, self.args)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, UsdtNote):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    # -- offsets ----------------------------------------------------------
    def _fail(self, exc: UsdtNoteError, what: str) -> UsdtNoteError:
        return UsdtNoteError(f"{what}: {exc.reason}", self.elf.path, self.index,
                             self.note_offset, self.probe)

    @property
    def offset(self) -> int:
        """The probe's file offset (the uprobe offset): ``address`` through
        its executable PT_LOAD segment."""
        try:
            return self.elf.file_offset(self.address, executable=True)
        except UsdtNoteError as exc:
            raise self._fail(exc, f"probe location {self.address:#x}") from None

    @property
    def semaphore_offset(self) -> int:
        """The semaphore's file offset (the uprobe ``ref_ctr_offset``), 0 if
        the probe has no semaphore."""
        if not self.semaphore:
            return 0
        try:
            return self.elf.file_offset(self.semaphore_address, executable=False)
        except UsdtNoteError as exc:
            raise self._fail(exc, f"semaphore {self.semaphore_address:#x}") from None

    def problems(self) -> list[str]:
        """Why this note cannot be traced as is (empty when it can)."""
        out = []
        if not self.elf.traceable:
            out.append(self.elf.untraceable_reason or "not traceable on this host")
        if self.elf.elf_type != "ET_REL":     # (already said: not traceable)
            for what in ("offset", "semaphore_offset"):
                try:
                    getattr(self, what)
                except UsdtNoteError as exc:
                    out.append(exc.reason)
        for a in self.arguments:
            if isinstance(a, UndecodableArg):
                out.append(f"argument {a.index} {a.text!r}: {a.error.reason}")
        return out

    # -- arguments -------------------------------------------------------
    @property
    def arguments(self) -> tuple[ArgSpec | UndecodableArg, ...]:
        """One entry per argument: an :class:`~pyebpf.usdt.spec.ArgSpec`, or
        an :class:`~pyebpf.usdt.spec.UndecodableArg` that raises its
        :class:`~pyebpf.errors.UsdtSpecError` when used.  Indices never shift."""
        a = self._arguments
        if a is None:
            a = self._arguments = _decode_args(self.args, self.elf.arch, self.probe)
        return a

    @property
    def arg_count(self) -> int:
        """How many arguments this site has."""
        return len(self.arguments)

    def arg(self, i: int) -> ArgSpec:
        """Argument ``i`` (0-based) decoded; raises
        :class:`~pyebpf.errors.UsdtSpecError` if it is undecodable or absent."""
        args = self.arguments
        if not 0 <= i < len(args):
            raise UsdtSpecError(f"the probe has {len(args)} argument(s) here, no argument {i}",
                                probe=self.probe, index=i)
        return args[i].check()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the raw note fields, the derived offsets (None plus
        ``errors`` when unresolvable) and the decoded arguments."""
        d: dict[str, Any] = {
            "path": self.elf.path, "provider": self.provider, "name": self.name,
            "location": self.location, "base": self.base, "semaphore": self.semaphore,
            "args": self.args, "address": self.address,
            "semaphore_address": self.semaphore_address,
        }
        errors = []
        for key in ("offset", "semaphore_offset"):
            try:
                d[key] = getattr(self, key)
            except UsdtNoteError as exc:
                d[key] = None
                errors.append(exc.reason)
        d["arch"] = self.elf.arch
        d["traceable"] = self.elf.traceable
        d["arguments"] = [a.to_dict() for a in self.arguments]
        errors += [f"argument {a.index}: {a.error.reason}" for a in self.arguments
                   if isinstance(a, UndecodableArg)]
        if not self.elf.traceable:
            errors.insert(0, self.elf.untraceable_reason or "not traceable on this host")
        d["errors"] = errors
        return d


def _decode_args(args: str, arch: str, probe: str) -> tuple[ArgSpec | UndecodableArg, ...]:
    if arch in SUPPORTED_ARCHES:
        return parse_args(args, arch, probe=probe)
    out = []
    for i, tok in enumerate(split_args(args)):
        err = UsdtSpecError(f"no USDT argument decoder for architecture {arch!r}", spec=tok,
                            arch=arch, probe=probe, index=i)
        out.append(UndecodableArg(tok, err, i))
    return tuple(out)


class UsdtProbe:
    """All the sites of one probe (provider, name) in one file.

    ``locations`` holds the :class:`UsdtNote` of each site, in note order;
    each has its own address, semaphore and argument specs (a compiler can
    place an argument differently at each site).
    """

    __slots__ = ("provider", "name", "locations")

    def __init__(self, provider: str, name: str, locations: Sequence[UsdtNote]):
        self.provider = provider
        self.name = name
        self.locations = tuple(locations)

    @property
    def path(self) -> str:
        """The ELF file of the first location (``""`` without locations)."""
        return self.locations[0].elf.path if self.locations else ""

    @property
    def elf(self) -> ElfInfo:
        """The ELF file of the first location."""
        return self.locations[0].elf

    @property
    def probe(self) -> str:
        """``provider:name``."""
        return f"{self.provider}:{self.name}"

    @property
    def semaphores(self) -> tuple[int, ...]:
        """The distinct non-zero semaphore addresses (as written), sorted."""
        return tuple(sorted({n.semaphore for n in self.locations if n.semaphore}))

    @property
    def arg_count(self) -> int:
        """The largest argument count over the locations (they normally agree)."""
        return max((n.arg_count for n in self.locations), default=0)

    def arguments(self, i: int) -> tuple[ArgSpec | UndecodableArg | None, ...]:
        """Argument ``i`` at each location (None where that location has fewer)."""
        return tuple(n.arguments[i] if i < n.arg_count else None for n in self.locations)

    def __len__(self) -> int:
        return len(self.locations)

    def __iter__(self) -> Iterator[UsdtNote]:
        return iter(self.locations)

    def __repr__(self) -> str:
        return f"UsdtProbe({self.provider}:{self.name}, {len(self.locations)} location(s))"


# ---------------------------------------------------------------------------
# reading the file

def _elf_error(path: str, exc: BaseException) -> UsdtNoteError:
    return UsdtNoteError(f"not a readable ELF file ({type(exc).__name__}: {exc})", path)


# pyelftools raises many different exceptions on hostile input; these are the
# ones a malformed file can cause (MemoryError and friends are left alone).
_PARSE_ERRORS: tuple[type[BaseException], ...] = (
    ValueError, KeyError, IndexError, TypeError, AttributeError, AssertionError,
    UnicodeDecodeError, OverflowError, EOFError, struct.error, RecursionError)
try:  # pragma: no cover - depends on the pyelftools version
    from elftools.common.exceptions import ELFError, ELFParseError
    _PARSE_ERRORS += (ELFError, ELFParseError)
except ImportError:  # pragma: no cover
    pass
try:  # pragma: no cover
    from elftools.construct.core import ConstructError
    _PARSE_ERRORS += (ConstructError,)
except ImportError:  # pragma: no cover
    pass


def _has_fast_headers() -> bool:
    from elftools.elf.elffile import ELFFile
    return all(hasattr(ELFFile, n) for n in ("_get_section_header", "_get_section_name",
                                               "_get_segment_header", "num_sections",
                                               "num_segments"))


_FAST_HEADERS = _has_fast_headers()


class _Layout(NamedTuple):
    info: ElfInfo
    notes: list[tuple[bytes, int, int]]   # (section bytes, file offset, alignment)


def _read_layout(stream: BinaryIO, path: str, size: int) -> _Layout:
    from elftools.elf.elffile import ELFFile

    stream.seek(0)
    magic = stream.read(4)
    if magic != b"\x7fELF":
        raise UsdtNoteError("not an ELF file (bad magic)", path)
    stream.seek(0)
    try:
        elf = ELFFile(stream)
        hdr = elf.header
        elfclass = elf.elfclass
        little = elf.little_endian
        machine = hdr["e_machine"]
        etype = hdr["e_type"]
        if not isinstance(machine, str):
            machine = f"EM_{machine}"
        if not isinstance(etype, str):
            etype = f"ET_{etype}"
        note_secs: list[tuple[int, int, int, str]] = []   # (offset, size, align, type)
        base_addr: int | None = None
        if _FAST_HEADERS:
            # pyelftools' header readers: no Section/Segment objects (the
            # public iterators also parse .dynamic and the hash tables).
            shdrs = (elf._get_section_header(i) for i in range(elf.num_sections()))
            named = ((elf._get_section_name(h), h) for h in shdrs)
            phdrs = [elf._get_segment_header(i) for i in range(elf.num_segments())]
        else:  # pragma: no cover - other pyelftools versions
            named = ((sec.name, sec.header) for sec in elf.iter_sections())
            phdrs = [seg.header for seg in elf.iter_segments()]
        for name, h in named:
            if name == NOTE_SECTION:
                note_secs.append((h["sh_offset"], h["sh_size"], h["sh_addralign"],
                                  h["sh_type"]))
            elif name == BASE_SECTION:
                base_addr = h["sh_addr"]
        segments = tuple(LoadSegment(h["p_vaddr"], h["p_memsz"], h["p_offset"], h["p_filesz"],
                                     h["p_flags"])
                         for h in phdrs if h["p_type"] == "PT_LOAD")
    except UsdtNoteError:
        raise
    except _PARSE_ERRORS as exc:
        raise _elf_error(path, exc) from None
    if elfclass not in (32, 64):
        raise UsdtNoteError(f"unknown ELF class {elfclass}", path)
    order = "<" if little else ">"
    archs, orders = _MACHINES.get(machine, ({}, "<>"))
    if archs:
        arch = archs.get(elfclass)
        if arch is None:
            raise UsdtNoteError(f"inconsistent ELF header: {machine} with ELFCLASS{elfclass}",
                                path)
        if order not in orders:
            raise UsdtNoteError(f"inconsistent ELF header: {machine} is never "
                                f"{'little' if little else 'big'}-endian", path)
        if arch == "ppc64" and little:
            arch = "ppc64le"
    else:
        arch = machine[3:].lower() if machine.startswith("EM_") else str(machine).lower()
    # can this host trace it?
    reason = None
    host = host_arch()
    host_order = "<" if sys.byteorder == "little" else ">"
    if arch != host:
        reason = f"{arch} file on a {host} host"
    elif order != host_order:
        reason = "byte order differs from this host's"
    elif elfclass != struct.calcsize("P") * 8:
        reason = f"{elfclass}-bit file on a {struct.calcsize('P') * 8}-bit host"
    elif etype not in ("ET_EXEC", "ET_DYN"):
        reason = f"{etype} file: only executables and shared objects can be traced"
    info = ElfInfo(path, arch, elfclass, little, machine, etype, base_addr, segments,
                   reason is None, reason)
    notes = []
    for off, sz, align, stype in note_secs:
        if stype == "SHT_NOBITS":     # a stripped copy: the notes are elsewhere
            continue
        if stype != "SHT_NOTE":
            raise UsdtNoteError(f"section {NOTE_SECTION} has type {stype}, not SHT_NOTE", path)
        if sz == 0:
            continue
        if off + sz > size:
            raise UsdtNoteError(f"section {NOTE_SECTION} [{off:#x}, {off + sz:#x}) runs past "
                                f"the end of the file ({size:#x} bytes)", path)
        stream.seek(off)
        data = stream.read(sz)
        if len(data) != sz:
            raise UsdtNoteError(f"section {NOTE_SECTION} is truncated", path)
        notes.append((data, off, 8 if align == 8 else 4))
    return _Layout(info, notes)


def _iter_section(data: bytes, file_off: int, align: int, info: ElfInfo,
                  start_index: int) -> Iterator[UsdtNote]:
    """The fast path: walk one note section's bytes."""
    order = "<" if info.little_endian else ">"
    hdr = struct.Struct(order + "III").unpack_from
    asz = 8 if info.elfclass == 64 else 4
    addrs = struct.Struct(order + ("QQQ" if asz == 8 else "III")).unpack_from
    need = 3 * asz
    n = len(data)
    pos = 0
    index = start_index
    path = info.path
    amask = align - 1
    while pos < n:
        if n - pos < 12:
            raise UsdtNoteError(f"truncated note header ({n - pos} bytes left, need 12)", path,
                                index, file_off + pos)
        namesz, descsz, ntype = hdr(data, pos)
        name_at = pos + 12
        desc_at = name_at + ((namesz + amask) & ~amask)
        desc_end = desc_at + descsz
        if desc_end > n:
            hint = ""
            if info.elf_type == "ET_REL":
                hint = ("; this is a relocatable object, whose note sizes may be set by "
                        "relocations (RISC-V does this): link it first")
            raise UsdtNoteError(f"note runs past the end of its section: name {namesz} and "
                                f"descriptor {descsz} bytes at offset {pos:#x} of a "
                                f"{n:#x}-byte section{hint}", path, index, file_off + pos)
        pos = (desc_end + amask) & ~amask
        if ntype != NT_STAPSDT:
            continue
        name = data[name_at:name_at + namesz]
        at = file_off + name_at - 12
        if name != b"stapsdt\0":
            if name.rstrip(b"\0") != b"stapsdt":
                continue
            if namesz == 7:
                raise UsdtNoteError(f"note name {name!r} is not the NUL-terminated 'stapsdt'",
                                    path, index, at)
        if descsz < need + 3:
            raise UsdtNoteError(f"descriptor too short: {descsz} bytes, need at least "
                                f"{need + 3} ({asz}-byte addresses and three NUL-terminated "
                                "strings)", path, index, at)
        loc, base, sema = addrs(data, desc_at)
        strs = data[desc_at + need:desc_end].split(b"\0", 3)
        if len(strs) < 4:
            which = ("provider", "name", "argument")[len(strs) - 1]
            raise UsdtNoteError(f"the {which} string is not NUL-terminated inside the "
                                f"{descsz}-byte descriptor", path, index, at)
        try:
            provider = strs[0].decode()
            pname = strs[1].decode()
            args = strs[2].decode()
        except UnicodeDecodeError as exc:
            raise UsdtNoteError(f"note strings are not UTF-8 ({exc.reason} at byte "
                                f"{exc.start})", path, index, at) from None
        if not provider:
            raise UsdtNoteError("empty provider name", path, index, at)
        if not pname:
            raise UsdtNoteError(f"empty probe name (provider {provider!r})", path, index, at)
        yield UsdtNote(info, index, provider, pname, loc, base, sema, args, at)
        index += 1


class UsdtFile:
    """The USDT probes of one ELF file.

    ``UsdtFile(path)`` reads the ELF headers and the ``.note.stapsdt`` bytes
    (then closes the file); notes are decoded lazily as you iterate.
    ``UsdtFile.from_bytes(data, path)`` does the same for bytes in memory.

    ``elf`` is the shared :class:`ElfInfo`; :meth:`iter_notes` /
    iteration yield :class:`UsdtNote` in file order; :meth:`notes` caches
    the list; :meth:`probes` groups them into :class:`UsdtProbe`.
    """

    def __init__(self, path: str | os.PathLike[str], *, display_path: str | None = None):
        p = os.fspath(path)
        shown = display_path or p
        with open(p, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            layout = _read_layout(f, shown, size)
        self._init(layout)

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<bytes>") -> "UsdtFile":
        """Parse an ELF image held in memory."""
        self = cls.__new__(cls)
        buf = io.BytesIO(bytes(data))
        self._init(_read_layout(buf, path, len(data)))
        return self

    def _init(self, layout: _Layout) -> None:
        self.elf = layout.info
        self._sections = layout.notes
        self._notes: list[UsdtNote] | None = None

    @property
    def path(self) -> str:
        """The file's path."""
        return self.elf.path

    @property
    def has_notes(self) -> bool:
        """The file has a non-empty ``.note.stapsdt`` section."""
        return bool(self._sections)

    def iter_notes(self) -> Iterator[UsdtNote]:
        """Yield each stapsdt note in file order, decoding as it goes; raises
        :class:`~pyebpf.errors.UsdtNoteError` on reaching a malformed one."""
        if self._notes is not None:
            yield from self._notes
            return
        index = 0
        for data, off, align in self._sections:
            for note in _iter_section(data, off, align, self.elf, index):
                index = note.index + 1
                yield note

    __iter__ = iter_notes

    def notes(self) -> list[UsdtNote]:
        """All notes (decoded once, then cached)."""
        if self._notes is None:
            self._notes = list(self.iter_notes())
        return self._notes

    def probes(self, provider: str | None = None, name: str | None = None) -> list[UsdtProbe]:
        """The probes, each with all its locations, in first-appearance order;
        ``provider``/``name`` filter with shell wildcards (``fnmatch``)."""
        return group_probes(_filter(self.notes(), provider, name))

    def __repr__(self) -> str:
        return f"UsdtFile({self.elf.path!r}, {self.elf.arch}, {self.elf.elf_type})"


def _filter(notes: Iterable[UsdtNote], provider: str | None, name: str | None
            ) -> Iterator[UsdtNote]:
    from fnmatch import fnmatchcase
    for n in notes:
        if provider is not None and not fnmatchcase(n.provider, provider):
            continue
        if name is not None and not fnmatchcase(n.name, name):
            continue
        yield n


def group_probes(notes: Iterable[UsdtNote]) -> list[UsdtProbe]:
    """Group notes by (path, provider, name), keeping first-appearance order."""
    groups: dict[tuple[str, str, str], list[UsdtNote]] = {}
    for n in notes:
        groups.setdefault((n.elf.path, n.provider, n.name), []).append(n)
    return [UsdtProbe(k[1], k[2], v) for k, v in groups.items()]


def iter_notes(path: str | os.PathLike[str]) -> Iterator[UsdtNote]:
    """Lazily yield the stapsdt notes of the ELF file at ``path``."""
    yield from UsdtFile(path).iter_notes()


def read_notes(path: str | os.PathLike[str]) -> list[UsdtNote]:
    """All stapsdt notes of the ELF file at ``path``."""
    return UsdtFile(path).notes()


def read_probes(path: str | os.PathLike[str], provider: str | None = None,
                name: str | None = None) -> list[UsdtProbe]:
    """The probes of the ELF file at ``path`` (see :meth:`UsdtFile.probes`)."""
    return UsdtFile(path).probes(provider, name)
