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
