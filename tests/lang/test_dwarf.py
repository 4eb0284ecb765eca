"""A uprobe's arguments by name and a program's structs, from its DWARF
(``gcc -g``): ``args->name``, ``(struct S *)arg0``, ``bt -lv`` -- compared
with bpftrace 0.17 on a small program built here."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from pyebpf.elf.dwarf import DwarfTypes
from pyebpf.lang.listing import list_probes

from .harness import build_c, compare_with_bpftrace

# (its own program: a struct with an int, a char array and an int array; a
# nested struct through a pointer; parameters of several sizes and signs)
PROGRAM_C = r"""
#include <stdint.h>
struct inner { long deep; };
struct rec { int num; char label[12]; int trio[3]; struct inner *in; unsigned short tag; };
__attribute__((noinline)) int take(int *np, signed char small, uint16_t wide, struct rec *r,
                                   long neg)
{ return *np + small + wide + r->num + (int)neg; }
int main(void)
{
    struct inner in = { .deep = -77 };
    struct rec r = { .num = 4242, .label = "rec-label", .trio = { 7, 8, 9 }, .in = &in,
                     .tag = 65000 };
    int n = 31;
    return take(&n, -5, 60000, &r, -9) == 0;
}
"""


@pytest.fixture(scope="module")
def prog() -> str:
    return build_c("dwarf_prog", PROGRAM_C, "-g", "-O0")


def test_function_parameters_and_structs(prog: str) -> None:
    d = DwarfTypes(prog)
    params = d.function_params("take")
    assert params is not None
    assert [(p.name, p.type.c_name()) for p in params] == [
        ("np", "int*"), ("small", "signed char"), ("wide", "uint16_t"), ("r", "struct rec*"),
        ("neg", "long int")]
    assert [(p.type.size, p.type.signed) for p in params[1:3]] == [(1, True), (2, False)]
    rec = d.struct("struct rec")
    assert rec is not None and rec.size == 48
    assert [(m.name, m.offset, m.type.c_name()) for m in rec.members] == [
        ("num", 0, "int"), ("label", 4, "char[12]"), ("trio", 16, "int[3]"),
        ("in", 32, "struct inner*"), ("tag", 40, "short unsigned int")]
    assert rec.members[3].type.target.members[0].name == "deep"
    assert d.function_params("nosuch") is None and d.struct("struct nosuch") is None
    assert DwarfTypes("/bin/true").function_params("main") is None     # (no DWARF there)


@pytest.mark.kernel
@pytest.mark.parametrize("body", [
    'printf("%d %d %d %d\\n", *(args->np), args->small, args->wide, args->neg)',
    'printf("%c|%s|%d\\n", args->small + 70, args->r->label, args->r->num)',
    'printf("%d %d\\n", args->r->in->deep, args->r->tag)',
    'printf("%d %s\\n", ((struct rec *)arg3)->num, ((struct rec *)arg3)->label)',
])
def test_arguments_by_name_like_bpftrace(prog: str, body: str) -> None:
    compare_with_bpftrace(f"uprobe:{prog}:take {{ {body}; exit(); }}", command=prog)


def test_listing_with_parameters_like_bpftrace(prog: str) -> None:
    ours = list_probes(f"uprobe:{prog}:*a*", verbose=True)
    assert f"uprobe:{prog}:take" in ours and "    struct rec* r" in ours
    if shutil.which("bpftrace") is not None:
        theirs = subprocess.run(["bpftrace", "-lv", f"uprobe:{prog}:*a*"], capture_output=True,
                                text=True, timeout=60).stdout.splitlines()
        assert ours == theirs


def test_errors_as_bpftrace_words_them(prog: str) -> None:
    from pyebpf import lang
    from pyebpf.lang.errors import LangError
    for program, message in ((f"uprobe:{prog}:take {{ print(args->nosuch) }}",
                              "ERROR: Can't find function parameter nosuch"),
                             ("uprobe:/bin/true:main { print(args->x) }",
                              "ERROR: No debuginfo found for /bin/true")):
        with pytest.raises(LangError) as info:
            lang.compile(program)
        assert message in str(info.value)
        if shutil.which("bpftrace") is not None:
            theirs = subprocess.run(["bpftrace", "-e", program], capture_output=True, text=True,
                                    timeout=60).stderr
            assert str(info.value) in theirs
