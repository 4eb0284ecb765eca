"""The ``llvm`` dialect: LLVM's BPF pseudo-C, and the kernel verifier's spelling of it.

Parsing accepts both spellings in use, statement by statement:

* ``llvm-objdump``/``llvm-mc``: ``goto +3``, ``(r1 + 4)``, ``(r10 - 8)``,
  decimal immediates, ``r1 = 5 ll``, ``r2 = atomic_fetch_add((u64 *)(r1 + 0), r2)``,
  ``r0 = cmpxchg_64(r1 + 0, r0, r2)``, ``ld_pseudo r1, 1, 3``, and what newer
  LLVM prints for cpu v4 (``r1 s/= r2``, ``r1 = (s8)r2``, ``*(s8 *)``,
  ``r1 = bswap16 r1``, ``gotol +5``, ``may_goto +1``, ``callx r1``, ``*(u32 *)(r10 - 4) = 5``,
  ``if r1 & 5 goto +1``, ``load_acquire``/``store_release``);
* the verifier log / ``bpftool prog dump xlated``: ``goto pc+3``, ``(r10 -8)``,
  ``call bpf_map_lookup_elem#1``, ``call pc+2``, ``call kernel-function#N``,
  ``if w5 == 0x3 goto pc+1``, ``r5 = atomic64_fetch_add((u64 *)(r10 -8), r5)``,
  ``r1 = 0xffff888203baad38`` (ld_imm64);

plus labels (``name:``), jumps to labels, ``;``-separated statements,
comments, and the ``N:``/raw-byte/``(xx)`` columns the tools print in front.

Extensions (documented in :mod:`pyebpf.text.common`): ``.8byte`` raw slots;
``r1 = counts ll`` (a symbolic map reference, ``src=PSEUDO_MAP_FD``), and
``r1 = map_value(counts) + 8 ll``, ``map_fd(3)``, ``btf_id(N)``,
``func(label)``, ``map_idx(N)``, ``map_idx_value(N) + 8`` for the other
ld_imm64 pseudo sources (``ll`` optional with these); ``call NAME`` is a
helper if NAME names one (``bpf_`` optional), otherwise a bpf-to-bpf call to
the label NAME; ``call pc+N`` is a bpf-to-bpf call by offset;
``call kernel-function#N`` is a kfunc call (BTF id N; the verifier prints
a resolved kfunc as ``call NAME#N``, also accepted), with ``, M`` appended
when ``off`` (the module BTF's fd_array index) is not 0.

One ambiguity is settled the kernel's way: ``rN = 0x...`` -- a *hex*
constant assigned to a 64-bit register without ``ll`` -- is an ld_imm64,
because that is how the verifier prints one (it prints ALU immediates in
decimal).  Write ``r1 = 5`` or ``r1 = -1`` for a 32-bit-immediate mov.

Two spellings are settled per dialect, and both are accepted on input:

* ``call -1`` is refused (file:line:column, naming the alternatives): llvm-mc
  reads it as helper -1, which does not exist, while llvm-objdump prints
  every call of an object file that waits for its relocation (a bpf-to-bpf
  or kfunc call, ``src_reg=1``) this way.  ``call pc-1`` is that relative
  call, ``call unknown#-1`` the helper call with ``imm=-1`` (both are what
  the printer writes); any other negative helper number likewise.
* a 32-bit atomic's value register is a ``w`` register in the objdump style
  (``lock *(u32 *)(r1 + 0) += w2``: LLVM's print with ``-mcpu=v3``/alu32, and
  the only spelling llvm-mc 14 reads for ``&=``, ``|=``, ``^=``) and an ``r``
  register in the verifier style (``+= r2``: the kernel's print, and LLVM's
  without alu32); either is read as the same instruction, and a ``w``
  register with a 64-bit atomic is refused, as llvm-mc refuses it.

Printing (in :mod:`pyebpf.text.llvm_format`, re-exported here) has two styles:

``objdump``
    what ``llvm-objdump -d`` (LLVM 14) prints where it decodes correctly,
    with newer LLVM's syntax for what it does not know; 32-bit atomics as
    with ``--mattr=+alu32`` (``w`` registers), loads and stores with ``r``.
``verifier``
    byte for byte the kernel's ``print_bpf_insn`` (``kernel/bpf/disasm.c``,
    Linux 6.18) without its ``(xx)`` opcode prefix -- except ld_imm64 with a
    pseudo source, which the kernel prints as a bare pointer; that prints as
    ``r1 = map_fd(3)`` etc. so it can be read back.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, TypeVar, cast

from ..isa import Insn, opcodes as op
from . import common
from .lexer import TextError, Tok, imm32, imm64, off16, reg, rel32, tokenize
from .llvm_format import ALU_SYMBOLS, ATOMIC_SYMBOLS, JMP_SYMBOLS, STYLES, format_insn

__all__ = ["parse_tokens", "format_insn", "STYLES"]

# ---------------------------------------------------------------------------
# operator tables: the spelling of each Form.op is in llvm_format; parsing reads it backwards

_SYMBOL_ALU = {v: k for k, v in ALU_SYMBOLS.items()}
_SYMBOL_JMP = {v: k for k, v in JMP_SYMBOLS.items()}
_SYMBOL_ATOMIC = {v: k for k, v in ATOMIC_SYMBOLS.items()}

_TYPES = {"u8": (1, False), "u16": (2, False), "u32": (4, False), "u64": (8, False),
          "s8": (1, True), "s16": (2, True), "s32": (4, True)}

# ALU op name -> (opcode operation bits, off)
_ALU_CODE = {name: (op.ALU_OPS[name], 0) for name in
             ("add", "sub", "mul", "div", "or", "and", "lsh", "rsh", "mod", "xor", "mov", "arsh")}
_ALU_CODE["sdiv"] = (op.DIV, op.OFF_SIGNED)
_ALU_CODE["smod"] = (op.MOD, op.OFF_SIGNED)

# ---------------------------------------------------------------------------
# keywords: id text -> grammar key

_KW: dict[str, str] = {w: w for w in (
    "goto", "gotol", "gotox", "if", "call", "callx", "exit", "ll", "lock", "skb", "pc",
    "may_goto", "ld_pseudo", "load_acquire", "store_release")}
for _t in _TYPES:
    _KW[_t] = "ty"
for _e in ("be", "le", "bswap"):
    for _w in (16, 32, 64):
        _KW[f"{_e}{_w}"] = "end"
for _a in ("add", "and", "or", "xor"):
    _KW[f"atomic_fetch_{_a}"] = "afetch"
    _KW[f"atomic64_fetch_{_a}"] = "afetch"
for _x in ("xchg_64", "xchg32_32"):
    _KW[_x] = "lxchg"           # LLVM: rS = xchg_64(rD + off, rS)
for _x in ("cmpxchg_64", "cmpxchg32_32"):
    _KW[_x] = "lcmpxchg"        # LLVM: r0 = cmpxchg_64(rD + off, r0, rS)
for _x in ("atomic_xchg", "atomic64_xchg"):
    _KW[_x] = "kxchg"           # kernel: r5 = atomic64_xchg((u64 *)(r10 -8), r5)
for _x in ("atomic_cmpxchg", "atomic64_cmpxchg"):
    _KW[_x] = "kcmpxchg"
KEYWORDS = frozenset(_KW)

# ---------------------------------------------------------------------------
# grammar: patterns expanded into token-key shapes

if TYPE_CHECKING:
    from typing import Optional, Union

    #: ``<imm>``: the number token and whether a minus sign preceded it
    _Signed = tuple[Tok, bool]
    #: ``<off>``: like ``<imm>``, or ``(None, False)`` when the offset is left out
    _Off = tuple[Optional[Tok], bool]
    #: ``<tgt>``: ``("rel", number token, negative)`` or ``("label", name token, False)``
    _Tgt = tuple[str, Tok, bool]
    #: what one slot of a pattern passes to the builder
    _Value = Union[Tok, _Signed, _Off, _Tgt]
    #: takes a statement's tokens, gives one slot's value
    _Extract = Callable[[list[Tok]], _Value]
    #: the pattern trie: token key -> subtree; the key "$" marks a complete pattern
    _Trie = dict[str, "_Trie"]

_B = TypeVar("_B", bound=Callable[..., Insn])


def _tok(i: int) -> _Extract:
    return lambda t: t[i]


def _signed(i: int, neg: bool) -> _Extract:
    return lambda t: (t[i], neg)


def _none(_: int) -> _Extract:
    return lambda t: (None, False)


def _rel(i: int, neg: bool) -> _Extract:
    return lambda t: ("rel", t[i], neg)


def _label(i: int) -> _Extract:
    return lambda t: ("label", t[i], False)


# slot kind -> alternatives: (keys, factory(start_index) -> extractor)
_SLOTS: dict[str, list[tuple[tuple[str, ...], Callable[[int], _Extract]]]] = {
    "x": [(("r",), _tok), (("w",), _tok)],
    "r": [(("r",), _tok)],
    "w": [(("w",), _tok)],
    "imm": [(("n",), lambda i: _signed(i, False)), (("-", "n"), lambda i: _signed(i + 1, True)),
            (("+", "n"), lambda i: _signed(i + 1, False))],
    "off": [((), _none), (("+", "n"), lambda i: _signed(i + 1, False)),
            (("-", "n"), lambda i: _signed(i + 1, True)),
            (("+", "-", "n"), lambda i: _signed(i + 2, True))],
    "tgt": [(("+", "n"), lambda i: _rel(i + 1, False)), (("-", "n"), lambda i: _rel(i + 1, True)),
            (("pc", "+", "n"), lambda i: _rel(i + 2, False)),
            (("pc", "-", "n"), lambda i: _rel(i + 2, True)),
            (("n",), lambda i: _rel(i, False)), (("id",), _label)],
}
for _k in ("n", "id", "idnum", "aop", "cop", "ty", "end", "afetch", "lxchg", "lcmpxchg",
           "kxchg", "kcmpxchg"):
    _SLOTS[_k] = [((_k,), _tok)]

_SHAPES: dict[tuple[str, ...], tuple[Callable[..., Insn], tuple[_Extract, ...]]] = {}
_TRIE: _Trie = {}


def _pattern(text: str) -> Callable[[_B], _B]:
    """Register a builder for the statement pattern ``text`` (a decorator).

    Items are literal tokens, ``<slot>`` (see ``_SLOTS``: each passes one
    value to the builder) or ``[literal]`` (optional, passes nothing).
    """
    def register(builder: _B) -> _B:
        variants: list[tuple[tuple[str, ...], tuple[_Extract, ...]]] = [((), ())]
        for item in text.split():
            if item[0] == "<":
                alts = _SLOTS[item[1:-1]]
                variants = [(keys + k, plan + (fac(len(keys)),))
                            for keys, plan in variants for k, fac in alts]
            elif item[0] == "[" and len(item) > 2:
                lit = item[1:-1]
                variants = [v for keys, plan in variants for v in ((keys, plan), (keys + (lit,), plan))]
            else:
                variants = [(keys + (item,), plan) for keys, plan in variants]
        for keys, plan in variants:
            if keys in _SHAPES:
                raise AssertionError(f"ambiguous pattern {text!r}: {keys}")
            _SHAPES[keys] = (builder, plan)
            node = _TRIE
            for k in keys:
                node = node.setdefault(k, {})
            node["$"] = {}
        return builder
    return register


_KEY_WORDS = {
    "r": "a register (r0-r10)", "w": "a 32-bit register (w0-w10)", "n": "a number",
    "id": "a name", "idnum": "NAME#N", "aop": "an operator (+=, -=, <<=, ...)",
    "cop": "a comparison (==, !=, s<, &, ...)", "ty": "a type (u8/u16/u32/u64/s8/s16/s32)",
    "end": "be16/be32/be64/le16/le32/le64/bswap16/bswap32/bswap64",
    "afetch": "atomic_fetch_add/and/or/xor", "lxchg": "xchg_64/xchg32_32",
    "lcmpxchg": "cmpxchg_64/cmpxchg32_32", "kxchg": "atomic_xchg/atomic64_xchg",
    "kcmpxchg": "atomic_cmpxchg/atomic64_cmpxchg",
}


def _syntax_error(toks: list[Tok], keys: tuple[str, ...]) -> TextError:
    """The most helpful error for a statement that matches no pattern."""
    node = _TRIE
    for i, k in enumerate(keys):
        nxt = node.get(k)
        if nxt is None:
            t = toks[i]
            if i == 0:
                if k == "id":
                    from .mnemonic import is_mnemonic
                    hint = (f" ({t.text!r} is an instruction of the mnemonic dialect, "
                            "'mov %r0, 1'; this text is read in the llvm dialect, 'r0 = 1': "
                            "choose the dialect with --dialect mnemonic)"
                            ) if is_mnemonic(t.text) else ""
                    return TextError(f"unknown instruction {t.text!r}{hint}", t.col)
                return TextError(f"no instruction starts with {t.text!r}", t.col)
            if i == 1 and keys[0] == "id":
                return TextError(f"unknown instruction {toks[0].text!r} "
                                 f"(a label needs a ':' after it)", toks[0].col)
            return TextError(f"unexpected {t.text!r}; expected {_expected(node)}", t.col)
        node = nxt
    last = toks[-1]
    return TextError(f"incomplete instruction; expected {_expected(node)} "
                     f"after {last.text!r}", last.col + len(last.text))


def _expected(node: _Trie) -> str:
    words = [_KEY_WORDS.get(k, repr(k)) for k in node if k != "$"]
    if len(words) > 6:
        words = words[:6] + ["..."]
    return " or ".join(words) if len(words) <= 2 else ", ".join(words[:-1]) + " or " + words[-1]


# ---------------------------------------------------------------------------
# operand helpers

def _same_width(a: Tok, b: Tok) -> None:
    if a.key != b.key:
        raise TextError(f"{b.text} and {a.text} differ in width: use both rN (64-bit) "
                        f"or both wN (32-bit)", b.col)


def _same_reg(a: Tok, b: Tok, what: str) -> None:
    if a.value != b.value or a.key != b.key:
        raise TextError(f"{what} must use the same register on both sides "
                        f"({a.text} ... {b.text})", b.col)


def _imm(v: _Signed) -> int:
    tok, neg = v
    return imm32(tok, neg)


def _off(v: _Off) -> int:
    tok, neg = v
    if tok is None:
        return 0
    return off16(tok, neg)


def _size(ty: Tok, allowed: tuple[int, ...] = (1, 2, 4, 8),
          signed_ok: bool = False) -> tuple[int, bool]:
    size, signed = _TYPES[cast(str, ty.value)]
    if signed and not signed_ok:
        raise TextError(f"{ty.text} is only for sign-extending loads; use u{size * 8}", ty.col)
    if size not in allowed:
        names = "/".join(f"u{s * 8}" for s in allowed)
        raise TextError(f"{ty.text} is not allowed here ({names})", ty.col)
    return size, signed


def _jump(code: int, dst: int, src: int, imm: int, tgt: _Tgt, wide: bool = False) -> Insn:
    """A jump to ``tgt`` (a ('rel', tok, neg) or ('label', tok, _) slot value)."""
    kind, tok, neg = tgt
    if kind == "label":
        return Insn(code, dst, src, 0, imm, target=cast(str, tok.value))
    if wide:
        return Insn(code, dst, src, 0, rel32(tok, neg))
    return Insn(code, dst, src, off16(tok, neg, "jump offset"), imm)


def _alu_class(t: Tok) -> int:
    return op.ALU64 if t.key == "r" else op.ALU


# ---------------------------------------------------------------------------
# patterns and their builders

@_pattern("<x> <aop> <x>")
def _alu_reg(d: Tok, o: Tok, s: Tok) -> Insn:
    name = _SYMBOL_ALU.get(cast(str, o.value))
    if name is None or name == "mov":
        raise TextError(f"{o.text} is not an ALU operator", o.col)
    _same_width(d, s)
    bits, off = _ALU_CODE[name]
    return Insn(bits | op.X | _alu_class(d), reg(d), reg(s), off)


@_pattern("<x> <aop> <imm>")
def _alu_imm(d: Tok, o: Tok, v: _Signed) -> Insn:
    name = _SYMBOL_ALU.get(cast(str, o.value))
    if name is None:
        raise TextError(f"{o.text} is not an ALU operator", o.col)
    bits, off = _ALU_CODE[name]
    return Insn(bits | op.K | _alu_class(d), reg(d), 0, off, _imm(v))


@_pattern("<x> = <x>")
def _mov_reg(d: Tok, s: Tok) -> Insn:
    _same_width(d, s)
    return Insn(op.MOV | op.X | _alu_class(d), reg(d), reg(s))


@_pattern("<x> = <imm>")
def _mov_imm(d: Tok, v: _Signed) -> Insn:
    tok, neg = v
    if d.key == "r" and tok.hex and not neg:
        # the kernel's spelling of ld_imm64: "r1 = 0x5"
        insn = Insn(op.OP_LD_IMM64, reg(d))
        insn.imm64 = imm64(tok)
        return insn
    return Insn(op.MOV | op.K | _alu_class(d), reg(d), 0, 0, imm32(tok, neg))


@_pattern("<x> = - <x>")
def _neg(d: Tok, s: Tok) -> Insn:
    _same_reg(d, s, "neg")
    return Insn(op.NEG | _alu_class(d), reg(d))


@_pattern("<x> = ( <ty> ) <x>")
def _movsx(d: Tok, ty: Tok, s: Tok) -> Insn:
    _same_width(d, s)
    size, signed = _TYPES[cast(str, ty.value)]
    if not signed or (size == 4 and d.key == "w") or size == 8:
        allowed = "s8, s16 or s32" if d.key == "r" else "s8 or s16"
        raise TextError(f"sign-extending move takes {allowed}", ty.col)
    return Insn(op.MOV | op.X | _alu_class(d), reg(d), reg(s), size * 8)


@_pattern("<x> = <end> <x>")
def _end(d: Tok, e: Tok, s: Tok) -> Insn:
    _same_reg(d, s, "a byte swap")
    name = cast(str, e.value)
    width = int(name[-2:])
    if name.startswith("bswap"):
        code = op.ALU64 | op.END | op.TO_LE
    else:
        code = op.ALU | op.END | (op.TO_BE if name[:2] == "be" else op.TO_LE)
    return Insn(code, reg(d), 0, 0, width)


@_pattern("<r> = <imm> ll")
def _lddw(d: Tok, v: _Signed) -> Insn:
    tok, neg = v
    insn = Insn(op.OP_LD_IMM64, reg(d))
    insn.imm64 = imm64(tok, neg)
    return insn


@_pattern("<r> = <id> ll")
def _lddw_map(d: Tok, name: Tok) -> Insn:
    return common.map_insn(reg(d), cast(str, name.value))


@_pattern("<r> = <id> ( <id> ) [ll]")
def _lddw_pseudo(d: Tok, name: Tok, arg: Tok) -> Insn:
    return common.pseudo_insn(reg(d), name, arg, None)


@_pattern("<r> = <id> ( <imm> ) [ll]")
def _lddw_pseudo_num(d: Tok, name: Tok, a: _Signed) -> Insn:
    return common.pseudo_insn(reg(d), name, a[0], None, negative=a[1])


@_pattern("<r> = <id> ( <id> ) <imm> [ll]")
def _lddw_pseudo_off(d: Tok, name: Tok, arg: Tok, v: _Signed) -> Insn:
    tok, neg = v
    value = cast(int, tok.value)
    return common.pseudo_insn(reg(d), name, arg, -value if neg else value, tok)


@_pattern("<r> = <id> ( <imm> ) <imm> [ll]")
def _lddw_pseudo_num_off(d: Tok, name: Tok, a: _Signed, v: _Signed) -> Insn:
    tok, neg = v
    value = cast(int, tok.value)
    return common.pseudo_insn(reg(d), name, a[0], -value if neg else value, tok,
                              negative=a[1])


@_pattern("ld_pseudo <r> , <n> , <n>")
def _ld_pseudo(d: Tok, src: Tok, imm: Tok) -> Insn:
    pseudo = cast(int, src.value)
    if pseudo not in common.PSEUDO_NAMES:
        raise TextError(f"ld_imm64 pseudo source {src.text} is not 1..6", src.col)
    v = cast(int, imm.value)
    if v > 0xFFFFFFFF:
        raise TextError(f"immediate {imm.text} does not fit in 32 bits", imm.col)
    return Insn(op.OP_LD_IMM64, reg(d), pseudo, 0, v - (1 << 32) if v >= 1 << 31 else v)


@_pattern("<x> = * ( <ty> * ) ( <r> <off> )")
def _ldx(d: Tok, ty: Tok, s: Tok, o: _Off) -> Insn:
    size, signed = _size(ty, signed_ok=True)
    if signed and size == 8:
        raise TextError("there is no sign-extending 64-bit load; use u64", ty.col)
    if d.key == "w" and size == 8:
        raise TextError("a 64-bit load needs a 64-bit register (rN)", d.col)
    mode = op.MEMSX if signed else op.MEM
    return Insn(mode | op.BYTES_SIZE[size] | op.LDX, reg(d), reg(s), _off(o))


@_pattern("<r> = * ( <ty> * ) skb [ <imm> ]")
def _ldabs(d: Tok, ty: Tok, v: _Signed) -> Insn:
    size, _ = _size(ty, (1, 2, 4))
    if reg(d) != 0:
        raise TextError("packet loads always load into r0", d.col)
    return Insn(op.ABS | op.BYTES_SIZE[size] | op.LD, 0, 0, 0, _imm(v))


@_pattern("<r> = * ( <ty> * ) skb [ <r> <off> ]")
def _ldind(d: Tok, ty: Tok, s: Tok, v: _Off) -> Insn:
    size, _ = _size(ty, (1, 2, 4))
    if reg(d) != 0:
        raise TextError("packet loads always load into r0", d.col)
    tok, neg = v
    imm = 0 if tok is None else imm32(tok, neg)
    return Insn(op.IND | op.BYTES_SIZE[size] | op.LD, 0, reg(s), 0, imm)


@_pattern("* ( <ty> * ) ( <r> <off> ) = <x>")
def _stx(ty: Tok, d: Tok, o: _Off, s: Tok) -> Insn:
    size, _ = _size(ty)
    if s.key == "w" and size == 8:
        raise TextError("a 64-bit store needs a 64-bit register (rN)", s.col)
    return Insn(op.MEM | op.BYTES_SIZE[size] | op.STX, reg(d), reg(s), _off(o))


@_pattern("* ( <ty> * ) ( <r> <off> ) = <imm>")
def _st(ty: Tok, d: Tok, o: _Off, v: _Signed) -> Insn:
    size, _ = _size(ty)
    return Insn(op.MEM | op.BYTES_SIZE[size] | op.ST, reg(d), 0, _off(o), _imm(v))


def _atomic(size: int, d: Tok, o: _Off, s: Tok, imm: int) -> Insn:
    return Insn(op.ATOMIC | op.BYTES_SIZE[size] | op.STX, reg(d), reg(s), _off(o), imm)


def _atomic_size(ty: Tok, val: Tok, name: str | None = None) -> int:
    size, _ = _size(ty, (4, 8))
    if size == 8 and val.key == "w":
        raise TextError("a 64-bit atomic operation needs a 64-bit register (rN)", val.col)
    if name is not None and "64" in name and size != 8:
        raise TextError(f"{name} does not operate on {ty.text}", ty.col)
    return size


@_pattern("lock * ( <ty> * ) ( <r> <off> ) <aop> <x>")
def _lock(ty: Tok, d: Tok, o: _Off, a: Tok, s: Tok) -> Insn:
    name = _SYMBOL_ATOMIC.get(cast(str, a.value))
    if name is None:
        raise TextError(f"atomic operations are +=, &=, |= and ^= (not {a.text})", a.col)
    return _atomic(_atomic_size(ty, s), d, o, s, op.ATOMIC_ARITH[name])


@_pattern("<x> = <afetch> ( ( <ty> * ) ( <r> <off> ) , <x> )")
def _fetch(v: Tok, f: Tok, ty: Tok, d: Tok, o: _Off, s: Tok) -> Insn:
    _same_reg(v, s, "an atomic fetch")
    name = cast(str, f.value)
    size = _atomic_size(ty, s, name)
    return _atomic(size, d, o, s, op.ATOMIC_ARITH[name.rpartition("_")[2]] | op.FETCH)


@_pattern("<x> = <lxchg> ( <r> <off> , <x> )")
def _xchg_llvm(v: Tok, f: Tok, d: Tok, o: _Off, s: Tok) -> Insn:
    _same_reg(v, s, "xchg")
    size = 8 if f.value == "xchg_64" else 4
    if size == 8 and s.key == "w":
        raise TextError("xchg_64 needs 64-bit registers (rN)", s.col)
    return _atomic(size, d, o, s, op.XCHG)


@_pattern("<x> = <kxchg> ( ( <ty> * ) ( <r> <off> ) , <x> )")
def _xchg_kernel(v: Tok, f: Tok, ty: Tok, d: Tok, o: _Off, s: Tok) -> Insn:
    _same_reg(v, s, "xchg")
    return _atomic(_atomic_size(ty, s, cast(str, f.value)), d, o, s, op.XCHG)


def _check_r0(t: Tok) -> None:
    if t.value != 0:
        raise TextError("cmpxchg compares with r0 and returns the old value in r0", t.col)


@_pattern("<x> = <lcmpxchg> ( <r> <off> , <x> , <x> )")
def _cmpxchg_llvm(v: Tok, f: Tok, d: Tok, o: _Off, r0: Tok, s: Tok) -> Insn:
    _check_r0(v)
    _check_r0(r0)
    size = 8 if f.value == "cmpxchg_64" else 4
    if size == 8 and s.key == "w":
        raise TextError("cmpxchg_64 needs 64-bit registers (rN)", s.col)
    return _atomic(size, d, o, s, op.CMPXCHG)


@_pattern("<x> = <kcmpxchg> ( ( <ty> * ) ( <r> <off> ) , <x> , <x> )")
def _cmpxchg_kernel(v: Tok, f: Tok, ty: Tok, d: Tok, o: _Off, r0: Tok, s: Tok) -> Insn:
    _check_r0(v)
    _check_r0(r0)
    return _atomic(_atomic_size(ty, s, cast(str, f.value)), d, o, s, op.CMPXCHG)


def _ordered_size(ty: Tok, val: Tok, what: str) -> int:
    """The size of a load-acquire/store-release, whose value register ``val``
    must be 64-bit for a u64 (``what``: "load" or "store")."""
    size, _ = _size(ty)
    if size == 8 and val.key == "w":
        raise TextError(f"a 64-bit {what} needs a 64-bit register (rN)", val.col)
    return size


@_pattern("<x> = load_acquire ( ( <ty> * ) ( <r> <off> ) )")
def _load_acquire(v: Tok, ty: Tok, s: Tok, o: _Off) -> Insn:
    # like a load: dst_reg receives the value, src_reg holds the address
    return _atomic(_ordered_size(ty, v, "load"), v, o, s, op.LOAD_ACQ)


@_pattern("store_release ( ( <ty> * ) ( <r> <off> ) , <x> )")
def _store_release(ty: Tok, d: Tok, o: _Off, s: Tok) -> Insn:
    return _atomic(_ordered_size(ty, s, "store"), d, o, s, op.STORE_REL)


@_pattern("goto <tgt>")
def _goto(t: _Tgt) -> Insn:
    return _jump(op.OP_JA, 0, 0, 0, t)


@_pattern("gotol <tgt>")
def _gotol(t: _Tgt) -> Insn:
    return _jump(op.OP_GOTOL, 0, 0, 0, t, wide=True)


@_pattern("may_goto <tgt>")
def _may_goto(t: _Tgt) -> Insn:
    return _jump(op.OP_MAY_GOTO, 0, 0, 0, t)


@_pattern("gotox <r>")
def _gotox(r: Tok) -> Insn:
    return Insn(op.OP_GOTOX, reg(r))


@_pattern("if <x> <cop> <x> goto <tgt>")
def _jcc_reg(d: Tok, c: Tok, s: Tok, t: _Tgt) -> Insn:
    _same_width(d, s)
    cls = op.JMP if d.key == "r" else op.JMP32
    return _jump(op.JMP_OPS[_SYMBOL_JMP[cast(str, c.value)]] | op.X | cls, reg(d), reg(s), 0, t)


@_pattern("if <x> <cop> <imm> goto <tgt>")
def _jcc_imm(d: Tok, c: Tok, v: _Signed, t: _Tgt) -> Insn:
    cls = op.JMP if d.key == "r" else op.JMP32
    return _jump(op.JMP_OPS[_SYMBOL_JMP[cast(str, c.value)]] | op.K | cls, reg(d), 0, _imm(v), t)


@_pattern("call <imm>")
def _call_num(v: _Signed) -> Insn:
    imm = _imm(v)
    if imm < 0:
        raise _negative_call(v, imm)
    return Insn(op.OP_CALL, 0, op.CALL_HELPER, 0, imm)


def _negative_call(v: _Signed, imm: int) -> TextError:
    """Why ``call -1`` is refused: in llvm-mc's reading it is helper -1 (which
    does not exist), in llvm-objdump's listing of an object a bpf-to-bpf or
    kfunc call waiting for its relocation (``src_reg=1``).  Neither is guessed."""
    tok, neg = v
    return TextError(f"'call {'-' * neg}{tok.text}' is ambiguous: helper ids are never "
                     f"negative, and llvm-objdump prints a bpf-to-bpf or kfunc call of an "
                     f"object file (src_reg=1, before relocation) this way; write "
                     f"'call pc{imm:+d}' for that relative call, 'call NAME' to call the label "
                     f"or helper NAME, or 'call unknown#{imm}' for a helper call with imm {imm}",
                     tok.col, call_imm=imm)


@_pattern("call <id>")
def _call_name(name: Tok) -> Insn:
    return common.call_by_name(name)


@_pattern("call <idnum>")
def _call_idnum(t: Tok) -> Insn:
    return common.call_by_idnum(t)


@_pattern("call <idnum> , <imm>")
def _call_kfunc_module(t: Tok, v: _Signed) -> Insn:
    insn = common.call_by_idnum(t)
    if insn.src != op.CALL_KFUNC:
        raise TextError("only a kfunc call takes a module BTF index", v[0].col)
    tok, neg = v
    insn.off = off16(tok, neg, "module BTF index")
    return insn


@_pattern("call pc + <n>")
def _call_pc(n: Tok) -> Insn:
    return Insn(op.OP_CALL, 0, op.CALL_LOCAL, 0, rel32(n))


@_pattern("call pc - <n>")
def _call_pc_back(n: Tok) -> Insn:
    return Insn(op.OP_CALL, 0, op.CALL_LOCAL, 0, rel32(n, True))


@_pattern("callx <x>")
def _callx(r: Tok) -> Insn:
    return Insn(op.OP_CALLX, reg(r))


@_pattern("exit")
def _exit() -> Insn:
    return Insn(op.OP_EXIT)


# ---------------------------------------------------------------------------
# parsing

def parse_tokens(toks: list[Tok], opcode: int | None = None) -> Insn:
    """Build the instruction a statement's tokens spell.

    ``opcode`` is the ``(xx)`` the verifier printed in front of the statement,
    if any: it settles ``r1 = 0x5`` (ld_imm64 unless the opcode says mov) and
    is checked against the result.
    """
    get = _KW.get    # keyword texts map to their key; no other token's text is a keyword
    keys = tuple([get(t.text, t.key) for t in toks])
    entry = _SHAPES.get(keys)
    if entry is None:
        raise _syntax_error(toks, keys)
    builder, plan = entry
    insn = builder(*[f(toks) for f in plan])
    if opcode is not None and insn.code != opcode:
        if insn.code == op.OP_LD_IMM64 and opcode in (op.ALU64 | op.MOV | op.K,) \
                and insn.src == 0 and insn.imm64 < 1 << 31:
            return Insn(opcode, insn.dst, 0, 0, insn.imm)
        raise TextError(f"the text is opcode 0x{insn.code:02x}, but the line says "
                        f"({opcode:02x})", toks[0].col)
    return insn


def parse_statement(text: str, col: int = 1) -> Insn:
    """Parse one statement (no label, no comment) into an Insn."""
    return parse_tokens(tokenize(text, col))
