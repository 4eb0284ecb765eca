"""Attach and detach cost of uprobes, per mechanism and number of offsets.

The probes go on a private copy of libc (no process maps it), at the entry of
N different functions, with a one-instruction-ish counting program:

* ``<method>_<N>_attach_ms`` / ``..._detach_ms``: one ``attach_uprobes`` of N
  offsets and its ``detach()`` (best of a few rounds), for ``uprobe_multi``
  (one link), ``perf_link`` and ``perf_ioctl`` (one uprobe PMU event per
  offset, closed concurrently on detach).
* ``perf_link_<N>_sequential_detach_ms``: the same perf events closed one
  after the other, to show what the concurrent close saves.
* ``resolve_<N>_ms``: symbol resolution + boundary checks alone (pure Python).

Run: ``python -m benchmarks attach`` or ``python benchmarks/bench_attach.py [--quick]``.
Needs root.  The kernel's own cost dominates: ~100 ms to close one perf-event
uprobe, ~25-50 ms for a uprobe_multi link whatever its size.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyebpf import attach, elf  # noqa: E402
from pyebpf.kernel import features  # noqa: E402
from pyebpf.maps import HashMap  # noqa: E402
from pyebpf.program import Program  # noqa: E402


def _counter(m) -> Program:
    p = Program("bench_cnt")
    key = p.stack_store(0, 4)
    p.map_increment(m, key)
    p.ret(0)
    return p


def run(quick: bool = False) -> dict:
    sizes = (1, 10) if quick else (1, 10, 50)
    rounds = 1 if quick else 3
    out: dict = {}
    tmp = tempfile.mkdtemp(prefix="pyebpf_bench_")
    try:
        lib = os.path.join(tmp, "libc_copy.so")
        shutil.copy(elf.resolve_library("libc"), lib)
        ef = elf.open_elf(lib)
        funcs = sorted({s.name for s in ef.symbols()
                        if s.type == elf.STT_FUNC and s.size > 16 and s.default})
        step = max(1, len(funcs) // max(sizes))
        names = funcs[::step][:max(sizes)]
        methods = [m for m, f in ((attach.UPROBE_MULTI, features.has_uprobe_multi),
                                  (attach.PERF_LINK, features.has_perf_link),
                                  (attach.PERF_IOCTL, features.has_uprobe_pmu)) if f()]
        with HashMap("u32", "u64", 1, name="bench_cnt") as m:
            for n in sizes:
                t0 = time.perf_counter()
                attach.resolve_uprobes(lib, names[:n])
                out[f"resolve_{n}_ms"] = (time.perf_counter() - t0) * 1e3
            for method in methods:
                prog = attach.load_uprobe_program(_counter(m), method=method)
                try:
                    for n in sizes:
                        best_a = best_d = float("inf")
                        for _ in range(rounds):
                            link = attach.attach_uprobes(prog, lib, names[:n], method=method)
                            best_a = min(best_a, link.attach_seconds)
                            link.detach()
                            best_d = min(best_d, link.detach_seconds)
                        out[f"{method}_{n}_attach_ms"] = best_a * 1e3
                        out[f"{method}_{n}_detach_ms"] = best_d * 1e3
                        if method == attach.PERF_LINK and n > 1:
                            link = attach.attach_uprobes(prog, lib, names[:n], method=method)
                            t0 = time.perf_counter()
                            attach._close_groups(link._groups, parallel=False)
                            out[f"{method}_{n}_sequential_detach_ms"] = \
                                (time.perf_counter() - t0) * 1e3
                            link.detach()
                finally:
                    prog.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


if __name__ == "__main__":
    res = run(quick="--quick" in sys.argv)
    for key, value in res.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
