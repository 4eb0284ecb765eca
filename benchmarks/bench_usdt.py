"""Per-hit cost of a counting USDT probe: pyebpf against bpftrace, side by side.

The traced program is ``benchmarks/targets/loop.c`` built with ``-DWITH_USDT``:
a loop that fires ``loop:hit`` (two 8-byte arguments, no semaphore) N times
and prints its own ns per iteration.  Each round runs, in alternating order:

* ``untraced``: the loop alone (the ``nop`` of the probe costs ~nothing);
* ``pyebpf``: a program that counts hits in a per-CPU array, attached with
  :func:`pyebpf.usdt.usdt` ... ``.count()`` (no PID; uprobe_multi link);
* ``bpftrace``: ``usdt:PATH:loop:hit { @c = count(); }`` (no ``-p``);
* ``pyebpf_args``: the same count plus both arguments read (``emit_arg``)
  and summed in the program, to show what reading arguments adds.

Also ``provider_fire_ns`` / ``provider_fire_traced_ns``: one ``fire(i, 2*i)``
of a :class:`pyebpf.usdt.Provider` probe from Python (a cached ctypes call),
untraced and while counted by pyebpf.

The loop is started first and waits on its ``start_fd`` handshake, so every
tracer attaches to an already-running process; the loop's own clock then
times only the loop.  ``<tool>_ns_per_hit`` is the median over rounds of
(traced ns/iteration - untraced ns/iteration of the same round);
``pyebpf_vs_bpftrace`` their ratio (the aim: <= 1.05).  Counts are checked:
``<tool>_exact`` says every hit was counted in every round.

Run: ``python -m benchmarks usdt`` or ``python benchmarks/bench_usdt.py [--quick]``
(root; bpftrace optional -- its keys are absent when it is not installed).
"""
from __future__ import annotations

import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.targets import Loop, build_loop, untraced  # noqa: E402


def _untraced(binary: str, n: int) -> tuple[float, bool]:
    return untraced(binary, n), True


def _pyebpf(binary: str, n: int) -> tuple[float, bool]:
    from pyebpf.usdt import usdt
    loop = Loop(binary, n)
    try:
        with usdt(binary, "loop:hit").count() as c:
            ns = loop.run()
        return ns, c.value == n
    finally:
        loop.close()


def _pyebpf_args(binary: str, n: int) -> tuple[float, bool]:
    """Count and sum both arguments (read through the trace-source contract)."""
    from pyebpf.loader import load
    from pyebpf.program import R1, R6, R7, R8, Program
    from pyebpf.lang.aggregations import Count, Sum
    from pyebpf.probes.usdt_source import usdt_probe_source
    src = usdt_probe_source(binary, "loop", "hit")
    loop = Loop(binary, n)
    try:
        with Count("bench_c") as cnt, Sum("bench_s") as total:
            p = Program("bench_args")
            p.mov(R6, R1)
            src.emit_arg(p, R7, 0, R6)
            src.emit_arg(p, R8, 1, R6)
            p.add(R7, R8)
            cnt.emit(p)
            total.emit(p, R7)
            p.ret(0)
            with load(p, src.prog_type, **src.load_options) as prog:
                with src.attach(prog):
                    ns = loop.run()
            want = sum(3 * i for i in range(n)) % (1 << 64)
            return ns, cnt.read() == n and total.read() % (1 << 64) == want
    finally:
        loop.close()


def _bpftrace(binary: str, n: int) -> tuple[float, bool]:
    script = ('BEGIN { printf("ready\\n"); } '
              f'usdt:{binary}:loop:hit {{ @c = count(); }}')
    loop = Loop(binary, n)
    bt = subprocess.Popen(["bpftrace", "-e", script], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        line = bt.stdout.readline()          # BEGIN runs once every probe is attached
        while line and "ready" not in line:
            line = bt.stdout.readline()
        if "ready" not in line:
            raise RuntimeError(f"bpftrace did not start: {bt.communicate()[1]}")
        ns = loop.run()
        bt.send_signal(signal.SIGINT)
        out, _err = bt.communicate(timeout=60)
        m = re.search(r"@c:\s*(\d+)", out)
        return ns, bool(m) and int(m.group(1)) == n
    finally:
        if bt.poll() is None:
            bt.kill()
            bt.communicate()
        loop.close()


def _provider_fire(n: int) -> tuple[float, float, bool]:
    """ns per ``probe.fire(i, 2*i)``: untraced, then counted by pyebpf."""
    from pyebpf.usdt import Provider
    with Provider("bench") as app:
        hit = app.probe("hit", "u64", "u64")
        app.load()
        fire = hit.fire

        def loop() -> float:
            t0 = time.perf_counter_ns()
            for i in range(n):
                fire(i, 2 * i)
            return (time.perf_counter_ns() - t0) / n

        loop()
        untraced = min(loop() for _ in range(3))
        with hit.usdt().count() as c:
            traced = min(loop() for _ in range(3))
        return untraced, traced, c.value == 3 * n


def run(quick: bool = False) -> dict:
    """Measure; returns ``{untraced_ns_per_call, <tool>_ns_per_hit, <tool>_exact,
    pyebpf_vs_bpftrace, hits, rounds}``."""
    if shutil.which("gcc") is None:
        raise RuntimeError("bench_usdt needs gcc to build benchmarks/targets/loop.c")
    n = 200_000 if quick else 2_000_000
    rounds = 2 if quick else 5
    tools = {"pyebpf": _pyebpf, "pyebpf_args": _pyebpf_args}
    if shutil.which("bpftrace"):
        tools["bpftrace"] = _bpftrace
    binary = build_loop(usdt=True)
    _untraced(binary, n // 10)                       # warm the page cache
    base: list[float] = []
    added: dict[str, list[float]] = {t: [] for t in tools}
    exact: dict[str, bool] = {t: True for t in tools}
    order = list(tools)
    for r in range(rounds):
        ns, _ = _untraced(binary, n)
        base.append(ns)
        for tool in (order if r % 2 == 0 else order[::-1]):   # alternate the order
            ns, ok = tools[tool](binary, n)
            added[tool].append(ns - base[-1])
            exact[tool] = exact[tool] and ok
    out: dict = {"hits": n, "rounds": rounds,
                 "untraced_ns_per_call": statistics.median(base)}
    for tool in tools:
        out[f"{tool}_ns_per_hit"] = statistics.median(added[tool])
        out[f"{tool}_exact"] = exact[tool]
    out["provider_fire_ns"], out["provider_fire_traced_ns"], out["provider_exact"] = \
        _provider_fire(n // 10)
    if "bpftrace" in tools:
        out["pyebpf_vs_bpftrace"] = out["pyebpf_ns_per_hit"] / out["bpftrace_ns_per_hit"]
        out["pyebpf_args_vs_bpftrace"] = (out["pyebpf_args_ns_per_hit"] /
                                          out["bpftrace_ns_per_hit"])
    return out


if __name__ == "__main__":
    res = run(quick="--quick" in sys.argv)
    for key, value in res.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
