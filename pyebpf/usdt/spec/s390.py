"""s390/s390x USDT argument specs.

Registers: ``%r0``-``%r15`` and ``%f0``-``%f15``.  Operands: a register, a bare
immediate, ``off(%rB)`` and ``off(%rX,%rB)`` (index X, base B).
"""
from __future__ import annotations

import re
from typing import Callable

from . import ArgKind, ArgSpec, _Fail, _int, _Maker, _offset, _parens

#: the forms :func:`~pyebpf.usdt.spec.parse_arg` accepts, for its error messages.
EXPECTED = "N@%rN, N@imm, N@off(%rN), N@off(%rX,%rB) (N = [-]1, 2, 4 or 8)"


def _s390_reg(text: str, word: int) -> tuple[str, int]:
    t = text.strip().lower()
    m = re.fullmatch(r"%([rf])(\d{1,2})", t)
    if m and int(m.group(2)) <= 15:
        return f"{m.group(1)}{int(m.group(2))}", word if m.group(1) == "r" else 8
    raise _Fail(f"unknown s390 register {text.strip()!r} (expected %r0-%r15 or %f0-%f15)")


def parse(body: str, mk: _Maker) -> ArgSpec:
    """The operand ``body`` (after ``N@``) as the record ``mk`` makes; raises ``_Fail``."""
    s = body.strip()
    if "(" in s:
        disp, inside = _parens(s, _MEMORY)
        parts = [p.strip() for p in inside.split(",")]
        if len(parts) > 2:
            raise _Fail(f"memory operand must be {_MEMORY}")
        off = _offset(disp)
        regs = [_s390_reg(p, mk.word) for p in parts]
        if any(r.startswith("f") for r, _ in regs):
            raise _Fail("a floating-point register cannot address memory")
        if len(regs) == 1:
            return mk(ArgKind.DEREF, mk.word, reg=regs[0][0], reg_width=regs[0][1], offset=off)
        # D(X,B): X is the index, B the base
        (index, iw), (base, bw) = regs
        return mk(ArgKind.SIB, mk.word, reg=base, reg_width=bw, offset=off, index=index,
                  index_width=iw)
    if s.startswith("%"):
        reg, width = _s390_reg(s, mk.word)
        return mk(ArgKind.REG, width, reg=reg, reg_width=width)
    return mk(ArgKind.CONST, mk.word, imm=_int(s, "constant"))


_MEMORY = "off(%rB) or off(%rX,%rB)"
#: kind -> its canonical text (parsing it gives an equal record)
FORMS: dict[ArgKind, Callable[[ArgSpec], str]] = {
    ArgKind.CONST: lambda a: str(a.imm),
    ArgKind.REG: lambda a: f"%{a.reg}",
    ArgKind.DEREF: lambda a: f"{a.offset}(%{a.reg})",
    ArgKind.SIB: lambda a: f"{a.offset}(%{a.index},%{a.reg})",
}


def reg_as_written(a: ArgSpec) -> str | None:
    """The register of ``a`` as :meth:`ArgSpec.describe` names it: ``reg``
    (``r2`` for ``%r2``; s390 has no partial-width register names)."""
    return a.reg
