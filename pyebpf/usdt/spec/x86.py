"""x86 USDT argument specs in AT&T syntax: x86_64, x32 and i386.

The register tables are data: every name gcc and clang print, sub-registers
included (``%dil``, ``%ah``, ``%r8d``, ``%xmm1``), maps to the full register,
the width written and its bit position; the reverse tables give the canonical
name back for formatting.  Operands: ``%reg``, ``$imm``, ``$sym+off`` (an
address), ``off(%base,%index,scale)`` with any part optional, rip-relative
symbols (``sym+8(%rip)``), relocations (``sym@GOTPCREL(%rip)``), absolute
addresses and segment overrides (``%fs:8``).
"""
from __future__ import annotations

import re

from typing import Callable

from . import ArgKind, ArgSpec, _expr, _Fail, _fmt_disp, _int, _Maker

#: the forms :func:`~pyebpf.usdt.spec.parse_arg` accepts, for its error messages.
EXPECTED = ("N@%reg, N@$imm, N@off(%reg), N@(%reg), N@off(%base,%index,scale), "
            "N@(,%index,scale), N@sym(%rip), N@sym+off(%rip), N@off+sym(%rip), "
            "N@sym(%reg), N@sym(,%index,scale), N@sym@GOTPCREL(%rip), Nf@%xmmN "
            "(N = [-]1, 2, 4 or 8)")


_RegTable = dict[str, tuple[str, int, int]]        # name -> (full register, width, shift)
_RegNames = dict[tuple[str, int, int], str]        # the reverse, to canonical names

# (duplicates: deliberate, the tables spell out every name gcc and clang print, row by row)
#: x86_64 and x32: register name -> (full register, width in bytes, bit shift).
_X86_R64: _RegTable = {
    "rax": ("rax", 8, 0), "eax": ("rax", 4, 0), "ax": ("rax", 2, 0), "al": ("rax", 1, 0),
    "ah": ("rax", 1, 8),
    "rbx": ("rbx", 8, 0), "ebx": ("rbx", 4, 0), "bx": ("rbx", 2, 0), "bl": ("rbx", 1, 0),
    "bh": ("rbx", 1, 8),
    "rcx": ("rcx", 8, 0), "ecx": ("rcx", 4, 0), "cx": ("rcx", 2, 0), "cl": ("rcx", 1, 0),
    "ch": ("rcx", 1, 8),
    "rdx": ("rdx", 8, 0), "edx": ("rdx", 4, 0), "dx": ("rdx", 2, 0), "dl": ("rdx", 1, 0),
    "dh": ("rdx", 1, 8),
    "rsi": ("rsi", 8, 0), "esi": ("rsi", 4, 0), "si": ("rsi", 2, 0), "sil": ("rsi", 1, 0),
    "rdi": ("rdi", 8, 0), "edi": ("rdi", 4, 0), "di": ("rdi", 2, 0), "dil": ("rdi", 1, 0),
    "rbp": ("rbp", 8, 0), "ebp": ("rbp", 4, 0), "bp": ("rbp", 2, 0), "bpl": ("rbp", 1, 0),
    "rsp": ("rsp", 8, 0), "esp": ("rsp", 4, 0), "sp": ("rsp", 2, 0), "spl": ("rsp", 1, 0),
    "r8": ("r8", 8, 0), "r8d": ("r8", 4, 0), "r8w": ("r8", 2, 0), "r8b": ("r8", 1, 0),
    "r9": ("r9", 8, 0), "r9d": ("r9", 4, 0), "r9w": ("r9", 2, 0), "r9b": ("r9", 1, 0),
    "r10": ("r10", 8, 0), "r10d": ("r10", 4, 0), "r10w": ("r10", 2, 0), "r10b": ("r10", 1, 0),
    "r11": ("r11", 8, 0), "r11d": ("r11", 4, 0), "r11w": ("r11", 2, 0), "r11b": ("r11", 1, 0),
    "r12": ("r12", 8, 0), "r12d": ("r12", 4, 0), "r12w": ("r12", 2, 0), "r12b": ("r12", 1, 0),
    "r13": ("r13", 8, 0), "r13d": ("r13", 4, 0), "r13w": ("r13", 2, 0), "r13b": ("r13", 1, 0),
    "r14": ("r14", 8, 0), "r14d": ("r14", 4, 0), "r14w": ("r14", 2, 0), "r14b": ("r14", 1, 0),
    "r15": ("r15", 8, 0), "r15d": ("r15", 4, 0), "r15w": ("r15", 2, 0), "r15b": ("r15", 1, 0),
    "rip": ("rip", 8, 0), "eip": ("rip", 4, 0),
    **{f"xmm{i}": (f"xmm{i}", 16, 0) for i in range(32)},
    # accepted on input only (the canonical names are r8b...r15b)
    **{f"r{i}l": (f"r{i}", 1, 0) for i in range(8, 16)},
}

#: i386: register name -> (full register, width in bytes, bit shift).
_X86_R32: _RegTable = {
    "eax": ("eax", 4, 0), "ax": ("eax", 2, 0), "al": ("eax", 1, 0), "ah": ("eax", 1, 8),
    "ebx": ("ebx", 4, 0), "bx": ("ebx", 2, 0), "bl": ("ebx", 1, 0), "bh": ("ebx", 1, 8),
    "ecx": ("ecx", 4, 0), "cx": ("ecx", 2, 0), "cl": ("ecx", 1, 0), "ch": ("ecx", 1, 8),
    "edx": ("edx", 4, 0), "dx": ("edx", 2, 0), "dl": ("edx", 1, 0), "dh": ("edx", 1, 8),
    "esi": ("esi", 4, 0), "si": ("esi", 2, 0),
    "edi": ("edi", 4, 0), "di": ("edi", 2, 0),
    "ebp": ("ebp", 4, 0), "bp": ("ebp", 2, 0),
    "esp": ("esp", 4, 0), "sp": ("esp", 2, 0),
    "eip": ("eip", 4, 0),
    **{f"xmm{i}": (f"xmm{i}", 16, 0) for i in range(8)},
}

#: (full register, width, shift) -> its canonical name: the first one above.
_X86_REV64: _RegNames = {v: k for k, v in reversed(_X86_R64.items())}
_X86_REV32: _RegNames = {v: k for k, v in reversed(_X86_R32.items())}

_X86_SEGMENTS = ("cs", "ds", "es", "fs", "gs", "ss")


def _x86_regs(arch: str) -> tuple[_RegTable, _RegNames]:
    return (_X86_R32, _X86_REV32) if arch == "i386" else (_X86_R64, _X86_REV64)


def _x86_reg(text: str, arch: str) -> tuple[str, int, int]:
    t = text.strip()
    if not t.startswith("%"):
        raise _Fail(f"expected a register (%name), got {t!r}")
    name = t[1:].lower()
    table, _ = _x86_regs(arch)
    try:
        return table[name]
    except KeyError:
        raise _Fail(f"unknown {arch} register %{t[1:]}") from None


def parse(body: str, mk: _Maker) -> ArgSpec:
    """The operand ``body`` (after ``N@``) as the record ``mk`` makes; raises ``_Fail``."""
    arch = mk.arch
    s = body.strip()
    segment = None
    m = re.match(r"%([a-zA-Z]s)\s*:", s)
    if m and m.group(1).lower() in _X86_SEGMENTS:
        segment = m.group(1).lower()
        s = s[m.end():].strip()
    if s.startswith("$"):
        if segment:
            raise _Fail("a segment override on an immediate")
        symbol, reloc, off = _expr(s[1:])
        if symbol is None:
            return mk(ArgKind.CONST, mk.word, imm=off)
        return mk(ArgKind.ADDRESS, mk.word, offset=off, symbol=symbol, reloc=reloc)
    if s.startswith("%") and "(" not in s:
        if segment:
            raise _Fail("a segment override on a register")
        reg, width, shift = _x86_reg(s, arch)
        return mk(ArgKind.REG, min(width, 8), reg=reg, reg_width=width, reg_shift=shift)
    if "(" not in s:
        if ")" in s:
            raise _Fail("')' without '('")
        symbol, reloc, off = _expr(s)
        return mk(ArgKind.ABSOLUTE, mk.word, offset=off, symbol=symbol, reloc=reloc,
                  segment=segment)
    disp, _, rest = s.partition("(")
    if not rest.endswith(")"):
        raise _Fail("memory operand must end with ')'")
    inner = rest[:-1]
    if "(" in inner or ")" in inner:
        raise _Fail("nested parentheses")
    symbol, reloc, off = _expr(disp, allow_empty=True)
    parts = [p.strip() for p in inner.split(",")]
    if len(parts) > 3:
        raise _Fail("more than three parts in (base,index,scale)")
    base = index = None
    bw = iw = None
    scale = 1
    if parts[0]:
        base, bw, bshift = _x86_reg(parts[0], arch)
        if bshift or (bw is not None and bw < 4):
            raise _Fail(f"{parts[0]} cannot be a base register")
        if base.startswith("xmm"):
            raise _Fail(f"{parts[0]} cannot be a base register")
    elif len(parts) == 1:
        raise _Fail("empty parentheses")
    if len(parts) >= 2:
        if not parts[1]:
            raise _Fail("empty index register")
        index, iw, ishift = _x86_reg(parts[1], arch)
        if ishift or iw < 4 or index.startswith("xmm") or index in ("rip", "eip"):
            raise _Fail(f"{parts[1]} cannot be an index register")
        if index in ("rsp", "esp"):
            raise _Fail("%rsp cannot be an index register")
        if len(parts) == 3:
            scale = _int(parts[2], "scale") if parts[2] else 1
            if scale not in (1, 2, 4, 8):
                raise _Fail(f"scale must be 1, 2, 4 or 8, got {parts[2]}")
    if base in ("rip", "eip"):
        if index is not None:
            raise _Fail("%rip cannot be used with an index register")
        kind = ArgKind.GOTPCREL if reloc == "GOTPCREL" else ArgKind.RIP
    elif symbol is None:
        kind = ArgKind.SIB if index is not None else ArgKind.DEREF
    else:
        kind = ArgKind.SYM_INDEX if index is not None else ArgKind.SYM_REG
    return mk(kind, mk.word, reg=base, reg_width=bw, offset=off, index=index, index_width=iw,
              scale=scale, symbol=symbol, reloc=reloc, segment=segment)


def _x86_regname(reg: str, width: int | None, shift: int, arch: str) -> str:
    _, rev = _x86_regs(arch)
    return rev[(reg, width, shift)]  # type: ignore[index]  # width None: KeyError, as meant


def _memory(a: ArgSpec) -> str:
    """A memory operand: ``%seg:disp(%base,%index,scale)``, or ``%seg:disp`` (ABSOLUTE)."""
    seg = f"%{a.segment}:" if a.segment else ""
    if a.kind is ArgKind.ABSOLUTE:
        return seg + _fmt_disp(a.symbol, a.reloc, a.offset, True)
    parts = "%" + _x86_regname(a.reg, a.reg_width, 0, a.arch) if a.reg else ""
    if a.index:
        parts += ",%" + _x86_regname(a.index, a.index_width, 0, a.arch)
        if a.scale != 1:
            parts += f",{a.scale}"
    return seg + _fmt_disp(a.symbol, a.reloc, a.offset, False) + f"({parts})"


#: kind -> its canonical text (parsing it gives an equal record)
FORMS: dict[ArgKind, Callable[[ArgSpec], str]] = {
    ArgKind.CONST: lambda a: f"${a.imm}",
    ArgKind.ADDRESS: lambda a: "$" + _fmt_disp(a.symbol, a.reloc, a.offset, True),
    ArgKind.REG: lambda a: "%" + _x86_regname(a.reg or "", a.reg_width, a.reg_shift, a.arch),
    **dict.fromkeys((ArgKind.ABSOLUTE, ArgKind.DEREF, ArgKind.SIB, ArgKind.RIP,
                     ArgKind.GOTPCREL, ArgKind.SYM_REG, ArgKind.SYM_INDEX), _memory),
}


def reg_as_written(a: ArgSpec) -> str | None:
    """The register of ``a`` as the spec wrote it: ``edi`` for ``-4@%edi``,
    ``ah`` for ``1@%ah`` (None if it has none)."""
    if a.reg is None:
        return None
    return _x86_regname(a.reg, a.reg_width, a.reg_shift, a.arch)
