"""Spellings both dialects share: raw ``.8byte`` slots, the ``ld_imm64``
pseudo sources, and how a ``call`` operand names a helper, a kfunc or a label.

Raw slots
    ``.8byte V[, V...]`` emits each value as one 8-byte little-endian slot,
    as GNU ``as``/``llvm-mc`` would, so ``V = imm<<32 | off<<16 | src<<12 |
    dst<<8 | opcode`` -- the same number a bpf_conformance ``-- raw`` section
    holds.  The disassembler prints slots that are not a valid instruction
    this way, so its output always assembles back to the same bytes.  The two
    slots of an ``ld_imm64`` go on one directive.

ld_imm64 pseudo sources (``src_reg`` 1..6)
    ``NAME(ARG)`` with NAME from :data:`pyebpf.isa.opcodes.LD_IMM64_PSEUDO_NAMES`
    (``map_fd``, ``map_value``, ``btf_id``, ``func``, ``map_idx``,
    ``map_idx_value``); ARG is a number (the ``imm`` field: a map fd, an
    fd_array index, a BTF id, a relative offset for ``func``) or a name (a
    symbolic map reference bound at load time, ``Insn.map_ref``; for
    ``func`` a label).  The two ``*_value`` forms add ``+ OFFSET`` (the second
    immediate).  A bare name is short for ``map_fd(name)``.
"""
from __future__ import annotations

import re
import struct
from typing import cast

from ..isa import HELPERS, Insn
from ..isa import opcodes as op
from .lexer import TextError, Tok

PSEUDO_BY_NAME: dict[str, int] = {name: src for src, name in op.LD_IMM64_PSEUDO_NAMES.items()
                                  if src != op.PSEUDO_IMM64}
PSEUDO_NAMES: dict[int, str] = {src: name for name, src in PSEUDO_BY_NAME.items()}
#: pseudo sources whose second immediate is an offset into the map value
PSEUDO_WITH_OFFSET = frozenset((op.PSEUDO_MAP_VALUE, op.PSEUDO_MAP_IDX_VALUE))
#: pseudo sources whose argument may be a symbolic map name
PSEUDO_MAPS = frozenset((op.PSEUDO_MAP_FD, op.PSEUDO_MAP_VALUE, op.PSEUDO_MAP_IDX,
                         op.PSEUDO_MAP_IDX_VALUE))

_IDENT_RE = re.compile(r"[A-Za-z_.$][\w.$]*\Z")
_SLOT = struct.Struct("<BBhi")
_U64 = struct.Struct("<Q")


def is_identifier(name: str) -> bool:
    """True if ``name`` lexes as one name token (so it can be printed bare)."""
    return _IDENT_RE.match(name) is not None


# ---------------------------------------------------------------------------
# ld_imm64 pseudo operands

def pseudo_operand(insn: Insn) -> str:
    """``map_fd(3)``, ``map_value(counts) + 8``, ``func(L12)``... for an ld_imm64
    with ``src != 0`` (without the destination and without ``ll``)."""
    src = insn.src
    name = PSEUDO_NAMES[src]
    if insn.map_ref is not None and src in PSEUDO_MAPS:
        arg = insn.map_ref
    elif insn.target is not None and src == op.PSEUDO_FUNC:
        arg = insn.target
    else:
        arg = str(insn.imm)
    text = f"{name}({arg})"
    if src in PSEUDO_WITH_OFFSET and insn.next_imm:
        n = insn.next_imm
        text += f" + {n}" if n >= 0 else f" - {-n}"
    return text


def pseudo_insn(dst: int, name_tok: Tok, arg: Tok, offset: int | None,
                offset_tok: Tok | None = None, negative: bool = False) -> Insn:
    """Build the ld_imm64 ``dst = NAME(ARG) [+ offset]`` (``negative``: ARG had a minus sign)."""
    src = PSEUDO_BY_NAME.get(cast(str, name_tok.value))
    if src is None:
        known = ", ".join(PSEUDO_BY_NAME)
        raise TextError(f"unknown ld_imm64 pseudo source {name_tok.text!r} (known: {known})",
                        name_tok.col)
    insn = Insn(op.OP_LD_IMM64, dst, src)
    if arg.key == "n":
        v = -cast(int, arg.value) if negative else cast(int, arg.value)
        if not -(1 << 31) <= v <= 0xFFFFFFFF:
            raise TextError(f"{name_tok.text} argument {'-' if negative else ''}{arg.text} "
                            f"does not fit in 32 bits", arg.col)
        insn.imm = v - (1 << 32) if v >= 1 << 31 else v
    elif src in PSEUDO_MAPS:
        insn.map_ref = cast(str, arg.value)
    elif src == op.PSEUDO_FUNC:
        insn.target = cast(str, arg.value)
    else:
        raise TextError(f"{name_tok.text}() takes a number", arg.col)
    if offset is not None:
        if src not in PSEUDO_WITH_OFFSET:
            raise TextError(f"{name_tok.text}() takes no offset (only map_value and "
                            f"map_idx_value do)", offset_tok.col if offset_tok else name_tok.col)
        if not -(1 << 31) <= offset < (1 << 31):
            raise TextError("map value offset does not fit in 32 bits",
                            offset_tok.col if offset_tok else name_tok.col)
        insn.next_imm = offset
    return insn


def map_insn(dst: int, name: str) -> Insn:
    """``dst = NAME ll``: a symbolic map reference (ld_imm64 ``src=PSEUDO_MAP_FD``)."""
    return Insn(op.OP_LD_IMM64, dst, op.PSEUDO_MAP_FD, map_ref=name)


# ---------------------------------------------------------------------------
# calls

_HELPER_IDS: dict[str, int] = {}
for _h in HELPERS:
    _HELPER_IDS[_h.name] = _h.id
    _HELPER_IDS[_h.c_name] = _h.id


def helper_id(name: str) -> int | None:
    """The id of helper ``name`` (with or without ``bpf_``), or None."""
    return _HELPER_IDS.get(name)


def call_by_name(tok: Tok) -> Insn:
    """``call NAME``: a helper if NAME is one (``bpf_`` optional), else a
    bpf-to-bpf call to the label NAME."""
    name = cast(str, tok.value)
    hid = helper_id(name)
    if hid is not None and hid != 0:
        return Insn(op.OP_CALL, 0, op.CALL_HELPER, 0, hid)
    return Insn(op.OP_CALL, 0, op.CALL_LOCAL, 0, 0, target=name)


def call_by_idnum(tok: Tok) -> Insn:
    """The verifier's ``call NAME#N``: a helper (``bpf_map_lookup_elem#1``,
    ``unknown#300``) or a kfunc (``kernel-function#N``, or a name that is not
    a helper: the verifier prints a resolved kfunc's BTF name)."""
    name, num = cast("tuple[str, int]", tok.value)
    if not -(1 << 31) <= num < (1 << 31):
        raise TextError(f"call number {num} does not fit in 32 bits", tok.col)
    if name == "kernel-function":
        return Insn(op.OP_CALL, 0, op.CALL_KFUNC, 0, num)
    if name == "unknown" or helper_id(name) is not None:
        return Insn(op.OP_CALL, 0, op.CALL_HELPER, 0, num)
    return Insn(op.OP_CALL, 0, op.CALL_KFUNC, 0, num)


def verifier_helper_name(imm: int) -> str:
    """What the kernel's ``print_bpf_insn`` prints before ``#imm`` for a helper call."""
    if 0 <= imm < len(HELPERS) and HELPERS[imm].id == imm:
        return HELPERS[imm].c_name
    return "unknown"


# ---------------------------------------------------------------------------
# raw slots

def slot_value(code: int, dst: int, src: int, off: int, imm: int) -> int:
    """One slot as the little-endian u64 that ``.8byte`` writes."""
    value: int = _U64.unpack(_SLOT.pack(code, (src << 4) | dst, off, imm))[0]
    return value


def raw_directive(insn: Insn) -> str:
    """``.8byte 0x...`` text that assembles back to exactly ``insn``'s bytes."""
    first = slot_value(insn.code, insn.dst & 15, insn.src & 15, insn.off, insn.imm)
    if insn.code == op.OP_LD_IMM64:
        second = slot_value(0, 0, 0, 0, insn.next_imm or 0)
        return f".8byte 0x{first:016x}, 0x{second:016x}"
    return f".8byte 0x{first:016x}"


def raw_insns(values: list[tuple[int, int]]) -> list[Insn]:
    """Instructions from ``.8byte`` values ``[(value, col), ...]``."""
    out: list[Insn] = []
    i = 0
    while i < len(values):
        value, col = values[i]
        if not 0 <= value <= 0xFFFFFFFFFFFFFFFF:
            raise TextError("a .8byte value must fit in 64 bits", col)
        code, regs, off, imm = _SLOT.unpack(_U64.pack(value))
        insn = Insn(code, regs & 15, regs >> 4, off, imm)
        if code == op.OP_LD_IMM64:
            if i + 1 >= len(values):
                raise TextError("an ld_imm64 slot (opcode 0x18) needs its second slot on the "
                                "same .8byte directive", col)
            value2, col2 = values[i + 1]
            if not 0 <= value2 <= 0xFFFFFFFFFFFFFFFF:
                raise TextError("a .8byte value must fit in 64 bits", col2)
            c2, r2, o2, imm2 = _SLOT.unpack(_U64.pack(value2))
            if c2 or r2 or o2:
                raise TextError("the second slot of an ld_imm64 must have zero opcode, registers "
                                "and offset (an Insn cannot hold anything else there)", col2)
            insn.next_imm = imm2
            i += 1
        out.append(insn)
        i += 1
    return out


def parse_raw_values(toks: list[Tok]) -> list[tuple[int, int]]:
    """The operands of ``.8byte``: numbers (optionally negative) separated by commas."""
    values: list[tuple[int, int]] = []
    i, n = 1, len(toks)
    if n == 1:
        raise TextError(".8byte needs at least one value", toks[0].col + len(toks[0].text))
    while i < n:
        t = toks[i]
        neg = False
        if t.key == "-" and i + 1 < n:
            neg = True
            i += 1
            t = toks[i]
        if t.key != "n":
            raise TextError(f"expected a number, found {t.text!r}", t.col)
        v = cast(int, t.value)
        values.append(((-v) & 0xFFFFFFFFFFFFFFFF if neg else v, t.col))
        i += 1
        if i < n:
            if toks[i].key != ",":
                raise TextError(f"expected ',' between .8byte values, found {toks[i].text!r}",
                                toks[i].col)
            i += 1
            if i == n:
                raise TextError("expected a value after ','", toks[i - 1].col + 1)
    return values
