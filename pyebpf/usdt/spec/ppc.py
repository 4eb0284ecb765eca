"""ppc/ppc64/ppc64le USDT argument specs.

sys/sdt.h prints a register as a bare number (``8@3`` is r3) and marks an
immediate with ``i`` (its ``%I`` operand modifier).  Registers: ``N``, ``rN``,
``%rN`` (N <= 31) and ``%fN``.  Operands: a register, ``iIMM``, ``off(%rN)`` and
``off(N)``.
"""
from __future__ import annotations

import re

from ...errors import UsdtSpecError
from . import _WORD, ArgKind, ArgSpec, _Fail, _int, _size_prefix

#: the forms :func:`~pyebpf.usdt.spec.parse_arg` accepts, for its error messages.
EXPECTED = ("N@%rN, N@N (register), N@iIMM, N@off(%rN), N@off(N) "
            "(N = [-]1, 2, 4 or 8)")


def _ppc_reg(text: str, arch: str) -> tuple[str, int]:
    t = text.strip().lower()
    m = re.fullmatch(r"%?r?(\d{1,2})", t)
    if m and int(m.group(1)) <= 31:
        return f"r{int(m.group(1))}", _WORD[arch]
    m = re.fullmatch(r"%f(\d{1,2})", t)
    if m and int(m.group(1)) <= 31:
        return f"f{int(m.group(1))}", 8
    raise _Fail(f"unknown ppc register {text.strip()!r} (expected N, %rN or %fN, N <= 31)")


def parse(body: str, size: int, signed: bool, is_float: bool, size_given: bool,
          arch: str) -> ArgSpec:
    """The operand ``body`` (the text after ``N@``) as an :class:`ArgSpec`
    for ``arch``; ``size`` is 0 when the spec gives none.  Raises ``_Fail``."""
    s = body.strip()
    word = _WORD[arch]
    if s[:1] in ("i", "I"):
        return ArgSpec(arch, ArgKind.CONST, size or word, signed, is_float,
                       imm=_int(s[1:], "constant"), size_given=size_given)
    if "(" in s:
        disp, _, rest = s.partition("(")
        if not rest.endswith(")") or "(" in rest[:-1] or ")" in rest[:-1]:
            raise _Fail("memory operand must be off(%rN) or off(N)")
        reg, width = _ppc_reg(rest[:-1], arch)
        if reg.startswith("f"):
            raise _Fail("a floating-point register cannot address memory")
        off = _int(disp, "offset") if disp.strip() else 0
        return ArgSpec(arch, ArgKind.DEREF, size or word, signed, is_float, reg=reg,
                       reg_width=width, offset=off, size_given=size_given)
    reg, width = _ppc_reg(s, arch)
    return ArgSpec(arch, ArgKind.REG, size or width, signed, is_float, reg=reg, reg_width=width,
                   size_given=size_given)


def unparse(a: ArgSpec) -> str:
    """The canonical text of ``a``: parsing it gives an equal record."""
    k = a.kind
    if k is ArgKind.CONST:
        op = f"i{a.imm}"
    elif k is ArgKind.REG:
        op = f"%{a.reg}"
    elif k is ArgKind.DEREF:
        op = f"{a.offset}(%{a.reg})"
    else:  # pragma: no cover
        raise UsdtSpecError(f"cannot format {k} for ppc", arch=a.arch)
    return _size_prefix(a) + op


def reg_as_written(a: ArgSpec) -> str | None:
    """The register of ``a`` as :meth:`ArgSpec.describe` names it: ``reg``
    (``r3`` for ``8@3``; ppc has no partial-width register names)."""
    return a.reg
