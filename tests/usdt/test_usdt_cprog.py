"""tests/usdt/usdt_forms.c built with gcc and clang at -O0/-O2, -no-pie and as
a -fPIC shared library: every note parses, every argument decodes with the
size/sign/float the C source declares (its EXPECTED table), offsets and
semaphores resolve, readelf agrees, and together the builds exercise every
x86_64 form compilers emit.  The constants the program prints must equal the
decoded constants (the other values are checked by the tracing tests)."""
from __future__ import annotations

import collections
import platform
import shutil
import subprocess

import pytest
from usdt_testlib import (FORMS_MAIN_C, VARIANTS, build_forms, expected_table, has_readelf,
                          readelf_notes)

from pyebpf.usdt import ArgKind, UsdtFile

K = ArgKind
EXPECTED = expected_table()

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64",
                                reason="the expected forms are x86_64's")


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    out = tmp_path_factory.mktemp("usdt_forms")
    cache: dict[str, object] = {}

    def get(variant: str):
        if variant not in cache:
            try:
                cache[variant] = build_forms(variant, out)
            except FileNotFoundError as exc:
                cache[variant] = pytest.skip.Exception(f"{exc} is not installed")
            except RuntimeError as exc:
                cache[variant] = RuntimeError(str(exc))
        v = cache[variant]
        if isinstance(v, BaseException):
            if isinstance(v, pytest.skip.Exception):
                pytest.skip(str(v))
            raise v
        return v
    return get


def _run(variant: str, binary, tmp_path) -> list[list[str]]:
    """Run the built program once; its output lines split into words."""
    if VARIANTS[variant][2]:     # a shared library: link the driver against it
        driver = tmp_path / "driver"
        lib = binary
        cmd = ["gcc", "-o", str(driver), str(FORMS_MAIN_C), str(lib),
               f"-Wl,-rpath,{lib.parent}"]
        subprocess.run(cmd, check=True, capture_output=True)
        exe = driver
    else:
        exe = binary
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=30)
    return [line.split() for line in out.stdout.splitlines()]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_specs_match_the_c_types(variant, builds):
    f = UsdtFile(builds(variant))
    notes = f.notes()
    assert {n.provider for n in notes} == {"forms"}
    assert {n.name for n in notes} == set(EXPECTED)
    for n in notes:
        want = EXPECTED[n.name]
        assert n.arg_count == len(want), (n.name, n.args)
        for i, (a, (size, signed, fl)) in enumerate(zip(n.arguments, want)):
            assert a.decodable, f"{variant} {n.probe} arg {i}: {a.error}"
            assert (a.size, a.signed, a.is_float) == (size, signed, fl), \
                f"{variant} {n.probe} arg {i} {a.text}: got {a.ctype}"


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_offsets_and_semaphore(variant, builds):
    from elftools.elf.elffile import ELFFile
    path = builds(variant)
    f = UsdtFile(path)
    with open(path, "rb") as fh:
        elf = ELFFile(fh)
        probes_sec = elf.get_section_by_name(".probes")
        assert probes_sec is not None
        for n in f.notes():
            fh.seek(n.offset)
            assert fh.read(1) == b"\x90", n.probe
            if n.name == "sema":
                assert n.semaphore
                lo = probes_sec["sh_offset"]
                assert lo <= n.semaphore_offset < lo + probes_sec["sh_size"]
                assert n.semaphore_offset == n.semaphore_address - probes_sec["sh_addr"] + lo
            else:
                assert n.semaphore == 0 and n.semaphore_offset == 0
    if VARIANTS[variant][2]:
        assert f.elf.elf_type == "ET_DYN"
    elif "nopie" in variant:
        assert f.elf.elf_type == "ET_EXEC"


@pytest.mark.skipif(not has_readelf(), reason="readelf is not installed")
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_agrees_with_readelf(variant, builds):
    path = str(builds(variant))
    ours = [(n.provider, n.name, n.location, n.base, n.semaphore, n.args)
            for n in UsdtFile(path).notes()]
    assert ours == [(t.provider, t.name, t.location, t.base, t.semaphore, t.args)
                    for t in readelf_notes(path)]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_program_prints_what_it_passes(variant, builds, tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    lines = {words[0]: words[1:] for words in _run(variant, builds(variant), tmp_path)}
    notes = {n.name: n for n in UsdtFile(builds(variant)).notes()}
    for name, want in EXPECTED.items():
        printed = lines[name]
        if name == "sema":
            enabled, *printed = printed
            assert enabled == "0"          # nobody holds the semaphore
        assert len(printed) == len(want), (name, printed)
        for a, text in zip(notes[name].arguments, printed):
            if a.kind is K.CONST and not a.is_float:
                assert a.value == int(text), (variant, name, a.text, text)


GCC_FORMS = {
    # (kind, detail) -> a predicate on ArgSpec; all must occur in the gcc builds
    "register": lambda a: a.kind is K.REG and a.reg_width == 8,
    "32-bit sub-register": lambda a: a.kind is K.REG and a.reg_width == 4,
    "16-bit sub-register": lambda a: a.kind is K.REG and a.reg_width == 2,
    "8-bit sub-register": lambda a: a.kind is K.REG and a.reg_width == 1,
    "deref with offset": lambda a: a.kind is K.DEREF and a.offset != 0,
    "deref (%reg)": lambda a: a.kind is K.DEREF and a.offset == 0,
    "SIB": lambda a: a.kind is K.SIB and a.scale > 1 and a.offset == 0,
    "SIB scale 1": lambda a: a.kind is K.SIB and a.scale == 1,
    "SIB with offset": lambda a: a.kind is K.SIB and a.offset != 0,
    "sym(%rip)": lambda a: a.kind is K.RIP and a.symbol and a.offset == 0,
    "sym+off(%rip)": lambda a: a.kind is K.RIP and a.symbol and a.offset > 0,
    "sym(%reg)": lambda a: a.kind is K.SYM_REG,
    "sym(,%idx,scale)": lambda a: a.kind is K.SYM_INDEX and a.reg is None,
    "sym(%base,%idx)": lambda a: a.kind is K.SYM_INDEX and a.reg is not None,
    "sym@GOTPCREL(%rip)": lambda a: a.kind is K.GOTPCREL,
    "negative constant": lambda a: a.kind is K.CONST and a.imm < 0 and a.signed,
    "unsigned printed as signed": lambda a: a.kind is K.CONST and a.imm < 0 and not a.signed,
    "float in register": lambda a: a.is_float and a.kind is K.REG,
    "float in memory": lambda a: a.is_float and a.reads_memory,
}


def test_gcc_builds_cover_every_form(builds):
    seen: collections.Counter = collections.Counter()
    for variant in VARIANTS:
        if not variant.startswith("gcc"):
            continue
        for n in UsdtFile(builds(variant)).notes():
            for a in n.arguments:
                for form, pred in GCC_FORMS.items():
                    if pred(a):
                        seen[form] += 1
    missing = [f for f in GCC_FORMS if not seen[f]]
    assert not missing, f"forms no gcc build emitted: {missing}"


def test_clang_builds_use_stack_slots(builds):
    kinds = collections.Counter()
    for variant in ("clang-O0", "clang-O2"):
        for n in UsdtFile(builds(variant)).notes():
            kinds.update(a.kind for a in n.arguments)
    assert kinds[K.DEREF] > kinds[K.REG]
