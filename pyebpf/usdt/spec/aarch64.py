"""aarch64 USDT argument specs (also ILP32).

Registers: ``x0``-``x30`` and their ``w`` halves (``x31`` as a base is ``sp``,
BCC's reading), ``sp``/``wsp``, ``xzr``/``wzr``, ``fp`` (x29), ``lr`` (x30) and the
SIMD ``v``/``q``/``d``/``s``/``h``/``b`` registers.  Operands: a register, ``imm``
or ``#imm``, ``[base]``, ``[base, off]``, ``[base, #off]``, ``[base, index]``,
``[base, index, lsl #s]`` and ``[base, #:lo12:sym]``.
"""
from __future__ import annotations

import re
from typing import Callable

from . import ArgKind, ArgSpec, _bracket_operand, _expr, _Fail, _fmt_disp, _int, _Maker

#: the forms :func:`~pyebpf.usdt.spec.parse_arg` accepts, for its error messages.
EXPECTED = ("N@xN, N@wN, N@sp, N@imm, N@#imm, N@[reg], N@[reg, off], N@[reg, #off], "
            "N@[reg, reg], N@[reg, reg, lsl #s], N@[reg, #:lo12:sym], Nf@vN/dN/sN "
            "(N = [-]1, 2, 4 or 8)")


def _a64_reg(text: str) -> tuple[str, int]:
    t = text.strip().lower()
    m = re.fullmatch(r"([xwvqdshb])(\d{1,2})", t)
    if m:
        p, n = m.group(1), int(m.group(2))
        if p in "xw":
            if n <= 30:
                return f"x{n}", 8 if p == "x" else 4
            if n == 31:      # BCC's reading: x31 as a base is sp
                return "sp", 8 if p == "x" else 4
        elif n <= 31:
            return f"v{n}", {"v": 16, "q": 16, "d": 8, "s": 4, "h": 2, "b": 1}[p]
        raise _Fail(f"unknown aarch64 register {text.strip()!r}")
    if t in ("sp", "wsp"):
        return "sp", 8 if t == "sp" else 4
    if t in ("xzr", "wzr"):
        return "xzr", 8 if t == "xzr" else 4
    if t == "fp":
        return "x29", 8
    if t == "lr":
        return "x30", 8
    raise _Fail(f"unknown aarch64 register {text.strip()!r}")


def _a64_regname(reg: str, width: int | None) -> str:
    if reg == "sp":
        return "sp" if width == 8 else "wsp"
    if reg == "xzr":
        return "xzr" if width == 8 else "wzr"
    if reg.startswith("x"):
        return reg if width == 8 else "w" + reg[1:]
    prefix = {16: "v", 8: "d", 4: "s", 2: "h", 1: "b"}[width or 16]
    return prefix + reg[1:]


def _offset_form(parts: list[str], base: str, width: int, mk: _Maker) -> ArgSpec | None:
    """``[base, off]``, ``[base, #off]`` and ``[base, #:reloc:sym]``."""
    second = parts[1]
    if len(parts) == 2 and second.startswith("#:"):
        m = re.fullmatch(r"#:([a-z0-9_]+):(.+)", second, re.I)
        if not m:
            raise _Fail(f"cannot read relocation {second!r}")
        symbol, reloc2, off = _expr(m.group(2))
        if symbol is None or reloc2:
            raise _Fail(f"expected a symbol after #:{m.group(1)}:")
        return mk(ArgKind.SYM_REG, mk.word, reg=base, reg_width=width, offset=off, symbol=symbol,
                  reloc=m.group(1).lower())
    if len(parts) == 2 and re.fullmatch(r"#?\s*[-+]?(0[xX][0-9a-fA-F]+|\d+)", second):
        off = _int(second.lstrip("#").strip(), "offset")
        return mk(ArgKind.DEREF, mk.word, reg=base, reg_width=width, offset=off)
    return None


def _usable(reg: str, _width: int, role: str) -> bool:
    """An x register may be a base or an index, sp only a base."""
    return reg.startswith("x") or (role == "base" and reg == "sp")


def parse(body: str, mk: _Maker) -> ArgSpec:
    """The operand ``body`` (after ``N@``) as the record ``mk`` makes; raises ``_Fail``."""
    return _bracket_operand(body.strip(), mk, _a64_reg, _usable, _offset_form)


def _sib(a: ArgSpec) -> str:
    shift = f", lsl #{a.scale.bit_length() - 1}" if a.scale != 1 else ""
    return (f"[{_a64_regname(a.reg or '', a.reg_width)}, "
            f"{_a64_regname(a.index or '', a.index_width)}{shift}]")


def _deref(a: ArgSpec) -> str:
    base = _a64_regname(a.reg or '', a.reg_width)
    return f"[{base}, {a.offset}]" if a.offset else f"[{base}]"


#: kind -> its canonical text (parsing it gives an equal record)
FORMS: dict[ArgKind, Callable[[ArgSpec], str]] = {
    ArgKind.CONST: lambda a: str(a.imm),
    ArgKind.REG: lambda a: _a64_regname(a.reg or '', a.reg_width),
    ArgKind.DEREF: _deref,
    ArgKind.SIB: _sib,
    ArgKind.SYM_REG: lambda a: (f"[{_a64_regname(a.reg or '', a.reg_width)}, "
                                f"#:{a.reloc}:{_fmt_disp(a.symbol, None, a.offset, True)}]"),
}


def reg_as_written(a: ArgSpec) -> str | None:
    """The register of ``a`` as the spec wrote it: ``w3`` for ``4@w3`` (None
    if it has none)."""
    if a.reg is None:
        return None
    return _a64_regname(a.reg, a.reg_width)
