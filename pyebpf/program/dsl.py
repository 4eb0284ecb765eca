"""The instruction-building half of :class:`~pyebpf.program.Program`.

Each method appends one instruction and returns the program, so calls chain::

    p = Program("count")
    p.mov(R0, 0).exit()

Method names follow the conformance mnemonics (``mov``, ``add``, ``ldxw``,
``stxdw``, ``jeq``...).  The width comes from the registers: ``R1`` is the
64-bit register, ``W1`` (or ``R1.w``) its 32-bit view, which selects the ALU32
or JMP32 class.  Second operands are registers or integers (immediates).
Jump targets are label names (resolved when the program is finalised) or
integer slot offsets.
"""
from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from types import CodeType, FrameType

    from typing_extensions import Self

    from .core import StackFrame

from ..errors import ProgramError
from ..isa import Insn, helper as _helper, opcodes as op, s32


class Reg:
    """A register: ``R0``..``R10`` (64-bit) or their 32-bit views ``W0``..``W10``."""

    __slots__ = ("index", "is32")

    def __init__(self, index: int, is32: bool = False) -> None:
        if not 0 <= index <= 10:
            raise ProgramError(f"register r{index} does not exist (r0-r10)")
        self.index = index
        self.is32 = is32

    @property
    def w(self) -> "Reg":
        """The 32-bit view of this register."""
        return _W[self.index]

    @property
    def r(self) -> "Reg":
        """The 64-bit register."""
        return _R[self.index]

    def __repr__(self) -> str:
        return f"{'w' if self.is32 else 'r'}{self.index}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reg) and other.index == self.index and other.is32 == self.is32

    def __hash__(self) -> int:
        return hash((self.index, self.is32))


_R = tuple(Reg(i) for i in range(11))
_W = tuple(Reg(i, True) for i in range(11))
R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10 = _R
W0, W1, W2, W3, W4, W5, W6, W7, W8, W9, W10 = _W
FP = R10

Operand = Reg | int
Target = str | int

_SIZES = {"b": op.B, "h": op.H, "w": op.W, "dw": op.DW}
_SIZE_OF_BYTES = {1: op.B, 2: op.H, 4: op.W, 8: op.DW}
_SIZE_LETTERS = {"b": 1, "h": 2, "w": 4, "dw": 8}


def _reg(value: Any, what: str) -> Reg:
    if isinstance(value, Reg):
        return value
    raise ProgramError(f"{what} must be a register (R0..R10 or W0..W10), not {value!r}")


def _size_code(size: int | str) -> int:
    if isinstance(size, str):
        if size[:1] == "u":                     # u8..u64 (the codec table, loaded when used)
            from ..codecs import INT_TYPES
            t = INT_TYPES.get(size)
            size = t[0] if t else size
        else:
            size = _SIZE_LETTERS.get(size, size)
    try:
        return _SIZE_OF_BYTES[size]  # type: ignore[index]
    except KeyError:
        raise ProgramError(f"memory size must be 1, 2, 4 or 8 bytes, not {size!r}") from None


def _imm(value: object, what: str = "immediate") -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProgramError(f"{what} must be an int or a register, not {value!r}")
    try:
        return s32(value)
    except Exception:
        raise ProgramError(f"{what} {value} does not fit in 32 bits; use lddw() for 64-bit constants") from None


def _off(value: int) -> int:
    if not isinstance(value, int) or not -(1 << 15) <= value < (1 << 15):
        raise ProgramError(f"offset {value!r} does not fit in a signed 16-bit field")
    return value


_INSIDE: dict[CodeType, bool] = {}   # code object -> belongs to the pyebpf package
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_getframe = sys._getframe


class InstructionBuilder:
    """Mixin that gives :class:`Program` one method per instruction."""

    # provided by Program
    if TYPE_CHECKING:
        insns: list[Insn]
        maps: dict[str, Any]
        stack: StackFrame
        _cache: list[Insn] | None

        def label(self, name: str, *, origin: str | None = None) -> str:
            """Define label ``name`` at the current end of the program."""

    def append(self, insn: Insn) -> Insn:  # pragma: no cover - overridden
        """Append one instruction (implemented by :class:`Program`)."""
        raise NotImplementedError

    def _emit(self, insn: Insn) -> Self:
        # The hot path of every builder method: Program.append with the
        # caller's origin found inline (it dominates the cost), the code objects
        # known to be pyebpf's cached in _INSIDE.
        frame: FrameType | None = _getframe(2)
        inside = _INSIDE
        while frame is not None:
            code = frame.f_code
            flag = inside.get(code)
            if flag is None:
                flag = inside[code] = code.co_filename.startswith(_PKG_DIR)
            if not flag:
                insn._origin = (code.co_filename, frame.f_lineno)  # formatted when read
                break
            frame = frame.f_back
        self.insns.append(insn)
        self._cache = None
        return self

    # ------------------------------------------------------------------ ALU
    def _alu(self, aop: int, dst: Reg, src: Operand, off: int = 0) -> Self:
        if type(dst) is not Reg:
            _reg(dst, "destination")
        cls = op.ALU if dst.is32 else op.ALU64
        if type(src) is Reg:
            if src.is32 != dst.is32:
                raise ProgramError(f"mixed widths: {dst!r} and {src!r}; use both r or both w registers")
            return self._emit(Insn(cls | aop | op.X, dst.index, src.index, off, 0))
        if type(src) is not int or not -0x80000000 <= src <= 0x7FFFFFFF:
            src = _imm(src)
        return self._emit(Insn(cls | aop, dst.index, 0, off, src))

    def mov(self, dst: Reg, src: Operand) -> Self:
        """``dst = src``."""
        return self._alu(op.MOV, dst, src)

    def add(self, dst: Reg, src: Operand) -> Self:
        """``dst += src``."""
        return self._alu(op.ADD, dst, src)

    def sub(self, dst: Reg, src: Operand) -> Self:
        """``dst -= src``."""
        return self._alu(op.SUB, dst, src)

    def mul(self, dst: Reg, src: Operand) -> Self:
        """``dst *= src``."""
        return self._alu(op.MUL, dst, src)

    def div(self, dst: Reg, src: Operand) -> Self:
        """``dst /= src`` (unsigned; division by zero gives 0)."""
        return self._alu(op.DIV, dst, src)

    def sdiv(self, dst: Reg, src: Operand) -> Self:
        """``dst s/= src`` (signed, cpu v4)."""
        return self._alu(op.DIV, dst, src, op.OFF_SIGNED)

    def mod(self, dst: Reg, src: Operand) -> Self:
        """``dst %= src`` (unsigned)."""
        return self._alu(op.MOD, dst, src)

    def smod(self, dst: Reg, src: Operand) -> Self:
        """``dst s%= src`` (signed, truncated, cpu v4)."""
        return self._alu(op.MOD, dst, src, op.OFF_SIGNED)

    def or_(self, dst: Reg, src: Operand) -> Self:
        """``dst |= src``."""
        return self._alu(op.OR, dst, src)

    def and_(self, dst: Reg, src: Operand) -> Self:
        """``dst &= src``."""
        return self._alu(op.AND, dst, src)

    def xor(self, dst: Reg, src: Operand) -> Self:
        """``dst ^= src``."""
        return self._alu(op.XOR, dst, src)

    def lsh(self, dst: Reg, src: Operand) -> Self:
        """``dst <<= src``."""
        return self._alu(op.LSH, dst, src)

    def rsh(self, dst: Reg, src: Operand) -> Self:
        """``dst >>= src`` (logical)."""
        return self._alu(op.RSH, dst, src)

    def arsh(self, dst: Reg, src: Operand) -> Self:
        """``dst s>>= src`` (arithmetic)."""
        return self._alu(op.ARSH, dst, src)

    def neg(self, dst: Reg) -> Self:
        """``dst = -dst``."""
        dst = _reg(dst, "destination")
        return self._emit(Insn((op.ALU if dst.is32 else op.ALU64) | op.NEG, dst.index))

    def movsx(self, dst: Reg, src: Reg, bits: int) -> Self:
        """``dst = (s<bits>) src``: sign-extending move (cpu v4); bits 8, 16 (or 32 for 64-bit)."""
        src = _reg(src, "source")
        if bits not in ((8, 16) if _reg(dst, "destination").is32 else (8, 16, 32)):
            raise ProgramError(f"movsx width must be 8 or 16 (or 32 for 64-bit registers), not {bits}")
        return self._alu(op.MOV, dst, src, bits)

    def le(self, dst: Reg, bits: int) -> Self:
        """``dst = le<bits> dst`` (convert to little endian; a no-op on x86 apart from truncation)."""
        return self._end(op.ALU | op.END | op.TO_LE, dst, bits)

    def be(self, dst: Reg, bits: int) -> Self:
        """``dst = be<bits> dst`` (convert to big endian)."""
        return self._end(op.ALU | op.END | op.TO_BE, dst, bits)

    def bswap(self, dst: Reg, bits: int) -> Self:
        """``dst = bswap<bits> dst`` (unconditional byte swap, cpu v4)."""
        return self._end(op.ALU64 | op.END, dst, bits)

    def _end(self, code: int, dst: Reg, bits: int) -> Self:
        if bits not in (16, 32, 64):
            raise ProgramError(f"byte swap width must be 16, 32 or 64, not {bits}")
        return self._emit(Insn(code, _reg(dst, "destination").index, 0, 0, bits))

    # ---------------------------------------------------------- 64-bit loads
    def lddw(self, dst: Reg, value: int) -> Self:
        """``dst = value ll``: load a 64-bit constant (two slots)."""
        if not -(1 << 63) <= value < (1 << 64):
            raise ProgramError(f"constant {value} does not fit in 64 bits")
        insn = Insn(op.OP_LD_IMM64, _reg(dst, "destination").index)
        insn.imm64 = value
        return self._emit(insn)

    def ld_map(self, dst: Reg, map_: Any) -> Self:
        """``dst = map``: a map pointer, by map object (with ``.name``) or by name.

        The reference is symbolic: the loader puts the map's fd in when the
        program is loaded.
        """
        name = self._map_name(map_)
        return self._emit(Insn(op.OP_LD_IMM64, _reg(dst, "destination").index, op.PSEUDO_MAP_FD,
                               map_ref=name))

    def ld_map_value(self, dst: Reg, map_: Any, offset: int = 0) -> Self:
        """``dst = &map.value[0] + offset``: direct value access of an array map."""
        name = self._map_name(map_)
        return self._emit(Insn(op.OP_LD_IMM64, _reg(dst, "destination").index, op.PSEUDO_MAP_VALUE,
                               0, 0, _imm(offset, "value offset"), map_ref=name))

    def ld_func(self, dst: Reg, function: str) -> Self:
        """``dst = &function``: address of a subprogram, for callbacks (bpf_loop...)."""
        return self._emit(Insn(op.OP_LD_IMM64, _reg(dst, "destination").index, op.PSEUDO_FUNC,
                               target=function))

    def _map_name(self, map_: Any) -> str:
        if isinstance(map_, str):
            return map_
        name: str | None = getattr(map_, "name", None)
        if not name:
            raise ProgramError(f"{map_!r} is not a map (it needs a .name) nor a map name")
        maps = getattr(self, "maps", None)
        if maps is not None:
            known = maps.get(name)
            if known is not None and known is not map_:
                raise ProgramError(f"two different maps are both named {name!r}")
            maps[name] = map_
        return name

    # ---------------------------------------------------------- memory
    def load(self, dst: Reg, src: Reg, off: int = 0, size: int | str = 8, signed: bool = False) -> Self:
        """``dst = *(u<size> *)(src + off)`` (``signed``: sign-extending, cpu v4)."""
        sz = _SIZE_OF_BYTES.get(size) if type(size) is int else None
        if sz is None:
            sz = _size_code(size)
        if signed and sz == op.DW:
            raise ProgramError("a sign-extending load of 8 bytes does not exist; use signed=False")
        if type(dst) is not Reg or type(src) is not Reg:
            _reg(dst, "destination"), _reg(src, "base")
        if type(off) is not int or not -0x8000 <= off <= 0x7FFF:
            off = _off(off)
        return self._emit(Insn(op.LDX | (op.MEMSX if signed else op.MEM) | sz, dst.index, src.index, off))

    def store(self, dst: Reg, off: int, src: Operand, size: int | str = 8) -> Self:
        """``*(u<size> *)(dst + off) = src`` (a register or an immediate)."""
        sz = _SIZE_OF_BYTES.get(size) if type(size) is int else None
        if sz is None:
            sz = _size_code(size)
        if type(dst) is not Reg:
            _reg(dst, "base")
        if type(off) is not int or not -0x8000 <= off <= 0x7FFF:
            off = _off(off)
        if type(src) is Reg:
            return self._emit(Insn(op.STX | op.MEM | sz, dst.index, src.index, off))
        return self._emit(Insn(op.ST | op.MEM | sz, dst.index, 0, off, _imm(src)))

    def ldxb(self, dst: Reg, src: Reg, off: int = 0) -> Self:
        """``dst = *(u8 *)(src + off)``."""
        return self.load(dst, src, off, 1)

    def ldxh(self, dst: Reg, src: Reg, off: int = 0) -> Self:
        """``dst = *(u16 *)(src + off)``."""
        return self.load(dst, src, off, 2)

    def ldxw(self, dst: Reg, src: Reg, off: int = 0) -> Self:
        """``dst = *(u32 *)(src + off)``."""
        return self.load(dst, src, off, 4)

    def ldxdw(self, dst: Reg, src: Reg, off: int = 0) -> Self:
        """``dst = *(u64 *)(src + off)``."""
        return self.load(dst, src, off, 8)

    def ldxsb(self, dst: Reg, src: Reg, off: int = 0) -> Self:
        """``dst = *(s8 *)(src + off)``."""
        return self.load(dst, src, off, 1, signed=True)

    def ldxsh(self, dst: Reg, src: Reg, off: int = 0) -> Self:
        """``dst = *(s16 *)(src + off)``."""
        return self.load(dst, src, off, 2, signed=True)

    def ldxsw(self, dst: Reg, src: Reg, off: int = 0) -> Self:
        """``dst = *(s32 *)(src + off)``."""
        return self.load(dst, src, off, 4, signed=True)

    def stxb(self, dst: Reg, off: int, src: Reg) -> Self:
        """``*(u8 *)(dst + off) = src``."""
        return self.store(dst, off, _reg(src, "source"), 1)

    def stxh(self, dst: Reg, off: int, src: Reg) -> Self:
        """``*(u16 *)(dst + off) = src``."""
        return self.store(dst, off, _reg(src, "source"), 2)

    def stxw(self, dst: Reg, off: int, src: Reg) -> Self:
        """``*(u32 *)(dst + off) = src``."""
        return self.store(dst, off, _reg(src, "source"), 4)

    def stxdw(self, dst: Reg, off: int, src: Reg) -> Self:
        """``*(u64 *)(dst + off) = src``."""
        return self.store(dst, off, _reg(src, "source"), 8)

    def stb(self, dst: Reg, off: int, imm: int) -> Self:
        """``*(u8 *)(dst + off) = imm``."""
        return self.store(dst, off, _imm(imm), 1)

    def sth(self, dst: Reg, off: int, imm: int) -> Self:
        """``*(u16 *)(dst + off) = imm``."""
        return self.store(dst, off, _imm(imm), 2)

    def stw(self, dst: Reg, off: int, imm: int) -> Self:
        """``*(u32 *)(dst + off) = imm``."""
        return self.store(dst, off, _imm(imm), 4)

    def stdw(self, dst: Reg, off: int, imm: int) -> Self:
        """``*(u64 *)(dst + off) = imm`` (imm sign-extended to 64 bits)."""
        return self.store(dst, off, _imm(imm), 8)

    def ldabs(self, size: int | str, imm: int) -> Self:
        """Legacy packet load ``r0 = *(u<size> *)skb[imm]`` (socket filters)."""
        code = op.LD | op.ABS | _size_code(size)
        if code & 0x18 == op.DW:
            raise ProgramError("LD_ABS exists for 1, 2 and 4 bytes only")
        return self._emit(Insn(code, 0, 0, 0, _imm(imm)))

    def ldind(self, size: int | str, src: Reg, imm: int = 0) -> Self:
        """Legacy packet load ``r0 = *(u<size> *)skb[src + imm]``."""
        code = op.LD | op.IND | _size_code(size)
        if code & 0x18 == op.DW:
            raise ProgramError("LD_IND exists for 1, 2 and 4 bytes only")
        return self._emit(Insn(code, 0, _reg(src, "index").index, 0, _imm(imm)))

    # ---------------------------------------------------------- atomics
    def _atomic(self, dst: Reg, off: int, src: Reg, imm: int, size: int | str) -> Self:
        sz = _size_code(size)
        return self._emit(Insn(op.STX | op.ATOMIC | sz, _reg(dst, "base").index,
                               _reg(src, "source").index, _off(off), imm))

    def atomic_add(self, dst: Reg, off: int, src: Reg, size: int = 8, fetch: bool = False) -> Self:
        """``lock *(u<size> *)(dst + off) += src``; with ``fetch`` the old value goes to src."""
        return self._atomic(dst, off, src, op.ATOMIC_ADD | (op.FETCH if fetch else 0), size)

    def atomic_or(self, dst: Reg, off: int, src: Reg, size: int = 8, fetch: bool = False) -> Self:
        """``lock *(u<size> *)(dst + off) |= src``."""
        return self._atomic(dst, off, src, op.ATOMIC_OR | (op.FETCH if fetch else 0), size)

    def atomic_and(self, dst: Reg, off: int, src: Reg, size: int = 8, fetch: bool = False) -> Self:
        """``lock *(u<size> *)(dst + off) &= src``."""
        return self._atomic(dst, off, src, op.ATOMIC_AND | (op.FETCH if fetch else 0), size)

    def atomic_xor(self, dst: Reg, off: int, src: Reg, size: int = 8, fetch: bool = False) -> Self:
        """``lock *(u<size> *)(dst + off) ^= src``."""
        return self._atomic(dst, off, src, op.ATOMIC_XOR | (op.FETCH if fetch else 0), size)

    def xchg(self, dst: Reg, off: int, src: Reg, size: int = 8) -> Self:
        """``src = xchg(dst + off, src)``."""
        return self._atomic(dst, off, src, op.XCHG, size)

    def cmpxchg(self, dst: Reg, off: int, src: Reg, size: int = 8) -> Self:
        """``r0 = cmpxchg(dst + off, r0, src)``: store src if the memory equals r0."""
        return self._atomic(dst, off, src, op.CMPXCHG, size)

    def load_acquire(self, dst: Reg, src: Reg, off: int = 0, size: int = 8) -> Self:
        """``dst = load_acquire((u<size> *)(src + off))``."""
        sz = _size_code(size)
        return self._emit(Insn(op.STX | op.ATOMIC | sz, _reg(dst, "destination").index,
                               _reg(src, "base").index, _off(off), op.LOAD_ACQ))

    def store_release(self, dst: Reg, off: int, src: Reg, size: int = 8) -> Self:
        """``store_release((u<size> *)(dst + off), src)``."""
        return self._atomic(dst, off, src, op.STORE_REL, size)

    # ---------------------------------------------------------- control flow
    def _jump_insn(self, code: int, dst: int, src: int, imm: int, target: Target) -> Self:
        if isinstance(target, str):
            return self._emit(Insn(code, dst, src, 0, imm, target=target))
        if code == op.OP_GOTOL:
            return self._emit(Insn(code, dst, src, 0, _imm(target, "jump offset")))
        return self._emit(Insn(code, dst, src, _off(target), imm))

    def ja(self, target: Target) -> Self:
        """``goto target``."""
        return self._jump_insn(op.OP_JA, 0, 0, 0, target)

    goto = ja

    def gotol(self, target: Target) -> Self:
        """``gotol target``: unconditional jump with a 32-bit offset (cpu v4)."""
        return self._jump_insn(op.OP_GOTOL, 0, 0, 0, target)

    def may_goto(self, target: Target) -> Self:
        """``may_goto target``: the kernel jumps once its loop budget is spent."""
        return self._jump_insn(op.OP_MAY_GOTO, 0, 0, 0, target)

    def jump_if(self, cond: str, dst: Reg, src: Operand, target: Target) -> Self:
        """``if dst <cond> src goto target``; cond is a mnemonic (``jeq``) or an
        operator (``==``, ``!=``, ``>``, ``>=``, ``<``, ``<=``, ``s>``, ``s>=``,
        ``s<``, ``s<=``, ``&``)."""
        name = _COND_ALIASES.get(cond, cond)
        if name not in op.COND_JUMPS:
            raise ProgramError(f"unknown condition {cond!r}; use one of {', '.join(_COND_ALIASES)}")
        dst = _reg(dst, "left operand")
        cls = op.JMP32 if dst.is32 else op.JMP
        code = cls | op.JMP_OPS[name]
        if isinstance(src, Reg):
            if src.is32 != dst.is32:
                raise ProgramError(f"mixed widths: {dst!r} and {src!r}")
            return self._jump_insn(code | op.X, dst.index, src.index, 0, target)
        return self._jump_insn(code, dst.index, 0, _imm(src), target)

    # (duplicates: deliberate, one method per operation, as the ALU ones above: each is public,
    # typed and documented, and all call the one emitter)
    def jeq(self, dst: Reg, src: Operand, target: Target) -> Self:
        """``if dst == src goto target``."""
        return self.jump_if("jeq", dst, src, target)

    def jne(self, dst: Reg, src: Operand, target: Target) -> Self:
        """``if dst != src goto target``."""
        return self.jump_if("jne", dst, src, target)

    def jgt(self, dst: Reg, src: Operand, target: Target) -> Self:
        """``if dst > src goto target`` (unsigned)."""
        return self.jump_if("jgt", dst, src, target)

    def jge(self, dst: Reg, src: Operand, target: Target) -> Self:
        """``if dst >= src goto target`` (unsigned)."""
        return self.jump_if("jge", dst, src, target)

    def jlt(self, dst: Reg, src: Operand, target: Target) -> Self:
        """``if dst < src goto target`` (unsigned)."""
        return self.jump_if("jlt", dst, src, target)

    def jle(self, dst: Reg, src: Operand, target: Target) -> Self:
        """``if dst <= src goto target`` (unsigned)."""
        return self.jump_if("jle", dst, src, target)

    def jsgt(self, dst: Reg, src: Operand, target: Target) -> Self:
        """``if dst s> src goto target``."""
        return self.jump_if("jsgt", dst, src, target)

    def jsge(self, dst: Reg, src: Operand, target: Target) -> Self:
        """``if dst s>= src goto target``."""
        return self.jump_if("jsge", dst, src, target)

    def jslt(self, dst: Reg, src: Operand, target: Target) -> Self:
        """``if dst s< src goto target``."""
        return self.jump_if("jslt", dst, src, target)

    def jsle(self, dst: Reg, src: Operand, target: Target) -> Self:
        """``if dst s<= src goto target``."""
        return self.jump_if("jsle", dst, src, target)

    def jset(self, dst: Reg, src: Operand, target: Target) -> Self:
        """``if dst & src goto target``."""
        return self.jump_if("jset", dst, src, target)

    def call(self, function: str | int) -> Self:
        """Call a helper by name (``"map_lookup_elem"``, ``"bpf_ktime_get_ns"``)
        or id.  To call a subprogram of this program, use :meth:`call_local`."""
        if isinstance(function, str):
            try:
                hid = _helper(function).id
            except KeyError as exc:
                raise ProgramError(exc.args[0] + "; for a subprogram use call_local()") from None
        else:
            hid = _imm(function, "helper id")
        return self._emit(Insn(op.OP_CALL, 0, op.CALL_HELPER, 0, hid))

    def call_local(self, function: Target) -> Self:
        """bpf-to-bpf call of a subprogram (by name) or a relative slot offset."""
        if isinstance(function, str):
            return self._emit(Insn(op.OP_CALL, 0, op.CALL_LOCAL, 0, 0, target=function))
        return self._emit(Insn(op.OP_CALL, 0, op.CALL_LOCAL, 0, _imm(function, "call offset")))

    def call_kfunc(self, btf_id: int, module_index: int = 0) -> Self:
        """Call a kernel function by BTF id (``off`` selects a module BTF in fd_array)."""
        return self._emit(Insn(op.OP_CALL, 0, op.CALL_KFUNC, _off(module_index), _imm(btf_id, "BTF id")))

    def callx(self, reg: Reg) -> Self:
        """``callx reg`` (bpf_conformance extension; Linux rejects it)."""
        return self._emit(Insn(op.OP_CALLX, _reg(reg, "target register").index))

    def exit(self) -> Self:
        """``exit``: return r0."""
        return self._emit(Insn(op.OP_EXIT))

    def ret(self, value: Operand) -> Self:
        """``r0 = value; exit``."""
        if isinstance(value, Reg) and value.index == 0 and not value.is32:
            return self.exit()
        self.mov(R0, value)
        return self.exit()

    def raw(self, code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0,
            next_imm: int | None = None) -> Self:
        """Append an instruction from raw fields (for experiments; checked at encode)."""
        return self._emit(Insn(code, dst, src, off, imm, next_imm))


_COND_ALIASES = {
    "==": "jeq", "!=": "jne", ">": "jgt", ">=": "jge", "<": "jlt", "<=": "jle",
    "s>": "jsgt", "s>=": "jsge", "s<": "jslt", "s<=": "jsle", "&": "jset",
}
