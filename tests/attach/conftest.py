"""Fixtures for the attach tests: C target programs built with gcc, and a
driver that talks to a running target over its stdin/stdout."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

from waiting import read_line

HERE = pathlib.Path(__file__).resolve().parent
BUILD = HERE.parent / "build" / "attach"
TARGET_C = HERE / "target.c"

#: name -> extra gcc flags
VARIANTS = {
    "pie": ["-fPIE", "-pie"],
    "nopie": ["-fno-pie", "-no-pie"],
    # the functions in a section of their own, linked at an address whose
    # distance to its file offset differs from every other segment's
    "moved": ["-fno-pie", "-no-pie", "-DMOVED_TEXT",
              "-Wl,--section-start=.moved_text=0x10000000"],
}


def build(variant: str) -> str:
    """Build tests/attach/target.c (``-O0 -g``) in ``variant``; returns the path."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    BUILD.mkdir(parents=True, exist_ok=True)
    out = BUILD / f"target_{variant}"
    if not out.exists() or out.stat().st_mtime < TARGET_C.stat().st_mtime:
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        subprocess.run(["gcc", "-O0", "-g", *VARIANTS[variant], "-o", str(tmp), str(TARGET_C)],
                       check=True, capture_output=True)
        os.replace(tmp, out)
    return str(out)


@pytest.fixture(scope="session")
def target_pie() -> str:
    return build("pie")


@pytest.fixture(scope="session")
def target_nopie() -> str:
    return build("nopie")


@pytest.fixture(scope="session")
def target_moved() -> str:
    return build("moved")


class Target:
    """A running target program; ``run("add 1000 3")`` -> ``(sum, ns)``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.proc = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        line = read_line(self.proc.stdout, f"{path} to start").split()
        assert line and line[0] == "ready", line
        self.pid = int(line[1])

    def run(self, command: str) -> tuple[int, int]:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = read_line(self.proc.stdout, f"the target to answer {command!r}", 60).split()
        assert line and line[0] == "done", f"target answered {line!r} to {command!r}"
        return int(line[1]), int(line[2])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()

    def __enter__(self) -> "Target":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@pytest.fixture
def spawn():
    """``spawn(path) -> Target``; every target is stopped at the end of the test."""
    started: list[Target] = []

    def start(path: str) -> Target:
        t = Target(path)
        started.append(t)
        return t

    yield start
    for t in started:
        t.close()
