"""Pointers in the bpftrace language: arithmetic in units of the pointee
(``p + 1``, ``p - 1``, ``++``, ``--``, ``+=``/``-=`` on variables and maps),
indexing (``p[i]``), dereference of the pointee's size, comparisons, and
pointer values printed as bpftrace 0.17 prints them."""
from __future__ import annotations

import pytest

from pyebpf import lang
from pyebpf.lang.errors import LangError
from pyebpf.lang.parser import parse
from pyebpf.lang.sema import analyse
from pyebpf.lang.types import Type, int_type

from .harness import bt_workload, compare_with_bpftrace

I32P = Type("pointer", 8, elem=int_type(4, True))


def _type(text: str) -> Type:
    script = parse(f"BEGIN {{ $p = (int32 *)32; print({text}) }}")
    analyse(script, None)
    return script.probes[0].block.stmts[1].expr.args[0].type


@pytest.mark.parametrize("text, want", [
    ("$p + 1", I32P), ("1 + $p", I32P), ("$p - 1", I32P),
    ("$p == 36", int_type(8, True)), ("$p < (int64 *)8", int_type(8, False)),
    ("$p[2]", int_type(4, True)), ("*($p + 1)", int_type(4, True)),
])
def test_types(text: str, want: Type) -> None:
    assert _type(text) == want


@pytest.mark.parametrize("text, message", [
    ("$p - (int32 *)8", "The - operator can not be used on expressions of types int32 *, int32 *"),
    ("3 - $p", "The - operator can not be used on expressions of types int64, int32 *"),
    ("$p * 2", "The * operator can not be used on expressions of types int32 *, int64"),
    ("$p && 1", "The && operator can not be used on expressions of types int32 *, int64"),
    ("$p[nsecs]", "The array index operator [] only accepts literal integer indices."),
])
def test_refused_as_bpftrace_refuses(text: str, message: str) -> None:
    with pytest.raises(LangError) as e:
        analyse(parse(f"BEGIN {{ $p = (int32 *)32; @x = {text}; }}"), None)
    assert message in str(e.value)


def test_compound_assignment_keeps_a_pointer_map() -> None:
    script = parse("BEGIN { @ = (int16 *)32; @ += 1; @ -= 2; }")
    a = analyse(script, None)
    assert a.maps["@"].value == Type("pointer", 8, elem=int_type(2, True))


@pytest.mark.kernel
def test_arithmetic_scaled_by_the_pointee_as_bpftrace() -> None:
    compare_with_bpftrace(
        "BEGIN { $p = (int32 *)32; $p++; @v = $p; @a = $p + 2; @b = $p - 1; @c = 2 + $p; "
        "@d = (int16 *)32; @d++; ++@d; @d--; @e = (int64 *)32; @e += 2; @e -= 1; "
        "@f = (int8 *)32; @f = @f + 3; @g = (uint32 **)100; @g++; "
        "@lt = $p > (int32 *)8; @k[$p] = 1; print(($p, 1)); "
        'printf("%d %p %lu\\n", $p, $p, $p); exit(); }', exact=True)


@pytest.mark.kernel
def test_indexing_and_dereference_read_the_pointee(tmp_path: object) -> None:
    w = bt_workload()
    # hosts: "alpha.example", "beta", "gamma.test" (btworkload.c)
    compare_with_bpftrace(
        f"usdt:{w}:btw:request {{ $c = (int8 *)arg0; $h = (uint16 *)arg0; "
        f"@[$c[0], $c[1], $h[1], *($h + 1), *(int32 *)arg0] = count(); }}",
        command=f"{w} 6 1")


@pytest.mark.kernel
def test_from_the_python_api() -> None:
    prog = lang.compile("BEGIN { @p = (int32 *)32; @p += 6; @q = (int64 *)32; @q--; exit(); }")
    with prog.start() as run:
        list(run)
        run.stop()
        maps = run.maps()
    assert maps["@p"] == 56 and maps["@q"] == 24


@pytest.mark.kernel
def test_pointer_values_in_json_as_bpftrace() -> None:
    compare_with_bpftrace("BEGIN { @ = (int32 *)32; @k[(int8 *)5] = 1; @t = ((int8 *)7, 1); "
                          "print(((int8 *)9, 2)); exit(); }", "-f", "json", exact=True)
