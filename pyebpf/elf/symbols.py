"""Symbols: name -> address (with versions, like the dynamic linker) and address -> name.

:class:`SymbolTable` adds them to :class:`~pyebpf.elf.headers.ElfHeaders`:
``.dynsym`` and ``.symtab`` unpacked with :mod:`struct` (about 100x faster
than per-symbol pyelftools objects, which matters for binaries with 100k
symbols), version names from ``.gnu.version_d``/``.gnu.version_r``, a name
index, and a sorted table for :meth:`SymbolTable.symbolize`.
"""
from __future__ import annotations

import bisect
import struct
from _thread import allocate_lock as _allocate_lock

from .._record import Record, record
from ..errors import close_matches as _close_matches
from .errors import AmbiguousSymbolError, ElfError, SymbolNotFoundError
from .headers import ElfHeaders
from .layouts import (SHN_ABS, SHN_UNDEF, STB_GLOBAL, STB_GNU_UNIQUE, STB_LOCAL, STB_WEAK,
                      STT_FUNC, STT_GNU_IFUNC, STT_NOTYPE, STT_OBJECT, VERSYM_HIDDEN, layout)

__all__ = ["Symbol", "Location", "SymbolTable", "parse_location", "cstr"]

_TYPE_NAMES = {STT_NOTYPE: "NOTYPE", STT_OBJECT: "OBJECT", STT_FUNC: "FUNC",
               STT_GNU_IFUNC: "IFUNC"}
_BIND_NAMES = {STB_LOCAL: "LOCAL", STB_GLOBAL: "GLOBAL", STB_WEAK: "WEAK",
               STB_GNU_UNIQUE: "UNIQUE"}
_KEPT_TYPES = (STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_GNU_IFUNC)
# binding preference when one name has several addresses: global > weak > local
BIND_RANK = {STB_GLOBAL: 0, STB_GNU_UNIQUE: 0, STB_WEAK: 1, STB_LOCAL: 2}


def cstr(table: bytes, offset: int) -> str:
    """The NUL-terminated string at ``offset`` of a string table."""
    end = table.find(b"\0", offset)
    if end < 0:
        end = len(table)
    return table[offset:end].decode("utf-8", "surrogateescape")



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




class SymbolTable(ElfHeaders):
    """:class:`~pyebpf.elf.headers.ElfHeaders` with the file's symbols."""

    def __init__(self, path: str, data: bytes | None = None) -> None:
        super().__init__(path, data)
        self._lock = _allocate_lock()
        self._symbols: list[Symbol] | None = None
        self._by_name: dict[str, list[Symbol]] | None = None
        self._sorted: tuple[list[int], list[Symbol]] | None = None

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
        verdef, verdaux, verneed, vernaux = (
            layout(n, self.elfclass, self.little_endian).unpack_from
            for n in ("Verdef", "Verdaux", "Verneed", "Vernaux"))
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
                    _v, _flags, ndx, cnt, _hash, aux, nxt = verdef(data, pos)
                    if cnt and pos + aux + 8 <= len(data):
                        names[ndx] = (cstr(strtab, verdaux(data, pos + aux)[0]), True)
                else:
                    _v, cnt, _file, aux, nxt = verneed(data, pos)
                    apos = pos + aux
                    for _k in range(cnt):
                        if apos + 16 > len(data):
                            break
                        _hash, _flags, other, name_off, anext = vernaux(data, apos)
                        names.setdefault(other, (cstr(strtab, name_off), False))
                        if not anext:
                            break
                        apos += anext
                if not nxt:
                    break
                pos += nxt
        return names

    def _load_symbols(self) -> list[Symbol]:
        is64 = self.elfclass == 64
        fmt = layout("Sym", self.elfclass, self.little_endian)
        half = layout("Half", self.elfclass, self.little_endian)
        out: list[Symbol] = []
        seen: set[tuple[str, int]] = set()
        tables = [s for s in self.sections if s.type == "SHT_DYNSYM"] + \
                 [s for s in self.sections if s.type == "SHT_SYMTAB"]
        for sec in tables:
            if sec.link >= len(self.sections) or sec.size == 0:
                continue
            records = self.section_entries(sec, fmt, "symbol table", "symbol")
            strtab = self.section_data(self.sections[sec.link])
            versym: tuple[int, ...] | None = None
            vernames: dict[int, tuple[str, bool]] = {}
            if sec.type == "SHT_DYNSYM":
                vs = next((s for s in self.sections if s.type == "SHT_GNU_versym"), None)
                if vs is not None:
                    raw = self.section_data(vs)
                    n = len(raw) // half.size       # one Half per symbol
                    versym = struct.unpack(f"{half.format[0]}{n}H", raw[:n * half.size])
                    vernames = self._version_names()
            table = sec.name or (".dynsym" if sec.type == "SHT_DYNSYM" else ".symtab")
            for i, rec in enumerate(records):
                if is64:
                    name_off, info, _other, shndx, value, size = rec
                else:
                    name_off, value, size, info, _other, shndx = rec
                stype = info & 0xF
                if stype not in _KEPT_TYPES or shndx == SHN_UNDEF or shndx == SHN_ABS \
                        or not name_off:
                    continue
                name = cstr(strtab, name_off)
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
        best = min(BIND_RANK.get(s.bind, 3) for s in by_addr.values())
        top = [s for s in by_addr.values() if BIND_RANK.get(s.bind, 3) == best]
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
                                     BIND_RANK.get(s.bind, 3), s.table != ".dynsym"))
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
