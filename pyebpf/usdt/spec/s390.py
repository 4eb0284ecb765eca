"""s390/s390x USDT argument specs.

Registers: ``%r0``-``%r15`` and ``%f0``-``%f15``.  Operands: a register, a bare
immediate, ``off(%rB)`` and ``off(%rX,%rB)`` (index X, base B).
"""
from __future__ import annotations

import re

from ...errors import UsdtSpecError
from . import _WORD, ArgKind, ArgSpec, _Fail, _int, _size_prefix

#: the forms :func:`~pyebpf.usdt.spec.parse_arg` accepts, for its error messages.
EXPECTED = "N@%rN, N@imm, N@off(%rN), N@off(%rX,%rB) (N = [-]1, 2, 4 or 8)"


def _s390_reg(text: str, arch: str) -> tuple[str, int]:
    t = text.strip().lower()
    m = re.fullmatch(r"%([rf])(\d{1,2})", t)
    if m and int(m.group(2)) <= 15:
        return f"{m.group(1)}{int(m.group(2))}", _WORD[arch] if m.group(1) == "r" else 8
    raise _Fail(f"unknown s390 register {text.strip()!r} (expected %r0-%r15 or %f0-%f15)")


def parse(body: str, size: int, signed: bool, is_float: bool, size_given: bool,
          arch: str) -> ArgSpec:
    """The operand ``body`` (the text after ``N@``) as an :class:`ArgSpec`
    for ``arch``; ``size`` is 0 when the spec gives none.  Raises ``_Fail``."""
    s = body.strip()
    word = _WORD[arch]
    if "(" in s:
        disp, _, rest = s.partition("(")
        if not rest.endswith(")") or "(" in rest[:-1] or ")" in rest[:-1]:
            raise _Fail("memory operand must be off(%rB) or off(%rX,%rB)")
        parts = [p.strip() for p in rest[:-1].split(",")]
        if len(parts) > 2:
            raise _Fail("memory operand must be off(%rB) or off(%rX,%rB)")
        off = _int(disp, "offset") if disp.strip() else 0
        regs = [_s390_reg(p, arch) for p in parts]
        if any(r.startswith("f") for r, _ in regs):
            raise _Fail("a floating-point register cannot address memory")
        if len(regs) == 1:
            return ArgSpec(arch, ArgKind.DEREF, size or word, signed, is_float, reg=regs[0][0],
                           reg_width=regs[0][1], offset=off, size_given=size_given)
        # D(X,B): X is the index, B the base
        (index, iw), (base, bw) = regs
        return ArgSpec(arch, ArgKind.SIB, size or word, signed, is_float, reg=base,
                       reg_width=bw, offset=off, index=index, index_width=iw,
                       size_given=size_given)
    if s.startswith("%"):
        reg, width = _s390_reg(s, arch)
        return ArgSpec(arch, ArgKind.REG, size or width, signed, is_float, reg=reg,
                       reg_width=width, size_given=size_given)
    return ArgSpec(arch, ArgKind.CONST, size or word, signed, is_float, imm=_int(s, "constant"),
                   size_given=size_given)


def unparse(a: ArgSpec) -> str:
    """The canonical text of ``a``: parsing it gives an equal record."""
    k = a.kind
    if k is ArgKind.CONST:
        op = str(a.imm)
    elif k is ArgKind.REG:
        op = f"%{a.reg}"
    elif k is ArgKind.DEREF:
        op = f"{a.offset}(%{a.reg})"
    elif k is ArgKind.SIB:
        op = f"{a.offset}(%{a.index},%{a.reg})"
    else:  # pragma: no cover
        raise UsdtSpecError(f"cannot format {k} for s390", arch=a.arch)
    return _size_prefix(a) + op


def reg_as_written(a: ArgSpec) -> str | None:
    """The register of ``a`` as :meth:`ArgSpec.describe` names it: ``reg``
    (``r2`` for ``%r2``; s390 has no partial-width register names)."""
    return a.reg
