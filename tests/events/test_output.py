"""The DSL idioms that send events (no kernel needed)."""
from __future__ import annotations

import struct
import types

import pytest

from pyebpf.errors import ProgramError
from pyebpf.isa import opcodes as op
from pyebpf.program import R0, R1, R2, R6, R7, R10, Program
from pyebpf.program.check import check_program
from pyebpf.program.output import BPF_F_CURRENT_CPU, record_layout

PERF = types.SimpleNamespace(name="events", map_type=4)
RING = types.SimpleNamespace(name="ring", map_type=27)
DROPS = types.SimpleNamespace(name="drops", map_type=6, value_size=8, max_entries=2,
                              key_size=4)
HASH = types.SimpleNamespace(name="h", map_type=1, value_size=8)


def helper_calls(p: Program) -> list[int]:
    return [i.imm for i in p.finalize() if i.code == op.OP_CALL]


def test_record_layout_follows_c_rules():
    lay = record_layout([8, 4])
    assert lay.offsets == (0, 8) and lay.size == 16 and lay.format == "<QI4x"
    lay = record_layout(["u8", "u64", "u16"])
    assert lay.offsets == (0, 8, 16) and lay.size == 24
    assert struct.calcsize(lay.format) == lay.size
    lay = record_layout([4, 4, 2])
    assert lay.offsets == (0, 4, 8) and lay.size == 12 and lay.format == "<IIH2x"
    with pytest.raises(ProgramError, match="1, 2, 4 or 8"):
        record_layout([3])
    with pytest.raises(ProgramError, match="at least one"):
        record_layout([])


def test_perf_event_output_loads_current_cpu_zero_extended():
    p = Program()
    p.mov(R6, R1)
    off = p.stack_store(R1, 8)
    p.perf_event_output(PERF, off, 8)
    insns = p.finalize()
    flags = [i for i in insns if i.dst == 3 and i.code & 0x07 in (op.ALU, op.ALU64)
             and i.code & 0xF0 == op.MOV]
    assert len(flags) == 1
    # a 32-bit mov of -1: zero-extended to 0xffffffff == BPF_F_CURRENT_CPU
    assert flags[0].code == op.ALU | op.MOV and flags[0].imm & 0xFFFFFFFF == BPF_F_CURRENT_CPU
    assert helper_calls(p) == [25]
    r5 = [i for i in insns if i.dst == 5][-1]
    assert r5.imm == 8
    check_program(insns, maps={"events": PERF})


def test_perf_event_output_with_ctx_in_r1_and_explicit_cpu():
    p = Program()
    off = p.stack_store(0, 8)
    p.perf_event_output(PERF, off, 8, ctx=R1, cpu=3)
    insns = p.finalize()
    assert not any(i.dst == 1 and i.code == op.ALU64 | op.MOV | op.X for i in insns)
    r3 = [i for i in insns if i.dst == 3][-1]
    assert r3.code == op.ALU64 | op.MOV and r3.imm == 3


@pytest.mark.parametrize("offset,size,msg", [(-8, 16, "inside"), (-8, 0, "1..512"),
                                             (8, 4, "inside"), (-600, 8, "inside"),
                                             (-8, 513, "1..512")])
def test_output_buffer_must_be_on_the_stack(offset, size, msg):
    p = Program()
    with pytest.raises(ProgramError, match=msg):
        p.perf_event_output(PERF, offset, size)
    with pytest.raises(ProgramError, match=msg):
        p.ringbuf_output(RING, offset, size)


def test_wrong_map_kinds_are_named():
    p = Program()
    with pytest.raises(ProgramError, match="PERF_EVENT_ARRAY"):
        p.perf_event_output(RING, -8, 8)
    with pytest.raises(ProgramError, match="RINGBUF"):
        p.ringbuf_output(PERF, -8, 8)
    with pytest.raises(ProgramError, match="PerCpuArrayMap"):
        p.count_drop(HASH)
    with pytest.raises(ProgramError, match="out of range"):
        p.count_drop(DROPS, 2)
    with pytest.raises(ProgramError, match="ctx"):
        p.perf_event_output(PERF, -8, 8, ctx=R10)


def test_ringbuf_output_counts_drops_only_on_failure():
    p = Program()
    off = p.stack_store(R1, 8)
    p.ringbuf_output(RING, off, 8, drops=DROPS, drop_slot=1)
    p.ret(0)
    insns = p.finalize()
    assert helper_calls(p) == [130, 1]           # ringbuf_output, then map_lookup_elem
    call = next(i for i, x in enumerate(insns) if x.code == op.OP_CALL)
    jeq = insns[call + 1]
    assert jeq.code == op.JMP | op.JEQ and jeq.dst == 0 and jeq.imm == 0
    atomics = [i for i in insns if i.code == op.STX | op.ATOMIC | op.DW]
    assert len(atomics) == 1 and atomics[0].imm == op.ATOMIC_ADD
    key = [i for i in insns if i.code == op.ST | op.MEM | op.W and i.dst == 10]
    assert key and key[-1].imm == 1              # the slot index
    check_program(insns, maps={"ring": RING, "drops": DROPS})


def test_output_record_lays_out_fields_and_zeroes_holes():
    p = Program()
    p.mov(R6, R1)
    p.mov(R7, 5)
    base = p.output_record(PERF, [(R7, 1), (R7, 8), (-1, 2), (7, 4)])
    lay = record_layout([1, 8, 2, 4])
    assert lay.size == 24 and lay.offsets == (0, 8, 16, 20)
    insns = p.finalize()
    covered = set()
    for i in insns:
        if i.dst == 10 and i.code & 0x07 in (op.ST, op.STX) and i.code & 0xE0 == op.MEM:
            size = {op.B: 1, op.H: 2, op.W: 4, op.DW: 8}[i.code & 0x18]
            if base <= i.off < base + lay.size:
                covered.update(range(i.off - base, i.off - base + size))
    assert covered == set(range(lay.size))       # fields and padding all written
    r5 = [i for i in insns if i.dst == 5][-1]
    assert r5.imm == 24
    check_program(insns, maps={"events": PERF})


def test_output_record_refuses_bad_fields():
    p = Program()
    with pytest.raises(ProgramError, match="sign-extended"):
        p.output_record(PERF, [(0x80000000, 8)])
    with pytest.raises(ProgramError, match="32 bits"):
        p.output_record(PERF, [(1 << 40, 8)])
    with pytest.raises(ProgramError, match="r10"):
        p.output_record(PERF, [(R10, 8)])
    with pytest.raises(ProgramError, match="register or an int"):
        p.output_record(PERF, [("x", 8)])
    with pytest.raises(ProgramError, match="map kind"):
        p.output_record("by_name", [(R0, 8)])
    p.output_record("by_name", [(R2, 8)], kind="ringbuf")
    assert helper_calls(p) == [130]
