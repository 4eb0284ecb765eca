"""Stopping ``pyebpf trace`` / ``pyebpf run`` with a signal: from the first
probe attached to the final printing, SIGINT or SIGTERM always ends with the
results printed and exit status 0 (results are data) -- also when the
signal lands on the "Attached" line or while the ``-c`` command starts.
SIGINT stops a trace even when it was ignored at start (a background job of
a script), as bpftrace does; the commands that are no trace keep it ignored.
"""
from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading

import pytest
from waiting import read_until, wait_until

from .conftest import ROOT

TP = "tracepoint:syscalls:sys_enter_getpid"
F_GETPIPE_SZ = 1032
#: x86_64 write(2)
SYS_WRITE = 1
REPEATS = 10

COUNT_SYSCALLS = """\
# pyebpf: description counts system calls
# pyebpf: map calls array key=u32 value=u64 entries=1 show=count
# pyebpf: program p attach=tracepoint:raw_syscalls:sys_enter
    *(u32 *)(r10 - 4) = 0
    r1 = calls ll
    r2 = r10
    r2 += -4
    call bpf_map_lookup_elem
    if r0 == 0 goto out
    r1 = 1
    lock *(u64 *)(r0 + 0) += r1
out:
    r0 = 0
    exit
"""


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYEBPF_DEBUG", None)
    return env


def _sigint(disposition: signal.Handlers):
    """A preexec_fn: the tracer starts with SIGINT at ``disposition``."""
    return lambda: signal.signal(signal.SIGINT, disposition)


def _argv(kind: str, tmp_path) -> tuple[list[str], str]:
    """(the command line, a line of stdout that shows the results were printed)."""
    if kind == "run":
        path = tmp_path / "count_syscalls.s"
        path.write_text(COUNT_SYSCALLS)
        return ["run", str(path), "-d", "60"], "@calls[0]: "
    if kind == "trace -c":
        return ["trace", TP, "--count", "-d", "60", "-c", "sleep 60"], "@: "
    return ["trace", TP, "--count", "-d", "60"], "@: "


def _blocked_writing_stderr(pid: int) -> bool:
    """Whether ``pid``'s main thread is blocked in write(2, ...)."""
    with open(f"/proc/{pid}/syscall") as f:
        fields = f.read().split()
    return fields[:2] == [str(SYS_WRITE), "0x2"]


@pytest.mark.kernel
@pytest.mark.parametrize("kind", ["trace", "trace -c", "run"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_while_the_attached_line_is_written(tmp_path, kind, sig):
    """Deterministic: stderr is a pipe left almost full, so the tracer blocks
    writing "Attached ..." -- its probes attached, its loop not started --
    and the signal comes right then."""
    argv, printed = _argv(kind, tmp_path)
    r, w = os.pipe()
    filler = fcntl.fcntl(w, F_GETPIPE_SZ) - 16      # "Attached ..." does not fit after it
    os.write(w, b"x" * filler)
    proc = subprocess.Popen([sys.executable, "-m", "pyebpf", *argv], stdout=subprocess.PIPE,
                            stderr=w, text=True, env=_env(), cwd=str(ROOT),
                            preexec_fn=_sigint(signal.SIG_DFL))
    os.close(w)
    chunks: list[bytes] = []
    try:
        wait_until(lambda: proc.poll() is not None or _blocked_writing_stderr(proc.pid),
                   "the tracer to block writing its Attached line")
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(sig)
        drain = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(r, 65536), b"")))
        drain.start()
        out, _ = proc.communicate(timeout=60)
        drain.join(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(r)
    err = b"".join(chunks)[filler:].decode(errors="replace")
    assert "Attached" in err and "Traceback" not in err, err
    assert proc.returncode == 0, (proc.returncode, out, err)
    assert printed in out, (out, err)


@pytest.mark.kernel
@pytest.mark.parametrize("kind", ["trace", "trace -c"])
def test_signal_right_at_the_attached_line(tmp_path, kind):
    """The signal sent the moment "Attached" is read, again and again (SIGINT
    and SIGTERM in turn): the results are printed every time."""
    argv, printed = _argv(kind, tmp_path)
    bad = []
    for i in range(REPEATS):
        sig = signal.SIGTERM if i % 2 else signal.SIGINT
        proc = subprocess.Popen([sys.executable, "-m", "pyebpf", *argv], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=_env(), cwd=str(ROOT),
                                preexec_fn=_sigint(signal.SIG_DFL))
        try:
            read_until(proc.stderr, "Attached", "the tracer to attach")
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        if proc.returncode != 0 or printed not in out or "Traceback" in err:
            bad.append((sig.name, proc.returncode, out[-200:], err[-400:]))
    assert not bad, bad


@pytest.mark.kernel
@pytest.mark.parametrize("kind", ["trace", "trace -c", "run"])
def test_sigint_stops_a_trace_started_with_sigint_ignored(tmp_path, kind):
    """bpftrace's behaviour: ``pyebpf trace ... &`` in a script (SIGINT
    ignored) still stops on ``kill -INT`` and prints its results."""
    argv, printed = _argv(kind, tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "pyebpf", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(), cwd=str(ROOT),
                            preexec_fn=_sigint(signal.SIG_IGN))
    try:
        read_until(proc.stderr, "Attached", "the tracer to attach")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and printed in out and "Traceback" not in err, (out, err)


@pytest.mark.kernel
@pytest.mark.parametrize("disposition", [signal.SIG_DFL, signal.SIG_IGN], ids=["default", "ignored"])
def test_sigint_stops_a_trace_run_through_main(tmp_path, disposition):
    """A console script of an older install calls ``pyebpf.cli.main()``
    (not ``entry()``, which arms Ctrl-C): the trace takes SIGINT itself
    while it runs, so it stops all the same."""
    script = tmp_path / "pyebpf"
    script.write_text("import sys\nfrom pyebpf.cli import main\nsys.exit(main())\n")
    proc = subprocess.Popen([sys.executable, str(script), "trace", TP, "--count", "-d", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(), cwd=str(ROOT), preexec_fn=_sigint(disposition))
    try:
        read_until(proc.stderr, "Attached", "the tracer to attach")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and "@: " in out and "Traceback" not in err, (out, err)


def test_other_commands_keep_sigint_ignored():
    """Started with SIGINT ignored, ``pyebpf asm -`` (no trace) keeps ignoring
    it, as Python itself does: the Ctrl-C a script's user types for the
    script does not end its background jobs."""
    proc = subprocess.Popen([sys.executable, "-m", "pyebpf", "asm", "-", "-o", os.devnull],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(), cwd=str(ROOT),
                            preexec_fn=_sigint(signal.SIG_IGN))
    try:
        proc.stdin.write("r0 = 0\n")
        proc.stdin.flush()
        wait_until(lambda: _reads_stdin(proc.pid), "pyebpf asm to wait for its input")
        proc.send_signal(signal.SIGINT)
        proc.stdin.write("exit\n")
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, (proc.returncode, err)


def _reads_stdin(pid: int) -> bool:
    """Whether ``pid``'s main thread is blocked in read(0, ...)."""
    with open(f"/proc/{pid}/syscall") as f:
        return f.read().split()[:2] == ["0", "0x0"]


def test_stop_signals_restore_what_was_there():
    """In process: a SIGINT ignored before is taken while a trace runs, and
    ignored again afterwards; SIGTERM gets its handler back."""
    from pyebpf.cli import StopSignals

    def before_term(signum, frame):
        pass
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    old_term = signal.signal(signal.SIGTERM, before_term)
    try:
        stops = StopSignals()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN   # not a trace yet
        stops.hold()
        assert callable(signal.getsignal(signal.SIGINT))
        os.kill(os.getpid(), signal.SIGINT)          # held: recorded, not raised
        assert stops.requested
        with pytest.raises(KeyboardInterrupt):
            stops.arm()                              # raised where the loop can catch it
        os.kill(os.getpid(), signal.SIGTERM)         # once raised, the others are recorded
        stops.restore()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is before_term
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


class _Command:
    """Stands for a held ``-c`` command (:class:`pyebpf.session.live.Child`): records its release."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def go(self) -> None:
        self.calls.append("go")


def test_stop_signals_run_frames_the_loop():
    """In process, :meth:`StopSignals.run`: the command released and the run
    told before the loop; a stop signal in the loop ends it quietly, one that
    came while held ends it before anything starts; other errors go through;
    every way out leaves the stop signals held."""
    from pyebpf.cli import StopSignals

    old_int = signal.getsignal(signal.SIGINT)
    old_term = signal.getsignal(signal.SIGTERM)
    calls: list[str] = []

    def stopped_loop() -> None:
        calls.append("loop")
        os.kill(os.getpid(), signal.SIGTERM)        # raises here, the loop's stop
        calls.append("not reached")

    try:
        stops = StopSignals()
        stops.hold()
        stops.run(stopped_loop, _Command(calls), lambda: calls.append("started"))
        assert calls == ["go", "started", "loop"]
        os.kill(os.getpid(), signal.SIGTERM)        # held again: recorded, not raised

        calls.clear()
        stops = StopSignals()
        stops.hold()
        os.kill(os.getpid(), signal.SIGTERM)        # came while held
        stops.run(stopped_loop, _Command(calls), lambda: calls.append("started"))
        assert calls == []                          # neither the command nor the loop ran
        os.kill(os.getpid(), signal.SIGTERM)

        def failing_loop() -> None:
            raise ValueError("the loop's own error")
        stops = StopSignals()
        stops.hold()
        with pytest.raises(ValueError, match="own error"):
            stops.run(failing_loop)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stops.requested
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
