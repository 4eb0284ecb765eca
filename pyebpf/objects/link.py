"""Instruction slots of an object's code sections, and the linking of one
program: its function, then every function it calls or takes the address
of (bpf-to-bpf calls, callbacks), appended once each, with call offsets,
func_info and line_info rewritten for the new positions.

A program is linked as bytes (:class:`Linked`): each function's code is
copied whole from its section (after CO-RE), and only the slots that need
it -- calls, relocations, found once per function by :class:`CodeIndex` --
are decoded as :class:`Slot` and written back; a helper linked into 150
programs is not decoded 150 times."""
from __future__ import annotations

import struct

from .errors import ObjectError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .elfobj import ObjElf, ObjSymbol

__all__ = ["Slot", "Func", "decode_slots", "encode_slots", "Linked", "link_program", "CodeIndex",
           "SectionCode",
           "OP_CALL", "OP_LD_IMM64", "PSEUDO_CALL", "PSEUDO_FUNC"]

_SLOT = struct.Struct("<BBhi")
OP_CALL = 0x85
OP_LD_IMM64 = 0x18
PSEUDO_CALL = 1
PSEUDO_FUNC = 4


class Slot:
    """One 8-byte instruction slot (mutable): ``code``, ``dst``, ``src``, ``off``, ``imm``."""

    __slots__ = ("code", "dst", "src", "off", "imm")

    def __init__(self, code: int, dst: int, src: int, off: int, imm: int) -> None:
        self.code, self.dst, self.src, self.off, self.imm = code, dst, src, off, imm

    def copy(self) -> Slot:
        """A copy."""
        return Slot(self.code, self.dst, self.src, self.off, self.imm)


def decode_slots(data: bytes) -> list[Slot]:
    """The slots of a code section."""
    out = []
    for code, regs, off, imm in _SLOT.iter_unpack(data[:len(data) - len(data) % 8]):
        out.append(Slot(code, regs & 0xF, regs >> 4, off, imm))
    return out


def encode_slots(slots: list[Slot]) -> bytes:
    """The bytes of ``slots``."""
    pack = _SLOT.pack
    return b"".join(pack(s.code, (s.src << 4) | s.dst, s.off,
                         ((s.imm + 0x80000000) & 0xFFFFFFFF) - 0x80000000) for s in slots)


class Func:
    """A function of a code section: ``name``, ``section`` (index), ``start``
    and ``end`` (slots), ``is_global``."""

    __slots__ = ("name", "section", "start", "end", "is_global")

    def __init__(self, name: str, section: int, start: int, end: int, is_global: bool) -> None:
        self.name, self.section, self.start, self.end = name, section, start, end
        self.is_global = is_global


class _SlotBytes:
    """Instruction bytes whose slots are decoded only where asked, each a
    :class:`Slot` to change, written back by :meth:`_flush`."""

    def __init__(self, data: bytes | bytearray = b"") -> None:
        self.data = bytearray(data[:len(data) - len(data) % 8])
        self._slots: dict[int, Slot] = {}

    def __len__(self) -> int:
        return len(self.data) // 8

    def _slot(self, k: int) -> Slot:
        s = self._slots.get(k)
        if s is None:                # (the callers keep k in 0..len-1)
            code, regs, off, imm = _SLOT.unpack_from(self.data, k * 8)
            s = self._slots[k] = Slot(code, regs & 0xF, regs >> 4, off, imm)
        return s

    def _flush(self) -> bytes:
        for k, s in self._slots.items():
            _SLOT.pack_into(self.data, k * 8, s.code, (s.src << 4) | s.dst, s.off,
                            ((s.imm + 0x80000000) & 0xFFFFFFFF) - 0x80000000)
        self._slots.clear()
        return bytes(self.data)


class Linked(_SlotBytes):
    """A linked program: its bytes (``data``), the functions placed
    (``funcs``: (function, position); ``placed[(section, start)] =
    position``), and the positions holding a relocation to something other
    than code (``refs``: (position, section index, slot in section)), which
    the loader patches through :meth:`slot`."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[int, int, int]] = []
        self.placed: dict[tuple[int, int], int] = {}
        self.funcs: list[tuple[Func, int]] = []

    def slot(self, pos: int) -> Slot:
        """The slot at ``pos``, to read or change (written back by :meth:`encode`)."""
        return self._slot(pos)

    def encode(self) -> bytes:
        """The program's bytes, every changed slot written back."""
        return self._flush()


class SectionCode(_SlotBytes):
    """A code section's slots, decoded only where asked (``code[k]``, a
    :class:`Slot` to change: CO-RE patches a few of thousands) and written
    back by :meth:`commit`."""

    def __getitem__(self, k: int) -> Slot:
        return self._slot(k)

    def commit(self) -> bytes:
        """The section's bytes with every changed slot written back."""
        return self._flush()


class CodeIndex:
    """The object's code sections as bytes (after CO-RE: ``code`` holds
    them) and, per function, the slots linking looks at (calls and
    relocations), each found once."""

    def __init__(self, elf: ObjElf, code: dict[int, SectionCode],
                 funcs: dict[int, list[Func]]) -> None:
        self.elf = elf
        self.funcs = funcs
        self._bytes = {idx: c.commit() for idx, c in code.items()}
        self._marks: dict[tuple[int, int], list[int]] = {}

    def data(self, shndx: int) -> bytes:
        """The bytes of code section ``shndx``."""
        return self._bytes[shndx]

    def marks(self, func: Func) -> list[int]:
        """The slots of ``func`` (in its section) that hold a relocation or
        a bpf-to-bpf call."""
        key = (func.section, func.start)
        got = self._marks.get(key)
        if got is None:
            relocs = self.elf.sections[func.section].relocs
            data = self._bytes[func.section]
            got = self._marks[key] = [
                k for k in range(func.start, func.end)
                if k * 8 in relocs or (data[k * 8] == OP_CALL
                                       and data[k * 8 + 1] >> 4 == PSEUDO_CALL)]
        return got


def functions(elf: ObjElf, shndx: int) -> list[Func]:
    """The functions of code section ``shndx``, by start (a section without
    function symbols is one function)."""
    sec = elf.sections[shndx]
    nslots = len(sec.data) // 8
    syms = sorted((s for s in elf.symbols if s.shndx == shndx and s.type == 2),
                  key=lambda s: s.value)
    out = []
    for i, s in enumerate(syms):
        start = s.value // 8
        end = start + s.size // 8 if s.size else (syms[i + 1].value // 8 if i + 1 < len(syms)
                                                  else nslots)
        out.append(Func(s.name, shndx, start, min(end, nslots), s.bind != 0))
    if not out and nslots:
        out.append(Func(sec.name, shndx, 0, nslots, True))
    return out


def link_program(elf: ObjElf, main: Func, index: CodeIndex) -> Linked:
    """Place ``main`` and, transitively, every function it calls (see the
    module docstring)."""
    out = Linked()
    _place(out, main, index)
    funcs = index.funcs
    i = 0
    while i < len(out.funcs):
        func, base = out.funcs[i]
        i += 1
        sec = elf.sections[func.section]
        for k in index.marks(func):
            pos = base + k - func.start
            s = out.slot(pos)
            is_call = s.code == OP_CALL and s.src == PSEUDO_CALL
            symi = sec.relocs.get(k * 8)
            target: tuple[int, int] | None = None
            if symi is not None:
                sym = elf.symbols[symi]
                tsec = elf.sections[sym.shndx] if 0 < sym.shndx < len(elf.sections) else None
                if tsec is None or not tsec.is_code:
                    out.refs.append((pos, func.section, k))
                    continue
                if is_call:
                    target = (sym.shndx, sym.value // 8 + s.imm + 1)
                elif s.code == OP_LD_IMM64:
                    target = (sym.shndx, sym.value // 8 + s.imm // 8)
                    s.src = PSEUDO_FUNC
                else:
                    raise ObjectError(f"{sec.name}+{k * 8}: a relocation to code "
                                      f"{sym.name!r} on an instruction that is neither a "
                                      "call nor a 64-bit load")
            elif is_call:
                target = (func.section, k + s.imm + 1)
            if target is None:
                continue
            callee = _function_at(funcs.get(target[0], []), target[1])
            if callee is None:
                raise ObjectError(f"{sec.name}+{k * 8}: calls slot {target[1]} of "
                                  f"{elf.sections[target[0]].name}, where no function starts")
            where = out.placed.get((callee.section, callee.start))
            if where is None:
                where = _place(out, callee, index)
            dest = where + target[1] - callee.start
            s.imm = dest - (pos + 1)
    return out


def _function_at(funcs: list[Func], slot: int) -> Func | None:
    for f in funcs:
        if f.start <= slot < f.end:
            return f
    return None


def _place(out: Linked, func: Func, index: CodeIndex) -> int:
    base = len(out.data) // 8
    out.placed[(func.section, func.start)] = base
    out.funcs.append((func, base))
    out.data += index.data(func.section)[func.start * 8:func.end * 8]
    return base


def symbol_is_function(sym: ObjSymbol) -> bool:
    """STT_FUNC."""
    return sym.type == 2
