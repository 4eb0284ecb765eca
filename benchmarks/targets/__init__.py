"""The traced C programs of the benchmarks, built and driven from one place.

``loop.c`` (``loop N start_fd``) calls ``hit(i, 2*i)`` N times -- or fires the
``loop:hit`` USDT probe with ``-DWITH_USDT`` -- and prints ``N calls X
ns/call``.  Given a start fd it writes one byte when ready and waits for one
byte back, so a tracer can attach before the loop starts.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOOP_C = HERE / "loop.c"
BUILD_DIR = Path(tempfile.gettempdir()) / "pyebpf-bench"


def build(src: Path, name: str, flags: list[str]) -> str:
    """Compile ``src`` with gcc -O2 into the build cache (rebuilt when the
    source is newer; replaced atomically so concurrent runs never see a
    half-written binary); return the binary's path."""
    BUILD_DIR.mkdir(exist_ok=True)
    binary = BUILD_DIR / name
    if not binary.exists() or binary.stat().st_mtime < src.stat().st_mtime:
        tmp = BUILD_DIR / f".{name}.{os.getpid()}"
        subprocess.run(["gcc", "-O2", "-o", str(tmp), str(src)] + flags, check=True)
        os.replace(tmp, binary)
    return str(binary)


def build_loop(usdt: bool = False) -> str:
    """``loop.c`` compiled (with the USDT probe when ``usdt``)."""
    return build(LOOP_C, "loop-usdt" if usdt else "loop", ["-DWITH_USDT"] if usdt else [])


class Loop:
    """``loop N start_fd`` held at its handshake until :meth:`go`."""

    def __init__(self, binary: str, n: int) -> None:
        self.parent, child = socket.socketpair()
        try:
            self.proc = subprocess.Popen([binary, str(n), str(child.fileno())],
                                         pass_fds=(child.fileno(),), stdout=subprocess.PIPE,
                                         text=True)
        finally:
            child.close()
        self.parent.settimeout(30)
        if self.parent.recv(1) != b"r":
            self.close()
            raise RuntimeError(f"{binary} did not start")
        self.t_go = 0

    @property
    def pid(self) -> int:
        return self.proc.pid

    def go(self) -> None:
        self.t_go = time.monotonic_ns()
        self.parent.send(b"g")

    def finish(self, timeout: float = 600) -> float:
        """Wait for the loop; return its ns/call."""
        out, _ = self.proc.communicate(timeout=timeout)
        self.parent.close()
        m = re.search(r"(\d+) calls ([\d.]+) ns/call", out)
        if not m:
            raise RuntimeError(f"loop printed {out!r}")
        return float(m.group(2))

    def run(self) -> float:
        """:meth:`go` then :meth:`finish`."""
        self.go()
        return self.finish()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self.parent.close()

    def __enter__(self) -> "Loop":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def untraced(binary: str, n: int) -> float:
    """ns/call of the loop with nothing attached."""
    with Loop(binary, n) as loop:
        return loop.run()
