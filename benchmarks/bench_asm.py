"""How fast text assembly and disassembly run (lines or instructions per second).

The program is a deterministic mix of every instruction form (random
registers, offsets and immediates, jumps to labels), ~4,000 instructions,
printed by the disassembler in each spelling and assembled back.  Two
workloads for the assembler:

* ``unique``: almost every line differs (random operands), so each is parsed;
* ``typical``: a compiler-like program whose lines repeat (the same few
  registers and offsets), where the assembler's statement cache helps.
"""
from __future__ import annotations

import pathlib
import random
import sys
import time

if __name__ == "__main__":  # run as a script: make the package importable
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from pyebpf.isa import Insn, opcodes as op
from pyebpf.text import assemble, disassemble

_ALU = [op.ADD, op.SUB, op.MUL, op.DIV, op.OR, op.AND, op.LSH, op.RSH, op.MOD, op.XOR, op.MOV,
        op.ARSH]


def _random_program(n: int, seed: int = 1) -> list[Insn]:
    rnd = random.Random(seed)
    reg = lambda: rnd.randint(0, 10)          # noqa: E731
    out: list[Insn] = []
    while len(out) < n:
        k = rnd.randrange(12)
        if k < 4:
            cls = rnd.choice([op.ALU, op.ALU64])
            if rnd.random() < 0.5:
                out.append(Insn(rnd.choice(_ALU) | op.X | cls, reg(), reg()))
            else:
                out.append(Insn(rnd.choice(_ALU) | op.K | cls, reg(), 0, 0, rnd.randint(-5000, 5000)))
        elif k == 4:
            size = op.BYTES_SIZE[rnd.choice([1, 2, 4, 8])]
            out.append(Insn(op.MEM | size | op.LDX, reg(), reg(), rnd.randint(-512, 512)))
        elif k == 5:
            size = op.BYTES_SIZE[rnd.choice([1, 2, 4, 8])]
            out.append(Insn(op.MEM | size | op.STX, reg(), reg(), rnd.randint(-512, 512)))
        elif k == 6:
            out.append(Insn(op.MEM | op.DW | op.ST, 10, 0, -8 * rnd.randint(1, 64), rnd.randint(0, 99)))
        elif k == 7:
            cls = rnd.choice([op.JMP, op.JMP32])
            jop = op.JMP_OPS[rnd.choice(op.COND_JUMPS)]
            out.append(Insn(jop | op.K | cls, reg(), 0, rnd.randint(0, 20), rnd.randint(-100, 100)))
        elif k == 8:
            out.append(Insn(op.OP_LD_IMM64, reg(), 0, 0, rnd.randint(-(1 << 31), (1 << 31) - 1),
                            rnd.randint(-(1 << 31), (1 << 31) - 1)))
        elif k == 9:
            out.append(Insn(op.ATOMIC | op.DW | op.STX, reg(), reg(), -8, rnd.choice([0, 1, 0xe1])))
        elif k == 10:
            out.append(Insn(op.OP_CALL, 0, 0, 0, rnd.randint(1, 200)))
        else:
            out.append(Insn(op.OP_JA, 0, 0, rnd.randint(0, 20)))
    out.append(Insn(op.OP_EXIT))
    # keep jumps inside the program
    slots = sum(i.slots for i in out)
    pos = 0
    for insn in out:
        if (insn.code & 7) in (op.JMP, op.JMP32) and insn.code not in (op.OP_CALL, op.OP_EXIT):
            insn.off = min(insn.off, slots - pos - 2)
        pos += insn.slots
    return out


def _typical_program(n: int) -> list[Insn]:
    """What a compiler emits: few distinct lines (stack slots, r1-r3, small constants)."""
    body = [Insn(op.ALU64 | op.MOV | op.X, 1, 10), Insn(op.ALU64 | op.ADD | op.K, 1, 0, 0, -8),
            Insn(op.MEM | op.DW | op.STX, 10, 6, -8), Insn(op.MEM | op.DW | op.LDX, 2, 10, -8),
            Insn(op.OP_CALL, 0, 0, 0, 1), Insn(op.JMP | op.JEQ | op.K, 0, 0, 3, 0),
            Insn(op.MEM | op.W | op.LDX, 3, 0, 0), Insn(op.ALU | op.ADD | op.K, 3, 0, 0, 1),
            Insn(op.MEM | op.W | op.STX, 0, 3, 0), Insn(op.ALU64 | op.MOV | op.K, 0, 0, 0, 0)]
    out = []
    while len(out) < n:
        out.extend(c.copy() for c in body)
    out.append(Insn(op.OP_EXIT))
    return out


def _best(fn, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run(quick: bool = False) -> dict:
    rounds = 2 if quick else 5
    n = 1_000 if quick else 4_000
    result: dict = {}
    for kind, insns in (("unique", _random_program(n)), ("typical", _typical_program(n))):
        data = b"".join(i.encode() for i in insns)
        count = len(insns)
        for dialect, style in (("llvm", "objdump"), ("llvm", "verifier"), ("mnemonic", "objdump")):
            text = disassemble(data, dialect, style)
            lines = sum(1 for line in text.splitlines() if line.strip())
            name = dialect if style == "objdump" else f"{dialect}_{style}"
            if kind == "unique":
                from pyebpf.text import assembler
                cache = assembler._CACHE[dialect]
                t = _best(lambda: (cache.clear(), assemble(text, dialect)), rounds)
            else:
                t = _best(lambda: assemble(text, dialect), rounds)
            assert assemble(text, dialect).encode() == data
            result[f"asm_{name}_{kind}_lines_per_s"] = lines / t
            if kind == "unique":
                t = _best(lambda: disassemble(data, dialect, style), rounds)
                result[f"disasm_{name}_insns_per_s"] = count / t
    return result


if __name__ == "__main__":
    for k, v in run().items():
        print(f"{k}: {v:,.0f}" if isinstance(v, float) else f"{k}: {v}")
