"""``pyebpf run NAME``: the ready programs of asm/ by name, ``--list``, and the
order a PROGRAM argument is resolved in (a path first).  No kernel needed:
``--info`` and ``--list`` only read the files."""
from __future__ import annotations

import pytest

from pyebpf.cli.run import bundled_programs, programs_dir, resolve_program
from pyebpf.errors import PyebpfError

from .conftest import ROOT, cli

ASM = ROOT / "asm"


def test_the_checkout_programs_are_the_ready_ones():
    assert programs_dir() == str(ASM)
    assert bundled_programs() == {p.stem: str(p) for p in sorted(ASM.glob("*.s"))}


def test_list_names_and_describes_every_program():
    proc = cli("run", "--list")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines] == sorted(p.stem for p in ASM.glob("*.s"))
    assert "opensnoop     print each openat(2): pid, comm, flags and the path" in lines


@pytest.mark.parametrize("name", ["opensnoop", "opensnoop.s"])
def test_a_ready_program_by_name(name):
    assert resolve_program(name) == str(ASM / "opensnoop.s")
    proc = cli("run", name, "--info")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{ASM / 'opensnoop.s'}: print each openat(2)")


def test_a_path_comes_first(tmp_path, monkeypatch):
    mine = tmp_path / "opensnoop"
    mine.write_text("# pyebpf: description mine\n"
                    "# pyebpf: program p attach=tracepoint:syscalls:sys_enter_openat\n"
                    "    r0 = 0\n    exit\n")
    monkeypatch.chdir(tmp_path)
    assert resolve_program("opensnoop") == "opensnoop"
    monkeypatch.chdir(ROOT)
    assert resolve_program("asm/opensnoop.s") == "asm/opensnoop.s"     # from a checkout
    proc = cli("run", str(mine), "--info")
    assert proc.returncode == 0 and proc.stdout.startswith(f"{mine}: mine"), proc


@pytest.mark.parametrize("name, words", [
    ("opensnop", "no such file or ready program; did you mean opensnoop?"),
    ("zzz", "no such file or ready program (ready programs: count_calls, execsnoop"),
    ("/nowhere/opensnoop.s", "no such file; the ready program of that name is 'pyebpf run opensnoop'"),
])
def test_unknown_programs(name, words):
    with pytest.raises(PyebpfError, match="pyebpf run --list"):
        resolve_program(name)
    proc = cli("run", name)
    assert proc.returncode == 1, proc
    assert proc.stderr.startswith(f"pyebpf run: {name}: ") and words in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_program_is_required():
    proc = cli("run")
    assert proc.returncode == 2 and "a PROGRAM is required" in proc.stderr, proc.stderr


def test_version():
    from pyebpf import __version__
    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout == f"pyebpf {__version__}\n", proc
