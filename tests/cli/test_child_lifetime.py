"""The command of ``-c`` (pyebpf.session.live.Child): its lifetime follows the
tracer's, and signals between fork and exec never run the tracer's code.

* A tracer killed by SIGKILL takes its command with it (PR_SET_PDEATHSIG)
  and leaves no BPF object behind (issue 11, item 3).
* A signal that reaches the child before ``exec`` ends it quietly: the child
  runs none of the tracer's Python handlers (which raised KeyboardInterrupt
  in a copy of the tracer and printed a traceback).
* A signal in the middle of :meth:`Child.go` is handled after it, with every
  pipe closed once (it was closed twice: "[Errno 9] Bad file descriptor").
* Many tracers stopped by SIGTERM at random moments of their start-up exit
  cleanly and leave no command running (issue 11, item 9).
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from kernel_objects import alive_ids, bpf_ids
from budget import SCALE

from .conftest import ROOT


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def _wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie counts: it runs no more)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def _kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------------------
# the tracer killed: the command goes too, nothing stays in the kernel

def _tracer_argv(kind: str, workload: str, command: str) -> list[str]:
    if kind == "trace":
        return ["trace", f"uprobe:{workload}:work", "--count", "-c", command]
    return ["run", str(ROOT / "asm" / "count_calls.s"), "-D", f"BINARY={workload}",
            "-D", "FUNC=work", "-c", command]


@pytest.mark.kernel
@pytest.mark.parametrize("kind", ["trace", "run"])
def test_sigkill_of_the_tracer_ends_the_command(workload, kind):
    tracer = subprocess.Popen([sys.executable, "-m", "pyebpf",
                               *_tracer_argv(kind, workload, f"{workload} 100000000 1000")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=_env(), cwd=str(ROOT))
    command = None
    try:
        assert "Attached" in tracer.stderr.readline()
        (command,) = _wait_until(lambda: _children(tracer.pid), 30, "the command")
        _wait_until(lambda: os.readlink(f"/proc/{command}/exe") == workload, 30,
                    "the command to exec")
        ids = bpf_ids(tracer.pid)
        assert ids["prog"] and ids["link"], ids
        assert not _gone(command)
        tracer.kill()
        assert tracer.wait(timeout=30) == -signal.SIGKILL
        _wait_until(lambda: _gone(command), 10, "the command to end with its tracer")
        # the kernel frees programs and maps after an RCU grace period
        _wait_until(lambda: not alive_ids(ids), 10, f"the kernel to free {ids}")
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait()
        tracer.stderr.close()
        if command is not None:
            _kill_quietly(command)


# ---------------------------------------------------------------------------
# between fork and exec

# A tracer in miniature: SIGTERM raises KeyboardInterrupt (as in the CLI), a
# command is started and held before exec.  It reports the command's exit
# status, or that the child ran this script's code (it must not).
HELD = textwrap.dedent("""
    import os, sys
    from pyebpf.session.live import Child, sigterm_as_interrupt
    sigterm_as_interrupt()
    me = os.getpid()
    try:
        child = Child(["sleep", "30"])
    except BaseException as exc:
        if os.getpid() != me:
            print(f"the child ran the tracer's code: {exc!r}", flush=True)
            os._exit(3)
        raise
    print(child.pid, flush=True)
    print(child.wait(), flush=True)
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_before_exec_ends_the_child_quietly(sig):
    script = subprocess.Popen([sys.executable, "-c", HELD], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=_env())
    try:
        pid = int(script.stdout.readline())
        os.kill(pid, sig)
        out, err = script.communicate(timeout=30)
    finally:
        if script.poll() is None:
            script.kill()
            script.communicate()
    assert out.strip() == str(-sig), (out, err)       # the default action: killed by sig
    assert script.returncode == 0 and "Traceback" not in err, err


# The command (grep) prints the signal mask and the ignored signals it started
# with, after the script printed those it started with itself.
MASKS = textwrap.dedent("""
    from pyebpf.session.live import Child, sigterm_as_interrupt
    with open("/proc/self/status") as f:   # (Python ignores SIGPIPE and SIGXFSZ itself)
        print("".join(line for line in f if line.startswith(("SigBlk", "SigIgn"))),
              end="", flush=True)
    sigterm_as_interrupt()
    child = Child(["grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"])
    child.go()
    assert child.wait() == 0
""")


def test_the_command_starts_with_default_signals():
    """No signal blocked, and SIGPIPE/SIGXFSZ at their default (Python ignores
    them), like a command started by a shell or ``subprocess``."""
    proc = subprocess.run([sys.executable, "-c", MASKS], capture_output=True, text=True,
                          env=_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [x.split(":")[0] for x in lines] == ["SigBlk", "SigIgn"] * 2, lines
    start_blk, start_ign, blk, ign = (int(x.split(":")[1], 16) for x in lines)
    python_ignores = (1 << (signal.SIGPIPE - 1)) | (1 << (signal.SIGXFSZ - 1))
    assert start_ign & python_ignores == python_ignores
    assert blk == start_blk
    assert ign == start_ign & ~python_ignores


# SIGTERM arrives at the worst moment of go(): just after it closed the pipe
# that releases the command (the script sends it from a wrapper of os.close).
# The interrupted tracer then kills the command, closing what is left.
GO_INTERRUPTED = textwrap.dedent("""
    import os, signal, sys
    from pyebpf.session.live import Child, sigterm_as_interrupt
    sigterm_as_interrupt()
    child = Child(["sleep", "30"])
    release = child._go
    real_close = os.close

    def close(fd):
        real_close(fd)
        if fd == release:
            os.kill(os.getpid(), signal.SIGTERM)

    os.close = close
    try:
        child.go()
        print("not interrupted")
    except KeyboardInterrupt:
        try:
            child.kill()
        except OSError as exc:
            print(f"kill failed: {exc}")
            sys.exit(1)
        print("interrupted", child.status)
    finally:
        os.close = real_close
""")


def test_sigterm_inside_go_closes_each_pipe_once():
    proc = subprocess.run([sys.executable, "-c", GO_INTERRUPTED], capture_output=True,
                          text=True, env=_env(), timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, (proc.stdout, proc.stderr)
    # go() finished (the command was released, then stopped by kill())
    assert proc.stdout.split() == ["interrupted", str(-signal.SIGTERM)], proc.stdout


# ---------------------------------------------------------------------------
# many tracers stopped at random moments of their start-up

RUNS = max(10, int(60 * SCALE))            # PYEBPF_FUZZ_SCALE=100: a long campaign
STRESS_SECONDS = 45 * max(1.0, SCALE)


@pytest.mark.kernel
def test_sigterm_at_random_moments_of_the_start(workload):
    """Each tracer gets SIGTERM (with its command: the whole process group, as
    a terminal or a service manager sends it) at a random moment between its
    fork of the command and a little after the attachment: it exits 0 (the
    results printed) or 130 (interrupted before anything was collected),
    never with a traceback or an error, and its command is gone."""
    rng = random.Random(11)
    attach = 0.1                                # measured on each run below
    statuses: dict[int, int] = {}
    deadline = time.monotonic() + STRESS_SECONDS
    runs = 0
    while runs < RUNS and time.monotonic() < deadline:
        runs += 1
        t0 = time.monotonic()
        tracer = subprocess.Popen(
            [sys.executable, "-m", "pyebpf", "trace", f"uprobe:{workload}:work", "--count",
             "-c", f"{workload} 100000000 1000"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            text=True, env=_env(), cwd=str(ROOT), start_new_session=True)
        command = None
        try:
            children = _wait_until(lambda: _children(tracer.pid) or tracer.poll() is not None,
                                   30, "the tracer to fork its command")
            forked = time.monotonic()
            if isinstance(children, list):
                command = children[0]
            time.sleep(rng.uniform(0, attach * 1.5))
            os.killpg(tracer.pid, signal.SIGTERM)
            out, err = tracer.communicate(timeout=30)
        finally:
            if tracer.poll() is None:
                os.killpg(tracer.pid, signal.SIGKILL)
                tracer.communicate()
        if "Attached" in err:
            attach = max(0.02, min(0.5, time.monotonic() - forked))
        statuses[tracer.returncode] = statuses.get(tracer.returncode, 0) + 1
        assert "Traceback" not in err and "Errno" not in err, (runs, err)
        assert tracer.returncode in (0, 130), (runs, tracer.returncode, out, err)
        if command is not None:
            _wait_until(lambda: _gone(command), 10, f"command {command} to end (run {runs})")
            _kill_quietly(command)
        assert time.monotonic() - t0 < 30
    assert runs >= 10, f"only {runs} runs in {STRESS_SECONDS} s"
    assert sum(statuses.values()) == runs
