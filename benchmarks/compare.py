"""pyebpf against the tools users would otherwise pick: bpftrace and BCC.

Each case runs every tool as a separate process, alternately (pyebpf,
bpftrace, BCC, pyebpf, bpftrace, BCC, ...) for several rounds, and reports
medians and ratios.  The tools' scripts live in ``benchmarks/peers/``: the
pyebpf side is a small standalone Python program using the library (the
"embedded in your program" use), run by the same interpreter as this harness
(``sys.executable``, never a shim) with ``PYTHONPATH`` set to the repository;
BCC runs under Debian's ``/usr/bin/python3`` (the only one that has it).

Cases
-----
1. **Cold start**: wall time, CPU time and peak RSS (``os.wait4``'s
   ``ru_maxrss``) to count the calls of ``hit()`` in a short C program
   (``benchmarks/targets/loop.c``, 1,000 calls) through a uprobe.  Each tool
   starts the program itself.  The wall time is taken twice, by ``spawn``:
   from process start to the process's exit (the target's measure: the whole
   process, detaching included) and to the printed count (the first output
   line starting with ``@``).  pyebpf prints as soon as the program has
   exited and detaches after (the kernel unregisters a uprobe synchronously,
   ~25 ms); bpftrace detaches first.
2. **Streaming**: N USDT events (``loop:hit``, two u64 arguments) sent to
   user space: events received and lost, the drain rate (events received per
   second, from the loop's start to the last event received), the traced
   program's added cost per event, the tracer's CPU time.  Every tool gets the
   same ring memory, 1 MiB per CPU: bpftrace and BCC a perf ring per CPU (BCC's
   idiomatic ``BPF_PERF_OUTPUT``), pyebpf one BPF ring buffer of 1 MiB x CPUs.
3. **In-kernel aggregation**: the traced program's added cost per hit of a
   count, and of a log2 histogram of the first argument, at the same USDT probe.
4. **Library parts**: assembled instructions per second (DSL, text), USDT
   notes parsed per second (libjvm.so), map lookups per second, batch
   iteration rate -- taken from the ``bench_*`` modules' results.

In cases 2 and 3 the harness owns the traced loop (a child held at a
handshake), starts the tracer with the loop's pid, waits for the tracer's
``ready`` line, then lets the loop run.  The loop prints its own ns/call; the
*added cost* is (traced ns/call - untraced ns/call), the untraced runs being
alternated with the traced ones.  The tracer's CPU time is its own rusage
(``wait4``), which does not include the loop's.

A tool that is not installed gets ``n/a (not installed)`` and its targets
``not measured``; nothing crashes.
"""
from __future__ import annotations

import glob
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks.targets import Loop, build, build_loop, untraced

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS = HERE / "peers"
RESULTS = HERE / "results"

TOOLS = ("pyebpf", "bpftrace", "bcc")
LABEL = {"pyebpf": "pyebpf", "bpftrace": "bpftrace", "bcc": "BCC", "pyebpf-trace": "pyebpf trace"}
BCC_PYTHON = "/usr/bin/python3"
PERF_PAGES = 256                     # 1 MiB of perf ring per CPU for every tool

# (name, op, goal): the targets, in the order they are printed.
GOALS = [("cold-start-wall", "<=", 0.25), ("cold-start-rss", "<=", 0.35),
         ("streaming-rate-vs-bcc", ">=", 10.0), ("streaming-lost", "==", 0),
         ("streaming-added-us", "<=", 1.0),
         ("aggregation-count", "<=", 1.05), ("aggregation-hist", "<=", 1.05)]


class Params:
    def __init__(self, quick: bool, rounds: int | None = None) -> None:
        self.quick = quick
        self.cold_calls = 1_000
        self.cold_rounds = rounds or (2 if quick else 7)
        self.stream_events = 50_000 if quick else 1_000_000
        self.stream_rounds = rounds or (1 if quick else 3)
        self.agg_hits = 200_000 if quick else 1_000_000
        self.agg_rounds = rounds or (1 if quick else 5)


# ----------------------------------------------------------------- the tools
class Tool:
    def __init__(self, name: str, available: bool, why: str = "", version: str = "") -> None:
        self.name, self.available, self.why, self.version = name, available, why, version

    @property
    def na(self) -> str:
        return f"n/a ({self.why})"


def _run_text(cmd: list[str], timeout: float = 30) -> tuple[int, str]:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    return r.returncode, (r.stdout + r.stderr).strip()


def detect_tools(wanted: tuple[str, ...] = TOOLS) -> dict[str, Tool]:
    tools: dict[str, Tool] = {}
    if "pyebpf" in wanted:
        try:
            from pyebpf.kernel import bpf_available
            reason = bpf_available()
        except Exception as exc:     # noqa: BLE001 - say why, never crash
            reason = f"pyebpf.kernel cannot be imported: {exc}"
        tools["pyebpf"] = Tool("pyebpf", reason is None, reason or "", _pyebpf_version())
    if "bpftrace" in wanted:
        path = shutil.which("bpftrace")
        if path is None:
            tools["bpftrace"] = Tool("bpftrace", False, "not installed")
        else:
            tools["bpftrace"] = Tool("bpftrace", True, "", _run_text([path, "--version"])[1])
    if "bcc" in wanted:
        rc, out = _run_text([BCC_PYTHON, "-c", "import bcc; print(bcc.__version__)"]) \
            if os.path.exists(BCC_PYTHON) else (-1, "")
        build = f"/lib/modules/{os.uname().release}/build"
        if rc != 0:
            tools["bcc"] = Tool("bcc", False, "not installed")
        elif not os.path.exists(os.path.join(build, "include")):
            tools["bcc"] = Tool("bcc", False, f"no kernel headers at {build}: "
                                              "run benchmarks/peers/setup.sh")
        else:
            tools["bcc"] = Tool("bcc", True, "", f"BCC {out.splitlines()[-1]}")
    return tools


def _pyebpf_version() -> str:
    try:
        import pyebpf
        return f"pyebpf {pyebpf.__version__}"
    except Exception:                 # noqa: BLE001
        return "pyebpf"


def pyebpf_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(PEERS)] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def bpftrace_env() -> dict[str, str]:
    env = dict(os.environ)
    env["BPFTRACE_PERF_RB_PAGES"] = str(PERF_PAGES)
    return env


def build_spawn() -> str:
    """``peers/spawn.c``: runs a command and reports its wall time, CPU and peak RSS."""
    return build(PEERS / "spawn.c", "spawn", [])


# ------------------------------------------------------------- child processes
class Child:
    """A tool run as a child: stdout/stderr read by threads (lines counted,
    head and tail kept, ``ready`` noticed), reaped with ``os.wait4``."""

    KEEP = 1 << 16

    def __init__(self, cmd: list[str], env: dict[str, str] | None = None,
                 keep_all: bool = False) -> None:
        self.cmd = cmd
        self.keep_all = keep_all
        self.all = bytearray()
        self.head = bytearray()
        self.tail = b""
        self.err = bytearray()
        self.lines = 0
        self.last_ns = 0
        self.ready = threading.Event()
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, start_new_session=True)
        self._threads = [threading.Thread(target=self._read_out, daemon=True),
                         threading.Thread(target=self._read_err, daemon=True)]
        for t in self._threads:
            t.start()
        self.wall = 0.0
        self.rusage: Any = None
        self.status: int | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read_out(self) -> None:
        fd = self.proc.stdout.fileno()
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            self.last_ns = time.monotonic_ns()
            self.lines += chunk.count(b"\n")
            if self.keep_all:
                self.all += chunk
            if len(self.head) < self.KEEP:
                self.head += chunk[:self.KEEP - len(self.head)]
                if not self.ready.is_set() and b"ready\n" in self.head:
                    self.ready.set()
            self.tail = (self.tail + chunk)[-self.KEEP:]

    def _read_err(self) -> None:
        fd = self.proc.stderr.fileno()
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            if len(self.err) < self.KEEP:
                self.err += chunk

    def wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.05):
            if self.poll() is not None or time.monotonic() > deadline:
                return False
        return True

    def _reap(self, flags: int) -> bool:
        pid, status, rusage = os.wait4(self.proc.pid, flags)
        if pid == 0:
            return False
        self.wall = time.perf_counter() - self.t0
        self.rusage = rusage
        self.status = os.waitstatus_to_exitcode(status)
        self.proc.returncode = self.status          # already reaped: Popen must not wait
        for t in self._threads:
            t.join(timeout=5)
        return True

    def poll(self) -> int | None:
        """The exit code if the child has exited (reaping it), else None."""
        if self.status is None:
            self._reap(os.WNOHANG)
        return self.status

    def signal(self, sig: int = signal.SIGINT) -> None:
        if self.status is None:
            try:
                os.kill(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def wait(self, timeout: float) -> int:
        """Reap the child (killing its session after ``timeout`` s); return its exit code."""
        if self.status is not None:
            return self.status
        timer = threading.Timer(timeout, self._kill)
        timer.start()
        try:
            self._reap(0)
        finally:
            timer.cancel()
        return self.status

    def _kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        if self.status is None:
            self._kill()
            self.wait(10)

    @property
    def cpu(self) -> float:
        return self.rusage.ru_utime + self.rusage.ru_stime if self.rusage else float("nan")

    @property
    def out(self) -> str:
        return (bytes(self.head) if len(self.head) < self.KEEP
                else bytes(self.head) + b"\n...\n" + self.tail).decode(errors="replace")

    @property
    def errtext(self) -> str:
        return self.err.decode(errors="replace")

    def failure(self, what: str) -> str:
        text = (self.errtext.strip() or self.out.strip()).splitlines()
        useful = [t for t in text if "RLIMIT_MEMLOCK" not in t][-3:]
        return f"{what} (exit {self.status}): " + " | ".join(useful)


# ------------------------------------------------------------- case 1: cold start
def cold_cmd(tool: str, binary: str, n: int) -> tuple[list[str], dict[str, str] | None]:
    run = [binary, str(n)]
    if tool == "pyebpf":
        return [sys.executable, str(PEERS / "pyebpf_count.py"), binary, "hit", "--", *run], \
            pyebpf_env()
    if tool == "pyebpf-trace":
        return [sys.executable, "-m", "pyebpf", "trace", f"uprobe:{binary}:hit", "--count",
                "-c", " ".join(run)], pyebpf_env()
    if tool == "bpftrace":
        return ["bpftrace", str(PEERS / "bpftrace_count.bt"), binary, "-c", " ".join(run)], None
    return [BCC_PYTHON, str(PEERS / "bcc_count.py"), binary, "hit", "--", *run], None


def cold_once(tool: str, binary: str, n: int) -> dict:
    """One cold start, measured by ``spawn`` (a small C parent, so that the
    tool's peak RSS is its own and not this harness's, see spawn.c)."""
    cmd, env = cold_cmd(tool, binary, n)
    fd, report = tempfile.mkstemp(prefix="pyebpf-bench-spawn-")
    os.close(fd)
    try:
        child = Child([build_spawn(), report] + cmd, env)
        code = child.wait(timeout=120)
        spawned = dict(kv.split("=") for kv in Path(report).read_text().split())
    except (OSError, ValueError):
        spawned = {}
    finally:
        os.unlink(report)
    out = child.out
    m = re.search(r"@\w*:\s*(\d+)", out)
    if code != 0 or not m or not spawned:
        return {"error": child.failure(f"{LABEL[tool]} cold start")}
    result_ns = int(spawned.get("result_ns", -1))
    if result_ns < 0:
        return {"error": child.failure(f"{LABEL[tool]} cold start: no '@' result line")}
    r = {"wall_s": int(spawned["wall_ns"]) / 1e9, "result_s": result_ns / 1e9,
         "rss_mb": int(spawned["maxrss_kb"]) / 1024,
         "cpu_s": (int(spawned["utime_us"]) + int(spawned["stime_us"])) / 1e6,
         "count": int(m.group(1))}
    ns = re.search(r"calls ([\d.]+) ns/call", out)
    if ns:
        r["loop_ns_per_call"] = float(ns.group(1))
    ph = re.search(r"^phases (.*)$", child.errtext, re.M)
    if ph:
        for item in ph.group(1).split():
            k, v = item.split("=")
            r[f"phase_{k}_ms"] = float(v)
    return r


IMPORT_GROUPS = (("cffi + pycparser", ("cffi", "_cffi_backend", "pycparser")),
                 ("pyebpf.kernel (its C declarations come pre-parsed)", ("pyebpf.kernel",)),
                 ("rest of pyebpf", ("pyebpf",)))


def import_breakdown(python: str) -> dict[str, float]:
    """Where the cold-start script's imports go: ``-X importtime`` self times (ms)
    summed by package (a second run: .pyc files are warm)."""
    code = "import pyebpf.attach, pyebpf.program, pyebpf.lang.aggregations"
    out = {}
    for _ in range(2):
        r = subprocess.run([python, "-X", "importtime", "-c", code], capture_output=True,
                           text=True, env=pyebpf_env())
        out = {name: 0.0 for name, _ in IMPORT_GROUPS}
        out["stdlib and the rest"] = 0.0
        for line in r.stderr.splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s+(\S+)", line)
            if not m:
                continue
            mod, us = m.group(2), int(m.group(1))
            for name, prefixes in IMPORT_GROUPS:
                if any(mod == p or mod.startswith(p + ".") for p in prefixes):
                    out[name] += us / 1e3
                    break
            else:
                out["stdlib and the rest"] += us / 1e3
    return out


def interpreter_start(python: str) -> float:
    """Wall time of ``python -c pass`` (as measured by ``spawn``)."""
    fd, report = tempfile.mkstemp(prefix="pyebpf-bench-spawn-")
    os.close(fd)
    try:
        subprocess.run([build_spawn(), report, python, "-c", "pass"], check=True,
                       env=pyebpf_env())
        return int(re.search(r"wall_ns=(\d+)", Path(report).read_text()).group(1)) / 1e9
    finally:
        os.unlink(report)


# ------------------------------------------------------------- case 2: streaming
def stream_once(tool: str, binary: str, n: int) -> dict:
    loop = Loop(binary, n)
    if tool == "pyebpf":
        child = Child([sys.executable, str(PEERS / "pyebpf_stream.py"), binary, str(loop.pid),
                       str(n)], pyebpf_env())
    elif tool == "bpftrace":
        child = Child(["bpftrace", "-p", str(loop.pid), str(PEERS / "bpftrace_stream.bt"),
                       binary], bpftrace_env(), keep_all=True)
    else:
        child = Child([BCC_PYTHON, str(PEERS / "bcc_stream.py"), binary, str(loop.pid), str(n)])
    try:
        if not child.wait_ready(120):
            child.close()
            return {"error": child.failure(f"{LABEL[tool]} streaming: never ready")}
        loop.go()
        ns = loop.finish()
        t_end = time.monotonic_ns()
        method = None
        if tool == "bpftrace":
            # printf lines arrive on our pipe: stop once all are in or they stop coming
            last, still = child.lines, time.monotonic()
            while child.lines < n + 2 and time.monotonic() - still < 1.0:
                time.sleep(0.05)
                if child.lines != last:
                    last, still = child.lines, time.monotonic()
            last_ns = child.last_ns
            child.signal(signal.SIGINT)
            child.wait(60)
            data = bytes(child.all)
            received = len(re.findall(rb"^\d+ \d+$", data, re.M))
            lost = sum(int(x) for x in re.findall(rb"Lost (\d+) events", data + child.err))
            child.all = bytearray()
        else:
            deadline = time.monotonic() + 60
            while child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            child.signal(signal.SIGINT)
            child.wait(60)
            m = re.search(r"received (\d+) lost (\d+) last_ns (\d+)(?: via (\S+))?", child.out)
            if not m:
                return {"error": child.failure(f"{LABEL[tool]} streaming")}
            received, lost, last_ns = int(m.group(1)), int(m.group(2)), int(m.group(3))
            method = m.group(4)
        span = max((last_ns or t_end) - loop.t_go, 1) / 1e9
        r = {"received": received, "lost": lost, "missing": max(0, n - received - lost),
             "traced_ns_per_call": ns, "events_per_s": received / span, "cpu_s": child.cpu}
        if method:
            r["method"] = method
        return r
    finally:
        loop.close()
        child.close()


# ------------------------------------------------------------- case 3: aggregation
def agg_once(tool: str, binary: str, n: int, kind: str) -> dict:
    loop = Loop(binary, n)
    if tool == "pyebpf":
        child = Child([sys.executable, str(PEERS / "pyebpf_agg.py"), binary, str(loop.pid), kind],
                      pyebpf_env())
    elif tool == "bpftrace":
        child = Child(["bpftrace", "-p", str(loop.pid), str(PEERS / f"bpftrace_agg_{kind}.bt"),
                       binary])
    else:
        child = Child([BCC_PYTHON, str(PEERS / "bcc_agg.py"), binary, str(loop.pid), kind])
    try:
        if not child.wait_ready(120):
            child.close()
            return {"error": child.failure(f"{LABEL[tool]} {kind}: never ready")}
        loop.go()
        ns = loop.finish()
        child.signal(signal.SIGINT)
        child.wait(60)
        out = child.out
        m = re.search(r"^total (\d+)", out, re.M)
        if m:
            total = int(m.group(1))
        elif kind == "count":
            m = re.search(r"@calls:\s*(\d+)", out)
            total = int(m.group(1)) if m else None
        else:
            rows = re.findall(r"^[\[(].*?\)?\s+(\d+)\s+\|", out, re.M)
            total = sum(int(x) for x in rows) if rows else None
        if total is None:
            return {"error": child.failure(f"{LABEL[tool]} {kind}: no result")}
        return {"traced_ns_per_call": ns, "total": total, "exact": total == n}
    finally:
        loop.close()
        child.close()


# ------------------------------------------------------------- alternation
def _median(values: list[float]) -> float:
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def alternate(tools: list[str], rounds: int, once: Callable[[str], dict],
              baseline: Callable[[], float] | None = None, log: Callable[[str], None] = print
              ) -> tuple[dict[str, list[dict]], list[float]]:
    """Run ``once(tool)`` for each tool in turn, ``rounds`` times (A B C A B C...),
    with an untraced ``baseline()`` run at the start of each round."""
    runs: dict[str, list[dict]] = {t: [] for t in tools}
    base: list[float] = []
    for r in range(rounds):
        if baseline is not None:
            base.append(baseline())
        for tool in tools:
            try:
                res = once(tool)
            except Exception as exc:    # noqa: BLE001 - a failing tool is a result, not a crash
                res = {"error": f"{LABEL[tool]}: {type(exc).__name__}: {exc}"}
            runs[tool].append(res)
            if "error" in res:
                log(f"   round {r + 1}: {res['error']}")
    return runs, base


def summarize(runs: list[dict]) -> dict:
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"error": runs[0]["error"] if runs else "not run"}
    out: dict = {"runs": len(ok)}
    for key in ok[0]:
        vals = [r[key] for r in ok if key in r]
        if isinstance(vals[0], bool):
            out[key] = all(vals)
        elif isinstance(vals[0], (int, float)):
            out[key] = _median([float(v) for v in vals])
            if key in ("lost", "missing"):
                out[key + "_max"] = max(vals)
        else:
            out[key] = vals[0]
    if len(ok) < len(runs):
        out["failed_runs"] = len(runs) - len(ok)
    return out


# ------------------------------------------------------------- case 4: library parts
def _libjvm() -> str | None:
    found = sorted(glob.glob("/usr/lib/jvm/*/lib/server/libjvm.so"))
    return found[0] if found else None


def library_parts(quick: bool, module_results: dict[str, dict] | None) -> dict:
    res = dict(module_results or {})

    def get(name: str) -> dict:
        if name not in res:
            try:
                import importlib
                res[name] = importlib.import_module(f"benchmarks.bench_{name}").run(quick=quick)
            except Exception as exc:    # noqa: BLE001
                res[name] = {"error": str(exc)}
        return res[name]

    parts: dict[str, Any] = {}
    dsl, asm, maps = get("dsl"), get("asm"), get("maps")
    parts["dsl_insns_per_s"] = dsl.get("dsl_insns_per_s")
    parts["text_lines_per_s_typical"] = asm.get("asm_llvm_typical_lines_per_s")
    parts["text_lines_per_s_unique"] = asm.get("asm_llvm_unique_lines_per_s")
    parts["map_lookups_per_s"] = 1e6 / maps["lookup_us"] if maps.get("lookup_us") else None
    parts["batch_iteration_entries_per_s"] = maps.get("iterate_per_s")
    notes = None
    if (HERE / "bench_usdt_parse.py").exists():
        up = get("usdt_parse")
        keys = [k for k in up if "note" in k and k.endswith("per_s")]
        keys.sort(key=lambda k: ("jvm" not in k, k))
        if keys:
            notes, parts["notes_source"] = up[keys[0]], f"bench_usdt_parse.{keys[0]}"
    if notes is None:
        notes = _notes_per_s(quick)
        parts["notes_source"] = "read_notes + argument decoding, timed by compare"
    parts["notes_per_s"] = notes
    return parts


def _notes_per_s(quick: bool) -> float | None:
    path = _libjvm()
    if path is None:
        return None
    from pyebpf.usdt import read_notes
    best = float("inf")
    count = 0
    for _ in range(3 if quick else 10):
        t0 = time.perf_counter()
        notes = read_notes(path)
        for note in notes:
            note.arguments
        best = min(best, time.perf_counter() - t0)
        count = len(notes)
    return count / best


# ------------------------------------------------------------- the run
def machine() -> dict:
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    debian = Path("/etc/debian_version").read_text().strip() \
        if Path("/etc/debian_version").exists() else "?"
    return {"cpu": model, "cores": os.cpu_count(), "kernel": os.uname().release,
            "arch": os.uname().machine, "os": f"Debian {debian}",
            "python": f"{platform.python_implementation()} {platform.python_version()} "
                      f"({sys.executable})",
            "loadavg_start": os.getloadavg()[0]}


def run(quick: bool = False, rounds: int | None = None, tools: tuple[str, ...] = TOOLS,
        module_results: dict[str, dict] | None = None, log: Callable[[str], None] = print
        ) -> dict:
    P = Params(quick, rounds)
    found = detect_tools(tools)
    for t in TOOLS:
        found.setdefault(t, Tool(t, False, "not selected"))
    avail = [t for t in TOOLS if t in found and found[t].available]
    res: dict[str, Any] = {"quick": quick, "machine": machine(),
                           "tools": {t: {"available": x.available, "why": x.why,
                                         "version": x.version} for t, x in found.items()},
                           "params": vars(P)}
    t_start = time.perf_counter()
    loop = build_loop(usdt=False)
    loop_usdt = build_loop(usdt=True)

    # 1. cold start -- with pyebpf's bytecode compiled, as a pip install leaves
    # it (the sandbox may set PYTHONDONTWRITEBYTECODE, which would make every
    # run compile every module again)
    import compileall
    import pyebpf
    compileall.compile_dir(os.path.dirname(pyebpf.__file__), quiet=1)
    cold_tools = list(avail)
    if "pyebpf" in avail and _has_trace_cli():
        cold_tools.insert(1, "pyebpf-trace")
    log(f"-- cold start: {P.cold_calls} calls, {P.cold_rounds} rounds of {', '.join(cold_tools)}")
    runs, _ = alternate(cold_tools, P.cold_rounds,
                        lambda t: cold_once(t, loop, P.cold_calls), log=log)
    res["cold"] = {t: summarize(v) for t, v in runs.items()}
    res["cold"]["python_start_s"] = _median([interpreter_start(sys.executable)
                                             for _ in range(3)])
    if "pyebpf" in avail:
        res["cold"]["pyebpf_imports_ms"] = import_breakdown(sys.executable)
    res["cold"]["untraced_ns_per_call"] = _median([untraced(loop, P.cold_calls) for _ in range(3)])

    # 2. streaming
    log(f"-- streaming: {P.stream_events:,} USDT events, {P.stream_rounds} rounds")
    runs, base = alternate(avail, P.stream_rounds,
                           lambda t: stream_once(t, loop_usdt, P.stream_events),
                           baseline=lambda: untraced(loop_usdt, P.stream_events), log=log)
    res["stream"] = {t: summarize(v) for t, v in runs.items()}
    res["stream"]["untraced_ns_per_call"] = _median(base)
    res["stream"]["untraced_runs"] = base

    # 3. aggregation
    for kind in ("count", "hist"):
        log(f"-- aggregation ({kind}): {P.agg_hits:,} hits, {P.agg_rounds} rounds")
        runs, base = alternate(avail, P.agg_rounds,
                               lambda t: agg_once(t, loop_usdt, P.agg_hits, kind),
                               baseline=lambda: untraced(loop_usdt, P.agg_hits), log=log)
        res[f"agg_{kind}"] = {t: summarize(v) for t, v in runs.items()}
        res[f"agg_{kind}"]["untraced_ns_per_call"] = _median(base)
        res[f"agg_{kind}"]["untraced_runs"] = base

    # 4. library parts
    log("-- library parts")
    res["library"] = library_parts(quick, module_results)
    # 5. bpftrace programs and clang-built objects: the modules' own comparisons
    # (bench_lang against bpftrace, bench_objects against bpftool), when they ran
    res["programs"] = {name: (module_results or {}).get(name) for name in ("lang", "objects")}
    res["machine"]["loadavg_end"] = os.getloadavg()[0]
    res["date"] = time.strftime("%Y-%m-%d %H:%M")
    res["elapsed_s"] = time.perf_counter() - t_start
    derive(res)
    return res


def _has_trace_cli() -> bool:
    return (ROOT / "pyebpf" / "cli" / "trace.py").exists() and \
        _run_text([sys.executable, "-m", "pyebpf", "trace", "--help"])[0] == 0


# ------------------------------------------------------------- derived numbers
def _get(d: dict, *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    return d


def _ratio(a: Any, b: Any) -> float | None:
    if a is None or b is None or not b or a != a or b != b:
        return None
    return a / b


def derive(res: dict) -> None:
    """Added costs, ratios and the target verdicts."""
    for case in ("stream", "agg_count", "agg_hist"):
        base = res[case]["untraced_ns_per_call"]
        for t in TOOLS:
            s = res[case].get(t)
            if s and "traced_ns_per_call" in s:
                s["added_ns"] = s["traced_ns_per_call"] - base
    tools = res["tools"]

    def why_missing(*names: str) -> str:
        bad = [n for n in names if not _get(tools, n, "available")]
        if bad:
            return "; ".join(f"{LABEL[n]} {tools[n]['why'] if n in tools else 'not run'}"
                             for n in bad)
        return "a run failed (see the table)"

    def verdict(name: str, value: Any, missing: str = "") -> dict:
        op, goal = next((o, g) for n, o, g in GOALS if n == name)
        if value is None:
            return {"name": name, "value": None, "op": op, "goal": goal, "status": "not measured",
                    "why": missing}
        ok = {"<=": value <= goal, ">=": value >= goal, "==": value == goal}[op]
        return {"name": name, "value": value, "op": op, "goal": goal,
                "status": "met" if ok else "missed"}

    py, bt, bcc = (res["cold"].get(t, {}) for t in TOOLS)
    targets = [
        verdict("cold-start-wall", _ratio(py.get("wall_s"), bt.get("wall_s")),
                why_missing("pyebpf", "bpftrace")),
        verdict("cold-start-rss", _ratio(py.get("rss_mb"), bt.get("rss_mb")),
                why_missing("pyebpf", "bpftrace")),
    ]
    sp, sb = res["stream"].get("pyebpf", {}), res["stream"].get("bcc", {})
    targets.append(verdict("streaming-rate-vs-bcc",
                           _ratio(sp.get("events_per_s"), sb.get("events_per_s")),
                           why_missing("pyebpf", "bcc")))
    lost = None if "received" not in sp else int(sp.get("lost_max", 0) + sp.get("missing_max", 0))
    targets.append(verdict("streaming-lost", lost, why_missing("pyebpf")))
    added = sp.get("added_ns")
    targets.append(verdict("streaming-added-us", None if added is None else added / 1000,
                           why_missing("pyebpf")))
    for kind in ("count", "hist"):
        a = res[f"agg_{kind}"]
        targets.append(verdict(f"aggregation-{kind}",
                               _ratio(_get(a, "pyebpf", "added_ns"),
                                      _get(a, "bpftrace", "added_ns")),
                               why_missing("pyebpf", "bpftrace")))
    res["targets"] = targets


def target_lines(res: dict) -> list[str]:
    out = []
    for t in res["targets"]:
        goal = f"{t['op']} {_num(t['goal'])}"
        if t["value"] is None:
            out.append(f"target {t['name']}: n/a (goal {goal}) not measured: {t['why']}")
        else:
            out.append(f"target {t['name']}: {_num(t['value'])} (goal {goal}) {t['status']}")
    return out


# ------------------------------------------------------------- markdown
def _num(v: Any, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) >= 100):
        return f"{int(v):,}"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.{digits}f}"


def _cell(summary: dict | None, key: str, fmt: Callable[[Any], str] = _num,
          tool: dict | None = None) -> str:
    if tool is not None and not tool.get("available"):
        why = tool.get("why", "")
        return ("n/a (no kernel headers)" if why.startswith("no kernel headers")
                else f"n/a ({why})" if why in ("not installed", "not selected") else "n/a")
    if summary is None:
        return "n/a"
    if "error" in summary:
        return "failed"
    return fmt(summary.get(key))


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def markdown(res: dict, why: bool = True, brief: bool = False) -> str:
    """The results as markdown tables; ``why``: with the notes on missed targets;
    ``brief`` (the README's): the tables and the targets, without the notes under
    the tables and the library parts (``latest.md`` has them)."""
    m, tools = res["machine"], res["tools"]
    mode = "quick" if res["quick"] else "full"
    P = res["params"]
    cols = list(TOOLS)
    head = [""] + [LABEL[t] for t in cols]
    L: list[str] = []
    L.append(f"Machine: {m['cpu']}, {m['cores']} cores, {m['arch']}, kernel {m['kernel']}, "
             f"{m['os']}, {m['python']}; load average {m['loadavg_start']:.2f} at the start, "
             f"{m['loadavg_end']:.2f} at the end (a shared machine: numbers are medians of "
             f"alternated runs).  Peers: " +
             ", ".join(tools[t]["version"] or f"{LABEL[t]} n/a ({tools[t]['why']})"
                       for t in cols if t in tools) +
             f".  Mode: {mode} ({res.get('date', '?')}; the comparison took "
             f"{res['elapsed_s']:.0f} s).")
    L.append("")

    # cold start
    c = res["cold"]
    ctools = cols + (["pyebpf-trace"] if "pyebpf-trace" in c else [])
    chead = [""] + [LABEL[t] for t in ctools] + ["pyebpf / bpftrace"]

    def crow(label: str, key: str, fmt=_num) -> list[str]:
        r = [label] + [_cell(c.get(t), key, fmt, tools.get(t, {"available": True}))
                       for t in ctools]
        r.append(_num(_ratio(_get(c, "pyebpf", key), _get(c, "bpftrace", key))))
        return r
    L.append(f"**1. Cold start** -- count the calls of `hit()` in a C program "
             f"({P['cold_calls']:,} calls, uprobe); median of {P['cold_rounds']} alternated "
             f"runs.  Wall time from process start to the process's exit (the target), and "
             f"to the printed count.")
    L.append("")
    L += _table(chead, [crow("wall time to exit (s)", "wall_s"),
                        crow("wall time to the printed count (s)", "result_s"),
                        crow("peak RSS (MB)", "rss_mb", lambda v: _num(v, 1)),
                        crow("CPU time (s)", "cpu_s"),
                        crow("traced loop (ns/call)", "loop_ns_per_call", lambda v: _num(v, 0))])
    py = c.get("pyebpf", {})
    phases = [k for k in py if k.startswith("phase_")]
    if phases and not brief:
        L.append("")
        L.append(f"pyebpf's wall time, by phase (median ms): interpreter start "
                 f"{c['python_start_s'] * 1e3:.0f} (a bare `python -c pass`, measured apart), " +
                 ", ".join(f"{k[6:-3]} {py[k]:.0f}" for k in phases) +
                 ".  Its imports, by package (ms, `-X importtime`): " +
                 ", ".join(f"{k} {v:.0f}" for k, v in c.get("pyebpf_imports_ms", {}).items()) +
                 f".  Untraced loop: {c['untraced_ns_per_call']:.1f} ns/call.")
    trap_fn = _get(c, "pyebpf", "loop_ns_per_call") or _get(c, "bpftrace", "loop_ns_per_call")
    trap_nop = _get(res, "agg_count", "pyebpf", "added_ns") or \
        _get(res, "agg_count", "bpftrace", "added_ns")
    if trap_fn and trap_nop and not brief:
        L.append("")
        L.append(f"The uprobe on `hit()` costs every tool ~{trap_fn / 1e3:.1f} us per call, the "
                 f"USDT probe of cases 2-3 ~{trap_nop / 1e3:.1f} us.  Both probe a `nop` "
                 f"(`hit()` starts with one: `patchable_function_entry`), which the kernel "
                 f"emulates; on an instruction it must single-step out of line (e.g. a "
                 f"RIP-relative `mov`) a hit costs ~13 us in this VM for every tool alike.")
    L.append("")

    # streaming
    s = res["stream"]
    L.append(f"**2. Streaming** -- {P['stream_events']:,} USDT events (two u64 arguments) to "
             f"user space; 1 MiB of ring per CPU for each tool (bpftrace, BCC: a perf "
             f"ring per CPU; pyebpf: one BPF ring buffer of that total, never waking the "
             f"reader, which drains every 2 ms); median of "
             f"{P['stream_rounds']} alternated rounds.  Untraced loop: "
             f"{s['untraced_ns_per_call']:.1f} ns/call.")
    L.append("")

    def srow(label: str, key: str, fmt=_num) -> list[str]:
        return [label] + [_cell(s.get(t), key, fmt, tools.get(t)) for t in cols]
    L += _table(head + ["pyebpf / BCC"], [
        srow("events received", "received") + [""],
        srow("events lost (worst run)", "lost_max") + [""],
        srow("events unaccounted (worst run)", "missing_max") + [""],
        srow("drain rate (events/s)", "events_per_s") +
        [_num(_ratio(_get(s, "pyebpf", "events_per_s"), _get(s, "bcc", "events_per_s")))],
        srow("traced loop (ns/call)", "traced_ns_per_call", lambda v: _num(v, 0)) + [""],
        srow("added cost (us/event)", "added_ns", lambda v: _num(v / 1000)) +
        [_num(_ratio(_get(s, "pyebpf", "added_ns"), _get(s, "bcc", "added_ns")))],
        srow("tracer CPU time (s)", "cpu_s") +
        [_num(_ratio(_get(s, "pyebpf", "cpu_s"), _get(s, "bcc", "cpu_s")))],
    ])
    if not brief:
        L.append("")
        L.append("Lost: for a perf ring, reported by the kernel (PERF_RECORD_LOST); for "
                 "pyebpf's ring buffer, outputs that failed, counted by the program itself "
                 "(the kernel reports ring-buffer drops to no one).  Unaccounted: neither "
                 "received nor reported lost (the kernel reports a perf loss only before the "
                 "next event that fits, so the last losses of a run can go unreported).  "
                 "Drain rate: events received per second from the loop's start to the last "
                 "event received.")
    method = _get(s, "pyebpf", "method")
    if method == "uprobe-at-note":
        L.append("")
        L.append("pyebpf attached through a uprobe at the probe's note offset "
                 "(`pyebpf.usdt.source` was not available yet): the same kernel mechanism "
                 "as a USDT probe without semaphore.")
    L.append("")

    # aggregation
    L.append(f"**3. In-kernel aggregation** -- added cost per hit of the traced loop at the "
             f"USDT probe ({P['agg_hits']:,} hits; median of {P['agg_rounds']} alternated "
             f"rounds).  Untraced loop: {res['agg_count']['untraced_ns_per_call']:.1f} ns/call.")
    L.append("")
    rows = []
    for kind, label in (("count", "count()"), ("hist", "hist(arg0)")):
        a = res[f"agg_{kind}"]
        rows.append([f"{label}: added ns/hit"] +
                    [_cell(a.get(t), "added_ns", lambda v: _num(v, 0), tools.get(t))
                     for t in cols] +
                    [_num(_ratio(_get(a, "pyebpf", "added_ns"), _get(a, "bpftrace", "added_ns")))])
        rows.append([f"{label}: exact result"] +
                    [_cell(a.get(t), "exact", _num, tools.get(t)) for t in cols] + [""])
    L += _table(head + ["pyebpf / bpftrace"], rows)
    L.append("")

    # library
    lib = res["library"]
    if not brief:
        L += _library_table(lib)
    L += _programs_section(res.get("programs") or {}, targets=not brief)

    # targets
    L.append("**Targets**")
    L.append("")
    L.append("```")
    L += target_lines(res)
    if brief:
        L += _program_targets(res.get("programs") or {})
    L.append("```")
    notes = explain(res) if why else []
    if notes:
        L.append("")
        L += notes
    errors = [f"- {LABEL.get(t, t)} {case}: {v['error']}" for case in
              ("cold", "stream", "agg_count", "agg_hist") for t, v in res[case].items()
              if isinstance(v, dict) and "error" in v]
    if errors:
        L.append("")
        L.append("Failures:")
        L += errors
    return "\n".join(L) + "\n"


def _library_table(lib: dict) -> list[str]:
    """Case 4: the library's own rates."""
    L = ["**4. Library parts** (pyebpf alone; from the `bench_*` modules)", ""]
    L += _table(["part", "rate"], [
        ["instructions assembled / s (DSL, 4,000-insn programs)", _num(lib.get("dsl_insns_per_s"))],
        ["lines assembled / s (text, compiler-like / all-distinct lines)",
         f"{_num(lib.get('text_lines_per_s_typical'))} / "
         f"{_num(lib.get('text_lines_per_s_unique'))}"],
        [f"USDT notes parsed / s (libjvm.so; {lib.get('notes_source', '?')})",
         _num(lib.get("notes_per_s"))],
        ["map lookups / s (one `m[key]`)", _num(lib.get("map_lookups_per_s"))],
        ["batch iteration (entries / s, 100,000-entry hash)",
         _num(lib.get("batch_iteration_entries_per_s"))],
    ])
    L.append("")
    return L


def _program_targets(progs: dict) -> list[str]:
    """The target lines of ``bench_lang`` and ``bench_objects``."""
    lang, objs = progs.get("lang") or {}, progs.get("objects") or {}
    lines = [f"{k}: {v}" for k, v in sorted(lang.items()) if k.startswith("target ")]
    return lines + [objs[k] for k in ("target", "target_large") if isinstance(objs.get(k), str)]


def _programs_section(progs: dict, targets: bool = True) -> list[str]:
    """Case 5: ``bench_lang``'s start-up and per-hit comparison with bpftrace,
    ``bench_objects``' loading against ``bpftool prog loadall`` (libbpf), with
    their own target lines; nothing when neither module ran."""
    lang, objs = progs.get("lang") or {}, progs.get("objects") or {}
    L: list[str] = []
    if "start/bpftrace first_event_s" in lang:
        ms = lambda key: _num(lang.get(key, float("nan")) * 1e3, 1)   # noqa: E731
        L.append("**5. bpftrace programs** (`bench_lang`: pyebpf bt and bpftrace alternately, "
                 "medians).  Start-up: from the process's start to BEGIN's line, which both "
                 "print once every probe is attached (a script of BEGIN and two uprobes); "
                 "pyebpf with its compiled-program cache emptied (cold) and filled (warm).")
        L.append("")
        rows = []
        for label, key in (("start to first event, wall (ms)", "first_event_s"),
                           ("start to exit, process CPU (ms)", "process_cpu_s")):
            rows.append([label, ms(f"start/pyebpf {key}"), ms(f"start/pyebpf-warm {key}"),
                         ms(f"start/bpftrace {key}")])
        for script in ("count", "agg") if targets else ():     # (brief: in the targets)
            rows.append([f"per hit, `{script}` script (ns)",
                         _num(lang.get(f"{script}/pyebpf ns_per_hit"), 0), "",
                         _num(lang.get(f"{script}/bpftrace ns_per_hit"), 0)])
            rows.append([f"xlated instructions, `{script}` script",
                         _num(lang.get(f"{script}/pyebpf xlated_insns"), 0), "",
                         _num(lang.get(f"{script}/bpftrace xlated_insns"), 0)])
        L += _table(["", "pyebpf (cold cache)", "pyebpf (warm cache)", "bpftrace"], rows)
        L.append("")
    elif lang.get("skipped") or lang.get("error"):
        L += [f"**5. bpftrace programs**: not measured ({lang.get('skipped') or lang.get('error')})", ""]
    names = sorted(k[:-len("_bpftool_ms")] for k in objs if k.endswith("_bpftool_ms"))
    if names:
        L.append("**6. clang-built objects** (`bench_objects`): open and load every program, "
                 "a fresh process each time, best of the rounds; bpftool's `prog loadall` is "
                 "libbpf's loader.")
        L.append("")
        L += _table(["object", "pyebpf (ms)", "bpftool (ms)", "pyebpf / bpftool"],
                    [[n, _num(objs.get(f"{n}_pyebpf_ms"), 1), _num(objs.get(f"{n}_bpftool_ms"), 1),
                      _num(objs.get(f"{n}_ratio"))] for n in names])
        L.append("")
    elif objs.get("skipped") or objs.get("error"):
        L += [f"**6. clang-built objects**: not measured ({objs.get('skipped') or objs.get('error')})", ""]
    lines = _program_targets(progs) if targets else []
    if lines:
        L.append("Their targets:")
        L.append("")
        L.append("```")
        L += lines
        L.append("```")
        L.append("")
    return L


def explain(res: dict) -> list[str]:
    """One line per missed target: by how much, and what the measurements say about why."""
    out = []
    by = {t["name"]: t for t in res["targets"]}
    c = res["cold"]
    py, bt = c.get("pyebpf", {}), c.get("bpftrace", {})
    t = by["cold-start-wall"]
    if t["status"] == "missed":
        phases = {k[6:-3]: v for k, v in py.items() if k.startswith("phase_")}
        start = c["python_start_s"] * 1e3
        imports = phases.get("imports", 0)       # timed from the script's first line
        out.append(
            f"- cold-start-wall missed by {t['value'] / t['goal']:.2f}x: the goal means "
            f"{t['goal'] * bt['wall_s'] * 1e3:.0f} ms, pyebpf took {py['wall_s'] * 1e3:.0f} "
            f"ms: interpreter start ~{start:.0f} ms, imports ~{imports:.0f} ms (see their "
            f"breakdown above), load {phases.get('load', 0):.0f} ms, attach "
            f"{phases.get('attach', 0):.0f} ms and detach {phases.get('detach', 0):.0f} ms "
            f"(mostly the kernel: registering and unregistering a uprobe wait for RCU grace "
            f"periods), the traced program {phases.get('run', 0):.0f} ms.  The interpreter "
            f"start is the machine's (a bare `python -c pass`); what pyebpf could still "
            f"shave is its imports, now mostly the unmarshalling of its own modules' code.")
    t = by["cold-start-rss"]
    if t["status"] == "missed":
        out.append(f"- cold-start-rss missed by {t['value'] / t['goal']:.1f}x "
                   f"({py['rss_mb']:.0f} MB vs {bt['rss_mb']:.0f} MB).")
    s = res["stream"]
    sp = s.get("pyebpf", {})
    t = by["streaming-rate-vs-bcc"]
    if t["status"] == "missed":
        out.append(f"- streaming-rate-vs-bcc missed ({t['value']:.1f}x): the drain rate is bounded "
                   f"by how fast the traced loop produces events ({sp.get('added_ns', 0) / 1e3:.2f}"
                   f" us/event added for pyebpf).")
    t = by["streaming-lost"]
    if t["status"] == "missed":
        out.append(f"- streaming-lost missed: {t['value']} events lost or unaccounted in the "
                   f"worst run (a full ring while the reader was descheduled on a busy "
                   f"machine: a larger ring or a reader thread pinned to its own CPU).")
    t = by["streaming-added-us"]
    count_added = _get(res, "agg_count", "pyebpf", "added_ns")
    if t["status"] == "missed" and count_added is not None:
        out.append(
            f"- streaming-added-us missed by {t['value'] - t['goal']:.2f} us: of "
            f"{t['value']:.2f} us/event, the probe hit itself (trap + a count, measured in "
            f"case 3) costs {count_added / 1e3:.2f} us and the output "
            f"{(sp['added_ns'] - count_added) / 1e3:.2f} us (bpf_ringbuf_output: the "
            f"ring's lock, the copy, the commit).  The trap is the kernel's and grows "
            f"when the machine is busy; nothing pyebpf does removes it.")
    for kind in ("count", "hist"):
        t = by[f"aggregation-{kind}"]
        a = res[f"agg_{kind}"]
        if t["status"] == "missed":
            out.append(
                f"- aggregation-{kind} missed by {(t['value'] - t['goal']) * 100:.0f} points: "
                f"pyebpf {a['pyebpf']['added_ns']:.0f} ns/hit vs bpftrace "
                f"{a['bpftrace']['added_ns']:.0f} ns/hit, a difference of "
                f"{a['pyebpf']['added_ns'] - a['bpftrace']['added_ns']:.0f} ns; untraced runs "
                f"spread over {_spread(a['untraced_runs']):.1f} ns/call, the run-to-run noise "
                f"on this machine.")
    return out


def _spread(values: list[float]) -> float:
    return (max(values) - min(values)) if values else float("nan")


def write(res: dict, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    md = markdown(res)
    name = "latest" if not res["quick"] else "quick"
    path = directory / f"{name}.md"
    path.write_text(f"# pyebpf vs bpftrace and BCC ({'quick' if res['quick'] else 'full'} run)\n\n"
                    f"Reproduce: `make bench` (sets up the peers, then "
                    f"`python -m benchmarks`); quick: `python -m benchmarks --quick`.\n\n" + md)
    (directory / f"{name}.json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    return path


README_START = "<!-- benchmarks:start -->"
README_END = "<!-- benchmarks:end -->"


def update_readme(res: dict, readme: Path = ROOT / "README.md") -> bool:
    """Replace the table between the README's benchmark markers (if present)."""
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        return False
    a = text.index(README_START) + len(README_START)
    b = text.index(README_END)
    readme.write_text(text[:a] + "\n" + markdown(res, why=False, brief=True) + text[b:])
    return True


def main(argv: list[str] | None = None) -> int:     # python -m benchmarks.compare
    import argparse
    ap = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--results", type=Path)
    ap.add_argument("--render", type=Path, metavar="JSON",
                    help="re-render a results JSON (markdown next to it; --readme) without running")
    ap.add_argument("--readme", action="store_true", help="also refresh README.md's table")
    args = ap.parse_args(argv)
    if args.render:
        res = json.loads(args.render.read_text())
        derive(res)
        path = write(res, args.render.parent)
        if args.readme:
            update_readme(res)
        print(f"written: {path}")
        return 0
    res = run(args.quick, args.rounds)
    path = write(res, args.results or (Path(tempfile.gettempdir()) / "pyebpf-bench"
                                       if args.quick else RESULTS))
    print(markdown(res))
    print(f"written: {path}")
    for line in target_lines(res):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
