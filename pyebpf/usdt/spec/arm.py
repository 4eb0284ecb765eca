"""32-bit arm USDT argument specs.

Registers (a data table): ``r0``-``r15`` with the names ``fp`` (r11), ``ip`` (r12),
``sp``, ``lr``, ``pc``, ``sb`` (r9) and ``sl`` (r10), and the VFP/NEON ``s``, ``d``
and ``q`` registers.  Operands: a register, ``#imm``, ``[base]``,
``[base, #off]``, ``[base, index]`` and ``[base, index, lsl #s]``.
"""
from __future__ import annotations

import re

from ...errors import UsdtSpecError
from . import ArgKind, ArgSpec, _bracket_parts, _Fail, _int, _shift_scale, _size_prefix

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


def parse(body: str, size: int, signed: bool, is_float: bool, size_given: bool,
          arch: str) -> ArgSpec:
    """The operand ``body`` (the text after ``N@``) as an :class:`ArgSpec`
    for ``arch``; ``size`` is 0 when the spec gives none.  Raises ``_Fail``."""
    s = body.strip()
    if s.startswith("["):
        parts = _bracket_parts(s)
        base, bw = _arm_reg(parts[0])
        if bw != 4:
            raise _Fail(f"{parts[0]} cannot be a base register")
        size = size or 4
        if len(parts) == 1:
            return ArgSpec(arch, ArgKind.DEREF, size, signed, is_float, reg=base, reg_width=4,
                           size_given=size_given)
        second = parts[1]
        if second.startswith("#"):
            if len(parts) != 2:
                raise _Fail("unexpected text after the offset")
            off = _int(second[1:], "offset")
            return ArgSpec(arch, ArgKind.DEREF, size, signed, is_float, reg=base, reg_width=4,
                           offset=off, size_given=size_given)
        if len(parts) > 3:
            raise _Fail("too many parts in [base, index, lsl #N]")
        index, iw = _arm_reg(second)
        if iw != 4:
            raise _Fail(f"{second} cannot be an index register")
        scale = _shift_scale(parts[2]) if len(parts) == 3 else 1
        return ArgSpec(arch, ArgKind.SIB, size, signed, is_float, reg=base, reg_width=4,
                       index=index, index_width=4, scale=scale, size_given=size_given)
    if s.startswith("#") or re.match(r"[-+]?\d", s):
        imm = _int(s.lstrip("#"), "constant")
        return ArgSpec(arch, ArgKind.CONST, size or 4, signed, is_float, imm=imm,
                       size_given=size_given)
    reg, width = _arm_reg(s)
    return ArgSpec(arch, ArgKind.REG, size or min(width, 8), signed, is_float, reg=reg,
                   reg_width=width, size_given=size_given)


def unparse(a: ArgSpec) -> str:
    """The canonical text of ``a``: parsing it gives an equal record."""
    k = a.kind
    if k is ArgKind.CONST:
        op = f"#{a.imm}"
    elif k is ArgKind.REG:
        op = str(a.reg)
    elif k is ArgKind.DEREF:
        op = f"[{a.reg}, #{a.offset}]" if a.offset else f"[{a.reg}]"
    elif k is ArgKind.SIB:
        op = f"[{a.reg}, {a.index}" + (f", lsl #{a.scale.bit_length() - 1}" if a.scale != 1
                                      else "") + "]"
    else:  # pragma: no cover
        raise UsdtSpecError(f"cannot format {k} for arm", arch=a.arch)
    return _size_prefix(a) + op


def reg_as_written(a: ArgSpec) -> str | None:
    """The register of ``a`` as :meth:`ArgSpec.describe` names it: ``reg`` (arm
    has no partial-width register names)."""
    return a.reg
