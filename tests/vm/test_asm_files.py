"""``pyebpf vm run`` / ``vm step`` on the asm/ files: the maps their header
declares are made in the VM, events are read from the VM's rings, and the
``show=`` maps are printed as ``pyebpf run`` prints them -- no kernel, no root."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
import unprivileged

ROOT = pathlib.Path(__file__).resolve().parents[2]
ASM = ROOT / "asm"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
ZEROS = "00" * 64


def cli(*args: str, stdin: bytes | None = None, prefix: list[str] | None = None
        ) -> subprocess.CompletedProcess:
    return subprocess.run([*(prefix or [sys.executable]), "-m", "pyebpf", *args], input=stdin,
                          capture_output=True, env=ENV, cwd="/", timeout=120)


def test_count_calls_runs_with_its_declared_map() -> None:
    # (before: "map 'calls' was not given to the VM")
    proc = cli("vm", "run", str(ASM / "count_calls.s"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == "r0 = 0 (0x0)\n@calls[1000]: 1\n"


def test_every_program_of_a_file_runs_in_order_over_the_same_maps() -> None:
    proc = cli("vm", "run", str(ASM / "latency_hist.s"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.decode().splitlines()
    assert lines[:4] == ["program entry:", "r0 = 0 (0x0)", "program return:", "r0 = 0 (0x0)"]
    assert lines[4] == "@usecs: "
    assert len(lines) == 6 and lines[5].split("|")[0].split()[-1] == "1"   # one latency
    only = cli("vm", "run", "--program", "return", str(ASM / "latency_hist.s"))
    assert only.stdout.decode() == "r0 = 0 (0x0)\n@usecs: \n", only.stderr   # no start: empty


def test_events_of_the_output_map_are_printed() -> None:
    proc = cli("vm", "run", "--mem", ZEROS, str(ASM / "execsnoop.s"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode().splitlines()
    assert out[0] == "r0 = 0 (0x0)"
    assert out[1].split() == ["1000", "0", "pyebpf-vm"]      # pid, uid, comm; no strings
    assert len(out) == 2


def test_placeholders_take_defines() -> None:
    # ${PID} = 5 filters out the VM's process (1000): no event
    proc = cli("vm", "run", "--mem", ZEROS, "-D", "PID=1000", str(ASM / "opensnoop.s"))
    assert proc.stdout.decode().splitlines()[1].split()[0] == "1000", proc.stderr
    proc = cli("vm", "run", "--mem", ZEROS, "-D", "PID=5", str(ASM / "opensnoop.s"))
    assert proc.stdout.decode() == "r0 = 0 (0x0)\n", proc.stderr


def test_step_through_an_asm_file() -> None:
    proc = cli("vm", "step", str(ASM / "count_calls.s"), stdin=b"step\nmaps\ncontinue\n")
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    assert "count_calls.s:14" in out and "<VmMap HASH 'calls'" in out
    assert out.endswith("r0 = 0 (0x0)\n@calls[1000]: 1\n")


@pytest.mark.parametrize("args, message", [
    (["--program", "nope", "count_calls.s"], "has no program 'nope'; its programs: count_calls"),
    (["-D", "X=1", "count_calls.s"], "unknown parameter(s) X; this file has: BINARY, FUNC"),
    (["-D", "X", "count_calls.s"], "-D 'X': expected NAME=VALUE"),
    (["usdt_args.s"], "usdt_args.s:19: program usdt_args: ${args.NAME} and .arg need the probe"),
])
def test_asm_file_errors_are_one_line(args, message) -> None:
    proc = cli("vm", "run", *[str(ASM / a) if a.endswith(".s") else a for a in args])
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "Traceback" not in err
    assert message in err, err


def test_program_and_define_need_an_asm_file(tmp_path) -> None:
    prog = tmp_path / "p.s"
    prog.write_text("r0 = 1\nexit\n")
    for extra in (["--program", "x"], ["-D", "A=1"]):
        proc = cli("vm", "run", *extra, str(prog))
        assert proc.returncode == 1 and "asm/ file" in proc.stderr.decode()


def test_a_header_of_maps_alone_runs_the_whole_file(tmp_path) -> None:
    # no 'program ... attach=' line: the whole file is one program, as load,
    # explain and run --type read it (before: "map 'counts' was not given to the VM")
    prog = tmp_path / "count.s"
    prog.write_text("# pyebpf: param SLOT=0 the array slot to add to\n"
                    "# pyebpf: map counts array key=u32 value=u64 entries=4 show=count\n"
                    "*(u32 *)(r10 - 4) = ${SLOT}\nr2 = r10\nr2 += -4\nr1 = counts ll\n"
                    "call bpf_map_lookup_elem\nif r0 == 0 goto out\nr1 = 1\n"
                    "lock *(u64 *)(r0 + 0) += r1\nout:\nr0 = 2\nexit\n")
    proc = cli("vm", "run", "-D", "SLOT=3", str(prog))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == "r0 = 2 (0x2)\n@counts[3]: 1\n"
    proc = cli("vm", "step", str(prog), stdin=b"step\n")
    assert proc.returncode == 0, proc.stderr
    assert "count.s:3" in proc.stdout.decode()
    assert proc.stdout.decode().endswith("r0 = 2 (0x2)\n@counts[0]: 1\n")


def test_asm_files_run_unprivileged() -> None:
    proc = cli("vm", "run", str(ASM / "count_calls.s"), prefix=unprivileged.python_argv())
    assert proc.stdout.decode() == "r0 = 0 (0x0)\n@calls[1000]: 1\n", proc.stderr


def test_arg_directives_expand_from_the_binary_s_usdt_notes() -> None:
    # .arg needs the probe described: the workload's USDT note gives each argument's
    # location; with a zeroed pt_regs the arguments read as 0 and the string as empty
    import importlib.util
    spec = importlib.util.spec_from_file_location("trace_fixtures", ROOT / "tests" / "trace" /
                                                  "conftest.py")
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    binary = fixtures.build_workload()
    proc = cli("vm", "run", "-D", f"BINARY={binary}", "--mem", "00" * 168,
               str(ASM / "usdt_args.s"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == "r0 = 0 (0x0)\n0 0 \n"
