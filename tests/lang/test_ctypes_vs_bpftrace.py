"""C struct, union and array definitions in programs, run by ``pyebpf bt``
and by bpftrace 0.17 on the same process (tests/lang/ctypes_workload.c):
the outputs must be equal; and the same program through
``pyebpf.lang.compile``."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from .harness import BUILD, HERE, compare_with_bpftrace

pytestmark = pytest.mark.kernel

#: the workload's structs as a script defines them (a union member's type
#: is anonymous: bpftrace 0.17 stops on an anonymous union member)
DEFS = ("struct ctw_inner { short a; long b; }; "
        "struct ctw_sample { char tag; int nums[4]; int grid[2][3]; struct ctw_inner in; "
        "union { unsigned int word; unsigned char bytes[4]; } u; "
        "unsigned int lo : 3, mid : 9, hi : 20; int neg : 5; char name[8]; "
        "unsigned char raw[3]; long *ptr; }; "
        "struct ctw_pair { int m; int n; }; ")


@pytest.fixture(scope="module")
def w() -> str:
    """tests/lang/ctypes_workload.c built (without DWARF: bpftrace 0.17 reads
    a uprobe's binary's DWARF and stops on its anonymous union type)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    BUILD.mkdir(parents=True, exist_ok=True)
    src = HERE / "ctypes_workload.c"
    out = BUILD / "ctypes_workload"
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        subprocess.run(["gcc", "-O2", "-o", str(tmp), str(src)], check=True)
        os.replace(tmp, out)
    return str(out)


def test_struct_values_in_maps_keys_tuples_and_print(w: str) -> None:
    compare_with_bpftrace(
        DEFS + f"uprobe:{w}:take {{ $p = *(struct ctw_pair *)arg1; print($p); "
        "@k[*(struct ctw_pair *)arg1, 7] = 1; @t = (1, $p); @v = $p; @n = $p.n; "
        "@in = ((struct ctw_sample *)arg0)->in; exit(); }", command=w)


def test_arrays_one_and_two_dimensional(w: str) -> None:
    compare_with_bpftrace(
        DEFS + f"uprobe:{w}:take {{ $s = (struct ctw_sample *)arg0; @g = $s->grid; "
        "@x[$s->nums] = 1; $row = $s->grid[1]; @r = $row; @e = $row[2]; @m[0] = $s->grid; "
        "printf(\"%d %d %d\\n\", $s->nums[3], $s->grid[1][0], @m[0][0][2]); "
        "if ($s->nums == $s->nums) { printf(\"same\\n\"); } @raw = $s->raw; exit(); }",
        command=w)


def test_members_bit_fields_unions_strings_and_pointers(w: str) -> None:
    compare_with_bpftrace(
        DEFS + f"uprobe:{w}:take {{ $s = (struct ctw_sample *)arg0; "
        'printf("%d %d %d %d %d %s %c %d %d\\n", $s->lo, $s->mid, $s->hi, $s->neg, '
        "$s->in.a, $s->name, $s->tag, $s->u.bytes[2], sizeof(struct ctw_sample)); "
        'printf("%d %d %d %d\\n", $s->u.word, *$s->ptr, $s->raw[1], $s->in.b); '
        "exit(); }", command=w)


def test_struct_printed_as_json(w: str) -> None:
    compare_with_bpftrace(
        DEFS + f"uprobe:{w}:take {{ $p = *(struct ctw_pair *)arg1; print($p); "
        "@t = (0, $p); @a = ((struct ctw_sample *)arg0)->nums; exit(); }",
        "-f", "json", command=w)


def test_defines_and_sizeof() -> None:
    compare_with_bpftrace(
        "#define LIMIT (4 * 8)\nstruct Foo { int x; char c; } "
        'BEGIN { printf("%d %d %d %d %d\\n", LIMIT, sizeof(struct Foo), sizeof(uint16), '
        "sizeof(((int8)1, (int64)2)), sizeof(struct task_struct) > 0); exit(); }")


def test_the_same_through_the_python_api(w: str) -> None:
    from pyebpf import lang
    prog = lang.compile(DEFS + f"uprobe:{w}:take {{ @s = *(struct ctw_pair *)arg1; "
                        "@a = ((struct ctw_sample *)arg0)->grid; "
                        "@u = ((struct ctw_sample *)arg0)->u; exit(); }")
    with prog.start([w]) as run:
        for _ in run:                  # (until exit() stops it)
            pass
        maps = run.maps()
    assert maps["@s"].asdict() == {"m": 2, "n": 3}
    assert maps["@a"] == ((10, 11, 12), (13, 14, 15))
    assert maps["@u"].asdict() == {"word": 0x04030201, "bytes": (1, 2, 3, 4)}


MAC = ("struct mac { char tag; char pad[3]; unsigned char mac[6]; }; ")


@pytest.mark.parametrize("args", [(), ("-f", "json")])
def test_macaddr_of_an_array_and_of_a_pointer(w: str, args: tuple[str, ...]) -> None:
    # (bpftrace 0.17 writes a MAC address into JSON without quotes: so does pyebpf)
    compare_with_bpftrace(
        MAC + f"uprobe:{w}:take {{ $s = (struct mac *)arg0; "
        'printf("%s %s\\n", macaddr($s->mac), macaddr(arg1)); '
        "@[macaddr($s->mac)] = macaddr(arg0); @t = (1, macaddr($s->mac)); "
        "$m = macaddr(arg1); print($m); exit(); }", *args, command=w, exact=True)


def test_enumerators_of_the_script() -> None:
    compare_with_bpftrace('enum Color { RED, GREEN = 5, BLUE }; BEGIN { printf("%d %d\\n", '
                          "GREEN, BLUE); @[BLUE] = RED; exit(); }")


def test_buf_of_array_members(w: str) -> None:
    compare_with_bpftrace(
        DEFS + f"uprobe:{w}:take {{ $s = (struct ctw_sample *)arg0; "
        'printf("%r %r %r\\n", buf($s->raw), buf($s->nums), buf($s->name, 3)); exit(); }',
        command=w)
