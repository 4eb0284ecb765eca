"""Hypothesis strategies: valid instructions of every form :func:`classify` accepts."""
from __future__ import annotations

from hypothesis import strategies as st

from pyebpf.isa import Insn, opcodes as op

REG = st.integers(0, 10)
S32 = st.integers(-(1 << 31), (1 << 31) - 1)
S16 = st.integers(-(1 << 15), (1 << 15) - 1)
SIZES = st.sampled_from([1, 2, 4, 8])

_SIMPLE_ALU = [op.ADD, op.SUB, op.MUL, op.OR, op.AND, op.LSH, op.RSH, op.XOR, op.ARSH, op.MOV]


@st.composite
def alu(draw):
    cls = draw(st.sampled_from([op.ALU, op.ALU64]))
    bits = draw(st.sampled_from(_SIMPLE_ALU + [op.DIV, op.MOD]))
    off = draw(st.sampled_from([0, 1])) if bits in (op.DIV, op.MOD) else 0
    if draw(st.booleans()):
        return Insn(bits | op.X | cls, draw(REG), draw(REG), off)
    return Insn(bits | op.K | cls, draw(REG), 0, off, draw(S32))


@st.composite
def movsx(draw):
    cls = draw(st.sampled_from([op.ALU, op.ALU64]))
    width = draw(st.sampled_from([8, 16, 32] if cls == op.ALU64 else [8, 16]))
    return Insn(op.MOV | op.X | cls, draw(REG), draw(REG), width)


@st.composite
def neg(draw):
    return Insn(op.NEG | draw(st.sampled_from([op.ALU, op.ALU64])), draw(REG))


@st.composite
def end(draw):
    code = draw(st.sampled_from([op.ALU | op.END | op.TO_LE, op.ALU | op.END | op.TO_BE,
                                 op.ALU64 | op.END | op.TO_LE]))
    return Insn(code, draw(REG), 0, 0, draw(st.sampled_from([16, 32, 64])))


@st.composite
def lddw(draw):
    src = draw(st.integers(0, 6))
    next_imm = draw(S32) if src in (0, 2, 6) else 0
    return Insn(op.OP_LD_IMM64, draw(REG), src, 0, draw(S32), next_imm)


@st.composite
def packet(draw):
    size = op.BYTES_SIZE[draw(st.sampled_from([1, 2, 4]))]
    if draw(st.booleans()):
        return Insn(op.ABS | size | op.LD, 0, 0, 0, draw(S32))
    return Insn(op.IND | size | op.LD, 0, draw(REG), 0, draw(S32))


@st.composite
def memory(draw):
    kind = draw(st.sampled_from(["ldx", "ldxs", "st", "stx"]))
    if kind == "ldxs":
        size = op.BYTES_SIZE[draw(st.sampled_from([1, 2, 4]))]
        return Insn(op.MEMSX | size | op.LDX, draw(REG), draw(REG), draw(S16))
    size = op.BYTES_SIZE[draw(SIZES)]
    if kind == "ldx":
        return Insn(op.MEM | size | op.LDX, draw(REG), draw(REG), draw(S16))
    if kind == "st":
        return Insn(op.MEM | size | op.ST, draw(REG), 0, draw(S16), draw(S32))
    return Insn(op.MEM | size | op.STX, draw(REG), draw(REG), draw(S16))


@st.composite
def atomic(draw):
    kind = draw(st.sampled_from(["arith", "xchg", "cmpxchg", "acquire", "release"]))
    if kind in ("acquire", "release"):
        size = draw(SIZES)
        imm = op.LOAD_ACQ if kind == "acquire" else op.STORE_REL
    else:
        size = draw(st.sampled_from([4, 8]))
        if kind == "arith":
            imm = draw(st.sampled_from(list(op.ATOMIC_ARITH.values()))) | \
                draw(st.sampled_from([0, op.FETCH]))
        else:
            imm = op.XCHG if kind == "xchg" else op.CMPXCHG
    return Insn(op.ATOMIC | op.BYTES_SIZE[size] | op.STX, draw(REG), draw(REG), draw(S16), imm)


@st.composite
def jump(draw):
    kind = draw(st.sampled_from(["ja", "gotol", "gotox", "jcc", "may_goto"]))
    if kind == "ja":
        return Insn(op.OP_JA, 0, 0, draw(S16))
    if kind == "gotol":
        return Insn(op.OP_GOTOL, 0, 0, 0, draw(S32))
    if kind == "gotox":
        return Insn(op.OP_GOTOX, draw(REG))
    if kind == "may_goto":
        return Insn(op.OP_MAY_GOTO, 0, 0, draw(S16))
    cls = draw(st.sampled_from([op.JMP, op.JMP32]))
    bits = op.JMP_OPS[draw(st.sampled_from(op.COND_JUMPS))]
    if draw(st.booleans()):
        return Insn(bits | op.X | cls, draw(REG), draw(REG), draw(S16))
    return Insn(bits | op.K | cls, draw(REG), 0, draw(S16), draw(S32))


@st.composite
def call(draw):
    kind = draw(st.sampled_from(["helper", "local", "kfunc", "kfunc_module", "callx", "exit"]))
    if kind == "helper":
        return Insn(op.OP_CALL, 0, 0, 0, draw(st.one_of(st.integers(0, 220), S32)))
    if kind == "local":
        return Insn(op.OP_CALL, 0, 1, 0, draw(S32))
    if kind == "kfunc":
        return Insn(op.OP_CALL, 0, 2, 0, draw(S32))
    if kind == "kfunc_module":
        return Insn(op.OP_CALL, 0, 2, draw(S16), draw(S32))
    if kind == "callx":
        return Insn(op.OP_CALLX, draw(REG))
    return Insn(op.OP_EXIT)


#: any valid instruction
insns = st.one_of(alu(), movsx(), neg(), end(), lddw(), packet(), memory(), atomic(), jump(),
                  call())

#: every form kind Form documents, to check the strategy covers them all
FORM_KINDS = {"alu", "neg", "movsx", "end", "lddw", "ldabs", "ldind", "ldx", "ldxs", "st", "stx",
              "atomic", "ja", "gotol", "gotox", "jcc", "may_goto", "call", "callx", "exit"}
