"""The flag CLI's questions as bpftrace programs.

``pyebpf trace PROBE --count KEY --filter COND ...`` builds a
:class:`~pyebpf.trace.recipes.Trace` (a recipe); :func:`program_text` says the
same thing in the bpftrace language, the program ``pyebpf bt -e`` (and
bpftrace) would run for it::

    pyebpf trace 'uprobe:./app:work' --count arg0 --filter 'arg1 > 100'
    ->  uprobe:./app:work /arg1 > 100/ { @[arg0] = count(); }

``--show-program`` prints it above the generated eBPF.  The aggregations keep
the recipe's names (``@`` alone, else ``@count``, ``@hist``...); ``latency``
(and ``retval`` on a ``uprobe:``) becomes an entry probe that saves the time
(and the arguments the actions read) by thread and a return probe that runs
the actions, as the recipe's programs do.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..trace.expr import Expr, Filter
    from ..trace.model import Aggregate
    from ..trace.probes import ProbeSpec
    from ..trace.recipes import Trace

__all__ = ["program_text", "expr_text"]

#: the helper maps of an entry/return pair (``@__`` keeps them apart from the user's)
_START = "@__start[tid]"
#: bpftrace's names of the recipe's atoms that differ from it
_ATOMS = {"latency": "$latency"}
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}


def expr_text(e: Expr, saved: bool = False) -> str:
    """``e`` in the bpftrace language; ``saved``: at a return probe, where the
    arguments are those the entry saved (``$argN``)."""
    a = e.atom
    if a == "const":
        base = str(e.arg)
    elif a == "arg":
        base = f"$arg{e.arg}" if saved else f"arg{e.arg}"
    elif a == "field":
        base = f"args->{e.arg}"
    elif a == "str":
        inner = e.arg
        assert not isinstance(inner, (str, int)) and inner is not None
        length = e.text.rstrip(")").rpartition(",")[2].strip() if e.text.count(",") else ""
        base = f"str({expr_text(inner, saved)}" + (f", {length})" if length else ")")
    else:
        base = _ATOMS.get(a, a)
    for i, (op, value) in enumerate(e.ops):
        # the recipe applies its operations left to right: parenthesize
        base = f"({base}) {op} {value}" if i else f"{base} {op} {value}"
    return base


def _string_literal(raw: bytes | str) -> str:
    """A bpftrace string literal holding ``raw``."""
    text = raw.decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else raw
    return '"' + "".join(_ESCAPES.get(c, c) for c in text) + '"'


def _condition(f: Filter, saved: bool) -> str:
    right = (_string_literal(f.right) if isinstance(f.right, bytes)
             else expr_text(f.right, saved))
    return f"{expr_text(f.left, saved)} {f.op} {right}"


def _aggregate(a: Aggregate, saved: bool) -> str:
    keys = ", ".join(expr_text(k, saved) for k in a.keys)
    target = "@" + (a.name or "") + (f"[{keys}]" if keys else "")
    if a.kind == "count":
        call = "count()"
    elif a.kind == "lhist":
        assert a.value is not None and a.linear is not None
        lo, hi, step = a.linear
        call = f"lhist({expr_text(a.value, saved)}, {lo}, {hi}, {step})"
    else:
        assert a.value is not None
        call = f"{a.kind}({expr_text(a.value, saved)})"
    return f"{target} = {call};"


def _printf(t: Trace, saved: bool) -> str:
    from ..trace.expr import INT
    from ..trace.trace_session import field_widths
    fields = t.event_fields or []
    fmt = t.event_format
    if fmt is None:                      # a table: the columns the recipe prints
        widths = field_widths(fields)
        cells = [("%-" + str(w) if i < len(fields) - 1 else "%") + ("d" if e.kind == INT else "s")
                 for i, ((_, e), w) in enumerate(zip(fields, widths))]
        fmt = " ".join(cells) + "\n"
    args = "".join(", " + expr_text(e, saved) for _, e in fields)
    return f"printf({_string_literal(fmt)}{args});"


def _header(t: Trace) -> str | None:
    """The BEGIN probe that prints a table's column names (None: no table)."""
    from ..trace.trace_session import field_widths
    if t.event_fields is None or t.event_format is not None:
        return None
    names = [n.upper() for n, _ in t.event_fields]
    widths = field_widths(t.event_fields)
    line = " ".join(f"{n:<{w}}" if i < len(names) - 1 else n
                    for i, (n, w) in enumerate(zip(names, widths))).rstrip()
    return f"BEGIN\n{{\n  printf({_string_literal(line + chr(10))});\n}}"


def _actions(t: Trace, saved: bool) -> list[str]:
    out = [_aggregate(a, saved) for a in t.aggregates]
    if t.event_fields is not None:
        out.append(_printf(t, saved))
    return out


def _paired(t: Trace, spec: ProbeSpec) -> bool:
    """Whether ``spec`` runs as an entry probe and a return probe."""
    if spec.kind not in ("uprobe", "uretprobe"):
        return False
    return t.uses("latency") or (spec.kind == "uprobe" and t.uses("retval"))


def _block(head: str, predicate: list[str], body: list[str]) -> str:
    pred = f" /{' && '.join(predicate)}/" if predicate else ""
    lines = "".join(f"  {x}\n" for x in body)
    return f"{head}{pred}\n{{\n{lines}}}"


def _pair(t: Trace, spec: ProbeSpec) -> list[str]:
    """The entry block (saves the time and the arguments) and the return
    block (the filters and actions) of a function probe."""
    args = sorted(set().union(*(e.args_used() for e in t._exprs())))
    entry = [f"{_START} = nsecs;"] + [f"@__arg{n}[tid] = arg{n};" for n in args]
    ret = ([f"$latency = nsecs - {_START};"] + [f"$arg{n} = @__arg{n}[tid];" for n in args]
           + [f"delete({_START});"] + [f"delete(@__arg{n}[tid]);" for n in args])
    actions = _actions(t, saved=True)
    if t.filters:
        cond = " && ".join(_condition(f, True) for f in t.filters)
        ret.append(f"if ({cond}) {{")
        ret += ["  " + x for x in actions]
        ret.append("}")
    else:
        ret += actions
    where = f"{spec.target}:{spec.name}"
    return [_block(f"uprobe:{where}", [], entry),
            _block(f"uretprobe:{where}", [_START], ret)]


def program_text(t: Trace) -> str:
    """The bpftrace program that asks what the recipe ``t`` asks (see the
    module docs). ``t`` gets its default action (``count`` by ``probe``) and
    its aggregations their names, as building it would."""
    if not t.aggregates and t.event_fields is None:
        t.count(by="probe")
    t._names()                   # (the recipe's naming: @, or @count, @hist...)
    blocks = []
    header = _header(t)
    if header:
        blocks.append(header)
    direct = []
    for spec in t.specs:
        if _paired(t, spec):
            blocks += _pair(t, spec)
        else:
            direct.append(str(spec))
    if direct:
        pred = [_condition(f, False) for f in t.filters]
        blocks.append(_block(",\n".join(direct), pred, _actions(t, saved=False)))
    return "\n".join(blocks) + "\n"
