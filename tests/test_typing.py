"""pyebpf is typed for its users (issue 12, item 4).

* the package passes ``mypy`` with the configuration of ``pyproject.toml``
  (``--strict`` flags for the fully typed modules);
* programs written against the README's API (``tests/typing/*.py``) pass
  ``mypy --strict`` with zero errors, and what they use is not ``Any``.

The programs are only type-checked, never run.  mypy's cache goes to a
temporary directory.
"""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

pytest.importorskip("mypy", reason="mypy is in the test extra: pip install '.[test]'")

ROOT = pathlib.Path(__file__).resolve().parent.parent
USER_PROGRAMS = sorted((ROOT / "tests" / "typing").glob("*.py"))


def _mypy(args: list[str], cache: pathlib.Path, cwd: pathlib.Path = ROOT) -> tuple[int, str]:
    env = dict(os.environ, MYPYPATH=str(ROOT))
    env.pop("MYPY_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache),
                           "--no-color-output", "--no-error-summary", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=240)
    return proc.returncode, proc.stdout + proc.stderr


def _as_user(args: list[str], tmp: pathlib.Path) -> tuple[int, str]:
    """mypy --strict as a user runs it: their own (empty) configuration, pyebpf
    followed silently as an installed package is (errors are the user's only)."""
    cfg = tmp / "mypy.ini"
    cfg.write_text("[mypy]\n")
    return _mypy(["--config-file", str(cfg), "--strict", "--follow-imports=silent", *args],
                 tmp / "cache", cwd=tmp)


def test_py_typed_marker_ships() -> None:
    assert (ROOT / "pyebpf" / "py.typed").is_file()
    text = (ROOT / "pyproject.toml").read_text()
    if sys.version_info < (3, 11):              # no tomllib: the line itself
        assert re.search(r'^"pyebpf" = \[[^]]*"py\.typed"', text, re.M), text
        return
    import tomllib
    config = tomllib.loads(text)
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["pyebpf"]


def test_package_passes_mypy(tmp_path: pathlib.Path) -> None:
    code, out = _mypy([], tmp_path / "cache")
    assert code == 0, out


def test_readme_programs_pass_mypy_strict(tmp_path: pathlib.Path) -> None:
    assert len(USER_PROGRAMS) >= 5
    code, out = _as_user([str(p) for p in USER_PROGRAMS], tmp_path)
    assert code == 0, out


REVEAL = '''\
from pyebpf.maps import HashMap
from pyebpf.trace import Trace
import pyebpf, pyebpf.attach, pyebpf.usdt
m: HashMap[int, int] = HashMap("u32", "u64", 4)
reveal_type(pyebpf.Program)
reveal_type(pyebpf.load)
reveal_type(pyebpf.disassemble)
reveal_type(pyebpf.assemble)
reveal_type(pyebpf.usdt.usdt)
reveal_type(pyebpf.usdt.Provider)
reveal_type(pyebpf.Program("x").mov(pyebpf.R0, 1).exit())
reveal_type(pyebpf.Program("x").map_increment(m, -4))
reveal_type(m[1])
reveal_type(Trace("uprobe:libc:malloc").hist("arg0"))
reveal_type(Trace("uprobe:libc:malloc").start())
reveal_type(HashMap("u32", "u64"))
reveal_type(pyebpf.attach.attach_uprobe)
reveal_type(pyebpf.usdt.Provider("x").path)
'''


def test_readme_api_is_not_any(tmp_path: pathlib.Path) -> None:
    prog = tmp_path / "reveal.py"
    prog.write_text(REVEAL)
    code, out = _as_user([str(prog)], tmp_path)
    revealed = [line for line in out.splitlines() if "Revealed type is" in line]
    assert len(revealed) == REVEAL.count("reveal_type"), out
    assert not [r for r in revealed if '"Any"' in r or "def (*Any, **Any)" in r], out
    assert revealed[8].endswith('Revealed type is "int"'), out
    assert "pyebpf.program.core.Program" in revealed[6], out
    assert "pyebpf.trace.recipes.Trace" in revealed[9], out
    assert revealed[11].endswith('"pyebpf.maps.kinds.HashMap[int, int]"'), out
    assert "prog: pyebpf.loader.LoadedProgram |" in revealed[12], out
    assert revealed[13].endswith('Revealed type is "str | None"'), out


def test_a_wrong_user_program_is_reported(tmp_path: pathlib.Path) -> None:
    """The check can fail: a misuse of the DSL is a type error."""
    prog = tmp_path / "wrong.py"
    prog.write_text('import pyebpf\npyebpf.Program("x").mov(pyebpf.R0, "one")\n'
                    'n: str = pyebpf.Program("y").slot_count\n')
    code, out = _as_user([str(prog)], tmp_path)
    assert code == 1, out
    assert "wrong.py:2: error" in out and "wrong.py:3: error" in out, out


WRONG_USES = '''\
import ctypes
from pyebpf.attach import attach_tracepoint, attach_uprobe
from pyebpf.maps import ArrayMap, Bytes, HashMap
from pyebpf.usdt import Provider
class Rec(ctypes.Structure):
    _fields_ = [("a", ctypes.c_int)]
counts = HashMap("u32", "u64")
counts[1] = "one"
attach_uprobe(1.5, "libc", "malloc")
attach_tracepoint(counts, "sched:sched_switch")
r: str = HashMap(Bytes(8), Rec)[b"12345678"]
s: str = ArrayMap("u64", 4)[0]
size: int = len(Provider("app").path)
'''


def test_typed_maps_attach_and_provider_catch_misuse(tmp_path: pathlib.Path) -> None:
    """Each line after the definitions misuses a typed result or argument (a
    map's value type from its codec, a program for attach_*, an optional path):
    each one is an error, where Any let them all pass."""
    prog = tmp_path / "wrong_uses.py"
    prog.write_text(WRONG_USES)
    code, out = _as_user([str(prog)], tmp_path)
    assert code == 1, out
    lines = {int(m) for m in re.findall(r"wrong_uses\.py:(\d+): error", out)}
    assert lines == set(range(8, 14)), out
