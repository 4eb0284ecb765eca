"""``pyebpf load``: a header-less text program into the kernel, test-run,
with what the kernel rewrote and its JIT code -- without writing Python."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.kernel
ROOT = pathlib.Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pyebpf", "load", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


def test_load_test_run_xlated_and_jited(tmp_path: pathlib.Path) -> None:
    prog = tmp_path / "pass.s"
    prog.write_text("r0 = 2      # XDP_PASS\nexit\n")
    r = cli(str(prog), "--type", "xdp", "--test-run", "00 11 22", "--xlated", "--jited")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"loaded {prog} as xdp: 2 instructions, 2 after the kernel's "
                               "rewrites, "), lines[0]
    assert lines[1] == "test run: r0 = 2 (0x2)"
    assert lines[2] == "xlated (as the kernel holds it):"
    assert lines[3].split() == ["0:", "(b7)", "r0", "=", "2"] and lines[4].split()[-1] == "exit"
    assert lines[5] == "jited (the JIT's machine code):"
    assert any("mov eax, 2" in line for line in lines[6:]), r.stdout


def test_header_maps_and_repeat(tmp_path: pathlib.Path) -> None:
    # the kernel rewrites the lookup (a direct call, the value's offset added)
    prog = tmp_path / "count.s"
    prog.write_text("# pyebpf: map counts hash key=u32 value=u64 entries=4\n"
                    "*(u32 *)(r10 - 4) = 0\nr2 = r10\nr2 += -4\nr1 = counts ll\n"
                    "call bpf_map_lookup_elem\nif r0 == 0 goto out\nr1 = 1\n"
                    "lock *(u64 *)(r0 + 0) += r1\nout:\nr0 = 0\nexit\n")
    r = cli(str(prog), "--test-run", "", "--repeat", "50", "--xlated")
    assert r.returncode == 0, r.stderr
    assert "as socket_filter: 10 instructions, 12 after the kernel's rewrites" in r.stdout
    assert "ns per run (average of 50)" in r.stdout
    assert "r1 = map[counts]" in r.stdout and "lookup_elem" in r.stdout, r.stdout


def test_rejected_program_exits_1_with_the_verifier_complaint(tmp_path: pathlib.Path) -> None:
    prog = tmp_path / "pkt.s"
    prog.write_text("r2 = *(u32 *)(r1 + 0)\nr0 = *(u8 *)(r2 + 12)\nexit\n")
    r = cli(str(prog), "-t", "xdp")
    assert r.returncode == 1 and not r.stdout
    assert r.stderr.startswith("pyebpf load: ") and "outside of the packet" in r.stderr
    assert "data_end" in r.stderr and "Traceback" not in r.stderr


def test_mnemonic_text_is_detected(tmp_path: pathlib.Path) -> None:
    prog = tmp_path / "m.s"
    prog.write_text("mov %r0, 1\nexit\n")
    r = cli(str(prog), "--test-run", "")
    assert r.returncode == 0 and "test run: r0 = 1 (0x1)" in r.stdout, r.stderr


def test_jit_listing_names_call_targets_and_shows_jumps_as_offsets(tmp_path: pathlib.Path) -> None:
    prog = tmp_path / "pid.s"
    prog.write_text("call bpf_get_current_pid_tgid\nif r0 == 0 goto out\nr0 >>= 32\nout:\nexit\n")
    r = cli(str(prog), "--type", "kprobe", "--jited")
    assert r.returncode == 0, r.stderr
    calls = [line for line in r.stdout.splitlines() if " call " in line]
    assert any(line.endswith("<bpf_get_current_pid_tgid>") for line in calls), r.stdout
    offsets = [int(line.split(":")[0], 16) for line in r.stdout.splitlines()[2:]]
    jumps = [line.split()[-1] for line in r.stdout.splitlines() if " je " in line]
    assert jumps and all(int(j, 16) in offsets for j in jumps), r.stdout


def test_a_type_that_cannot_be_test_run_says_so_in_words(tmp_path: pathlib.Path) -> None:
    # the kernel's own ENOTSUPP (524), which libc does not name (it said "Unknown error 524")
    prog = tmp_path / "k.s"
    prog.write_text("r0 = 0\nexit\n")
    r = cli(str(prog), "--type", "kprobe", "--test-run", "")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "BPF_PROG_TEST_RUN: Operation is not supported (ENOTSUPP)" in r.stderr, r.stderr
    assert "cannot be test-run" in r.stderr and "Unknown error" not in r.stderr
