"""The flag CLI's questions as bpftrace programs.

``pyebpf trace PROBE --count KEY --filter COND ...`` is a :class:`Question`:
its probes, filters, aggregations and event fields, each expression parsed by
the language's parser.  :meth:`Question.program_text` says it in the
bpftrace language -- the program ``pyebpf trace`` compiles and runs, and
``pyebpf bt -e`` (and bpftrace) would run for it::

    pyebpf trace 'uprobe:./app:work' --count arg0 --filter 'arg1 > 100'
    ->  uprobe:./app:work /arg1 > 100/ { @[arg0] = count(); }

``--show-program`` prints it above the generated eBPF.  The aggregations are
named as they always were (``@`` alone, else ``@count``, ``@hist``...);
``latency`` (and ``retval`` on a ``uprobe:``, and the arguments on a
``uretprobe:``) makes an entry probe that saves the time (and the arguments
the actions read) by thread and a return probe that runs the actions.
``-c`` adds ``pid == cpid`` to the predicates, ``-p N`` ``pid == N``.
"""
from __future__ import annotations

from ..errors import OptionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

    from ..probes.sources import ProbeSpec
    from . import ast as A

__all__ = ["Question", "FlagAggregate", "FlagField", "expr_text", "split_keys", "AGG_KINDS",
           "HELPER_PREFIX"]

#: the aggregation flags, in the order their default names are given
AGG_KINDS = ("count", "sum", "min", "max", "avg", "stats", "hist", "lhist")
#: the maps an entry/return pair keeps between them (never printed)
HELPER_PREFIX = "@__"
_START = "@__start[tid]"
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}
#: bpftrace's default ``str()`` size
DEFAULT_STRLEN = 64


class FlagField:
    """One expression of a flag: ``text`` as the user wrote it (what tables
    and JSON name it by) and its parsed ``node``."""

    def __init__(self, text: str, name: str | None = None) -> None:
        from .parser import parse_expression
        self.text = text.strip()
        self.name = name if name is not None else self.text
        _check_bounds(self.text)
        self.node = parse_expression(self.text, "flag")

    def uses(self, what: str) -> bool:
        """Whether the expression reads ``what`` (``latency``, ``retval``,
        ``args`` (any argN))."""
        return any(_names(n, what) for n in _walk(self.node))

    def args_used(self) -> set[int]:
        """The argument numbers the expression reads (``arg3`` -> 3)."""
        from . import ast as A
        return {int(n.name[3:]) for n in _walk(self.node)
                if isinstance(n, A.Builtin) and _is_arg(n.name)}

    @property
    def is_func(self) -> bool:
        """Whether the expression is ``func`` (run as ``probe``: see :func:`expr_text`)."""
        from . import ast as A
        return isinstance(self.node, A.Builtin) and self.node.name == "func"

    def __repr__(self) -> str:
        return f"FlagField({self.text!r})"


#: how deep a flag's parentheses may nest
MAX_DEPTH = 64


def _check_bounds(text: str) -> None:
    """Refuse what no flag needs and would only make the parser work hard:
    a number longer than 64 bits can be, parentheses nested more than
    :data:`MAX_DEPTH` levels."""
    depth = deepest = run = longest = 0
    for ch in text:
        run = run + 1 if ch.isdigit() else 0
        longest = max(longest, run)
        depth += (ch == "(") - (ch == ")")
        deepest = max(deepest, depth)
    if longest > 24:
        raise OptionError(f"{text[:40]}...: a number is too long ({longest} digits; 64 bits "
                          "take at most 20)")
    if deepest > MAX_DEPTH:
        raise OptionError(f"{text[:40]}...: parentheses nest more than {MAX_DEPTH} levels deep")


def _is_arg(name: str) -> bool:
    return name.startswith("arg") and name[3:].isdigit()


def _names(n: A.Expr, what: str) -> bool:
    from . import ast as A
    if what == "latency":
        return isinstance(n, A.Identifier) and n.name == "latency"
    if what == "args":
        return isinstance(n, A.Builtin) and _is_arg(n.name)
    return isinstance(n, A.Builtin) and n.name == what


def _walk(n: A.Expr) -> Iterable[A.Expr]:
    """``n`` and every expression under it."""
    from . import ast as A
    yield n
    for value in vars(n).values():
        if isinstance(value, list):
            for x in value:
                if isinstance(x, A.Expr):
                    yield from _walk(x)
        elif isinstance(value, A.Expr):
            yield from _walk(value)


def split_keys(text: str) -> list[str]:
    """``a, str(b, 8), "x,y"`` split at its top-level commas."""
    out: list[str] = []
    depth, quote, cur = 0, False, ""
    prev = ""
    for ch in text:
        if quote:
            quote = not (ch == '"' and prev != "\\")
        elif ch == '"':
            quote = True
        elif ch == "," and depth == 0:
            out.append(cur.strip())
            cur, prev = "", ch
            continue
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        cur += ch
        prev = ch
    if cur.strip() or out:
        out.append(cur.strip())
    if any(not k for k in out):
        raise OptionError(f"{text!r}: an empty key between commas")
    return out


class FlagAggregate:
    """One aggregation flag: ``@name[keys] = kind(value)``."""

    def __init__(self, kind: str, value: FlagField | None, keys: Sequence[FlagField],
                 name: str | None = None, linear: tuple[int, int, int] | None = None) -> None:
        self.kind = kind
        self.value = value
        self.keys = tuple(keys)
        self.name = name
        self.linear = linear
        self.impl: Any = None

    @property
    def display(self) -> str:
        """The name as printed: ``@`` then the name (``@`` alone when unnamed)."""
        return "@" + (self.name or "")

    def aggregation(self) -> Any:
        """The :mod:`pyebpf.lang.aggregations` object behind it (set by the run)."""
        if self.impl is None:
            raise OptionError(f"{self.display}: not running yet")
        return self.impl

    def fields(self) -> list[FlagField]:
        """Its expressions: the keys, then the value."""
        return list(self.keys) + ([self.value] if self.value is not None else [])


def _string_literal(raw: str) -> str:
    """A bpftrace string literal holding ``raw``."""
    return '"' + "".join(_ESCAPES.get(c, c) for c in raw) + '"'


def expr_text(e: A.Expr, *, saved: bool = False, strlen: int = DEFAULT_STRLEN) -> str:
    """``e`` in the bpftrace language; ``saved``: at a return probe, where
    the arguments are those the entry saved (``$argN``); ``latency`` is
    ``$latency``; ``str(e)`` gets ``strlen`` when it is not the default;
    ``func`` is written ``probe`` (at a uprobe, the probe's name ends with the
    function's, which the flag CLI prints: a name, even once the process
    is gone)."""
    from . import ast as A

    def sub(x: A.Expr) -> str:
        return expr_text(x, saved=saved, strlen=strlen)

    def operand(x: A.Expr) -> str:      # (parenthesized when it is itself an operation)
        return f"({sub(x)})" if isinstance(x, (A.Binop, A.Ternary)) else sub(x)
    if isinstance(e, A.Integer):
        return str(e.value)
    if isinstance(e, A.String):
        return _string_literal(e.value)
    if isinstance(e, A.Builtin):
        if e.name == "func":
            return "probe"
        return f"${e.name}" if saved and _is_arg(e.name) else e.name
    if isinstance(e, A.Identifier):
        return "$latency" if e.name == "latency" else e.name
    if isinstance(e, A.Variable):
        return e.name if e.name.startswith("$") else "$" + e.name
    if isinstance(e, A.Map):
        keys = ", ".join(sub(k) for k in e.keys)
        return e.name + (f"[{keys}]" if keys else "")
    if isinstance(e, A.Call):
        args = [sub(a) for a in e.args]
        if e.name == "str" and len(args) == 1 and strlen != DEFAULT_STRLEN:
            args.append(str(strlen))
        return f"{e.name}({', '.join(args)})"
    if isinstance(e, A.Binop):
        return f"{operand(e.left)} {e.op} {operand(e.right)}"
    if isinstance(e, A.Unop):
        return operand(e.operand) + e.op if e.postfix else e.op + operand(e.operand)
    if isinstance(e, A.Ternary):
        return f"{operand(e.cond)} ? {operand(e.then)} : {operand(e.else_)}"
    if isinstance(e, A.FieldAccess):
        arrow = e.arrow or (isinstance(e.expr, A.Builtin) and e.expr.name == "args")
        return f"{operand(e.expr)}{'->' if arrow else '.'}{e.field}"
    if isinstance(e, A.ArrayAccess):
        return f"{operand(e.expr)}[{sub(e.index)}]"
    if isinstance(e, A.Cast):
        return f"({e.typename}){operand(e.expr)}"
    if isinstance(e, A.Sizeof):
        return f"sizeof({e.typename if e.expr is None else sub(e.expr)})"
    if isinstance(e, A.Tuple):
        return "(" + ", ".join(sub(x) for x in e.elems) + ")"
    if isinstance(e, A.PositionalParameter):
        return "$#" if e.count else f"${e.index}"
    raise OptionError(f"cannot write a {type(e).__name__} expression in a flag")


class Question:
    """What the flags of ``pyebpf trace`` ask (see the module docs).

    ``specs``: the probes as written; ``pid``: ``-p``; ``cpid``: ``-c``
    (the programs filter on the command's pid); ``strlen``: bytes of
    ``str()``."""

    def __init__(self, probes: Sequence[str], *, filters: Iterable[str] = (),
                 strlen: int = DEFAULT_STRLEN, pid: int | None = None,
                 cpid: bool = False) -> None:
        from ..probes.sources import parse_probe
        from .probes import kernel_probe_refusal
        if not probes:
            raise OptionError("a trace needs at least one probe")
        for p in probes:
            refused = kernel_probe_refusal(p)
            if refused is not None:        # kprobe:..., kfunc:...: why, as bt says it
                raise refused
        self.specs: list[ProbeSpec] = [parse_probe(p) for p in probes]
        self.strlen = strlen
        self.pid = pid
        self.cpid = cpid
        self.filters = [FlagField(f) for f in filters]
        self.aggregates: list[FlagAggregate] = []
        self.event_fields: list[FlagField] | None = None
        self.event_format: str | None = None
        #: the arguments read at a ``uretprobe:`` are the entry's, saved by
        #: thread (False: refused there, as the language refuses them)
        self.return_args = True
        #: (first line, probe spec) of each block of the last program_text()
        self.blocks: list[tuple[int, str]] = []

    # ------------------------------------------------------------ building
    def add(self, kind: str, value: str | None, by: str | None = None,
            linear: tuple[int, int, int] | None = None, name: str | None = None) -> Question:
        """``@[by] = kind(value)``; ``by`` may list several keys (``'comm, arg0'``);
        ``name`` (letters, digits and ``_``): ``@name`` instead of the default
        name :meth:`finish` gives."""
        if kind not in AGG_KINDS:
            raise OptionError(f"no aggregation {kind!r}")
        if value is None and kind != "count":
            raise OptionError(f"{kind}() needs a value to aggregate (an expression such as arg0)")
        if linear is not None:
            from ..draw.buckets import linear_buckets
            linear_buckets(*linear)           # the bucket cap, checked before anything runs
        if name is not None:
            name = name.lstrip("@")
            if name and not name.replace("_", "a").isalnum():
                raise OptionError(f"an aggregation name is letters, digits and _, not {name!r}")
        keys = [FlagField(k) for k in split_keys(by)] if by else []
        val = FlagField(value) if value is not None else None
        self.aggregates.append(FlagAggregate(kind, val, keys, name, linear))
        return self

    def print(self, fmt: str | None, fields: Sequence[str]) -> Question:
        """An event per hit with ``fields`` (``name=EXPR`` names one),
        printed with the C-style ``fmt`` (None: a table)."""
        from ..draw.render import event_format, split_field
        named = []
        for f in fields:
            name, text = split_field(f)
            named.append(FlagField(f) if name is None else FlagField(text, name))
        self.event_format = event_format(fmt, len(named), "--print", OptionError)
        self.event_fields = named
        return self

    def fields(self) -> list[FlagField]:
        """Every expression of the question."""
        out = list(self.filters)
        for a in self.aggregates:
            out += a.fields()
        return out + list(self.event_fields or [])

    def uses(self, what: str) -> bool:
        """Whether an expression reads ``what`` (see :meth:`FlagField.uses`)."""
        return any(f.uses(what) for f in self.fields())

    def finish(self) -> Question:
        """The default action (``--count probe``), the aggregation names
        (``@`` alone, else ``@count``, ``@hist``, ``@count2``...) and the
        checks that need every flag; returns the question."""
        if not self.aggregates and self.event_fields is None:
            self.add("count", None, "probe")
        if len(self.aggregates) == 1 and self.aggregates[0].name is None:
            self.aggregates[0].name = ""
        else:
            used: dict[str, int] = {}
            for a in self.aggregates:
                if a.name is None:
                    used[a.kind] = used.get(a.kind, 0) + 1
                    a.name = a.kind if used[a.kind] == 1 else f"{a.kind}{used[a.kind]}"
        names = [a.name for a in self.aggregates]
        twice = sorted({n for n in names if names.count(n) > 1 and n is not None})
        if twice:
            raise OptionError(f"two aggregations are named @{twice[0]}")
        for spec in self.specs:
            function = spec.kind in ("uprobe", "uretprobe")
            if self.uses("latency") and not function:
                raise OptionError(f"{spec}: latency needs a function probe (uprobe: or "
                                  "uretprobe:), whose entry and return are timed")
            if self.uses("retval") and not function:
                raise OptionError(f"{spec}: a {spec.kind} probe has no return value (retval)")
        return self

    # ------------------------------------------------------------ the program
    def _paired(self, spec: ProbeSpec) -> bool:
        """Whether ``spec`` runs as an entry probe and a return probe."""
        if spec.kind == "uprobe":
            return self.uses("latency") or self.uses("retval")
        if spec.kind == "uretprobe":
            return self.uses("latency") or (self.return_args and self.uses("args"))
        return False

    def _target(self) -> str | None:
        """The predicate that keeps other processes out (-c, -p), or None."""
        if self.cpid:
            return "pid == cpid"
        if self.pid is not None:
            return f"pid == {self.pid}"
        return None

    def _text(self, f: FlagField, saved: bool) -> str:
        return expr_text(f.node, saved=saved, strlen=self.strlen)

    def _condition(self, f: FlagField, saved: bool) -> str:
        """A filter as one operand of the ``&&`` that joins the filters (and
        the pid's test): parenthesized when it is an ``||`` or a ternary."""
        from . import ast as A
        text = self._text(f, saved)
        n = f.node
        if isinstance(n, A.Ternary) or (isinstance(n, A.Binop) and n.op == "||"):
            return f"({text})"
        return text

    def _aggregate(self, a: FlagAggregate, saved: bool) -> str:
        keys = ", ".join(self._text(k, saved) for k in a.keys)
        target = "@" + (a.name or "") + (f"[{keys}]" if keys else "")
        if a.kind == "count":
            call = "count()"
        else:
            assert a.value is not None
            extra = "".join(f", {x}" for x in a.linear or ())
            call = f"{a.kind}({self._text(a.value, saved)}{extra})"
        return f"{target} = {call};"

    def table_widths(self) -> list[int]:
        """The column widths of events printed as a table (``--print``
        without a format), by field: a string up to 16, an integer 7..."""
        out = []
        for f in self.event_fields or []:
            w = _table_width(f, self.strlen)
            out.append(max(len(f.name), w))
        return out

    def table_header(self) -> str | None:
        """The column names of a table (None: no table)."""
        if self.event_fields is None or self.event_format is not None:
            return None
        names = [f.name.upper() for f in self.event_fields]
        widths = self.table_widths()
        return " ".join(f"{n:<{w}}" if i < len(names) - 1 else n
                        for i, (n, w) in enumerate(zip(names, widths))).rstrip() + "\n"

    def _printf(self, saved: bool) -> str:
        fields = self.event_fields or []
        fmt = self.event_format
        if fmt is None:                      # a table: the columns the CLI prints
            widths = self.table_widths()
            cells = [("%-" + str(w) if i < len(fields) - 1 else "%") + _table_conv(f)
                     for i, (f, w) in enumerate(zip(fields, widths))]
            fmt = " ".join(cells) + "\n"
        args = "".join(", " + self._text(f, saved) for f in fields)
        return f"printf({_string_literal(fmt)}{args});"

    def _actions(self, saved: bool) -> list[str]:
        out = [self._aggregate(a, saved) for a in self.aggregates]
        if self.event_fields is not None:
            out.append(self._printf(saved))
        return out

    def _pair(self, spec: ProbeSpec) -> list[tuple[str, str]]:
        """The entry block (saves the time and the arguments) and the return
        block (the filters and actions) of a function probe."""
        args = sorted(set().union(*(f.args_used() for f in self.fields())))
        entry = [f"{_START} = nsecs;"] + [f"@__arg{n}[tid] = arg{n};" for n in args]
        ret = ([f"$latency = nsecs - {_START};"] + [f"$arg{n} = @__arg{n}[tid];" for n in args]
               + [f"delete({_START});"] + [f"delete(@__arg{n}[tid]);" for n in args])
        actions = self._actions(saved=True)
        if self.filters:
            cond = " && ".join(self._condition(f, True) for f in self.filters)
            ret.append(f"if ({cond}) {{")
            ret += ["  " + x for x in actions]
            ret.append("}")
        else:
            ret += actions
        where = f"{spec.target}:{spec.name}"
        target = self._target()
        return [(_block(f"uprobe:{where}", [target] if target else [], entry), str(spec)),
                (_block(f"uretprobe:{where}", [_START], ret), str(spec))]

    def program_text(self, header: bool = True) -> str:
        """The bpftrace program of the question (call :meth:`finish` first).
        ``header``: with the BEGIN probe that prints a table's column names
        (the CLI prints them itself).  Records in :attr:`blocks` where each
        probe's block starts."""
        blocks: list[tuple[str, str]] = []
        head = self.table_header() if header else None
        if head:
            blocks.append((f"BEGIN\n{{\n  printf({_string_literal(head)});\n}}", "BEGIN"))
        direct: list[ProbeSpec] = []
        for spec in self.specs:
            if self._paired(spec):
                blocks += self._pair(spec)
            else:
                direct.append(spec)
        pred = [self._condition(f, False) for f in self.filters]
        target = self._target()
        if target:
            pred.insert(0, target)
        actions = self._actions(saved=False)
        if self.event_fields is not None:    # (one block per probe: events name theirs)
            blocks += [(_block(str(s), pred, actions), str(s)) for s in direct]
        elif direct:
            blocks.append((_block(",\n".join(map(str, direct)), pred, actions), str(direct[0])))
        self.blocks = []
        line = 1
        for text, name in blocks:
            self.blocks.append((line, name))
            line += text.count("\n") + 1
        return "\n".join(text for text, _ in blocks) + "\n"

    def probe_at(self, line: int) -> str:
        """The probe spec of the block that holds ``line`` of the program."""
        name = self.blocks[0][1] if self.blocks else ""
        for first, spec_name in self.blocks:
            if first <= line:
                name = spec_name
        return name


def _block(head: str, predicate: list[str], body: list[str]) -> str:
    pred = f" /{' && '.join(predicate)}/" if predicate else ""
    lines = "".join(f"  {x}\n" for x in body)
    return f"{head}{pred}\n{{\n{lines}}}"


def _kind_of(f: FlagField) -> str:
    """What a field holds, for a table: str, ustack, probe, func or int."""
    from . import ast as A
    n = f.node
    if isinstance(n, A.Call) and n.name == "str":
        return "str"
    if isinstance(n, A.Builtin) and n.name in ("comm", "ustack", "kstack", "pystack", "probe",
                                               "func"):
        return {"comm": "str", "kstack": "ustack", "pystack": "ustack"}.get(n.name, n.name)
    return "int"


def _table_width(f: FlagField, strlen: int) -> int:
    """A table column's width for ``f``: a string up to 16, a number 7..."""
    from . import ast as A
    kind = _kind_of(f)
    if kind == "str":
        n = f.node
        size = strlen if isinstance(n, A.Call) else 16
        if isinstance(n, A.Call) and len(n.args) > 1 and isinstance(n.args[1], A.Integer):
            size = n.args[1].value
        return min(size, 16)
    return {"int": 7, "probe": 24, "func": 16, "ustack": 0}[kind]


def _table_conv(f: FlagField) -> str:
    return "d" if _kind_of(f) == "int" else "s"
