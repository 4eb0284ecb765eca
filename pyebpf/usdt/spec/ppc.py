"""ppc/ppc64/ppc64le USDT argument specs.

sys/sdt.h prints a register as a bare number (``8@3`` is r3) and marks an
immediate with ``i`` (its ``%I`` operand modifier).  Registers: ``N``, ``rN``,
``%rN`` (N <= 31) and ``%fN``.  Operands: a register, ``iIMM``, ``off(%rN)`` and
``off(N)``.
"""
from __future__ import annotations

import re
from typing import Callable

from . import ArgKind, ArgSpec, _Fail, _int, _Maker, _offset, _parens

#: the forms :func:`~pyebpf.usdt.spec.parse_arg` accepts, for its error messages.
EXPECTED = ("N@%rN, N@N (register), N@iIMM, N@off(%rN), N@off(N) "
            "(N = [-]1, 2, 4 or 8)")


def _ppc_reg(text: str, word: int) -> tuple[str, int]:
    t = text.strip().lower()
    m = re.fullmatch(r"%?r?(\d{1,2})", t)
    if m and int(m.group(1)) <= 31:
        return f"r{int(m.group(1))}", word
    m = re.fullmatch(r"%f(\d{1,2})", t)
    if m and int(m.group(1)) <= 31:
        return f"f{int(m.group(1))}", 8
    raise _Fail(f"unknown ppc register {text.strip()!r} (expected N, %rN or %fN, N <= 31)")


def parse(body: str, mk: _Maker) -> ArgSpec:
    """The operand ``body`` (after ``N@``) as the record ``mk`` makes; raises ``_Fail``."""
    s = body.strip()
    if s[:1] in ("i", "I"):
        return mk(ArgKind.CONST, mk.word, imm=_int(s[1:], "constant"))
    if "(" in s:
        disp, inside = _parens(s, "off(%rN) or off(N)")
        reg, width = _ppc_reg(inside, mk.word)
        if reg.startswith("f"):
            raise _Fail("a floating-point register cannot address memory")
        return mk(ArgKind.DEREF, mk.word, reg=reg, reg_width=width, offset=_offset(disp))
    reg, width = _ppc_reg(s, mk.word)
    return mk(ArgKind.REG, width, reg=reg, reg_width=width)


#: kind -> its canonical text (parsing it gives an equal record)
FORMS: dict[ArgKind, Callable[[ArgSpec], str]] = {
    ArgKind.CONST: lambda a: f"i{a.imm}",
    ArgKind.REG: lambda a: f"%{a.reg}",
    ArgKind.DEREF: lambda a: f"{a.offset}(%{a.reg})",
}


def reg_as_written(a: ArgSpec) -> str | None:
    """The register of ``a`` as :meth:`ArgSpec.describe` names it: ``reg``
    (``r3`` for ``8@3``; ppc has no partial-width register names)."""
    return a.reg
