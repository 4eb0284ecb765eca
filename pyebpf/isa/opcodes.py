"""Opcode numbers of the eBPF instruction set (RFC 9669 plus the kernel's
extensions), written once.  Everything that encodes, decodes, parses or prints
instructions reads these names.

An opcode byte is ``class(3 bits) | source-or-size(…) | operation-or-mode(…)``:

* ALU/ALU64/JMP/JMP32: ``op(4) | source(1) | class(3)``
* LD/LDX/ST/STX:       ``mode(3) | size(2) | class(3)``
"""
from __future__ import annotations

# ---- instruction classes (opcode & 0x07)
LD, LDX, ST, STX, ALU, JMP, JMP32, ALU64 = range(8)
CLASS_NAMES = ("ld", "ldx", "st", "stx", "alu", "jmp", "jmp32", "alu64")

# ---- source operand (opcode & 0x08) for ALU and JMP classes
K = 0x00   # immediate
X = 0x08   # register
TO_LE = 0x00  # END: convert to little endian (same bit as K)
TO_BE = 0x08  # END: convert to big endian (same bit as X)

# ---- load/store sizes (opcode & 0x18) and their byte widths
W, H, B, DW = 0x00, 0x08, 0x10, 0x18
SIZE_BYTES = {W: 4, H: 2, B: 1, DW: 8}
BYTES_SIZE = {4: W, 2: H, 1: B, 8: DW}

# ---- load/store modes (opcode & 0xe0)
IMM, ABS, IND, MEM, MEMSX, ATOMIC = 0x00, 0x20, 0x40, 0x60, 0x80, 0xC0

# ---- ALU operations (opcode & 0xf0)
ADD, SUB, MUL, DIV, OR, AND, LSH, RSH = 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70
NEG, MOD, XOR, MOV, ARSH, END = 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0
ALU_OPS = {
    "add": ADD, "sub": SUB, "mul": MUL, "div": DIV, "or": OR, "and": AND,
    "lsh": LSH, "rsh": RSH, "neg": NEG, "mod": MOD, "xor": XOR, "mov": MOV,
    "arsh": ARSH, "end": END,
}
ALU_OP_NAMES = {v: k for k, v in ALU_OPS.items()}
# ``off`` selects signed variants of DIV/MOD (1) and sign-extending MOV (8/16/32)
OFF_SIGNED = 1

# ---- jump operations (opcode & 0xf0)
JA, JEQ, JGT, JGE, JSET, JNE, JSGT, JSGE = 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70
CALL, EXIT, JLT, JLE, JSLT, JSLE, JCOND = 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0
JMP_OPS = {
    "ja": JA, "jeq": JEQ, "jgt": JGT, "jge": JGE, "jset": JSET, "jne": JNE,
    "jsgt": JSGT, "jsge": JSGE, "call": CALL, "exit": EXIT, "jlt": JLT,
    "jle": JLE, "jslt": JSLT, "jsle": JSLE, "jcond": JCOND,
}
JMP_OP_NAMES = {v: k for k, v in JMP_OPS.items()}
# the conditional jumps, by mnemonic
COND_JUMPS = ("jeq", "jgt", "jge", "jset", "jne", "jsgt", "jsge", "jlt", "jle", "jslt", "jsle")
# JCOND's only defined condition today: may_goto (src_reg 0)
JCOND_MAY_GOTO = 0

# ---- atomic operations (in imm of STX|ATOMIC)
FETCH = 0x01
ATOMIC_ADD, ATOMIC_OR, ATOMIC_AND, ATOMIC_XOR = 0x00, 0x40, 0x50, 0xA0
XCHG = 0xE0 | FETCH
CMPXCHG = 0xF0 | FETCH
LOAD_ACQ = 0x100
STORE_REL = 0x110
ATOMIC_ARITH = {"add": ATOMIC_ADD, "or": ATOMIC_OR, "and": ATOMIC_AND, "xor": ATOMIC_XOR}
ATOMIC_ARITH_NAMES = {v: k for k, v in ATOMIC_ARITH.items()}

# ---- pseudo source registers
# ld_imm64 (opcode 0x18) src_reg
PSEUDO_IMM64 = 0          # plain 64-bit constant
PSEUDO_MAP_FD = 1         # imm = map fd
PSEUDO_MAP_VALUE = 2      # imm = map fd, second imm = offset into value
PSEUDO_BTF_ID = 3         # imm = BTF id of a kernel variable
PSEUDO_FUNC = 4           # imm = relative instruction offset of a function
PSEUDO_MAP_IDX = 5        # imm = index into fd_array
PSEUDO_MAP_IDX_VALUE = 6  # imm = index into fd_array, second imm = offset
LD_IMM64_PSEUDO_NAMES = {
    PSEUDO_IMM64: "imm64", PSEUDO_MAP_FD: "map_fd", PSEUDO_MAP_VALUE: "map_value",
    PSEUDO_BTF_ID: "btf_id", PSEUDO_FUNC: "func", PSEUDO_MAP_IDX: "map_idx",
    PSEUDO_MAP_IDX_VALUE: "map_idx_value",
}
# call src_reg
CALL_HELPER = 0      # imm = helper id
CALL_LOCAL = 1       # imm = relative offset of a bpf-to-bpf function
CALL_KFUNC = 2       # imm = BTF id of a kernel function

# ---- frequently used whole opcodes
OP_LD_IMM64 = LD | IMM | DW    # 0x18
OP_CALL = JMP | CALL           # 0x85
OP_CALLX = JMP | CALL | X      # 0x8d (bpf_conformance only; not in RFC 9669)
OP_EXIT = JMP | EXIT           # 0x95
OP_JA = JMP | JA               # 0x05
OP_GOTOL = JMP32 | JA          # 0x06
OP_GOTOX = JMP | JA | X        # 0x0d (indirect jump, newest kernels)
OP_MAY_GOTO = JMP | JCOND      # 0xe5

# ---- registers
R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10 = range(11)
FP = R10
NUM_REGS = 11
STACK_SIZE = 512
