"""Trace's expressions, read by the bpftrace language's parser.

:func:`parse_expr` and :func:`parse_filters` parse a string with
:func:`pyebpf.lang.parser.parse_expression` (the parser ``pyebpf trace``'s
flags and ``pyebpf bt`` use: C's operators with C's precedence, negative
literals, casts, ``str(E, N)``...) and turn the tree into trace's
:class:`~pyebpf.trace.expr.Expr`: one atom (``arg0``, ``retval``,
``args.NAME``, ``str(E)``, a constant...) followed by operations with
integer constants.  So a tree becomes a chain when each operation has a
constant on one side: ``arg0 + 2 * 3`` is ``arg0`` then ``+ 6`` (constant
parts are folded), ``2 * arg0`` is ``arg0 * 2`` (``+ * & | ^`` commute),
``~E`` is ``E ^ -1``, ``-E`` is ``E ^ -1`` then ``+ 1``, ``(uint8)E`` is
``E & 0xff``.  What a chain cannot say (two non-constant operands, signed
casts, ternaries, maps, variables...) is an :class:`ExprError` naming the
expression and the column, never a different meaning.

A filter is a comparison (``== != < <= > >=``) of two integer expressions,
or of a string (``comm``, ``str(E)``) with a string literal (``==``/``!=``);
:func:`parse_filters` also takes several joined with ``&&``.
"""
from __future__ import annotations

from ..lang import ast as A
from ..lang.errors import LangError
from ..lang.lexer import parse_int
from ..lang.parser import parse_expression
from .expr import FUNC, INT, MAX_DEPTH, PROBE, STACK, STR, Expr, ExprError, Filter
from .expr import _q as quoted

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, TypeVar

    T = TypeVar("T")

__all__ = ["parse_expr", "parse_filter", "parse_filters"]

_ARITH = frozenset({"+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"})
_COMMUTE = frozenset({"+", "*", "&", "|", "^"})
_CMPS = frozenset({"==", "!=", "<", "<=", ">", ">="})
#: comparisons and logic between constants (folded to 0 or 1)
_TESTS = _CMPS | {"&&", "||"}
_SWAPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_MASK = (1 << 64) - 1
_INTS = ("retval", "latency", "pid", "tid", "uid", "gid", "cpu", "nsecs", "elapsed")
_KNOWN = ("arg0..argN, args.NAME, str(E[, N]), comm, ustack, probe, func, "
          + ", ".join(_INTS))
#: unsigned casts, as a mask (``uint64``: none)
_UNSIGNED = {"uint8": 0xff, "uint16": 0xffff, "uint32": 0xffffffff, "uint64": None}


def _check_bounds(text: str) -> None:
    """Refuse a number longer than 64 bits can be, and parentheses nested
    more than :data:`~pyebpf.trace.expr.MAX_DEPTH` deep (before the parser,
    which would only work hard on them); string literals are skipped."""
    depth = deepest = 0
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':                       # a string literal, to its closing quote
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif ch.isdigit() and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            if j - i > 24:
                raise ExprError(f"{quoted(text)}: the number {text[i:i + 24]}... is too long "
                                f"({j - i} digits; 64 bits take at most 20)")
            i = j - 1
        else:
            depth += (ch == "(") - (ch == ")")
            deepest = max(deepest, depth)
        i += 1
    if deepest > MAX_DEPTH:
        raise ExprError(f"{quoted(text)}: parentheses nest more than {MAX_DEPTH} levels deep")


def _string_starts(text: str) -> list[int]:
    """The offsets of the string literals' opening quotes in ``text``."""
    out = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == '"':
            out.append(i)
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        i += 1
    return out


def _tree(text: object, what: str) -> A.Expr:
    """The language's tree for ``text``; its syntax errors as :class:`ExprError`."""
    if not isinstance(text, str):
        raise ExprError(f"{what} is a string, not {quoted(text)}")
    if not text.strip():
        raise ExprError(f"empty {what}")
    _check_bounds(text)
    try:
        return parse_expression(text, "expr")
    except LangError as e:
        col = None
        if e.pos is not None:           # (bpftrace's column on its line: over the whole text)
            col = sum(len(x) + 1 for x in text.split("\n")[:e.pos.line - 1]) + e.pos.column
        raise _error(text, e.message, col) from None
    except RecursionError:          # (a chain too long for the recursive parser)
        raise ExprError(f"{quoted(text)}: the expression is too long or too deeply "
                        "nested") from None


def _error(text: str, message: str, column: int | None) -> ExprError:
    """An :class:`ExprError` quoting ``text``; ``column`` (1-based) is kept
    as the error's ``column`` attribute too."""
    where = f" (column {column})" if column is not None else ""
    err = ExprError(f"{quoted(text)}: {message}{where}")
    err.column = column
    return err


class _Reader:
    """Turns one parsed tree of ``text`` into trace's values."""

    def __init__(self, text: str, strlen: int) -> None:
        self.text = text
        self.strlen = strlen
        self.starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    # -- positions ---------------------------------------------------------
    # (The language's positions are bpftrace's: a token's span starts where
    # the last blank ended, so ``arg0+1``'s ``1`` "starts" at column 1; the
    # ends are exact.  The starts are found here from the ends and the text.)
    def _end(self, n: A.Node) -> int:
        """The offset just past ``n``'s own position."""
        line = min(n.pos.end_line or n.pos.line, len(self.starts))
        return self.starts[line - 1] + (n.pos.end or n.pos.column + 1) - 1

    def _back(self, i: int, skip: str) -> int:
        """The offset before ``i`` once blanks and ``skip`` characters are passed."""
        while i > 0 and (self.text[i - 1].isspace() or self.text[i - 1] in skip):
            i -= 1
        return i

    def _word_start(self, end: int) -> int:
        i = end
        while i > 0 and (self.text[i - 1].isalnum() or self.text[i - 1] == "_"):
            i -= 1
        return i

    def start(self, n: A.Expr) -> int:
        """The offset of ``n``'s first character (without parentheses around it)."""
        t = self.text
        if isinstance(n, A.Integer):
            i = self._word_start(self._end(n))
            j = self._back(i, "")
            return j - 1 if self._negative(n) and j > 0 and t[j - 1] == "-" else i
        if isinstance(n, (A.Builtin, A.Identifier, A.Variable)) or (
                isinstance(n, A.Map) and not n.keys):
            return self._word_start(self._end(n)) - (not isinstance(n, (A.Builtin, A.Identifier)))
        if isinstance(n, A.String):
            end = self._end(n)
            return max((i for i in _string_starts(t) if i < end), default=end - 1)
        if isinstance(n, A.Call) and n.args:
            return self._word_start(self._back(self.start(n.args[0]), "("))
        if isinstance(n, A.Cast):
            close = self._back(self.start(n.expr), "(")
            return t.rindex("(", 0, max(close - 1, 0)) if "(" in t[:close] else close
        if isinstance(n, A.Unop) and not n.postfix:
            return self._back(self.start(n.operand), "(") - len(n.op)
        if isinstance(n, (A.Binop, A.FieldAccess, A.ArrayAccess)):
            first = n.left if isinstance(n, A.Binop) else n.expr
            return self.start(first)
        if isinstance(n, A.Ternary):
            return self.start(n.cond)
        return self.starts[min(n.pos.line, len(self.starts)) - 1] + n.pos.column - 1

    def stop(self, n: A.Expr) -> int:
        """The offset just past ``n``'s last character."""
        hi = self._end(n)
        for value in vars(n).values():
            for sub in value if isinstance(value, list) else [value]:
                if isinstance(sub, A.Expr):
                    hi = max(hi, self.stop(sub))
        if isinstance(n, A.FieldAccess) and not n.arrow:    # (its position is the '.')
            hi = max(hi, self.text.index(n.field, hi) + len(n.field))
        return hi

    def column(self, n: A.Expr) -> int:
        """The 1-based column an error about ``n`` points at (a binary
        operation: its operator)."""
        if isinstance(n, A.Binop):
            return self._end(n) - len(n.op) + 1
        return self.start(n) + 1

    def fail(self, message: str, n: A.Expr) -> ExprError:
        """An error about node ``n``."""
        return _error(self.text, message, self.column(n))

    def source(self, n: A.Expr) -> str:
        """The text of ``n`` as written: its span widened over the
        parentheses it opens or closes, without parentheses around it all."""
        lo, hi = self.start(n), self.stop(n)
        t = self.text
        depth = low = 0
        for ch in t[lo:hi]:
            depth += (ch == "(") - (ch == ")")
            low = min(low, depth)
        for _ in range(-low):               # a ')' inside: take its '(' before
            lo = t.rindex("(", 0, lo)
        for _ in range(depth - low):        # a '(' inside: take its ')' after
            hi = t.index(")", hi) + 1
        s = t[lo:hi].strip()
        while s.startswith("(") and s.endswith(")") and _wraps(s):
            s = s[1:-1].strip()
        return s

    # -- values ------------------------------------------------------------
    #: the method that reads each kind of node as a value (one made of
    #: constants only is folded first)
    _VALUES = {
        A.Integer: "integer", A.Builtin: "name", A.Identifier: "name", A.FieldAccess: "field",
        A.Call: "call", A.Binop: "binop", A.Unop: "unop", A.Cast: "cast"}

    def value(self, n: A.Expr) -> Expr:
        """``n`` as trace's :class:`Expr`."""
        if isinstance(n, (A.Binop, A.Unop, A.Cast)):
            folded = self.constant(n)        # (made of constants: its value, as the language's)
            if folded is not None:
                return Expr(self.source(n), INT, "const", folded)
        method = self._VALUES.get(type(n))
        if method is None:
            raise self.unsupported(n)
        return getattr(self, method)(n)  # type: ignore[no-any-return]

    def unsupported(self, n: A.Expr) -> ExprError:
        """The error about a node trace's expressions cannot hold."""
        return self.fail(f"{_what(n)} is not supported in trace's expressions; they are made "
                         f"of {_KNOWN} and integer constants", n)

    def integer(self, n: A.Integer) -> Expr:
        """An integer literal: a constant."""
        return Expr(self.source(n), INT, "const", self.literal(n))

    def field(self, n: A.FieldAccess) -> Expr:
        """``args.NAME``: a tracepoint's field."""
        if not (isinstance(n.expr, A.Builtin) and n.expr.name == "args"):
            raise self.fail("a field is read from args only (args.NAME)", n)
        return Expr(f"args.{n.field}", INT, "field", n.field)

    def call(self, n: A.Call) -> Expr:
        """``str(E[, N])``, the one function."""
        if n.name != "str":
            raise self.unsupported(n)
        return self.string(n)

    def _magnitude(self, n: A.Integer) -> int:
        """The number as written, without its sign."""
        end = self._end(n)
        return parse_int(self.text[self._word_start(end):end])

    def _negative(self, n: A.Integer) -> bool:
        """Whether the literal was written with a ``-`` (the tree keeps
        int64 values: ``-1`` and ``0xffffffffffffffff`` are both -1)."""
        mag = self._magnitude(n)
        return n.value == _signed(-mag) and (n.value != _signed(mag) or (
            mag != 0 and self.text[self._back(self._word_start(self._end(n)), "") - 1] == "-"))

    def literal(self, n: A.Integer) -> int:
        """An integer literal's value: unsigned as written (``0xff..ff`` is
        2**64 - 1), negative when written with a ``-`` (within int64)."""
        mag = self._magnitude(n)
        if not self._negative(n):
            return mag
        if mag > 1 << 63:
            raise self.fail(f"-{mag} does not fit in signed 64 bits", n)
        return -mag

    def name(self, n: A.Builtin | A.Identifier) -> Expr:
        v = n.name
        if v.startswith("arg") and v[3:].isdigit():
            if len(v) > 7:
                raise self.fail(f"argument number {v[3:20]}... is too large", n)
            return Expr(v, INT, "arg", int(v[3:]))
        if v in _INTS:
            return Expr(v, INT, v)
        if v == "comm":
            return Expr(v, STR, "comm", None, (), 16)
        if v == "ustack":
            return Expr(v, STACK, "ustack")
        if v in ("probe", "func"):
            return Expr(v, PROBE if v == "probe" else FUNC, v)
        if v == "args":
            raise self.fail("a tracepoint field is args.NAME", n)
        raise self.fail(f"unknown name {v!r}; known: {_KNOWN}", n)

    def string(self, n: A.Call) -> Expr:
        if not 1 <= len(n.args) <= 2:
            raise self.fail("str() takes an address and optionally a length", n)
        inner = self.value(n.args[0])
        if inner.kind != INT:
            raise self.fail("str() takes an address (an integer expression)", n.args[0])
        size, length = self.strlen, None
        if len(n.args) == 2:
            length = self.constant(n.args[1])
            if length is None or not 1 <= length <= 256:
                raise self.fail("the length of str() is 1..256 bytes (a constant)", n.args[1])
            size = length + 1          # N characters, as bpftrace's str(E, N), and the NUL
        text = f"str({inner.text}" + (f", {length})" if length is not None else ")")
        return Expr(text, STR, "str", inner, (), size)

    def then(self, n: A.Expr, base: Expr, *ops: tuple[str, int]) -> Expr:
        """``base`` followed by ``ops``; ``n`` is the whole expression."""
        if base.kind != INT:
            raise self.fail(f"arithmetic on {base.text} ({base.kind}) makes no sense", n)
        return Expr(self.source(n), base.kind, base.atom, base.arg, base.ops + ops, base.size)

    def binop(self, n: A.Binop) -> Expr:
        if n.op in _CMPS or n.op in ("&&", "||"):
            raise self.fail(f"{n.op!r} makes a condition, not a value (a filter compares: "
                            "'arg0 > 100')", n)
        right = self.constant(n.right)
        if right == 0 and n.op in ("/", "%"):
            raise self.fail("division by zero", n)
        if right is not None:
            return self.then(n, self.value(n.left), (n.op, right))
        left = self.constant(n.left)
        if left is not None and n.op in _COMMUTE:
            return self.then(n, self.value(n.right), (n.op, left))
        self.value(n.left)                  # (what cannot be a value at all, said first)
        self.value(n.right)
        raise self.fail(f"{n.op!r} takes an integer constant on one side; operations between "
                        "two expressions are not supported", n)

    def unop(self, n: A.Unop) -> Expr:
        if n.op == "~":
            return self.then(n, self.value(n.operand), ("^", -1))
        if n.op == "-":                     # two's complement: -x == ~x + 1
            return self.then(n, self.value(n.operand), ("^", -1), ("+", 1))
        if n.op == "!":
            raise self.fail("'!' makes a condition, not a value", n)
        raise self.fail(f"{_what(n)} is not supported in trace's expressions", n)

    def cast(self, n: A.Cast) -> Expr:
        if n.typename not in _UNSIGNED:
            raise self.fail(f"trace's expressions are unsigned 64-bit: the cast to "
                            f"{n.typename} is not supported (uint8/16/32/64 are)", n)
        inner = self.value(n.expr)
        mask = _UNSIGNED[n.typename]
        return self.then(n, inner) if mask is None else self.then(n, inner, ("&", mask))

    # -- constants ---------------------------------------------------------
    def constant(self, n: A.Expr) -> int | None:
        """The value of ``n`` when it is made of integer constants only (the
        operations folded as the language reads them), else None.  A fold
        whose result would depend on signedness is refused."""
        if isinstance(n, A.Integer):
            return self.literal(n)
        if isinstance(n, A.Unop) and n.op in ("-", "~"):
            v = self.constant(n.operand)
            if v is None:
                return None
            return _signed(-v if n.op == "-" else ~v)
        if isinstance(n, A.Cast) and n.typename in _UNSIGNED:
            v = self.constant(n.expr)
            mask = _UNSIGNED[n.typename]
            return v if v is None or mask is None else v & mask
        if isinstance(n, A.Unop) and n.op == "!":
            v = self.constant(n.operand)
            return None if v is None else int(v == 0)
        if isinstance(n, A.Binop) and (n.op in _ARITH or n.op in _TESTS):
            a, b = self.constant(n.left), self.constant(n.right)
            if a is None or b is None:
                return None
            if n.op in _TESTS:              # (the language's literals are int64)
                return int(_test(n.op, _signed(a), _signed(b)))
            return self.fold(n, a, b)
        return None

    def fold(self, n: A.Binop, a: int, b: int) -> int:
        op = n.op
        if op in ("/", "%", ">>") and (a < 0 or b < 0):
            raise self.fail(f"{self.source(n)} depends on signedness (negative operands of "
                            f"{op!r}); write its value", n)
        if op in ("/", "%") and b == 0:
            raise self.fail(f"{self.source(n)}: division by zero", n)
        a, b = a & _MASK, b & _MASK
        value = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                 "/": lambda: a // b, "%": lambda: a % b, "&": lambda: a & b,
                 "|": lambda: a | b, "^": lambda: a ^ b,
                 "<<": lambda: a << (b & 63), ">>": lambda: a >> (b & 63)}[op]()
        return _signed(value)

    # -- filters -----------------------------------------------------------
    def conditions(self, n: A.Expr) -> list[Filter]:
        """The comparisons of ``n`` (``a && b``: both; ``E``: ``E != 0``,
        ``!E``: ``E == 0``, as the language reads a condition)."""
        if isinstance(n, A.Binop) and n.op == "&&":
            return self.conditions(n.left) + self.conditions(n.right)
        if isinstance(n, A.Binop) and n.op in _CMPS:
            return [self.compare(n)]
        if isinstance(n, (A.Binop, A.Unop)) and n.op in ("||", "!") and \
                self.constant(n) is None:
            if n.op == "!":
                operand = n.operand if isinstance(n, A.Unop) else n
                return [self.truth(n, self.value(operand), "==")]
            raise self.fail("'||' is not supported in a filter (comparisons joined with && "
                            "are)", n)
        return [self.truth(n, self.value(n), "!=")]

    def truth(self, n: A.Expr, value: Expr, op: str) -> Filter:
        """``value op 0``: a condition without a comparison."""
        if value.kind != INT:
            raise self.fail("a filter is a comparison, e.g. 'arg0 > 100' or "
                            "'comm == \"bash\"' (or an integer, true when not 0)", n)
        return Filter(self.source(n), value, op, Expr("0", INT, "const", 0))

    def compare(self, n: A.Binop) -> Filter:
        """``left OP right``, integers or a string with a literal."""
        left, op, right = n.left, n.op, n.right
        if isinstance(left, A.String) and not isinstance(right, A.String):
            left, op, right = right, _SWAPPED[op], left
        text = self.source(n)
        lhs = self.value(left)
        if isinstance(right, A.String):
            if lhs.kind != STR:
                raise self.fail("a string literal compares with comm or str(...)", right)
            if op not in ("==", "!="):
                raise self.fail("strings compare with == or != only", n)
            lit = right.value.encode("utf-8", "surrogatepass")
            if len(lit) >= lhs.size:
                raise self.fail(f"the literal is longer than {lhs.text} can hold", right)
            return Filter(text, lhs, op, lit)
        rhs = self.value(right)
        if lhs.kind != INT or rhs.kind != INT:
            raise self.fail(f'only integers compare with {op} (strings with a "literal")', n)
        return Filter(text, lhs, op, rhs)


def _wraps(s: str) -> bool:
    """Whether the ``(`` starting ``s`` closes at its last character."""
    depth = 0
    for i, ch in enumerate(s):
        depth += (ch == "(") - (ch == ")")
        if depth == 0:
            return i == len(s) - 1
    return False


def _test(op: str, a: int, b: int) -> bool:
    """``a op b`` for a comparison or ``&&``/``||``."""
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b,
            "&&": bool(a and b), "||": bool(a or b)}[op]


def _signed(value: int) -> int:
    """``value`` as a 64-bit signed number (the language's literals are int64)."""
    value &= _MASK
    return value - (1 << 64) if value >> 63 else value


def _what(n: A.Expr) -> str:
    """How an error names a node the chains cannot hold."""
    words = {A.Map: "a map", A.Variable: "a variable", A.Ternary: "a ternary (?:)",
             A.String: "a string literal", A.Tuple: "a tuple", A.ArrayAccess: "indexing",
             A.Sizeof: "sizeof", A.PositionalParameter: "a positional parameter"}
    if isinstance(n, A.Call):
        return f"the function {n.name}()"
    if isinstance(n, A.Unop):
        return f"the operator {n.op!r}"
    return words.get(type(n), type(n).__name__)


def _strlen(strlen: object) -> int:
    if not isinstance(strlen, int) or not 1 <= strlen <= 256:
        raise ExprError(f"string length must be 1..256 bytes, not {strlen}")
    return strlen


def parse_expr(text: str, strlen: int = 64) -> Expr:
    """Parse one expression: the language's syntax, as a chain (see the module docs)."""
    strlen = _strlen(strlen)
    tree = _tree(text, "an expression")
    return _read(text, lambda: _Reader(text, strlen).value(tree))


def parse_filters(text: str, strlen: int = 64) -> list[Filter]:
    """Parse a condition: comparisons, several joined with ``&&``."""
    strlen = _strlen(strlen)
    tree = _tree(text, "a filter")
    return _read(text, lambda: _Reader(text, strlen).conditions(tree))


def _read(text: str, read: Callable[[], T]) -> T:
    """``read()``; a tree too deep to walk is an :class:`ExprError`."""
    try:
        return read()
    except RecursionError:
        raise ExprError(f"{quoted(text)}: the expression is too long or too deeply "
                        "nested") from None


def parse_filter(text: str, strlen: int = 64) -> Filter:
    """Parse one comparison (``EXPR OP EXPR`` or ``STRING ==|!= "literal"``)."""
    found = parse_filters(text, strlen)
    if len(found) > 1:
        raise ExprError(f"{quoted(text)}: one comparison expected ({len(found)} joined with "
                        "&&; Trace.filter() takes them)")
    return found[0]
