"""The VM's contracts: the whole bpf_conformance suite passes in the VM (no kernel),
``pyebpf conformance --vm`` ends with the kernel run's summary line, and
``pyebpf vm run`` runs text, raw bytes and .data files -- as an unprivileged user too."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
import unprivileged

from pyebpf.conformance import data_files
from pyebpf.text import load_conformance
from pyebpf.vm.conformance import run_test

# (not "from conftest import": another directory's conftest module may hold that name)
ROOT = pathlib.Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def cli(*args: str, prefix: list[str] | None = None, stdin: bytes | None = None
        ) -> subprocess.CompletedProcess:
    return subprocess.run([*(prefix or [sys.executable]), "-m", "pyebpf", *args], input=stdin,
                          capture_output=True, env=ENV, cwd="/", timeout=120)


def test_every_conformance_program_passes_in_the_vm(conformance_dir) -> None:
    outcomes = [run_test(load_conformance(p)) for p in data_files(conformance_dir)]
    bad = [o for o in outcomes if o.status != "pass"]
    assert len(outcomes) == 313 and not bad, bad[:5]
    # including the ones the kernel refuses to load
    names = {o.name for o in outcomes}
    assert {"callx", "lsh64-imm-high", "arsh32-imm-neg"} <= names


def test_conformance_vm_command_line(conformance_dir) -> None:
    proc = cli("conformance", "--vm", "-q", str(conformance_dir))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().splitlines()[-1] == "313 passed, 0 failed"


def test_conformance_vm_reports_a_wrong_result(tmp_path) -> None:
    (tmp_path / "wrong.data").write_text("-- asm\nmov %r0, 1\nexit\n-- result\n0x2\n")
    (tmp_path / "faults.data").write_text("-- asm\nldxdw %r0, [%r10]\nexit\n-- result\n0x2\n")
    proc = cli("conformance", "--vm", str(tmp_path))
    out = proc.stdout.decode().splitlines()
    assert proc.returncode == 1
    assert "FAIL     wrong: expected 0x2, got 0x1" in out
    assert any(line.startswith("ERROR    faults:") and "out of bounds" in line for line in out)
    assert out[-1] == "0 passed, 1 failed"


def test_vm_run_text_both_dialects_and_raw(tmp_path) -> None:
    llvm = tmp_path / "p.s"
    llvm.write_text("r0 = 6\nr0 *= 7\nexit\n")
    assert cli("vm", "run", str(llvm)).stdout.decode() == "r0 = 42 (0x2a)\n"
    mnem = tmp_path / "m.s"
    mnem.write_text("mov %r0, 5\nadd %r0, %r2\nexit\n")
    proc = cli("vm", "run", "--mem", "00 11 22", str(mnem))
    assert proc.stdout.decode() == "r0 = 8 (0x8)\n", proc.stderr
    raw = tmp_path / "p.bin"
    from pyebpf.text import assemble
    raw.write_bytes(assemble("r0 = *(u8 *)(r1 + 1)\nexit").encode())
    memfile = tmp_path / "mem"
    memfile.write_bytes(b"\x01\xfe")
    proc = cli("vm", "run", "--mem-file", str(memfile), str(raw))
    assert proc.stdout.decode() == "r0 = 254 (0xfe)\n", proc.stderr


def test_vm_run_a_data_file_uses_its_memory(conformance_dir) -> None:
    proc = cli("vm", "run", str(conformance_dir / "ldxw.data"))
    assert proc.stdout.decode() == "r0 = 1144201745 (0x44332211)\n"


def test_vm_run_trace(tmp_path) -> None:
    prog = tmp_path / "p.s"
    prog.write_text("r1 = 3\n*(u32 *)(r10 - 4) = w1\nr0 = r1\nexit\n")
    lines = cli("vm", "run", "--trace", str(prog)).stdout.decode().splitlines()
    assert lines[0].split() == ["0:", "r1", "=", "3", "r1=0x3"]
    assert lines[1].endswith("stack0[508]=0x3/4")
    assert lines[2].endswith("r0=0x3")
    assert lines[-1] == "r0 = 3 (0x3)"


@pytest.mark.parametrize("args, text, message", [
    (["vm", "run", "PROG"], "r0 = *(u64 *)(r10 + 8)\nexit\n",
     "pyebpf vm: PROG:1: insn 0 (r0 = *(u64 *)(r10 + 8)): load of 8 bytes"),
    (["vm", "run", "--mem", "zz", "PROG"], "exit\n", "--mem 'zz': not hex bytes"),
    (["vm", "run", "PROG"], "", "the file is empty"),
    (["vm", "run", "PROG"], "r0 = 1\n", "outside the program"),
    (["vm", "run", "PROG"], "r0 = 1\nfoo\n", "PROG:2:"),
    (["vm", "run", "--max-steps", "100", "PROG"], "l:\ngoto l\n", "stopped after 100 instructions"),
])
def test_vm_run_errors_are_one_line(tmp_path, args, text, message) -> None:
    prog = tmp_path / "p.s"
    prog.write_text(text)
    proc = cli(*[str(prog) if a == "PROG" else a for a in args])
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "Traceback" not in err
    assert message.replace("PROG", str(prog)) in err, err


def test_raw_bytes_not_in_slots(tmp_path) -> None:
    f = tmp_path / "p.bin"
    f.write_bytes(b"\x95\x00\x00\x00\x00")
    proc = cli("vm", "run", str(f))
    assert proc.returncode == 1 and "multiple of 8" in proc.stderr.decode()


def test_vm_table() -> None:
    out = cli("vm", "table").stdout.decode()
    assert "sdiv" in out and "cmpxchg" in out and "may_goto" in out
    # every placeholder the rows use is explained by the legend under them
    rows, legend = out.split("\nlegend:\n")
    for placeholder in ("{d}", "{s}", "{sd}", "{ss}", "{sh}", "{r}", "{m}"):
        assert placeholder in rows and placeholder in legend, placeholder


def test_runs_unprivileged(conformance_dir) -> None:
    prefix = unprivileged.python_argv()
    proc = cli("vm", "run", "-", prefix=prefix, stdin=b"r0 = 6\nr0 *= 7\nexit\n")
    assert proc.stdout.decode() == "r0 = 42 (0x2a)\n", proc.stderr
    proc = cli("conformance", "--vm", "-q", str(conformance_dir), prefix=prefix)
    assert proc.stdout.decode().splitlines()[-1] == "313 passed, 0 failed", proc.stderr


# r0: the task name's first 4 bytes, then the low 16 bits of the pid
TASK = """\
r1 = r10
r1 += -16
r2 = 16
call bpf_get_current_comm
call bpf_get_current_pid_tgid
r0 &= 0xffff
r1 = *(u32 *)(r10 - 16)
r1 <<= 32
r0 |= r1
exit
"""


def test_trace_and_step_name_helpers(tmp_path) -> None:
    prog = tmp_path / "task.s"
    prog.write_text(TASK)
    lines = cli("vm", "run", "--trace", str(prog)).stdout.decode().splitlines()
    assert lines[3].split()[:3] == ["3:", "call", "bpf_get_current_comm"], lines[3]
    assert lines[4].split()[:3] == ["4:", "call", "bpf_get_current_pid_tgid"], lines[4]
    out = cli("vm", "step", "-b", "4", str(prog), stdin=b"continue\n").stdout.decode()
    assert "=>    4: call bpf_get_current_pid_tgid " in out, out


def test_pid_tgid_and_comm_are_settable(tmp_path) -> None:
    prog = tmp_path / "task.s"
    prog.write_text(TASK)
    # r0: the comm's first 4 bytes, then the pid's low 16 bits
    out = cli("vm", "run", str(prog)).stdout.decode()
    assert out == f"r0 = {int.from_bytes(b'pyeb', 'little') << 32 | 1000} " \
                  f"(0x{int.from_bytes(b'pyeb', 'little') << 32 | 1000:x})\n", out
    value = int.from_bytes(b"bash", "little") << 32 | 4242
    assert cli("vm", "run", "--pid", "4242", "--comm", "bash", str(prog)).stdout.decode() \
        == f"r0 = {value} (0x{value:x})\n"
    hits = tmp_path / "hits.s"
    hits.write_text("# pyebpf: map hits hash key=u32 value=u32 entries=4 show=count\n"
                    "# pyebpf: program p attach=uprobe:libc:getpid\n"
                    "call bpf_get_current_pid_tgid\nr0 >>= 32\n*(u32 *)(r10 - 4) = r0\n"
                    "*(u32 *)(r10 - 8) = 1\nr1 = hits ll\nr2 = r10\nr2 += -4\nr3 = r10\n"
                    "r3 += -8\nr4 = 0\ncall bpf_map_update_elem\nr0 = 0\nexit\n")
    out = cli("vm", "step", "--tgid", "77", "--pid", "78", str(hits)).stdout.decode()
    assert "@hits[77]: 1" in out, out
    bad = cli("vm", "run", "--pid", "-1", str(prog))
    assert bad.returncode == 2 and b"'-1' is not an id" in bad.stderr
    bad = cli("vm", "run", "--comm", "x" * 16, str(prog))
    assert bad.returncode == 1 and b"1 to 15 bytes" in bad.stderr
