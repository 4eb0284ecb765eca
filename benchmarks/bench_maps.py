"""Map access from Python: single lookups and updates, and batch iteration.

* ``lookup_us``: one ``m[key]`` on a u32 -> u64 hash map (BPF_MAP_LOOKUP_ELEM),
  best of several rounds; ``raw_syscall_us`` is the bare bpf() call with the
  same pre-built attr, i.e. the floor the Python layer adds to.
* ``update_us``: one ``m[key] = value``.
* ``batch_update_s`` / ``iterate_s``: ``update()`` then ``items()`` of a
  100,000-entry hash map (BPF_MAP_UPDATE_BATCH / BPF_MAP_LOOKUP_BATCH).

Run: ``python -m benchmarks maps`` or ``python benchmarks/bench_maps.py [--quick]``.
Needs root (CAP_BPF).  Aims: lookup < 3 us, iterating 100,000 entries < 0.2 s.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyebpf.kernel.ffi import NR_BPF, sys_bpf  # noqa: E402
from pyebpf.maps import HashMap  # noqa: E402

ENTRIES = 100_000


def _best(fn, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run(quick: bool = False) -> dict:
    """Measure and return the numbers (seconds or microseconds, see the keys)."""
    n_calls = 20_000 if quick else 200_000
    rounds = 3 if quick else 5
    out: dict = {}
    with HashMap("u32", "u64", ENTRIES, name="bench") as m:
        m[5] = 5
        slot = m._pool[0]
        attr = slot._a_lookup

        def raw() -> None:
            for _ in range(n_calls):
                sys_bpf(NR_BPF, 1, attr, 32)

        def lookups() -> None:
            for _ in range(n_calls):
                m[5]

        def updates() -> None:
            for i in range(n_calls):
                m[i & 1023] = i

        out["raw_syscall_us"] = _best(raw, rounds) / n_calls * 1e6
        out["lookup_us"] = _best(lookups, rounds) / n_calls * 1e6
        out["update_us"] = _best(updates, rounds) / n_calls * 1e6
        m.clear()

        data = {i: i * 3 for i in range(ENTRIES)}
        t0 = time.perf_counter()
        m.update(data)
        out["batch_update_s"] = time.perf_counter() - t0
        out["batch_update_per_s"] = ENTRIES / out["batch_update_s"]

        def iterate() -> None:
            items = m.items()
            assert len(items) == ENTRIES

        out["iterate_s"] = _best(iterate, rounds)
        out["iterate_entries"] = ENTRIES
        out["iterate_per_s"] = ENTRIES / out["iterate_s"]
    out["lookup_ok"] = out["lookup_us"] < 3.0
    out["iterate_ok"] = out["iterate_s"] < 0.2
    return out


if __name__ == "__main__":
    res = run(quick="--quick" in sys.argv)
    for key, value in res.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
