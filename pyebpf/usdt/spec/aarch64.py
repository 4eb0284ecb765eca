"""aarch64 USDT argument specs (also ILP32).

Registers: ``x0``-``x30`` and their ``w`` halves (``x31`` as a base is ``sp``,
BCC's reading), ``sp``/``wsp``, ``xzr``/``wzr``, ``fp`` (x29), ``lr`` (x30) and the
SIMD ``v``/``q``/``d``/``s``/``h``/``b`` registers.  Operands: a register, ``imm``
or ``#imm``, ``[base]``, ``[base, off]``, ``[base, #off]``, ``[base, index]``,
``[base, index, lsl #s]`` and ``[base, #:lo12:sym]``.
"""
from __future__ import annotations

import re

from ...errors import UsdtSpecError
from . import (ArgKind, ArgSpec, _bracket_parts, _expr, _Fail, _fmt_disp, _int, _shift_scale,
               _size_prefix)

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


def parse(body: str, size: int, signed: bool, is_float: bool, size_given: bool,
          arch: str) -> ArgSpec:
    """The operand ``body`` (the text after ``N@``) as an :class:`ArgSpec`
    for ``arch``; ``size`` is 0 when the spec gives none.  Raises ``_Fail``."""
    s = body.strip()
    if s.startswith("["):
        parts = _bracket_parts(s)
        base, bw = _a64_reg(parts[0])
        if not base.startswith("x") and base != "sp":
            raise _Fail(f"{parts[0]} cannot be a base register")
        size = size or 8
        if len(parts) == 1:
            return ArgSpec(arch, ArgKind.DEREF, size, signed, is_float, reg=base, reg_width=bw,
                           size_given=size_given)
        second = parts[1]
        if len(parts) == 2 and second.startswith("#:"):
            m = re.fullmatch(r"#:([a-z0-9_]+):(.+)", second, re.I)
            if not m:
                raise _Fail(f"cannot read relocation {second!r}")
            symbol, reloc2, off = _expr(m.group(2))
            if symbol is None or reloc2:
                raise _Fail(f"expected a symbol after #:{m.group(1)}:")
            return ArgSpec(arch, ArgKind.SYM_REG, size, signed, is_float, reg=base,
                           reg_width=bw, offset=off, symbol=symbol, reloc=m.group(1).lower(),
                           size_given=size_given)
        if len(parts) == 2 and re.fullmatch(r"#?\s*[-+]?(0[xX][0-9a-fA-F]+|\d+)", second):
            off = _int(second.lstrip("#").strip(), "offset")
            return ArgSpec(arch, ArgKind.DEREF, size, signed, is_float, reg=base, reg_width=bw,
                           offset=off, size_given=size_given)
        if len(parts) > 3:
            raise _Fail("too many parts in [base, index, lsl #N]")
        index, iw = _a64_reg(second)
        if not index.startswith("x"):
            raise _Fail(f"{second} cannot be an index register")
        scale = _shift_scale(parts[2]) if len(parts) == 3 else 1
        return ArgSpec(arch, ArgKind.SIB, size, signed, is_float, reg=base, reg_width=bw,
                       index=index, index_width=iw, scale=scale, size_given=size_given)
    if s.startswith("#") or re.match(r"[-+]?\d", s):
        imm = _int(s.lstrip("#"), "constant")
        return ArgSpec(arch, ArgKind.CONST, size or 8, signed, is_float, imm=imm,
                       size_given=size_given)
    reg, width = _a64_reg(s)
    return ArgSpec(arch, ArgKind.REG, size or min(width, 8), signed, is_float, reg=reg,
                   reg_width=width, size_given=size_given)


def unparse(a: ArgSpec) -> str:
    """The canonical text of ``a``: parsing it gives an equal record."""
    k = a.kind
    if k is ArgKind.CONST:
        op = str(a.imm)
    elif k is ArgKind.REG:
        op = _a64_regname(a.reg or '', a.reg_width)
    elif k is ArgKind.DEREF:
        base = _a64_regname(a.reg or '', a.reg_width)
        op = f"[{base}, {a.offset}]" if a.offset else f"[{base}]"
    elif k is ArgKind.SIB:
        op = f"[{_a64_regname(a.reg or '', a.reg_width)}, {_a64_regname(a.index or '', a.index_width)}"
        if a.scale != 1:
            op += f", lsl #{a.scale.bit_length() - 1}"
        op += "]"
    elif k is ArgKind.SYM_REG:
        op = (f"[{_a64_regname(a.reg or '', a.reg_width)}, "
              f"#:{a.reloc}:{_fmt_disp(a.symbol, None, a.offset, True)}]")
    else:  # pragma: no cover - the parser makes no other kind
        raise UsdtSpecError(f"cannot format {k} for aarch64", arch=a.arch)
    return _size_prefix(a) + op


def reg_as_written(a: ArgSpec) -> str | None:
    """The register of ``a`` as the spec wrote it: ``w3`` for ``4@w3`` (None
    if it has none)."""
    if a.reg is None:
        return None
    return _a64_regname(a.reg, a.reg_width)
