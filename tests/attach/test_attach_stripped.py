"""Uprobe locations no symbol covers (stripped binaries, raw addresses and
file offsets between symbols): accepted only on a proven instruction start.

The proof: a linear disassembly from the nearest instruction start known
without symbols (``.eh_frame`` function starts, the entry point, executable
section starts).  Ground truth is the same binary unstripped, whose function
symbols let the older check decide; and the kernel, where a breakpoint in
the middle of an instruction visibly corrupts the traced program.
"""
from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys

import pytest
from systools import PYTHON as SYSTEM_PYTHON
from budget import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from pyebpf import attach, elf
from pyebpf.attach import attach_uprobe, load_uprobe_program, resolve_uprobe
from pyebpf.elf import ElfFile, InstructionBoundaryError, open_elf
from pyebpf.maps import HashMap

from . import progs
from .conftest import TARGET_C, build

FUNCS = ("target_add", "target_mul", "main")


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, tuple[str, str]]:
    """variant -> (unstripped path, stripped copy)."""
    if shutil.which("strip") is None:
        pytest.skip("strip is not installed")
    tmp = tmp_path_factory.mktemp("stripped")
    full = {v: build(v) for v in ("pie", "nopie", "moved")}
    o2 = tmp / "target_o2"
    subprocess.run(["gcc", "-O2", "-fPIE", "-pie", "-o", str(o2), str(TARGET_C)], check=True)
    full["o2"] = str(o2)
    out = {}
    for variant, path in full.items():
        dst = tmp / f"{variant}.stripped"
        subprocess.run(["strip", "-s", "-o", str(dst), path], check=True)
        out[variant] = (path, str(dst))
    return out


def starts(path: str, func: str) -> tuple[elf.Symbol, list[int]]:
    ef = open_elf(path)
    sym = ef.symbol(func)
    return sym, [sym.address + o for o in ef.instruction_boundaries(sym)]


def accepted(ef: ElfFile, vaddr: int) -> bool:
    try:
        ef.resolve(hex(vaddr))
    except InstructionBoundaryError as exc:
        assert f"{vaddr:#x}" in str(exc) and "--unsafe" in str(exc)
        return False
    return True


def mid_instruction(path: str, func: str) -> tuple[int, int, int]:
    """(an address inside an instruction, that instruction's start, the next start)."""
    _sym, st_ = starts(path, func)
    for a, b in zip(st_, st_[1:]):
        if b - a > 1:
            return a + 1, a, b
    raise AssertionError(f"{func} has only one-byte instructions")


# ------------------------------------------------------------ pure checks
@pytest.mark.parametrize("variant", ["pie", "nopie", "moved", "o2"])
def test_stripped_decisions_equal_the_symbol_check(builds, variant):
    """Every byte of every function: the stripped copy accepts exactly the
    instruction starts the unstripped file's symbols prove."""
    full, stripped = builds[variant]
    ef = ElfFile(stripped)
    assert not [s for s in ef.symbols() if s.name in FUNCS]
    for func in FUNCS:
        sym, st_ = starts(full, func)
        assert len(st_) >= 2
        got = [a for a in range(sym.address, sym.address + sym.size) if accepted(ef, a)]
        assert got == st_, func


def test_refusal_names_the_instructions_around_it(builds):
    full, stripped = builds["nopie"]
    mid, before, after = mid_instruction(full, "target_mul")
    with pytest.raises(InstructionBoundaryError) as info:
        open_elf(stripped).resolve(hex(mid))
    msg = str(info.value)
    assert "middle of an instruction" in msg
    assert f"{before:#x} and {after:#x}" in msg
    assert "unsafe=True" in msg and "--unsafe" in msg
    assert ".eh_frame" in msg
    assert before in info.value.boundaries and after in info.value.boundaries
    # the same address of the unstripped file is refused by the symbol check
    with pytest.raises(InstructionBoundaryError, match="middle of the instruction"):
        open_elf(full).resolve(hex(mid))


def test_file_offsets_are_checked_like_addresses(builds):
    full, stripped = builds["pie"]
    mid, before, _after = mid_instruction(full, "target_add")
    ef = open_elf(stripped)
    with pytest.raises(InstructionBoundaryError):
        resolve_uprobe(stripped, ef.address_to_offset(mid))
    assert resolve_uprobe(stripped, ef.address_to_offset(before)).address == before
    loc = resolve_uprobe(stripped, ef.address_to_offset(mid), unsafe=True)
    assert loc.address == mid and loc.symbol is None
    assert resolve_uprobe(stripped, hex(mid), unsafe=True).file_offset == \
        ef.address_to_offset(mid)
    assert resolve_uprobe(stripped, hex(mid), check_boundary=False).address == mid


def test_data_is_not_code(builds):
    _full, stripped = builds["nopie"]
    ef = open_elf(stripped)
    rodata = ef.section(".rodata")
    with pytest.raises(InstructionBoundaryError, match="not in executable code"):
        ef.resolve(hex(rodata.addr))


def test_plt_and_entry_point_are_accepted(builds):
    """Known starts without a symbol of their own.  In the unstripped file the
    size-0 ``_init`` used to be taken to run on into the PLT, so the PLT's
    first instruction was refused as the middle of one of ``_init``'s."""
    for variant in ("nopie", "pie"):
        for path in builds[variant]:
            ef = open_elf(path)
            plt = ef.section(".plt")
            assert accepted(ef, ef.entry)
            assert accepted(ef, plt.addr)
            assert accepted(ef, plt.addr + 16)          # the second PLT entry
            assert not accepted(ef, plt.addr + 1)


def test_eh_frame_is_parsed_only_off_the_symbol_path(builds):
    """A location inside a sized function symbol keeps the fast check."""
    full, _stripped = builds["pie"]
    ef = ElfFile(full)
    ef.resolve("target_add")
    sym, st_ = starts(full, "target_add")
    ef.resolve(hex(st_[2]))
    assert ef._eh_frame is None and ef._known is None


PYTHON = SYSTEM_PYTHON


@pytest.mark.skipif(not os.path.exists(PYTHON), reason=f"{PYTHON} is not installed")
@fuzz_settings(200)
@given(pick=st.integers(0, 2**32), delta=st.integers(0, 4095))
def test_both_proofs_agree_on_python(pick, delta):
    """In python3.11 (exported functions in .dynsym, the rest stripped), the
    symbol check and the .eh_frame check agree on addresses inside exported
    functions."""
    ef = open_elf(PYTHON)
    funcs = [s for s in ef.symbols() if s.is_function and s.size > 16]
    sym = funcs[pick % len(funcs)]
    vaddr = sym.address + delta % sym.size
    starts_ = [sym.address + o for o in ef.instruction_boundaries(sym)]
    if vaddr > starts_[-1]:
        return                          # past what capstone decodes of this function
    by_symbol = vaddr in starts_
    try:
        ef._check_by_sweep(vaddr, ef.segment_for_address(vaddr))
        by_sweep = True
    except InstructionBoundaryError:
        by_sweep = False
    assert by_symbol == by_sweep, f"{sym} +{vaddr - sym.address:#x}"


def test_check_on_a_stripped_python_decodes_little():
    """A check at a random address of a stripped .text decodes from the
    nearest known instruction start, at most _MAX_SWEEP (+16) bytes: never
    the whole section (the bound that keeps it quick, counted in bytes, not
    timed)."""
    if not os.path.exists(PYTHON):
        pytest.skip(f"{PYTHON} is not installed")
    from pyebpf.elf import boundaries
    ef = ElfFile(PYTHON)
    text = ef.section(".text")
    decoded: list[int] = []
    sweep, decode = ef._sweep_from, ef._decode

    def counting_sweep(start, stop):
        decoded.append(stop - start)
        return sweep(start, stop)

    def counting_decode(start, n):
        decoded.append(n)
        return decode(start, n)

    ef._sweep_from, ef._decode = counting_sweep, counting_decode
    rng = random.Random(5)
    for _ in range(20):
        try:
            ef._check_by_sweep(text.addr + rng.randrange(text.size), ef.segment_for_address(
                text.addr))
        except InstructionBoundaryError:
            pass
    assert decoded
    assert max(decoded) <= boundaries._MAX_SWEEP + 16, (max(decoded), text.size)


# ------------------------------------------------------------ the kernel
def count(m) -> int:
    return dict(m.items()).get(0, 0)


def imul_site(full: str) -> tuple[int, int]:
    """(start, next start) of target_mul's 64-bit ``imul mem, %rax`` (gcc -O0)."""
    ef = open_elf(full)
    _sym, st_ = starts(full, "target_mul")
    for a, b in zip(st_, st_[1:]):
        if ef.read(a, 3) == b"\x48\x0f\xaf":
            return a, b
    raise AssertionError(f"no REX.W imul found in target_mul of {full} (gcc -O0 emits one "
                         "for the 64-bit multiply: pyebpf's symbol or read is wrong)")


BIG = "0x100000001"             # target_mul's products need all 64 bits of imul


@pytest.mark.kernel
def test_uprobe_on_a_stripped_binary(no_fd_leak, builds, spawn):
    """An instruction start inside target_mul, found without symbols: the
    probe fires once per call and the program computes what it computes
    untraced."""
    full, stripped = builds["nopie"]
    before, _next = imul_site(full)
    t = spawn(stripped)
    expected = t.run(f"mul 1000 {BIG}")[0]
    m = HashMap("u32", "u64", 4, name="cnt")
    prog = load_uprobe_program(progs.counter(m))
    with attach_uprobe(prog, stripped, hex(before), pid=t.pid):
        assert t.run(f"mul 1000 {BIG}")[0] == expected
    assert count(m) == 1000
    prog.close()


@pytest.mark.kernel
def test_mid_instruction_refused_before_any_kernel_call(no_fd_leak, builds):
    full, stripped = builds["nopie"]
    mid, _before, _after = mid_instruction(full, "target_mul")
    links = set(attach.link_ids())
    m = HashMap("u32", "u64", 4, name="cnt")
    prog = load_uprobe_program(progs.counter(m))
    with pytest.raises(InstructionBoundaryError, match="middle of an instruction"):
        attach_uprobe(prog, stripped, hex(mid))
    with pytest.raises(InstructionBoundaryError):
        attach.attach_uprobes(prog, stripped, [open_elf(stripped).address_to_offset(mid)])
    assert set(attach.link_ids()) == links
    prog.close()
    m.close()


@pytest.mark.kernel
def test_unsafe_attaches_and_shows_why_it_is_refused(no_fd_leak, builds, spawn):
    """unsafe=True bypasses the check; the breakpoint then lands inside an
    instruction and the traced program computes a wrong result."""
    full, stripped = builds["nopie"]
    start, _next = imul_site(full)
    mid = start + 1                    # the kernel's int3 replaces the 0x0f of 48 0f af
    t = spawn(stripped)
    expected = t.run(f"mul 1000 {BIG}")[0]
    m = HashMap("u32", "u64", 4, name="cnt")
    prog = load_uprobe_program(progs.counter(m))
    with pytest.raises(InstructionBoundaryError):
        attach_uprobe(prog, stripped, hex(mid), pid=t.pid)
    with attach_uprobe(prog, stripped, hex(mid), pid=t.pid, unsafe=True):
        traced = t.run(f"mul 1000 {BIG}")[0]
    assert count(m) == 1000
    after_detach = t.run(f"mul 1000 {BIG}")[0]
    assert after_detach == expected
    # the CPU runs 48 cc (int3), the kernel then steps 0f af 45 e0 alone: a 32-bit
    # imul, so every product loses its upper half
    assert traced != expected
    prog.close()


@pytest.mark.kernel
def test_trace_cli_refuses_and_unsafe_allows(builds):
    full, stripped = builds["nopie"]
    mid, before, after = mid_instruction(full, "target_mul")
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "pyebpf", "trace", f"uprobe:{stripped}:{mid:#x}", "-d", "0.2",
           "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "middle of an instruction" in r.stderr and "--unsafe" in r.stderr
    assert f"{before:#x}" in r.stderr and f"{after:#x}" in r.stderr
    assert "Traceback" not in r.stderr
    r = subprocess.run(cmd + ["--unsafe"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr


@pytest.mark.kernel
def test_run_cli_refuses_and_unsafe_allows(builds):
    full, stripped = builds["nopie"]
    mid, _before, _after = mid_instruction(full, "target_mul")
    asm = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "asm", "count_calls.s")
    cmd = [sys.executable, "-m", "pyebpf", "run", asm, "-D", f"BINARY={stripped}",
           "-D", f"FUNC={mid:#x}", "-d", "0.2", "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "middle of an instruction" in r.stderr, r.stderr
    r = subprocess.run(cmd + ["--unsafe"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
