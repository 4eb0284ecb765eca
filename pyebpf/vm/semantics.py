"""What every eBPF instruction does, next to its encoding: the VM's one table.

Read this file to learn the instruction set's run-time behaviour; the
translator (:mod:`pyebpf.vm.translate`) reads the same rows to turn a program
into Python.  Semantics follow the kernel (``kernel/bpf/core.c`` plus the
verifier's rewrites) where RFC 9669 leaves a choice.

Values
    Registers hold unsigned 64-bit integers (``0 <= r < 2**64``).  An ALU
    (32-bit) operation reads the low 32 bits of its operands and writes its
    result *zero-extended* to 64 bits.  An immediate is sign-extended to the
    operation's width (``-1`` is ``2**64-1`` for ALU64/JMP and ``2**32-1``
    for ALU/JMP32).

Templates
    ``{d}`` / ``{s}``  the destination / source operand, unsigned, at the width
    ``{sd}`` / ``{ss}`` the same read as signed (two's complement)
    ``{sh}``           the shift-amount mask: 63 (64-bit) or 31 (32-bit)
    The result of an ALU template is masked to the width before it is stored.

Memory, calls and jumps are listed in :data:`MEMORY`, :data:`JUMPS` and
:data:`CONTROL` as prose (their code needs the checked-memory and frame
machinery of :mod:`pyebpf.vm.machine`).
"""
from __future__ import annotations

from ..isa import opcodes as op

#: ALU operations: name -> (opcode operation bits, ``off``, template, what it means).
#: The opcode is ``operation | source (K 0x00 / X 0x08) | class (ALU 0x04 / ALU64 0x07)``:
#: e.g. ``add`` is 0x07 (ALU64, imm), 0x0f (ALU64, reg), 0x04 and 0x0c (ALU32).
# (duplicates: deliberate, a table read by learners: one row per operation, rows alike by design)
ALU: dict[str, tuple[int, int, str, str]] = {
    "add":  (op.ADD, 0, "{d} + {s}", "wraps around"),
    "sub":  (op.SUB, 0, "{d} - {s}", "wraps around"),
    "mul":  (op.MUL, 0, "{d} * {s}", "low bits of the product"),
    "div":  (op.DIV, 0, "({d} // {s} if {s} else 0)", "unsigned; division by zero gives 0"),
    "sdiv": (op.DIV, 1, "sdiv({sd}, {ss})",
             "signed, truncated toward zero; by zero gives 0; MIN / -1 gives MIN (cpu v4)"),
    "or":   (op.OR, 0, "{d} | {s}", ""),
    "and":  (op.AND, 0, "{d} & {s}", ""),
    "lsh":  (op.LSH, 0, "{d} << ({s} & {sh})", "the shift amount is masked to the width"),
    "rsh":  (op.RSH, 0, "{d} >> ({s} & {sh})", "logical (zeros come in)"),
    "mod":  (op.MOD, 0, "({d} % {s} if {s} else {d})",
             "unsigned; modulo by zero leaves dst (ALU: its low 32 bits, zero-extended)"),
    "smod": (op.MOD, 1, "smod({sd}, {ss})",
             "signed, the sign of the dividend (C's %); by zero leaves dst; MIN % -1 is 0"),
    "xor":  (op.XOR, 0, "{d} ^ {s}", ""),
    "mov":  (op.MOV, 0, "{s}", "ALU: the low 32 bits, zero-extended"),
    "arsh": (op.ARSH, 0, "{sd} >> ({s} & {sh})", "arithmetic (the sign bit comes in)"),
}

#: One-operand ALU forms: name -> (opcode(s), template over the 64-bit register ``{r}``, meaning).
UNARY: dict[str, tuple[str, str, str]] = {
    "neg":      ("0x87 / 0x84", "-{d}", "two's complement negation at the width"),
    "movsx8":   ("0xbf/0xbc off=8", "(({s} & 0xff) ^ 0x80) - 0x80",
                 "sign-extend the low byte of src (ALU: to 32 bits, then zero-extend)"),
    "movsx16":  ("0xbf/0xbc off=16", "(({s} & 0xffff) ^ 0x8000) - 0x8000", "sign-extend 16 bits"),
    "movsx32":  ("0xbf off=32", "(({s} & 0xffffffff) ^ 0x80000000) - 0x80000000",
                 "sign-extend 32 bits (ALU64 only)"),
    "le16":     ("0xd4 imm=16", "{r} & 0xffff", "to little endian: truncate (x86 is LE)"),
    "le32":     ("0xd4 imm=32", "{r} & 0xffffffff", "to little endian: truncate"),
    "le64":     ("0xd4 imm=64", "{r}", "to little endian: nothing"),
    "be16":     ("0xdc imm=16", "bswap16({r})", "swap the low 2 bytes, zero-extend"),
    "be32":     ("0xdc imm=32", "bswap32({r})", "swap the low 4 bytes, zero-extend"),
    "be64":     ("0xdc imm=64", "bswap64({r})", "swap all 8 bytes"),
    "bswap16":  ("0xd7 imm=16", "bswap16({r})", "unconditional swap (cpu v4)"),
    "bswap32":  ("0xd7 imm=32", "bswap32({r})", "unconditional swap (cpu v4)"),
    "bswap64":  ("0xd7 imm=64", "bswap64({r})", "unconditional swap (cpu v4)"),
}

#: Conditional jumps: name -> (operation bits, condition template, meaning).  The opcode is
#: ``operation | source | class`` with class JMP (0x05: 64-bit compare) or JMP32 (0x06: the
#: low 32 bits); the target is ``pc + 1 + off``.
JUMPS: dict[str, tuple[int, str, str]] = {
    "jeq":  (op.JEQ, "{d} == {s}", "equal"),
    "jne":  (op.JNE, "{d} != {s}", "not equal"),
    "jgt":  (op.JGT, "{d} > {s}", "unsigned >"),
    "jge":  (op.JGE, "{d} >= {s}", "unsigned >="),
    "jlt":  (op.JLT, "{d} < {s}", "unsigned <"),
    "jle":  (op.JLE, "{d} <= {s}", "unsigned <="),
    "jset": (op.JSET, "{d} & {s}", "any common bit set"),
    "jsgt": (op.JSGT, "{sd} > {ss}", "signed >"),
    "jsge": (op.JSGE, "{sd} >= {ss}", "signed >="),
    "jslt": (op.JSLT, "{sd} < {ss}", "signed <"),
    "jsle": (op.JSLE, "{sd} <= {ss}", "signed <="),
}

#: Atomic read-modify-write operations (STX|ATOMIC, 0xc3 32-bit / 0xdb 64-bit): imm -> (name,
#: new value template over the old memory value ``{m}`` and src ``{s}``, meaning).  Alignment
#: is always checked.  ``| 0x01`` (FETCH) also puts the old value in src (zero-extended).
ATOMICS: dict[int, tuple[str, str, str]] = {
    op.ATOMIC_ADD: ("add", "{m} + {s}", "memory += src"),
    op.ATOMIC_OR:  ("or", "{m} | {s}", "memory |= src"),
    op.ATOMIC_AND: ("and", "{m} & {s}", "memory &= src"),
    op.ATOMIC_XOR: ("xor", "{m} ^ {s}", "memory ^= src"),
    op.XCHG:       ("xchg", "{s}", "swap memory and src; src gets the old value"),
    op.CMPXCHG:    ("cmpxchg", "{s} if {m} == r0 else {m}",
                    "if memory == r0 (low 32 bits for W) store src; r0 gets the old value"),
    op.LOAD_ACQ:   ("load_acquire", "", "dst = *(src + off), zero-extended (also B/H sizes)"),
    op.STORE_REL:  ("store_release", "", "*(dst + off) = src (also B/H sizes)"),
}

#: Loads and stores: mode -> meaning.  ``size`` is 1, 2, 4 or 8 bytes (opcode bits 0x18).
MEMORY: dict[str, str] = {
    "ldx  (0x61 0x69 0x71 0x79)": "dst = *(u<size> *)(src + off), zero-extended",
    "ldxs (0x81 0x89 0x91)": "dst = *(s<size> *)(src + off), sign-extended to 64 bits (cpu v4)",
    "st   (0x62 0x6a 0x72 0x7a)": "*(u<size> *)(dst + off) = imm (truncated)",
    "stx  (0x63 0x6b 0x73 0x7b)": "*(u<size> *)(dst + off) = src (truncated)",
    "lddw (0x18, 2 slots)": "dst = imm | next_imm << 32; src 1/5: a map, 2/6: &map value + "
                            "next_imm, 4: the address of a function",
    "ldabs (0x20 0x28 0x30)": "r0 = the packet's big-endian u<size> at imm; out of the "
                              "packet: the program ends with r0 = 0 (legacy)",
    "ldind (0x40 0x48 0x50)": "r0 = the packet's big-endian u<size> at src + imm (legacy)",
}

#: Control flow: name -> meaning.
CONTROL: dict[str, str] = {
    "ja (0x05)": "pc += off",
    "gotol (0x06)": "pc += imm (JMP32|JA: a 32-bit reach)",
    "may_goto (0xe5)": "jump to the target once the run's budget (8M may_goto's) is spent, "
                       "else go on",
    "call (0x85 src 0)": "r0 = helper#imm(r1..r5)",
    "call (0x85 src 1)": "bpf-to-bpf call to pc + 1 + imm: a new frame with its own 512-byte "
                         "stack; r6-r9 and r10 are restored when it returns",
    "callx (0x8d)": "call what dst holds: a function address (lddw src 4) or a helper id",
    "gotox (0x0d)": "pc = the instruction whose address dst holds (lddw src 4)",
    "exit (0x95)": "return r0 from the frame; from the last frame, end the program",
}


# -------------------------------------------------------------------- run-time functions
# The translated code calls these for the operations Python has no operator for.

def sdiv(a: int, b: int) -> int:
    """Signed division truncated toward zero; by zero gives 0."""
    if not b:
        return 0
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def smod(a: int, b: int) -> int:
    """Signed remainder with the dividend's sign; by zero leaves ``a``."""
    if not b:
        return a
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def bswap16(v: int) -> int:
    """Swap the low two bytes of ``v`` (the result is 16 bits)."""
    return ((v >> 8) & 0xFF) | ((v & 0xFF) << 8)


def bswap32(v: int) -> int:
    """Swap the low four bytes of ``v`` (the result is 32 bits)."""
    return int.from_bytes((v & 0xFFFFFFFF).to_bytes(4, "little"), "big")


def bswap64(v: int) -> int:
    """Swap the eight bytes of ``v``."""
    return int.from_bytes((v & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little"), "big")


RUNTIME = {"sdiv": sdiv, "smod": smod, "bswap16": bswap16, "bswap32": bswap32,
           "bswap64": bswap64}


#: What the table's placeholders and columns mean (printed under it by :func:`table`).
LEGEND = """\
legend:
  0xNN/0xMM    the opcode byte of the 64-bit / the 32-bit form (ALU64/ALU, JMP/JMP32)
  off=N imm=N  the value of the off or imm field that selects this row
  {d} {s}      the destination / source operand (a register or imm), unsigned, at the width
  {sd} {ss}    the same two read as signed (two's complement)
  {sh}         the shift-amount mask: 63 (64-bit) or 31 (32-bit)
  {r}          the destination register before the operation
  {m}          the memory operand (*(dst + off)) before the atomic operation
  (32-bit forms read the low 32 bits and write the result zero-extended to 64 bits;
   an imm is sign-extended to the width)"""


def table() -> str:
    """The whole table as text, one line per operation, then :data:`LEGEND`
    (``pyebpf vm table``'s output)."""
    lines = ["ALU (class 0x07 ALU64 / 0x04 ALU; | 0x08 for a register source):"]
    for name, (bits, off, tmpl, why) in ALU.items():
        lines.append(f"  0x{bits | op.ALU64:02x}/0x{bits | op.ALU:02x}"
                     f"{f' off={off}' if off else '':7} {name:6} dst = {tmpl:32} {why}")
    lines.append("one-operand ALU:")
    for name, (code, tmpl, why) in UNARY.items():
        lines.append(f"  {code:18} {name:8} dst = {tmpl:44} {why}")
    lines.append("conditional jumps (class 0x05 JMP / 0x06 JMP32):")
    for name, (bits, tmpl, why) in JUMPS.items():
        lines.append(f"  0x{bits | op.JMP:02x}/0x{bits | op.JMP32:02x}  {name:5} if {tmpl:14} {why}")
    lines.append("atomics (0xc3 W / 0xdb DW; imm selects):")
    for imm, (name, tmpl, why) in ATOMICS.items():
        lines.append(f"  imm=0x{imm:03x}  {name:14} {tmpl:26} {why}")
    for title, rows in (("memory:", MEMORY), ("control:", CONTROL)):
        lines.append(title)
        lines.extend(f"  {k:28} {v}" for k, v in rows.items())
    lines.append(LEGEND)
    return "\n".join(lines)
