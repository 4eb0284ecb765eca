"""One instruction type, its classification into forms, and the byte encoding.

:class:`Insn` holds the raw fields of an instruction (``code dst src off imm``
and, for the 16-byte ``ld_imm64``, the second slot's ``next_imm``) plus three
pieces of metadata that never reach the bytes: a symbolic jump ``target``
(resolved by the program builder), a symbolic ``map_ref`` (bound at load
time) and the ``origin`` (``file:line``) that emitted it.

:func:`classify` turns the raw fields into a :class:`Form` — what the
instruction *is* (an ALU op, a sign-extending load, a fetch-atomic...) — or
raises :class:`~pyebpf.errors.EncodingError` if the fields are not a valid
instruction.  The text dialects print and parse through ``Form``; the
encoder and decoder never need it, so ``decode(encode(x)) == x`` for any
fields.
"""
from __future__ import annotations

import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, Iterator

from ..errors import EncodingError
from . import opcodes as op
from .._record import Record, keyed_by, record

_SLOT = struct.Struct("<BBhi")
SLOT_SIZE = 8


def s32(value: int) -> int:
    """``value`` (signed, or unsigned up to 2**32-1) as a signed 32-bit int."""
    if not -(1 << 31) <= value < (1 << 32):
        raise EncodingError(f"immediate {value} does not fit in 32 bits")
    return value - (1 << 32) if value >= (1 << 31) else value


def s16(value: int) -> int:
    """``value`` (signed, or unsigned up to 0xffff) as a signed 16-bit int."""
    if not -(1 << 15) <= value < (1 << 16):
        raise EncodingError(f"offset {value} does not fit in 16 bits")
    return value - (1 << 16) if value >= (1 << 15) else value


@keyed_by("fields")
class Insn:
    """One eBPF instruction (8 bytes, or 16 for ``ld_imm64``).

    Fields are stored exactly as encoded: ``off`` is a signed 16-bit value,
    ``imm`` and ``next_imm`` signed 32-bit values.  ``imm64`` combines
    ``imm`` and ``next_imm`` of an ``ld_imm64`` into one unsigned 64-bit value.

    Besides its fields an instruction carries metadata that is never encoded:
    ``origin``, the Python or ``.s`` line that emitted it, and ``comment``, a
    note for readers that the disassembler prints beside it.
    """

    __slots__ = ("code", "dst", "src", "off", "imm", "next_imm", "target", "map_ref", "_origin",
                 "comment")
    # a "file:line", or (filename, line) as the DSL records it cheaply
    _origin: str | tuple[str, int] | None

    def __init__(self, code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0,
                 next_imm: int | None = None, *, target: str | None = None,
                 map_ref: str | None = None, origin: str | None = None,
                 comment: str | None = None):
        self.code = code
        self.dst = dst
        self.src = src
        self.off = off
        self.imm = imm
        self.next_imm = 0 if next_imm is None and code == 0x18 else next_imm  # 0x18: ld_imm64
        self.target = target
        self.map_ref = map_ref
        self._origin = origin
        #: a note for readers, printed by the disassembler (``# ...``); not encoded
        self.comment = comment

    @property
    def origin(self) -> str | None:
        """``file:line`` of the source that emitted this instruction (or None)."""
        o = self._origin
        if isinstance(o, tuple):  # (filename, line), recorded cheaply by the DSL
            o = self._origin = f"{o[0]}:{o[1]}"
        return o

    @origin.setter
    def origin(self, value: str | None) -> None:
        self._origin = value

    # -- structure
    @property
    def wide(self) -> bool:
        """True for the two-slot ``ld_imm64``."""
        return self.code == op.OP_LD_IMM64

    @property
    def slots(self) -> int:
        """How many 8-byte slots the instruction takes (1 or 2)."""
        return 2 if self.code == op.OP_LD_IMM64 else 1

    @property
    def cls(self) -> int:
        """The instruction class: the low 3 bits of the opcode (``BPF_LD`` .. ``BPF_ALU64``)."""
        return self.code & 0x07

    @property
    def imm64(self) -> int:
        """The unsigned 64-bit constant of an ``ld_imm64``."""
        return ((self.next_imm or 0) & 0xFFFFFFFF) << 32 | (self.imm & 0xFFFFFFFF)

    @imm64.setter
    def imm64(self, value: int) -> None:
        value &= (1 << 64) - 1
        self.imm = s32(value & 0xFFFFFFFF)
        self.next_imm = s32(value >> 32)

    @property
    def form(self) -> "Form":
        """What this instruction is (see :func:`classify`)."""
        return classify(self)

    # -- bytes
    def encode(self) -> bytes:
        """The 8 (or 16) little-endian bytes of this instruction (see :func:`encode`)."""
        return encode((self,))

    # -- python protocol (equality and hashing by fields(): see @keyed_by)
    def fields(self) -> tuple[int | str | None, ...]:
        """The encoded fields, for comparison: (code, dst, src, off, imm, next_imm)."""
        return (self.code, self.dst, self.src, self.off, self.imm, self.next_imm)

    def __repr__(self) -> str:
        parts = [f"code=0x{self.code:02x}", f"dst={self.dst}", f"src={self.src}",
                 f"off={self.off}", f"imm={self.imm}"]
        if self.next_imm is not None:
            parts.append(f"next_imm={self.next_imm}")
        if self.target is not None:
            parts.append(f"target={self.target!r}")
        if self.map_ref is not None:
            parts.append(f"map_ref={self.map_ref!r}")
        return f"Insn({', '.join(parts)})"

    def copy(self) -> "Insn":
        """A new instruction with the same fields, symbols, origin and comment."""
        new = Insn(self.code, self.dst, self.src, self.off, self.imm, self.next_imm,
                   target=self.target, map_ref=self.map_ref, comment=self.comment)
        new._origin = self._origin
        return new


# ---------------------------------------------------------------------------
# encode / decode whole programs

def encode(insns: Iterable[Insn]) -> bytes:
    """Concatenate the encodings of ``insns``: the one encoder of pyebpf
    (:meth:`Insn.encode` and :meth:`Program.encode` both come here), so every
    instruction is validated the same way.  Raises :class:`EncodingError` for
    a register outside r0..r15 (the 4-bit fields) or a field out of range."""
    pack = _SLOT.pack
    out: list[bytes] = []
    append = out.append
    for insn in insns:
        code = insn.code
        dst = insn.dst
        src = insn.src
        if (dst | src) >> 4:               # non-zero for anything outside 0..15, negatives too
            raise EncodingError(f"register number out of range in {insn!r}: dst and src are "
                                "4-bit fields (r0..r15)", origin=insn.origin)
        try:
            append(pack(code, (src << 4) | dst, insn.off, insn.imm))
            if code == op.OP_LD_IMM64:
                append(pack(0, 0, 0, insn.next_imm or 0))
        except struct.error as exc:
            raise EncodingError(f"field out of range in {insn!r}: {exc}", origin=insn.origin) from None
    return b"".join(out)


def iter_decode(data: bytes | bytearray | memoryview) -> Iterator[Insn]:
    """Decode ``data`` (a multiple of 8 bytes) lazily, instruction by instruction."""
    if len(data) % SLOT_SIZE:
        raise EncodingError(f"program length {len(data)} is not a multiple of 8 bytes")
    slots = _SLOT.iter_unpack(data)
    index = 0
    for code, regs, off, imm in slots:
        if code == op.OP_LD_IMM64:
            try:
                c2, r2, o2, next_imm = next(slots)
            except StopIteration:
                raise EncodingError("ld_imm64 is missing its second slot", index=index) from None
            if c2 or r2 or o2:
                raise EncodingError(
                    f"second slot of ld_imm64 must have zero code, registers and offset "
                    f"(got code 0x{c2:02x}, regs 0x{r2:02x}, off {o2})", index=index + 1)
            yield Insn(code, regs & 0x0F, regs >> 4, off, imm, next_imm)
            index += 2
        else:
            yield Insn(code, regs & 0x0F, regs >> 4, off, imm)
            index += 1


def decode(data: bytes | bytearray | memoryview) -> list[Insn]:
    """Decode raw instruction bytes into a list of :class:`Insn`."""
    return list(iter_decode(data))


# ---------------------------------------------------------------------------
# forms

@record
class Form(Record):
    """What an instruction is, independent of how a dialect spells it.

    ``kind`` is one of:

    ``alu``       dst op= src|imm       (op: add sub mul div sdiv or and lsh rsh mod smod xor mov arsh)
    ``neg``       dst = -dst
    ``movsx``     dst = (s8|s16|s32) src                       (``size`` = 8/16/32 bits)
    ``end``       byte swap: op ``le``/``be`` (ALU) or ``bswap`` (ALU64); ``size`` = 16/32/64 bits
    ``lddw``      64-bit load, ``pseudo`` = src_reg subtype
    ``ldabs``     legacy packet load r0 = *(size *)skb[imm]
    ``ldind``     legacy packet load r0 = *(size *)skb[src + imm]
    ``ldx``       dst = *(size *)(src + off)
    ``ldxs``      sign-extending load
    ``st``        *(size *)(dst + off) = imm
    ``stx``       *(size *)(dst + off) = src
    ``atomic``    op: add or and xor (``fetch`` flag), xchg, cmpxchg, load_acquire, store_release
    ``ja``        goto off
    ``gotol``     goto imm (JMP32|JA)
    ``gotox``     goto dst (indirect)
    ``jcc``       if dst op src|imm goto off (op: jeq jgt ...)
    ``may_goto``  may_goto off
    ``call``      call helper/local/kfunc (``pseudo`` = src_reg)
    ``callx``     call dst (bpf_conformance extension)
    ``exit``      return r0

    ``alu64`` is True for 64-bit ALU and JMP (vs ALU32 and JMP32); ``reg`` is
    True when the second operand is a register; ``size`` is the memory access
    width in bytes for loads/stores/atomics, or a bit width as noted above.
    """

    kind: str
    op: str = ""
    alu64: bool = True
    reg: bool = False
    size: int = 0
    fetch: bool = False
    pseudo: int = 0


def _bad(insn: Insn, why: str) -> EncodingError:
    return EncodingError(f"invalid instruction (opcode 0x{insn.code:02x}): {why}", origin=insn.origin)


def _require_zero(insn: Insn, *names: str) -> None:
    for name in names:
        if getattr(insn, name):
            raise _bad(insn, f"field {name} must be 0 (is {getattr(insn, name)})")


def _check_regs(insn: Insn) -> None:
    if insn.dst > 10 or insn.src > 10:
        raise _bad(insn, f"register r{max(insn.dst, insn.src)} does not exist (r0-r10)")


_ALU_SIMPLE = {op.ADD: "add", op.SUB: "sub", op.MUL: "mul", op.OR: "or", op.AND: "and",
               op.LSH: "lsh", op.RSH: "rsh", op.XOR: "xor", op.ARSH: "arsh"}
_COND = {op.JMP_OPS[n]: n for n in op.COND_JUMPS}


def classify(insn: Insn) -> Form:
    """Classify ``insn``, checking every field the form reserves.

    Raises :class:`EncodingError` when the fields are not a valid eBPF
    instruction (unknown opcode, non-zero reserved field, bad width...).
    """
    code = insn.code
    cls = code & 0x07
    if cls in (op.ALU, op.ALU64):
        return _classify_alu(insn, code, cls == op.ALU64)
    if cls in (op.JMP, op.JMP32):
        return _classify_jmp(insn, code, cls == op.JMP)
    return _classify_mem(insn, code, cls)


def _classify_alu(insn: Insn, code: int, is64: bool) -> Form:
    _check_regs(insn)
    aop = code & 0xF0
    reg = bool(code & op.X)
    if aop == op.END:
        _require_zero(insn, "src", "off")
        if insn.imm not in (16, 32, 64):
            raise _bad(insn, f"byte swap width must be 16, 32 or 64 (is {insn.imm})")
        if is64:
            if reg:
                raise _bad(insn, "ALU64 END with the BE bit set is undefined")
            return Form("end", "bswap", True, False, insn.imm)
        return Form("end", "be" if reg else "le", False, reg, insn.imm)
    if aop == op.NEG:
        if reg:
            raise _bad(insn, "neg takes no source operand")
        _require_zero(insn, "src", "off", "imm")
        return Form("neg", "neg", is64)
    if reg:
        _require_zero(insn, "imm")
    else:
        _require_zero(insn, "src")
    off = insn.off
    if aop in _ALU_SIMPLE:
        _require_zero(insn, "off")
        return Form("alu", _ALU_SIMPLE[aop], is64, reg)
    if aop in (op.DIV, op.MOD):
        base = "div" if aop == op.DIV else "mod"
        if off == 0:
            return Form("alu", base, is64, reg)
        if off == op.OFF_SIGNED:
            return Form("alu", "s" + base, is64, reg)
        raise _bad(insn, f"{base} offset must be 0 (unsigned) or 1 (signed), is {off}")
    if aop == op.MOV:
        if off == 0:
            return Form("alu", "mov", is64, reg)
        if reg and off in ((8, 16, 32) if is64 else (8, 16)):
            return Form("movsx", "movsx", is64, True, off)
        raise _bad(insn, f"mov offset {off} is not a sign-extension width for this class")
    raise _bad(insn, "unknown ALU operation")


def _classify_jmp(insn: Insn, code: int, is64: bool) -> Form:
    _check_regs(insn)
    jop = code & 0xF0
    reg = bool(code & op.X)
    if jop == op.JA:
        if is64 and not reg:
            _require_zero(insn, "dst", "src", "imm")
            return Form("ja", "ja")
        if not is64 and not reg:
            _require_zero(insn, "dst", "src", "off")
            return Form("gotol", "gotol", False)
        if is64 and reg:
            _require_zero(insn, "src", "off", "imm")
            return Form("gotox", "gotox")
        raise _bad(insn, "JMP32 JA with a register source is undefined")
    if jop == op.CALL:
        if not is64:
            raise _bad(insn, "call is not a JMP32 operation")
        if reg:
            _require_zero(insn, "src", "off", "imm")
            return Form("callx", "callx")
        _require_zero(insn, "dst")
        if insn.src not in (op.CALL_HELPER, op.CALL_LOCAL, op.CALL_KFUNC):
            raise _bad(insn, f"call source {insn.src} is not helper (0), local (1) or kfunc (2)")
        if insn.src != op.CALL_KFUNC:
            _require_zero(insn, "off")
        return Form("call", "call", pseudo=insn.src)
    if jop == op.EXIT:
        if not is64 or reg:
            raise _bad(insn, "exit is only JMP|EXIT (0x95)")
        _require_zero(insn, "dst", "src", "off", "imm")
        return Form("exit", "exit")
    if jop == op.JCOND:
        if not is64 or reg:
            raise _bad(insn, "may_goto is only JMP|JCOND|K (0xe5)")
        _require_zero(insn, "dst", "src", "imm")
        return Form("may_goto", "may_goto")
    if jop in _COND:
        if reg:
            _require_zero(insn, "imm")
        else:
            _require_zero(insn, "src")
        return Form("jcc", _COND[jop], is64, reg)
    raise _bad(insn, "unknown jump operation")


def _classify_mem(insn: Insn, code: int, cls: int) -> Form:
    mode = code & 0xE0
    size = op.SIZE_BYTES[code & 0x18]
    if cls == op.LD:
        if code == op.OP_LD_IMM64:
            if insn.dst > 10:
                raise _bad(insn, "destination register does not exist")
            _require_zero(insn, "off")
            if insn.src not in op.LD_IMM64_PSEUDO_NAMES:
                raise _bad(insn, f"ld_imm64 source {insn.src} is not a known pseudo type (0-6)")
            if insn.src in (op.PSEUDO_MAP_FD, op.PSEUDO_BTF_ID, op.PSEUDO_FUNC, op.PSEUDO_MAP_IDX) \
                    and insn.next_imm:
                raise _bad(insn, "the second immediate must be 0 for this ld_imm64 pseudo type")
            return Form("lddw", "lddw", size=8, pseudo=insn.src)
        if mode in (op.ABS, op.IND) and size != 8:
            _check_regs(insn)
            _require_zero(insn, "dst", "off")
            if mode == op.ABS:
                _require_zero(insn, "src")
                return Form("ldabs", "ldabs", size=size)
            return Form("ldind", "ldind", size=size)
        raise _bad(insn, "unknown LD instruction")
    _check_regs(insn)
    if cls == op.LDX:
        _require_zero(insn, "imm")
        if mode == op.MEM:
            return Form("ldx", "ldx", size=size)
        if mode == op.MEMSX and size != 8:
            return Form("ldxs", "ldxs", size=size)
        raise _bad(insn, "unknown LDX mode")
    if cls == op.ST:
        _require_zero(insn, "src")
        if mode == op.MEM:
            return Form("st", "st", size=size)
        raise _bad(insn, "unknown ST mode")
    # STX
    if mode == op.MEM:
        _require_zero(insn, "imm")
        return Form("stx", "stx", size=size)
    if mode == op.ATOMIC:
        imm = insn.imm
        if imm == op.LOAD_ACQ:
            return Form("atomic", "load_acquire", size=size, fetch=True)
        if imm == op.STORE_REL:
            return Form("atomic", "store_release", size=size)
        if size not in (4, 8):
            raise _bad(insn, "read-modify-write atomics exist for 32 and 64 bits only")
        if imm == op.XCHG:
            return Form("atomic", "xchg", size=size, fetch=True)
        if imm == op.CMPXCHG:
            return Form("atomic", "cmpxchg", size=size, fetch=True)
        base = imm & ~op.FETCH
        if base in op.ATOMIC_ARITH_NAMES:
            return Form("atomic", op.ATOMIC_ARITH_NAMES[base], size=size, fetch=bool(imm & op.FETCH))
        raise _bad(insn, f"unknown atomic operation imm=0x{imm & 0xffffffff:x}")
    raise _bad(insn, "unknown STX mode")


def is_jump(insn: Insn) -> bool:
    """True when the instruction transfers control to a PC-relative target
    (``ja``, ``gotol``, conditional jumps, ``may_goto``, local calls)."""
    cls = insn.code & 0x07
    if cls not in (op.JMP, op.JMP32):
        return False
    jop = insn.code & 0xF0
    if jop == op.CALL:
        return insn.code == op.OP_CALL and insn.src == op.CALL_LOCAL
    if jop == op.EXIT:
        return False
    if jop == op.JA and insn.code & op.X:
        return False
    return True


def jump_offset(insn: Insn) -> int:
    """The relative target of a jump in slots (``off``, or ``imm`` for gotol and local calls)."""
    if insn.code == op.OP_GOTOL or insn.code == op.OP_CALL:
        return insn.imm
    return insn.off


def set_jump_offset(insn: Insn, delta: int) -> None:
    """Store a relative target; ``off`` is 16 bits, ``imm`` (gotol, call) 32 bits."""
    if insn.code == op.OP_GOTOL or insn.code == op.OP_CALL:
        insn.imm = delta
    else:
        if not -(1 << 15) <= delta < (1 << 15):
            raise EncodingError(
                f"jump of {delta} slots does not fit in a 16-bit offset (-32768..32767); "
                f"use gotol (JMP32|JA, 32-bit offset) for far unconditional jumps, or "
                f"invert the condition and jump over a gotol", origin=insn.origin)
        insn.off = delta
