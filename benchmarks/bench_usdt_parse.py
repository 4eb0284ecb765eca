"""USDT note parsing: how fast ``.note.stapsdt`` is read and decoded.

For each libjvm.so installed (HotSpot has ~550 probe sites) and for
postgres/python3.11 when present:

* ``<file>_notes``: stapsdt notes in the file;
* ``<file>_parse_ms``: best time to open the file, read the ELF headers and
  decode every note (``UsdtFile(path).notes()``), and ``<file>_notes_per_s``;
* ``<file>_args_ms``: best time to then decode every argument spec with a
  cold parser cache, and ``<file>_args_per_s``;
* ``<file>_offsets_ms``: resolving every probe and semaphore file offset.

Run: ``python -m benchmarks usdt_parse`` or
``python benchmarks/bench_usdt_parse.py [--quick]``.  Pure Python, no kernel.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyebpf.usdt import UsdtFile  # noqa: E402
from pyebpf.usdt.spec import _parse_cached  # noqa: E402

FILES = {
    "libjvm17": "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so",
    "libjvm25": "/usr/lib/jvm/temurin-25-jdk-amd64/lib/server/libjvm.so",
    "postgres": "/usr/lib/postgresql/15/bin/postgres",
    "python311": "/usr/bin/python3.11",
}


def _best(fn, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run(quick: bool = False) -> dict:
    """Measure and return the numbers (see the module docstring for the keys)."""
    rounds = 3 if quick else 15
    out: dict = {}
    for key, path in FILES.items():
        if not os.path.exists(path):
            out[f"{key}_skipped"] = f"{path} not installed"
            continue
        UsdtFile(path).notes()                      # warm the page cache and imports
        t_parse = _best(lambda: UsdtFile(path).notes(), rounds)
        notes = UsdtFile(path).notes()
        n_args = sum(len(n.args.split()) for n in notes)

        def decode_args() -> None:
            for n in notes:
                n.arguments                         # noqa: B018 - decode

        t_args = float("inf")
        for _ in range(rounds):                     # cold: no cached specs, no cached tuples
            _parse_cached.cache_clear()
            for n in notes:
                n._arguments = None
            t0 = time.perf_counter()
            decode_args()
            t_args = min(t_args, time.perf_counter() - t0)

        def offsets() -> None:
            for n in notes:
                n.offset                            # noqa: B018
                n.semaphore_offset                  # noqa: B018
        t_off = _best(offsets, rounds)
        out[f"{key}_notes"] = len(notes)
        out[f"{key}_parse_ms"] = t_parse * 1e3
        out[f"{key}_notes_per_s"] = len(notes) / t_parse
        out[f"{key}_args"] = n_args
        out[f"{key}_args_ms"] = t_args * 1e3
        out[f"{key}_args_per_s"] = n_args / t_args
        out[f"{key}_offsets_ms"] = t_off * 1e3
    return out


if __name__ == "__main__":
    result = run(quick="--quick" in sys.argv[1:])
    for k, v in result.items():
        print(f"{k}: {v:.4g}" if isinstance(v, float) else f"{k}: {v}")
