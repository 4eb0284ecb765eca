"""Code generation of C structs, unions and arrays (part of
:mod:`pyebpf.lang.codegen`): where a member or element is, reading it, and
copying a whole struct or array.

A value of a record or array type lives either in memory the probe reads
with a helper (``((struct Foo *)arg0)->x``: user memory at a uprobe, kernel
memory elsewhere) or on the stack (a ``$s`` variable, a copy of a map's
value). :meth:`_RecordGen.location` finds where an expression's bytes are:
a :class:`Loc`, a base plus a constant offset (the member offsets and
constant indexes folded in) -- the one path that member access (``->``,
``.``), indexing (``[i]``) and dereference (``*p``) share. Reading an
integer there takes its C width (a bit field: shifted and masked, as C
reads it); a whole struct or array is copied in one helper call or in
widest aligned stack accesses.
"""
from __future__ import annotations

from ..program import R1, R2, R3, R10, Reg
from . import ast as A
from .codegen_base import CodegenError, _const, _GenBase, type_of
from .layout import stored_size
from .sema_base import param_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .types import Type


class Loc:
    """Where bytes are: on the stack at ``r10 + off`` (``reg`` None), or in
    probed memory at ``reg + off`` (``reg`` a register of the pool holding
    an address, read with ``helper``)."""

    __slots__ = ("reg", "off", "helper")

    def __init__(self, reg: Reg | None, off: int, helper: str = "") -> None:
        self.reg = reg
        self.off = off
        self.helper = helper

    def plus(self, n: int) -> Loc:
        """The place ``n`` bytes further."""
        return Loc(self.reg, self.off + n, self.helper)


class _RecordGen(_GenBase):
    """Structs, unions and arrays."""

    def _index(self, e: A.Expr) -> int | None:
        if isinstance(e, A.PositionalParameter) and not e.count:
            text = self.ctx.params[e.index - 1] if e.index <= len(self.ctx.params) else "0"
            return param_int(text)
        return _const(e)

    def located(self, e: A.Expr) -> bool:
        """Whether ``e`` is a member, element or dereference whose bytes
        :meth:`location` finds (not a tracepoint's ``args`` field)."""
        if isinstance(e, A.FieldAccess):
            bt = type_of(e.expr)
            if bt.kind == "pointer" and e.arrow:
                return bt.elem is not None and bt.elem.struct is not None
            return bt.kind == "record" and bt.struct is not None or \
                (bt.kind == "tuple" and e.field.isdigit() and self.located_value(e.expr))
        if isinstance(e, A.ArrayAccess):
            return type_of(e.expr).kind == "array"
        if isinstance(e, A.Unop) and e.op == "*":
            t = type_of(e.operand)
            return t.kind == "pointer" and t.elem is not None and \
                t.elem.kind in ("record", "array", "int")
        return False

    def located_value(self, e: A.Expr) -> bool:
        """Whether :meth:`location` can place ``e`` (a variable or map, or
        a located member)."""
        return isinstance(e, (A.Variable, A.Map)) or self.located(e)

    def location(self, e: A.Expr) -> Loc:
        """Where the bytes of ``e`` are (see :class:`Loc`); the caller
        releases ``loc.reg``."""
        if isinstance(e, A.Variable) and e.name in self.vars:
            return Loc(None, self.vars[e.name][0])
        if isinstance(e, A.FieldAccess):
            bt = type_of(e.expr)
            if bt.kind == "tuple":
                from .layout import tuple_layout
                return self.location(e.expr).plus(tuple_layout(bt.elems)[0][int(e.field)])
            rec = bt.elem.struct if bt.kind == "pointer" and bt.elem is not None else bt.struct
            if rec is None:
                raise CodegenError(f"{e.field}: not a struct", e.pos)
            m = rec.member(e.field)
            if m is None:
                raise CodegenError(f"no member {e.field}", e.pos)
            if bt.kind == "pointer":
                return Loc(self.int_expr(e.expr), m.offset, self._read_helper(e))
            return self.location(e.expr).plus(m.offset)
        if isinstance(e, A.ArrayAccess):
            at = type_of(e.expr)
            assert at.elem is not None
            base = self.location(e.expr)
            i = self._index(e.index)
            if i is not None:
                return base.plus(i * at.elem.size)
            if base.reg is None:
                raise CodegenError("an array copied to the stack needs a constant index",
                                   e.index.pos)
            ri = self.int_expr(e.index)
            self.p.mul(ri, at.elem.size)
            self.p.add(base.reg, ri)
            self.release(ri)
            return base
        if isinstance(e, A.Unop) and e.op == "*":
            return Loc(self.int_expr(e.operand), 0, self._read_helper(e))
        if isinstance(e, A.Map):
            t = type_of(e)
            off = self.p.stack.alloc(stored_size(t))
            self.record_into(e, off, t)
            return Loc(None, off)
        raise CodegenError(f"{type(e).__name__.lower()} has no place in memory", e.pos)

    def fetch(self, loc: Loc, dst: int, n: int, *, keep: bool = False,
              pos: A.Pos | None = None) -> None:
        """Copy ``n`` bytes at ``loc`` to ``r10 + dst`` (releases ``loc.reg``
        unless ``keep``); with ``pos``, a failed read is a ``-kk`` helper
        error there."""
        p = self.p
        if loc.reg is None:
            self.copy_stack(dst, loc.off, n, n)
            return
        p.stack_pointer(R1, dst)
        p.mov(R2, n)
        p.mov(R3, loc.reg)
        if loc.off:
            p.add(R3, loc.off)
        if not keep:
            self.release(loc.reg)
        p.call(loc.helper)
        if pos is not None:
            self.check_helper(loc.helper, pos, 2)

    def record_into(self, e: A.Expr, off: int, t: Type) -> None:
        """A struct, union or array value at ``r10 + off``."""
        if isinstance(e, A.Map):
            self.map_bytes_into(e, off, t.size)
            return
        self.fetch(self.location(e), off, t.size, pos=e.pos)

    def element_read(self, e: A.Expr) -> Reg:
        """An integer or pointer member or element (or ``*p`` of an integer
        pointer) read into a register of the pool: its C width, extended by
        its sign; a bit field shifted and masked (not sign-extended: bpftrace
        0.17 reads ``int x : 5`` holding -3 as 29)."""
        p = self.p
        t = type_of(e)
        if t.kind not in ("int", "pointer"):
            raise CodegenError(f"{type(e).__name__.lower()} is a {t.kind}, not an integer",
                               e.pos)
        size = t.size if t.kind == "int" else 8
        bits = self._bitfield(e)
        loc = self.location(e)
        if loc.reg is not None:
            r = loc.reg
            slot = p.stack.alloc(8)
            self.fetch(loc, slot, size, keep=True, pos=e.pos)
            p.load(r, R10, slot, size)
        else:
            r = self._need(e.pos)
            if loc.off % size:
                p.mov(r, 0)
                for i in reversed(range(size)):
                    p.lsh(r, 8)
                    p.load(R1, R10, loc.off + i, 1)
                    p.or_(r, R1)
            else:
                p.load(r, R10, loc.off, size)
        if bits is not None:           # zero-extended even when signed, as bpftrace 0.17
            shift, width = bits
            if shift:
                p.rsh(r, shift)
            if width < 32:
                p.and_(r, (1 << width) - 1)
            else:
                p.lsh(r, 64 - width)
                p.rsh(r, 64 - width)
        elif t.kind == "int" and t.signed and size < 8:
            p.movsx(r, r, size * 8)
        return r

    def _bitfield(self, e: A.Expr) -> tuple[int, int] | None:
        if not isinstance(e, A.FieldAccess):
            return None
        bt = type_of(e.expr)
        rec = bt.elem.struct if bt.kind == "pointer" and bt.elem is not None else bt.struct
        m = rec.member(e.field) if rec is not None else None
        if m is None or m.field.bitfield is None:
            return None
        return m.field.bitfield.shift, m.field.bitfield.width

    def compare_bytes(self, a: A.Expr, b: A.Expr, dst: Reg, negate: bool) -> None:
        """``dst = (a == b)`` (``!=`` with ``negate``) for two arrays or
        records of one type: both copied to the stack, compared 8 bytes at
        a time (the tail narrower)."""
        p = self.p
        t = type_of(a)
        n = t.size
        sa = p.stack.alloc(stored_size(t))
        sb = p.stack.alloc(stored_size(t))
        self._zero(sa, stored_size(t))
        self._zero(sb, stored_size(t))
        self.value_into(a, sa, t)
        self.value_into(b, sb, t)
        differ, end = p.fresh_label("ne"), p.fresh_label("cmpend")
        pos = 0
        while pos < n:
            p.ldxdw(R1, R10, sa + pos)
            p.ldxdw(R2, R10, sb + pos)
            p.jne(R1, R2, differ)
            pos += 8
        p.mov(dst, 0 if negate else 1)
        p.ja(end)
        p.label(differ)
        p.mov(dst, 1 if negate else 0)
        p.label(end)

