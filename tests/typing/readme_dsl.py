"""README and docs/guide/assembly.md: the assembler DSL, maps, and the verifier."""
from __future__ import annotations

from pyebpf.loader import load
from pyebpf.maps import HashMap
from pyebpf.program import R0, R1, Program

counts = HashMap(key="u32", value="u64", max_entries=64, name="counts")
typed: HashMap[int, int] = HashMap(key="u32", value="u64", max_entries=64, name="typed")

p = Program("count")
key = p.stack_store(7, size=4)           # a 4-byte key on the stack
p.map_increment(counts, key)             # lookup, NULL check, atomic add or insert
p.ret(2)                                 # XDP_PASS

q = Program("chain").mov(R0, 0).mov(R1, R0).add(R0, 1)    # the builders chain
q.exit()
chained: Program = q.jeq(R0, 1, "out").mov(R0, 2)

with load(p, "xdp") as prog:
    result = prog.test_run(bytes(64), repeat=1000)
    retval: int = result.retval
    print(counts[7])                     # 1000
    doubled: int = typed[7] * 2          # a typed map gives typed values
    maybe: int | None = typed.get(8)
    pairs: list[tuple[int, int]] = typed.items()
    print(prog.xlated_text())            # what the kernel made of it
    print(prog.jited_asm())              # the JIT's x86-64
