"""riscv32/riscv64 USDT argument specs.

Registers (data tables): the ABI names (``a0``, ``sp``, ``s0`` or ``fp``...) or
``x0``-``x31``, normalised to the ABI name, and the float registers (``fa0``...
or ``f0``-``f31``).  Operands: a register, an immediate, ``off(reg)``, ``(reg)``.
"""
from __future__ import annotations

import re

from ...errors import UsdtSpecError
from . import _WORD, ArgKind, ArgSpec, _Fail, _int, _size_prefix

#: the forms :func:`~pyebpf.usdt.spec.parse_arg` accepts, for its error messages.
EXPECTED = ("N@reg, N@imm, N@off(reg), N@(reg) (ABI names a0, sp, s0... or x0-x31; "
            "N = [-]1, 2, 4 or 8)")


_RV_ABI = ["zero", "ra", "sp", "gp", "tp", "t0", "t1", "t2", "s0", "s1",
           *[f"a{i}" for i in range(8)], *[f"s{i}" for i in range(2, 12)],
           *[f"t{i}" for i in range(3, 7)]]
_RV_FABI = [*[f"ft{i}" for i in range(8)], "fs0", "fs1", *[f"fa{i}" for i in range(8)],
            *[f"fs{i}" for i in range(2, 12)], *[f"ft{i}" for i in range(8, 12)]]
_RV_REGS = {**{n: n for n in _RV_ABI}, **{f"x{i}": _RV_ABI[i] for i in range(32)},
            "fp": "s0"}
_RV_FREGS = {**{n: n for n in _RV_FABI}, **{f"f{i}": _RV_FABI[i] for i in range(32)}}


def _rv_reg(text: str, arch: str) -> tuple[str, int]:
    t = text.strip().lower()
    if t in _RV_REGS:
        return _RV_REGS[t], _WORD[arch]
    if t in _RV_FREGS:
        return _RV_FREGS[t], 8
    raise _Fail(f"unknown riscv register {text.strip()!r}")


def parse(body: str, size: int, signed: bool, is_float: bool, size_given: bool,
          arch: str) -> ArgSpec:
    """The operand ``body`` (the text after ``N@``) as an :class:`ArgSpec`
    for ``arch``; ``size`` is 0 when the spec gives none.  Raises ``_Fail``."""
    s = body.strip()
    word = _WORD[arch]
    if "(" in s:
        disp, _, rest = s.partition("(")
        if not rest.endswith(")") or "(" in rest[:-1] or ")" in rest[:-1]:
            raise _Fail("memory operand must be off(reg)")
        base, bw = _rv_reg(rest[:-1], arch)
        if base in _RV_FREGS.values():
            raise _Fail(f"{rest[:-1]} cannot be a base register")
        off = _int(disp, "offset") if disp.strip() else 0
        return ArgSpec(arch, ArgKind.DEREF, size or word, signed, is_float, reg=base,
                       reg_width=bw, offset=off, size_given=size_given)
    if re.match(r"[-+]?\d", s):
        return ArgSpec(arch, ArgKind.CONST, size or word, signed, is_float,
                       imm=_int(s, "constant"), size_given=size_given)
    reg, width = _rv_reg(s, arch)
    return ArgSpec(arch, ArgKind.REG, size or width, signed, is_float, reg=reg, reg_width=width,
                   size_given=size_given)


def unparse(a: ArgSpec) -> str:
    """The canonical text of ``a``: parsing it gives an equal record."""
    k = a.kind
    if k is ArgKind.CONST:
        op = str(a.imm)
    elif k is ArgKind.REG:
        op = str(a.reg)
    elif k is ArgKind.DEREF:
        op = f"{a.offset}({a.reg})"
    else:  # pragma: no cover
        raise UsdtSpecError(f"cannot format {k} for riscv", arch=a.arch)
    return _size_prefix(a) + op


def reg_as_written(a: ArgSpec) -> str | None:
    """The register of ``a`` as :meth:`ArgSpec.describe` names it: ``reg``, the
    ABI name (riscv has no partial-width register names)."""
    return a.reg
