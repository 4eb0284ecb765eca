"""Semantic analysis of the bpftrace language: the types bpftrace 0.17 gives
expressions, maps and variables, and its semantic errors with their
positions (checked against the installed bpftrace when there is one).
No kernel."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from pyebpf.lang import ast
from pyebpf.lang.errors import LangError
from pyebpf.lang.parser import parse
from pyebpf.lang.sema import (Analysis, MapInfo, analyse, param_int, printf_check,
                               printf_specs, signal_number)
from pyebpf.lang.types import Type, int_type, string_type, tuple_type

U64, I64, U32 = int_type(8), int_type(8, True), int_type(4)


def run(program: str, resolver: object = None, params: tuple[str, ...] = ()) -> tuple[
        ast.Script, Analysis]:
    script = parse(program)
    return script, analyse(script, resolver, params=params)  # type: ignore[arg-type]


def typeof(text: str, probe: str = "BEGIN", **kw: object) -> Type:
    """The type of expression ``text`` in a probe (``$e = text``... read back
    through ``print``, which takes any value)."""
    script, _ = run(f"{probe} {{ print({text}) }}", **kw)  # type: ignore[arg-type]
    call = script.probes[-1].block.stmts[0].expr
    return call.args[0].type


def error(program: str, **kw: object) -> str:
    with pytest.raises(LangError) as e:
        run(program, **kw)  # type: ignore[arg-type]
    return str(e.value).splitlines()[0]


class Resolver:
    """A TypeResolver as the probes' layer gives one: USDT arguments typed
    by their spec, a tracepoint's args record, retval int64."""

    def arg_type(self, ap: ast.AttachPoint, n: int) -> Type:
        return int_type(4, True) if ap.provider == "usdt" else I64

    def args_record(self, ap: ast.AttachPoint) -> Type | None:
        return Type("record", 16, fields=(("dfd", 0, I64),
                                          ("filename", 8, Type("pointer", 8,
                                                               elem=int_type(1, True)))))

    def retval_type(self, ap: ast.AttachPoint) -> Type:
        return I64


# ---- types of expressions --------------------------------------------------------

@pytest.mark.parametrize("text, t", [
    ("1", I64), ("-5", I64), ('"abc"', string_type(4)), ("pid", U64), ("tid", U64),
    ("uid", U64), ("gid", U64), ("cpu", U64), ("nsecs", U64), ("elapsed", U64),
    ("cgroup", U64), ("rand", U64), ("cpid", U32), ("comm", string_type(16)),
    ("probe", Type("probe", 8)), ("username", Type("username", 8)),
    ("ustack", Type("ustack", 8)), ("kstack", Type("kstack", 8)),
    ("ustack(perf, 10)", Type("ustack", 8, stack_mode="perf", stack_limit=10)),
    ("kstack(bpftrace)", Type("kstack", 8, stack_mode="bpftrace")),
    ("kstack(3)", Type("kstack", 8, stack_limit=3)),
    ("sizeof(uint32)", U64), ("strncmp(comm, \"a\", 1)", U64),
    ("kaddr(\"x\")", U64), ("strftime(\"%H\", nsecs)", Type("timestamp", 16, fmt="%H")),
    ("ksym(1)", Type("ksym", 8)), ("usym(1)", Type("usym", 16)),
    ("ntop(1)", Type("inet", 24)), ("buf(1, 8)", Type("buffer", 8)),
])
def test_types_of_builtins_literals_and_calls(text, t):
    assert typeof(text) == t


@pytest.mark.parametrize("text, t", [
    # a binary operation is 64-bit, signed when both sides are
    ("1 + 2", I64), ("pid + 1", U64), ("1 - pid", U64), ("(int8)1 * (int16)2", I64),
    ("(uint8)1 + (int8)1", U64), ("pid / 2", U64),
    # a shift takes its left side's sign
    ("1 << pid", I64), ("pid >> 1", U64),
    # comparisons and logic follow the same rule
    ("1 < 2", I64), ("pid == 1", U64), ("comm == \"a\"", U64), ("1 && 2", I64),
    # unary: - and ~ keep the sign, ! is unsigned of the operand's size
    ("-pid", U64), ("~1", I64), ("!1", U64), ("!(int16)1", int_type(2)),
    # casts truncate or extend to the type named
    ("(int8)300", int_type(1, True)), ("(uint16)-1", int_type(2)),
    ("(uint32)pid", int_type(4)), ("(int64)pid", I64),
    ("(uint8 *)pid", Type("pointer", 8, elem=int_type(1))),
    # ternary: its branches' type (a string branch: bpftrace's 64 bytes)
    ("pid ? 1 : 2", I64), ("1 ? pid : 2", U64), ("1 ? \"a\" : \"bc\"", string_type(64)),
    ("(1, \"ab\", pid)", tuple_type([I64, string_type(3), U64])),
    ("$1", I64), ("$#", I64),
])
def test_integer_rules(text, t):
    assert typeof(text) == t


def test_reg_is_a_uint64_in_the_probes_that_have_registers():
    assert typeof('reg("ip")', "uprobe:/bin/sh:f") == U64
    assert typeof('reg("sp")', "profile:hz:99") == U64


def test_tuples_are_laid_out_as_bpftrace_lays_them_out():
    # a tuple value: C-like padding (int64 at 0, string[3] at 8, uint64 at 16)
    t = typeof('(1, "ab", pid)')
    assert (t.size, [f[1] for f in t.fields]) == (24, [0, 8, 16])
    t = typeof('((int8)1, (int16)2, (int32)3, "a")')
    assert (t.size, [f[1] for f in t.fields]) == (12, [0, 2, 4, 8])
    # the keys of a map with several keys: one after the other
    _, a = run('BEGIN { @m[(int8)1, "ab", 2] = 1 }')
    key = a.maps["@m"].key
    assert (key.size, [f[1] for f in key.fields]) == (19, [0, 8, 11])


def test_str_is_a_string_of_bpftrace_strlen_whatever_its_length():
    # str(p, n) reads n characters at most; its type is bpftrace's, 64 bytes
    for text in ("str(arg0, 4)", "str(arg0)", "str(arg0, 1000)"):
        assert typeof(text, "uprobe:/bin/sh:f") == string_type(64)
    script, _ = run("uprobe:/bin/sh:f { $n = 3; print(str(arg0, $n)) }")
    assert script.probes[0].block.stmts[1].expr.args[0].type == string_type(64)
    assert error("uprobe:/bin/sh:f { print(str(arg0, -1)) }") == \
        "stdin:1:20-39: ERROR: strcannot use negative length (-1)"


def test_a_string_positional_parameter():
    assert typeof("str($1)", params=("abc",)) == string_type(64)
    assert typeof("$1", params=("0x10",)) == I64


def test_every_expression_is_typed():
    script, _ = run('uretprobe:/bin/sh:f /retval > 0/ { $x = (int8)retval; '
                    '@m[comm, $x] = sum(retval); if ($x < -1 && str(retval) == "a") '
                    '{ printf("%d %s\\n", $x, comm) } }')
    seen = []

    def walk(node: object) -> None:
        if isinstance(node, ast.Expr):
            seen.append(node)
            assert node.type is not None, node
        if isinstance(node, list):
            for x in node:
                walk(x)
        elif isinstance(node, ast.Node):
            for v in vars(node).values():
                if isinstance(v, (ast.Node, list)):
                    walk(v)
    walk(script)
    assert len(seen) > 15


# ---- builtins per probe type, with a resolver --------------------------------------

def test_args_and_retval_come_from_the_resolver():
    r = Resolver()
    assert typeof("arg0", "usdt:./w:p:x", resolver=r) == int_type(4, True)
    assert typeof("arg1", "uprobe:./w:f", resolver=r) == I64
    assert typeof("retval", "uretprobe:./w:f", resolver=r) == I64
    assert typeof("args->dfd", "tracepoint:syscalls:sys_enter_openat", resolver=r) == I64
    assert typeof("args.filename", "t:syscalls:sys_enter_openat", resolver=r).kind == \
        "pointer"
    assert error("t:syscalls:sys_enter_openat { print(args->nope) }", resolver=r) == (
        "stdin:1:31-47: ERROR: Struct/union of type 'struct _tracepoint_syscalls_sys_enter_"
        "openat' does not contain a field named 'nope'")


def test_without_a_resolver_bpftrace_defaults():
    assert typeof("arg0", "uprobe:./w:f") == U64
    assert typeof("retval", "uretprobe:./w:f") == U64
    assert typeof("func", "uprobe:./w:f") == Type("usym", 16)
    assert typeof("args->x", "tracepoint:a:b") == U64


# ---- maps ------------------------------------------------------------------------

def test_maps_keys_and_values():
    _, a = run('uprobe:./w:f { @c[comm] = count(); @s = sum(arg0); @h[pid, comm] = hist(arg1); '
               '@l = lhist(arg0, 0, 100, 10); @a = avg((int32)arg0); @st = stats(1); '
               '@mi = min(-1); @mx = max(pid); @v[(int8)1] = "abc"; @v[2] = "a"; @ = 1; '
               '@i++ }')
    assert a.maps == {
        "@c": MapInfo("@c", string_type(16), Type("count", 8, True)),
        "@s": MapInfo("@s", None, Type("sum", 8)),
        "@h": MapInfo("@h", tuple_type([U64, string_type(16)], packed=True),
                      Type("hist", 8, True)),
        "@l": MapInfo("@l", None, Type("lhist", 8, lhist=(0, 100, 10))),
        "@a": MapInfo("@a", None, Type("avg", 8, True)),
        "@st": MapInfo("@st", None, Type("stats", 8, True)),
        "@mi": MapInfo("@mi", None, Type("min", 8, True)),
        "@mx": MapInfo("@mx", None, Type("max", 8, False)),
        # an integer key is stored in 64 bits and keeps its sign
        "@v": MapInfo("@v", I64, string_type(4)),
        "@": MapInfo("@", None, I64),
        "@i": MapInfo("@i", None, I64),
    }
    assert list(a.maps) == ["@c", "@s", "@h", "@l", "@a", "@st", "@mi", "@mx", "@v", "@",
                            "@i"]


def test_signed_usdt_arguments_are_signed_keys():
    _, a = run("usdt:./w:p:x { @[arg0] = count() }", Resolver())
    assert a.maps["@"].key == I64


def test_strings_of_any_length_share_a_map_the_longest_wins():
    _, a = run('BEGIN { @m["a"] = "x"; @m["abcd"] = "yz" }')
    assert a.maps["@m"] == MapInfo("@m", string_type(5), string_type(3))


def test_a_map_read_before_its_assignment_in_a_later_probe():
    _, a = run("END { $v = @x; } BEGIN { @x = count() }")
    assert a.maps["@x"].value == Type("count", 8, True)


def test_map_types_settle_over_passes_as_in_bpftrace():
    # each probe reads a map the next one assigns: bpftrace's passes settle it
    _, a = run("i:s:1 { @a = @b + 1 } i:s:2 { @b = @c } i:s:3 { @c = (uint8)1; @d = @a }")
    # (an integer map value is stored in 64 bits, its sign kept)
    assert {k: v.value for k, v in a.maps.items()} == {
        "@a": U64, "@b": U64, "@c": U64, "@d": U64}
    _, a = run("BEGIN { @s = (int8)-1 }")
    assert a.maps["@s"].value == I64


def test_aggregation_reads_have_the_aggregations_type():
    # bpftrace 0.17: a read of @x = count() is a 'count' (refused in
    # arithmetic, conditions, printf); a map or tuple assigned it keeps the integer
    script, a = run("BEGIN { @x = count(); @y = sum(-1); $v = @x; $w = @y; @c = @y; "
                    "@t = (@x, 1) }")
    assert a.variables[script.probes[0]] == {"v": Type("count", 8, True), "w": Type("sum", 8, True)}
    assert a.maps["@c"].value == I64
    assert a.maps["@t"].value == tuple_type([I64, I64])


# ---- scratch variables --------------------------------------------------------------

def test_scratch_variables_are_per_probe():
    script, a = run('BEGIN { $x = 1; if (1) { $s = "a" } $s = "abc" } '
                    'END { $x = "s"; print($x) }')
    begin, end = script.probes
    assert a.variables[begin] == {"x": I64, "s": string_type(4)}
    assert a.variables[end] == {"x": string_type(2)}


def test_a_variable_is_used_only_after_its_assignment():
    assert error("BEGIN { print($x); $x = 1 }") == \
        "stdin:1:9-17: ERROR: Undefined or undeclared variable: $x"


# ---- printf ------------------------------------------------------------------------

def test_printf_specifiers():
    assert printf_specs("%d %5.2s %-10llu %% %f %r %lx %c") == ["d", "s", "llu", "r", "lx", "c"]
    assert printf_check("%d %s", [U64, string_type(4)]) is None
    assert printf_check("%s %s %s", [Type("ksym", 8), Type("probe", 8),
                                    Type("ustack", 8)]) is None
    assert printf_check("%p", [Type("pointer", 8, elem=U64)]) is None
    assert printf_check("%r", [U64]) == \
        "printf: %r specifier expects a value of type buffer (integer supplied)"


# ---- errors (bpftrace's, with their positions) -----------------------------------------

#: bad programs and the first line bpftrace 0.17 prints for them (taken from the
#: installed bpftrace; test_semantic_errors_match_the_installed_bpftrace rechecks)
SEMANTIC_ERRORS = [
    ('BEGIN { foo(1); }',
     'stdin:1:9-12: ERROR: Unknown function: foo'),
    ('BEGIN { printf("%d %d\\n", 1); }',
     'stdin:1:9-29: ERROR: printf: Not enough arguments for format string (1 supplied, 2 expected)'),
    ('BEGIN { $x = $y + 1; }',
     'stdin:1:14-16: ERROR: Undefined or undeclared variable: $y'),
    ('BEGIN { @m[1] = 1; @m["a"] = 2; }',
     'stdin:1:20-27: ERROR: Argument mismatch for @m: trying to access with arguments: [string[2]] when map expects arguments: [unsigned int64]'),
    ('BEGIN { count(); }',
     'stdin:1:9-16: ERROR: count() should be directly assigned to a map'),
    ('BEGIN { if ("a" == 1) {} }',
     "stdin:1:12-21: ERROR: Type mismatch for '==': comparing 'string[2]' with 'int64'"),
    ('BEGIN { unroll(200) {} }',
     'stdin:1:9-20: ERROR: unroll maximum value is 100'),
    ('BEGIN { unroll(0) {} }',
     'stdin:1:9-18: ERROR: unroll minimum value is 1'),
    ('BEGIN { print(args.x); }',
     'stdin:1:9-19: ERROR: The args builtin can only be used with tracepoint/kfunc/uprobeprobes (special used here)'),
    ('BEGIN { print(retval); }',
     "stdin:1:9-21: ERROR: The retval builtin can only be used with 'kretprobe' and 'uretprobe' and 'kfunc' probes"),
    ('BEGIN { exit(1,2); }',
     'stdin:1:9-18: ERROR: exit() requires no arguments (2 provided)'),
    ('BEGIN { $x = 1 } END { $x }',
     'stdin:1:24-26: ERROR: Undefined or undeclared variable: $x'),
    ('BEGIN { @x = 1; } BEGIN { print(3 + "a"); }',
     'stdin:1:18-24: ERROR: More than one BEGIN probe defined'),
    ('BEGIN { $x = 3 + "a"; }',
     "stdin:1:14-21: ERROR: Type mismatch for '+': comparing 'int64' with 'string[2]'"),
    ('BEGIN { $x = 1; $x = "a"; }',
     "stdin:1:20-21: ERROR: Type mismatch for $x: trying to assign value of type 'string[2]' when variable already contains a value of type 'int64'"),
    ('BEGIN { @x = 1; @x = "a"; }',
     "stdin:1:17-19: ERROR: Type mismatch for @x: trying to assign value of type 'string[2]' when map already contains a value of type 'int64"),
    ('BEGIN { @x = count(); @x = 1; }',
     "stdin:1:23-25: ERROR: Type mismatch for @x: trying to assign value of type 'int64' when map already contains a value of type 'count"),
    # a count is signed in bpftrace 0.17: `@c + 1` is an int64 (pyebpf said unsigned int64)
    ('BEGIN { @c = count(); @c += 1; }',
     "stdin:1:23-25: ERROR: Type mismatch for @c: trying to assign value of type 'int64' when map already contains a value of type 'count"),
    ('BEGIN { @c = count(); @c = @c + 1; }',
     "stdin:1:23-25: ERROR: Type mismatch for @c: trying to assign value of type 'int64' when map already contains a value of type 'count"),
    ('BEGIN { @x[1,2] = 1; @x[1] = 2; }',
     'stdin:1:22-27: ERROR: Argument mismatch for @x: trying to access with arguments: [unsigned int64] when map expects arguments: [unsigned int64, unsigned int64]'),
    ('BEGIN { printf("%s\\n", 1); }',
     'stdin:1:9-26: ERROR: printf: %s specifier expects a value of type string (integer supplied)'),
    ('BEGIN { printf("%d\\n", "a"); }',
     'stdin:1:9-28: ERROR: printf: %d specifier expects a value of type integer (string supplied)'),
    ('BEGIN { printf(1); }',
     'stdin:1:9-18: ERROR: printf() expects a string literal (integer provided)'),
    ('BEGIN { @x = hist(); }',
     'stdin:1:14-20: ERROR: hist() requires one argument (0 provided)'),
    ('BEGIN { @x[1] = count(); print(@x + 1) }',
     'stdin:1:26-34: ERROR: Argument mismatch for @x: trying to access with arguments: [] when map expects arguments: [unsigned int64]'),
    ('BEGIN { @ = sum("a"); }',
     'stdin:1:13-21: ERROR: sum() only supports integer arguments (string provided)'),
    ('BEGIN { @ = str(1, 2, 3); }',
     'stdin:1:13-25: ERROR: str() takes up to 2 arguments (3 provided)'),
    ('BEGIN { $x = count(); }',
     'stdin:1:14-21: ERROR: count() should be directly assigned to a map'),
    ('BEGIN { @x = lhist(1, 0, 10, 20); }',
     'stdin:1:14-33: ERROR: lhist() step is too large for the given range (provided step 20 for range 10)'),
    ('BEGIN { printf("%d\\n", 1, 2); }',
     'stdin:1:9-29: ERROR: printf: Too many arguments for format string (2 supplied, 1 expected)'),
    ('BEGIN { print(arg0); }',
     "stdin:1:9-19: ERROR: The arg0 builtin can only be used with 'kprobes', 'uprobes' and 'usdt' probes"),
    ('BEGIN { print(func); }',
     "stdin:1:9-19: ERROR: The func builtin can not be used with 'BEGIN' probes"),
    ('BEGIN { delete(1); }',
     'stdin:1:9-18: ERROR: delete() expects a map to be provided'),
    ('BEGIN { @x = 1; clear(@x[1]); }',
     'stdin:1:17-29: ERROR: The map passed to clear() should not be indexed by a key'),
    ('BEGIN { $x = 1 ? 2 : "a"; }',
     "stdin:1:14-25: ERROR: Ternary operator must return the same type: have 'integer' and 'string'"),
    ('uretprobe:/bin/bash:readline { @[func] = lhist(retval, 0, 100, 10); $s = (int8)retval; if ($s < -1 && str(arg0) == "x") { printf("%d\\n", $s) } }',
     "stdin:1:103-111: ERROR: The arg0 builtin can only be used with 'kprobes', 'uprobes' and 'usdt' probes"),
    ('BEGIN { exit() }\nBEGIN { exit() }',
     'stdin:1-2: ERROR: More than one BEGIN probe defined'),
    ('tracepoint:syscalls:sys_enter_openat { @[comm] = count(); print(retval) }',
     "stdin:1:59-71: ERROR: The retval builtin can only be used with 'kretprobe' and 'uretprobe' and 'kfunc' probes (try to use args->ret instead)"),
    ('BEGIN { $x = (1, "a"); print($x.2) }',
     'stdin:1:24-34: ERROR: Invalid tuple index: 2. Found 2 elements in tuple.'),
    ('BEGIN { @x = 1; @x++; $y++; }',
     'stdin:1:23-25: ERROR: Undefined or undeclared variable: $y'),
    ('BEGIN { @ = ustack(foo); }',
     "stdin:1:13-23: ERROR: Unknown identifier: 'foo'"),
    ('BEGIN { @ = kstack(2000); }',
     "stdin:1:13-25: ERROR: kstack([int limit]): limit shouldn't exceed 1024, 2000 given"),
    ('BEGIN { @a[1] = 1; delete(@a[1]); delete(@a); zero(@a); exit() }',
     'stdin:1:35-44: ERROR: Argument mismatch for @a: trying to access with arguments: [] when map expects arguments: [unsigned int64]'),
    ('BEGIN { print(@nope) }',
     'stdin:1:9-20: ERROR: Undefined map: @nope'),
    ('BEGIN { $x = "a"; $x += 1; }',
     "stdin:1:19-26: ERROR: Type mismatch for $x: trying to assign value of type 'unsigned int64' when variable already contains a value of type 'string[2]'"),
    ('BEGIN { printf("%d\\n", 1 << "a"); }',
     "stdin:1:24-32: ERROR: Type mismatch for '<<': comparing 'int64' with 'string[2]'"),
    ('BEGIN { $x = "a" < "b"; }',
     'stdin:1:18-19: ERROR: The < operator can not be used on expressions of types string[2], string[2]'),
    ('BEGIN { if ("a") {} }',
     'stdin:1:1-1: ERROR: Invalid condition in if(): string'),
    ('BEGIN { $x = "a" ? 1 : 2; }',
     'stdin:1:14-25: ERROR: Invalid condition in ternary: string'),
    ('BEGIN { $x = (uint8)"a"; }',
     'stdin:1:14-21: ERROR: Casts are not supported for type: "string[2]"'),
    ('BEGIN { $x = (struct foo *)1; }',
     "stdin:1:14-28: ERROR: Unknown struct/union: 'struct foo'"),
    ('BEGIN { break; }',
     'stdin:1:9-14: ERROR: break used outside of a loop'),
    ('BEGIN { $x = -"a"; }',
     "stdin:1:14-15: ERROR: The - operator can not be used on expressions of type 'string[2]'"),
    ('BEGIN { $x = !"a"; }',
     "stdin:1:14-15: ERROR: The ! operator can not be used on expressions of type 'string[2]'"),
    ('BEGIN { $x = comm.foo; }',
     "stdin:1:14-19: ERROR: Can not access field 'foo' on expression of type 'string[16]'"),
    ('BEGIN { $x = (1,2); $y = $x.5; }',
     'stdin:1:26-30: ERROR: Invalid tuple index: 5. Found 2 elements in tuple.'),
    ('BEGIN { @x[(1,2)] = 1; }',
     'stdin:1:9-18: ERROR: tuple cannot be used as a map key. Try a multi-key associative array instead (eg `@map[$1, $2] = ...)`.'),
    ('BEGIN { print(1, 2); }',
     'stdin:1:9-20: ERROR: Non-map print() only takes 1 argument, 2 found'),
    ('BEGIN { @ = str("a"); }',
     'stdin:1:13-21: ERROR: str() expects an integer or a pointer type as first argument (string[2] provided)'),
    ('BEGIN { $x = 1; $x = (1,2) }',
     "stdin:1:20-21: ERROR: Type mismatch for $x: trying to assign value of type '(int64,int64)' when variable already contains a value of type 'int64'"),
    ('BEGIN { print($x); $x = 1; }',
     'stdin:1:9-17: ERROR: Undefined or undeclared variable: $x'),
    ('BEGIN { @x[1]++; @y++; @x["a"] = 1 }',
     'stdin:1:24-31: ERROR: Argument mismatch for @x: trying to access with arguments: [string[2]] when map expects arguments: [unsigned int64]'),
    ('BEGIN { @a = 1; @a = 2; @b = @a + @c; }',
     'stdin:1:35-37: ERROR: Undefined map: @c'),
    ('BEGIN { @x = 1; } END { $y = 1; $y = (1, @x); }',
     "stdin:1:36-37: ERROR: Type mismatch for $y: trying to assign value of type '(int64,int64)' when variable already contains a value of type 'int64'"),
    ('BEGIN { $x = 1; print($x[0]); }',
     'stdin:1:17-28: ERROR: The array index operator [] can only be used on arrays and pointers, found integer.'),
    ('BEGIN { print(foo); }',
     "stdin:1:9-18: ERROR: Unknown identifier: 'foo'"),
    ('BEGIN { print(sarg0); }',
     "stdin:1:9-20: ERROR: The sarg0 builtin can only be used with 'kprobes' and 'uprobes' probes"),
    ('uprobe:/bin/sh:f { print(arg7); }',
     "stdin:1:20-30: ERROR: x86_64 doesn't support arg7"),
    ('BEGIN { $x = comm.0; }',
     "stdin:1:14-20: ERROR: Can not access index 0 on expression of type 'string[16]'"),
    ('BEGIN { print(sizeof(foo)); }',
     "stdin:1:9-25: ERROR: Unknown identifier: 'foo'"),
    ('BEGIN { @ = str(1, -1); }',
     'stdin:1:13-23: ERROR: strcannot use negative length (-1)'),
    ('BEGIN { @ = buf(1); }',
     'stdin:1:13-19: ERROR: buf() expects a length argument for non-array type integer'),
    ('BEGIN { @ = buf(1, -1); }',
     'stdin:1:13-23: ERROR: buf cannot use negative length (-1)'),
    ('BEGIN { @ = ksym("a"); }',
     'stdin:1:13-22: ERROR: ksym() expects an integer or pointer argument'),
    ('BEGIN { @ = ntop("a"); }',
     'stdin:1:13-22: ERROR: ntop() argument must be 4 or 16 bytes in size'),
    ('BEGIN { join("a"); }',
     'stdin:1:9-18: ERROR: () only supports int or pointer arguments (string provided)'),
    ('BEGIN { @ = strncmp("a", "b", -1); }',
     'stdin:1:13-34: ERROR: Builtin strncmp requires a non-negative size'),
    ('BEGIN { @ = kstack(-1); }',
     "stdin:1:13-23: ERROR: kstack([int limit]): limit shouldn't exceed 1024, 18446744073709551615 given"),
    ('BEGIN { @ = kstack(pid); }',
     'stdin:1:13-24: ERROR: kstack() expects a integer literal (integer provided)'),
    ('BEGIN { @x = 1; @y = @x + count(); }',
     'stdin:1:27-34: ERROR: count() should be directly assigned to a map'),
    ('BEGIN { exit(); @x = exit(); }',
     'stdin:1:22-28: ERROR: exit() should not be used in an assignment or as a map key'),
    ('BEGIN { @x[count()] = 1; }',
     'stdin:1:9-19: ERROR: count() should be directly assigned to a map'),
    ('BEGIN { $x = printf("a"); }',
     'stdin:1:14-25: ERROR: printf() should not be used in an assignment or as a map key'),
    ('BEGIN { printf("%d\\n", printf("a")); }',
     'stdin:1:9-36: ERROR: printf: %d specifier expects a value of type integer (none supplied)'),
    ('BEGIN { @ = lhist(1, -1, 10, 1); }',
     'stdin:1:13-32: ERROR: lhist() min must be non-negative (provided min -1)'),
    ('BEGIN { @ = lhist(1, 0, 100000, 1); }',
     'stdin:1:13-35: ERROR: lhist() too many buckets, must be <= 1000 (would need 100000)'),
    ('BEGIN { @ = lhist(1, 0, pid, 1); }',
     'stdin:1:13-32: ERROR: lhist() expects a integer literal (integer provided)'),
    ('BEGIN { @ = reg(1); }',
     'stdin:1:13-19: ERROR: reg can not be used with "BEGIN" probes'),
    ('BEGIN { @ = "a"; @ = hist(1); }',
     "stdin:1:18-19: ERROR: Type mismatch for @: trying to assign value of type 'hist' when map already contains a value of type 'string[2]"),
    ('BEGIN { $x = 1; $x = ustack; }',
     "stdin:1:20-21: ERROR: Type mismatch for $x: trying to assign value of type 'ustack' when variable already contains a value of type 'int64'"),
    ('BEGIN { time(1); }',
     'stdin:1:9-16: ERROR: time() expects a string literal (integer provided)'),
    ('BEGIN { @ = strftime(1, 2); }',
     'stdin:1:13-27: ERROR: strftime() expects a string literal (integer provided)'),
    ('BEGIN { @x = 1; print(@x, "a"); }',
     'stdin:1:17-31: ERROR: print() expects a integer literal (string provided)'),
    ('BEGIN { $x = (uint8 *)1; $y = $x.a; }',
     "stdin:1:31-34: ERROR: Can not access field 'a' on type 'unsigned int8 *'. Try dereferencing it first, or using '->'"),
    ('BEGIN { $x = *"a"; }',
     "stdin:1:14-15: ERROR: The dereference operator can not be used on expressions of type 'string[2]'"),
    ('BEGIN { $x = pid; $x++; $s = "a"; $s++; }',
     "stdin:1:35-39: ERROR: The ++ operator can not be used on expressions of type 'string[2]'"),
    ('BEGIN { @ = 1; @ += "a"; }',
     "stdin:1:16-24: ERROR: Type mismatch for '+': comparing 'int64' with 'string[2]'"),
    ('BEGIN { $x = arg0; }',
     "stdin:1:14-18: ERROR: The arg0 builtin can only be used with 'kprobes', 'uprobes' and 'usdt' probes"),
    ('profile:hz:99 { print(func); }',
     "stdin:1:17-27: ERROR: The func builtin can not be used with 'profile' probes"),
    ('BEGIN { zero(1); }',
     'stdin:1:9-16: ERROR: zero() expects a map to be provided'),
    ('BEGIN { @ = sum(1, 2); }',
     'stdin:1:13-22: ERROR: sum() requires one argument (2 provided)'),
    ('BEGIN { @ = cgroupid(1); }',
     'stdin:1:13-24: ERROR: cgroupid() expects a string literal (integer provided)'),
    ('interval:x:1 { }',
     'stdin:1:1-13: ERROR: x is not an accepted unit of time'),
    ('profile:hz:0 { }',
     'stdin:1:1-13: ERROR: profile frequency should be a positive integer'),
    ('BEGIN { exit() }\ni:m:5 { }',
     'stdin:1-2: ERROR: m is not an accepted unit of time'),
    ('BEGIN / "a" / { }',
     'stdin:1:7-14: ERROR: Invalid type for predicate: string'),
    ('BEGIN /comm/ { }',
     'stdin:1:7-13: ERROR: Invalid type for predicate: string'),
    ('BEGIN\n/ 1 &&\n  "a" / { }',
     "stdin:2-3: ERROR: Type mismatch for '&&': comparing 'int64' with 'string[2]'"),
    # reads of aggregations are of the aggregation's type
    ('BEGIN { @c = count(); if (@c > 1) { } }',
     "stdin:1:26-33: ERROR: Type mismatch for '>': comparing 'count' with 'int64'"),
    ('BEGIN { @s = sum(5); printf("%d\\n", @s); }',
     "stdin:1:22-40: ERROR: printf: %d specifier expects a value of type integer (sum supplied)"),
    ('BEGIN { @c = count(); if (@c) { } }', "stdin:1:1-1: ERROR: Invalid condition in if(): count"),
    ('BEGIN { @c = count(); @x = -@c; }',
     "stdin:1:28-29: ERROR: The - operator can not be used on expressions of type 'count'"),
    ('BEGIN { @c = count(); @k[1] = @c; @k[2] = 5; }',
     "stdin:1:35-40: ERROR: Type mismatch for @k: trying to assign value of type 'int64' when "
     "map already contains a value of type 'count"),
    ('BEGIN { @m = min(1); @x = max(2); if (@m < @x) { } }',
     "stdin:1:38-46: ERROR: Type mismatch for '<': comparing 'min' with 'max'"),
    ('BEGIN { @c = count(); @x = @c ? 1 : 2; }',
     "stdin:1:28-38: ERROR: Invalid condition in ternary: count"),
    ('BEGIN { @c = count(); @c++; }',
     "stdin:1:23-27: ERROR: The ++ operator can not be used on expressions of type 'count'"),
]


@pytest.mark.parametrize("program, first_line", SEMANTIC_ERRORS)
def test_semantic_errors(program, first_line):
    assert error(program) == first_line


@pytest.mark.parametrize("program, first_line", [
    # where pyebpf is stricter or clearer than bpftrace 0.17 (which refuses
    # these later, or only without --unsafe)
    ('BEGIN { while ("a") { } }', "stdin:1:9-14: ERROR: Invalid condition in while(): string"),
    ("BEGIN { @ = lhist(1, 10, 0, 1); }", "stdin:1:13-31: ERROR: lhist() min must be less "
     "than max (provided min 10 and max 0)"),
    ("BEGIN { @ = lhist(1, 0, 10, 0); }",
     "stdin:1:13-31: ERROR: lhist() step must be >= 1 (0 provided)"),
    ("BEGIN { @ = lhist(1, 0, $1, 1); }",
     "stdin:1:13-31: ERROR: lhist() step is too large for the given range (provided step 1 "
     "for range 0)"),
    ("BEGIN { unroll($1) { } }", "stdin:1:9-19: ERROR: unroll minimum value is 1"),
    ("BEGIN { $x = (struct foo)1; }", "stdin:1:14-26: ERROR: Unknown struct/union: 'struct foo'"),
    ('BEGIN { printf("%d", @x) }', "stdin:1:22-24: ERROR: Undefined map: @x"),
    ("BEGIN { @x = count(); @x[1] = count(); }", "stdin:1:23-28: ERROR: Argument mismatch for "
     "@x: trying to access with arguments: [unsigned int64] when map expects arguments: []"),
    ("BEGIN { @x = 1; } END { @x = hist(1); }", "stdin:1:25-27: ERROR: Type mismatch for @x: "
     "trying to assign value of type 'hist' when map already contains a value of type 'int64"),
    ("BEGIN { @x = ustack(1, 2, 3); }",
     "stdin:1:14-29: ERROR: ustack() takes up to 2 arguments (3 provided)"),
    ('uprobe:/bin/sh:f { reg("xx") }',
     "stdin:1:20-29: ERROR: 'xx' is not a valid register on this architecture (x86_64)"),
    ("BEGIN { continue }", "stdin:1:9-17: ERROR: continue used outside of a loop"),
    ("BEGIN { $x = 1; $x = (uint8)2; exit() }", None),
])
def test_more_semantic_errors(program, first_line):
    if first_line is None:
        run(program)
    else:
        assert error(program) == first_line


#: errors bpftrace 0.17 gives only with --unsafe (pyebpf has no safe mode)
UNSAFE_ERRORS = [
    ('BEGIN { signal("SIGKILL"); }',
     'stdin:1:9-26: ERROR: signal can not be used with "BEGIN" probes'),
    ('profile:hz:99 { signal("SIGFOO"); }',
     "stdin:1:17-33: ERROR: SIGFOO is not a valid signal"),
    ("profile:hz:99 { signal(65); }",
     "stdin:1:17-27: ERROR: 65 is not a valid signal, allowed range: [1,64]"),
    ('profile:hz:99 { signal("a", 1); }',
     "stdin:1:17-31: ERROR: signal() takes up to one argument (2 provided)"),
]


@pytest.mark.parametrize("program, first_line", UNSAFE_ERRORS)
def test_unsafe_function_errors(program, first_line):
    assert error(program) == first_line


def test_signal_takes_a_name_or_an_integer():
    run('profile:hz:99 { signal("SIGUSR1"); signal(9); signal(pid % 10 + 1) }')
    assert error('profile:hz:99 { signal(comm) }') == \
        "stdin:1:17-29: ERROR: signal only accepts string literals or integers"


@pytest.mark.skipif(shutil.which("bpftrace") is None, reason="bpftrace is not installed")
def test_unsafe_errors_match_the_installed_bpftrace():
    for program, first_line in UNSAFE_ERRORS:
        out = subprocess.run(["bpftrace", "--unsafe", "-e", program], capture_output=True,
                             text=True, timeout=60).stderr
        lines = [ln for ln in out.splitlines() if "RLIMIT" not in ln and "WARNING" not in ln]
        assert lines[0] == first_line, program


#: positional parameters: (program, parameters, bpftrace's first line or None: no error)
PARAM_CASES = [
    ('BEGIN { printf("%s\\n", str($1 + 5)); exit() }', ["abc"],
     "stdin:1:31-34: ERROR: only addition of a single constant less or equal to the length "
     "of $1 (which is 3) is allowed inside str()"),
    ('BEGIN { printf("%s\\n", str($1 - 1)); exit() }', ["abc"],
     "stdin:1:31-34: ERROR: only addition of a single constant less or equal to the length "
     "of $1 (which is 3) is allowed inside str()"),
    ('BEGIN { printf("%s\\n", str($#)); exit() }', ["abc"],
     "stdin:1:24-30: ERROR: use $#, not str($#)"),
    ('BEGIN { printf("%s\\n", str(1 + $1 * 2)); exit() }', ["abc"],
     "stdin:1:24-39: ERROR: str() only accepts positional parameters directly or with a "
     "single constant offset added"),
    ('BEGIN { printf("%s\\n", $1); exit() }', ["abc"],
     'stdin:1:24-26: ERROR: $1 used numerically but given "abc". Try using str($1).'),
    ("BEGIN { @[$1] = count(); exit() }", ["abc"],
     'stdin:1:9-13: ERROR: $1 used numerically but given "abc". Try using str($1).'),
    ('BEGIN { printf("%s %d %d\\n", str($1 + 1), $2, $#); exit() }', ["abc", "010"], None),
    ('BEGIN { printf("%d %d\\n", $1, $3); exit() }', ["-5"], None),
    ("BEGIN { unroll($1) { @i++ } exit() }", ["3"], None),
]


@pytest.mark.parametrize("program, params, first_line", PARAM_CASES)
def test_positional_parameters(program, params, first_line):
    if first_line is None:
        run(program, params=tuple(params))
    else:
        assert error(program, params=tuple(params)) == first_line


@pytest.mark.skipif(shutil.which("bpftrace") is None, reason="bpftrace is not installed")
def test_positional_parameters_match_the_installed_bpftrace():
    for program, params, first_line in PARAM_CASES:
        proc = subprocess.run(["bpftrace", "-e", program, "--", *params], capture_output=True,
                              text=True, timeout=60)
        lines = [ln for ln in proc.stderr.splitlines() if "RLIMIT" not in ln]
        if first_line is None:
            assert proc.returncode == 0 and not lines, (program, proc.stderr)
        else:
            assert lines[0] == first_line, program


def test_param_values_read_as_bpftrace_reads_them():
    # (an empty parameter given is refused, as bpftrace refuses it; one not
    # given at all is 0: test_bt_params)
    assert [param_int(v) for v in ("5", "010", "0x10", "-5", "", " 7", "abc", "5x")] == [
        5, 8, 16, -5, None, 7, None, None]
    script, _ = run("BEGIN { unroll($1) { } }", params=("0x10",))
    assert script.probes[0].block.stmts[0].count.type == I64


def test_signal_names_as_bpftrace_reads_them():
    assert [signal_number(n) for n in ("SIGKILL", "KILL", "kill", "sigusr1", "USR2", "SIGPOLL",
                                       "SIGFOO", "", "9")] == [9, 9, 9, 10, 12, 29, None, None,
                                                               None]
    run('k:f { signal("KILL") }')


@pytest.mark.parametrize("program, first_line", [
    ('kprobe:f { printf("%s", path(arg0)) }',
     "stdin:1:25-35: ERROR: path() is not supported by pyebpf"),
    ("BEGIN { @ = skboutput(1) }", "stdin:1:13-25: ERROR: skboutput() is not supported by pyebpf"),
    ("uprobe:/bin/sh:f { print(args->x) }",
     "stdin:1:1-17: ERROR: No debuginfo found for /bin/sh"),       # (bpftrace's words)
])
def test_what_pyebpf_does_not_support_is_refused_clearly(program, first_line):
    assert error(program) == first_line


def test_several_errors_are_reported_together():
    with pytest.raises(LangError) as e:
        run("BEGIN { $a = $x; $b = $y; }")
    # as bpftrace prints them
    assert str(e.value) == ("stdin:1:14-16: ERROR: Undefined or undeclared variable: $x\n"
                            "BEGIN { $a = $x; $b = $y; }\n"
                            "             ~~\n"
                            "stdin:1:23-25: ERROR: Undefined or undeclared variable: $y\n"
                            "BEGIN { $a = $x; $b = $y; }\n"
                            "                      ~~")
    assert [d.pos for d in e.value.diagnostics] == [ast.Pos(1, 14, 16), ast.Pos(1, 23, 25)]


def test_an_error_over_several_lines_names_the_lines():
    with pytest.raises(LangError) as e:
        run('BEGIN {\n printf("%d %d\\n",\n   1) }')
    assert str(e.value) == ("stdin:2-3: ERROR: printf: Not enough arguments for format "
                            "string (1 supplied, 2 expected)")


@pytest.mark.skipif(shutil.which("bpftrace") is None, reason="bpftrace is not installed")
def test_semantic_errors_match_the_installed_bpftrace():
    for program, first_line in SEMANTIC_ERRORS:
        out = subprocess.run(["bpftrace", "-e", program], capture_output=True, text=True,
                             timeout=60).stderr
        lines = [ln for ln in out.splitlines() if "RLIMIT" not in ln and "WARNING" not in ln]
        assert lines[0] == first_line, program


@pytest.mark.parametrize("program, where", [
    ("BEGIN { @a = avg(5); @d = @a; }", "stdin:1:27-29"),
    ("BEGIN { @a = stats(5); $x = @a; }", "stdin:1:29-31"),
    ("BEGIN { @h = hist(5); @t = (@h, 1); }", "stdin:1:28-31"),
    ("BEGIN { @h = lhist(5, 0, 10, 1); @d[1] = @h; }", "stdin:1:42-44"),
])
def test_reads_of_averages_and_histograms_are_refused(program, where):
    # bpftrace 0.17 takes them and copies a part only (an avg copy prints 0,
    # a hist copy nothing): refused, naming the map read
    msg = error(program)
    assert msg.startswith(where + ": ERROR: the value of a") and "cannot be read" in msg, msg


def test_kernel_structs_are_typed_from_btf():
    script, a = run("BEGIN { $t = (struct task_struct *)curtask; $p = $t->pid; "
                    "$c = $t->comm; $w = $t->se.load.weight; $q = $t->real_parent; }")
    v = a.variables[script.probes[0]]
    assert v["p"] == int_type(4, True) and v["c"] == string_type(16)
    assert v["w"] == int_type(8, False)
    assert v["t"].kind == "pointer" and v["q"].kind == "pointer"
    assert v["q"].elem == v["t"].elem and v["t"].elem.struct.origin == "btf"


@pytest.mark.parametrize("program, message", [
    ("BEGIN { $t = (struct nonexist_xyz *)curtask; }",
     "stdin:1:14-37: ERROR: Unknown struct/union: 'struct nonexist_xyz'"),
    ("BEGIN { $t = (struct task_struct *)curtask; @x = $t->no_such_member; }",
     "ERROR: Struct/union of type 'struct task_struct' does not contain a field named "
     "'no_such_member'"),
])
def test_kernel_struct_errors(program, message):
    assert message in error(program)
