"""Printing the ``llvm`` dialect: an instruction as LLVM's or the verifier's pseudo-C.

The other half of :mod:`pyebpf.text.llvm` (which parses, and re-exports
:func:`format_insn`): the operator spellings both halves share (the parser
reads them backwards) and one small printer per :class:`~pyebpf.isa.Form`
kind, chosen by a table.  The two styles are described in :mod:`pyebpf.text.llvm`.
"""
from __future__ import annotations

from ..errors import EncodingError, OptionError
from ..isa import Form, Insn, classify, opcodes as op
from . import common

__all__ = ["format_insn", "STYLES", "ALU_SYMBOLS", "JMP_SYMBOLS", "ATOMIC_SYMBOLS"]

#: the printing styles: ``llvm-objdump``'s and the kernel verifier's
STYLES = ("objdump", "verifier")

# ---------------------------------------------------------------------------
# operator tables (the spelling of each Form.op)

ALU_SYMBOLS = {"add": "+=", "sub": "-=", "mul": "*=", "div": "/=", "sdiv": "s/=", "or": "|=",
               "and": "&=", "lsh": "<<=", "rsh": ">>=", "mod": "%=", "smod": "s%=", "xor": "^=",
               "arsh": "s>>=", "mov": "="}
JMP_SYMBOLS = {"jeq": "==", "jne": "!=", "jgt": ">", "jge": ">=", "jlt": "<", "jle": "<=",
               "jsgt": "s>", "jsge": "s>=", "jslt": "s<", "jsle": "s<=", "jset": "&"}
ATOMIC_SYMBOLS = {"add": "+=", "and": "&=", "or": "|=", "xor": "^="}


#: unconditional jump kind -> (its word, whether it jumps by imm: gotol's 32-bit reach; else off)
_GOTOS = {"ja": ("goto", False), "gotol": ("gotol", True), "may_goto": ("may_goto", False)}


def _mem(r: int, off: int, verifier: bool) -> str:
    if verifier:
        return f"(r{r} {off:+d})"
    return f"(r{r} + {off})" if off >= 0 else f"(r{r} - {-off})"


def _target(insn: Insn, rel: int, verifier: bool, label: str | None) -> str:
    if label is not None:
        return label
    if insn.target is not None:
        return insn.target
    return f"pc{rel:+d}" if verifier else f"{rel:+d}"


def _f_alu(insn: Insn, f: Form, v: bool, label: str | None) -> str:
    r = "r" if f.alu64 else "w"
    sym = ALU_SYMBOLS[f.op]
    if f.reg:
        return f"{r}{insn.dst} {sym} {r}{insn.src}"
    return f"{r}{insn.dst} {sym} {insn.imm}"


def _f_neg(insn: Insn, f: Form, v: bool, label: str | None) -> str:
    r = "r" if f.alu64 else "w"
    return f"{r}{insn.dst} = -{r}{insn.dst}"


def _f_movsx(insn: Insn, f: Form, v: bool, label: str | None) -> str:
    r = "r" if f.alu64 else "w"
    return f"{r}{insn.dst} = (s{f.size}){r}{insn.src}"


def _f_end(insn: Insn, f: Form, v: bool, label: str | None) -> str:
    return f"r{insn.dst} = {f.op}{f.size} r{insn.dst}"


def _f_lddw(insn: Insn, f: Form, v: bool, label: str | None) -> str:
    if f.pseudo == op.PSEUDO_IMM64:
        if v:
            return f"r{insn.dst} = 0x{insn.imm64:x}"
        value = insn.imm64
        if value >= 1 << 63:
            value -= 1 << 64
        return f"r{insn.dst} = {value} ll"
    if label is not None and f.pseudo == op.PSEUDO_FUNC:
        insn = insn.copy()
        insn.target = label
    from .llvm import KEYWORDS      # the parser's words (it imports this module first)
    if (not v and f.pseudo == op.PSEUDO_MAP_FD and insn.map_ref is not None
            and common.is_identifier(insn.map_ref) and insn.map_ref not in KEYWORDS
            and insn.map_ref not in common.PSEUDO_BY_NAME):
        return f"r{insn.dst} = {insn.map_ref} ll"
    text = f"r{insn.dst} = {common.pseudo_operand(insn)}"
    return text if v else text + " ll"


def _f_ldabs(insn: Insn, f: Form, v: bool, label: str | None) -> str:
    return f"r0 = *(u{f.size * 8} *)skb[{insn.imm}]"


def _f_ldind(insn: Insn, f: Form, v: bool, label: str | None) -> str:
    if v:
        return f"r0 = *(u{f.size * 8} *)skb[r{insn.src} + {insn.imm}]"
    if insn.imm == 0:
        return f"r0 = *(u{f.size * 8} *)skb[r{insn.src}]"
    imm = insn.imm
    return f"r0 = *(u{f.size * 8} *)skb[r{insn.src} {'+' if imm >= 0 else '-'} {abs(imm)}]"


def _f_ldx(insn: Insn, f: Form, v: bool, label: str | None) -> str:
    sign = "s" if f.kind == "ldxs" else "u"         # ldxs: the sign-extending load
    return f"r{insn.dst} = *({sign}{f.size * 8} *){_mem(insn.src, insn.off, v)}"


def _f_st(insn: Insn, f: Form, v: bool, label: str | None) -> str:
    value = insn.imm if f.kind == "st" else f"r{insn.src}"      # stx: from a register
    return f"*(u{f.size * 8} *){_mem(insn.dst, insn.off, v)} = {value}"


def _f_atomic(insn: Insn, f: Form, v: bool, label: str | None) -> str:
    size, o = f.size, f.op
    ty = f"u{size * 8}"
    mem = _mem(insn.dst, insn.off, v)
    s, d = insn.src, insn.dst
    if v:  # the kernel prints every register as rN
        w64 = "64" if size == 8 else ""
        if o == "load_acquire":
            return f"r{d} = load_acquire(({ty} *){_mem(s, insn.off, True)})"
        if o == "store_release":
            return f"store_release(({ty} *){mem}, r{s})"
        if o == "xchg":
            return f"r{s} = atomic{w64}_xchg(({ty} *){mem}, r{s})"
        if o == "cmpxchg":
            return f"r0 = atomic{w64}_cmpxchg(({ty} *){mem}, r0, r{s})"
        if f.fetch:
            return f"r{s} = atomic{w64}_fetch_{o}(({ty} *){mem}, r{s})"
        return f"lock *({ty} *){mem} {ATOMIC_SYMBOLS[o]} r{s}"
    r = "r" if size == 8 else "w"
    if o == "load_acquire":
        return f"{r}{d} = load_acquire(({ty} *){_mem(s, insn.off, False)})"
    if o == "store_release":
        return f"store_release(({ty} *){mem}, {r}{s})"
    bare = mem[1:-1]
    if o == "xchg":
        fn = "xchg_64" if size == 8 else "xchg32_32"
        return f"{r}{s} = {fn}({bare}, {r}{s})"
    if o == "cmpxchg":
        fn = "cmpxchg_64" if size == 8 else "cmpxchg32_32"
        return f"{r}0 = {fn}({bare}, {r}0, {r}{s})"
    if f.fetch:
        return f"{r}{s} = atomic_fetch_{o}(({ty} *){mem}, {r}{s})"
    return f"lock *({ty} *){mem} {ATOMIC_SYMBOLS[o]} {r}{s}"


def _f_goto(insn: Insn, f: Form, v: bool, label: str | None) -> str:
    word, wide = _GOTOS[f.kind]
    return f"{word} {_target(insn, insn.imm if wide else insn.off, v, label)}"


def _f_indirect(insn: Insn, f: Form, v: bool, label: str | None) -> str:
    return f"{f.kind} r{insn.dst}"                  # gotox / callx


def _f_jcc(insn: Insn, f: Form, v: bool, label: str | None) -> str:
    r = "r" if f.alu64 else "w"
    sym = JMP_SYMBOLS[f.op]
    if f.reg:
        rhs = f"{r}{insn.src}"
    elif v:
        rhs = f"0x{insn.imm & 0xFFFFFFFF:x}"
    else:
        rhs = str(insn.imm)
    return f"if {r}{insn.dst} {sym} {rhs} goto {_target(insn, insn.off, v, label)}"


def _f_call(insn: Insn, f: Form, v: bool, label: str | None) -> str:
    if f.pseudo == op.CALL_LOCAL:
        if label is not None:
            return f"call {label}"
        if insn.target is not None:
            return f"call {insn.target}"
        return f"call pc{insn.imm:+d}"
    if f.pseudo == op.CALL_KFUNC:
        if insn.off:
            return f"call kernel-function#{insn.imm}, {insn.off}"
        return f"call kernel-function#{insn.imm}"
    if v or insn.imm < 0:    # 'call -1' would not read back (see pyebpf.text.llvm)
        return f"call {common.verifier_helper_name(insn.imm)}#{insn.imm}"
    return f"call {insn.imm}"


def _f_exit(insn: Insn, f: Form, v: bool, label: str | None) -> str:
    return "exit"


_FORMATTERS = {
    "alu": _f_alu, "neg": _f_neg, "movsx": _f_movsx, "end": _f_end, "lddw": _f_lddw,
    "ldabs": _f_ldabs, "ldind": _f_ldind, "ldx": _f_ldx, "ldxs": _f_ldx, "st": _f_st,
    "stx": _f_st, "atomic": _f_atomic, "ja": _f_goto, "gotol": _f_goto, "gotox": _f_indirect,
    "jcc": _f_jcc, "may_goto": _f_goto, "call": _f_call, "callx": _f_indirect, "exit": _f_exit,
}


def format_insn(insn: Insn, style: str = "objdump", label: str | None = None,
                form: Form | None = None) -> str:
    """``insn`` as text in ``style`` (``"objdump"`` or ``"verifier"``).

    ``label`` replaces the numeric target of a jump/local call/``func()``
    (the disassembler's synthetic labels); a symbolic ``insn.target`` is
    printed as is.  An instruction that is not valid prints as ``.8byte``.
    """
    if style not in STYLES:
        raise OptionError(f"unknown style {style!r} (use 'objdump' or 'verifier')")
    if form is None:
        try:
            form = classify(insn)
        except EncodingError:
            return common.raw_directive(insn)
    return _FORMATTERS[form.kind](insn, form, style == "verifier", label)
