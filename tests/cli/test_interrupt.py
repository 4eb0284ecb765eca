"""Ctrl-C at any moment once pyebpf's code runs: exit status 130 (0 for a
trace that was already attached: it prints its results), never a traceback,
never CPython's death by SIGINT (-2).

The signal is sent at delays from 0 to 60 ms after pyebpf's package started
importing (seen through ``-X importtime``, which prints a line as each module
is imported): the imports of the command line and of the sub-command, the
argument parsing and the start of the work.  A Ctrl-C in the first
milliseconds of the interpreter's own start-up, before any pyebpf code runs,
gets Python's behaviour and is not tested.  The byte-code of the checkout is
cached in a private directory (as an installed package has it) so the
timings are those of a real start.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from .conftest import ROOT

DELAYS_MS = (0, 1, 2, 4, 7, 10, 15, 20, 30, 45, 60)
REPEATS = 2
GATE = b" pyebpf.errors"        # importtime's line once pyebpf/__init__ took Ctrl-C


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYEBPF_DEBUG", None)
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path_factory.mktemp("pycache"))
    subprocess.run([sys.executable, "-m", "pyebpf", "trace", "--help"], env=env,
                   capture_output=True, check=True)
    return env


def interrupt(argv: list[str], env: dict, delay: float) -> tuple[int, str]:
    """Start ``argv`` (a python command line), wait until pyebpf's package is
    importing, sleep ``delay`` s, send SIGINT; (exit status, stderr)."""
    # (SIGINT at its default, even if pytest runs with it ignored, as a
    # background job of a script does: pyebpf would keep it ignored)
    proc = subprocess.Popen([sys.executable, "-X", "importtime", *argv], env=env, cwd=str(ROOT),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    early = []
    while True:
        line = proc.stderr.readline()
        early.append(line)
        if not line or line.rstrip().endswith(GATE):
            break
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = (b"".join(early) + err).decode(errors="replace")
    return proc.returncode, "\n".join(line for line in text.splitlines()
                                      if not line.startswith("import time:"))


def sweep(argv: list[str], env: dict, attached_ok: bool = False) -> None:
    bad = []
    for delay_ms in DELAYS_MS:
        for _ in range(REPEATS):
            status, err = interrupt(argv, env, delay_ms / 1000)
            expected = 0 if attached_ok and "Attached" in err else 130
            if status != expected or "Traceback" in err or "Exception ignored" in err:
                bad.append((delay_ms, status, err[-800:]))
    assert not bad, bad[:3]


def test_ctrl_c_while_reading_stdin(env):
    """``asm -`` waits for its input: imports, parsing, then the read."""
    sweep(["-m", "pyebpf", "asm", "-", "-o", os.devnull], env)


@pytest.mark.kernel
def test_ctrl_c_while_a_trace_starts(env):
    """The trace's heavy imports (cffi, the DSL), probe resolution, loading;
    once attached, Ctrl-C ends the trace normally (exit 0)."""
    sweep(["-m", "pyebpf", "trace", "tracepoint:syscalls:sys_enter_getpid", "-d", "30"], env,
          attached_ok=True)


def test_ctrl_c_through_the_console_script(env, tmp_path):
    """The console script (``pyebpf = pyebpf.cli:entry``) as pip writes it."""
    script = tmp_path / "pyebpf"
    script.write_text("import sys\nfrom pyebpf.cli import entry\nsys.exit(entry())\n")
    sweep([str(script), "asm", "-", "-o", os.devnull], env)


def test_a_program_that_imports_pyebpf_keeps_its_sigint(tmp_path):
    """Only the command line takes SIGINT: ``python -m X`` where X imports
    pyebpf, or a script, keep Python's default handler."""
    pkg = tmp_path / "userpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import pyebpf\n")
    (pkg / "__main__.py").write_text(
        "import signal\nprint(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n")
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}")
    out = subprocess.run([sys.executable, "-m", "userpkg"], env=env, capture_output=True,
                         text=True, cwd=str(tmp_path))
    assert out.stdout.strip() == "True", out.stderr
