"""Differential testing: the VM against the kernel.

Hypothesis writes verifier-safe random programs -- every ALU/ALU32 form
(division and modulo by registers that may be zero, signed forms, shifts,
sign-extending moves, byte swaps), loads, stores, sign-extending loads and
atomics on an initialised stack area, JMP/JMP32 forward branches, a
bounded loop, and map operations (array lookups with atomic adds and stores
through the pointer; hash updates, deletes and lookups).  Each program runs in the kernel (XDP, ``BPF_PROG_TEST_RUN``)
and in the VM; an epilogue copies ``r0``, every register and the stack area
into an array map through a direct value address, so the two runs' map
contents -- that map's, the array's and the hash's -- must be equal.

CI runs 100 programs (~85 instructions each); a long campaign -- 100,000
programs, ~8.5 million emulated instructions, about 15 minutes -- is::

    PYEBPF_FUZZ_SCALE=1000 PYEBPF_REQUIRE_KERNEL=1 python -m pytest tests/vm/test_differential.py
"""
from __future__ import annotations

import pytest
from budget import fuzz_settings
from hypothesis import HealthCheck, given, note, strategies as st

from pyebpf.codecs import Bytes
from pyebpf.isa import Insn, opcodes as op
from pyebpf.program import R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10, Program
from pyebpf.text import disassemble
from pyebpf.vm import Vm

pytestmark = pytest.mark.kernel

AREA = 64                    # bytes of stack the program uses: r10-64 .. r10-1
NREGS = 10                   # r0..r9 are saved
VALUE = 8 * NREGS + AREA
LOOP_REG = 9                 # the loop counter (r9); the body never writes it
REGS = [R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10]

_ALU = ["add", "sub", "mul", "div", "sdiv", "or", "and", "lsh", "rsh", "mod", "smod", "xor",
        "mov", "arsh"]
_SHIFTS = {"lsh", "rsh", "arsh"}
_ATOMIC_IMMS = [op.ATOMIC_ADD, op.ATOMIC_OR, op.ATOMIC_AND, op.ATOMIC_XOR,
                op.ATOMIC_ADD | op.FETCH, op.ATOMIC_OR | op.FETCH, op.ATOMIC_AND | op.FETCH,
                op.ATOMIC_XOR | op.FETCH, op.XCHG, op.CMPXCHG]

dst_reg = st.integers(0, 8)
any_reg = st.integers(0, 9)
imm32 = st.one_of(st.integers(-(1 << 31), (1 << 31) - 1), st.sampled_from([0, 1, -1, 2, 31, 63]))


@st.composite
def alu(draw) -> Insn:
    is64 = draw(st.booleans())
    cls = op.ALU64 if is64 else op.ALU
    kind = draw(st.sampled_from(["bin"] * 8 + ["neg", "movsx", "end"]))
    dst = draw(dst_reg)
    if kind == "neg":
        return Insn(op.NEG | cls, dst)
    if kind == "movsx":
        size = draw(st.sampled_from([8, 16, 32] if is64 else [8, 16]))
        return Insn(op.MOV | op.X | cls, dst, draw(any_reg), size)
    if kind == "end":
        width = draw(st.sampled_from([16, 32, 64]))
        if is64:
            return Insn(op.END | op.ALU64, dst, 0, 0, width)
        return Insn(op.END | draw(st.sampled_from([op.TO_LE, op.TO_BE])) | op.ALU, dst, 0, 0, width)
    name = draw(st.sampled_from(_ALU))
    base = op.ALU_OPS[name.lstrip("s")] if name in ("sdiv", "smod") else op.ALU_OPS[name]
    off = 1 if name in ("sdiv", "smod") else 0
    if draw(st.booleans()):
        return Insn(base | op.X | cls, dst, draw(any_reg), off)
    if name in _SHIFTS:
        imm = draw(st.integers(0, 63 if is64 else 31))
    elif name in ("div", "sdiv", "mod", "smod"):      # the verifier refuses a constant 0
        imm = draw(imm32.filter(bool))
    else:
        imm = draw(imm32)
    return Insn(base | op.K | cls, dst, 0, off, imm)


@st.composite
def memory(draw) -> Insn:
    size = draw(st.sampled_from([1, 2, 4, 8]))
    off = -draw(st.integers(1, AREA // size)) * size
    sz = op.BYTES_SIZE[size]
    kind = draw(st.sampled_from(["ldx", "ldxs", "st", "stx", "atomic"]))
    if kind == "ldxs" and size != 8:
        return Insn(op.MEMSX | sz | op.LDX, draw(dst_reg), 10, off)
    if kind in ("ldx", "ldxs"):
        return Insn(op.MEM | sz | op.LDX, draw(dst_reg), 10, off)
    if kind == "st":
        return Insn(op.MEM | sz | op.ST, 10, 0, off, draw(imm32))
    if kind == "stx" or size < 4:
        return Insn(op.MEM | sz | op.STX, 10, draw(any_reg), off)
    imm = draw(st.sampled_from(_ATOMIC_IMMS))
    # a fetch writes its source register: keep the loop counter out of it
    src = draw(dst_reg) if imm & op.FETCH else draw(any_reg)
    return Insn(op.ATOMIC | sz | op.STX, 10, src, off, imm)


@st.composite
def jump(draw) -> tuple[Insn, int]:
    """A forward conditional jump and how many items ahead it lands (1 = the next)."""
    cls = draw(st.sampled_from([op.JMP, op.JMP32]))
    name = draw(st.sampled_from(op.COND_JUMPS))
    code = op.JMP_OPS[name] | cls
    ahead = draw(st.integers(1, 6))
    if draw(st.booleans()):
        return Insn(code | op.X, draw(any_reg), draw(any_reg)), ahead
    return Insn(code, draw(any_reg), 0, 0, draw(imm32)), ahead


#: register values: any, and often the edges (zero divisors, MIN / -1, 32-bit boundaries)
reg_value = st.one_of(st.integers(0, (1 << 64) - 1),
                      st.sampled_from([0, 0, 1, 2, 7, (1 << 64) - 1, 1 << 63, 0xFFFFFFFF,
                                       0x80000000, 0x7FFFFFFF, 0xFFFFFFFF80000000]))
#: a register set to an edge value (makes zero divisors and MIN / -1 common)
edge = st.builds(lambda dst, imm, is64: Insn(op.MOV | op.K | (op.ALU64 if is64 else op.ALU), dst,
                                            0, 0, imm),
                 dst_reg, st.sampled_from([0, 0, 1, -1, -(1 << 31)]), st.booleans())
KEY = -AREA - 24             # the map key's stack slot (below the epilogue's spare slots)


def map_sequence(which: str, key: int, value_slot: int = 1, flags: int = 0,
                 use: Insn | None = None, resets: tuple[int, ...] = (1, 2, 3, 4, 5)) -> list[Insn]:
    """A map operation as the verifier wants it: a key on the stack, the call,
    a NULL check, and r1-r5 (which a call leaves unreadable) set again.

    ``lookup``: ``data`` (array, 4 x u64), then ``use`` through the pointer
    (an atomic add or a store; the value is then loaded into r0); on
    ``table`` (hash, 2 entries): ``update`` (the value: the 8 bytes at
    ``r10 - 8 * value_slot``; a full table gives -E2BIG), ``delete``,
    ``lookup_hash``."""
    out = [Insn(op.MEM | op.W | op.ST, 10, 0, KEY, key)]
    name = "data" if which == "lookup" else "table"
    out.append(Insn(op.OP_LD_IMM64, 1, op.PSEUDO_MAP_FD, 0, 0, 0, map_ref=name))
    out += [Insn(op.MOV | op.X | op.ALU64, 2, 10), Insn(op.ADD | op.K | op.ALU64, 2, 0, 0, KEY)]
    if which == "update":
        out += [Insn(op.MOV | op.X | op.ALU64, 3, 10),
                Insn(op.ADD | op.K | op.ALU64, 3, 0, 0, -8 * value_slot),
                Insn(op.MOV | op.K | op.ALU64, 4, 0, 0, flags), Insn(op.OP_CALL, 0, 0, 0, 2)]
    elif which == "delete":
        out.append(Insn(op.OP_CALL, 0, 0, 0, 3))
    else:
        use = use or Insn(op.ATOMIC | op.DW | op.STX, 0, 6, 0, op.ATOMIC_ADD)
        out += [Insn(op.OP_CALL, 0, 0, 0, 1), Insn(op.JEQ | op.K | op.JMP, 0, 0, 2, 0), use,
                Insn(op.MEM | op.DW | op.LDX, 0, 0, 0)]
    out += [Insn(op.MOV | op.K | op.ALU64, n, 0, 0, value) for n, value in zip(range(1, 6), resets)]
    return out


@st.composite
def map_op(draw) -> list[Insn]:
    """A random :func:`map_sequence`."""
    which = draw(st.sampled_from(["lookup", "update", "update", "delete", "lookup_hash"]))
    key = draw(st.integers(0, 5 if which == "lookup" else 3))
    use = (Insn(op.ATOMIC | op.DW | op.STX, 0, draw(st.integers(6, 8)), 0, op.ATOMIC_ADD)
           if draw(st.booleans()) else Insn(op.MEM | op.DW | op.ST, 0, 0, 0, draw(imm32)))
    return map_sequence(which, key, draw(st.integers(1, AREA // 8)),
                        draw(st.sampled_from([0, 0, 1, 2])), use,
                        tuple(draw(imm32) for _ in range(5)))


item = st.one_of(alu().map(lambda i: (i, 0)), alu().map(lambda i: (i, 0)),
                 edge.map(lambda i: (i, 0)),
                 memory().map(lambda i: (i, 0)), jump(), map_op().map(lambda seq: (seq, 0)))


def build(regs: list[int], area: bytes, body: list[tuple[Insn | list[Insn], int]],
          loops: int) -> Program:
    """The program: registers and stack area set, ``body`` run ``loops`` times
    (items are (instruction, how many items ahead it jumps or 0)), then the
    epilogue that copies r0..r9 and the area into map ``result``."""
    p = Program("diff", license="GPL")
    for n, value in enumerate(regs):
        p.lddw(REGS[n], value)
    for i in range(0, AREA, 8):
        p.lddw(R0, int.from_bytes(area[i:i + 8], "little"))
        p.stxdw(R10, i - AREA, R0)
    p.lddw(R0, regs[0])
    p.mov(R9, loops)
    p.label("top")
    targets = {i + ahead for i, (_, ahead) in enumerate(body) if ahead}
    for i, (insn, ahead) in enumerate(body):
        if i in targets:
            p.label(f"L{i}")
        if isinstance(insn, list):               # a sequence (its jumps are inside it)
            for one in insn:
                p.append(one.copy())
            continue
        insn = insn.copy()
        if ahead:
            insn.target = f"L{i + ahead}" if i + ahead < len(body) else "bottom"
        p.append(insn)
    p.label("bottom")
    p.sub(R9, 1)
    p.jne(R9, 0, "top")
    p.stxdw(R10, -AREA - 8, R1)                   # r1 and r2 to spare slots: the epilogue
    p.stxdw(R10, -AREA - 16, R2)                  # needs them for the map pointer and copies
    p.append(Insn(op.OP_LD_IMM64, 1, op.PSEUDO_MAP_VALUE, 0, 0, 0, map_ref="result"))
    for n in range(NREGS):
        if n in (1, 2):
            p.ldxdw(R2, R10, -AREA - 8 * n)
            p.stxdw(R1, 8 * n, R2)
        else:
            p.stxdw(R1, 8 * n, REGS[n])
    for i in range(0, AREA, 8):
        p.ldxdw(R2, R10, i - AREA)
        p.stxdw(R1, 8 * NREGS + i, R2)
    p.mov(R0, 2)                                  # XDP_PASS
    p.exit()
    return p


@st.composite
def programs(draw) -> Program:
    regs = draw(st.lists(reg_value, min_size=NREGS, max_size=NREGS))
    area = draw(st.binary(min_size=AREA, max_size=AREA))
    body = draw(st.lists(item, min_size=1, max_size=30))
    return build(regs, area, body, draw(st.integers(1, 3)))


def compare(prog: Program) -> None:
    """Run ``prog`` in the kernel and in the VM; their result maps must be equal."""
    from pyebpf.errors import VerifierError
    from pyebpf.loader import load
    from pyebpf.maps import ArrayMap, HashMap

    with ArrayMap(Bytes(VALUE), 1, name="result") as result, \
            ArrayMap("u64", 4, name="data") as data, HashMap("u32", "u64", 2, name="table") as table:
        maps = {"result": result, "data": data, "table": table}
        try:
            with load(prog, "xdp", maps=maps, check=False) as loaded:
                loaded.test_run(bytes(64))
        except VerifierError as exc:     # the generator's promise is that this never happens
            pytest.fail(f"the kernel refused a generated program: {exc.message}")
        kernel = bytes(result[0])
        vm = Vm(prog, maps)                      # the same map objects describe the VM's maps
        vm.run(ctx=bytes(64))
        assert vm.maps["result"][0] == kernel, _diff(kernel, vm.maps["result"][0])
        assert [vm.maps["data"][i] for i in range(4)] == [data[i] for i in range(4)]
        assert dict(vm.maps["table"].items()) == dict(table.items())


@fuzz_settings(100, suppress_health_check=list(HealthCheck))
@given(programs())
def test_vm_agrees_with_the_kernel(prog: Program) -> None:
    note(disassemble(prog.encode()))
    compare(prog)


def _alu(name: str, is64: bool, dst: int, src: int) -> tuple[Insn, int]:
    base = op.ALU_OPS[name.lstrip("s")] if name in ("sdiv", "smod") else op.ALU_OPS[name]
    cls = op.ALU64 if is64 else op.ALU
    return Insn(base | op.X | cls, dst, src, 1 if name in ("sdiv", "smod") else 0), 0


@pytest.mark.parametrize("name", ["div", "mod", "sdiv", "smod"])
@pytest.mark.parametrize("is64", [True, False])
def test_edges_agree(name: str, is64: bool) -> None:
    # by zero, and MIN by -1, in both widths, with a dst whose high half is set
    regs = [0x1234_5678_9ABC_DEF0, 0, 1 << 63, (1 << 64) - 1, 0x80000000, (1 << 64) - 1, 7, 0, 0, 0]
    body = [_alu(name, is64, 0, 1), _alu(name, is64, 2, 3), _alu(name, is64, 4, 5),
            _alu(name, is64, 6, 7)]
    compare(build(regs, bytes(range(AREA)), body, 1))


def _diff(kernel: bytes, vm: bytes) -> str:
    out = []
    for n in range(NREGS):
        k, v = kernel[8 * n:8 * n + 8], vm[8 * n:8 * n + 8]
        if k != v:
            out.append(f"r{n}: kernel 0x{int.from_bytes(k, 'little'):x}, "
                       f"vm 0x{int.from_bytes(v, 'little'):x}")
    for i in range(8 * NREGS, VALUE, 8):
        if kernel[i:i + 8] != vm[i:i + 8]:
            out.append(f"stack r10{i - 8 * NREGS - AREA:+d}: kernel {kernel[i:i + 8].hex()}, "
                       f"vm {vm[i:i + 8].hex()}")
    return "; ".join(out)



def test_map_edges_agree() -> None:
    # three keys into a 2-entry hash (the third: -E2BIG), NOEXIST on an existing key, EXIST on
    # a missing one, a delete, lookups in and out of the array, atomic adds through pointers;
    # every call's r0 is folded into r7, which the comparison covers
    ops = [("update", 0, 0), ("update", 1, 0), ("update", 2, 0), ("update", 1, 1),
           ("update", 3, 2), ("delete", 0, 0), ("update", 2, 0), ("lookup_hash", 2, 0),
           ("lookup", 1, 0), ("lookup", 1, 0), ("lookup", 4, 0)]
    body: list[tuple[Insn | list[Insn], int]] = []
    for which, key, flags in ops:
        body.append((map_sequence(which, key, value_slot=8, flags=flags), 0))
        body.append((Insn(op.MUL | op.K | op.ALU64, 7, 0, 0, 31), 0))
        body.append((Insn(op.ADD | op.X | op.ALU64, 7, 0), 0))
    regs = [0, 0, 0, 0, 0, 0, 5, 0, 0, 0]
    compare(build(regs, bytes(range(AREA)), body, 1))
