"""Helpers of the USDT tracing tests: build the C test programs, read a
process's memory, wait for events."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import time
from typing import Any

import pytest
from systools import PYTHON as SYSTEM_PYTHON

from waiting import read_line

HERE = pathlib.Path(__file__).resolve().parent
HAND_C = HERE / "usdt_hand.c"
DUP_C = (HERE / "usdt_dup.c", HERE / "usdt_dup2.c")
PYTHON = SYSTEM_PYTHON

#: usdt_hand variants: name -> (compiler, flags)
HAND_VARIANTS = {
    "gcc-O2": ("gcc", ["-O2"]),
    "gcc-O2-nopie": ("gcc", ["-O2", "-fno-pie", "-no-pie"]),
    "gcc-O0": ("gcc", ["-O0"]),
    "clang-O2": ("clang", ["-O2"]),
}


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed")
    return path


def compile_c(out: pathlib.Path, sources: list[pathlib.Path | str], cc: str = "gcc",
              flags: list[str] | None = None, libs: list[str] | None = None) -> pathlib.Path:
    """Compile ``sources`` into ``out`` (once); fails the test with the
    compiler's output when it does not build."""
    need(cc)
    if out.exists():
        return out
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    cmd = [cc, "-g", "-Wall", *(flags or []), "-o", str(tmp), *map(str, sources),
           *(libs or [])]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} failed:\n{r.stderr}")
    os.replace(tmp, out)
    return out


def wait_events(trace: Any, n: int, timeout: float = 5.0) -> list:
    """Read from a UsdtTrace until ``n`` events arrived (or the timeout)."""
    got: list = []
    end = time.monotonic() + timeout
    while len(got) < n:
        left = end - time.monotonic()
        if left <= 0:
            break
        got += trace.read(min(left, 0.2))
    # a last short drain: more events than expected must show up too
    got += trace.read(0.05)
    return got


def read_u16(pid: int, address: int) -> int:
    """A 2-byte semaphore of process ``pid`` at runtime ``address``."""
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as f:
        f.seek(address)
        return int.from_bytes(f.read(2), "little")


def runtime_address(pid: int, path: str, vaddr: int) -> int:
    """Where ELF virtual address ``vaddr`` of ``path`` is mapped in ``pid``."""
    from pyebpf import elf
    st = os.stat(path)
    for m in elf.process_modules(pid):
        if m.maps and m.maps[0].inode == st.st_ino:
            return m.runtime_address(vaddr)
    raise AssertionError(f"{path} is not mapped by {pid}")


def parse_lines(text: str) -> dict[str, list[list[str]]]:
    """``"probe v1 v2"`` lines -> {probe: [[v1, v2], ...]}."""
    out: dict[str, list[list[str]]] = {}
    for line in text.splitlines():
        parts = line.split()
        if parts:
            out.setdefault(parts[0], []).append(parts[1:])
    return out


def as_int(text: str) -> int:
    """A printed C value: decimal, or %p (0x..., (nil))."""
    if text == "(nil)":
        return 0
    return int(text, 16) if text.startswith("0x") else int(text)


class Waiting:
    """A process started with a pipe on stdin that waits for one line
    (usdt_forms with USDT_FORMS_WAIT, or python reading stdin)."""

    def __init__(self, argv: list[str], env: dict | None = None,
                 ready_prefix: str = "ready") -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)
        try:
            line = read_line(self.proc.stdout, f"{argv[0]} to be ready")
        except BaseException:
            self.kill()
            raise
        assert line.startswith(ready_prefix), line
        self.pid = self.proc.pid

    def finish(self, timeout: float = 10) -> str:
        out, _ = self.proc.communicate("go\n", timeout=timeout)
        return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for s in (self.proc.stdin, self.proc.stdout):
            try:
                s.close()
            except Exception:  # noqa: BLE001
                pass
