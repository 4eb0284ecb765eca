"""How fast the pure-Python VM runs eBPF (emulated instructions per second).

Two workloads:

* ``loop``: a 4,000-instruction loop-heavy program (ALU, stack stores and
  loads, forward branches, a bounded outer loop) run to completion; the
  goal is at least 1,000,000 instructions per second;
* ``conformance``: every bpf_conformance program (../shared/conformance),
  each run many times; short programs, so this measures the per-run cost too.

``translate_s`` is the one-time cost of turning the 4,000 instructions into
Python (decode, blocks, ``compile``), paid by the first run.
"""
from __future__ import annotations

import pathlib
import sys
import time

if __name__ == "__main__":  # run as a script: make the package importable
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from pyebpf.program import R0, R2, R3, R4, R6, R10, Program
from pyebpf.vm import Vm

GOAL = 1_000_000
CONFORMANCE = pathlib.Path(__file__).resolve().parents[2] / "shared" / "conformance"


def loop_program(size: int = 4_000, rounds: int = 50) -> Program:
    """``size`` instructions: an outer loop of ``rounds`` over a body that
    mixes ALU, stack memory and data-dependent forward branches."""
    p = Program("loop")
    p.mov(R0, 0)
    p.mov(R6, 0)
    p.mov(R2, 1)
    p.label("top")
    i = 0
    while len(p.insns) < size - 3:
        k = i % 10
        if k == 0:
            p.add(R0, R2)
        elif k == 1:
            p.stxdw(R10, -8 * (1 + i % 8), R0)
        elif k == 2:
            p.ldxdw(R3, R10, -8 * (1 + i % 8))
        elif k == 3:
            p.xor(R3, 0x55)
        elif k == 4:
            p.jgt(R3, 1 << 30, f"skip{i}")
        elif k == 5:
            p.add(R0, R3)
        elif k == 6:
            p.label(f"skip{i - 2}")
            p.rsh(R0, 1)
        elif k == 7:
            p.mul(R2, 3)
        elif k == 8:
            p.and_(R2, 0xFFFF)
        else:
            p.mov(R4, R0)
            p.lsh(R4, 3)
        i += 1
    p.add(R6, 1)
    p.jlt(R6, rounds, "top")
    p.exit()
    return p


def _best(fn, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _conformance(rounds: int) -> dict:
    from pyebpf.text import load_conformance
    from pyebpf.vm.conformance import test_program
    if not CONFORMANCE.is_dir():
        return {"conformance": f"n/a: {CONFORMANCE} not found"}
    vms = []
    for path in sorted(CONFORMANCE.glob("*.data")):
        test = load_conformance(path)
        if test.skip_reason or test.result is None:
            continue
        vm = Vm(test_program(test))
        vm.run(test.mem)
        vms.append((vm, test.mem))
    steps = sum(vm.steps for vm, _ in vms)
    t = _best(lambda: [vm.run(mem) for vm, mem in vms for _ in range(10)], rounds)
    return {"conformance_programs": len(vms), "conformance_insns_per_s": 10 * steps / t,
            "conformance_runs_per_s": 10 * len(vms) / t}


def run(quick: bool = False) -> dict:
    rounds = 2 if quick else 5
    prog = loop_program(rounds=10 if quick else 50)
    insns = list(prog.finalize())
    t0 = time.perf_counter()
    vm = Vm(insns, max_steps=10**9)
    first = vm.run()
    translate_s = time.perf_counter() - t0
    t = _best(vm.run, rounds)
    assert vm.run() == first
    rate = vm.steps / t
    result: dict = {"loop_program_insns": len(insns), "loop_executed_insns": vm.steps,
                    "loop_insns_per_s": rate, "translate_s": translate_s}
    result.update(_conformance(rounds))
    result["target"] = (f"target vm-insns-per-s: {rate:,.0f} (goal >= {GOAL:,}) "
                        f"{'met' if rate >= GOAL else 'missed'}")
    return result


if __name__ == "__main__":
    for k, v in run("--quick" in sys.argv).items():
        print(f"{k}: {v:,.3f}" if isinstance(v, float) else f"{k}: {v}")
