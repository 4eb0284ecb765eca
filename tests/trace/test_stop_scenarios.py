"""Every way a trace can end leaves the traced process and the kernel as they were.

A target process declares a USDT probe with a semaphore (a ``Provider``) and
reports, on request, the probe's semaphore and the first byte of its probe
site (``0xcc`` while a uprobe is planted there).  A tracer attaches to it and
is then stopped: by SIGINT, by SIGTERM, by SIGKILL, or by an exception raised
in its own event callback.  Afterwards:

* the semaphore is back to 0 and the probe site holds its original byte;
* every BPF program, map and link the tracer held (read from its
  ``/proc/PID/fdinfo`` while it ran) is gone from the kernel;
* a tracer stopped by a signal it can catch still printed what it collected.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest
from kernel_objects import alive_ids, bpf_ids
from waiting import read_line, wait_until

pytestmark = pytest.mark.kernel

TARGET = textwrap.dedent("""
    import ctypes, sys
    from pyebpf.usdt import Provider
    app = Provider("stopscn")
    tick = app.probe("tick", "u64")
    app.load()
    site = ctypes.c_uint8.from_address(tick.address)
    print(app.path, site.value, flush=True)
    for line in sys.stdin:               # each request: fire some, then report
        for i in range(int(line)):
            tick.fire(i)
        print(tick.semaphore, site.value, flush=True)
""")

# A tracer whose event handling raises once events arrive: in its loop over the
# events, in a callback called by poll(), or in a callback on the reader's
# background thread (the exception is kept in thread_error and re-raised).
RAISING_TRACER = textwrap.dedent("""
    import sys, time
    from pyebpf.usdt import usdt

    def callback(event):
        raise RuntimeError(f"callback failed on {event[0]}")

    probe = usdt(sys.argv[1], "stopscn:tick")
    mode = sys.argv[2]
    with probe.trace(args=[0], callback=callback) as t:
        print("attached", flush=True)
        if mode == "loop":
            for (value,) in t:
                raise RuntimeError(f"callback failed on {value}")
        elif mode == "poll":
            while True:
                t.reader.poll()
        else:
            t.reader.start()
            while t.reader.thread_error is None:
                time.sleep(0.01)
            raise t.reader.thread_error
""")

class Target:
    """The traced process (see the module docstring)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", TARGET], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        path, byte = read_line(self.proc.stdout, "the target's probe path").split()
        self.path = path
        self.original = int(byte)

    def report(self, fire: int = 10) -> tuple[int, int]:
        """Fire the probe ``fire`` times; (semaphore, first byte of the site)."""
        self.proc.stdin.write(f"{fire}\n")
        self.proc.stdin.flush()
        sema, byte = read_line(self.proc.stdout, "the target's report").split()
        return int(sema), int(byte)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture
def target():
    t = Target()
    yield t
    t.close()


def _attached(target: Target, tracer: subprocess.Popen) -> dict[str, set[int]]:
    """Waits until ``tracer`` holds the probe; the ids of its BPF objects."""
    def holds():
        if tracer.poll() is not None:
            pytest.fail(f"the tracer exited early: {tracer.communicate()}")
        return target.report(0) == (1, 0xCC)
    wait_until(holds, "the tracer to attach (semaphore 1, int3 at the site)", 30)
    ids = bpf_ids(tracer.pid)
    assert ids["prog"] and ids["link"], ids
    assert alive_ids(ids) == {k: v for k, v in ids.items() if v}   # the check sees them
    return ids


def _left_as_it_was(target: Target, ids: dict[str, set[int]]) -> None:
    assert target.report() == (0, target.original)
    # The kernel frees programs and maps after an RCU grace period: wait for it.
    wait_until(lambda: not alive_ids(ids), f"the kernel to free {ids}", 10)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL],
                         ids=["SIGINT", "SIGTERM", "SIGKILL"])
def test_trace_stopped_by_signal(target, sig):
    tracer = subprocess.Popen(
        [sys.executable, "-m", "pyebpf", "trace", f"usdt:{target.path}:stopscn:tick",
         "--count", "-p", str(target.proc.pid)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        ids = _attached(target, tracer)
        target.report(25)
        tracer.send_signal(sig)
        out, err = tracer.communicate(timeout=30)
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait()
    if sig == signal.SIGKILL:
        assert tracer.returncode == -signal.SIGKILL
    else:
        assert "Traceback" not in err, err
        # what it collected is printed: 25 hits (the 0-hit reports fired nothing)
        assert "@: 25" in out, (out, err)
    _left_as_it_was(target, ids)


@pytest.mark.parametrize("mode", ["loop", "poll", "thread"])
def test_exception_in_event_handling(target, mode):
    tracer = subprocess.Popen([sys.executable, "-c", RAISING_TRACER, target.path, mode],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert read_line(tracer.stdout, "the tracer to attach") == "attached\n"
        ids = _attached(target, tracer)
        target.report(5)
        out, err = tracer.communicate(timeout=30)
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait()
    assert tracer.returncode == 1
    assert "RuntimeError: callback failed on 0" in err, err
    _left_as_it_was(target, ids)
