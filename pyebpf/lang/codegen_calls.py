"""Code generation of calls used as statements (part of
:mod:`pyebpf.lang.codegen`): ``printf``, ``time``, ``exit``, ``print``,
``clear``, ``zero``, ``delete``, ``join``, ``signal``, and the events they
send through the ring buffer."""
from __future__ import annotations

from ..program import R0, R1, R2, R3, R4, R10
from . import ast as A
from .codegen_base import JOIN_ARGS, JOIN_STRLEN, CodegenError, _const, _GenBase, type_of
from .layout import tuple_layout
from .types import Type, int_type, string_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Sequence

    from .codegen import Action


class _CallGen(_GenBase):
    """Calls as statements, and the events."""

    def expr_stmt(self, e: A.Expr) -> None:
        if isinstance(e, A.Call):
            self.call_stmt(e)
            return
        if isinstance(e, A.Ternary) and type_of(e).kind == "none":
            p = self.p                  # c ? printf(..) : printf(..): an if/else
            els, end = p.fresh_label("else"), p.fresh_label("endif")
            self.jump_if_false(e.cond, els)
            self.expr_stmt(e.then)
            p.ja(end)
            p.label(els)
            self.expr_stmt(e.else_)
            p.label(end)
            return
        if type_of(e).kind in ("string", "array", "record") and self.located(e):
            return          # a member read for nothing (bpftrace's value is unused)
        r = self.int_expr(e)
        self.release(r)

    def call_stmt(self, c: A.Call) -> None:
        p = self.p
        name = c.name
        if name in ("printf", "cat", "system"):    # cat/system: user space formats, then acts
            if not c.args or not isinstance(c.args[0], A.String):
                raise CodegenError(f"{name} needs a format string", c.pos)
            action = self.unit.action(name, c.pos, fmt=c.args[0].value,
                                      args=[self.arg_type(a) for a in c.args[1:]])
            action.strftime = {i: a.args[0].value for i, a in enumerate(c.args[1:])
                               if isinstance(a, A.Call) and a.name == "strftime" and a.args
                               and isinstance(a.args[0], A.String)}
            self.output(action, c.args[1:])
        elif name == "time":
            fmt = c.args[0].value if c.args and isinstance(c.args[0], A.String) else "%H:%M:%S\n"
            self.output(self.unit.action("time", c.pos, fmt=fmt), [])
        elif name == "exit":
            self.output(self.unit.action("exit", c.pos), [])
            p.ja("out")
        elif name in ("print", "clear", "zero"):
            if not c.args:
                raise CodegenError(f"{name}() needs an argument", c.pos)
            target = c.args[0]
            if isinstance(target, A.Map) and not target.keys:
                params = [_const(a) or 0 for a in c.args[1:3]]
                self.plan(target)
                self.output(self.unit.action(name, c.pos, map="@" + target.name,
                                             params=params), [])
            elif name == "print":
                self.output(self.unit.action("print_value", c.pos,
                                             args=[self.arg_type(target)]), [target])
            else:
                raise CodegenError(f"{name}() takes a map", target.pos)
        elif name == "delete":
            for target in c.args:
                if not isinstance(target, A.Map):
                    raise CodegenError("delete() takes a map element", target.pos)
                plan = self.plan(target)
                if plan.kind in ("hist", "lhist"):
                    raise CodegenError("delete() of a histogram element is not supported yet",
                                       target.pos)
                key = self.key(target, plan)
                p.ld_map(R1, plan.spec)
                p.stack_pointer(R2, key)
                p.call("map_delete_elem")
                self.check_helper("map_delete_elem", c.pos)
        elif name == "join":
            self.join(c)
        elif name in ("__watch", "unwatch"):      # (__watch: a watchpoint's setup probe)
            kind = "watch" if name == "__watch" else "unwatch"
            self.output(self.unit.action(kind, c.pos, args=[int_type(8, False)] * len(c.args)),
                        c.args)
        elif name == "signal":
            sig = _const(c.args[0]) if c.args else None
            if sig is None:
                raise CodegenError("signal() needs a constant signal number", c.pos)
            p.mov(R1, sig)
            p.call("send_signal")
        elif name in ("count", "sum", "min", "max", "avg", "stats", "hist", "lhist"):
            raise CodegenError(f"{name}() must be assigned to a map", c.pos)
        else:
            r = self.int_expr(c)
            self.release(r)

    def join(self, c: A.Call) -> None:
        """``join(argv[, delim])``: up to :data:`JOIN_ARGS` strings of
        :data:`JOIN_STRLEN` bytes from a NULL-terminated array of pointers,
        built in a per-CPU scratch map (too big for the stack) and sent
        from there; user space joins them."""
        p = self.p
        if not c.args:
            raise CodegenError("join() needs an array of strings", c.pos)
        delim = c.args[1].value if len(c.args) > 1 and isinstance(c.args[1], A.String) else " "
        action = self.unit.action("join", c.pos, fmt=delim,
                                  args=[string_type(JOIN_STRLEN)] * JOIN_ARGS)
        scratch = self.unit.join_scratch()
        argv = self.int_expr(c.args[0])
        buf = self._need(c.pos)
        key = p.stack.alloc(4, 4)
        p.stw(R10, key, 0)
        done = p.fresh_label("join_done")
        p.map_lookup(scratch, key, done, dst=buf)
        p.stdw(buf, 0, action.id)
        for i in range(JOIN_ARGS):
            p.stb(buf, 8 + i * JOIN_STRLEN, 0)
        slot = p.stack.alloc(8)
        send = p.fresh_label("join_send")
        user = "probe_read_user" if self._user_space() or self.kind == "probe" and \
            getattr(self.source, "category", "") == "syscalls" else "probe_read_kernel"
        for i in range(JOIN_ARGS):
            p.stack_pointer(R1, slot)
            p.mov(R2, 8)
            p.mov(R3, argv)
            p.add(R3, 8 * i)
            p.call(user)
            p.ldxdw(R3, R10, slot)
            p.jeq(R3, 0, send)
            p.mov(R1, buf)
            p.add(R1, 8 + i * JOIN_STRLEN)
            p.mov(R2, JOIN_STRLEN)
            p.call(user + "_str")
        p.label(send)
        p.ld_map(R1, self.unit.ringbuf)
        p.mov(R2, buf)
        p.mov(R3, 8 + JOIN_ARGS * JOIN_STRLEN)
        p.mov(R4, 0)
        p.call("ringbuf_output")
        p.label(done)
        self.release(buf)
        self.release(argv)

    def arg_type(self, e: A.Expr) -> Type:
        """How an event carries ``e``: integers as 8 bytes."""
        t = type_of(e)
        if t.kind == "int":
            return int_type(8, t.signed)
        return t

    def check_helper(self, helper: str, pos: A.Pos, level: int = 1, *,
                     null: bool = False) -> None:
        """After a call of ``helper`` (its result in r0): with bpftrace's
        ``-k`` at ``level`` or above, send a ``helper_error`` event (the
        return code, the script position) when it failed -- a negative r0,
        or with ``null`` (a map lookup) a zero one.  Clobbers r0-r5."""
        if self.unit.helper_check < level:
            return
        p = self.p
        ok = p.fresh_label("helper_ok")
        if null:
            p.jne(R0, 0, ok)
        else:
            p.jsge(R0, 0, ok)
        action = self.unit.action("helper_error", pos, fmt=helper, args=[int_type(8, True)])
        base = p.stack.alloc(16)
        p.stxdw(R10, base + 8, R0)
        p.stdw(R10, base, action.id)
        p.ringbuf_output(self.unit.ringbuf, base, 16, drops=self.unit.drops)
        p.label(ok)

    def output(self, action: Action, args: Sequence[A.Expr]) -> None:
        """Send an event: the action id, then ``args`` laid out as the action's record."""
        p = self.p
        offsets: list[int] = []
        size = 8
        if action.record is not None:
            offsets, rsize, _ = tuple_layout(action.record.elems)
            size = 8 + (rsize + 7) // 8 * 8
        if size > 480:
            raise CodegenError(f"the arguments of this {action.kind} need {size - 8} bytes; "
                               "an event holds at most 472 (use shorter strings)", action.pos)
        base = p.stack.alloc(size)
        if action.record is not None:
            self._zero(base + 8, size - 8)
            for e, t, o in zip(args, action.args, offsets):
                self.value_into(e, base + 8 + o, t)
        p.stdw(R10, base, action.id)
        p.ringbuf_output(self.unit.ringbuf, base, size, drops=self.unit.drops)

