"""The disassembly of a clang-built BPF object, section by section, as
``llvm-objdump -d -r -S`` shows it::

    from pyebpf.objects.listing import disassemble_object
    print(disassemble_object("execsnoop.bpf.o"))

What the object file says about its code is shown beside the instructions:

* function boundaries and labels from the symbol table (``<name>:``, several
  functions per section, ``.text`` subprograms), used as jump and call targets;
* relocations as comments: ``# map counts``, ``# .rodata+16 (fmt)``,
  ``# scale (.rodata.cfg+0)``, ``# call bump``, ``# callback add_one``,
  ``# extern LINUX_KERNEL_VERSION (kconfig)``, ``# kfunc bpf_rcu_read_lock``;
* CO-RE relocations from ``.BTF.ext``, their access strings resolved to
  member names: ``# CO-RE: field_byte_offset struct task_struct.pid``;
* the C source lines of ``.BTF.ext`` line info, ``; text`` before the
  instructions they compiled to.

The instructions themselves are the bytes of the file, unrelocated (a call
waiting for its relocation is ``call pc-1``, a map reference ``r1 = 0 ll``):
the whole listing -- and the plain one without annotations -- assembles with
``pyebpf asm`` to the code sections' bytes, one after the other.
"""
from __future__ import annotations

import os
import struct

from ..btf import Btf, BtfExt, Kind
from ..btf.core import parse_spec
from ..btf.ext import CoreRelo
from ..errors import PyebpfError
from ..text.disasm import disassemble, usable_label
from .elfobj import ObjElf, ObjSection, ObjSymbol
from .errors import ObjectError

__all__ = ["disassemble_object", "code_sections"]

_SLOT = struct.Struct("<BBhi")
_STT_NOTYPE, _STT_OBJECT, _STT_FUNC, _STT_SECTION = 0, 1, 2, 3
_OP_LD_IMM64, _OP_CALL = 0x18, 0x85
_MAP_SECTIONS = (".maps", "maps")


def code_sections(elf: ObjElf) -> list[ObjSection]:
    """The executable sections of ``elf`` that hold code, in file order."""
    return [sec for sec in elf.sections if sec.is_code and sec.size > 0]


def disassemble_object(path: str | os.PathLike[str], section: str | None = None, *,
                       data: bytes | None = None, annotate: bool = True, dialect: str = "llvm",
                       style: str = "objdump", labels: bool = True,
                       show_index: bool | None = None) -> str:
    """The disassembly of the BPF object file at ``path`` (``data``: its
    bytes, when read already; ``path`` then only names it in messages).

    Every code section, or only ``section`` (any section, by name).  With
    ``annotate`` (the default) it is laid out as llvm-objdump does -- section
    headers, ``0000000000000028 <name>:`` labels, slot indexes -- with the
    relocation, CO-RE and source annotations of the module docstring;
    without, it is plain text to edit and assemble: ``# section NAME``
    comments, ``name:`` labels, instructions.  Either assembles back to the
    sections' bytes.  ``dialect``, ``style`` and ``labels`` are those of
    :func:`pyebpf.text.disassemble`; ``show_index`` defaults to ``annotate``.

    A file that is not a BPF object is an :class:`ObjectFileError`; a missing
    section an :class:`ObjectError`.  Damaged BTF only loses the annotations
    it would give (a comment says why).
    """
    name = os.fspath(path)
    # (read as BpfObject reads its file; a listing does not open a BpfObject,
    # which refuses what it could not load, e.g. an extern of an unknown kind)
    elf = ObjElf.read(name, data)
    if section is None:
        sections = code_sections(elf)
    else:
        sec = elf.section(section)
        if sec is None:
            known = ", ".join(s.name for s in code_sections(elf)) or "none"
            raise ObjectError(f"{elf.path}: no section {section!r} (code sections: {known})")
        sections = [sec]
    lister = _Lister(elf, dialect, style, labels, annotate,
                     annotate if show_index is None else show_index)
    parts = [lister.notice] if lister.notice else []
    for sec in sections:
        parts.append(lister.section(sec, len(sections) > 1))
    return "\n".join(parts)


def _printable(text: str) -> str:
    """``text`` on one line (a name or source line from the file may hold anything)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\t" else "?" for c in text)


class _Lister:
    """What one object's sections are listed with: its symbols, BTF and
    .BTF.ext, the externs' kinds, the labels used so far."""

    def __init__(self, elf: ObjElf, dialect: str, style: str, labels: bool, annotate: bool,
                 show_index: bool) -> None:
        self.elf = elf
        self.dialect, self.style, self.labels = dialect, style, labels
        self.annotate, self.show_index = annotate, show_index
        self.btf: Btf | None = None
        self.ext: BtfExt | None = None
        self.notice = ""
        self.externs: dict[str, str] = {}
        self.used: set[str] = set()
        if annotate:
            self._read_btf()

    def _read_btf(self) -> None:
        sec = self.elf.section(".BTF")
        if sec is None:
            return
        try:
            self.btf = Btf(sec.data)
            ext = self.elf.section(".BTF.ext")
            if ext is not None:
                self.ext = BtfExt(ext.data, self.btf)
            self.externs = _extern_kinds(self.btf)
        except PyebpfError as exc:
            self.notice = f"# {_printable(str(exc))}: no CO-RE or source annotations"
            self.ext = None

    # ------------------------------------------------------------- a section
    def section(self, sec: ObjSection, several: bool) -> str:
        """The listing of one section (its header first)."""
        name = _printable(sec.name)
        symbols, others = self._symbols(sec)
        before: dict[int, list[str]] = {}
        for slot, names in others.items():      # (a comment where the label would be)
            for n in names:
                if self.annotate:
                    before.setdefault(slot, []).extend(
                        ("", f"# {slot * 8:016x} <{n}>: (not usable as a label)"))
                else:
                    before.setdefault(slot, []).append(f"# {n}: (not usable as a label)")
        notes: dict[int, str] = {}
        if self.annotate:
            for slot, text in self._source_lines(sec).items():
                before.setdefault(slot, []).insert(0, text)
            for slot, note in self._notes(sec).items():
                notes[slot] = "; ".join(note)
        body = disassemble(sec.data, self.dialect, self.style, labels=self.labels,
                           show_index=self.show_index, comments=notes or None,
                           symbols=symbols, label_prefix=f"s{sec.index}_" if several else "",
                           before=before or None, objdump_labels=self.annotate,
                           relocated={off // 8 for off in sec.relocs})
        if self.annotate:
            return f"Disassembly of section {name}:\n{body}"
        return f"# section {name}\n{body}"

    def _symbols(self, sec: ObjSection) -> tuple[dict[int, str], dict[int, list[str]]]:
        """Labels of ``sec`` (slot -> name), and the names that cannot be
        labels (slot -> names).  Of several symbols at one slot, a function
        wins, else the last by name (the one llvm-objdump 14 prints)."""
        best: dict[int, ObjSymbol] = {}
        for s in self.elf.symbols:
            if (s.shndx != sec.index or not s.name or s.type not in (_STT_NOTYPE, _STT_FUNC)
                    or s.value % 8 or s.value >= sec.size):
                continue
            cur = best.get(s.value // 8)
            if cur is None or (s.type == _STT_FUNC, s.name) > (cur.type == _STT_FUNC, cur.name):
                best[s.value // 8] = s
        names: dict[int, str] = {}
        others: dict[int, list[str]] = {}
        for slot, s in sorted(best.items()):
            if usable_label(s.name) and s.name not in self.used:
                names[slot] = s.name
                self.used.add(s.name)
            else:
                others.setdefault(slot, []).append(_printable(s.name))
        return names, others

    def _source_lines(self, sec: ObjSection) -> dict[int, str]:
        """Slot -> ``; C source line`` where the line info changes line."""
        out: dict[int, str] = {}
        if self.ext is None:
            return out
        last: tuple[str, int] | None = None
        for li in self.ext.line_info.get(sec.name, ()):
            text = li.line_text.rstrip()
            if not text.strip():        # no line (clang's line 0): the next one shows again
                last = None
                continue
            if (li.file_name, li.line) == last or li.insn_off % 8:
                continue
            last = (li.file_name, li.line)
            out[li.insn_off // 8] = "; " + _printable(text)
        return out

    def _notes(self, sec: ObjSection) -> dict[int, list[str]]:
        """Slot -> the relocation and CO-RE notes of that instruction."""
        notes: dict[int, list[str]] = {}
        for off, symi in sorted(sec.relocs.items()):
            if off % 8 or off + 8 > len(sec.data):
                continue
            code, _, _, imm = _SLOT.unpack_from(sec.data, off)
            note = self._relocation(code, imm, self.elf.symbols[symi])
            notes.setdefault(off // 8, []).append(_printable(note))
        if self.ext is not None and self.btf is not None:
            for r in self.ext.core_relos.get(sec.name, ()):
                if r.insn_off % 8 == 0:
                    notes.setdefault(r.insn_off // 8, []).append(
                        _printable(f"CO-RE: {r.kind_name} {self._core_target(r)}"))
        return notes

    def _core_target(self, r: CoreRelo) -> str:
        """What a CO-RE relocation reads: ``struct task_struct.pid``."""
        assert self.btf is not None
        try:
            return parse_spec(self.btf, r.type_id, r.access, r.kind).describe()
        except PyebpfError:
            return f"type [{r.type_id}] access {r.access!r} (does not fit the type)"

    # ------------------------------------------------------------ relocations
    def _relocation(self, code: int, imm: int, sym: ObjSymbol) -> str:
        """The note of a relocation against ``sym`` on an instruction."""
        elf = self.elf
        if sym.shndx == 0:
            if code == _OP_CALL:
                return f"kfunc {sym.name}"
            kind = self.externs.get(sym.name)
            return f"extern {sym.name}" + (f" ({kind})" if kind else "")
        if sym.shndx >= len(elf.sections):     # SHN_ABS, SHN_COMMON...
            return sym.name
        target = elf.sections[sym.shndx]
        if target.name in _MAP_SECTIONS:
            return f"map {sym.name}"
        if target.is_code:
            if code == _OP_CALL:
                return f"call {self._code_at(target, sym.value + (imm + 1) * 8)}"
            if code == _OP_LD_IMM64:
                return f"callback {self._code_at(target, sym.value + imm)}"
            return sym.name
        if code != _OP_LD_IMM64:
            return sym.name
        where = f"{target.name}+{sym.value + imm}"
        if sym.type == _STT_SECTION:
            var = self._object_at(target, sym.value + imm)
            return f"{where} ({var})" if var else where
        return f"{sym.name}{f'+{imm}' if imm else ''} ({where})"

    def _code_at(self, sec: ObjSection, byte: int) -> str:
        """The function at byte ``byte`` of code section ``sec``: ``name``,
        ``name+off`` inside one, else ``section+byte``."""
        best: ObjSymbol | None = None
        for s in self.elf.symbols:
            if s.shndx == sec.index and s.type == _STT_FUNC and s.value <= byte \
                    and (best is None or s.value > best.value):
                best = s
        if best is None or (best.size and byte >= best.value + best.size):
            return f"{sec.name}+{byte}"
        return best.name if byte == best.value else f"{best.name}+{byte - best.value}"

    def _object_at(self, sec: ObjSection, byte: int) -> str | None:
        """The variable of data section ``sec`` that holds byte ``byte``, if a symbol says."""
        for s in self.elf.symbols:
            if s.shndx == sec.index and s.type == _STT_OBJECT and s.name \
                    and s.value <= byte < s.value + max(s.size, 1):
                return s.name if byte == s.value else f"{s.name}+{byte - s.value}"
        return None


def _extern_kinds(btf: Btf) -> dict[str, str]:
    """Extern name -> ``kconfig``, ``ksym`` or ``kfunc``, from the BTF DATASECs."""
    out: dict[str, str] = {}
    for name in (".kconfig", ".ksyms"):
        for tid in btf.find(name, Kind.DATASEC):
            for v in btf[tid].secinfo:
                var = btf[v.type]
                out[var.name] = ("kconfig" if name == ".kconfig" else
                                 "kfunc" if var.kind == Kind.FUNC else "ksym")
    return out
