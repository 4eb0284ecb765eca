"""``.note.stapsdt`` notes: read every USDT probe site of an ELF file.

Each probe site that sys/sdt.h (``STAP_PROBEn``/``DTRACE_PROBEn``) compiles
leaves one SHT_NOTE entry, name ``"stapsdt"``, type 3, whose descriptor is

    pc, base, semaphore   three addresses of the ELF class's size (4 or 8
                          bytes) in the file's byte order
    provider\\0 name\\0 args\\0

The ELF side -- headers, sections, PT_LOAD segments, the note walk and the
vaddr -> offset rule -- is :mod:`pyebpf.elf`'s (:mod:`pyebpf.elf.headers`);
this module decodes the stapsdt descriptors and turns their addresses into
what a uprobe needs:

* ``address``: the pc, adjusted by ``.stapsdt.base``'s sh_addr minus the
  note's base -- only when both are non-zero (prelinked files; libbpf's rule
  since v1.6.0).  The semaphore is adjusted by the same amount (prelink moves
  ``.probes`` with everything else; gdb and systemtap do the same, libbpf does
  not).
* ``offset``: the file offset of that address through the PT_LOAD segment
  that holds it, which must be executable (``vaddr - p_vaddr + p_offset``;
  correct for layouts where vaddr != offset such as lld's); the address
  must have bytes in the file (``backing="file"``).
* ``semaphore_offset``: the semaphore's file offset through a non-executable
  PT_LOAD segment (the kernel's ``ref_ctr_offset``), 0 when there is none;
  a semaphore in ``.bss`` is fine while it lies in the page the file maps
  (``backing="mapping"``, see :mod:`pyebpf.elf.headers`).

32-bit and big-endian files are decoded correctly (address sizes follow the
ELF class); :attr:`ElfInfo.traceable` says whether this host can trace them.

Errors: :class:`~pyebpf.errors.UsdtNoteError` for anything malformed (never
another exception, whatever the bytes); ``OSError`` when the file cannot be
read.  An argument spec that cannot be decoded does not raise here: it is an
:class:`~pyebpf.usdt.spec.UndecodableArg` in :attr:`UsdtNote.arguments`.
"""
from __future__ import annotations

import os
import platform
import struct
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

from .._record import keyed_by
from ..elf.errors import ElfError, NoteError
from ..elf.headers import ElfHeaders, Segment, iter_notes as _elf_notes, segment_at
from ..errors import UsdtNoteError, UsdtSpecError
from .spec import SUPPORTED_ARCHES, ArgSpec, UndecodableArg, parse_args, split_args

__all__ = ["ElfInfo", "LoadSegment", "UsdtFile", "UsdtNote", "UsdtProbe", "iter_notes",
           "read_notes", "read_probes", "group_probes", "host_arch", "NT_STAPSDT"]

NT_STAPSDT = 3
NOTE_SECTION = ".note.stapsdt"
BASE_SECTION = ".stapsdt.base"

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


#: a PT_LOAD program header (:class:`pyebpf.elf.Segment`; the name is kept for
#: existing users)
LoadSegment = Segment


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
    segments: tuple[Segment, ...]
    traceable: bool
    untraceable_reason: str | None

    def segment_for(self, vaddr: int) -> Segment | None:
        """The PT_LOAD segment whose [vaddr, vaddr + memsz) holds ``vaddr``."""
        return segment_at(self.segments, vaddr)

    def file_offset(self, vaddr: int, executable: bool) -> int:
        """``vaddr``'s file offset through its PT_LOAD segment, which must be
        executable (``executable=True``: a probe location, with bytes in the
        file) or not (a semaphore, in the part the file maps); raises
        UsdtNoteError.  The rule is :meth:`pyebpf.elf.Segment.file_offset`'s."""
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
        off = seg.file_offset(vaddr, "file" if executable else "mapping")
        if off is None:
            if executable:
                raise UsdtNoteError(f"address {vaddr:#x} is in the zero-filled part of "
                                    f"segment [{seg.vaddr:#x}, {seg.vaddr + seg.memsz:#x}), "
                                    "which has no bytes in the file", self.path)
            raise UsdtNoteError(f"address {vaddr:#x} is in the zero-filled (.bss) part of "
                                f"segment [{seg.vaddr:#x}, {seg.vaddr + seg.memsz:#x}), past "
                                f"the last page mapped from the file ({seg.mapped_end:#x}): "
                                "anonymous memory, which the kernel cannot update through "
                                "the file (ref_ctr_offset)", self.path)
        return off


@keyed_by("_key")
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
        """What equality and hashing compare (see @keyed_by)."""
        return (self.elf.path, self.provider, self.name, self.location, self.base,
                self.semaphore, self.args)

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

class _Layout(NamedTuple):
    info: ElfInfo
    notes: list[tuple[bytes, int, int]]   # (section bytes, file offset, alignment)


def _name(value: str, prefix: str) -> str:
    """pyelftools names unknown numbers with the bare number: give them the prefix."""
    return f"{prefix}{value}" if value.isdigit() else value


def _read_layout(path: str, shown: str, data: bytes | None) -> _Layout:
    """The headers (through :mod:`pyebpf.elf`) and the stapsdt note sections."""
    if data is not None:
        magic = data[:4]
    else:
        with open(path, "rb") as f:
            magic = f.read(4)
    if magic != b"\x7fELF":
        raise UsdtNoteError("not an ELF file (bad magic)", shown)
    try:
        elf = ElfHeaders(path, data)
    except ElfError as exc:
        why = str(exc).replace(f"{path}: ", "").replace(f"{path} ", "")
        raise UsdtNoteError(f"not a readable ELF file ({why})", shown) from None
    elfclass, little = elf.elfclass, elf.little_endian
    machine, etype = _name(elf.machine, "EM_"), _name(elf.type, "ET_")
    base_sec = elf.section(BASE_SECTION)
    base_addr = base_sec.addr if base_sec is not None else None
    if elfclass not in (32, 64):
        raise UsdtNoteError(f"unknown ELF class {elfclass}", shown)
    order = "<" if little else ">"
    archs, orders = _MACHINES.get(machine, ({}, "<>"))
    if archs:
        arch = archs.get(elfclass)
        if arch is None:
            raise UsdtNoteError(f"inconsistent ELF header: {machine} with ELFCLASS{elfclass}",
                                shown)
        if order not in orders:
            raise UsdtNoteError(f"inconsistent ELF header: {machine} is never "
                                f"{'little' if little else 'big'}-endian", shown)
        if arch == "ppc64" and little:
            arch = "ppc64le"
    else:
        arch = machine[3:].lower() if machine.startswith("EM_") else str(machine).lower()
    # can this host trace it?
    reason: str | None = None
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
    info = ElfInfo(shown, arch, elfclass, little, machine, etype, base_addr, elf.segments,
                   reason is None, reason)
    notes = []
    for sec in elf.sections:
        if sec.name != NOTE_SECTION or sec.type == "SHT_NOBITS":
            continue                  # (NOBITS: a stripped copy, the notes are elsewhere)
        if sec.type != "SHT_NOTE":
            raise UsdtNoteError(f"section {NOTE_SECTION} has type {sec.type}, not SHT_NOTE",
                                shown)
        off, sz = sec.offset, sec.size
        if sz == 0:
            continue
        try:
            body = elf.read_bytes(off, sz, NOTE_SECTION)
        except ElfError:
            raise UsdtNoteError(f"section {NOTE_SECTION} [{off:#x}, {off + sz:#x}) runs past "
                                "the end of the file", shown) from None
        notes.append((body, off, 8 if sec.align == 8 else 4))
    return _Layout(info, notes)


def _iter_section(data: bytes, file_off: int, align: int, info: ElfInfo,
                  start_index: int) -> Iterator[UsdtNote]:
    """Decode the stapsdt notes of one note section's bytes."""
    order = "<" if info.little_endian else ">"
    asz = 8 if info.elfclass == 64 else 4
    addrs = struct.Struct(order + ("QQQ" if asz == 8 else "III")).unpack_from
    need = 3 * asz
    index = start_index
    path = info.path
    notes = _elf_notes(data, little_endian=info.little_endian, align=align)
    while True:
        try:
            note = next(notes, None)
        except NoteError as exc:
            hint = ""
            if not exc.truncated_header and info.elf_type == "ET_REL":
                hint = ("; this is a relocatable object, whose note sizes may be set by "
                        "relocations (RISC-V does this): link it first")
            raise UsdtNoteError(f"{exc}{hint}", path, index, file_off + exc.position) from None
        if note is None:
            return
        if note.type != NT_STAPSDT:
            continue
        name = note.name
        at = file_off + note.start
        if name != b"stapsdt\0":
            if name.rstrip(b"\0") != b"stapsdt":
                continue
            if len(name) == 7:
                raise UsdtNoteError(f"note name {name!r} is not the NUL-terminated 'stapsdt'",
                                    path, index, at)
        desc_at, desc_end = note.desc_start, note.desc_end
        descsz = desc_end - desc_at
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
        self._init(_read_layout(p, display_path or p, None))

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<bytes>") -> "UsdtFile":
        """Parse an ELF image held in memory."""
        self = cls.__new__(cls)
        self._init(_read_layout(path, path, bytes(data)))
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
