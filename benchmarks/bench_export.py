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


def run(quick: bool = False) -> dict:
    """Measure and return the numbers (seconds, microseconds, bytes: see the keys)."""
    rounds = 2 if quick else 5
    out: dict = {}
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
