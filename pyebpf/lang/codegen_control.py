"""Code generation of statements and conditions (part of
:mod:`pyebpf.lang.codegen`): blocks, ``if``/``else``, ``while``,
``unroll``, ``return``/``break``/``continue``, assignments to scratch
variables, and conditions compiled to conditional jumps."""
from __future__ import annotations

from ..errors import ProgramError
from ..program import R0, R10, Reg
from . import ast as A
from .codegen_base import CodegenError, _const, _GenBase, type_of


class _Loop:
    def __init__(self, head: str, end: str) -> None:
        self.head, self.end = head, end



class _ControlGen(_GenBase):
    """Statements and conditions."""

    def block(self, b: A.Block) -> bool:
        """Emit the statements of ``b``; True when control cannot fall
        through its end (what follows a ``return`` or ``exit()`` is not
        emitted: the verifier refuses unreachable instructions)."""
        for s in b.stmts:
            if self.stmt(s):
                return True
        return False

    def stmt(self, s: A.Stmt) -> bool:
        """Emit ``s``; True when control does not go on after it. The stack
        slots it takes for its temporaries (keys, strings, records) are free
        again after it: the next statement reuses them (scratch variables
        have their own slots, taken before the first statement). A DSL
        error (a stack frame over 512 bytes) points at the statement."""
        start = len(self.p.insns)
        stack_mark = self.p.stack.used
        self._comment_line(s.pos)
        try:
            ends = self._stmt(s)
        except CodegenError:
            raise
        except ProgramError as exc:
            raise CodegenError(exc.reason, s.pos) from exc
        self.spans.append((start, len(self.p.insns), s.pos))
        self.p.stack.used = stack_mark
        return ends

    #: the method that emits each kind of statement; it returns True when
    #: control does not go on after the statement (None: it does)
    _STMTS = {
        A.ExprStmt: "expr_statement", A.AssignVar: "assign_var", A.AssignMap: "assign_map",
        A.If: "if_", A.Unroll: "unroll", A.While: "while_", A.Jump: "jump"}

    def _stmt(self, s: A.Stmt) -> bool:
        method = self._STMTS.get(type(s))
        if method is None:
            raise CodegenError(f"statement {type(s).__name__} is not supported", s.pos)
        return bool(getattr(self, method)(s))

    def expr_statement(self, s: A.ExprStmt) -> bool:
        """An expression for its effect; control ends at ``exit()``."""
        self.expr_stmt(s.expr)
        return isinstance(s.expr, A.Call) and s.expr.name == "exit"

    def unroll(self, s: A.Unroll) -> bool:
        """The body ``count`` times (a constant from 1 to 100)."""
        n = _const(s.count)
        if n is None or not 1 <= n <= 100:
            raise CodegenError("unroll needs a constant count between 1 and 100", s.count.pos)
        for _ in range(n):
            if self.block(s.body):
                return True
        return False

    def jump(self, s: A.Jump) -> bool:
        """``return``, ``break``, ``continue``: control does not go on."""
        if s.kind == "return":
            self.p.ja("out")
        elif not self.loops:
            raise CodegenError(f"{s.kind} outside a loop", s.pos)
        elif s.kind == "break":
            self.p.ja(self.loops[-1].end)
        else:
            self.p.ja(self.loops[-1].head)
        return True

    _NEGATED = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}

    def jump_if_false(self, e: A.Expr, target: str) -> None:
        """Jump to ``target`` when ``e`` is false (0): comparisons become one
        conditional jump, ``&&``/``||``/``!`` short-circuit, without
        materializing a 0/1 value."""
        self._jump_when(e, target, False)

    def jump_if_true(self, e: A.Expr, target: str) -> None:
        """Jump to ``target`` when ``e`` is true (not 0)."""
        self._jump_when(e, target, True)

    def _jump_when(self, e: A.Expr, target: str, truth: bool) -> None:
        """Jump to ``target`` when ``e``'s truth is ``truth``."""
        p = self.p
        if isinstance(e, A.Unop) and e.op == "!" and not e.postfix:
            self._jump_when(e.operand, target, not truth)
            return
        if isinstance(e, A.Binop) and e.op in ("&&", "||"):
            if (e.op == "||") == truth:         # either side alone decides: test both
                self._jump_when(e.left, target, truth)
                self._jump_when(e.right, target, truth)
            else:                               # the left side can decide the other way
                skip = p.fresh_label("or_ok" if e.op == "||" else "and_no")
                self._jump_when(e.left, skip, not truth)
                self._jump_when(e.right, target, truth)
                p.label(skip)
            return
        if isinstance(e, A.Binop) and e.op in self._NEGATED and self._int_compare(e):
            self._compare_jump(e, e.op if truth else self._NEGATED[e.op], target)
            return
        r = self.int_expr(e)
        if truth:
            p.jne(r, 0, target)
        else:
            p.jeq(r, 0, target)
        self.release(r)

    def _int_compare(self, e: A.Binop) -> bool:
        return type_of(e.left).kind not in ("string", "array", "record") and \
            type_of(e.right).kind not in ("string", "array", "record")

    def _compare_jump(self, e: A.Binop, op: str, target: str) -> None:
        """``if left <op> right goto target`` (signed when both sides are)."""
        p = self.p
        signed = type_of(e.left).signed and type_of(e.right).signed
        cond = self._CMP[op][1 if signed else 0]
        left, right, _ = self._operands(e)
        p.jump_if(cond, left, right, target)
        self.release(left)
        if not isinstance(right, int):
            self.release(right)

    def _operands(self, e: A.Binop) -> tuple[Reg, Reg | int, bool]:
        """Evaluate both sides of ``e``: ``(left, right, spilled)``. ``right``
        is an int when it is a 32-bit constant; ``spilled`` when no register
        was left for the right side: the left one then comes back in r0
        (kept on the stack meanwhile, its register released)."""
        p = self.p
        left = self.int_expr(e.left)
        c = _const(e.right)
        if c is not None and -(1 << 31) <= c < (1 << 31):
            return left, c, False
        if not self.free:
            spill = p.stack.alloc(8)
            p.stxdw(R10, spill, left)
            self.release(left)
            right = self.int_expr(e.right)
            p.ldxdw(R0, R10, spill)
            return R0, right, True
        return left, self.int_expr(e.right), False

    def if_(self, s: A.If) -> bool:
        p = self.p
        els, end = p.fresh_label("else"), p.fresh_label("endif")
        self.jump_if_false(s.cond, els)
        then_ends = self.block(s.then)
        if s.else_ is not None and not then_ends:
            p.ja(end)
        p.label(els)
        if s.else_ is None:
            return False
        else_ends = self.block(s.else_)
        p.label(end)
        return then_ends and else_ends

    def while_(self, s: A.While) -> None:
        p = self.p
        head, end = p.fresh_label("while"), p.fresh_label("wend")
        p.label(head)
        self.jump_if_false(s.cond, end)
        self.loops.append(_Loop(head, end))
        self.block(s.body)
        self.loops.pop()
        p.ja(head)
        p.label(end)

    def assign_var(self, s: A.AssignVar) -> None:
        off, t = self.vars[s.var.name]
        if s.op is None:
            self.value_into(s.value, off, t)
            return
        r = self.int_expr(A.Binop(s.pos, s.op, s.var, s.value, type=t))
        self.p.stxdw(R10, off, r)
        self.release(r)

