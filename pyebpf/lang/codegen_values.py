"""Code generation of values laid out in memory (part of
:mod:`pyebpf.lang.codegen`): strings, buffers and tuples on the stack,
``str()``, ``buf()``, copies in the widest aligned accesses."""
from __future__ import annotations

from ..program import R0, R1, R2, R3, R10, Reg
from . import ast as A
from .codegen_base import CodegenError, _const, _GenBase, _width, type_of
from .layout import USYM_SIZE, size_align, stored_size, tuple_layout
from .types import Type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


class _ValueGen(_GenBase):
    """Values into stack memory."""

    def value_into(self, e: A.Expr, off: int, t: Type) -> None:
        """Store ``e`` at ``r10 + off`` laid out as ``t``."""
        if t.kind == "buffer" and t.counted:
            self.counted_into(e, off, t.size)
        elif t.kind in ("string", "buffer"):
            self.string_into(e, off, t.size)
        elif t.kind == "inet" and t.size == 16 and isinstance(e, A.Call) and e.args:
            self.string_into(e.args[-1], off, 16)       # ntop(AF_INET6, 16 bytes)
        elif t.kind == "tuple":
            self.tuple_into(e, off, t)
        elif t.kind == "usym":
            self.usym_into(e, off)
        elif t.kind in ("record", "array"):
            self.record_into(e, off, t)
        elif t.kind == "macaddr":
            self.macaddr_into(e, off)
        else:
            size, _ = size_align(t)
            r = self.int_expr(e)
            self.p.store(R10, off, r, size)
            self.release(r)

    def usym_into(self, e: A.Expr, off: int) -> None:
        """A user symbol at ``r10 + off``: the address, then the current
        process id (a stored one is copied whole), as bpftrace 0.17 keeps
        one so that it can be named in its process."""
        if isinstance(e, (A.Map, A.Variable)):
            self.string_into(e, off, USYM_SIZE)          # (a byte copy)
            return
        p = self.p
        r = self.int_expr(e)
        p.stxdw(R10, off, r)
        self.release(r)
        p.call("get_current_pid_tgid")
        p.rsh(R0, 32)
        p.stxdw(R10, off + 8, R0)

    def tuple_into(self, e: A.Expr, off: int, t: Type) -> None:
        offsets, size, _ = tuple_layout(t.elems)
        if isinstance(e, A.Tuple):
            for x, et, o in zip(e.elems, t.elems, offsets):
                self.value_into(x, off + o, et)
            return
        if isinstance(e, A.Map):            # its bytes, copied
            self.string_into(e, off, size)
            return
        src = self.bytes_source(e, size)
        self.copy_stack(off, src, size, size)

    def copy_stack(self, dst: int, src: int, n: int, dst_size: int) -> None:
        """Copy ``min(n, dst_size)`` bytes of stack, zero the rest of ``dst``."""
        self.copy_bytes(R10, src, dst, min(n, dst_size))
        if dst_size > n:
            self._zero(dst + n, dst_size - n)

    def copy_bytes(self, base: Reg, src: int, dst: int, n: int) -> None:
        """Copy ``n`` bytes from ``base + src`` to ``r10 + dst``, in the
        widest accesses both alignments allow (the verifier refuses
        misaligned stack accesses)."""
        p = self.p
        pos = 0
        while pos < n:
            w = _width(src + pos, dst + pos, n - pos)
            p.load(R1, base, src + pos, w)
            p.store(R10, dst + pos, R1, w)
            pos += w

    def bytes_source(self, e: A.Expr, size: int) -> int:
        """The stack offset where the bytes of ``e`` (a string or tuple
        variable, a tuple's element) are; other expressions are built into
        a new slot."""
        if isinstance(e, A.Variable) and e.name in self.vars:
            return self.vars[e.name][0]
        if isinstance(e, A.FieldAccess) and type_of(e.expr).kind == "tuple":
            return self.element_source(e)
        off = self.p.stack.alloc((size + 7) // 8 * 8)
        self.value_into(e, off, type_of(e))
        return off

    def element_source(self, e: A.FieldAccess) -> int:
        """The stack offset of the tuple element ``e`` (``$t.1``, ``@t.0.2``)."""
        t = type_of(e.expr)
        offsets, size, _ = tuple_layout(t.elems)
        return self.bytes_source(e.expr, size) + offsets[int(e.field)]

    def string_into(self, e: A.Expr, off: int, size: int) -> None:
        p = self.p
        if isinstance(e, A.FieldAccess) and type_of(e.expr).kind == "tuple":
            t = type_of(e)
            self.copy_stack(off, self.element_source(e), min(size_align(t)[0], size), size)
            return
        if isinstance(e, A.Call) and e.name == "pton" and e.args and \
                isinstance(e.args[0], A.String):
            from .sema_calls import pton_bytes
            data = pton_bytes(e.args[0].value) or b""
            self.raw_bytes_into(data, off, min(len(data), size), size)
            return
        if isinstance(e, A.String):
            data = e.value.encode("utf-8", "surrogateescape")[:size - 1] + b"\0"
            pos = 0
            while pos < len(data):               # the bytes, in aligned 1/2/4-byte stores
                w = min(_width(0, off + pos, len(data) - pos), 4)
                p.store(R10, off + pos, int.from_bytes(data[pos:pos + w], "little",
                                                        signed=True), w)
                pos += w
            self._zero(off + len(data), size - len(data))
            return
        if isinstance(e, A.Builtin) and e.name == "comm":
            self._zero(off, size)
            p.stack_pointer(R1, off)
            p.mov(R2, min(16, size))
            p.call("get_current_comm")
            return
        if isinstance(e, A.Variable) and e.name in self.vars:
            voff, vt = self.vars[e.name]
            self.copy_stack(off, voff, stored_size(vt) if vt.kind != "string" else vt.size, size)
            return
        if isinstance(e, A.Ternary):
            self._either(e, lambda x: self.string_into(x, off, size))
            return
        if self.located(e):           # a char array member (read whole, as bpftrace)
            t = type_of(e)
            self._zero(off, size)
            self.fetch(self.location(e), off, min(size, t.size), pos=e.pos)
            return
        if isinstance(e, A.FieldAccess) and self._is_args(e.expr):
            src = self._need_source(e, "emit_field_string")
            src.emit_field_string(p, e.field, off, size, self.ctx_reg)
            return
        if isinstance(e, A.Map):
            self.map_bytes_into(e, off, size)
            return
        if isinstance(e, A.Call) and e.name == "str":
            self.str_call(e, off, size)
            return
        if isinstance(e, A.Call) and e.name == "buf" and e.args:
            n = _const(e.args[1]) if len(e.args) > 1 else None
            if n is None and len(e.args) > 1:
                raise CodegenError("buf() needs a constant length", e.args[1].pos)
            if type_of(e.args[0]).kind in ("string", "buffer"):     # buf("text", n)
                self.raw_bytes_into(e.args[0], off, min(n if n is not None else size, size),
                                    size)
                return
            self._zero(off, size)
            if type_of(e.args[0]).kind in ("array", "string") and self.located(e.args[0]):
                # a C array member: its bytes
                self.fetch(self.location(e.args[0]), off, min(n or size, size))
                return
            r = self.int_expr(e.args[0])
            p.mov(R3, r)
            self.release(r)
            p.stack_pointer(R1, off)
            p.mov(R2, min(n if n is not None else size, size))
            p.call("probe_read_user")
            return
        raise CodegenError(f"cannot make a string of {type(e).__name__}", e.pos)

    def raw_bytes_into(self, e: A.Expr | bytes, off: int, n: int, size: int) -> None:
        """The first ``n`` bytes of the string ``e`` or of the bytes ``e``
        (NULs too: a literal's NUL is kept when ``n`` reaches it), zeros
        to ``size``."""
        if isinstance(e, (A.String, bytes)):
            data = (e if isinstance(e, bytes) else e.value.encode() + b"\0")[:n]
            for pos, byte in enumerate(data):
                self.p.stb(R10, off + pos, byte)
            self._zero(off + len(data), size - len(data))
            return
        src = self.bytes_source(e, max(n, 1))
        self.copy_stack(off, src, n, size)

    def counted_into(self, e: A.Expr, off: int, size: int) -> None:
        """A counted buffer at ``r10 + off``: its length byte, then up to
        ``size`` bytes (zero-padded): ``buf(p, n)`` reads ``min(n, size)``
        bytes (``n`` unsigned, as bpftrace bounds it); a counted variable
        or map value is copied whole; any other buffer or string gets its
        own size as the length."""
        p = self.p
        if isinstance(e, A.Call) and e.name == "buf" and len(e.args) == 2 and \
                type_of(e.args[0]).kind not in ("string", "buffer"):
            self._zero(off, size + 1)
            r = self.int_expr(e.args[0])
            n = _const(e.args[1])
            if n is not None:
                p.mov(R2, max(0, min(n, size)))
            else:
                rn = self.int_expr(e.args[1])
                small = p.fresh_label("buflen_ok")
                p.mov(R2, rn)
                self.release(rn)
                p.jle(R2, size, small)
                p.mov(R2, size)
                p.label(small)
            p.stxb(R10, off, R2)
            p.mov(R3, r)
            self.release(r)
            p.stack_pointer(R1, off + 1)
            p.call("probe_read_user")
            return
        t = type_of(e)
        if t.kind == "buffer" and t.counted and isinstance(e, A.Variable) and e.name in self.vars:
            self.copy_stack(off, self.vars[e.name][0], size + 1, size + 1)
            return
        if t.kind == "buffer" and t.counted and isinstance(e, A.Map):
            self.map_bytes_into(e, off, size + 1)
            return
        p.stb(R10, off, min(t.size, size))
        self.string_into(e, off + 1, size)

    def macaddr_into(self, e: A.Expr, off: int) -> None:
        """``macaddr(x)``'s 6 bytes at ``r10 + off``: a 6-byte array's, or
        those a pointer points to; a stored one copied."""
        if isinstance(e, A.Call) and e.name == "macaddr" and e.args:
            arg = e.args[0]
            if type_of(arg).kind in ("int", "pointer"):
                p = self.p
                r = self.int_expr(arg)
                p.mov(R3, r)
                self.release(r)
                p.stack_pointer(R1, off)
                p.mov(R2, 6)
                p.call(self._read_helper(arg))
                return
            e = arg
        self.string_into(e, off, 6)

    def map_bytes_into(self, m: A.Map, off: int, size: int) -> None:
        """The first ``size`` bytes of ``m``'s value at ``r10 + off`` (zeros
        when the key is absent)."""
        p = self.p
        plan = self.plan(m)
        key = self.key(m, plan)
        self._zero(off, size)
        miss = p.fresh_label("vmiss")
        p.map_lookup(plan.spec, key, miss)
        self.copy_bytes(R0, 0, off, min(size, plan.value_size))
        p.label(miss)

    def _either(self, e: A.Ternary, fill: Callable[[A.Expr], None]) -> None:
        """``fill(e.then)`` or ``fill(e.else_)``, as ``e.cond`` decides."""
        p = self.p
        els, end = p.fresh_label("else"), p.fresh_label("endif")
        self.jump_if_false(e.cond, els)
        fill(e.then)
        p.ja(end)
        p.label(els)
        fill(e.else_)
        p.label(end)

    # ---------------------------------------------------------- probed memory
    def _read_helper(self, e: A.Expr) -> str:
        """``probe_read_user`` or ``probe_read_kernel`` for memory reached from
        ``e``: what ``curtask`` reaches is the kernel's, what a syscall
        tracepoint's ``args`` reaches the process's; else the probe's space
        (``probe_read`` where it has none, as bpftrace 0.17)."""
        root = e
        while isinstance(root, (A.FieldAccess, A.Cast)):
            root = root.expr
        if isinstance(root, A.Builtin) and root.name == "curtask":
            return "probe_read_kernel"
        if isinstance(root, A.Builtin) and root.name == "args" and \
                getattr(self.source, "category", "") == "syscalls":
            return "probe_read_user"
        return "probe_read_user" if self._user_space() else \
            "probe_read" if self._no_space() else "probe_read_kernel"

    def str_call(self, e: A.Call, off: int, size: int) -> None:
        p = self.p
        if not e.args:
            raise CodegenError("str() needs an argument", e.pos)
        src = e.args[0]
        if isinstance(src, A.FieldAccess) and self._is_args(src.expr) and \
                getattr(self.source, "emit_field_string", None) is not None and len(e.args) == 1:
            self.source.emit_field_string(p, src.field, off, size, self.ctx_reg)
            return
        text = self.param_text(e)
        if text is not None:              # str($1), str($1 + 2): the parameter's text
            n = _const(e.args[1]) if len(e.args) > 1 else None
            self.string_into(A.String(e.pos, text[:n] if n is not None else text), off, size)
            return
        self._zero(off, size)
        r = self.int_expr(src)
        if len(e.args) > 1:
            n = _const(e.args[1])
            if n is not None:
                p.mov(R2, max(1, min(n + 1, size)))
            else:
                rn = self.int_expr(e.args[1])
                small = p.fresh_label("strlen_ok")
                p.mov(R2, rn)
                p.add(R2, 1)
                p.jle(R2, size, small)
                p.mov(R2, size)
                p.label(small)
                self.release(rn)
        else:
            p.mov(R2, size)
        p.mov(R3, r)
        self.release(r)
        p.stack_pointer(R1, off)
        helper = "probe_read_str" if self._no_space() else "probe_read_user_str"
        p.call(helper)            # (the legacy one where bpftrace 0.17 uses it)
        self.check_helper(helper, e.pos, 2)

    def param_text(self, e: A.Call) -> str | None:
        """The text ``str($N)`` or ``str($N + k)`` stands for (a parameter
        not given is empty; ``k`` characters left out), None for any other
        ``str()``: bpftrace makes a string of the parameter itself, not a
        read from an address."""
        src = e.args[0] if e.args else None
        skip = 0
        if isinstance(src, A.Binop) and src.op == "+":
            param = src.left if isinstance(src.left, A.PositionalParameter) else src.right
            k = _const(src.right if param is src.left else src.left)
            if not isinstance(param, A.PositionalParameter) or k is None:
                return None
            src, skip = param, k
        if not isinstance(src, A.PositionalParameter) or src.count:
            return None
        params = self.ctx.params
        text = params[src.index - 1] if src.index <= len(params) else ""
        return text[max(0, skip):]
