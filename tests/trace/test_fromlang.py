"""The Trace API's expressions read by the language's parser (issue 14):
the forms the old hand-written parser took, C precedence (the CLI's
meaning, also in the kernel), errors with columns, and a property test of
the tree -> chain conversion against the language's tree."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
from hypothesis import given, strategies as st

from budget import fuzz_settings
from pyebpf.lang import ast as A
from pyebpf.lang.parser import parse_expression
from pyebpf.trace import Trace
from pyebpf.trace.expr import Expr, ExprError, parse_expr, parse_filter, parse_filters

from .conftest import ROOT, cli

MASK = (1 << 64) - 1

# (text, Expr.text, kind, atom, arg (an inner Expr: its text), ops, size) as the
# old hand-written parser gave them -- each form it accepted, read the same way
# now unless listed in CHANGED
OLD_FORMS = [
    ("arg0", "arg0", "int", "arg", 0, (), 8),
    ("arg1", "arg1", "int", "arg", 1, (), 8),
    ("arg12", "arg12", "int", "arg", 12, (), 8),
    ("retval", "retval", "int", "retval", None, (), 8),
    ("latency", "latency", "int", "latency", None, (), 8),
    ("pid", "pid", "int", "pid", None, (), 8),
    ("tid", "tid", "int", "tid", None, (), 8),
    ("uid", "uid", "int", "uid", None, (), 8),
    ("gid", "gid", "int", "gid", None, (), 8),
    ("cpu", "cpu", "int", "cpu", None, (), 8),
    ("nsecs", "nsecs", "int", "nsecs", None, (), 8),
    ("elapsed", "elapsed", "int", "elapsed", None, (), 8),
    ("comm", "comm", "str", "comm", None, (), 16),
    ("ustack", "ustack", "stack", "ustack", None, (), 8),
    ("probe", "probe", "probe", "probe", None, (), 8),
    ("func", "func", "func", "func", None, (), 8),
    ("args.flags", "args.flags", "int", "field", "flags", (), 8),
    ("args->filename", "args.filename", "int", "field", "filename", (), 8),
    ("42", "42", "int", "const", 42, (), 8),
    ("0x2a", "0x2a", "int", "const", 42, (), 8),
    ("-20", "-20", "int", "const", -20, (), 8),
    ("-0x10", "-0x10", "int", "const", -16, (), 8),
    ("0xffffffffffffffff", "0xffffffffffffffff", "int", "const", MASK, (), 8),
    ("str(arg0)", "str(arg0)", "str", "str", "arg0", (), 64),
    ("str(arg1, 8)", "str(arg1, 8)", "str", "str", "arg1", (), 9),
    ("str(args.filename)", "str(args.filename)", "str", "str", "args.filename", (), 64),
    ("str(arg0 + 8, 16)", "str(arg0 + 8, 16)", "str", "str", "arg0 + 8", (), 17),
    ("arg1 / 1000", "arg1 / 1000", "int", "arg", 1, (("/", 1000),), 8),
    ("latency / 1000", "latency / 1000", "int", "latency", None, (("/", 1000),), 8),
    ("arg0 & 0xff", "arg0 & 0xff", "int", "arg", 0, (("&", 255),), 8),
    ("arg0 % 10", "arg0 % 10", "int", "arg", 0, (("%", 10),), 8),
    ("args.flags & 0xff", "args.flags & 0xff", "int", "field", "flags", (("&", 255),), 8),
    ("(arg0 + 1) * 2", "(arg0 + 1) * 2", "int", "arg", 0, (("+", 1), ("*", 2)), 8),
    ("arg0 * 2 + 1", "arg0 * 2 + 1", "int", "arg", 0, (("*", 2), ("+", 1)), 8),
    ("arg0 << 4 | 1", "arg0 << 4 | 1", "int", "arg", 0, (("<<", 4), ("|", 1)), 8),
    ("arg1 >> 3 ^ 7", "arg1 >> 3 ^ 7", "int", "arg", 1, ((">>", 3), ("^", 7)), 8),
    ("arg0 - 1 << 2", "arg0 - 1 << 2", "int", "arg", 0, (("-", 1), ("<<", 2)), 8),
    ("((arg0))", "arg0", "int", "arg", 0, (), 8),
    ("(arg0) + 1", "(arg0) + 1", "int", "arg", 0, (("+", 1),), 8),
    ("arg0+1", "arg0+1", "int", "arg", 0, (("+", 1),), 8),
    ("arg0 * 3 % 7", "arg0 * 3 % 7", "int", "arg", 0, (("*", 3), ("%", 7)), 8),
    ("arg1 - 10 - 5", "arg1 - 10 - 5", "int", "arg", 1, (("-", 10), ("-", 5)), 8),
    ("retval / 2 / 3", "retval / 2 / 3", "int", "retval", None, (("/", 2), ("/", 3)), 8),
    ("str(arg0 | 3)", "str(arg0 | 3)", "str", "str", "arg0 | 3", (), 64),
    # the old parser read operators left to right; C's precedence now (the CLI's):
    ("arg0 + 1 * 2", "arg0 + 1 * 2", "int", "arg", 0, (("+", 2),), 8),
    ("arg0 | 1 << 4", "arg0 | 1 << 4", "int", "arg", 0, (("|", 16),), 8),
    ("arg1 & 0xff >> 4", "arg1 & 0xff >> 4", "int", "arg", 1, (("&", 15),), 8),
    ("arg0 << 1 + 1", "arg0 << 1 + 1", "int", "arg", 0, (("<<", 2),), 8),
    ("arg0 ^ 1 & 3", "arg0 ^ 1 & 3", "int", "arg", 0, (("^", 1),), 8),
    ("5 + 3", "5 + 3", "int", "const", 8, (), 8),          # (constants folded)
]
#: what the old parser made of the forms whose meaning changed on purpose
CHANGED = {"arg0 + 1 * 2": (("+", 1), ("*", 2)), "arg0 | 1 << 4": (("|", 1), ("<<", 4)),
           "arg1 & 0xff >> 4": (("&", 255), (">>", 4)), "arg0 << 1 + 1": (("<<", 1), ("+", 1)),
           "arg0 ^ 1 & 3": (("^", 1), ("&", 3)), "5 + 3": (("+", 3),)}


@pytest.mark.parametrize("text, shown, kind, atom, arg, ops, size", OLD_FORMS)
def test_every_old_form_is_still_accepted(text, shown, kind, atom, arg, ops, size):
    e = parse_expr(text)
    inner = e.arg.text if isinstance(e.arg, Expr) else e.arg
    assert (e.text, e.kind, e.atom, inner, e.ops, e.size) == (shown, kind, atom, arg, ops, size)
    if text in CHANGED:
        assert e.ops != CHANGED[text]


# (text, left text, op, right: text or bytes) as the old parser gave them
OLD_FILTERS = [
    ("arg0 > 100", "arg0", ">", "100"),
    ("arg1 < -20", "arg1", "<", "-20"),
    ('comm == "bash"', "comm", "==", b"bash"),
    ('str(arg0, 8) != "a\\tb"', "str(arg0, 8)", "!=", b"a\tb"),
    ("arg0 + 1 >= arg1 * 2", "arg0 + 1", ">=", "arg1 * 2"),
    ("retval != 0", "retval", "!=", "0"),
    ("latency / 1000 > 5", "latency / 1000", ">", "5"),
    ("arg0 == 0x10", "arg0", "==", "0x10"),
    ('str(arg0) == ""', "str(arg0)", "==", b""),
    # C: & binds looser than ==: arg0 & (1 == 1), true when arg0 & 1 is not 0
    ("arg0 & 1 == 1", "arg0 & 1 == 1", "!=", "0"),
]


@pytest.mark.parametrize("text, left, op, right", OLD_FILTERS)
def test_every_old_filter_is_still_accepted(text, left, op, right):
    f = parse_filter(text)
    assert (f.left.text, f.op) == (left, op)
    assert (f.right if isinstance(f.right, bytes) else f.right.text) == right


def test_conditions_as_the_language_reads_them():
    both = parse_filters("arg0 > 1 && !arg1")
    assert [(f.left.text, f.op, f.right.text) for f in both] == [("arg0", ">", "1"),
                                                                 ("arg1", "==", "0")]
    assert parse_filter("arg0").op == "!=" and parse_filter('"bob" == str(arg0)').right == b"bob"
    assert parse_filter("arg0 > 2 * 50").right.arg == 100
    with pytest.raises(ExprError, match="one comparison expected"):
        parse_filter("arg0 > 1 && arg1 > 2")


@pytest.mark.parametrize("text, words, column", [
    ("arg0 + arg1", "integer constant on one side", 6),
    ("arg0 +", "unexpected end of file", 6),
    ("arg0 arg1", "unexpected builtin", 6),
    ("1 - arg0", "integer constant", 3),
    ("arg0 + @x", "a map is not supported", 8),
    ("arg0 ? 1 : 2", r"a ternary \(\?:\) is not supported", 1),
    ("arg0+$x", "a variable is not supported", 6),
    ("(int32)arg0", "cast to int32 is not supported", 1),
    ("arg0 > 1", "makes a condition, not a value", 6),
    ("  str(comm)", "str.. takes an address", 7),
    ("arg0*str(arg1, 300)", "1..256", 16),
    ("arg0 + nope", "unknown name 'nope'", 8),
    ("-8 / 2 + arg0", "depends on signedness", 4),
    ("arg0 / (2 - 2)", "division by zero", 6),
    ("-9223372036854775809", "does not fit in signed 64 bits", 1),
    ("kstack", "unknown name", 1),
])
def test_errors_name_the_expression_and_the_column(text, words, column):
    with pytest.raises(ExprError, match=words) as ei:
        parse_expr(text)
    assert ei.value.column == column
    assert str(ei.value).startswith(repr(text)) and f"(column {column})" in str(ei.value)


@pytest.mark.parametrize("text, words, column", [
    ("arg0 || arg1", "'||' is not supported in a filter", 6),
    ('arg0 == "x"', "a string literal compares with comm", 9),
    ('comm < "x"', "== or != only", 6),
    ("comm", "a filter is a comparison", 1),
])
def test_filter_errors_name_the_column(text, words, column):
    with pytest.raises(ExprError, match=words) as ei:
        parse_filter(text)
    assert ei.value.column == column


@pytest.mark.parametrize("text", ["arg0" + " + 1" * 3000, "~" * 3000 + "arg0",
                                  "arg0 > 1" + " && arg0 > 1" * 3000])
def test_very_long_expressions_are_refused_cleanly(text):
    """Trees too deep to walk: an ExprError, not a RecursionError."""
    with pytest.raises(ExprError, match="too long or too deeply nested"):
        parse_filter(text) if "&&" in text else parse_expr(text)


def test_syntax_error_columns_count_over_lines():
    with pytest.raises(ExprError) as ei:
        parse_expr("arg0 +\n  1 2")
    assert ei.value.column == 12 and "unexpected integer" in str(ei.value)  # (the 2)


def test_trace_api_errors_are_expr_errors():
    with pytest.raises(ExprError, match=r"'arg0 \+ arg1'.*\(column 6\)"):
        Trace("uprobe:/bin/true:main").count(by="arg0 + arg1")
    with pytest.raises(ExprError, match="column 1"):
        Trace("uprobe:/bin/true:main").filter("comm")


def test_the_hand_written_parser_is_gone():
    src = (ROOT / "pyebpf").rglob("*.py")
    found = [str(p) for p in src if re.search(r"\b_Parser\b|\b_tokens\(", p.read_text())]
    assert found == []


def test_importing_trace_does_not_import_the_parser():
    """(trace takes the aggregations and builtins' emitters from lang, not
    its front end: the parser waits for the first expression.)"""
    code = ("import sys, pyebpf.trace, pyebpf.trace.recipes, pyebpf.trace.expr; "
            "print(sorted(m for m in sys.modules if m.startswith('pyebpf.lang')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=str(ROOT), env={"PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == str(["pyebpf.lang", "pyebpf.lang.aggregations",
                                      "pyebpf.lang.builtins"])


# ----------------------------------------------------------- property test
def _tree_value(n: A.Expr, args: list[int]) -> int:
    """The language's tree evaluated with bpftrace's meaning for a uprobe's
    (unsigned 64-bit) arguments: C's operators on u64, BPF's division by 0."""
    if isinstance(n, A.Integer):
        return n.value & MASK
    if isinstance(n, A.Builtin):
        return args[int(n.name[3:])]
    if isinstance(n, A.Cast):
        bits = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}[n.typename]
        return _tree_value(n.expr, args) & ((1 << bits) - 1)
    if isinstance(n, A.Unop):
        v = _tree_value(n.operand, args)
        return {"-": -v, "~": ~v}[n.op] & MASK
    assert isinstance(n, A.Binop)
    return _apply(n.op, _tree_value(n.left, args), _tree_value(n.right, args))


def _apply(op: str, a: int, b: int) -> int:
    a, b = a & MASK, b & MASK
    if op in ("/", "%") and b == 0:
        return 0 if op == "/" else a           # (BPF: x / 0 is 0, x % 0 is x)
    return {"+": a + b, "-": a - b, "*": a * b, "/": a // max(b, 1), "%": a % max(b, 1),
            "&": a & b, "|": a | b, "^": a ^ b, "<<": a << (b & 63),
            ">>": a >> (b & 63)}[op] & MASK


def _chain_value(e: Expr, args: list[int]) -> int:
    """What the emitted code computes for a chain (see expr.emit_int)."""
    v = args[e.arg] if e.atom == "arg" else e.arg & MASK
    for op, c in e.ops:
        v = _apply(op, v, c)
    return v


_ARGS = st.sampled_from(["arg0", "arg1", "arg2"])
_ATOMS = st.one_of(_ARGS, _ARGS, _ARGS,            # (arguments more often than constants)
                   st.integers(-300, 300).map(str), st.integers(0, MASK).map(hex),
                   st.integers(0, 63).map(str))
_BINARY = ["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"]


def _grow(inner):
    return st.one_of(
        st.tuples(inner, st.sampled_from(_BINARY), inner, st.sampled_from(["", " "])).map(
            lambda t: f"{t[0]}{t[3]}{t[1]} {t[2]}"),
        inner.map(lambda x: f"({x})"),
        inner.map(lambda x: f"~({x})"),
        inner.map(lambda x: f"-({x})"),
        st.tuples(st.sampled_from(["uint8", "uint16", "uint32", "uint64"]), inner).map(
            lambda t: f"({t[0]})({t[1]})"))


_EXPRS = st.recursive(_ATOMS, lambda inner: _grow(inner), max_leaves=6)
#: what a chain cannot say, refused
_REFUSALS = "integer constant on one side|depends on signedness|division by zero|" \
            "does not fit in signed 64 bits"


@fuzz_settings(300)
@given(_EXPRS, st.lists(st.integers(0, MASK), min_size=3, max_size=3))
def test_chains_mean_what_the_language_tree_means(text, args):
    """Random expressions of the grammar: the Trace API's chain computes
    what the language's tree (the CLI's meaning) computes, or is refused."""
    tree = parse_expression(text)
    try:
        e = parse_expr(text)
    except ExprError as err:
        assert re.search(_REFUSALS, str(err)), str(err)
        return
    assert _chain_value(e, args) == _tree_value(tree, args), (text, e)


# ----------------------------------------------------------- in the kernel
N = 60
_WORK = [(i % 10, i * 37 % 5000) for i in range(N)]


def _cli_counts(text: str) -> dict[int, int]:
    out = {}
    for line in text.splitlines():
        m = re.fullmatch(r"@\[(-?\d+)\]: (\d+)", line.strip())
        if m:
            out[int(m.group(1))] = int(m.group(2))
    return out


@pytest.mark.kernel
@pytest.mark.parametrize("key, fn", [
    ("arg0 + 1 * 2", lambda a, b: a + 2),
    ("arg0 << 1 + 1", lambda a, b: a << 2),
    ("arg1 & 0xff >> 4", lambda a, b: b & 15),
    ("arg0 | 1 << 4", lambda a, b: a | 16),
    ("3 * arg0 + 100 / 10 % 4", lambda a, b: 3 * a + 2),
    ("(uint8)(arg1 * 3)", lambda a, b: b * 3 & 0xff),
])
def test_precedence_through_the_trace_api_equals_the_cli(workload, key, fn):
    from .test_recipes import run
    spec = f"uprobe:{workload}:work"
    want: dict[int, int] = {}
    for a, b in _WORK:
        want[fn(a, b)] = want.get(fn(a, b), 0) + 1
    s, res = run(Trace(spec).count(by=key), [workload, str(N)])
    with s:
        assert res["@"] == {(k,): v for k, v in want.items()}
    proc = cli("trace", spec, "--count", key, "-q", "-c", f"{workload} {N}")
    assert proc.returncode == 0, proc.stderr
    assert _cli_counts(proc.stdout) == want


@pytest.mark.kernel
def test_filter_precedence_through_the_trace_api_equals_the_cli(workload):
    from .test_recipes import run
    spec = f"uprobe:{workload}:work"
    cond = "arg1 > 1000 + 500 * 2 && arg0 != 3"
    want: dict[int, int] = {}
    for a, b in _WORK:
        if b > 2000 and a != 3:
            want[a] = want.get(a, 0) + 1
    s, res = run(Trace(spec).filter(cond).count(by="arg0"), [workload, str(N)])
    with s:
        assert res["@"] == {(k,): v for k, v in want.items()}
    proc = cli("trace", spec, "--count", "arg0", "--filter", cond, "-q", "-c",
               f"{workload} {N}")
    assert proc.returncode == 0, proc.stderr
    assert _cli_counts(proc.stdout) == want
