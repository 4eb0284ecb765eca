"""bpftrace functions and builtins of issue 25: bswap, pton, strcontains,
cgroup_path, uptr/kptr, cat, system (only with ``unsafe``), strftime
values kept in variables and maps, numaid, username, tuple elements
(``$t.0``, ``@t.1``) and a ternary whose branches are statements --
against bpftrace 0.17 where it prints, through ``pyebpf.lang.compile``."""
from __future__ import annotations

import pytest

from pyebpf import lang
from pyebpf.lang.errors import LangError
from pyebpf.lang.parser import parse
from pyebpf.lang.sema import analyse
from pyebpf.lang.types import Type, int_type

from .harness import compare_with_bpftrace


def _first_error(program: str, **kw: bool) -> str:
    with pytest.raises(LangError) as e:
        analyse(parse(program), None, **kw)
    return str(e.value).splitlines()[0]


def test_types() -> None:
    script = parse('BEGIN { print((bswap((int16)1), pton("::1"), strcontains("a", "b"), '
                   'uptr((int32 *)8), strftime("%H", 1))) }')
    analyse(script, None)
    t = script.probes[0].block.stmts[0].expr.args[0].type
    assert t.elems == (int_type(2), Type("buffer", 16), int_type(8),
                       Type("pointer", 8, elem=int_type(4, True)),
                       Type("timestamp", 16, fmt="%H"))


def test_system_needs_unsafe_as_in_bpftrace() -> None:
    assert _first_error('BEGIN { system("echo hi %d", 3); exit(); }') == (
        "stdin:1:9-32: ERROR: system() is an unsafe function being used in safe mode")
    analyse(parse('BEGIN { system("echo hi %d", 3); exit(); }'), None, unsafe=True)


def test_refusals_as_bpftrace_words_them() -> None:
    assert _first_error('BEGIN { @ = pton("1.2.3"); }') == (
        "stdin:1:13-26: ERROR: pton() expects a valid IPv4/IPv6 address, got 1.2.3")
    assert _first_error('BEGIN { @ = bswap("a"); }') == (
        "stdin:1:13-23: ERROR: bswap() only supports integer arguments (string provided)")


@pytest.mark.kernel
def test_bswap_pton_strcontains_as_bpftrace() -> None:
    compare_with_bpftrace(
        'BEGIN { printf("%x %x %x %lx %x %lx\\n", bswap((int16)0x1234), '
        'bswap((int32)0x12345678), bswap((int8)0x12), bswap(0x1122334455667788), '
        'bswap(bswap(0x1234)), bswap(0x12340000 + 0x5678)); '
        '@b = bswap((int16)0x00ff); '
        'printf("%s %s\\n", ntop(2, pton("127.0.0.1")), ntop(10, pton("fe80::1:2"))); '
        '$s = "hello"; @c = strcontains("hello", "ll"); @d = strcontains($s, "lo"); '
        '@e = strcontains($s, "hellox"); @f = strcontains($s, ""); @g = strcontains(comm, "zq"); '
        'if (strcontains("abc", "a")) { printf("OK\\n"); } exit(); }', exact=True)


@pytest.mark.kernel
def test_tuple_elements_and_statement_ternary_as_bpftrace() -> None:
    compare_with_bpftrace(
        'BEGIN { $v = 99; $t = (0, 1, "str", (5, 6), $v); '
        'printf("%d %d %s %d %d %d\\n", $t.0, $t.1, $t.2, $t.3.0, $t.3.1, $t.4); '
        '@t = (0, -1, "str"); printf("%d %d %s\\n", @t.0, @t.1, @t.2); $x = @t; print($x); '
        '@k[$t.2] = $t.3; nsecs ? printf("yes\\n") : printf("no"); '
        '0 ? printf("yes\\n") : printf("no\\n"); exit(); }', exact=True)


@pytest.mark.kernel
def test_stored_strftime_cgroup_path_username_numaid_as_bpftrace() -> None:
    compare_with_bpftrace(
        'BEGIN { $t = strftime("%Y", nsecs); print($t); @s[1] = strftime("%Y", nsecs); '
        '@k[strftime("%Y", nsecs)] = 1; @tu = (1, strftime("%Y", nsecs)); '
        'print(cgroup_path(1)); print(cgroup_path(1, "uni*")); print(cgroup_path(123456789)); '
        '@u = username; @n = numaid; exit(); }', exact=True)


@pytest.mark.kernel
def test_cat_and_system_from_the_python_api(tmp_path: object) -> None:
    import pathlib
    f = pathlib.Path(str(tmp_path)) / "some file"
    f.write_text("12 34\n")
    prog = lang.compile(f'BEGIN {{ cat("%s", "{f}"); cat("/does/not/exist"); '
                        f'system("echo %d %s", 3, "x"); exit(); }}', unsafe=True)
    with prog.start() as run:
        events = [(e.kind, e.text, e.error) for e in run if e.kind != "exit"]
    assert events == [
        ("cat", "12 34\n", ""),
        ("cat", "", "ERROR: failed to open file '/does/not/exist': No such file or directory\n"),
        ("system", "3 x\n", "")]


@pytest.mark.kernel
def test_buf_of_strings_compared_and_printed_in_hex_as_bpftrace() -> None:
    compare_with_bpftrace(
        'BEGIN { @[buf("ok_key", 8)] = count(); @b[buf("ok_key", 6)] = 1; '
        '@v = buf("ok_value", 8); '
        'printf("%rx|%rh|%r\\n", buf("Hello\\0", 6), buf("Hello\\0", 6), buf("hi", 2)); '
        '$a = buf("hi", 2); $b = buf("bye", 3); $c = buf("hx", 2); '
        'printf("%d %d %d %d\\n", $a == $a, $a != $b, $a == $c, $a != $c); exit(); }',
        exact=True)


_STACK_ARGS_C = r"""
int counter = 7;
char small = 3;
__attribute__((noinline)) long many(long a, long b, long c, long d, long e, long f,
                                    long g, long h) { return a + b + c + d + e + f + g + h; }
int main(void) { volatile long r = many(1, 2, 3, 4, 5, 6, 70, 80) + counter + small; return 0; }
"""


@pytest.mark.kernel
def test_stack_arguments_and_uaddr_of_the_symbol_size_as_bpftrace(tmp_path: object) -> None:
    import pathlib
    import shutil
    import subprocess
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    d = pathlib.Path(str(tmp_path))
    (d / "sa.c").write_text(_STACK_ARGS_C)
    subprocess.run(["gcc", "-O1", "-no-pie", "-fno-pie", "-o", str(d / "sa"), str(d / "sa.c")],
                   check=True)
    exe = str(d / "sa")
    compare_with_bpftrace(
        f'uprobe:{exe}:many {{ printf("%d %d %d %d\\n", sarg0, sarg1, *uaddr("counter"), '
        f'*uaddr("small")); }}', command=exe, exact=True)


@pytest.mark.kernel
def test_system_and_cat_in_json_as_bpftrace_names_them() -> None:
    prog = lang.compile('BEGIN { system("echo hi"); cat("/does/not/exist"); exit(); }',
                        unsafe=True)
    with prog.start(json=True) as run:
        texts = [e.text for e in run if e.kind != "exit"]
    assert texts == ['{"type": "syscall", "data": "hi\\n"}\n', '{"type": "cat", "data": ""}\n']


def test_strerror_is_an_errno_printed_as_its_message() -> None:
    script = parse('BEGIN { $e = strerror(2); print($e) }')
    analyse(script, None)
    assert script.probes[0].block.stmts[0].value.type == Type("strerror", 8)
    assert _first_error('BEGIN { strerror("a"); }') == (
        "stdin:1:9-22: ERROR: strerror() only supports integer arguments (string provided)")
    assert _first_error('BEGIN { printf("%d", strerror(1)); }') == (
        'stdin:1:9-34: ERROR: printf: %d specifier expects a value of type integer '
        '(string supplied)')


@pytest.mark.kernel
def test_strerror_as_bpftrace() -> None:
    # print(), printf's %s, a variable, a map value, an errno no message has
    compare_with_bpftrace(
        'BEGIN { print(strerror(1)); printf("%s|\\n", strerror(2)); $e = strerror(5); '
        'print($e); print(strerror(999)); print(strerror(-1)); @a = strerror(13); exit(); }',
        exact=True)
