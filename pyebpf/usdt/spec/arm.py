"""32-bit arm USDT argument specs.

Registers (a data table): ``r0``-``r15`` with the names ``fp`` (r11), ``ip`` (r12),
``sp``, ``lr``, ``pc``, ``sb`` (r9) and ``sl`` (r10), and the VFP/NEON ``s``, ``d``
and ``q`` registers.  Operands: a register, ``#imm``, ``[base]``,
``[base, #off]``, ``[base, index]`` and ``[base, index, lsl #s]``.
"""
from __future__ import annotations

import re
from typing import Callable

from . import ArgKind, ArgSpec, _bracket_operand, _Fail, _int, _Maker

#: the forms :func:`~pyebpf.usdt.spec.parse_arg` accepts, for its error messages.
EXPECTED = ("N@rN, N@#imm, N@[reg], N@[reg, #off], N@[reg, reg], N@[reg, reg, lsl #s] "
            "(registers r0-r15, fp, ip, sp, lr, pc; N = [-]1, 2, 4 or 8)")


_ARM_CANON = {**{f"r{i}": f"r{i}" for i in range(11)}, "r11": "fp", "r12": "ip", "r13": "sp",
              "r14": "lr", "r15": "pc", "fp": "fp", "ip": "ip", "sp": "sp", "lr": "lr",
              "pc": "pc", "sb": "r9", "sl": "r10"}


def _arm_reg(text: str) -> tuple[str, int]:
    t = text.strip().lower()
    if t in _ARM_CANON:
        return _ARM_CANON[t], 4
    m = re.fullmatch(r"([sdq])(\d{1,2})", t)
    if m:
        n = int(m.group(2))
        limit = {"s": 31, "d": 31, "q": 15}[m.group(1)]
        if n <= limit:
            return t, {"s": 4, "d": 8, "q": 16}[m.group(1)]
    raise _Fail(f"unknown arm register {text.strip()!r}")


def _offset_form(parts: list[str], base: str, width: int, mk: _Maker) -> ArgSpec | None:
    """``[base, #off]``."""
    if not parts[1].startswith("#"):
        return None
    if len(parts) != 2:
        raise _Fail("unexpected text after the offset")
    return mk(ArgKind.DEREF, mk.word, reg=base, reg_width=width,
              offset=_int(parts[1][1:], "offset"))


def _usable(_reg: str, width: int, _role: str) -> bool:
    """Only the 4-byte core registers address memory."""
    return width == 4


def parse(body: str, mk: _Maker) -> ArgSpec:
    """The operand ``body`` (after ``N@``) as the record ``mk`` makes; raises ``_Fail``."""
    return _bracket_operand(body.strip(), mk, _arm_reg, _usable, _offset_form)


#: kind -> its canonical text (parsing it gives an equal record)
FORMS: dict[ArgKind, Callable[[ArgSpec], str]] = {
    ArgKind.CONST: lambda a: f"#{a.imm}",
    ArgKind.REG: lambda a: str(a.reg),
    ArgKind.DEREF: lambda a: f"[{a.reg}, #{a.offset}]" if a.offset else f"[{a.reg}]",
    ArgKind.SIB: lambda a: f"[{a.reg}, {a.index}" + (
        f", lsl #{a.scale.bit_length() - 1}" if a.scale != 1 else "") + "]",
}


def reg_as_written(a: ArgSpec) -> str | None:
    """The register of ``a`` as :meth:`ArgSpec.describe` names it: ``reg`` (arm
    has no partial-width register names)."""
    return a.reg
