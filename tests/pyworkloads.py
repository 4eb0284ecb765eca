"""The CPython interpreters this machine has, and the pure-Python workload of
known shape (tests/profile/pyshapes.py) that the profile and ``pystack``
tests run under each of them.  ``from pyworkloads import ...`` works from any
test: tests/ is on sys.path."""
from __future__ import annotations

import glob
import os
import pathlib
import re
import subprocess

#: the workload: hot/cold/recursion/generator/key function, see its docstring
WORKLOAD = str(pathlib.Path(__file__).resolve().parent / "profile" / "pyshapes.py")
#: the functions whose ``# at:NAME`` lines the frames must name
SHAPES = ("hot", "cold", "recurse", "numbers", "by_key", "spin")


def cpythons() -> dict[str, tuple[int, int]]:
    """``{executable: (3, X)}`` of the CPython 3.10+ interpreters this machine
    has (pyenv's under ~/.pyenv, then /usr/bin/python3.1X), one per path."""
    found: dict[str, tuple[int, int]] = {}
    cands = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[0-9]*/bin/python3")))
    cands += sorted(glob.glob("/usr/bin/python3.1[0-9]"))
    for exe in cands:
        if exe in found or not os.access(exe, os.X_OK) or not re.search(r"3\.1\d", exe):
            continue
        out = subprocess.run([exe, "-c", "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        major, minor = out.split()
        found[exe] = (int(major), int(minor))
    return found


def marked_lines() -> dict[str, int]:
    """``{name: line}`` of the workload's ``# at:NAME`` lines."""
    with open(WORKLOAD) as f:
        return {m.group(1): n for n, line in enumerate(f, 1)
                if (m := re.search(r"# at:(\w+)$", line.rstrip()))}


def missing_shapes(frames: set[str]) -> list[str]:
    """The ``name (WORKLOAD:line)`` frames of :data:`SHAPES` not in ``frames``."""
    lines = marked_lines()
    want = [f"{name} ({WORKLOAD}:{lines[name]})" for name in SHAPES]
    return [w for w in want if w not in frames]


def runtime_file(exe: str) -> str:
    """The file of ``exe``'s interpreter (libpython in a shared build)."""
    out = subprocess.run(["ldd", exe], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"=> (\S*libpython3\.\d+\.so[.\d]*)", out)
    return m.group(1) if m else os.path.realpath(exe)


def held(exe: str, seconds: float) -> subprocess.Popen[bytes]:
    """The workload under ``exe``, started, waiting for a line on its stdin."""
    start = (f"import sys, runpy; sys.stdin.readline(); sys.argv = ['x', '{seconds}']; "
             f"runpy.run_path({WORKLOAD!r}, run_name='__main__')")
    return subprocess.Popen([exe, "-c", start], stdin=subprocess.PIPE)


def run_on_held(child: subprocess.Popen[bytes], argv: list[str], ready: str, *,
                interrupt: bool, on_stdout: bool = False) -> tuple[int, str, str]:
    """Run ``python -m pyebpf ARGV`` (this checkout) on the :func:`held`
    workload ``child``: once the tool has printed its line starting with
    ``ready`` (on stderr, or stdout: attached), release the workload, wait for
    it to end, then Ctrl-C the tool if ``interrupt`` (a tool given ``-p``
    ends with its process); the tool's exit status, stdout and stderr.
    The workload and the tool are gone on return."""
    import sys

    from waiting import read_line
    root = pathlib.Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root))
    try:
        tool = subprocess.Popen([sys.executable, "-m", "pyebpf", *argv], cwd=str(root), env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            stream = tool.stdout if on_stdout else tool.stderr
            assert stream is not None and child.stdin is not None
            first = read_line(stream, f"the {ready!r} line", timeout=120)
            assert first.startswith(ready), first
            child.stdin.write(b"go\n")
            child.stdin.close()
            child.wait(timeout=60)
            if interrupt:
                tool.send_signal(2)
            out, err = tool.communicate(timeout=60)
        finally:
            if tool.poll() is None:
                tool.kill()
                tool.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return tool.returncode, out, err
