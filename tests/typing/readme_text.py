"""The top-level text assembler and disassembler (``pyebpf.assemble``...)."""
from __future__ import annotations

import pyebpf

prog = pyebpf.assemble("r0 = 42\nexit")
code: bytes = prog.encode()
listing: str = pyebpf.disassemble(code)
print(listing)
for insn in pyebpf.decode(code):
    print(insn.code, insn.dst, insn.imm)
again: bytes = pyebpf.encode(pyebpf.decode(code))
p = pyebpf.Program("top").mov(pyebpf.R0, 0).exit()
with pyebpf.load(p, "socket_filter") as loaded:
    print(loaded.fileno())
