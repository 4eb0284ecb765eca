"""The DSL: build eBPF programs from Python.

    from pyebpf.program import Program, R0
    p = Program("answer")
    p.mov(R0, 42).exit()
    p.encode()      # 16 bytes: b7 00 00 00 2a 00 00 00 95 00 ...
"""
from .core import Program, RawSlot, StackFrame, caller_origin
from .dsl import (FP, R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10, W0, W1, W2, W3, W4, W5, W6,
                  W7, W8, W9, W10, Reg)

__all__ = [
    "Program", "RawSlot", "StackFrame", "Reg", "caller_origin", "FP",
    "R0", "R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9", "R10",
    "W0", "W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9", "W10",
]
