"""``.BTF.ext``: the per-section func_info, line_info and CO-RE relocation
records clang writes beside ``.BTF`` (names and access strings point into the
``.BTF`` string table).  ``insn_off`` is a byte offset in its ELF section, as
in the file (divide by 8 for an instruction index).

The records are small value classes (``__slots__``, equality, hashing, repr),
as :mod:`.types`' members and parameters are: every object load reads them,
and a named tuple class would cost it :mod:`collections` (~1.5 ms cold).
Line records, many to a program, write their ``__init__`` out; the others
take :class:`~.types._Plain`'s.
"""
from __future__ import annotations

import struct

from .errors import BtfError
from .reader import MAGIC
from .types import _Plain

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterator

    from .reader import Btf

__all__ = ["BtfExt", "FuncInfo", "LineInfo", "CoreRelo", "CORE_KINDS"]

#: magic, version, flags, hdr_len, then (off, len) pairs for func/line info and CO-RE relos
_HEAD = struct.Struct("<HBBI")
_PAIR = struct.Struct("<II")
_U32 = struct.Struct("<I")
_QUAD = struct.Struct("<IIII")
#: ``enum bpf_core_relo_kind``
CORE_KINDS = ("field_byte_offset", "field_byte_size", "field_exists", "field_signed",
              "field_lshift_u64", "field_rshift_u64", "type_id_local", "type_id_target",
              "type_exists", "type_size", "enumval_exists", "enumval_value", "type_matches")


class FuncInfo(_Plain):
    """A function starting at ``insn_off`` (bytes) of ``section``, of FUNC ``type_id``."""

    __slots__ = ("section", "insn_off", "type_id")
    section: str
    insn_off: int
    type_id: int

    if TYPE_CHECKING:
        def __init__(self, section: str, insn_off: int, type_id: int) -> None: ...


class LineInfo(_Plain):
    """The C source line of the instruction at ``insn_off`` (bytes) of ``section``."""

    __slots__ = ("section", "insn_off", "file_name", "line_text", "line", "column")

    def __init__(self, section: str, insn_off: int, file_name: str, line_text: str,
                 line: int, column: int):
        self.section = section
        self.insn_off = insn_off
        self.file_name = file_name
        self.line_text = line_text
        self.line = line
        self.column = column


class CoreRelo(_Plain):
    """A CO-RE relocation: the instruction at ``insn_off`` (bytes) of ``section``
    reads ``access`` (``"0:1:2"``) from local type ``type_id``; ``kind`` is a
    number of :data:`CORE_KINDS`."""

    __slots__ = ("section", "insn_off", "type_id", "access", "kind")
    section: str
    insn_off: int
    type_id: int
    access: str
    kind: int

    if TYPE_CHECKING:
        def __init__(self, section: str, insn_off: int, type_id: int, access: str,
                     kind: int) -> None: ...

    @property
    def kind_name(self) -> str:
        """The kind as libbpf's debug output names it (``field_byte_offset``...)."""
        return CORE_KINDS[self.kind] if self.kind < len(CORE_KINDS) else f"kind {self.kind}"


class BtfExt:
    """A parsed ``.BTF.ext``: ``func_info``, ``line_info`` and ``core_relos``,
    each a dict of ELF section name -> records in file order."""

    def __init__(self, data: bytes | bytearray | memoryview, btf: Btf) -> None:
        self.data = d = bytes(data)
        self.btf = btf
        if len(d) < _HEAD.size + 2 * _PAIR.size:
            raise BtfError(f".BTF.ext of {len(d)} bytes is too short for its header", 0)
        magic, version, _flags, hdr_len = _HEAD.unpack_from(d, 0)
        if magic != MAGIC:
            raise BtfError(f".BTF.ext: bad magic {magic:#06x}", 0)
        if version != 1:
            raise BtfError(f".BTF.ext: unsupported version {version}", 2)
        if hdr_len < 24 or hdr_len > len(d):
            raise BtfError(f".BTF.ext: header length {hdr_len} outside 24..{len(d)}", 4)
        self.hdr_len = hdr_len
        self._strings: dict[int, str] = {}
        self.func_info = self._section(8, 8, "func_info", self._funcs)
        self.line_info = self._section(16, 16, "line_info", self._lines)
        self.core_relos = (self._section(24, 16, "CO-RE relocation", self._cores)
                           if hdr_len >= 32 else {})

    @classmethod
    def from_elf(cls, path: str, btf: Btf | None = None) -> BtfExt:
        """The ``.BTF.ext`` of an ELF object (with its ``.BTF``, read if not given)."""
        from .reader import Btf, elf_section
        data = elf_section(path, ".BTF.ext")
        if data is None:
            raise BtfError(f"{path} has no .BTF.ext section (compile with clang -g)")
        return cls(data, btf if btf is not None else Btf.from_elf(path))

    def _section(self, at: int, min_rec: int, what: str, make):  # type: ignore[no-untyped-def]
        d = self.data
        off, length = _PAIR.unpack_from(d, at)
        if not length:
            return {}
        start = self.hdr_len + off
        end = start + length
        if end > len(d) or length < 4:
            raise BtfError(f".BTF.ext: {what} ({off}+{length}) runs past the end", at)
        (rec_size,) = _U32.unpack_from(d, start)
        if rec_size < min_rec or rec_size % 4:
            raise BtfError(f".BTF.ext: {what} record size {rec_size} (at least {min_rec}, "
                           "a multiple of 4)", start)
        out: dict[str, list] = {}  # type: ignore[type-arg]
        pos = start + 4
        s = self._string
        while pos < end:
            if pos + 8 > end:
                raise BtfError(f".BTF.ext: truncated {what} block header", pos)
            name_off, count = _PAIR.unpack_from(d, pos)
            if count == 0:
                raise BtfError(f".BTF.ext: empty {what} block", pos)
            pos += 8
            if pos + count * rec_size > end:
                raise BtfError(f".BTF.ext: {count} {what} records run past the end", pos)
            try:
                sec = s(name_off)
                out.setdefault(sec, []).extend(
                    make(sec, _records(d, pos, count, rec_size, min_rec)))
            except BtfError as exc:
                raise BtfError(f".BTF.ext: {exc.reason}", pos) from None
            pos += count * rec_size
        return out

    def _funcs(self, sec: str, recs: Iterator[tuple[int, ...]]) -> list[FuncInfo]:
        return [FuncInfo(sec, off, tid) for off, tid in recs]

    def _string(self, offset: int) -> str:
        """The BTF's string at ``offset``, each asked of it once (a file name
        is in every line record)."""
        got = self._strings.get(offset)
        if got is None:
            got = self._strings[offset] = self.btf.string(offset)
        return got

    def _lines(self, sec: str, recs: Iterator[tuple[int, ...]]) -> list[LineInfo]:
        s = self._string
        return [LineInfo(sec, off, s(file_off), s(line_off), line_col >> 10, line_col & 0x3FF)
                for off, file_off, line_off, line_col in recs]

    def _cores(self, sec: str, recs: Iterator[tuple[int, ...]]) -> list[CoreRelo]:
        s = self._string
        return [CoreRelo(sec, off, tid, s(acc_off), kind) for off, tid, acc_off, kind in recs]


def _records(d: bytes, at: int, count: int, rec_size: int,
             used: int) -> Iterator[tuple[int, ...]]:
    """The first ``used`` bytes (u32s) of ``count`` records of ``rec_size``
    bytes from ``at`` (a record may be longer than the fields read)."""
    fmt = struct.Struct(f"<{used // 4}I{rec_size - used}x")
    return fmt.iter_unpack(d[at:at + count * rec_size])
