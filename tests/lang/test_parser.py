"""The bpftrace language's parser: every construct, C precedence (a property
test against C's table), positions, and syntax errors worded and placed as
bpftrace 0.17 does (checked against the installed bpftrace when there is one).
No kernel."""
from __future__ import annotations

import random
import shutil
import subprocess

import pytest
from budget import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from pyebpf.errors import PyebpfError
from pyebpf.lang import ast
from pyebpf.lang.errors import LangError
from pyebpf.lang.parser import parse, parse_expression


def body(text: str) -> list[ast.Stmt]:
    """The statements of the single probe of ``BEGIN { text }``."""
    return parse("BEGIN { " + text + " }").probes[0].block.stmts


def expr(text: str) -> ast.Expr:
    return parse_expression(text)


def shape(e: ast.Expr) -> object:
    """A comparable shape of an expression tree (no positions)."""
    if isinstance(e, ast.Integer):
        return e.value
    if isinstance(e, ast.Variable):
        return "$" + e.name
    if isinstance(e, (ast.Builtin, ast.Identifier)):
        return e.name
    if isinstance(e, ast.String):
        return repr(e.value)
    if isinstance(e, ast.Binop):
        return (e.op, shape(e.left), shape(e.right))
    if isinstance(e, ast.Unop):
        return (e.op + ("post" if e.postfix else ""), shape(e.operand))
    if isinstance(e, ast.Ternary):
        return ("?", shape(e.cond), shape(e.then), shape(e.else_))
    if isinstance(e, ast.Cast):
        return ("cast", e.typename, shape(e.expr))
    if isinstance(e, ast.Call):
        return (e.name + "()",) + tuple(shape(a) for a in e.args)
    if isinstance(e, ast.Map):
        return ("@" + e.name,) + tuple(shape(k) for k in e.keys)
    if isinstance(e, ast.FieldAccess):
        return ("->" if e.arrow else ".", shape(e.expr), e.field)
    if isinstance(e, ast.ArrayAccess):
        return ("[]", shape(e.expr), shape(e.index))
    if isinstance(e, ast.Tuple):
        return ("tuple",) + tuple(shape(x) for x in e.elems)
    if isinstance(e, ast.PositionalParameter):
        return "$#" if e.count else f"${e.index}"
    if isinstance(e, ast.Sizeof):
        return ("sizeof", e.typename if e.typename else shape(e.expr))  # type: ignore[arg-type]
    raise AssertionError(e)


# ---- attach points -----------------------------------------------------------

@pytest.mark.parametrize("text, provider, parts, offset", [
    ("BEGIN", "BEGIN", [], None),
    ("END", "END", [], None),
    ("uprobe:/bin/bash:readline", "uprobe", ["/bin/bash", "readline"], None),
    ("uretprobe:/bin/bash:readline", "uretprobe", ["/bin/bash", "readline"], None),
    ("uprobe:./work:*e*", "uprobe", ["./work", "*e*"], None),
    ("uprobe:/bin/bash:readline+16", "uprobe", ["/bin/bash", "readline"], 16),
    ("uprobe:/bin/bash:0x4f2a0", "uprobe", ["/bin/bash", "0x4f2a0"], None),
    ("usdt:./work:prov:tick", "usdt", ["./work", "prov", "tick"], None),
    ("usdt:./work:tick", "usdt", ["./work", "tick"], None),
    ("usdt:./work:*:tick", "usdt", ["./work", "*", "tick"], None),
    ("tracepoint:syscalls:sys_enter_*", "tracepoint", ["syscalls", "sys_enter_*"], None),
    ("rawtracepoint:sys_enter", "rawtracepoint", ["sys_enter"], None),
    ("profile:hz:99", "profile", ["hz", "99"], None),
    ("profile:ms:10", "profile", ["ms", "10"], None),
    ("interval:s:1", "interval", ["s", "1"], None),
    ("software:cpu-clock:1000", "software", ["cpu-clock", "1000"], None),
    ("hardware:cache-misses:1000000", "hardware", ["cache-misses", "1000000"], None),
    ("kprobe:do_nanosleep", "kprobe", ["do_nanosleep"], None),
    ("kfunc:vfs_read", "kfunc", ["vfs_read"], None),
])
def test_attach_points(text, provider, parts, offset):
    ap = parse(text + " { }").probes[0].attach_points[0]
    assert (ap.raw, ap.provider, ap.parts, ap.func_offset) == (text, provider, parts, offset)


def test_an_offset_in_hex_is_kept_as_bpftrace_spells_it():
    ap = parse("uprobe:/bin/bash:readline+0x10 { }").probes[0].attach_points[0]
    assert (ap.raw, ap.parts, ap.func_offset) == ("uprobe:/bin/bash:readline+16",
                                                  ["/bin/bash", "readline"], 16)


@pytest.mark.parametrize("short, full, fields", [
    ("u", "uprobe", "a:b"), ("ur", "uretprobe", "a:b"), ("U", "usdt", "a:b:c"),
    ("t", "tracepoint", "a:b"), ("p", "profile", "hz:9"), ("i", "interval", "s:1"),
    ("s", "software", "faults:10"), ("h", "hardware", "cycles"), ("k", "kprobe", "a"),
    ("kr", "kretprobe", "a"), ("f", "kfunc", "a"), ("fr", "kretfunc", "a"),
    ("rt", "rawtracepoint", "a"), ("w", "watchpoint", "0x10:8:w"),
    ("aw", "asyncwatchpoint", "0x10:8:w"), ("it", "iter", "task")])
def test_short_provider_names(short, full, fields):
    ap = parse(f"{short}:{fields} {{ }}").probes[0].attach_points[0]
    assert (ap.provider, ap.parts) == (full, fields.split(":"))


def test_a_tracepoint_wildcard_without_category_means_any_category():
    ap = parse("tracepoint:sys_enter_* { }").probes[0].attach_points[0]
    assert ap.parts == ["*", "sys_enter_*"]


def test_uprobe_and_usdt_may_leave_out_the_path_for_a_pid():
    assert parse("uprobe:main { }").probes[0].attach_points[0].parts == ["main"]
    assert parse("usdt:prov:tick { }").probes[0].attach_points[0].parts == ["prov", "tick"]


def test_several_attach_points_and_probes():
    s = parse("uprobe:/p:f, uretprobe:/p:f,\n usdt:/p:x { } END { }")
    assert [[a.provider for a in p.attach_points] for p in s.probes] == [
        ["uprobe", "uretprobe", "usdt"], ["END"]]


def test_empty_attach_points_are_dropped_as_bpftrace_does():
    assert [ap.raw for ap in parse("BEGIN, { }").probes[0].attach_points] == ["BEGIN"]
    assert [ap.raw for ap in parse(", END { }").probes[0].attach_points] == ["END"]
    with pytest.raises(LangError) as e:
        parse("{ }")
    assert str(e.value) == "stdin:1:1-1: ERROR: No attach points for probe\n{ }\n"


def test_an_unknown_provider_is_refused_at_its_attach_point():
    with pytest.raises(LangError) as e:
        parse("BEGIN { } foo:bar { }")
    assert str(e.value).splitlines()[0] == "stdin:1:10-18: ERROR: Invalid probe type: 'foo'"
    assert isinstance(e.value, PyebpfError) and isinstance(e.value, ValueError)


# ---- probes, predicates, comments ----------------------------------------------

def test_predicates_divide_as_bpftrace_does():
    p = parse("i:s:1 /arg0 / 2 > 1/ { }").probes[0]
    assert shape(p.predicate) == (">", ("/", "arg0", 2), 1)
    p = parse("BEGIN /1/ 2/ { }").probes[0]
    assert shape(p.predicate) == ("/", 1, 2)


def test_comments_and_includes_are_kept_apart():
    s = parse("#include <linux/sched.h>\n#include <sys/types.h>\n"
              "// a comment\nBEGIN /* here */ { /* and\nthere */ exit() // end\n}")
    assert shape(s.probes[0].block.stmts[0].expr) == ("exit()",)
    assert s.includes == ["linux/sched.h", "sys/types.h"]


def test_a_missing_header_is_refused_as_bpftrace_refuses_it():
    # (by compile(), which knows the -I directories: lang.includes)
    from pyebpf.lang.api import compile as bt_compile
    with pytest.raises(LangError) as e:
        bt_compile("#include <lol/no.h>\nBEGIN { }")
    assert e.value.message == "'lol/no.h' file not found" and e.value.pos.line == 1


def test_defines_replace_names_and_headers_bring_their_numbers():
    s = parse("#define TEN 10\n#define TWICE (TEN * 2)\n#include <errno.h>\n"
              "BEGIN { @a = TWICE; @b = EPERM; }")
    first, second = s.probes[0].block.stmts
    assert shape(first.value) == ("*", 10, 2) and shape(second.value) == 1


def test_c_struct_definitions_are_kept_for_their_pass():
    s = parse("struct foo { int x; }\nunion u { int a; char b; };\nBEGIN { }")
    assert [d.text for d in s.c_definitions] == ["struct foo { int x; }",
                                                "union u { int a; char b; };"]
    assert [d.pos.line for d in s.c_definitions] == [1, 2]


# ---- statements ------------------------------------------------------------------

def test_semicolons_separate_statements_the_last_needs_none():
    assert len(body("@a = 1; @b = 2")) == 2
    assert len(body("@a = 1; @b = 2;")) == 2
    assert len(body("if (1) { @a = 1 } @b = 2")) == 2
    assert body("") == []


def test_assignments():
    s = body("@x = 1; @m[pid, comm] = count(); $v = 2; @x += 3; $v <<= 1; @m[1] -= 2")
    assert [type(x).__name__ for x in s] == ["AssignMap", "AssignMap", "AssignVar",
                                              "AssignMap", "AssignVar", "AssignMap"]
    assert [x.op for x in s] == [None, None, None, "+", "<<", "-"]
    assert shape(s[1].map) == ("@m", "pid", "comm")
    assert shape(s[1].value) == ("count()",)
    assert s[0].map.name == "x" and s[2].var.name == "v"
    assert body("@ = 1")[0].map.name == ""


def test_increments_and_decrements():
    s = body("@x++; ++@x; $i--; --$i; @m[1]++")
    assert [shape(x.expr) for x in s] == [("++post", ("@x",)), ("++", ("@x",)),
                                          ("--post", "$i"), ("--", "$i"),
                                          ("++post", ("@m", 1))]


def test_if_else_if_else():
    (s,) = body("if (pid > 1) { @a = 1 } else if (pid) { @b = 1 } else { @c = 1 }")
    assert isinstance(s, ast.If) and shape(s.cond) == (">", "pid", 1)
    nested = s.else_.stmts[0]
    assert isinstance(nested, ast.If) and shape(nested.cond) == "pid"
    assert nested.else_ is not None and nested.else_.stmts[0].map.name == "c"
    (s,) = body("if (1) { }")
    assert s.else_ is None


def test_loops_and_jumps():
    s = body("unroll (3) { @a++ } unroll($1) { } while ($i < 5) { $i++; break; continue } "
             "return")
    assert isinstance(s[0], ast.Unroll) and shape(s[0].count) == 3
    assert shape(s[1].count) == "$1"
    assert isinstance(s[2], ast.While) and [type(x).__name__ for x in s[2].body.stmts] == [
        "ExprStmt", "Jump", "Jump"]
    assert isinstance(s[3], ast.Jump) and s[3].kind == "return"
    assert shape(body("unroll(-2) {}")[0].count) == -2


# ---- expressions -------------------------------------------------------------------

@pytest.mark.parametrize("text, tree", [
    ("1 + 2 * 3", ("+", 1, ("*", 2, 3))),
    ("1 * 2 + 3", ("+", ("*", 1, 2), 3)),
    ("1 - 2 - 3", ("-", ("-", 1, 2), 3)),
    ("1 << 2 + 3", ("<<", 1, ("+", 2, 3))),
    ("1 < 2 == 3 > 4", ("==", ("<", 1, 2), (">", 3, 4))),
    ("1 & 2 == 2", ("&", 1, ("==", 2, 2))),
    ("1 | 2 ^ 3 & 4", ("|", 1, ("^", 2, ("&", 3, 4)))),
    ("1 || 2 && 3", ("||", 1, ("&&", 2, 3))),
    ("1 ? 2 : 3 ? 4 : 5", ("?", 1, 2, ("?", 3, 4, 5))),
    ("1 || 2 ? 3 + 4 : 5", ("?", ("||", 1, 2), ("+", 3, 4), 5)),
    ("-1", -1),
    ("- 1", -1),
    ("2 - -1", ("-", 2, -1)),
    ("-pid", ("-", "pid")),
    ("!pid == 0", ("==", ("!", "pid"), 0)),
    ("~$x & 3", ("&", ("~", "$x"), 3)),
    ("*$p", ("*", "$p")),
    ("(uint8)arg0 + 1", ("+", ("cast", "uint8", "arg0"), 1)),
    ("(int32 *)arg0", ("cast", "int32 *", "arg0")),
    ("(struct task_struct *)curtask", ("cast", "struct task_struct *", "curtask")),
    ("(1 + 2) * 3", ("*", ("+", 1, 2), 3)),
    ("(1, \"a\", pid)", ("tuple", 1, "'a'", "pid")),
    ("$t.0", (".", "$t", "0")),
    ("args.filename", (".", "args", "filename")),
    ("args->filename", ("->", "args", "filename")),
    ("$a[1]", ("[]", "$a", 1)),
    ("@m[1, 2] + @n", ("+", ("@m", 1, 2), ("@n",))),
    ("$1 + $#", ("+", "$1", "$#")),
    ("str(arg0, 4)", ("str()", "arg0", 4)),
    ("ustack(perf, 10)", ("ustack()", "perf", 10)),
    ("kstack(bpftrace)", ("kstack()", "bpftrace")),
    ("ustack", "ustack"),
    ("sizeof(uint32)", ("sizeof", "uint32")),
    ("sizeof($x)", ("sizeof", "$x")),
    ("exit()", ("exit()",)),
    ("\"a\\tb\"", "'a\\tb'"),
])
def test_expressions(text, tree):
    assert shape(expr(text)) == tree


def test_literals_are_64_bit_signed_values_as_in_bpftrace():
    assert shape(expr("18446744073709551615")) == -1
    assert shape(expr("0x8000000000000000")) == -2 ** 63
    assert shape(expr("-9223372036854775808")) == -2 ** 63
    assert shape(expr("9223372036854775807")) == 2 ** 63 - 1


def test_integer_literal_forms_reach_the_tree():
    assert [shape(expr(t)) for t in ("0x10", "010", "1_000", "10u", "3ULL")] == [
        16, 8, 1000, 10, 3]


# ---- positions ------------------------------------------------------------------------

def pos(e: ast.Node) -> tuple[int, int, int]:
    return (e.pos.line, e.pos.column, e.pos.end)


def test_positions_follow_bpftrace():
    (s,) = body("@x = 3 + str(1, 2)")
    # BEGIN { @x = 3 + str(1, 2) }
    # 123456789.123456789.123456789
    assert pos(s) == (1, 12, 13)              # an assignment sits at its "="
    assert pos(s.map) == (1, 9, 11)
    assert pos(s.value) == (1, 16, 17)        # a binary operation at its operator
    assert pos(s.value.right) == (1, 18, 27)  # a call spans name to ")"
    (s,) = body("$x=$y+1")
    assert pos(s.value.left) == (1, 9, 14)    # the span starts after the last blank


def test_a_probe_is_at_its_first_token_its_attach_point_where_bpftrace_puts_it():
    s = parse("BEGIN { }\n\nEND { }")
    assert pos(s.probes[1]) == (3, 1, 4)
    ap = s.probes[1].attach_points[0]
    assert (ap.pos.line, ap.pos.column, ap.pos.end_line) == (1, 10, 3)


def test_multi_line_positions():
    s = parse('BEGIN {\n  printf("%d\\n",\n         1)\n}')
    call = s.probes[0].block.stmts[0].expr
    assert (call.pos.line, call.pos.end_line) == (2, 3)


# ---- errors ------------------------------------------------------------------------------

#: bad programs and the first line bpftrace 0.17 prints for them (taken from the
#: installed bpftrace; test_syntax_errors_match_the_installed_bpftrace rechecks)
SYNTAX_ERRORS = [
    ('BEGIN { printf("hi" }',
     'stdin:1:21-22: ERROR: syntax error, unexpected }, expecting ) or ","'),
    ('BEGIN { @x = 1 +; }',
     'stdin:1:16-18: ERROR: syntax error, unexpected ;'),
    ('BEGIN{@x=1+;}',
     'stdin:1:1-13: ERROR: syntax error, unexpected ;'),
    ('BEGIN { @x = 1 + /*c*/; }',
     'stdin:1:18-24: ERROR: syntax error, unexpected ;'),
    ('BEGIN { @x = 1 + //c\n; }',
     'stdin:2:1-2: ERROR: syntax error, unexpected ;'),
    ('BEGIN {',
     'stdin:1:7-8: ERROR: syntax error, unexpected end of file, expecting }'),
    ('BEGIN { @ = "abc\\q"; }',
     "stdin:1:13-19: ERROR: invalid escape character '\\q'"),
    ('BEGIN { @ = "abc',
     'stdin:1:13-17: ERROR: unterminated string'),
    ('BEGIN { @ = 1 ` 2; }',
     "stdin:1:15-16: ERROR: invalid character '`'"),
    ('BEGIN { @ = 08; }',
     'stdin:1:13-15: ERROR: Found trailing non-numeric characters'),
    ('BEGIN { $n = 5; unroll($n) {} }',
     'stdin:1:17-26: ERROR: syntax error, unexpected variable, expecting $# or - or positional parameter or integer'),
    ('BEGIN',
     'stdin:1:1-6: ERROR: unexpected end of file, expected {'),
    ('BEGIN ;',
     'stdin:1:7-8: ERROR: syntax error, unexpected ;, expecting {'),
    ('BEGIN { printf; }',
     'stdin:1:9-16: ERROR: syntax error, unexpected ;, expecting ++ or --'),
    ('BEGIN /1 { }',
     'stdin:1:10-11: ERROR: syntax error, unexpected {, expecting end predicate'),
    ('BEGIN { if 1 {} }',
     'stdin:1:12-13: ERROR: syntax error, unexpected integer, expecting ('),
    ('BEGIN { @x[1 2] = 1 }',
     'stdin:1:14-15: ERROR: syntax error, unexpected integer, expecting ] or ","'),
    ('BEGIN { $x = 1 ? 2 3; }',
     'stdin:1:20-21: ERROR: syntax error, unexpected integer, expecting :'),
    ('BEGIN { if (1) {}; exit() }',
     'stdin:1:16-19: ERROR: syntax error, unexpected ;, expecting }'),
    ('BEGIN { if (1) {} else @x=1 }',
     'stdin:1:24-26: ERROR: syntax error, unexpected map, expecting { or if'),
    ('BEGIN { (foo) }',
     'stdin:1:15-16: ERROR: syntax error, unexpected }'),
    ('BEGIN { $x = -; }',
     'stdin:1:14-16: ERROR: syntax error, unexpected ;'),
    ('BEGIN { ++1 }',
     'stdin:1:9-12: ERROR: syntax error, unexpected integer'),
    ('BEGIN { foo++ }',
     'stdin:1:9-12: ERROR: The ++ operator must be applied to a map or variable'),
    ('BEGIN { @x[1) }',
     'stdin:1:9-14: ERROR: syntax error, unexpected ), expecting ] or ","'),
    ("== BEGIN { }",
     "stdin:1:1-3: ERROR: syntax error, unexpected ==, expecting {"),
    ('BEGIN { unroll }',
     'stdin:1:16-17: ERROR: syntax error, unexpected }, expecting ('),
    ('BEGIN { 1 ++ }',
     'stdin:1:11-13: ERROR: syntax error, unexpected ++, expecting }'),
    ('BEGIN { foo(1); }',
     'stdin:1:9-12: ERROR: Unknown function: foo'),
    ('BEGIN { $x = (1, "a"); $x.0 = 2; }',
     'stdin:1:24-32: ERROR: Tuples are immutable once created. Consider creating a new tuple and assigning it instead.'),
    ('BEGIN { $x = $0; }',
     'stdin:1:14-16: ERROR: param $0 is out of integer range [1, 9223372036854775807]'),
    ('BEGIN { printf("%d\\n",\n  1 2); }',
     'stdin:2:5-6: ERROR: syntax error, unexpected integer, expecting ) or ","'),
    ('BEGIN:x { }',
     'stdin:1:1-8: ERROR: BEGIN probe type requires 0 arguments'),
    ('uprobe:/bin/sh:a:b { }',
     'stdin:1:1-19: ERROR: uprobe probe type requires 2 arguments'),
    ('uretprobe:/bin/sh:main+1 { }',
     'stdin:1:1-25: ERROR: Offset not allowed'),
    ('uprobe:/bin/sh:main+1+2 { }',
     'stdin:1:1-24: ERROR: Cannot take more than one offset'),
    ('kprobe:a:b { }',
     'stdin:1:1-11: ERROR: kprobe probe type requires 1 argument'),
    ('tracepoint:x { }',
     'stdin:1:1-13: ERROR: tracepoint probe type requires 2 arguments'),
    ('tracepoint:a:b:c { }',
     'stdin:1:1-17: ERROR: tracepoint probe type requires 2 arguments'),
    ('profile:hz { }',
     'stdin:1:1-11: ERROR: profile probe type requires 2 arguments'),
    ('interval:s:1:2 { }',
     'stdin:1:1-15: ERROR: interval probe type requires 2 arguments'),
    ('software:a:b:c { }',
     'stdin:1:1-15: ERROR: software probe type requires 1 or 2 arguments'),
    ('usdt:/bin/sh:a:b:c { }',
     'stdin:1:1-19: ERROR: usdt probe type requires 2 or 3 arguments'),
    ('kfunc:a:b:c { }',
     'stdin:1:1-12: ERROR: kfunc probe type requires 1 or 2 arguments'),
    ('hardware { }',
     'stdin:1:1-9: ERROR: hardware probe type requires 1 or 2 arguments'),
]


@pytest.mark.parametrize("program, first_line", SYNTAX_ERRORS)
def test_syntax_errors(program, first_line):
    with pytest.raises(LangError) as e:
        parse(program)
    assert str(e.value).splitlines()[0] == first_line


def test_a_syntax_error_shows_the_line_and_a_marker():
    with pytest.raises(LangError) as e:
        parse('BEGIN { printf("hi" }')
    assert str(e.value) == ('stdin:1:21-22: ERROR: syntax error, unexpected }, expecting ) or ","\n'
                            'BEGIN { printf("hi" }\n'
                            '                    ~')
    assert e.value.pos == ast.Pos(1, 21, 22)
    assert e.value.source_line == 'BEGIN { printf("hi" }'
    assert e.value.filename == "stdin"


def test_lexical_errors_come_together_with_the_syntax_error():
    with pytest.raises(LangError) as e:
        parse("BEGIN { @ = 1 ` 2; }")
    assert [d.message for d in e.value.diagnostics] == [
        "invalid character '`'", "syntax error, unexpected integer, expecting }"]
    assert str(e.value).count("ERROR") == 2


def test_the_file_name_is_in_the_message():
    with pytest.raises(LangError) as e:
        parse("BEGIN { 1 ++ }", filename="x.bt")
    assert str(e.value).startswith("x.bt:1:11-13: ERROR:")


def test_tabs_show_as_four_spaces_in_the_marker_line():
    with pytest.raises(LangError) as e:
        parse("BEGIN {\t@x = 1 +; }")
    # the same text as bpftrace 0.17 prints
    assert str(e.value).splitlines() == ["stdin:1:16-18: ERROR: syntax error, unexpected ;",
                                         "BEGIN {    @x = 1 +; }",
                                         "                  ~~"]


def test_parse_expression_refuses_trailing_tokens():
    with pytest.raises(LangError, match="unexpected integer, expecting end of file"):
        parse_expression("1 2")


@pytest.mark.skipif(shutil.which("bpftrace") is None, reason="bpftrace is not installed")
def test_syntax_errors_match_the_installed_bpftrace():
    for program, first_line in SYNTAX_ERRORS:
        out = subprocess.run(["bpftrace", "-e", program], capture_output=True, text=True,
                             timeout=60).stderr
        lines = [ln for ln in out.splitlines() if "RLIMIT" not in ln]
        assert lines[0] == first_line, program


# ---- property: C precedence ---------------------------------------------------------------

#: C's binary operators, loosest first
C_LEVELS = [["||"], ["&&"], ["|"], ["^"], ["&"], ["==", "!="], ["<", "<=", ">", ">="],
            ["<<", ">>"], ["+", "-"], ["*", "/", "%"]]
C_PREC = {op: i for i, ops in enumerate(C_LEVELS) for op in ops}
TERNARY, UNARY, ATOM = -1, 20, 30


def c_eval(tree: object, env: dict[str, int]) -> int:
    """C semantics on 64-bit signed integers (division by zero gives 0)."""
    def wrap(v: int) -> int:
        v &= (1 << 64) - 1
        return v - (1 << 64) if v >> 63 else v
    if isinstance(tree, int):
        return tree
    if isinstance(tree, str):
        return env[tree]
    op = tree[0]
    if op == "?":
        return c_eval(tree[2], env) if c_eval(tree[1], env) else c_eval(tree[3], env)
    if len(tree) == 2:
        v = c_eval(tree[1], env)
        return wrap({"-": -v, "~": ~v, "!": int(not v)}[op])
    a, b = c_eval(tree[1], env), c_eval(tree[2], env)
    if op in ("/", "%"):
        if b == 0:
            return 0
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        return wrap(q if op == "/" else a - q * b)
    if op in ("<<", ">>"):
        return wrap(a << (b & 63)) if op == "<<" else a >> (b & 63)
    fns = {"+": a + b, "-": a - b, "*": a * b, "&": a & b, "|": a | b, "^": a ^ b,
           "==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b,
           "&&": bool(a and b), "||": bool(a or b)}
    return wrap(int(fns[op]))


def prec(tree: object) -> int:
    if not isinstance(tree, tuple):
        return ATOM
    if tree[0] == "?":
        return TERNARY
    return UNARY if len(tree) == 2 else C_PREC[tree[0]]


def render(tree: object, rnd: random.Random) -> str:
    """Print ``tree`` with the parentheses C needs (and some it does not), and
    random blanks where the language allows them."""
    def sp() -> str:
        return rnd.choice(["", " ", "  ", "\t", "\n"])

    def paren(t: object, need: bool) -> str:
        s = render(t, rnd)
        return f"({sp()}{s}{sp()})" if need or rnd.random() < 0.15 else s

    if isinstance(tree, int):
        return str(tree)
    if isinstance(tree, str):
        return "$" + tree
    op = tree[0]
    if op == "?":
        # the condition binds tighter than ?:, the branches may be anything
        cond = paren(tree[1], prec(tree[1]) <= TERNARY)
        # a ':' directly before a word would lex as a path: keep a blank after it
        return f"{cond}{sp()}?{sp()}{paren(tree[2], False)}{sp()}: {sp()}" \
               f"{paren(tree[3], False)}"
    if len(tree) == 2:
        inner = paren(tree[1], prec(tree[1]) < UNARY or isinstance(tree[1], int))
        # "- -x" must not become "--x"; "-1" would be a literal
        return f"{op} {inner}" if op == "-" else f"{op}{sp()}{inner}"
    left = paren(tree[1], prec(tree[1]) < C_PREC[op])
    right = paren(tree[2], prec(tree[2]) <= C_PREC[op])
    gap = " " if op == "-" else sp()
    return f"{left}{sp()}{op}{gap}{right}"


def parsed(e: ast.Expr) -> object:
    """The tree the parser built, in the generator's shape."""
    if isinstance(e, ast.Integer):
        return e.value
    if isinstance(e, ast.Variable):
        return e.name
    if isinstance(e, ast.Unop):
        return (e.op, parsed(e.operand))
    if isinstance(e, ast.Ternary):
        return ("?", parsed(e.cond), parsed(e.then), parsed(e.else_))
    assert isinstance(e, ast.Binop), e
    return (e.op, parsed(e.left), parsed(e.right))


leaves = st.one_of(st.integers(0, 2 ** 31), st.sampled_from(["a", "b"]))
trees = st.recursive(
    leaves,
    lambda sub: st.one_of(
        st.tuples(st.sampled_from(sorted(C_PREC)), sub, sub),
        st.tuples(st.sampled_from(["-", "~", "!"]), sub),
        st.tuples(st.just("?"), sub, sub, sub)),
    max_leaves=12)


@fuzz_settings(300)
@given(trees, st.integers(0, 2 ** 32), st.integers(-50, 50), st.integers(-50, 50))
def test_property_precedence_is_c(tree, seed, a, b):
    text = render(tree, random.Random(seed))
    got = parsed(parse_expression(text))
    assert got == tree, text
    env = {"a": a, "b": b}
    assert c_eval(got, env) == c_eval(tree, env)


# ---- property: bad input gives a LangError, never a crash ---------------------------

PIECES = ["BEGIN", "END", "uprobe:/bin/sh:f", "t:a:b", "i:s:1", "{", "}", "(", ")", "[", "]",
          ";", ",", "/", "//", "/*", "*/", "*", "+", "-", "++", "--", "=", "==", "+=", "<<",
          "<", ">", "!", "~", "?", ":", ".", "->", "&&", "||", "&", "|", "^", "%", "if",
          "else", "unroll", "while", "return", "break", "1", "0x1f", "08", "1e30", "-5",
          '"s"', '"\\q', '"', "$x", "$1", "$#", "$", "@", "@m", "pid", "arg0", "args",
          "retval", "comm", "printf", "count", "hist", "lhist", "str", "ustack", "perf",
          "kstack", "exit", "delete", "foo", "struct", "struct s {", "(uint8)", "#include <x>",
          "\n", " ", "\t", "`", "sizeof"]


@fuzz_settings(300)
@given(st.lists(st.sampled_from(PIECES), max_size=30), st.lists(st.booleans(), max_size=30))
def test_property_any_token_soup_parses_or_gives_a_lang_error(pieces, gaps):
    from pyebpf.lang.sema import analyse
    text = "".join(p + (" " if g else "") for p, g in zip(pieces, gaps + [True] * 30))
    try:
        script = parse(text)
        analyse(script, params=("1",))
    except LangError as e:
        assert str(e).count("ERROR:") == len(e.diagnostics) >= 1
        assert e.pos is None or e.pos.line >= 1


@fuzz_settings(200)
@given(st.text(max_size=60))
def test_property_any_text_parses_or_gives_a_lang_error(text):
    from pyebpf.lang.sema import analyse
    try:
        analyse(parse(text))
    except LangError:
        pass
