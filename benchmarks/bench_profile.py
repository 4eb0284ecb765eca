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
  Two processes of the same pure-Python CPU-bound work (hot/cold spinning
  loops on the newest CPython found: pyenv's 3.1x, else this interpreter),
  ``a`` and ``b``, take turns on one CPU (a token passed through pipes,
  ~50 ms a turn), while ``pyebpf profile -F HZ -p A`` (or ``py-spy record
  -r HZ -p A``) samples ``a`` alone, pinned to the other CPU.  Each turn
  times itself: wall time, CPU time (``thread_time``) and the time it
  waited for a CPU (``/proc/self/schedstat``).  A pair is a turn of ``a``
  and the next of ``b``: the same work at the same moment, so the
  machine's speed, which on the VM measured moves in steps of 2-3% every
  few seconds and after idling, cancels out of ``a``'s time over ``b``'s.
  Each case is a window of ``PY_WINDOW`` seconds with the profiler on,
  between windows with none (different processes run at different speeds:
  their memory layouts), its slowdown the median pair ratio in the window
  over the mean of those in the windows around it; ``alone`` is the control
  (no profiler in its window either: its ratios show the noise).  Per case,
  over ``rounds`` rounds in an order rotated each round, the median and
  quartiles (``_spread``) of the cases below.  A SCHED_IDLE spinner (the
  filler) runs on the work's CPU, so that it never idles: on the VM measured
  a CPU that idles, even in pieces of 0.1 ms, runs the work up to 1-2%
  faster afterwards, which hid a tool's stops from the wall time (shown by
  the control ``stops``, which stops ``a`` as py-spy does and reads nothing;
  without the filler its CPU time for the same work fell by as much as it
  held ``a`` stopped).  The filler takes a sliver of the CPU from both
  workers alike (as waits, taken out of ``_own_wall``).

  - ``_own_wall_slowdown``: the wall time less the waits for a CPU -- the
    slowdown a user feels on a machine where nothing else wants that CPU
    (other work on a shared machine shows as waits, taken out);
  - ``_wall_slowdown``: the wall time as measured (waits included);
  - ``_cpu_slowdown``: the CPU time (the eBPF program runs in the
    sampled task's context: its cost shows here and in the wall time);
  - ``_stopped_share``: the share of ``a``'s turns it was neither running
    nor waiting for a CPU (py-spy stops it to read it);
  - ``_tool_cpu_share``: the tool's own CPU time over the window;
  - ``_samples_per_s``: ``a``'s samples per second of its running
    (fairness: both tools take the rate asked);
  - ``stops_HZhz``: the control: stops ``a`` as py-spy does (ptrace),
    holds it ~0.1 ms, reads nothing (``--no-stops``: left out);
  - with ``--bpf-stats``, ``_bpf_share`` and ``_bpf_ns_per_sample``: the
    sampler program's own run time over ``a``'s turns (BPF_ENABLE_STATS,
    which counts every program of the machine while it is on).
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


PY_WORKER = """
import os, sys, time
def spin(n):
    for _ in range(n):
        pass
def hot():
    spin(60000)
def cold():
    spin(20000)
def waited():
    with open("/proc/self/schedstat") as f:
        return int(f.read().split()[1]) / 1e9
take, give, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
while os.read(take, 1):
    w0, c0, t0 = waited(), time.thread_time(), time.perf_counter()
    for _ in range(n):
        hot()
        cold()
    t1, c1, w1 = time.perf_counter(), time.thread_time(), waited()
    print(t0, t1, c1 - c0, w1 - w0, flush=True)
    os.write(give, b"x")
"""
#: The control ``stops``: stops process ``a`` as py-spy does (ptrace: seize,
#: interrupt, wait, detach) at HZ, holds it stopped for :data:`STOP_HOLD`
#: and reads nothing; it writes its count of stops (as a ``hot (`` line,
#: counted as the samples).
STOPPER = """
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
SEIZE, INTERRUPT, DETACH, WALL = 0x4206, 0x4207, 17, 0x40000000
hz, hold, out, pid = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
stops, done = 0, []
signal.signal(signal.SIGINT, lambda *_: done.append(1))
print("Sampling process", pid, flush=True)
period, at = 1 / hz, time.monotonic()
while not done:
    if libc.ptrace(SEIZE, pid, None, None) == 0:
        libc.ptrace(INTERRUPT, pid, None, None)
        os.waitpid(pid, WALL)
        until = time.perf_counter() + hold
        while time.perf_counter() < until:
            pass
        libc.ptrace(DETACH, pid, None, None)
        stops += 1
    at += period
    time.sleep(max(0.0, at - time.monotonic()))
with open(out, "w") as f:
    print("stopped;hot (x) ", stops, file=f)
"""
#: seconds STOPPER holds each stop: about py-spy's stop here (its stopped
#: share of the work's run over its samples a second at 99 Hz)
STOP_HOLD = 100e-6
#: The filler (on unless ``--no-filler``): a SCHED_IDLE spinner on the work's
#: CPU, which runs only when neither worker can, so that the CPU never idles.
FILLER = """
import os
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
while True:
    pass
"""
#: iterations of PY_WORKER's loop per turn: ~50 ms on CPython 3.13 here
PY_TURN = 40
#: seconds of each window (quick: 2)
PY_WINDOW, PY_QUICK_WINDOW = 6.0, 2.0
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


class _Pair:
    """Two processes of the same Python work taking turns on one CPU (a
    token passed through pipes): ``a`` (the one a profiler samples) and
    ``b`` (never sampled).  Each turn times itself (wall, CPU, waits for a
    CPU); a thread collects the lines.  With ``filler``, :data:`FILLER` on
    their CPU too."""

    def __init__(self, py: str, cpu: int | None, filler: bool = False) -> None:
        a_to_b, b_to_a = os.pipe(), os.pipe()
        self.turns: dict[str, list[tuple[float, ...]]] = {"a": [], "b": []}
        self.procs = {}
        for name, take, give in (("a", b_to_a[0], a_to_b[1]), ("b", a_to_b[0], b_to_a[1])):
            self.procs[name] = subprocess.Popen(
                [py, "-c", PY_WORKER, str(take), str(give), str(PY_TURN)], pass_fds=(take, give),
                stdout=subprocess.PIPE, text=True, preexec_fn=_pinned(cpu))
        self.readers = [threading.Thread(target=self._read, args=(name,), daemon=True)
                        for name in self.procs]
        for t in self.readers:
            t.start()
        for fd in (*a_to_b, b_to_a[0]):
            os.close(fd)
        os.write(b_to_a[1], b"x")              # a's turn first; a and b hold the pipes now
        os.close(b_to_a[1])
        self.a = self.procs["a"]
        self.filler = subprocess.Popen([py, "-c", FILLER], preexec_fn=_pinned(cpu)) \
            if filler else None

    def _read(self, name: str) -> None:
        stdout = self.procs[name].stdout
        assert stdout is not None
        for line in stdout:
            self.turns[name].append(tuple(map(float, line.split())))

    def pairs(self, t0: float, t1: float) -> list[tuple[tuple[float, ...], tuple[float, ...]]]:
        """The pairs (a's turn, b's next turn) of the window ``t0``..``t1``
        (perf_counter times): each turn ``(start, end, cpu, waited)``."""
        a, b = list(self.turns["a"]), list(self.turns["b"])
        return [(x, y) for x, y in zip(a, b) if x[0] >= t0 and y[1] <= t1]

    def close(self) -> None:
        for proc in [*self.procs.values(), *([self.filler] if self.filler else [])]:
            proc.kill()
            proc.wait()
        for t in self.readers:
            t.join(5)
        for proc in self.procs.values():
            if proc.stdout is not None:
                proc.stdout.close()


def _window(pair: _Pair, t0: float, t1: float) -> dict[str, float]:
    """A window's numbers: the medians over its pairs of a's turn over b's
    (``own_wall``: the wall time less the waits for a CPU; ``wall``; ``cpu``),
    a's stopped share (neither running nor waiting) and its running time."""
    got = pair.pairs(t0, t1)
    if len(got) < 5:
        raise RuntimeError(f"only {len(got)} turns in a {t1 - t0:.1f} s window")

    def own(t: tuple[float, ...]) -> float:
        return t[1] - t[0] - t[3]
    out = {"pairs": len(got),
           "own_wall": statistics.median(own(x) / own(y) for x, y in got),
           "wall": statistics.median((x[1] - x[0]) / (y[1] - y[0]) for x, y in got),
           "cpu": statistics.median(x[2] / y[2] for x, y in got),
           "a_wall": sum(x[1] - x[0] for x, _ in got), "a_cpu": sum(x[2] for x, _ in got)}
    out["stopped"] = (out["a_wall"] - out["a_cpu"] - sum(x[3] for x, _ in got)) / out["a_wall"]
    return out


def _sampled_window(pair: _Pair, tool: tuple[list[str], str, str] | None, seconds: float,
                    cpu: int | None, bpf_stats: bool) -> dict[str, float]:
    """One window of ``seconds`` while ``tool`` (argv without the pid, its
    'sampling' line, its output file; None: no tool, the control) samples
    process a; the tool is started before the window and stopped after."""
    prof = stats = None
    got: dict[str, float] = {}
    try:
        if tool is not None:
            argv, ready, out = tool
            if os.path.exists(out):
                os.unlink(out)
            stats = _BpfTime() if bpf_stats and "pyebpf" in argv else None
            prof = _Tool(argv + [str(pair.a.pid)], ready, cpu)
            tool0 = _cpu_of(prof.proc.pid)
            bpf0 = stats.read() if stats else (0, 0)
        t0 = time.perf_counter()
        time.sleep(seconds)
        t1 = time.perf_counter()
        if prof is not None and tool is not None:
            got["tool_cpu"] = (_cpu_of(prof.proc.pid) - tool0) / (t1 - t0)
            if stats is not None:
                runs, ns = (y - x for x, y in zip(bpf0, stats.read()))
                got["bpf_runs"], got["bpf_ns"] = runs, ns
            prof.stop()
            prof = None
            t_stop = time.perf_counter()
            got["samples"] = _workload_samples(tool[2])
    finally:
        if stats is not None:
            stats.close()
        if prof is not None:
            prof.stop()
    time.sleep(0.2)                             # (the last turn of the window ends)
    got.update(_window(pair, t0, t1))
    if "samples" in got:                        # (per second a ran while the tool was on)
        got["samples_per_s"] = got["samples"] / sum(
            x[2] for x, _ in pair.pairs(t0 - seconds, t_stop) if x[1] > t0 - 0.1)
    if "bpf_ns" in got:
        got["bpf_share"] = got["bpf_ns"] / 1e9 / got["a_wall"]
    return got


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    """The first quartile, the median and the third quartile of ``values``."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], statistics.median(values), q[2]


def python_tools(tmp: str, rates: tuple[str, ...] = ("99", "999"), stops: bool = False
                 ) -> dict[str, tuple[list[str], str, str]]:
    """The profilers compared, by name: pyebpf and py-spy (when installed) at
    each rate of ``rates`` (Hz), each as (argv without the pid, its
    'sampling' line, the file it writes); with ``stops``, the control
    :data:`STOPPER` too."""
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    tools: dict[str, tuple[list[str], str, str]] = {}
    for hz in rates:
        out = os.path.join(tmp, f"pyebpf{hz}.folded")
        tools[f"pyebpf_{hz}hz"] = ([sys.executable, "-m", "pyebpf", "profile", "-F", hz,
                                    "-o", out, "-p"], "Sampling at", out)
        if os.access(spy, os.X_OK):
            out = os.path.join(tmp, f"pyspy{hz}.txt")
            tools[f"pyspy_{hz}hz"] = ([spy, "record", "-r", hz, "-f", "raw", "-o", out, "-p"],
                                      "Sampling process", out)
        if stops:
            out = os.path.join(tmp, f"stops{hz}.txt")
            tools[f"stops_{hz}hz"] = ([sys.executable, "-c", STOPPER, hz, str(STOP_HOLD), out],
                                      "Sampling process", out)
    return tools


def run_python(rounds: int = 6, quick: bool = False, pin: bool = True,
               bpf_stats: bool = False, log: Any = None,
               rates: tuple[str, ...] = ("99", "999"), stops: bool = True,
               filler: bool = True) -> dict:
    """The Python work's slowdown under pyebpf and under py-spy (see the
    module docs): two processes of the work take turns on one CPU, and each
    case is a window while a profiler samples one of them, between windows
    where none does; ``rounds`` rounds of every case (and of a control: no
    profiler in its window either), in an order rotated each round.  Per
    case the median and the quartiles of its windows' slowdowns.  ``log``
    (a file) gets one line per window; ``rates``: the sampling rates (Hz);
    ``stops``: the control :data:`STOPPER` too; ``filler``: :data:`FILLER`
    on the work's CPU."""
    py = _newest_python()
    seconds = PY_QUICK_WINDOW if quick else PY_WINDOW
    two = pin and (os.cpu_count() or 1) >= 2
    tmp = tempfile.mkdtemp(prefix="pyebpf_bench_")
    tools = python_tools(tmp, rates, stops)
    cases: list[str] = [*tools, "alone"]
    runs: dict[str, list[dict[str, float]]] = {c: [] for c in cases}
    load = os.getloadavg()
    pair = _Pair(py, WORK_CPU if two else None, filler)
    try:
        time.sleep(2 * seconds / 3)                          # (warming up)
        base = _sampled_window(pair, None, seconds, None, False)
        for r in range(rounds):
            k = r % len(cases)
            for name in cases[k:] + cases[:k]:
                got = _sampled_window(pair, tools.get(name), seconds,
                                      TOOL_CPU if two else None, bpf_stats)
                after = _sampled_window(pair, None, seconds, None, False)
                for what in ("own_wall", "wall", "cpu"):
                    got[f"{what}_ratio"] = got[what] / ((base[what] + after[what]) / 2)
                base = after
                runs[name].append(got)
                if log is not None:
                    print(f"round {r} {name}: " + " ".join(f"{key} {v:.4g}" for key, v
                                                          in got.items()),
                          file=log, flush=True)
    finally:
        pair.close()
        shutil.rmtree(tmp, ignore_errors=True)
    out: dict = {"python": py, "python_rounds": rounds, "python_pinned": two,
                 "python_filler": filler,
                 "python_window_s": seconds, "python_load_before": load[0],
                 "python_load_after": os.getloadavg()[0],
                 "python_turn_s": statistics.median(
                     x["a_wall"] / x["pairs"] for c in cases for x in runs[c])}
    for name in cases:
        for what in ("wall", "own_wall", "cpu"):
            q1, med, q3 = _quartiles([x[f"{what}_ratio"] for x in runs[name]])
            out[f"python_{name}_{what}_slowdown"] = med
            out[f"python_{name}_{what}_spread"] = f"{q1:.3f}-{q3:.3f}"
        out[f"python_{name}_stopped_share"] = statistics.median(x["stopped"] for x in runs[name])
        if name in tools:
            out[f"python_{name}_tool_cpu_share"] = statistics.median(
                x["tool_cpu"] for x in runs[name])
            out[f"python_{name}_samples_per_s"] = statistics.median(
                x["samples_per_s"] for x in runs[name])
        if runs[name] and "bpf_runs" in runs[name][0]:
            out[f"python_{name}_bpf_share"] = statistics.median(
                x["bpf_share"] for x in runs[name])
            out[f"python_{name}_bpf_ns_per_sample"] = statistics.median(
                x["bpf_ns"] / max(1, x["bpf_runs"]) for x in runs[name])
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
    out.update(run_python(2 if quick else 6, quick))
    return out


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description="the profiler's cost (see the module docs)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds, shorter workloads")
    parser.add_argument("--python", action="store_true",
                        help="only the Python workload under pyebpf and py-spy")
    parser.add_argument("--rounds", type=int, help="rounds of the Python comparison (6)")
    parser.add_argument("--bpf-stats", action="store_true",
                        help="also pyebpf's program run time (BPF_ENABLE_STATS: counts every "
                             "program of the machine meanwhile)")
    parser.add_argument("--no-pin", action="store_true",
                        help="leave the workload and the tool where the scheduler puts them")
    parser.add_argument("--log", action="store_true", help="one line per window on stderr")
    parser.add_argument("--rates", default="99,999",
                        help="sampling rates of the Python comparison, Hz (99,999)")
    parser.add_argument("--no-stops", action="store_true",
                        help="leave out the control that stops the work as py-spy does and "
                             "reads nothing")
    parser.add_argument("--no-filler", action="store_true",
                        help="no SCHED_IDLE spinner on the work's CPU (it then idles while a "
                             "tool stops the work)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        results: dict = {"overhead": "skipped: needs root"}
    elif args.python:
        results = run_python(args.rounds or (2 if args.quick else 6), args.quick,
                             pin=not args.no_pin, bpf_stats=args.bpf_stats,
                             log=sys.stderr if args.log else None,
                             rates=tuple(args.rates.split(",")), stops=not args.no_stops,
                             filler=not args.no_filler)
    else:
        results = run(quick=args.quick)
    for key, value in results.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
