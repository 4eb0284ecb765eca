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

#: a row's names name the same register at these (width in bytes, bit shift)s, in order
_WIDTHS64 = ((8, 0), (4, 0), (2, 0), (1, 0), (1, 8))
_WIDTHS32 = _WIDTHS64[1:]


def _reg_table(rows: tuple[str, ...], widths: tuple[tuple[int, int], ...]) -> _RegTable:
    """Each row ``"full name name..."``: its names -> (full, width, shift)."""
    table: _RegTable = {}
    for row in rows:
        names = row.split()
        for name, (width, shift) in zip(names, widths):
            table[name] = (names[0], width, shift)
    return table


#: x86_64 and x32: register name -> (full register, width in bytes, bit shift):
#: every name gcc and clang print.
_X86_R64: _RegTable = {
    **_reg_table(("rax eax ax al ah", "rbx ebx bx bl bh", "rcx ecx cx cl ch",
                  "rdx edx dx dl dh", "rsi esi si sil", "rdi edi di dil",
                  "rbp ebp bp bpl", "rsp esp sp spl",
                  *(f"r{i} r{i}d r{i}w r{i}b" for i in range(8, 16)),
                  "rip eip"), _WIDTHS64),
    **{f"xmm{i}": (f"xmm{i}", 16, 0) for i in range(32)},
    # accepted on input only (the canonical names are r8b...r15b)
    **{f"r{i}l": (f"r{i}", 1, 0) for i in range(8, 16)},
}

#: i386: register name -> (full register, width in bytes, bit shift).
_X86_R32: _RegTable = {
    **_reg_table(("eax ax al ah", "ebx bx bl bh", "ecx cx cl ch", "edx dx dl dh",
                  "esi si", "edi di", "ebp bp", "esp sp", "eip"), _WIDTHS32),
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
