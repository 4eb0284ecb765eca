"""The C definitions pass (pyebpf.lang.cdefs) and the record model
(pyebpf.lang.records): layouts checked against gcc's, types, errors, and
how struct and array values print (no kernel needed)."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from pyebpf.lang import ast
from pyebpf.lang.cdefs import CDefinitionError, definitions
from pyebpf.lang.errors import LangError
from pyebpf.lang.layout import decode
from pyebpf.lang.output import format_value, json_value
from pyebpf.lang.parser import parse
from pyebpf.lang.sema import analyse
from pyebpf.lang.types import int_type, record_type, string_type

#: struct definitions whose layout must be gcc's: padding, nesting, anonymous
#: members, arrays of every dimension, unions, bit fields in every position
LAYOUTS = [
    "struct a1 { char c; int i; char d; }",
    "struct a2 { char c; long l; short s; }",
    "struct a3 { short s[3]; char c; }",
    "struct a4 { int y[2][2]; char z[3][5]; long w; }",
    "struct a5 { char c; struct { short s; long l; } in; char d; }",
    "struct a6 { char c; union { int i; char b[6]; } u; char e; }",
    "struct a7 { int k; struct { char x; int y; }; char z; }",
    "struct a8 { char c; union { long q; short r; }; }",
    "union a9 { char c; int i; long l[2]; }",
    "struct b1 { unsigned int a:4, b:8, c:3, d:1, e:16; }",
    "struct b2 { char c; unsigned int a:7, b:30; short s; }",
    "struct b3 { unsigned char a:3, b:6; unsigned short c:9, d:9; }",
    "struct b4 { int a:5; int :0; int b:3; long c:40; char d; }",
    "struct b5 { char c; unsigned long a:33, b:33; }",
    "struct b6 { short s; unsigned int a:20; unsigned int b:20; }",
    "struct c1 { void *p; char *s; int (*f)(int); unsigned char m[6]; }",
    "struct c2 { char c; struct a1 arr[3]; struct b1 bits; }",
]


def _fields_of(rec, prefix=""):
    """(C access path, offset in bits, width in bits or None) of every named
    field of ``rec``, through nested and anonymous members."""
    out = []
    for f in rec.fields:
        path = f"{prefix}{f.name}" if f.name else prefix.rstrip(".")
        if f.type.struct is not None and f.type.kind == "record":
            inner = _fields_of(f.type.struct, f"{path}." if f.name else prefix)
            out.extend((p, o + f.offset * 8, w) for p, o, w in inner)
        elif f.bitfield is not None:
            out.append((path, f.offset * 8 + f.bitfield.shift, f.bitfield.width))
        else:
            out.append((path, f.offset * 8, None))
    return out


def _defs(*texts: str):
    script = parse(" ".join(texts) + " BEGIN { }")
    return definitions(script)


def test_layouts_are_gccs(tmp_path) -> None:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    d = _defs(*(t + ";" for t in LAYOUTS))
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <string.h>"]
    lines += [t + ";" for t in LAYOUTS]
    lines.append("static int bit(const unsigned char *p, int n) { int i = 0; "
                 "while (i < n * 8 && !(p[i / 8] >> (i % 8) & 1)) i++; return i; }")
    lines.append("static int width(const unsigned char *p, int n) { int c = 0; "
                 "for (int i = 0; i < n * 8; i++) c += p[i / 8] >> (i % 8) & 1; return c; }")
    lines.append("int main(void) {")
    expected = []
    for text in LAYOUTS:
        word, name = text.split()[:2]
        rec = d.record(f"{word} {name}")
        ctype = f"{word} {name}"
        lines.append(f'printf("{name} %zu %zu\\n", sizeof({ctype}), _Alignof({ctype}));')
        expected.append(f"{name} {rec.size} {rec.align}")
        for path, offset, width in _fields_of(rec):
            if width is None:
                lines.append(f'printf("{name}.{path} %zu\\n", offsetof({ctype}, {path}) * 8);')
                expected.append(f"{name}.{path} {offset}")
            else:      # a bit field: set all its bits in zeroed memory, find them
                lines.append(f"{{ {ctype} v; memset(&v, 0, sizeof v); v.{path} = -1; "
                             f'printf("{name}.{path} %d:%d\\n", bit((void *)&v, sizeof v), '
                             f"width((void *)&v, sizeof v)); }}")
                expected.append(f"{name}.{path} {offset}:{width}")
    lines.append("return 0; }")
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    proc = subprocess.run(["gcc", "-w", "-o", str(exe), str(src)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    assert got.split("\n")[:-1] == expected


def test_types_of_members() -> None:
    d = _defs("struct s { char name[8]; unsigned char raw[3]; int *p; void *v; "
              "struct s *next; enum e { A, B = 5, C } k; long long q; _Bool b; };")
    rec = d.record("struct s")
    types = {f.name: f.type for f in rec.fields}
    assert types["name"] == string_type(8)              # char[N]: bpftrace's string
    assert str(types["raw"]) == "uint8[3]"               # other arrays stay arrays
    assert str(types["p"]) == "int32 *" and types["v"].kind == "pointer"
    assert types["next"].elem.struct is rec              # a pointer to itself
    assert types["k"] == int_type(4, False) and d.enums == {"A": 0, "B": 5, "C": 6}
    assert types["q"] == int_type(8, True) and types["b"] == int_type(1, False)
    assert d.type_named("enum e") == int_type(4, False)
    assert d.type_named("uint16_t") == int_type(2, False)
    assert d.type_named("struct nonexistent_xyz") is None


def test_missing_semicolons_are_forgiven_as_clang_forgives_them() -> None:
    d = _defs("struct Foo { struct { int m[1] } y; struct { int n } a; }")
    assert [f.name for f in d.record("struct Foo").fields] == ["y", "a"]


def test_a_member_of_a_kernel_struct_is_sized_from_btf() -> None:
    try:
        from pyebpf.lang.btftypes import record
        task = record("struct task_struct")
    except OSError:
        task = None
    if task is None:
        pytest.skip("no kernel BTF")
    d = _defs("struct foo { char c; struct task_struct t; }")
    foo = d.record("struct foo")
    assert foo.size == -(-(task.align + task.size) // task.align) * task.align
    assert foo.fields[1].type.struct is task


@pytest.mark.parametrize("program, text", [
    # a script that redefines a kernel struct gets no kernel type for its members
    ("struct task_struct { struct thread_info x; } BEGIN { }",
     "stdin:1:41: error: field has incomplete type 'struct thread_info'"),
    ("struct nope_xyz { struct undefined_xyz u; } BEGIN { }",
     "stdin:1:40: error: field has incomplete type 'struct undefined_xyz'"),
    ("BEGIN { }", None),
    ("\nstruct A { int a b; } BEGIN { }", "stdin:2:18: error: syntax error before 'b'"),
    ("struct A { mystery_t x; } BEGIN { }", "error: unknown type name in a declaration"),
])
def test_bad_definitions_are_refused_as_clang_words_them(program: str, text: str | None):
    script = parse(program)
    if text is None:
        definitions(script)
        return
    with pytest.raises(CDefinitionError) as e:
        definitions(script)
    assert isinstance(e.value, LangError)
    assert text in str(e.value)


def _analysed(program: str):
    script = parse(program)
    analyse(script)
    return script


def _sizes(script):
    stmts = script.probes[0].block.stmts
    return [a.size for a in stmts[-1].expr.args[1:]]


def test_sizeof_types_expressions_and_tuples() -> None:
    s = _analysed('struct Foo { int x; char c; } enum E { P, Q }; BEGIN { $x = 1; '
                  '$t = ((int8)1, (int64)2, "abc"); '
                  'printf("%d %d %d %d %d %d %d %d\\n", sizeof(struct Foo), '
                  'sizeof((*(struct Foo*)0).c), sizeof(1 == 1), sizeof($x), sizeof(uint16), '
                  'sizeof($t), sizeof(enum E), sizeof(uint32_t)); }')
    assert _sizes(s) == [8, 1, 8, 8, 2, 24, 4, 4]


def test_casts_members_and_indexes_are_typed() -> None:
    s = _analysed("struct B { int y[2][3]; struct { short s; } in; unsigned f:3; } "
                  "BEGIN { $b = (struct B *)0; @a = $b->y[1]; @e = $b->y[1][2]; "
                  "@s = $b->in.s; @f = $b->f; @v = *$b; }")
    stmts = s.probes[0].block.stmts
    assert str(stmts[0].value.type) == "struct B *"
    assert str(stmts[1].value.type) == "int32[3]"
    assert stmts[2].value.type == int_type(4, True)
    assert stmts[3].value.type == int_type(2, True)
    assert stmts[4].value.type.kind == "int"
    assert stmts[5].value.type.kind == "record" and str(stmts[5].value.type) == "struct B"


@pytest.mark.parametrize("program, message", [
    ("struct A { int x[4]; } BEGIN { $a = (struct A *)0; @x = $a->x[5]; }",
     "the index 5 is out of bounds for array of size 4"),
    ("struct A { int x; } BEGIN { $a = (struct A *)0; @x = $a->nope; }",
     "Struct/union of type 'struct A' does not contain a field named 'nope'"),
    ("struct A { int x; } BEGIN { $a = (struct A)0; }",
     'Cannot cast to struct type "struct A"'),
    ("BEGIN { $a = (struct nowhere_xyz *)0; }", "Unknown struct/union: 'struct nowhere_xyz'"),
    ("BEGIN { @x = sizeof(struct nowhere_xyz); }", "Unknown struct/union"),
])
def test_misuses_are_refused(program: str, message: str) -> None:
    with pytest.raises(LangError) as e:
        _analysed(program)
    assert message in str(e.value)


def _foo():
    return _defs("struct Foo { int m; struct { int a[2]; char s[4]; } in; long *p; }")


def test_struct_and_array_values_print_as_bpftrace_prints_them() -> None:
    t = record_type(_foo().record("struct Foo"))
    raw = (2).to_bytes(4, "little") + (5).to_bytes(4, "little") + (6).to_bytes(4, "little") \
        + b"ab\0\0" + (32).to_bytes(8, "little")
    v = decode(t, raw)
    assert v.asdict()["m"] == 2 and hash(v) == hash(decode(t, raw))    # keys of maps
    assert format_value(t, v) == "{ .m = 2, .in = { .a = [5,6], .s = ab }, .p = 32 }"
    assert format_value(t, v, key=True) == "{.m=2,.in={.a=[5,6],.s=ab},.p=0x20}"
    assert json_value(t, v) == ('{"type": "value", "data": { "m": 2, "in": '
                                '{ "a": [5,6], "s": "ab" }, "p": 32 }}')


def test_a_script_struct_node_keeps_its_text_and_place() -> None:
    s = parse("\n  struct P { int q; }; BEGIN { }")
    assert s.c_definitions == [s.c_definitions[0]]
    d = s.c_definitions[0]
    assert isinstance(d, ast.CDefinition) and d.text == "struct P { int q; };"
    assert (d.pos.line, d.pos.column) == (2, 3)


@pytest.mark.parametrize("program, message", [
    ("struct A { int x[4]; } BEGIN { @m = macaddr(((struct A *)0)->x); }",
     "macaddr() argument must be 6 bytes in size"),
    ('BEGIN { @m = macaddr(("a", 1)); }', "macaddr() only supports array or pointer arguments"),
])
def test_macaddr_arguments_are_checked(program: str, message: str) -> None:
    with pytest.raises(LangError) as e:
        _analysed(program)
    assert message in str(e.value)


def test_a_mac_address_prints_in_upper_case_hex() -> None:
    from pyebpf.lang.types import Type
    assert format_value(Type("macaddr", 6), bytes([5, 4, 0xab, 2, 1, 0xff])) == \
        "05:04:AB:02:01:FF"


def test_one_map_holds_one_struct_type() -> None:
    # bpftrace 0.17's words (its doubled closing quote included) and place
    with pytest.raises(LangError) as e:
        _analysed("struct A { int x; } struct B { int y; } BEGIN { @a = *(struct A *)0; "
                  "@a   =   (*(struct B *)0); }")
    assert str(e.value).startswith(
        "stdin:1:76-77: ERROR: Type mismatch for @a: trying to assign value of type "
        "'struct B' when map already contains a value of type 'struct A''")


def test_directives_the_preprocessor_pass_reads() -> None:
    from pyebpf.lang.preprocess import HeaderNotFound, directive, header_macros
    assert directive("#define FOO 3") == ("define", "FOO", "3")
    assert directive("# define  FOO (1 << 2) // why") == ("define", "FOO", "(1 << 2)")
    assert directive("#define FOO(x) x")[0] == "other"        # function-like: not read
    assert directive('#include "a/b.h"') == ("include", "a/b.h", "")
    errno = header_macros("errno.h")           # through the headers it includes
    assert errno["EPERM"] == "1" and errno["EWOULDBLOCK"] == errno["EAGAIN"]
    with pytest.raises(HeaderNotFound):
        header_macros("lol/no.h")
