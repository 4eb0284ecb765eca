"""How fast the DSL builds and encodes programs (instructions per second).

Programs of about 4,000 instructions (the old kernel limit and a generous
size for a tracing program) are built and encoded repeatedly; a single
program of 175,000 instructions is measured too, where Python's garbage
collector (which walks every live instruction object) costs more.
"""
from __future__ import annotations

import time

from pyebpf.program import R0, R1, R2, R10, Program


def _build(n: int) -> Program:
    p = Program("bench")
    p.mov(R0, 0)
    for i in range(n // 8):
        p.label(f"l{i}")
        p.mov(R1, i)
        p.add(R1, R0)
        p.stxdw(R10, -8, R1)
        p.ldxdw(R2, R10, -8)
        p.lsh(R2, 3)
        p.jgt(R2, 100, f"l{i + 1}")
        p.add(R0, R2)
    p.label(f"l{n // 8}")
    p.exit()
    return p


def _rate(size: int, total: int, rounds: int) -> tuple[int, float]:
    best = float("inf")
    count = 0
    for _ in range(rounds):
        count = 0
        t0 = time.perf_counter()
        while count < total:
            count += len(_build(size).encode()) // 8
        best = min(best, time.perf_counter() - t0)
    return count, count / best


def run(quick: bool = False) -> dict:
    rounds = 1 if quick else 3
    n, typical = _rate(4_000, 40_000 if quick else 200_000, rounds)
    _, huge = _rate(175_000, 1, 1 if quick else 2)
    return {"dsl_insns_per_s": typical, "dsl_insns_per_s_175k_program": huge}


if __name__ == "__main__":
    for k, v in run().items():
        print(f"{k}: {v:,.0f}" if isinstance(v, float) else f"{k}: {v}")
