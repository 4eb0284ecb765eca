"""``pyebpf export``: the time of one scrape of 1,000 / 10,000 / 100,000 keyed series.

A program with one keyed ``count()`` map (``BEGIN { @m[0] = count(); }``) is
started through the language's API, its per-CPU map filled with N keys from
Python (one batch update), and served by :class:`pyebpf.export.server.Exporter`
on a loopback port with ``--max-series`` raised to N. Measured, best of
several rounds:

* ``scrape_N_s``: one HTTP GET of ``/metrics`` (read the map with batch
  lookups, render, send), as Prometheus's scrape sees it;
* ``scrape_N_us_per_series``: the same per series.

The map's size is raised for the benchmark (a program's maps hold 4,096 keys,
bpftrace's default); the exporter itself has no such bound. Exporting adds
no per-event cost: the program loaded is the one ``pyebpf bt`` loads (the
same ``BtProgram.start``), and nothing runs between scrapes.

Run: ``python -m benchmarks export`` or ``python benchmarks/bench_export.py
[--quick]``. Needs root (CAP_BPF) and prometheus_client. Aim: 10,000
series in < 0.5 s.

It also measures the per-hit cost of one program served by ``pyebpf export``
and run by ``pyebpf bt`` (``run_time_ns / run_cnt`` of its uprobe program,
``BPF_ENABLE_STATS``, while the ``loop`` target calls ``hit()``), alternately:
``per_hit_export_ns`` / ``per_hit_bt_ns``, whose ratio should be 1 (exporting
costs nothing per event: the target line allows 10% of noise).
"""
from __future__ import annotations

import sys
import time
import urllib.request
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SIZES = (1_000, 10_000, 100_000)


def _scrape(url: str) -> int:
    with urllib.request.urlopen(url, timeout=120) as resp:
        return len(resp.read())


def _one(n: int, rounds: int) -> tuple[float, int]:
    """(best scrape time, body bytes) with ``n`` keyed series."""
    from pyebpf.export.server import Exporter
    from pyebpf.kernel.cpus import possible_cpus
    from pyebpf.lang import codegen
    from pyebpf.lang.api import compile

    saved = codegen.MAX_MAP_ENTRIES
    codegen.MAX_MAP_ENTRIES = max(n, saved)
    try:
        run = compile("BEGIN { @m[(int64)0] = count(); }").start()
    finally:
        codegen.MAX_MAP_ENTRIES = saved
    exporter = Exporter(max_series=n + 1)
    try:
        plan = run.unit.maps["@m"]
        live = run.live[plan.kname]
        ncpu = len(possible_cpus())
        live.update({k: [k + 1] + [0] * (ncpu - 1) for k in range(n)})
        exporter.attach(run)
        host, port = exporter.serve("127.0.0.1", 0)
        url = f"http://{host}:{port}/metrics"
        size = _scrape(url)
        best = float("inf")
        for _ in range(rounds):
            t0 = time.perf_counter()
            _scrape(url)
            best = min(best, time.perf_counter() - t0)
        return best, size
    finally:
        exporter.close()
        run.stop()
        run.close()


PER_HIT = "uprobe:{loop}:hit {{ @c[arg0 % 8] = count(); @h = hist(arg1); }}"


def _per_hit_once(command: str, loop: str, n: int) -> float:
    """ns per hit of the uprobe program that ``pyebpf COMMAND`` loads."""
    import os
    import socket
    import subprocess

    from benchmarks.bench_lang import _progs_since, _prog_ids, _stop
    from pyebpf.kernel.constants import ProgType

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    argv = [sys.executable, "-m", "pyebpf", command, "-e", PER_HIT.format(loop=loop)]
    if command == "export":
        with socket.socket() as s:             # a free loopback port
            s.bind(("127.0.0.1", 0))
            argv += ["--listen", f"127.0.0.1:{s.getsockname()[1]}"]
    before = _prog_ids()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        # bt says "Attaching" on stdout, export "serving" on stderr, once attached
        stream = proc.stderr if command == "export" else proc.stdout
        assert stream is not None
        for line in stream:
            if "serving" in line or "Attaching" in line:
                break
        else:
            raise RuntimeError(f"pyebpf {command} ended before attaching")
        time.sleep(0.2)
        subprocess.run([loop, str(n)], check=True, capture_output=True)
        progs = [i for i in _progs_since(before) if i.type == int(ProgType.KPROBE)]
    finally:
        _stop(proc)
    if not progs:
        raise RuntimeError(f"pyebpf {command}: no uprobe program found")
    best = max(progs, key=lambda i: i.run_cnt)
    return best.run_time_ns / max(best.run_cnt, 1)


def per_hit(quick: bool = False) -> dict:
    """Per-hit ns of the same program under ``pyebpf export`` and ``pyebpf bt``."""
    import statistics

    from benchmarks.targets import build_loop
    from pyebpf.kernel.objinfo import enable_stats
    loop = build_loop()
    n = 20_000 if quick else 200_000
    times: dict[str, list[float]] = {"export": [], "bt": []}
    stats = enable_stats()
    try:
        for _ in range(2 if quick else 5):
            for command in ("export", "bt"):
                times[command].append(_per_hit_once(command, loop, n))
    finally:
        stats.close()
    out: dict = {f"per_hit_{c}_ns": statistics.median(v) for c, v in times.items()}
    ratio = out["per_hit_export_ns"] / out["per_hit_bt_ns"]
    out["target export-per-hit"] = f"{ratio:.2f} of pyebpf bt's (goal <= 1.10) " + (
        "met" if ratio <= 1.10 else "NOT met")
    return out


def run(quick: bool = False) -> dict:
    """Measure and return the numbers (seconds, microseconds, bytes: see the keys)."""
    rounds = 2 if quick else 5
    out: dict = per_hit(quick)
    for n in SIZES:
        best, size = _one(n, rounds if n < 100_000 else max(1, rounds // 2))
        out[f"scrape_{n}_s"] = best
        out[f"scrape_{n}_us_per_series"] = best / n * 1e6
        out[f"scrape_{n}_bytes"] = size
    out["scrape_10000_ok"] = out["scrape_10000_s"] < 0.5
    return out


if __name__ == "__main__":
    res = run(quick="--quick" in sys.argv)
    for key, value in res.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
