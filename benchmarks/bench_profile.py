"""The profiler's cost: its overhead on a CPU-bound workload, and drawing time.

* ``workload_s``: the CPU-bound workload alone (a C program spinning in
  register-only loops under main -> work -> hot/cold, ~3 s): its CPU time
  (user + system, which a busy machine does not stretch as it does the wall
  time; the sampling interrupts are charged to the task they interrupt),
  best of the rounds.
* ``pyebpf_99hz_slowdown`` / ``pyebpf_999hz_slowdown``: its CPU time while
  ``pyebpf profile -F HZ`` samples every CPU (system-wide, like bpftrace's
  ``profile:hz``), over its run time alone (1.00 = no overhead).
* ``bpftrace_99hz_slowdown``: the same with ``bpftrace -e 'profile:hz:99 {
  @[ustack] = count(); }'`` (absent when bpftrace is not installed).
* ``pyebpf_99hz_samples``: the workload's samples in pyebpf's profile
  (sanity: ~99 per second of its run).
* The Python comparison, pyebpf against py-spy (``python_*``; run alone:
  ``python benchmarks/bench_profile.py --python [--bpf-stats] [--log]``).
  A pure-Python CPU-bound workload (hot/cold spinning loops, a fixed amount
  of work, ~3 s a phase on the newest CPython found: pyenv's 3.1x, else
  this interpreter) does the same work four times in one process: once to
  warm up, alone, while ``pyebpf profile -F HZ -p PID`` (or ``py-spy
  record -r HZ -p PID``) samples it, alone again.  The sampled phase is
  compared with the mean of the two around it: the same process (one
  memory layout: from one process to the next this interpreter's speed
  differs by up to ~20% here) at the same moment (the machine's speed
  drifts).  Each phase times itself: wall time, CPU time and the time it
  waited for a CPU (``/proc/self/schedstat``).  ``alone`` is the control:
  alone in the middle phase too (its ratios show the noise).  Per case,
  over ``rounds`` rounds in an order rotated each round, the median and
  quartiles (``_spread``) of:

  - ``_own_wall_slowdown``: the wall time less the waits for a CPU -- the
    slowdown a user feels on a machine where nothing else wants that CPU
    (the workload is pinned to CPU 1, the tool to CPU 0: as on a machine
    with a core to spare, the tool never competes with its target, and the
    other work of a shared machine shows as waits, taken out; ``--no-pin``
    made the sampled runs 3-10% faster than the unsampled ones around them
    on the 2-CPU VM measured, CPU time too, the control staying at 1.00);
  - ``_wall_slowdown``: the wall time as measured (waits included);
  - ``_cpu_slowdown``: the CPU time (the eBPF program runs in the
    sampled task's context: its cost shows here and in the wall time);
  - ``_stopped_share``: the share of the wall time the workload was
    neither running nor waiting for a CPU (py-spy stops it to read it);
  - ``_tool_cpu_share``: the tool's own CPU time over the wall time;
  - ``_samples_per_s``: the workload's samples per second (fairness: both
    tools take the rate asked);
  - with ``--bpf-stats``, ``_bpf_share`` and ``_bpf_ns_per_sample``: the
    sampler program's own run time (BPF_ENABLE_STATS, which counts every
    program of the machine while it is on).
* ``<tool>_stop_to_output_s``: from Ctrl-C to the tool's exit with every
  process's stacks symbolized and printed (system-wide: every process that
  ran; bpftrace is killed after 60 s).
* ``svg_10000_stacks_ms``: from the end of sampling to the written SVG for
  10,000 distinct stacks (synthetic, 8-24 frames deep): layout, drawing and
  writing the file; ``folded_10000_stacks_ms`` and
  ``speedscope_10000_stacks_ms`` the same for the other formats;
  ``svg_10000_stacks_mb`` the SVG's size.

Each tool is started and has attached before the (sampled) work starts;
rounds alternate the tools so that a busy machine slows them alike.  Run:
``python -m benchmarks profile`` or ``python benchmarks/bench_profile.py [--quick]``.
Needs root.
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.targets import build  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
STOP_TIMEOUT = 60.0

WORKLOAD_C = r"""
#include <stdlib.h>
__attribute__((noinline)) unsigned long spin(unsigned long n, unsigned long x)
{
    for (unsigned long i = 0; i < n; i++)
        __asm__ volatile("" : "+r"(x));
    if (x == 0x5eed5eed5eedUL)
        abort();
    return x;
}
__attribute__((noinline)) unsigned long hot(unsigned long x) { return spin(60000000UL, x) + 1; }
__attribute__((noinline)) unsigned long cold(unsigned long x) { return spin(20000000UL, x) + 1; }
__attribute__((noinline)) unsigned long work(unsigned long x) { return hot(x) + cold(x); }
int main(int argc, char **argv)
{
    unsigned long rounds = argc > 1 ? strtoul(argv[1], 0, 10) : 10, x = 0;
    for (unsigned long r = 0; r < rounds; r++)
        x += work(r);
    return (int)(x & 1) * 0;
}
"""


def _workload() -> str:
    src = Path(tempfile.gettempdir()) / "pyebpf-bench-profile-spin.c"
    if not src.exists() or src.read_text() != WORKLOAD_C:
        src.write_text(WORKLOAD_C)
    return build(src, "profile-spin", ["-fno-omit-frame-pointer", "-fno-shrink-wrap",
                                       "-fno-optimize-sibling-calls"])


def _time(argv: list[str]) -> float:
    """The CPU time (user + system) ``argv`` took: unlike its wall time, not
    stretched when other processes compete for the CPUs, while the sampling
    interrupts and the BPF program are charged to the task they interrupt."""
    proc = subprocess.Popen(argv)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"{argv[0]} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def _under(tool: list[str], ready: str, argv: list[str]) -> tuple[float, str, float]:
    """The workload's CPU time while ``tool`` runs (started, attached: it
    printed a line starting with ``ready`` on stderr/stdout), the tool's
    output, and the seconds from Ctrl-C to its exit (killed after
    :data:`STOP_TIMEOUT`)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(tool, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        stream = proc.stderr if tool[0] == sys.executable else proc.stdout
        assert stream is not None
        while True:
            line = stream.readline()
            if not line:
                raise RuntimeError(f"{tool[0]} ended before attaching: {proc.stderr.read()}")
            if line.startswith(ready):
                break
        seconds = _time(argv)
    finally:
        proc.send_signal(2)
    t0 = time.perf_counter()
    try:
        out, err = proc.communicate(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:   # (bpftrace can take minutes to symbolize them all)
        proc.kill()
        out, err = proc.communicate()
    return seconds, out, time.perf_counter() - t0


def _synthetic(n: int, seed: int = 7) -> dict[tuple[str, ...], int]:
    rng = random.Random(seed)
    vocab = [f"module{i % 7}::function_{i}" for i in range(400)]
    out: dict[tuple[str, ...], int] = {}
    while len(out) < n:
        depth = rng.randint(8, 24)
        stack = ("_start", "main") + tuple(rng.choice(vocab[:40 + d * 15]) for d in range(depth))
        out[stack] = rng.randint(1, 50)
    return out


def _drawing(out: dict, rounds: int) -> None:
    from pyebpf.profile import write_profile
    stacks = _synthetic(10_000)
    tmp = tempfile.mkdtemp(prefix="pyebpf_bench_")
    try:
        for ext, name in ((".svg", "svg"), (".folded", "folded"), (".json", "speedscope")):
            path = os.path.join(tmp, "p" + ext)
            best = float("inf")
            for _ in range(rounds):
                t0 = time.perf_counter()
                write_profile(stacks, path)
                best = min(best, time.perf_counter() - t0)
            out[f"{name}_10000_stacks_ms"] = best * 1000
            if ext == ".svg":
                out["svg_10000_stacks_mb"] = os.path.getsize(path) / 1e6
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


PY_WORKLOAD = """
import sys, time
def spin(n):
    for _ in range(n):
        pass
def hot():
    spin(60000)
def cold():
    spin(20000)
def schedstat():
    with open("/proc/self/schedstat") as f:
        oncpu, waited, _ = f.read().split()
    return int(oncpu) / 1e9, int(waited) / 1e9
for _ in sys.stdin:
    c0, w0 = schedstat()
    t0 = time.perf_counter()
    for _ in range(int(sys.argv[1])):
        hot()
        cold()
    t = time.perf_counter() - t0
    c1, w1 = schedstat()
    print(t, c1 - c0, w1 - w0, flush=True)
"""
#: iterations of PY_WORKLOAD's loop per phase: ~3 s on CPython 3.13 here (quick: ~1 s)
PY_WORK, PY_QUICK_WORK = 2400, 800
#: the CPUs of the workload and of the tool when the machine has two or more
WORK_CPU, TOOL_CPU = 1, 0


def _newest_python() -> str:
    import glob
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[0-9].*/bin/python3")),
                   key=lambda p: [int(x) for x in p.split("/versions/")[1].split("/")[0]
                                  .split(".")])
    return found[-1] if found else sys.executable


def _cpu_of(pid: int) -> float:
    """The CPU seconds (user + system, all threads) process ``pid`` used so far."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rpartition(b")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pinned(cpu: int | None) -> Any:
    """A ``preexec_fn`` that pins the child to ``cpu`` (None: no pinning)."""
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


class _Tool:
    """A profiler started on a process and sampling it (its output read by
    a thread, so that it never blocks on a full pipe)."""

    def __init__(self, argv: list[str], ready: str, cpu: int | None) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env, preexec_fn=_pinned(cpu))
        self.ready = threading.Event()
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, args=(ready,), daemon=True)
        self.reader.start()
        while not self.ready.wait(1.0):
            if self.proc.poll() is not None:
                break
        if self.proc.poll() is not None:
            self.reader.join(5)
            raise RuntimeError(f"{argv[0]} ended before sampling: {''.join(self.lines)}")

    def _read(self, ready: str) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if ready in line:
                self.ready.set()
        self.ready.set()

    def stop(self) -> None:
        """Ctrl-C (both tools then write their output and end); killed
        after :data:`STOP_TIMEOUT`."""
        for action in (signal.SIGINT, signal.SIGKILL):
            self.proc.send_signal(action)
            try:
                self.proc.wait(STOP_TIMEOUT)
                break
            except subprocess.TimeoutExpired:
                continue
        self.reader.join(5)


def _workload_samples(path: str) -> int:
    """The samples in the workload's functions (hot, cold) of a folded file
    (``frame;frame count`` lines: pyebpf's folded output and py-spy's raw
    format alike)."""
    try:
        with open(path) as f:
            return sum(int(line.rpartition(" ")[2]) for line in f
                       if "hot (" in line or "cold (" in line)
    except (OSError, ValueError):
        return 0


class _BpfTime:
    """The run time of the programs named ``profile`` loaded after this
    object was made (pyebpf's sampler), counted while it is open
    (BPF_ENABLE_STATS: on for every program of the machine meanwhile)."""

    def __init__(self) -> None:
        from pyebpf.kernel.syscall import enable_stats, prog_get_next_id
        self.stats = enable_stats()
        self.after = 0
        while (nxt := prog_get_next_id(self.after)) is not None:
            self.after = nxt

    def read(self) -> tuple[int, int]:
        """(runs, nanoseconds) so far, summed over the programs."""
        from pyebpf.errors import PyebpfError
        from pyebpf.kernel.syscall import prog_get_fd_by_id, prog_get_next_id, prog_info
        runs = ns = 0
        at = self.after
        while (at := prog_get_next_id(at)) is not None:     # type: ignore[assignment]
            try:
                fd = prog_get_fd_by_id(at)
            except PyebpfError:
                continue                                    # (gone meanwhile)
            with fd:
                info = prog_info(fd)
            if info.name == "profile":
                runs += info.run_cnt
                ns += info.run_time_ns
        return runs, ns

    def close(self) -> None:
        """Stop counting."""
        self.stats.close()


def _python_process(py: str, n: str, tool: tuple[list[str], str, str] | None, pin: bool,
                    bpf_stats: bool) -> dict[str, float]:
    """One process of the Python workload doing the same work three times:
    alone, while ``tool`` samples it (argv without the pid, the line it
    prints once sampling, the file it writes; None: alone again), alone
    again.  The middle phase's wall and CPU time over the mean of the
    others' (the same process: the same memory layout, the same moment),
    its own numbers, the tool's CPU time during it and its samples."""
    two = pin and (os.cpu_count() or 1) >= 2
    work = subprocess.Popen([py, "-c", PY_WORKLOAD, n], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True,
                            preexec_fn=_pinned(WORK_CPU if two else None))
    assert work.stdin is not None and work.stdout is not None

    def phase(times: int = 1) -> tuple[float, float, float]:
        assert work.stdin is not None and work.stdout is not None
        work.stdin.write("go\n" * times)
        work.stdin.flush()
        for _ in range(times):
            wall, cpu, waited = map(float, work.stdout.readline().split())
        return wall, cpu, waited

    prof = stats = None
    try:
        phase()                     # (warming up: the first run of a process is slower)
        before = phase()
        if tool is not None:
            argv, ready, out = tool
            if os.path.exists(out):
                os.unlink(out)
            stats = _BpfTime() if bpf_stats and "pyebpf" in argv else None
            prof = _Tool(argv + [str(work.pid)], ready, TOOL_CPU if two else None)
            tool0 = _cpu_of(prof.proc.pid)
            bpf0 = stats.read() if stats else (0, 0)
        during = phase()
        got: dict[str, float] = {}
        if prof is not None and tool is not None:
            got["tool_cpu"] = (_cpu_of(prof.proc.pid) - tool0) / during[0]
            if stats is not None:
                runs, ns = (b - a for a, b in zip(bpf0, stats.read()))
                got["bpf_runs"], got["bpf_ns"] = runs, ns
            prof.stop()
            prof = None
            got["samples"] = _workload_samples(tool[2])
        after = phase()
        work.stdin.close()
        work.wait(STOP_TIMEOUT)
    finally:
        if stats is not None:
            stats.close()
        if prof is not None:
            prof.stop()
        if work.poll() is None:
            work.kill()
            work.wait()
    got.update(_ratios(before, during, after))
    return got


def _ratios(before: tuple[float, float, float], during: tuple[float, float, float],
            after: tuple[float, float, float]) -> dict[str, float]:
    """The middle phase's numbers and its ratios over the mean of the phases
    around it: wall, wall without the waits for a CPU ("own_wall": the
    work's wall time had no other process wanted the CPU), CPU."""
    def own(p: tuple[float, float, float]) -> float:
        return p[0] - p[2]
    wall, cpu, waited = during
    return {"wall": wall, "cpu": cpu, "waited": waited, "stopped": wall - cpu - waited,
            "wall_ratio": wall / ((before[0] + after[0]) / 2),
            "own_wall_ratio": own(during) / ((own(before) + own(after)) / 2),
            "cpu_ratio": cpu / ((before[1] + after[1]) / 2),
            "alone_wall": (before[0] + after[0]) / 2, "before_waited": before[2],
            "after_waited": after[2]}


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    """The first quartile, the median and the third quartile of ``values``."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], statistics.median(values), q[2]


def python_tools(tmp: str) -> dict[str, tuple[list[str], str, str]]:
    """The profilers compared, by name: pyebpf and py-spy (when installed) at
    99 and 999 Hz, each as (argv without the pid, its 'sampling' line, the
    file it writes)."""
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    tools: dict[str, tuple[list[str], str, str]] = {}
    for hz in ("99", "999"):
        out = os.path.join(tmp, f"pyebpf{hz}.folded")
        tools[f"pyebpf_{hz}hz"] = ([sys.executable, "-m", "pyebpf", "profile", "-F", hz,
                                    "-o", out, "-p"], "Sampling at", out)
        if os.access(spy, os.X_OK):
            out = os.path.join(tmp, f"pyspy{hz}.txt")
            tools[f"pyspy_{hz}hz"] = ([spy, "record", "-r", hz, "-f", "raw", "-o", out, "-p"],
                                      "Sampling process", out)
    return tools


def run_python(rounds: int = 8, quick: bool = False, pin: bool = True,
               bpf_stats: bool = False, log: Any = None) -> dict:
    """The Python workload's slowdown under pyebpf and under py-spy (see the
    module docs): ``rounds`` rounds of every case (and of a control: alone
    in the middle phase too), in an order rotated each round; per case the
    median and the quartiles of its ratios over the rounds.  ``log`` (a
    file) gets one line per process."""
    py = _newest_python()
    n = str(PY_QUICK_WORK if quick else PY_WORK)
    tmp = tempfile.mkdtemp(prefix="pyebpf_bench_")
    tools = python_tools(tmp)
    cases: list[str] = [*tools, "alone"]
    runs: dict[str, list[dict[str, float]]] = {c: [] for c in cases}
    load = os.getloadavg()
    try:
        for name in cases:                                  # (warm the caches, untimed)
            _python_process(py, "20", tools.get(name), pin, False)
        for r in range(rounds):
            k = r % len(cases)
            for name in cases[k:] + cases[:k]:
                got = _python_process(py, n, tools.get(name), pin, bpf_stats)
                runs[name].append(got)
                if log is not None:
                    print(f"round {r} {name}: " + " ".join(f"{key} {v:.4g}" for key, v
                                                          in got.items()),
                          file=log, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out: dict = {"python": py, "python_rounds": rounds, "python_pinned": pin,
                 "python_load_before": load[0], "python_load_after": os.getloadavg()[0],
                 "python_alone_wall_s": statistics.median(
                     x["alone_wall"] for c in cases for x in runs[c])}
    for name in cases:
        for what in ("wall", "own_wall", "cpu"):
            q1, med, q3 = _quartiles([x[f"{what}_ratio"] for x in runs[name]])
            out[f"python_{name}_{what}_slowdown"] = med
            out[f"python_{name}_{what}_spread"] = f"{q1:.3f}-{q3:.3f}"
        out[f"python_{name}_stopped_share"] = statistics.median(
            x["stopped"] / x["wall"] for x in runs[name])
        if name in tools:
            out[f"python_{name}_tool_cpu_share"] = statistics.median(
                x["tool_cpu"] for x in runs[name])
            out[f"python_{name}_samples_per_s"] = statistics.median(
                x["samples"] / x["wall"] for x in runs[name])
        if runs[name] and "bpf_runs" in runs[name][0]:
            out[f"python_{name}_bpf_share"] = statistics.median(
                x["bpf_ns"] / 1e9 / x["wall"] for x in runs[name])
            out[f"python_{name}_bpf_ns_per_sample"] = statistics.median(
                x["bpf_ns"] / max(1, x["samples"]) for x in runs[name])
    return out


def run(quick: bool = False) -> dict:
    rounds = 1 if quick else 3
    out: dict = {}
    _drawing(out, rounds)
    if os.geteuid() != 0:
        out["overhead"] = "skipped: needs root"
        return out
    spin = _workload()
    argv = [spin, "30" if quick else "80"]
    pyebpf = [sys.executable, "-m", "pyebpf", "profile"]
    tools = {"pyebpf_99hz": (pyebpf + ["-F", "99"], "Sampling at"),
             "pyebpf_999hz": (pyebpf + ["-F", "999"], "Sampling at")}
    if shutil.which("bpftrace"):
        tools["bpftrace_99hz"] = (["bpftrace", "-e", "profile:hz:99 { @[ustack] = count(); }"],
                                  "Attaching")
    best = {name: float("inf") for name in ["alone", *tools]}
    stop = {name: float("inf") for name in tools}
    samples = 0
    _time(argv)                                         # warm the caches
    for _ in range(rounds):
        best["alone"] = min(best["alone"], _time(argv))
        for name, (tool, ready) in tools.items():
            seconds, text, stopping = _under(tool, ready, argv)
            best[name] = min(best[name], seconds)
            stop[name] = min(stop[name], stopping)
            if name == "pyebpf_99hz":
                samples = sum(int(line.rpartition(" ")[2]) for line in text.splitlines()
                              if ";work;" in line)
    out["workload_s"] = best["alone"]
    for name in tools:
        out[f"{name}_slowdown"] = best[name] / best["alone"]
    for name in tools:
        out[f"{name}_stop_to_output_s"] = stop[name]
    out["pyebpf_99hz_samples"] = samples
    out.update(run_python(2 if quick else 8, quick))
    return out


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description="the profiler's cost (see the module docs)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds, shorter workloads")
    parser.add_argument("--python", action="store_true",
                        help="only the Python workload under pyebpf and py-spy")
    parser.add_argument("--rounds", type=int, help="rounds of the Python comparison (8)")
    parser.add_argument("--bpf-stats", action="store_true",
                        help="also pyebpf's program run time (BPF_ENABLE_STATS: counts every "
                             "program of the machine meanwhile)")
    parser.add_argument("--no-pin", action="store_true",
                        help="leave the workload and the tool where the scheduler puts them")
    parser.add_argument("--log", action="store_true", help="one line per run on stderr")
    args = parser.parse_args()
    if os.geteuid() != 0:
        results: dict = {"overhead": "skipped: needs root"}
    elif args.python:
        results = run_python(args.rounds or (2 if args.quick else 8), args.quick,
                             pin=not args.no_pin, bpf_stats=args.bpf_stats,
                             log=sys.stderr if args.log else None)
    else:
        results = run(quick=args.quick)
    for key, value in results.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
