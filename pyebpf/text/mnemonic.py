"""The ``mnemonic`` dialect: the bpf_conformance / uBPF assembly syntax.

One instruction per line, ``MNEMONIC operand, operand...``::

    mov32 %r0, 1            add %r1, %r2          neg32 %r3
    movsx1664 %r1, %r2      le16 %r1              bswap64 %r1 (or swap64)
    lddw %r0, 0x1122334455667788
    ldxw %r0, [%r1+4]       ldxsb %r0, [%r10-1]   stdw [%r10-8], 5     stxb [%r1], %r2
    lock add [%r10-8], %r1  lock fetch or32 [%r1], %r2   lock xchg [%r1], %r2   lock cmpxchg32 ...
    ja +2   ja label        ja32 +100000          jeq %r1, 0, +2       jsgt32 %r1, %r2, label
    call 1  call helper 1   call local label      call local -3        call runtime 12   call %r1
    exit    label:

The ``64`` suffix and no suffix mean 64-bit, ``32`` means 32-bit.  Immediates
are ``0x`` hex (raw 32 bits) or signed decimal; offsets and targets likewise
16 bits (``ja32`` and ``call local`` targets 32).  As in bpf_conformance, a
label ``exit`` is implied at the first ``exit`` instruction, ``%r11``..``%r15``
are accepted (they make invalid instructions, for negative tests), and ``#``
starts a comment; ``;`` and ``//`` do too here.  Unlike the C++ assembler,
spaces inside operands (``[%r1 + 4]``) are allowed.

Extensions (not in bpf_conformance):

* ld_imm64 pseudo sources as the second ``lddw`` operand: ``lddw %r1, counts``
  or ``map_fd(counts)`` (a symbolic map reference), ``map_fd(3)``,
  ``map_value(counts)+8``, ``btf_id(N)``, ``func(label)``, ``map_idx(N)``,
  ``map_idx_value(N)+8`` -- see :mod:`pyebpf.text.common`;
* legacy packet loads ``ldabs{b,h,w} IMM`` and ``ldind{b,h,w} %rS, IMM`` (uBPF's names);
* ``ldacq{b,h,w,dw} %rD, [%rS+OFF]`` (load_acquire) and ``strel{b,h,w,dw}
  [%rD+OFF], %rS`` (store_release);
* ``may_goto TARGET``, ``gotox %rN``, ``call NAME`` for a helper by name,
  ``call runtime N, M`` for a kfunc in a module (``off`` = M, its BTF's fd_array index);
* ``.8byte V, ...`` raw slots.
"""
from __future__ import annotations

from typing import Callable, Iterable, cast

from ..errors import EncodingError
from ..isa import Form, Insn, classify, opcodes as op
from . import common
from .lexer import TextError, Tok, imm32, imm64, off16, rel32

__all__ = ["parse_tokens", "format_insn"]

_SIZE_SUFFIX = {"b": 1, "h": 2, "w": 4, "dw": 8}
_SUFFIX_OF = {1: "b", 2: "h", 4: "w", 8: "dw"}
_ALU_NAMES = ("add", "sub", "mul", "div", "sdiv", "or", "and", "lsh", "rsh", "mod", "smod", "xor",
              "mov", "arsh")
_ALU_CODE = {name: (op.ALU_OPS[name], 0) for name in _ALU_NAMES if name in op.ALU_OPS}
_ALU_CODE["sdiv"] = (op.DIV, op.OFF_SIGNED)
_ALU_CODE["smod"] = (op.MOD, op.OFF_SIGNED)
_REG_LIMIT = 15  # bpf_conformance accepts %r11..%r15 to build negative tests


# ---------------------------------------------------------------------------
# operands: each takes the tokens between commas

def _end_col(toks: list[Tok]) -> int:
    t = toks[-1]
    return t.col + len(t.text)


def _reg(g: list[Tok]) -> int:
    if len(g) == 1:
        t = g[0]
        if t.key == "%r":
            n = cast(int, t.value)
            if n > _REG_LIMIT:
                raise TextError(f"Invalid register: {t.text} (registers are %r0-%r10)", t.col)
            return n
        if t.key == "r" or t.key == "w":
            raise TextError(f"registers are written %r{t.value} in this dialect", t.col)
    raise TextError(f"expected a register like %r1, found {_text(g)!r}", g[0].col)


def _text(g: list[Tok]) -> str:
    return "".join(t.text for t in g)


def _number(g: list[Tok]) -> tuple[Tok, bool]:
    if len(g) == 1 and g[0].key == "n":
        return g[0], False
    if len(g) == 2 and g[1].key == "n" and g[0].key in "+-":
        return g[1], g[0].key == "-"
    raise TextError(f"expected a number, found {_text(g)!r}", g[0].col)


def _imm(g: list[Tok]) -> int:
    tok, neg = _number(g)
    return imm32(tok, neg)


def _is_reg(g: list[Tok]) -> bool:
    return len(g) == 1 and g[0].key in ("%r", "%w", "r", "w")


def _mem(g: list[Tok]) -> tuple[int, int]:
    """``[%rN]``, ``[%rN+OFF]``, ``[%rN-OFF]`` -> (register, offset)."""
    n = len(g)
    if n >= 3 and g[0].key == "[" and g[-1].key == "]":
        r = _reg([g[1]])
        if n == 3:
            return r, 0
        inner = g[2:-1]
        if len(inner) >= 2 and inner[0].key in "+-":
            neg = inner[0].key == "-"
            rest = inner[1:]
            if len(rest) == 2 and rest[0].key == "-" and not neg:   # [%r1+-8]
                neg, rest = True, rest[1:]
            if len(rest) == 1 and rest[0].key == "n":
                return r, off16(rest[0], neg)
        raise TextError(f"expected +OFFSET or -OFFSET in memory operand, found {_text(inner)!r}",
                        inner[0].col)
    raise TextError(f"expected a memory operand like [%r1+4], found {_text(g)!r}", g[0].col)


def _target(g: list[Tok], wide: bool = False) -> tuple[int, str | None]:
    """``+N``, ``-N`` or a label -> (offset, label)."""
    if len(g) == 1 and g[0].key == "id":
        return 0, cast(str, g[0].value)
    if len(g) == 2 and g[0].key in "+-" and g[1].key == "n":
        neg = g[0].key == "-"
        return (rel32(g[1], neg) if wide else off16(g[1], neg, "jump offset")), None
    raise TextError(f"expected a jump target (+N, -N or a label), found {_text(g)!r}", g[0].col)


# ---------------------------------------------------------------------------
# instruction builders: (mnemonic token, operand groups) -> Insn

#: the operands of a statement: the tokens of each, between commas
_Ops = list[list[Tok]]
_Builder = Callable[[Tok, _Ops], Insn]
_TABLE: dict[str, tuple[_Builder, int, str]] = {}


def _def(names: Iterable[str], count: int, usage: str) -> Callable[[_Builder], _Builder]:
    """Register a builder for the mnemonics ``names``, which take ``count``
    operands (``usage`` spells them for an error message)."""
    def register(fn: _Builder) -> _Builder:
        for name in names:
            _TABLE[name] = (fn, count, usage)
        return fn
    return register


def _alu_parts(name: str) -> tuple[str, int]:
    if name.endswith("32"):
        return name[:-2], op.ALU
    if name.endswith("64"):
        return name[:-2], op.ALU64
    return name, op.ALU64


@_def([n + s for n in _ALU_NAMES for s in ("", "32", "64")], 2, "%rD, %rS|IMM")
def _alu(m: Tok, ops: _Ops) -> Insn:
    base, cls = _alu_parts(cast(str, m.value))
    bits, off = _ALU_CODE[base]
    dst = _reg(ops[0])
    if _is_reg(ops[1]):
        return Insn(bits | op.X | cls, dst, _reg(ops[1]), off)
    return Insn(bits | op.K | cls, dst, 0, off, _imm(ops[1]))


@_def(["neg", "neg32", "neg64"], 1, "%rD")
def _neg(m: Tok, ops: _Ops) -> Insn:
    return Insn(op.NEG | _alu_parts(cast(str, m.value))[1], _reg(ops[0]))


@_def(["movsx832", "movsx1632", "movsx864", "movsx1664", "movsx3264"], 2, "%rD, %rS")
def _movsx(m: Tok, ops: _Ops) -> Insn:
    name = cast(str, m.value)
    cls = op.ALU if name.endswith("32") else op.ALU64
    width = int(name[5:-2])
    return Insn(op.MOV | op.X | cls, _reg(ops[0]), _reg(ops[1]), width)


@_def([f"{e}{w}" for e in ("le", "be", "swap", "bswap") for w in (16, 32, 64)], 1, "%rD")
def _end(m: Tok, ops: _Ops) -> Insn:
    name = cast(str, m.value)
    width = int(name[-2:])
    if name.startswith("le"):
        code = op.ALU | op.END | op.TO_LE
    elif name.startswith("be"):
        code = op.ALU | op.END | op.TO_BE
    else:
        code = op.ALU64 | op.END | op.TO_LE
    return Insn(code, _reg(ops[0]), 0, 0, width)


@_def(["lddw"], 2, "%rD, IMM64")
def _lddw(m: Tok, ops: _Ops) -> Insn:
    dst = _reg(ops[0])
    g = ops[1]
    if g[0].key == "id":
        if len(g) == 1:
            return common.map_insn(dst, cast(str, g[0].value))
        # NAME ( ARG ) [+|- N]
        close = next((i for i, t in enumerate(g) if t.key == ")"), -1)
        if len(g) >= 4 and g[1].key == "(" and close >= 3:
            inner = g[2:close]
            negative = False
            if len(inner) == 1 and inner[0].key == "id":
                arg = inner[0]
            else:
                arg, negative = _number(inner)
            offset, offset_tok = None, None
            rest = g[close + 1:]
            if rest:
                tok, neg = _number(rest)
                value = cast(int, tok.value)
                offset, offset_tok = (-value if neg else value), tok
            return common.pseudo_insn(dst, g[0], arg, offset, offset_tok, negative)
        raise TextError(f"expected a constant or NAME(ARG), found {_text(g)!r}", g[0].col)
    tok, neg = _number(g)
    insn = Insn(op.OP_LD_IMM64, dst)
    insn.imm64 = imm64(tok, neg)
    return insn


@_def([f"ldx{s}" for s in _SIZE_SUFFIX] + [f"ldxs{s}" for s in ("b", "h", "w")], 2,
      "%rD, [%rS+OFF]")
def _ldx(m: Tok, ops: _Ops) -> Insn:
    name = cast(str, m.value)
    signed = name.startswith("ldxs")
    size = _SIZE_SUFFIX[name[4:] if signed else name[3:]]
    src, off = _mem(ops[1])
    return Insn((op.MEMSX if signed else op.MEM) | op.BYTES_SIZE[size] | op.LDX,
                _reg(ops[0]), src, off)


@_def([f"st{s}" for s in _SIZE_SUFFIX], 2, "[%rD+OFF], IMM")
def _st(m: Tok, ops: _Ops) -> Insn:
    dst, off = _mem(ops[0])
    size = _SIZE_SUFFIX[cast(str, m.value)[2:]]
    return Insn(op.MEM | op.BYTES_SIZE[size] | op.ST, dst, 0, off,
                _imm(ops[1]))


@_def([f"stx{s}" for s in _SIZE_SUFFIX], 2, "[%rD+OFF], %rS")
def _stx(m: Tok, ops: _Ops) -> Insn:
    dst, off = _mem(ops[0])
    size = _SIZE_SUFFIX[cast(str, m.value)[3:]]
    return Insn(op.MEM | op.BYTES_SIZE[size] | op.STX, dst, _reg(ops[1]), off)


@_def([f"ldacq{s}" for s in _SIZE_SUFFIX], 2, "%rD, [%rS+OFF]")
def _ldacq(m: Tok, ops: _Ops) -> Insn:
    src, off = _mem(ops[1])
    size = _SIZE_SUFFIX[cast(str, m.value)[5:]]
    return Insn(op.ATOMIC | op.BYTES_SIZE[size] | op.STX, _reg(ops[0]), src,
                off, op.LOAD_ACQ)


@_def([f"strel{s}" for s in _SIZE_SUFFIX], 2, "[%rD+OFF], %rS")
def _strel(m: Tok, ops: _Ops) -> Insn:
    dst, off = _mem(ops[0])
    size = _SIZE_SUFFIX[cast(str, m.value)[5:]]
    return Insn(op.ATOMIC | op.BYTES_SIZE[size] | op.STX, dst, _reg(ops[1]),
                off, op.STORE_REL)


@_def([f"ldabs{s}" for s in ("b", "h", "w")], 1, "IMM")
def _ldabs(m: Tok, ops: _Ops) -> Insn:
    size = _SIZE_SUFFIX[cast(str, m.value)[5:]]
    return Insn(op.ABS | op.BYTES_SIZE[size] | op.LD, 0, 0, 0, _imm(ops[0]))


@_def([f"ldind{s}" for s in ("b", "h", "w")], 2, "%rS, IMM")
def _ldind(m: Tok, ops: _Ops) -> Insn:
    size = _SIZE_SUFFIX[cast(str, m.value)[5:]]
    return Insn(op.IND | op.BYTES_SIZE[size] | op.LD, 0, _reg(ops[0]), 0,
                _imm(ops[1]))


@_def(["ja", "may_goto"], 1, "TARGET")
def _ja(m: Tok, ops: _Ops) -> Insn:
    off, label = _target(ops[0])
    return Insn(op.OP_JA if m.value == "ja" else op.OP_MAY_GOTO, 0, 0, off, target=label)


@_def(["ja32"], 1, "TARGET")
def _ja32(m: Tok, ops: _Ops) -> Insn:
    off, label = _target(ops[0], wide=True)
    return Insn(op.OP_GOTOL, 0, 0, 0, off, target=label)


@_def(["gotox"], 1, "%rD")
def _gotox(m: Tok, ops: _Ops) -> Insn:
    return Insn(op.OP_GOTOX, _reg(ops[0]))


@_def([j + s for j in op.COND_JUMPS for s in ("", "32")], 3, "%rD, %rS|IMM, TARGET")
def _jcc(m: Tok, ops: _Ops) -> Insn:
    name = cast(str, m.value)
    cls = op.JMP32 if name.endswith("32") else op.JMP
    bits = op.JMP_OPS[name[:-2] if cls == op.JMP32 else name]
    dst = _reg(ops[0])
    off, label = _target(ops[2])
    if _is_reg(ops[1]):
        return Insn(bits | op.X | cls, dst, _reg(ops[1]), off, target=label)
    return Insn(bits | op.K | cls, dst, 0, off, _imm(ops[1]), target=label)


@_def(["exit"], 0, "")
def _exit(m: Tok, ops: _Ops) -> Insn:
    return Insn(op.OP_EXIT)


def _call(m: Tok, toks: list[Tok]) -> Insn:
    """``call [helper|local|runtime] OPERAND`` (the mode is a word before the operand)."""
    if not toks:
        raise TextError("call needs an operand: call N, call local LABEL, call runtime N, "
                        "call %rN", _end_col([m]))
    mode = "helper"
    if toks[0].key == "id" and toks[0].value in ("helper", "local", "runtime") and len(toks) > 1:
        mode = toks[0].value
        toks = toks[1:]
    module: list[Tok] | None = None
    for i, t in enumerate(toks):
        if t.key == ",":
            if mode != "runtime":
                raise TextError("call takes one operand", t.col)
            module, toks = toks[i + 1:], toks[:i]
            if not module or not toks:
                raise TextError("expected call runtime BTF_ID, MODULE_INDEX", t.col)
            break
    if mode == "local":
        off, label = _target(toks, wide=True)
        return Insn(op.OP_CALL, 0, op.CALL_LOCAL, 0, off, target=label)
    if mode == "helper" and _is_reg(toks):
        return Insn(op.OP_CALLX, _reg(toks))
    if mode == "helper" and len(toks) == 1 and toks[0].key == "id":
        hid = common.helper_id(cast(str, toks[0].value))
        if hid is None:
            raise TextError(f"unknown helper {toks[0].text!r} (for a bpf-to-bpf call write "
                            f"'call local {toks[0].text}')", toks[0].col)
        return Insn(op.OP_CALL, 0, op.CALL_HELPER, 0, hid)
    insn = Insn(op.OP_CALL, 0, op.CALL_KFUNC if mode == "runtime" else op.CALL_HELPER, 0,
                _imm(toks))
    if module is not None:
        tok, neg = _number(module)
        insn.off = off16(tok, neg, "module BTF index")
    return insn


def _lock(m: Tok, toks: list[Tok]) -> Insn:
    """``lock [fetch] OP[32] [%rD+OFF], %rS``."""
    i = 0
    fetch = False
    if i < len(toks) and toks[i].key == "id" and toks[i].value == "fetch":
        fetch = True
        i += 1
    if i >= len(toks) or toks[i].key != "id":
        where = toks[i].col if i < len(toks) else _end_col([m] + toks)
        raise TextError("Invalid number of operands for lock: expected lock [fetch] "
                        "add|and|or|xor|xchg|cmpxchg[32] [%rD+OFF], %rS", where)
    opt = toks[i]
    name = cast(str, opt.value)
    size = 8
    if name.endswith("32"):
        name, size = name[:-2], 4
    elif name.endswith("64"):
        name = name[:-2]
    if name in op.ATOMIC_ARITH:
        imm = op.ATOMIC_ARITH[name] | (op.FETCH if fetch else 0)
    elif name == "xchg":
        imm = op.XCHG
    elif name == "cmpxchg":
        imm = op.CMPXCHG
    else:
        raise TextError(f"unknown atomic operation {opt.text!r} "
                        f"(add, and, or, xor, xchg, cmpxchg, with 32 for 32-bit)", opt.col)
    ops = _groups(toks[i + 1:], opt)
    if len(ops) != 2:
        raise TextError("Invalid number of operands for lock: expected [%rD+OFF], %rS",
                        ops[2][0].col if len(ops) > 2 else _end_col([opt] + toks[i + 1:]))
    dst, off = _mem(ops[0])
    return Insn(op.ATOMIC | op.BYTES_SIZE[size] | op.STX, dst, _reg(ops[1]), off, imm)


def _groups(toks: list[Tok], after: Tok) -> list[list[Tok]]:
    """Split operand tokens on commas; an empty operand is an error."""
    if not toks:
        return []
    out: list[list[Tok]] = [[]]
    prev = after
    for t in toks:
        if t.key == ",":
            if not out[-1]:
                raise TextError("missing operand before ','", t.col)
            out.append([])
        else:
            out[-1].append(t)
        prev = t
    if not out[-1]:
        raise TextError("missing operand after ','", prev.col + 1)
    return out


def parse_tokens(toks: list[Tok], opcode: int | None = None) -> Insn:
    """Build the instruction of one mnemonic-dialect statement (no label)."""
    m = toks[0]
    if m.key != "id":
        raise TextError(f"expected an instruction mnemonic, found {m.text!r}", m.col)
    name = cast(str, m.value)
    entry = _TABLE.get(name)
    if entry is None:
        if name == "call":
            return _call(m, toks[1:])
        if name == "lock":
            return _lock(m, toks[1:])
        raise TextError(f"Invalid mnemonic: {name}", m.col)
    builder, count, usage = entry
    ops = _groups(toks[1:], m)
    if len(ops) != count:
        where = ops[count][0].col if len(ops) > count else _end_col(toks)
        raise TextError(f"Invalid number of operands for mnemonic: {name} takes {count} "
                        f"({name} {usage}), found {len(ops)}", where)
    return builder(m, ops)


# ---------------------------------------------------------------------------
# printing

def _m(r: int, off: int) -> str:
    if off == 0:
        return f"[%r{r}]"
    return f"[%r{r}{off:+d}]"


def _tgt(insn: Insn, rel: int, label: str | None) -> str:
    if label is not None:
        return label
    if insn.target is not None:
        return insn.target
    return f"{rel:+d}"


def format_insn(insn: Insn, style: str | None = None, label: str | None = None,
                form: Form | None = None) -> str:
    """``insn`` in the mnemonic dialect (``style`` is ignored: there is one).

    ``label`` replaces a numeric jump target; invalid instructions print as ``.8byte``.
    """
    if form is None:
        try:
            form = classify(insn)
        except EncodingError:
            return common.raw_directive(insn)
    k = form.kind
    d, s = insn.dst, insn.src
    if k == "alu":
        sfx = "" if form.alu64 else "32"
        rhs = f"%r{s}" if form.reg else str(insn.imm)
        return f"{form.op}{sfx} %r{d}, {rhs}"
    if k == "jcc":
        sfx = "" if form.alu64 else "32"
        rhs = f"%r{s}" if form.reg else str(insn.imm)
        return f"{form.op}{sfx} %r{d}, {rhs}, {_tgt(insn, insn.off, label)}"
    if k == "ldx":
        return f"ldx{_SUFFIX_OF[form.size]} %r{d}, {_m(s, insn.off)}"
    if k == "stx":
        return f"stx{_SUFFIX_OF[form.size]} {_m(d, insn.off)}, %r{s}"
    if k == "st":
        return f"st{_SUFFIX_OF[form.size]} {_m(d, insn.off)}, {insn.imm}"
    if k == "exit":
        return "exit"
    if k == "ja":
        return f"ja {_tgt(insn, insn.off, label)}"
    if k == "call":
        if form.pseudo == op.CALL_LOCAL:
            return f"call local {_tgt(insn, insn.imm, label)}"
        if form.pseudo == op.CALL_KFUNC:
            if insn.off:
                return f"call runtime {insn.imm}, {insn.off}"
            return f"call runtime {insn.imm}"
        return f"call {insn.imm}"
    if k == "lddw":
        if form.pseudo == op.PSEUDO_IMM64:
            return f"lddw %r{d}, 0x{insn.imm64:x}"
        if label is not None and form.pseudo == op.PSEUDO_FUNC:
            insn = insn.copy()
            insn.target = label
        return f"lddw %r{d}, {common.pseudo_operand(insn).replace(' ', '')}"
    if k == "neg":
        return f"neg{'' if form.alu64 else '32'} %r{d}"
    if k == "movsx":
        return f"movsx{form.size}{'64' if form.alu64 else '32'} %r{d}, %r{s}"
    if k == "end":
        return f"{form.op}{form.size} %r{d}"
    if k == "ldxs":
        return f"ldxs{_SUFFIX_OF[form.size]} %r{d}, {_m(s, insn.off)}"
    if k == "atomic":
        o = form.op
        sz = form.size
        if o == "load_acquire":
            return f"ldacq{_SUFFIX_OF[sz]} %r{d}, {_m(s, insn.off)}"
        if o == "store_release":
            return f"strel{_SUFFIX_OF[sz]} {_m(d, insn.off)}, %r{s}"
        w = "32" if sz == 4 else ""
        fetch = "fetch " if form.fetch and o not in ("xchg", "cmpxchg") else ""
        return f"lock {fetch}{o}{w} {_m(d, insn.off)}, %r{s}"
    if k == "gotol":
        return f"ja32 {_tgt(insn, insn.imm, label)}"
    if k == "may_goto":
        return f"may_goto {_tgt(insn, insn.off, label)}"
    if k == "gotox":
        return f"gotox %r{d}"
    if k == "callx":
        return f"call %r{d}"
    if k == "ldabs":
        return f"ldabs{_SUFFIX_OF[form.size]} {insn.imm}"
    if k == "ldind":
        return f"ldind{_SUFFIX_OF[form.size]} %r{s}, {insn.imm}"
    raise AssertionError(f"no mnemonic spelling for form {form}")  # pragma: no cover


def is_mnemonic(word: str) -> bool:
    """Whether ``word`` is an instruction name of this dialect (``mov``,
    ``ldxw``...): the llvm dialect's parser names the dialect when it meets one."""
    return word.lower() in _TABLE
