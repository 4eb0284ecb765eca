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
* ``python_alone_s``: a CPU-bound pure-Python workload (hot/cold spinning
  loops, a fixed amount of work) on the newest CPython found (pyenv's 3.1x,
  else this interpreter): its CPU time; ``python_pyebpf_99hz_slowdown`` /
  ``python_pyebpf_999hz_slowdown``: the same while ``pyebpf profile -p PID``
  samples it with its Python frames walked in the kernel;
  ``python_pyspy_99hz_slowdown`` / ``python_pyspy_999hz_slowdown``: while
  ``py-spy record -p PID`` samples it (absent without py-spy); the
  ``_wall_slowdown`` twins compare wall times (py-spy stops the process to
  read it: that costs wall time, not the workload's CPU time; a busy
  machine makes wall times noisy).  The workload
  waits on its stdin until the tool is sampling.  Run alone:
  ``python benchmarks/bench_profile.py --python``.
* ``<tool>_stop_to_output_s``: from Ctrl-C to the tool's exit with every
  process's stacks symbolized and printed (system-wide: every process that
  ran; bpftrace is killed after 60 s).
* ``svg_10000_stacks_ms``: from the end of sampling to the written SVG for
  10,000 distinct stacks (synthetic, 8-24 frames deep): layout, drawing and
  writing the file; ``folded_10000_stacks_ms`` and
  ``speedscope_10000_stacks_ms`` the same for the other formats;
  ``svg_10000_stacks_mb`` the SVG's size.

Each tool is started and has attached before the workload starts; rounds
alternate the tools so that a busy machine slows them alike.  Run:
``python -m benchmarks profile`` or ``python benchmarks/bench_profile.py [--quick]``.
Needs root.
"""
from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
import sys
sys.stdin.readline()
def spin(n):
    for _ in range(n):
        pass
def hot():
    spin(60000)
def cold():
    spin(20000)
for _ in range(int(sys.argv[1])):
    hot()
    cold()
"""


def _newest_python() -> str:
    import glob
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[0-9].*/bin/python3")),
                   key=lambda p: [int(x) for x in p.split("/versions/")[1].split("/")[0]
                                  .split(".")])
    return found[-1] if found else sys.executable


def _python_under(py: str, n: str, tool: list[str] | None,
                  ready: str) -> tuple[float, float]:
    """The Python workload's CPU time and wall time, sampled by ``tool + [pid]``
    (None: alone)."""
    work = subprocess.Popen([py, "-c", PY_WORKLOAD, n], stdin=subprocess.PIPE)
    prof = None
    try:
        if tool is not None:
            env = dict(os.environ, PYTHONPATH=str(ROOT))
            prof = subprocess.Popen(tool + [str(work.pid)], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, env=env)
            assert prof.stdout is not None
            while True:
                line = prof.stdout.readline()
                if not line:
                    raise RuntimeError(f"{tool[0]} ended before sampling")
                if ready in line:
                    break
        assert work.stdin is not None
        t0 = time.perf_counter()
        work.stdin.write(b"go\n")
        work.stdin.close()
        _, status, usage = os.wait4(work.pid, 0)
        wall = time.perf_counter() - t0
        work.returncode = os.waitstatus_to_exitcode(status)
        return usage.ru_utime + usage.ru_stime, wall
    finally:
        if work.returncode is None:
            work.kill()
            work.wait()
        if prof is not None:
            prof.send_signal(2)
            try:
                prof.communicate(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                prof.kill()
                prof.communicate()


def run_python(rounds: int = 1, quick: bool = False) -> dict:
    """The Python workload's slowdown under pyebpf and under py-spy (see the module docs)."""
    py = _newest_python()
    n = "150" if quick else "400"
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    tmp = tempfile.mkdtemp(prefix="pyebpf_bench_")
    tools: dict[str, tuple[list[str], str]] = {}
    for hz in ("99", "999"):
        tools[f"python_pyebpf_{hz}hz"] = ([sys.executable, "-m", "pyebpf", "profile", "-F", hz,
                                           "-o", os.path.join(tmp, "p.folded"), "-p"],
                                          "Sampling at")
        if os.access(spy, os.X_OK):
            tools[f"python_pyspy_{hz}hz"] = ([spy, "record", "-r", hz, "-f", "raw", "-o",
                                              os.path.join(tmp, "s.txt"), "-p"],
                                             "Sampling process")
    best = {name: (float("inf"), float("inf")) for name in ["alone", *tools]}
    try:
        _python_under(py, n, None, "")                  # warm the caches
        for _ in range(rounds):
            for name, (tool, ready) in [("alone", (None, "")), *tools.items()]:
                cpu, wall = _python_under(py, n, tool, ready)     # type: ignore[arg-type]
                best[name] = (min(best[name][0], cpu), min(best[name][1], wall))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out: dict = {"python": py, "python_alone_s": best["alone"][0],
                 "python_alone_wall_s": best["alone"][1]}
    for name in tools:
        out[f"{name}_slowdown"] = best[name][0] / best["alone"][0]
        out[f"{name}_wall_slowdown"] = best[name][1] / best["alone"][1]
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
    out.update(run_python(rounds, quick))
    return out


if __name__ == "__main__":
    if "--python" in sys.argv:
        results = run_python(quick="--quick" in sys.argv) if os.geteuid() == 0 else \
            {"overhead": "skipped: needs root"}
    else:
        results = run(quick="--quick" in sys.argv)
    for key, value in results.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
