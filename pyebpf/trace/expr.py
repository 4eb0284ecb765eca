"""The little expression language of ``pyebpf trace`` (a subset of bpftrace's).

Atoms:

==================  =======================================================
``arg0`` ...        the probe's arguments (uprobe registers, USDT arguments,
                    a tracepoint's fields in order)
``args.NAME``       a tracepoint field by name (also ``args->NAME``)
``retval``          the return value (uretprobe; with ``uprobe:`` the return
                    probe is attached too)
``latency``         nanoseconds from the function's entry to its return
                    (attaches both probes of a ``uprobe:``/``uretprobe:``)
``pid`` ``tid``     process and thread id;  ``uid``, ``gid``, ``cpu``
``nsecs``           ``bpf_ktime_get_ns()`` (CLOCK_MONOTONIC)
``elapsed``         nanoseconds since the trace was built
``comm``            the thread's name (16 bytes)
``str(E[, N])``     the NUL-terminated string at address ``E`` (``N``
                    characters at most, as bpftrace; default: ``--strlen``
                    bytes with the NUL, 64)
``ustack``          the user stack (symbolized when printed)
``probe``, ``func`` the probe (per matched function of a glob), the function's name
integers            ``42``, ``0x2a``, ``-20`` (int64, as bpftrace's literals)
==================  =======================================================

The text is read by the bpftrace language's parser (the one of ``pyebpf bt``
and ``pyebpf trace``'s flags), with C's operators and C's precedence:
``arg0 + 2 * 3`` is ``arg0 + 6``.  An expression is one atom followed by
operations with integer constants (``+ - * / % & | ^ << >>``; unsigned
64-bit like bpftrace's ``u64``): ``arg1 / 1000``, ``latency / 1000``,
``arg0 & 0xff``, ``2 * arg0``, ``(uint8)arg0``, ``~arg0``; constant parts are
folded.  What such a chain cannot say -- two non-constant operands
(``arg0 + arg1``), signed casts, ternaries, maps, variables -- is an
:class:`ExprError` naming the expression and the column
(:mod:`~pyebpf.trace.fromlang` has the details).

Filters (``--filter``) compare two expressions: ``arg0 > 100``,
``comm == "bash"``, ``str(arg0) != "x"``, ``arg1 < -20`` (``== != < <= > >=``;
as bpftrace: a signed comparison when both sides are signed -- constants,
tracepoint fields and USDT arguments of a signed type);
:meth:`~pyebpf.trace.recipes.Trace.filter` takes several joined with ``&&``.

Values are emitted into registers r6-r9 (integers) or stack buffers
(strings); helpers clobber r0-r5 as usual.
"""
from __future__ import annotations

from .._record import dataclass, field
from ..errors import PyebpfError
from ..lang.builtins import (BPF_F_USER_STACK, HELPER_BUILTINS, emit_elapsed, emit_helper_builtin,
                             emit_ustack_key)
from ..program import R0, R1, R2, R10, Program, Reg

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..maps import MapSpec, StackTraceMap
    from ..probes.sources import ProbeSource

__all__ = ["Expr", "ExprError", "Filter", "parse_expr", "parse_filter", "parse_filters", "EmitEnv",
           "INT", "STR", "STACK", "PROBE", "FUNC", "BPF_F_USER_STACK", "HELPER_BUILTINS",
           "emit_helper_builtin", "emit_elapsed", "emit_ustack_key"]

INT, STR, STACK, PROBE, FUNC = "int", "str", "stack", "probe", "func"
_OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod", "&": "and_",
        "|": "or_", "^": "xor", "<<": "lsh", ">>": "rsh"}
_CMPS = {"==": "jeq", "!=": "jne", "<": "jlt", "<=": "jle", ">": "jgt", ">=": "jge"}
_SCMPS = {"==": "jeq", "!=": "jne", "<": "jslt", "<=": "jsle", ">": "jsgt", ">=": "jsge"}
_NEGATE = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


class ExprError(PyebpfError, ValueError):
    """An expression cannot be parsed or does not make sense for the probe.
    ``column``: where in the expression (1-based), when known."""

    column: int | None = None


@dataclass(frozen=True)
class Expr:
    """A parsed expression.

    ``kind``: ``int``, ``str`` (bytes of ``size``), ``stack`` (ustack),
    ``probe`` or ``func`` (ints shown as names).  ``atom`` is the base
    (``arg0``, ``retval``, ``args.flags``, ``str``, ``const``...), ``arg`` the
    argument number / field name / constant / inner expression, ``ops`` the
    ``(op, constant)`` applied after it, ``text`` the source.
    """

    text: str
    kind: str
    atom: str
    arg: int | str | Expr | None = None
    ops: tuple[tuple[str, int], ...] = ()
    size: int = 8           # bytes on the wire (strings: the buffer size)

    @property
    def slot_size(self) -> int:
        """Bytes this value takes in a record or key (a multiple of 8)."""
        return (self.size + 7) // 8 * 8

    def uses(self, name: str) -> bool:
        """Whether the expression reads ``name`` (``latency``, ``retval``, ``arg``...)."""
        if self.atom == name:
            return True
        return isinstance(self.arg, Expr) and self.arg.uses(name)

    def args_used(self) -> set[int]:
        """Argument numbers read (``argN``, also inside ``str()``)."""
        out = {self.arg} if self.atom == "arg" and isinstance(self.arg, int) else set()
        if isinstance(self.arg, Expr):
            out |= self.arg.args_used()
        return out

    def __str__(self) -> str:
        """The expression as written."""
        return self.text


# ----------------------------------------------------------------- parsing
#: how deeply parentheses and str() may nest in one expression
MAX_DEPTH = 64


def _q(text: object, limit: int = 60) -> str:
    """``repr(text)``, cut in the middle when longer than ``limit``: an error
    message quotes the user's expression, which may be megabytes long."""
    r = repr(text)
    return r if len(r) <= limit else f"{r[:limit // 2]}...{r[-limit // 2:]} ({len(r)} characters)"


def parse_expr(text: str, strlen: int = 64) -> Expr:
    """Parse one expression with the bpftrace language's parser (see the
    module docs; :mod:`~pyebpf.trace.fromlang` turns its tree into an
    :class:`Expr`). ``strlen``: the bytes of ``str(E)`` without a length."""
    from .fromlang import parse_expr as parse     # (the parser: imported on first use)
    return parse(text, strlen)


@dataclass(frozen=True)
class Filter:
    """``left OP right``: keep the event when the comparison holds."""

    text: str
    left: Expr
    op: str
    right: Expr | bytes    # bytes: a string literal (compared with a string expression)

    def exprs(self) -> list[Expr]:
        """The expressions compared (one when the right side is a string literal)."""
        return [self.left] + ([self.right] if isinstance(self.right, Expr) else [])


def parse_filter(text: str, strlen: int = 64) -> Filter:
    """Parse one comparison: ``EXPR OP EXPR`` (``== != < <= > >=``) or
    ``STRING_EXPR ==|!= "literal"``."""
    from .fromlang import parse_filter as parse
    return parse(text, strlen)


def parse_filters(text: str, strlen: int = 64) -> list[Filter]:
    """Parse a condition: one comparison or several joined with ``&&``."""
    from .fromlang import parse_filters as parse
    return parse(text, strlen)


# ----------------------------------------------------------------- emission
@dataclass
class EmitEnv:
    """What expression emission needs to know about the program being built.

    ``ctx``: the register holding the context; ``source``: the probe source;
    ``saved_args``: argument number -> stack offset (in a return program,
    the arguments saved at the entry); ``latency_slot``: stack offset of the
    computed latency; ``probe_index``/``func_base``: the numbers the
    ``probe``/``func`` expressions emit; ``stack_map``: the StackTraceMap for
    ``ustack``; ``at_return``: the program runs at the function's return.
    """

    ctx: Reg
    source: ProbeSource
    probe_index: int = 0
    func_base: int = 0
    saved_args: dict[int, int] = field(default_factory=dict)
    latency_slot: int | None = None
    stack_map: StackTraceMap | MapSpec | None = None
    at_return: bool = False
    start_ns: int = 0


def signed(e: Expr, source: ProbeSource | None) -> bool:
    """Whether the value of ``e`` is signed: tracepoint fields and USDT
    arguments may be (by their C type, their spec), constants are (int64,
    as bpftrace's literals; ``source`` None: not known, unsigned)."""
    if e.ops:
        return False
    if e.atom == "field":
        return bool(getattr(source, "field_signed", lambda n: False)(e.arg))
    if e.atom == "arg":
        return bool(getattr(source, "arg_signed", lambda n: False)(e.arg))
    if e.atom == "const":                   # (an int64, as bpftrace's literals)
        return True
    return False


def emit_int(p: Program, e: Expr, dst: Reg, env: EmitEnv) -> None:
    """``dst = e`` for an integer-valued expression (``dst`` in r6-r9)."""
    if e.kind not in (INT, STACK, PROBE, FUNC):
        raise ExprError(f"{e.text} is a string; it cannot be used as a number")
    a = e.atom
    src = env.source
    if a == "const" and isinstance(e.arg, int):
        if -(1 << 31) <= e.arg < (1 << 31):
            p.mov(dst, e.arg)
        else:
            p.lddw(dst, e.arg & ((1 << 64) - 1))
    elif a == "arg" and isinstance(e.arg, int):
        if e.arg in env.saved_args:
            p.load(dst, R10, env.saved_args[e.arg], 8)
        elif env.at_return and hasattr(src, "entry"):
            raise ExprError(f"{e.text}: arguments are not known at the return")
        else:
            n = e.arg
            count = getattr(src, "arg_count", None)
            if count is not None and n >= count and not hasattr(src, "entry"):
                raise ExprError(f"{e.text}: {src.describe()} has {count} argument(s)")
            src.emit_arg(p, dst, n, env.ctx)
    elif a == "field" and isinstance(e.arg, str):
        if not hasattr(src, "emit_field"):
            raise ExprError(f"{e.text}: args.NAME reads tracepoint fields; this probe is "
                            f"{src.describe()} (use argN)")
        src.emit_field(p, dst, e.arg, env.ctx)
    elif a == "retval":
        if not hasattr(src, "emit_retval"):
            raise ExprError(f"retval: {src.describe()} has no return value (use a uretprobe)")
        src.emit_retval(p, dst, env.ctx)
    elif a == "latency":
        if env.latency_slot is None:
            raise ExprError("latency needs a function probe (uprobe:/uretprobe:): it is the "
                            "time from the entry to the return")
        p.load(dst, R10, env.latency_slot, 8)
    elif a in ("pid", "tid", "uid", "gid", "cpu", "nsecs"):
        emit_helper_builtin(p, a, dst)
    elif a == "elapsed":
        emit_elapsed(p, dst, env.start_ns)
    elif a == "ustack":
        if env.stack_map is None:
            raise ExprError("ustack: no stack map")   # pragma: no cover - set up by the builder
        emit_ustack_key(p, dst, env.ctx, env.stack_map)
    elif a in ("probe", "func"):
        if len(getattr(src, "functions", ())) > 1:
            p.mov(R1, env.ctx)
            p.call("get_attach_cookie")
            p.add(R0, env.func_base)
            p.mov(dst, R0)
        else:
            p.mov(dst, env.func_base)
    else:  # pragma: no cover - the parser makes no other atoms
        raise ExprError(f"{e.text} is not a number")
    for op, val in e.ops:
        if op in ("/", "%") and val == 0:
            raise ExprError(f"{e.text}: division by zero")
        method: Callable[[Reg, Reg | int], object] = getattr(p, _OPS[op])
        if -(1 << 31) <= val < (1 << 31):
            method(dst, val)
        else:
            p.lddw(R1, val & ((1 << 64) - 1))
            method(dst, R1)


def emit_bytes(p: Program, e: Expr, offset: int, env: EmitEnv, tmp: Reg) -> None:
    """Write the string ``e`` into ``e.slot_size`` bytes of stack at ``offset``
    (NUL-padded).  ``tmp`` (r6-r9) may be clobbered."""
    if e.kind != STR:
        raise ExprError(f"{e.text} is not a string")
    if e.atom == "comm":
        p.stack_zero(16, offset)          # (the helper fills it; the checker wants it written)
        p.stack_pointer(R1, offset)
        p.mov(R2, 16)
        p.call("get_current_comm")
        return
    inner = e.arg
    if not isinstance(inner, Expr):  # pragma: no cover - the parser makes str(E) only
        raise ExprError(f"{e.text}: no address to read the string from")
    src = env.source
    if inner.atom == "field" and not inner.ops and hasattr(src, "emit_field_string"):
        src.emit_field_string(p, inner.arg, offset, e.slot_size, env.ctx)
        return
    emit_int(p, inner, tmp, env)
    p.stack_zero(e.slot_size, offset)
    p.probe_read_user(tmp, e.size, offset=offset, string=True)


def emit_filter(p: Program, f: Filter, env: EmitEnv, reject: str, tmp1: Reg, tmp2: Reg) -> None:
    """Jump to ``reject`` unless the filter holds."""
    if isinstance(f.right, bytes):
        buf = p.stack.alloc(f.left.slot_size)
        emit_bytes(p, f.left, buf, env, tmp1)
        lit = f.right + b"\0"
        if f.op == "==":
            for i, ch in enumerate(lit):
                p.ldxb(R1, R10, buf + i)
                p.jne(R1, ch, reject)
        else:
            keep = p.fresh_label("str_differs")
            for i, ch in enumerate(lit):
                p.ldxb(R1, R10, buf + i)
                p.jne(R1, ch, keep)
            p.ja(reject)
            p.label(keep)
        return
    emit_int(p, f.left, tmp1, env)
    emit_int(p, f.right, tmp2, env)
    # (as bpftrace: a signed comparison when both sides are signed)
    is_signed = signed(f.left, env.source) and signed(f.right, env.source)
    table = _SCMPS if is_signed else _CMPS
    p.jump_if(table[_NEGATE[f.op]], tmp1, tmp2, reject)
