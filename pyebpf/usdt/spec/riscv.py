"""riscv32/riscv64 USDT argument specs.

Registers (data tables): the ABI names (``a0``, ``sp``, ``s0`` or ``fp``...) or
``x0``-``x31``, normalised to the ABI name, and the float registers (``fa0``...
or ``f0``-``f31``).  Operands: a register, an immediate, ``off(reg)``, ``(reg)``.
"""
from __future__ import annotations

import re
from typing import Callable

from . import ArgKind, ArgSpec, _Fail, _int, _Maker, _offset, _parens

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


def _rv_reg(text: str, word: int) -> tuple[str, int]:
    t = text.strip().lower()
    if t in _RV_REGS:
        return _RV_REGS[t], word
    if t in _RV_FREGS:
        return _RV_FREGS[t], 8
    raise _Fail(f"unknown riscv register {text.strip()!r}")


def parse(body: str, mk: _Maker) -> ArgSpec:
    """The operand ``body`` (after ``N@``) as the record ``mk`` makes; raises ``_Fail``."""
    s = body.strip()
    if "(" in s:
        disp, inside = _parens(s, "off(reg)")
        base, bw = _rv_reg(inside, mk.word)
        if base in _RV_FREGS.values():
            raise _Fail(f"{inside} cannot be a base register")
        return mk(ArgKind.DEREF, mk.word, reg=base, reg_width=bw, offset=_offset(disp))
    if re.match(r"[-+]?\d", s):
        return mk(ArgKind.CONST, mk.word, imm=_int(s, "constant"))
    reg, width = _rv_reg(s, mk.word)
    return mk(ArgKind.REG, width, reg=reg, reg_width=width)


#: kind -> its canonical text (parsing it gives an equal record)
FORMS: dict[ArgKind, Callable[[ArgSpec], str]] = {
    ArgKind.CONST: lambda a: str(a.imm),
    ArgKind.REG: lambda a: str(a.reg),
    ArgKind.DEREF: lambda a: f"{a.offset}({a.reg})",
}


def reg_as_written(a: ArgSpec) -> str | None:
    """The register of ``a`` as :meth:`ArgSpec.describe` names it: ``reg``, the
    ABI name (riscv has no partial-width register names)."""
    return a.reg
