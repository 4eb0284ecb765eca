"""Running one bpftrace program with ``pyebpf bt`` and with the installed
bpftrace on the same deterministic workload (tests/lang/btworkload.c), and
comparing what they print."""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BUILD = HERE.parent / "build" / "lang"


def build_btworkload() -> str:
    """tests/lang/btworkload.c built as its comment says."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    src = HERE / "btworkload.c"
    BUILD.mkdir(parents=True, exist_ok=True)
    out = BUILD / "btworkload"
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer",
                        "-fno-optimize-sibling-calls", "-pthread", "-o", str(tmp), str(src)],
                       check=True, capture_output=True)
        os.replace(tmp, out)
    return str(out)


def pyebpf_bt(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``python -m pyebpf bt ARGS`` from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "pyebpf", "bt", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=str(ROOT))


def bpftrace(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The installed bpftrace (the test skips without it)."""
    if shutil.which("bpftrace") is None:
        pytest.skip("bpftrace is not installed")
    return subprocess.run(["bpftrace", *args], capture_output=True, text=True, timeout=timeout)


_MAP_LINE = re.compile(r"^(@\w*)(\[.*\])?: (.*)$")


def normalized(text: str) -> list[str]:
    """The output without the "Attaching" line and the workload's own
    "done" line; lines of one map with equal values (bpftrace prints such
    ties in hash order) sorted among themselves."""
    lines = [x for x in text.splitlines()
             if not x.startswith(("Attaching ", "done ", '{"type": "attached_probes"'))]
    out: list[str] = []
    run: list[str] = []
    run_key: tuple[str, str] | None = None
    for line in lines + [""]:
        m = _MAP_LINE.match(line)
        key = (m.group(1), m.group(3)) if m and m.group(2) else None
        if key is None or key != run_key:
            out.extend(sorted(run))
            run = []
            run_key = key
        if key is None:
            out.append(line)
        else:
            run.append(line)
    return out[:-1]


def compare(script: str, *args: str) -> str:
    """Run ``script`` (with ``args``: -c/-p...) both ways; assert the same
    output; return pyebpf's."""
    mine = pyebpf_bt("-e", script, *args)
    assert mine.returncode == 0, f"pyebpf bt failed ({mine.returncode}):\n{mine.stderr}"
    theirs = bpftrace("-e", script, *args)
    assert theirs.returncode == 0, f"bpftrace failed ({theirs.returncode}):\n{theirs.stderr}"
    assert normalized(mine.stdout) == normalized(theirs.stdout), (
        f"pyebpf:\n{mine.stdout}\nbpftrace:\n{theirs.stdout}")
    return mine.stdout
