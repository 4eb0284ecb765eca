"""The parser of the bpftrace language: tokens -> :class:`~pyebpf.lang.ast.Script`.

Why hand-written recursive descent (with precedence climbing over a table
of C's binary levels): it imports nothing beyond the lexer and the tree (no
grammar to load or tables to build at start-up, which every ``pyebpf bt``
run pays: importing it costs about 1.5 ms), a 100-line script parses in
about 2.5 ms, and it reproduces exactly what bpftrace 0.17 (a bison LALR
parser) reports — where each node's position is, and the wording of a
syntax error, ``syntax error, unexpected X, expecting Y`` — by knowing, at
each point, what bison's state would expect there. A parsing library would
bring its own messages and positions, and its import or table building.

Positions follow bpftrace's (see :mod:`~pyebpf.lang.lexer` for a token's
span): a binary operation sits at its operator, an assignment at its ``=``,
a call, map, ternary or tuple spans from its first token to its last, a
cast from ``(`` to ``)``, an array index from ``[`` to ``]``, ``unroll``
from the keyword to ``)``; an attach point starts where the token before it
ended (bison's empty rule), while the probe is at its first token. The
semantic pass combines them as bpftrace does.

The grammar is bpftrace 0.17's: a script is optional ``#include`` lines then
probes; a probe is attach points (``,``-separated), an optional
``/predicate/`` and a block; statements are separated by ``;``, which the
last one and ``if``/``unroll``/``while`` blocks do not need (and a ``;`` after
a block is an error, as in bpftrace). ``-5`` is the literal ``-5``; ``(x)``
with a bare name ``x`` is always a cast; ``a.0`` is a tuple's element
(a :class:`~pyebpf.lang.ast.FieldAccess` whose field is ``"0"``);
``sizeof(T)`` is a :class:`~pyebpf.lang.ast.Sizeof`.
"""
from __future__ import annotations

from . import ast
from .errors import Diagnostic, LangError
from .lexer import Token, tokenize
from .types import INT_NAMES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Sequence

__all__ = ["parse", "parse_expression", "PROVIDERS", "split_attach_point", "expand_params"]

#: attach point providers: short form -> full name (bpftrace 0.17's table;
#: ``rt``/``rawtracepoint`` as later bpftrace spells them)
PROVIDERS = {
    "k": "kprobe", "kr": "kretprobe", "u": "uprobe", "ur": "uretprobe", "U": "usdt",
    "t": "tracepoint", "p": "profile", "i": "interval", "s": "software", "h": "hardware",
    "w": "watchpoint", "aw": "asyncwatchpoint", "f": "kfunc", "fr": "kretfunc",
    "it": "iter", "rt": "rawtracepoint",
}
_FULL_NAMES = frozenset(PROVIDERS.values()) | {"BEGIN", "END"}

# binary precedence levels, loosest first (C's)
_LEVELS = (("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="),
           ("<=", ">=", "<", ">"), ("<<", ">>"), ("+", "-"), ("*", "/", "%"))
#: binary operator -> its level (0 the loosest)
_PREC = {op: level for level, ops in enumerate(_LEVELS) for op in ops}
_COMPOUND = {"<<=": "<<", ">>=": ">>", "+=": "+", "-=": "-", "*=": "*", "/=": "/",
             "%=": "%", "&=": "&", "|=": "|", "^=": "^"}
_IDENT_KINDS = frozenset({"identifier", "builtin", "call", "call_builtin", "stack_mode"})
_AP_KINDS = _IDENT_KINDS | {"string", "path", "integer", ":", ".", "+", "*", "[", "]",
                            "positional parameter", "$#"}
_EXPR_START = _IDENT_KINDS | {"integer", "string", "(", "positional parameter", "$#", "map",
                              "variable", "-", "!", "~", "*", "++", "--"}
_JUMPS = frozenset({"return", "break", "continue"})

#: a span: (line, column, end_line, end_column)
Span = tuple[int, int, int, int]


def _join(a: Span, b: Span) -> Span:
    return (a[0], a[1], b[2], b[3])


def _pos(s: Span) -> ast.Pos:
    if s[2] == s[0]:
        return ast.Pos(s[0], s[1], s[3])
    return ast.Pos(s[0], s[1], s[1] + 1, s[2])


def _tspan(t: Token) -> Span:
    return (t.line, t.col, t.end_line, t.end_col)


def _shown(kind: str) -> str:
    """How bison names a token in a message (``","`` keeps its quotes)."""
    return '","' if kind == "," else kind


class _Syntax(Exception):
    """Internal: the first syntax error (bpftrace stops there)."""

    def __init__(self, message: str, span: Span) -> None:
        super().__init__(message)
        self.message = message
        self.span = span


class Parser:
    """One parse of one script; :func:`parse` is the entry point."""

    def __init__(self, text: str, filename: str = "stdin", params: Sequence[str] = (),
                 includes: Sequence[str] = (), include_dirs: Sequence[str] = ()) -> None:
        self.text = text
        #: ``--include`` headers (before the program) and ``-I`` directories
        self.pre_includes = tuple(includes)
        self.include_dirs = tuple(include_dirs)
        self.filename = filename
        self.params = tuple(params)
        self.toks, self.lex_errors = tokenize(text, filename)
        self.k = 0
        self.errors: list[Diagnostic] = []
        self.c_definitions: list[ast.CDefinition] = []
        self.includes: list[str] = []
        self.macros: dict[str, str] = {}

    def _directive(self, t: Token) -> None:
        """``#define NAME BODY``: the later ``NAME`` s become ``BODY``'s
        tokens; ``#include <h>``: the header's numeric macros too
        (:mod:`~pyebpf.lang.preprocess`); other directives are ignored."""
        from .preprocess import directive
        what, name, body = directive(str(t.value))
        if what == "define":
            self._expand({name: body})
        elif what == "include":
            self.includes.append(name)
            self._include(name)

    def _include(self, name: str) -> None:
        """Header ``name``'s numeric macros expanded in the tokens after this
        point: an ``#include`` line's, or an ``--include`` 's (before the
        program, as bpftrace puts them)."""
        from .preprocess import HeaderNotFound, header_macros
        try:
            self._expand(header_macros(name, self.include_dirs))
        except HeaderNotFound:     # (compile() refuses it, with the -I
            pass                   # directories: includes.find_headers)

    def _expand(self, macros: dict[str, str]) -> None:
        """Replace every later identifier named in ``macros`` by its body's
        tokens, placed where the name was (bodies naming macros expanded
        too, a few levels deep)."""
        if not macros:
            return
        self.macros.update(macros)
        macros = self.macros
        for _ in range(8):
            out = self.toks[:self.k]
            changed = False
            for tok in self.toks[self.k:]:
                body = macros.get(tok.value) if tok.kind == "identifier" else None
                if body is None:
                    out.append(tok)
                    continue
                changed = True
                new, _ = tokenize(body, self.filename)
                out.extend(Token(n.kind, n.value, tok.line, tok.col, tok.end_line, tok.end_col)
                           for n in new if n.kind != "end of file")
            self.toks = out
            if not changed:
                return

    # -- tokens ----------------------------------------------------------
    @property
    def tok(self) -> Token:
        """The next token (bison's lookahead)."""
        return self.toks[self.k]

    def _peek(self, n: int = 1) -> Token:
        return self.toks[min(self.k + n, len(self.toks) - 1)]

    def _take(self) -> Token:
        t = self.toks[self.k]
        if self.k < len(self.toks) - 1:
            self.k += 1
        return t

    def _unexpected(self, *expected: str) -> _Syntax:
        t = self.tok
        msg = f"syntax error, unexpected {_shown(t.kind)}"
        if expected:
            msg += ", expecting " + " or ".join(_shown(e) for e in expected)
        return _Syntax(msg, _tspan(t))

    def _expect(self, kind: str, *expected: str) -> Token:
        if self.tok.kind != kind:
            raise self._unexpected(*(expected or (kind,)))
        return self._take()

    def _error(self, message: str, span: Span) -> None:
        self.errors.append(self._diag(message, span))

    def _diag(self, message: str, span: Span) -> Diagnostic:
        p = _pos(span)
        return Diagnostic(message, p, end_line=p.end_line, filename=self.filename,
                          source=self.text)

    # -- the script ------------------------------------------------------
    def script(self) -> ast.Script:
        """Parse the whole script (raises LangError)."""
        try:
            try:
                probes = self._program()
            except RecursionError:      # (a recursive-descent parser: the token it was at)
                raise _Syntax(TOO_DEEP, _tspan(self.tok)) from None
        except _Syntax as e:
            end = (e.span[2], e.span[3])
            lex = [d for d in self.lex_errors if _where(d) < end]
            raise LangError.collected(lex + self.errors + [self._diag(e.message, e.span)]) \
                from None
        problems = sorted(self.lex_errors + self.errors,
                          key=_where)
        if problems:
            raise LangError.collected(problems)
        return ast.Script(ast.Pos(1, 1, 2), probes, source=self.text, filename=self.filename,
                          c_definitions=self.c_definitions, includes=self.includes)

    def _program(self) -> list[ast.Probe]:
        for name in self.pre_includes:
            self._include(name)
        while self.tok.kind in ("preprocessor directive", "struct definition"):
            t = self._take()
            if t.kind == "struct definition":
                self.c_definitions.append(ast.CDefinition(t.pos, str(t.value)))
            else:
                self._directive(t)
        probes = [self._probe()]
        while self.tok.kind != "end of file":
            probes.append(self._probe())
        return probes

    def _probe(self) -> ast.Probe:
        first = self.tok
        aps = [self._attach_point()]
        while self.tok.kind == ",":
            self._take()
            aps.append(self._attach_point())
        if self.tok.kind == "end of file":
            raise _Syntax("unexpected end of file, expected {",
                          (aps[0].pos.line, aps[0].pos.column, self.tok.end_line,
                           self.tok.end_col))
        empty = aps[0].pos
        aps = [ap for ap in aps if ap.raw]
        if not aps:
            self._error("No attach points for probe",
                        (empty.line, empty.column, empty.line, empty.column))
            aps = [ast.AttachPoint(empty, "", "")]
        pred = pred_pos = None
        if self.tok.kind == "/":
            slash = self._take()
            pred, _ = self._expr()
            end = self._expect("end predicate")
            pred_pos = _pos(_join(_tspan(slash), _tspan(end)))
        block = self._block()
        # the probe is where its text starts (its attach points' positions
        # are bpftrace's, which start where the previous token ended)
        return ast.Probe(first.pos, aps, pred, block, pred_pos)

    def _attach_point(self) -> ast.AttachPoint:
        # bison places the (left-recursive, possibly empty) attach point at
        # the end of the token before it: its span starts there
        before = self.toks[self.k - 1] if self.k else None
        start = Token("", None, before.end_line, before.end_col, before.end_line,
                      before.end_col) if before else Token("", None, 1, 1, 1, 1)
        prev = None
        raw: list[str] = []
        while self.tok.kind in _AP_KINDS:
            t = self._take()
            prev = t
            if t.kind == "string":
                raw.append('"' + str(t.value).replace('"', '\\"') + '"')
            elif t.kind == "integer":
                raw.append(str(t.value))
            elif t.kind == "$#":
                raise _Syntax("Not a positional parameter", _join(_tspan(start), _tspan(t)))
            elif t.kind in _IDENT_KINDS or t.kind in ("path", "positional parameter"):
                raw.append(str(t.value))
            else:
                raw.append(t.kind)
        if prev is None:    # an empty attach point: bpftrace drops it
            if self.tok.kind not in ("{", "/", ",", "end of file"):
                raise self._unexpected("{")
            return ast.AttachPoint(_pos(_tspan(start)), "", "")
        else:
            span = _join(_tspan(start), _tspan(prev))
        text = "".join(raw)
        if "$" in text:
            try:
                text = expand_params(text, self.params)
            except LangError as exc:
                self._error(exc.message, span)
                if exc.message.startswith("Found trailing"):   # (bpftrace drops it)
                    return ast.AttachPoint(_pos(span), "", "")
                return ast.AttachPoint(_pos(span), text, text)
        ap = split_attach_point(text, _pos(span))
        if isinstance(ap, str):
            if not self._lexer_erred_in(span):     # (a number the lexer refused is
                self._error(ap, span)             # not also an invalid offset)
            return ast.AttachPoint(_pos(span), text, text)
        return ap

    def _lexer_erred_in(self, span: Span) -> bool:
        """Whether the lexer reported an error inside ``span`` (the token it
        refused is missing from the text built from the tokens)."""
        return any(span[:2] <= _where(d) <= span[2:] for d in self.lex_errors)

    # -- statements ------------------------------------------------------
    def _block(self) -> ast.Block:
        lb = self._expect("{")
        stmts = self._stmt_list()
        rb = self._expect("}")
        return ast.Block(_pos(_join(_tspan(lb), _tspan(rb))), stmts)

    def _stmt_list(self) -> list[ast.Stmt]:
        stmts: list[ast.Stmt] = []
        while True:
            kind = self.tok.kind
            if kind == "}":
                return stmts
            if kind in ("if", "unroll", "while"):
                stmts.append(self._if() if kind == "if" else self._loop())
                continue
            if kind not in _EXPR_START and kind not in _JUMPS:
                raise self._unexpected("}")
            stmts.append(self._expr_stmt())
            if self.tok.kind == ";":
                self._take()
            elif self.tok.kind != "}":
                raise self._unexpected("}")

    def _expr_stmt(self) -> ast.Stmt:
        if self.tok.kind in _JUMPS:
            t = self._take()
            return ast.Jump(t.pos, t.kind)
        expr, span = self._expr()
        kind = self.tok.kind
        if kind == "=" or kind in _COMPOUND:
            if isinstance(expr, ast.FieldAccess) and expr.field.isdigit() and kind == "=":
                self._take()
                _, rspan = self._expr()
                raise _Syntax("Tuples are immutable once created. Consider creating a new "
                              "tuple and assigning it instead.", _join(span, rspan))
            if isinstance(expr, (ast.Map, ast.Variable)):
                op_tok = self._take()
                value, vspan = self._expr()
                op = _COMPOUND.get(kind)
                where = op_tok.pos if op is None else _pos(_join(span, vspan))
                if isinstance(expr, ast.Map):
                    return ast.AssignMap(where, expr, value, op)
                return ast.AssignVar(where, expr, value, op)
        return ast.ExprStmt(expr.pos, expr)

    def _if(self) -> ast.If:
        t = self._take()
        self._expect("(")
        cond, _ = self._expr()
        self._expect(")")
        then = self._block()
        else_ = None
        if self.tok.kind == "else":
            self._take()
            if self.tok.kind == "if":
                nested = self._if()
                else_ = ast.Block(nested.pos, [nested])
            elif self.tok.kind == "{":
                else_ = self._block()
            else:
                raise self._unexpected("{", "if")
        return ast.If(t.pos, cond, then, else_)

    def _loop(self) -> ast.Stmt:
        t = self._take()
        self._expect("(")
        if t.kind == "while":
            cond, _ = self._expr()
            self._expect(")")
            return ast.While(t.pos, cond, self._block())
        count = self._unroll_count()
        rp = self._expect(")")
        return ast.Unroll(_pos(_join(_tspan(t), _tspan(rp))), count, self._block())

    def _unroll_count(self) -> ast.Expr:
        expected = ("$#", "-", "positional parameter", "integer")
        kind = self.tok.kind
        if kind == "-" and self._peek().kind == "integer":
            m = self._take()
            i = self._take()
            return ast.Integer(_pos(_join(_tspan(m), _tspan(i))), _int64(-int(i.value)))
        if kind == "integer":
            i = self._take()
            return ast.Integer(i.pos, _int64(int(i.value)))
        if kind in ("positional parameter", "$#"):
            return self._param()
        if kind == "-":
            self._take()
            raise self._unexpected("integer")
        raise self._unexpected(*expected)

    # -- expressions -----------------------------------------------------
    def _expr(self) -> tuple[ast.Expr, Span]:
        """``conditional_expr``: the node and its whole span."""
        cond, cspan = self._binary(0)
        if self.tok.kind != "?":
            return cond, cspan
        self._take()
        then, _ = self._expr()
        self._expect(":")
        else_, espan = self._expr()
        span = _join(cspan, espan)
        return ast.Ternary(_pos(span), cond, then, else_), span

    def _binary(self, min_prec: int) -> tuple[ast.Expr, Span]:
        """Precedence climbing over C's binary levels (all left-associative):
        operators binding at least as tight as ``min_prec``."""
        left, lspan = self._cast()
        while True:
            prec = _PREC.get(self.tok.kind, -1)
            if prec < min_prec:
                return left, lspan
            op = self._take()
            right, rspan = self._binary(prec + 1)
            lspan = _join(lspan, rspan)
            left = ast.Binop(op.pos, op.kind, left, right)

    def _cast(self) -> tuple[ast.Expr, Span]:
        if self.tok.kind == "(" and self._peek().kind == "identifier":
            stars = 0
            while self._peek(2 + stars).kind == "*" and stars < 2:
                stars += 1
            if self._peek(2 + stars).kind == ")" or stars:
                lp = self._take()
                name = str(self._take().value)
                for _ in range(stars):
                    self._take()
                rp = self._expect(")")
                inner, ispan = self._cast()
                span = _join(_tspan(lp), _tspan(rp))
                typename = name + (" " + "*" * stars if stars else "")
                return ast.Cast(_pos(span), typename, inner), _join(span, ispan)
        return self._unary()

    def _unary(self) -> tuple[ast.Expr, Span]:
        kind = self.tok.kind
        if kind == "-" and self._peek().kind == "integer":
            return self._postfix()
        if kind in ("*", "~", "!", "-"):
            op = self._take()
            operand, ospan = self._cast()
            return ast.Unop(op.pos, kind, operand), _join(_tspan(op), ospan)
        if kind in ("++", "--"):
            op = self._take()
            if self.tok.kind in ("map", "variable"):
                target, tspan = self._primary()
                return ast.Unop(op.pos, kind, target), _join(_tspan(op), tspan)
            if self.tok.kind in _IDENT_KINDS:
                raise _Syntax(f"The {kind} operator must be applied to a map or variable",
                              _tspan(op))
            raise self._unexpected()
        return self._postfix()

    def _postfix(self) -> tuple[ast.Expr, Span]:
        start = self.tok
        expr, span = self._primary()
        if self.tok.kind in ("++", "--"):
            if isinstance(expr, (ast.Map, ast.Variable)):
                op = self._take()
                return ast.Unop(op.pos, op.kind, expr, postfix=True), _join(span,
                                                                             _tspan(op))
            if start.kind in _IDENT_KINDS and isinstance(expr, (ast.Identifier, ast.Builtin)):
                raise _Syntax(f"The {self.tok.kind} operator must be applied to a map or "
                              "variable", _tspan(start))
        while True:
            kind = self.tok.kind
            if kind == ".":
                dot = self._take()
                t = self.tok
                if t.kind == "integer":
                    self._take()
                    expr = ast.FieldAccess(t.pos, expr, str(t.value))
                elif t.kind in _IDENT_KINDS:
                    self._take()
                    expr = ast.FieldAccess(dot.pos, expr, str(t.value))
                else:
                    raise self._unexpected()
                span = _join(span, _tspan(t))
            elif kind == "->":
                self._take()
                t = self.tok
                if t.kind not in _IDENT_KINDS:
                    raise self._unexpected()
                self._take()
                span = _join(span, _tspan(t))
                expr = ast.FieldAccess(_pos(span), expr, str(t.value), arrow=True)
            elif kind == "[":
                lb = self._take()
                index, _ = self._expr()
                rb = self._expect("]")
                expr = ast.ArrayAccess(_pos(_join(_tspan(lb), _tspan(rb))), expr, index)
                span = _join(span, _tspan(rb))
            else:
                return expr, span

    def _param(self) -> ast.PositionalParameter:
        t = self._take()
        if t.kind == "$#":
            return ast.PositionalParameter(t.pos, 0, count=True)
        n = _param_index(str(t.value)[1:])
        if n is None:
            raise _Syntax(_param_range(str(t.value)), _tspan(t))
        return ast.PositionalParameter(t.pos, n)

    def _primary(self) -> tuple[ast.Expr, Span]:  # noqa: C901 - one case per token kind
        t = self.tok
        kind = t.kind
        if kind == "-":
            self._take()
            i = self._take()
            span = _join(_tspan(t), _tspan(i))
            return ast.Integer(_pos(span), _int64(-int(i.value))), span
        if kind == "integer":
            self._take()
            return ast.Integer(t.pos, _int64(int(t.value))), _tspan(t)
        if kind == "string":
            self._take()
            return ast.String(t.pos, str(t.value)), _tspan(t)
        if kind in ("positional parameter", "$#"):
            return self._param(), _tspan(t)
        if kind == "variable":
            self._take()
            return ast.Variable(t.pos, str(t.value)[1:]), _tspan(t)
        if kind == "map":
            return self._map()
        if kind == "(":
            return self._paren()
        if kind in _IDENT_KINDS:
            self._take()
            if self.tok.kind == "(":
                if kind in ("call", "call_builtin"):
                    return self._call(t)
                self._call(t)
                raise _Syntax(f"Unknown function: {t.value}", _tspan(t))
            if kind == "call":
                raise self._unexpected("++", "--")
            if kind in ("builtin", "call_builtin"):
                return ast.Builtin(t.pos, str(t.value)), _tspan(t)
            return ast.Identifier(t.pos, str(t.value)), _tspan(t)
        raise self._unexpected()

    def _map(self) -> tuple[ast.Expr, Span]:
        t = self._take()
        name = str(t.value)[1:]
        if self.tok.kind != "[":
            return ast.Map(t.pos, name), _tspan(t)
        self._take()
        keys = self._vargs("]")
        rb = self._take()
        span = _join(_tspan(t), _tspan(rb))
        return ast.Map(_pos(span), name, keys), span

    def _vargs(self, close: str) -> list[ast.Expr]:
        args = [self._expr()[0]]
        while self.tok.kind == ",":
            self._take()
            args.append(self._expr()[0])
        if self.tok.kind != close:
            raise self._unexpected(close, ",")
        return args

    def _paren(self) -> tuple[ast.Expr, Span]:
        lp = self._take()
        first, _ = self._expr()
        if self.tok.kind == ")":
            rp = self._take()
            return first, _join(_tspan(lp), _tspan(rp))
        if self.tok.kind != ",":
            raise self._unexpected(")", ",")
        self._take()
        rest = self._vargs(")")
        rp = self._take()
        span = _join(_tspan(lp), _tspan(rp))
        return ast.Tuple(_pos(span), [first] + rest), span

    def _call(self, name: Token) -> tuple[ast.Expr, Span]:
        self._take()   # (
        args = [] if self.tok.kind == ")" else self._vargs(")")
        rp = self._take()
        span = _join(_tspan(name), _tspan(rp))
        pos = _pos(span)
        if name.value == "sizeof" and len(args) == 1:
            arg = args[0]
            if isinstance(arg, ast.Identifier) and (
                    arg.name in INT_NAMES or arg.name.startswith(("struct ", "union ", "enum "))):
                return ast.Sizeof(pos, typename=arg.name), span
            return ast.Sizeof(pos, expr=args[0]), span
        return ast.Call(pos, str(name.value), args), span


def _param_index(digits: str) -> int | None:
    """The N of ``$N`` (1 to 2**63 - 1; read without converting a huge
    text), None out of that range."""
    digits = digits.lstrip("0")
    if not digits or len(digits) > 19:
        return None
    n = int(digits)
    return n if n < 1 << 63 else None


def _param_range(name: str) -> str:
    return f"param {name} is out of integer range [1, {2 ** 63 - 1}]"


#: the error for a program nested deeper than pyebpf's passes recurse
TOO_DEEP = "expression nested too deeply for pyebpf (Python's recursion limit)"


def _int64(value: int) -> int:
    """A literal as bpftrace keeps it: a 64-bit signed value (2**64 - 1 is -1)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value


def _where(d: Diagnostic) -> tuple[int, int]:
    return (d.pos.line, d.pos.column) if d.pos else (0, 0)


#: how many fields each provider takes after its name, and bpftrace's words
#: for it (a uprobe's or USDT probe's path may be left out with ``-p PID``)
_FIELDS = {
    "BEGIN": ((0,), "0 arguments"), "END": ((0,), "0 arguments"),
    "kprobe": ((1,), "1 argument"), "kretprobe": ((1,), "1 argument"),
    "uprobe": ((1, 2), "2 arguments"), "uretprobe": ((1, 2), "2 arguments"),
    "usdt": ((1, 2, 3), "2 or 3 arguments"),
    "tracepoint": ((2,), "2 arguments"), "profile": ((2,), "2 arguments"),
    "interval": ((2,), "2 arguments"), "software": ((1, 2), "1 or 2 arguments"),
    "hardware": ((1, 2), "1 or 2 arguments"), "kfunc": ((1, 2), "1 or 2 arguments"),
    "kretfunc": ((1, 2), "1 or 2 arguments"), "rawtracepoint": ((1,), "1 argument"),
}


def split_attach_point(text: str, pos: ast.Pos) -> ast.AttachPoint | str:
    """An :class:`~pyebpf.lang.ast.AttachPoint` from its text (short forms
    expanded, ``sym+off`` split), or the error message (bpftrace's) when the
    provider is unknown, the fields are too many or too few, or the offset
    is not one."""
    head, sep, rest = text.partition(":")
    provider = PROVIDERS.get(head, head)
    if provider not in _FULL_NAMES:
        return f"Invalid probe type: {head!r}"
    parts = _split_fields(rest) if sep else []
    if provider in ("BEGIN", "END") and parts == ["*"]:
        parts = []
    if provider == "tracepoint" and len(parts) == 1 and "*" in parts[0]:
        parts.insert(0, "*")          # tracepoint:sys_enter_* : any category
    counts, words = _FIELDS.get(provider, ((len(parts),), ""))
    if len(parts) not in counts:
        return f"{provider} probe type requires {words}"
    offset = None
    if provider in ("uprobe", "uretprobe", "kprobe", "kretprobe") and "+" in parts[-1]:
        if provider.endswith("retprobe"):
            return "Offset not allowed"
        if parts[-1].count("+") != 1:
            return "Cannot take more than one offset"
        sym, _, off = parts[-1].partition("+")
        try:
            offset = int(off, 0)
        except ValueError:
            return "Invalid offset"
        if not sym:
            return "Invalid offset"
        parts[-1] = sym
    return ast.AttachPoint(pos, text, provider, parts, offset)


def _split_fields(rest: str) -> list[str]:
    """``a:b:c`` -> fields; a backslash escapes the next character and a
    quoted part keeps its colons."""
    out: list[str] = []
    cur: list[str] = []
    quoted = False
    i = 0
    while i < len(rest):
        c = rest[i]
        if c == "\\" and i + 1 < len(rest):
            cur.append(rest[i + 1])
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        elif c == ":" and not quoted:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


def parse(text: str, filename: str = "stdin", params: Sequence[str] = (),
          includes: Sequence[str] = (), include_dirs: Sequence[str] = ()) -> ast.Script:
    """Parse a bpftrace program. Raises :class:`~pyebpf.lang.errors.LangError`
    (bpftrace's text: position, source line, ``~`` marker) on any lexical or
    syntax error; several lexical errors are reported together. ``params``:
    the positional parameters, put in the attach points that name them
    (``i:ms:$1``, ``BEG$1``) before they are split, as bpftrace does.
    ``includes``: headers included before the program (``--include``), their
    numeric macros applied as an ``#include`` line's; ``include_dirs``: the
    ``-I`` directories searched for them first."""
    return Parser(text, filename, params, includes, include_dirs).script()


def expand_params(text: str, params: Sequence[str]) -> str:
    """An attach point's text with each ``$N`` outside quotes replaced by
    parameter N as given (empty when there is none). Raises
    :class:`~pyebpf.lang.errors.LangError` (no position) with bpftrace's
    message when the index has trailing text (``$1x``) or is out of range."""
    out: list[str] = []
    quoted = False
    i = 0
    while i < len(text):
        c = text[i]
        if quoted and c == "\\" and i + 1 < len(text):
            out.append(text[i:i + 2])
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        elif c == "$" and not quoted:
            j = i + 1
            while j < len(text) and text[j] not in '":':
                j += 1
            index = text[i + 1:j]
            digits = len(index) - len(index.lstrip("0123456789"))
            if digits < len(index):
                raise LangError(f"Found trailing text '{index[digits:]}' in positional "
                                 "parameter index. Try quoting the trailing text.")
            n = _param_index(index)
            if n is None:
                raise LangError(_param_range("$" + index))
            out.append(params[n - 1] if 0 < n <= len(params) else "")
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_expression(text: str, filename: str = "stdin") -> ast.Expr:
    """Parse one expression (for front ends such as ``pyebpf trace``'s flags)."""
    p = Parser(text, filename)
    try:
        expr, _ = p._expr()
        if p.tok.kind != "end of file":
            raise p._unexpected("end of file")
    except _Syntax as e:
        raise LangError.collected(p.lex_errors + [p._diag(e.message, e.span)]) from None
    if p.lex_errors or p.errors:
        raise LangError.collected(p.lex_errors + p.errors)
    return expr
