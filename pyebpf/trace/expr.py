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

An atom may be followed by operations with integer constants, applied left
to right: ``arg1 / 1000``, ``latency / 1000``, ``arg0 & 0xff``, ``arg0 % 10``
(``+ - * / % & | ^ << >>``; unsigned 64-bit like bpftrace's ``u64``).

Filters (``--filter``) compare two expressions: ``arg0 > 100``,
``comm == "bash"``, ``str(arg0) != "x"``, ``arg1 < -20`` (``== != < <= > >=``;
as bpftrace: a signed comparison when both sides are signed -- constants,
tracepoint fields and USDT arguments of a signed type).

Values are emitted into registers r6-r9 (integers) or stack buffers
(strings); helpers clobber r0-r5 as usual.
"""
from __future__ import annotations

from .._record import dataclass, field, replace
from ..errors import PyebpfError
from ..program import R0, R1, R2, R3, R10, W0, Program, Reg

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..maps import MapSpec, StackTraceMap
    from .probes import ProbeSource

__all__ = ["Expr", "ExprError", "Filter", "parse_expr", "parse_filter", "EmitEnv",
           "INT", "STR", "STACK", "PROBE", "FUNC", "BPF_F_USER_STACK", "HELPER_BUILTINS",
           "emit_helper_builtin", "emit_elapsed", "emit_ustack_key"]

INT, STR, STACK, PROBE, FUNC = "int", "str", "stack", "probe", "func"
BPF_F_USER_STACK = 1 << 8
_OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod", "&": "and_",
        "|": "or_", "^": "xor", "<<": "lsh", ">>": "rsh"}
_CMPS = {"==": "jeq", "!=": "jne", "<": "jlt", "<=": "jle", ">": "jgt", ">=": "jge"}
_SCMPS = {"==": "jeq", "!=": "jne", "<": "jslt", "<=": "jsle", ">": "jsgt", ">=": "jsge"}
_NEGATE = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_SIMPLE = ("retval", "latency", "pid", "tid", "uid", "gid", "cpu", "nsecs", "elapsed", "comm",
           "ustack", "probe", "func")


class ExprError(PyebpfError, ValueError):
    """An expression cannot be parsed or does not make sense for the probe."""


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
_TOKEN = (r"\s*(?:(?P<num>0[xX][0-9a-fA-F]+|\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
          r"|(?P<str>\"(?:[^\"\\]|\\.)*\")|(?P<op><<|>>|->|==|!=|<=|>=|[-+*/%&|^(),.<>]))")


#: how deeply parentheses and str() may nest in one expression
MAX_DEPTH = 64


def _q(text: object, limit: int = 60) -> str:
    """``repr(text)``, cut in the middle when longer than ``limit``: an error
    message quotes the user's expression, which may be megabytes long."""
    r = repr(text)
    return r if len(r) <= limit else f"{r[:limit // 2]}...{r[-limit // 2:]} ({len(r)} characters)"


def _number(text: str, source: str) -> int:
    """The value of a number token (decimal or 0x hex), an unsigned 64-bit
    constant; anything else is an :class:`ExprError`."""
    if len(text) > 24 or (len(text) > 1 and text[0] == "0" and text[1] not in "xX"):
        what = ("has a leading 0 (write it in decimal, or 0x... in hex)"
                if len(text) <= 24 else f"is too long ({len(text)} digits; 64 bits take at most 20)")
        raise ExprError(f"{_q(source)}: the number {text[:24]}{'...' if len(text) > 24 else ''} "
                        f"{what}")
    value = int(text, 0)
    if value >= 1 << 64:
        raise ExprError(f"{_q(source)}: the number {text} does not fit in 64 bits")
    return value


def _tokens(text: str) -> list[tuple[str, str, int]]:
    """``(kind, text, column)`` of each token of ``text`` (kind: num, name, str, op)."""
    out: list[tuple[str, str, int]] = []
    pos = 0
    text = text.rstrip()
    import re               # (here: re costs the language's start-up ~2 ms)
    token = re.compile(_TOKEN)
    while pos < len(text):
        m = token.match(text, pos)
        if not m or m.end() == pos:
            raise ExprError(f"{_q(text)}: cannot read {_q(text[pos:].strip())} (column {pos + 1})")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str, strlen: int) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.strlen = strlen
        self.depth = 0

    def nest(self) -> None:
        """Enter one more level of parentheses (or ``str(``); refuse too many."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExprError(f"{self.text[:60]!r}{'...' if len(self.text) > 60 else ''}: "
                            f"parentheses nest more than {MAX_DEPTH} levels deep")

    def peek(self) -> tuple[str, str, int] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, what: str | None = None) -> tuple[str, str, int]:
        t = self.peek()
        if t is None:
            raise ExprError(f"{self.text!r}: unexpected end" + (f", expected {what!r}" if what else ""))
        if what is not None and t[1] != what:
            raise ExprError(f"{self.text!r}: expected {what!r} at column {t[2] + 1}, found {t[1]!r}")
        self.i += 1
        return t

    def _peek_text(self) -> str | None:
        t = self.peek()
        return None if t is None else t[1]

    def expr(self) -> Expr:
        first = self.peek()
        start = first[2] if first else 0
        base = self.atom()
        ops: list[tuple[str, int]] = []
        while self._peek_text() in _OPS:
            op = self.take()[1]
            kind, val, col = self.take()
            if kind != "num":
                raise ExprError(f"{self.text!r}: '{op}' takes an integer constant (column "
                                f"{col + 1}); operations between two expressions are not "
                                "supported")
            ops.append((op, _number(val, self.text)))
        if ops:
            if base.kind != INT:
                raise ExprError(f"{self.text!r}: arithmetic on {base.text} ({base.kind}) makes "
                                "no sense")
            end = self.toks[self.i - 1][2] + len(self.toks[self.i - 1][1])
            return replace(base, text=self.text[start:end].strip(),
                           ops=base.ops + tuple(ops))
        return base

    def atom(self) -> Expr:
        kind, val, col = self.take()
        if kind == "num":
            return Expr(val, INT, "const", _number(val, self.text))
        nxt = self.peek()
        if val == "-" and nxt is not None and nxt[0] == "num":     # a negative constant
            num = self.take()[1]
            value = _number(num, self.text)
            if value > 1 << 63:
                raise ExprError(f"{_q(self.text)}: -{num} does not fit in signed 64 bits")
            return Expr(f"-{num}", INT, "const", -value)
        if val == "(":
            self.nest()
            inner = self.expr()
            self.take(")")
            self.depth -= 1
            return inner
        if kind != "name":
            raise ExprError(f"{self.text!r}: expected a value at column {col + 1}, found {val!r}")
        import re
        m = re.fullmatch(r"arg(\d{1,4})", val)
        if m:
            return Expr(val, INT, "arg", int(m.group(1)))
        if re.fullmatch(r"arg\d+", val):
            raise ExprError(f"{self.text!r}: argument number {val[3:20]}... is too large")
        if val == "args":
            sep = self.take()[1]
            if sep not in (".", "->"):
                raise ExprError(f"{self.text!r}: a tracepoint field is args.NAME")
            fname = self.take()
            if fname[0] != "name":
                raise ExprError(f"{self.text!r}: a tracepoint field is args.NAME")
            return Expr(f"args.{fname[1]}", INT, "field", fname[1])
        if val == "str":
            self.take("(")
            self.nest()
            inner = self.expr()
            size, length = self.strlen, None
            if self._peek_text() == ",":
                self.take(",")
                k, v, c = self.take()
                if k != "num" or not 1 <= _number(v, self.text) <= 256:
                    raise ExprError(f"{self.text!r}: the length of str() is 1..256 bytes")
                length = _number(v, self.text)
                size = length + 1          # N characters, as bpftrace's str(E, N), and the NUL
            self.take(")")
            self.depth -= 1
            if inner.kind != INT:
                raise ExprError(f"{self.text!r}: str() takes an address (an integer expression)")
            return Expr(f"str({inner.text}" + (f", {length})" if length is not None else ")"),
                        STR, "str", inner, (), size)
        if val in _SIMPLE:
            if val == "comm":
                return Expr(val, STR, "comm", None, (), 16)
            if val == "ustack":
                return Expr(val, STACK, "ustack")
            if val in ("probe", "func"):
                return Expr(val, PROBE if val == "probe" else FUNC, val)
            return Expr(val, INT, val)
        raise ExprError(f"{self.text!r}: unknown name {val!r}; known: arg0..argN, args.NAME, "
                        f"str(...), {', '.join(_SIMPLE)}")


def parse_expr(text: str, strlen: int = 64) -> Expr:
    """Parse one expression (see the module docs)."""
    if not isinstance(text, str):
        raise ExprError(f"an expression is a string, not {_q(text)}")
    if not isinstance(strlen, int) or not 1 <= strlen <= 256:
        raise ExprError(f"string length must be 1..256 bytes, not {strlen}")
    p = _Parser(text, strlen)
    if not p.toks:
        raise ExprError("empty expression")
    e = p.expr()
    extra = p.peek()
    if extra is not None:
        raise ExprError(f"{_q(text)}: unexpected {extra[1]!r} at column {extra[2] + 1}")
    return e


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
    """Parse ``EXPR OP EXPR`` or ``STRING_EXPR ==|!= "literal"``."""
    if not isinstance(text, str):
        raise ExprError(f"a filter is a string, not {_q(text)}")
    toks = _tokens(text)
    depth = 0
    for i, (kind, val, col) in enumerate(toks):
        depth += val == "("
        depth -= val == ")"
        if depth == 0 and kind == "op" and val in _CMPS:
            left = parse_expr(text[:col], strlen)
            rest = text[col + len(val):].strip()
            if rest.startswith('"'):
                if not (len(rest) >= 2 and rest.endswith('"')):
                    raise ExprError(f"{_q(text)}: unterminated string literal")
                if left.kind != STR:
                    raise ExprError(f"{_q(text)}: a string literal compares with comm or str(...)")
                if val not in ("==", "!="):
                    raise ExprError(f"{_q(text)}: strings compare with == or != only")
                lit = _string_literal(rest[1:-1], text)
                if len(lit) >= left.size:
                    raise ExprError(f"{_q(text)}: the literal is longer than {left.text} can hold")
                return Filter(text, left, val, lit)
            right = parse_expr(rest, strlen)
            if left.kind != INT or right.kind != INT:
                raise ExprError(f"{_q(text)}: only integers compare with {val} (strings with a "
                                '"literal")')
            return Filter(text, left, val, right)
    raise ExprError(f"{_q(text)}: a filter is a comparison, e.g. 'arg0 > 100' or 'comm == \"bash\"'")


_LIT_ESCAPES = {"n": 10, "t": 9, "r": 13, "0": 0, "a": 7, "b": 8, "f": 12, "v": 11, "e": 27,
                "\\": 92, '"': 34, "'": 39}


def _string_literal(body: str, source: str) -> bytes:
    """The bytes of a filter's string literal (UTF-8, with C escapes:
    ``\\n \\t \\" \\\\ \\0 \\xHH``...); a bad escape is an :class:`ExprError`."""
    import re
    out = bytearray()
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8", "surrogatepass")
            i += 1
            continue
        esc = body[i + 1] if i + 1 < n else ""
        if esc in _LIT_ESCAPES:
            out.append(_LIT_ESCAPES[esc])
            i += 2
        elif esc == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", body[i + 2:i + 4]):
            out.append(int(body[i + 2:i + 4], 16))
            i += 4
        else:
            raise ExprError(f"{_q(source)}: unknown escape \\{esc} in the string literal (use "
                            "\\n \\t \\\\ \\\" \\0 or \\xHH)")
    return bytes(out)


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


#: the builtins that are one helper's result (also the bpftrace language's):
#: name -> (helper, which part of its 64-bit result: "high" or "low" half, or "" all)
HELPER_BUILTINS = {
    "pid": ("get_current_pid_tgid", "high"), "tid": ("get_current_pid_tgid", "low"),
    "uid": ("get_current_uid_gid", "low"), "gid": ("get_current_uid_gid", "high"),
    "cpu": ("get_smp_processor_id", ""), "nsecs": ("ktime_get_ns", ""),
    "cgroup": ("get_current_cgroup_id", ""), "rand": ("get_prandom_u32", ""),
}


def emit_helper_builtin(p: Program, name: str, dst: Reg) -> None:
    """``dst = name`` for a name of :data:`HELPER_BUILTINS`; clobbers r0-r5."""
    helper, part = HELPER_BUILTINS[name]
    p.call(helper)
    if part == "high":
        p.rsh(R0, 32)
    elif part == "low":
        p.mov(W0, W0)
    p.mov(dst, R0)


def emit_elapsed(p: Program, dst: Reg, start_ns: int) -> None:
    """``dst = ktime_get_ns() - start_ns`` (the nanoseconds since the start);
    clobbers r0-r5."""
    p.call("ktime_get_ns")
    p.lddw(R1, start_ns)
    p.sub(R0, R1)
    p.mov(dst, R0)


def emit_ustack_key(p: Program, dst: Reg, ctx: Reg, stack_map: object) -> None:
    """``dst = pid << 32 | user stack id`` (the id from ``stack_map``, a
    stack trace map); ``ctx`` holds the program's context; clobbers r0-r5."""
    p.call("get_current_pid_tgid")
    p.rsh(R0, 32)
    p.lsh(R0, 32)
    p.mov(dst, R0)
    p.mov(R1, ctx)
    p.ld_map(R2, stack_map)
    p.mov(R3, BPF_F_USER_STACK)
    p.call("get_stackid")
    p.mov(W0, W0)
    p.or_(dst, R0)


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
