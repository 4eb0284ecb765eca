"""Fixtures for the trace tests: the C workload (built with gcc), and
running the command line (``python -m pyebpf``) as a subprocess."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BUILD = HERE.parent / "build" / "trace"
WORKLOAD_C = HERE / "workload.c"
NAMES = ["alice", "bob", "carol"]


def build_workload() -> str:
    """tests/trace/workload.c built with -O0 -g -fno-omit-frame-pointer."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    BUILD.mkdir(parents=True, exist_ok=True)
    out = BUILD / "workload"
    if not out.exists() or out.stat().st_mtime < WORKLOAD_C.stat().st_mtime:
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        subprocess.run(["gcc", "-O0", "-g", "-fno-omit-frame-pointer", "-o", str(tmp),
                        str(WORKLOAD_C)], check=True, capture_output=True)
        os.replace(tmp, out)
    return str(out)


@pytest.fixture(scope="session")
def workload() -> str:
    return build_workload()


def expected(n: int) -> dict:
    """What workload N does (see workload.c)."""
    return {
        "work_arg0": {k: sum(1 for i in range(n) if i % 10 == k) for k in range(10) if k < n},
        "work_arg1": [i * 37 % 5000 for i in range(n)],
        "greet_names": [NAMES[i % 3] for i in range(n)],
        "slow_calls": (n + 7) // 8,
        "opens": (n + 15) // 16,
    }


def cli(*args: str, timeout: float = 60, input: str | None = None,
        check: bool = False) -> subprocess.CompletedProcess:
    """Run ``python -m pyebpf ARGS`` (this checkout) and capture its output."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "pyebpf", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, input=input, cwd=str(ROOT))
    if check and proc.returncode != 0:
        raise AssertionError(f"pyebpf {' '.join(args)} exited {proc.returncode}\n"
                             f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def bpftrace(script: str, *args: str, timeout: float = 120) -> str:
    """Run bpftrace and return its stdout (skips when it is not installed)."""
    if shutil.which("bpftrace") is None:
        pytest.skip("bpftrace is not installed")
    proc = subprocess.run(["bpftrace", *args, "-e", script], capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"bpftrace failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout


def map_section(text: str) -> list[str]:
    """The lines that print maps (from the first '@' line), without blank lines."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("@"):
            return [x for x in lines[i:] if x.strip()]
    return []
