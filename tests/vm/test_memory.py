"""Checked memory: every bad access stops the run with a VmError naming the
instruction, its text and the line that wrote it -- never a Python exception."""
from __future__ import annotations

import pytest

from pyebpf.errors import PyebpfError
from pyebpf.program import R0, R1, R2, R10, Program
from pyebpf.text import assemble
from pyebpf.vm import Vm, VmError


def fails(text: str, mem: bytes | None = None, **kw) -> VmError:
    with pytest.raises(VmError) as info:
        Vm(assemble(text, "llvm", "prog.s"), **kw).run(mem)
    return info.value


@pytest.mark.parametrize("text, words", [
    ("r0 = *(u64 *)(r10 + 0)", "out of bounds"),                 # just above the stack
    ("r0 = *(u8 *)(r10 - 513)", "out of bounds"),                # just below
    ("r0 = *(u32 *)(r10 - 6)", "misaligned load"),               # the verifier's strict stack
    ("*(u64 *)(r10 - 4) = r1", "out of bounds"),
    ("*(u16 *)(r10 - 3) = 1", "misaligned store"),
    ("r1 = 0\nr0 = *(u32 *)(r1 + 0)", "null"),
    ("r1 = 12345\nr0 = *(u8 *)(r1 + 0)", "null or scalar"),
    ("r1 = 0x7777777700000000 ll\nr0 = *(u8 *)(r1 + 0)", "not a pointer the VM made"),
    ("r0 = *(u32 *)(r1 + 2)", "out of bounds"),                  # mem is 4 bytes
    ("r2 = 1\nlock *(u64 *)(r1 + 0) += r2", "atomic"),
])
def test_bad_accesses(text: str, words: str) -> None:
    err = fails(text + "\nexit", b"abcd")
    assert words in str(err)
    assert isinstance(err, PyebpfError) and err.index is not None
    assert err.origin and err.origin.startswith("prog.s:")
    assert err.text                                     # the instruction as text


def test_error_names_the_index_text_and_line() -> None:
    err = fails("r0 = 0\nr0 = *(u64 *)(r10 + 8)\nexit")
    assert err.index == 1
    assert err.text == "r0 = *(u64 *)(r10 + 8)"
    assert err.origin == "prog.s:2"
    assert str(err).startswith("prog.s:2: insn 1 (r0 = *(u64 *)(r10 + 8)):")
    assert "offset 520 in the stack of frame 0" in str(err)


def test_error_names_the_python_line_of_a_dsl_program() -> None:
    p = Program("t")
    p.mov(R0, 0)
    p.ldxdw(R0, R10, 16); line = __import__("inspect").currentframe().f_lineno  # noqa: E702
    p.exit()
    with pytest.raises(VmError) as info:
        Vm(p).run()
    assert info.value.origin == f"{__file__}:{line}"


def test_unaligned_context_access_is_allowed_unless_strict() -> None:
    text = "r0 = *(u32 *)(r1 + 1)\nexit"
    assert Vm(assemble(text)).run(b"\x00\x01\x02\x03\x04") == 0x04030201
    with pytest.raises(VmError, match="misaligned"):
        Vm(assemble(text), strict_alignment=True).run(b"\x00\x01\x02\x03\x04")


def test_a_callee_stack_pointer_dies_with_its_frame() -> None:
    text = """
        call f
        r0 = *(u64 *)(r0 + 0)
        exit
    f:
        r0 = r10
        r0 += -8
        exit"""
    err = fails(text)
    assert err.index == 1
    assert "the stack of frame 1, which is gone" in str(err)


def test_each_frame_has_its_own_stack() -> None:
    text = """
        r1 = 7
        *(u64 *)(r10 - 8) = r1
        call f
        r0 = *(u64 *)(r10 - 8)
        exit
    f:
        r1 = 9
        *(u64 *)(r10 - 8) = r1
        exit"""
    vm = Vm(assemble(text))
    assert vm.run() == 7


def test_call_depth_is_limited() -> None:
    err = fails("call f\nexit\nf:\ncall f\nexit")
    assert "call depth" in str(err) and err.index == 2


def test_endless_loop_stops_at_max_steps() -> None:
    err = fails("loop:\ngoto loop", max_steps=1000)
    assert "stopped after 1000 instructions" in str(err)


def test_jump_out_of_the_program_and_falling_off_the_end() -> None:
    from pyebpf.isa import Insn
    with pytest.raises(VmError, match="outside the program"):
        Vm([Insn(0x05, off=5), Insn(0x95)]).run()
    with pytest.raises(VmError, match="outside the program"):
        Vm([Insn(0xB7, 0, 0, 0, 1)]).run()
    with pytest.raises(VmError, match="empty"):
        Vm([]).run()


def test_stack_and_context_after_a_run() -> None:
    p = Program("t")
    p.mov(R2, 0x41)
    p.stxb(R10, -1, R2)
    p.stxb(R1, 0, R2)
    p.mov(R0, 0)
    p.exit()
    vm = Vm(p)
    vm.run(b"xy")
    assert vm.stack()[-1] == 0x41 and vm.stack()[:-1] == bytes(511)
    assert vm.region(vm.CTX) == b"Ay"


def test_runs_are_independent() -> None:
    vm = Vm(assemble("r0 = *(u64 *)(r10 - 8)\nr1 = 5\n*(u64 *)(r10 - 8) = r1\nexit"))
    assert vm.run() == 0
    assert vm.run() == 0          # a fresh stack each run


def test_trace_reports_registers_and_writes() -> None:
    steps = []
    vm = Vm(assemble("r1 = 3\n*(u32 *)(r10 - 4) = w1\nr0 = r1\nexit"))
    assert vm.run(trace=steps.append) == 3
    assert [s.index for s in steps] == [0, 1, 2, 3]
    assert steps[0].regs == {1: 3}
    assert steps[1].regs == {} and len(steps[1].writes) == 1
    addr, size, value = steps[1].writes[0]
    assert (size, value) == (4, 3) and vm.memory.short(addr) == "stack0[508]"
    assert vm.steps == 4


def test_a_call_or_code_address_outside_the_program() -> None:
    from pyebpf.isa import Insn, opcodes as op
    for trace in (None, lambda step: None):
        with pytest.raises(VmError, match="insn 0.*outside the program"):
            Vm([Insn(op.OP_CALL, 0, 1, 0, 1), Insn(op.OP_EXIT)]).run(trace=trace)
        bad = [Insn(op.OP_LD_IMM64, 1, 0, 0, 100, CODE_HIGH), Insn(op.OP_CALLX, 1), Insn(op.OP_EXIT)]
        with pytest.raises(VmError, match="insn 2.*not the address of a function"):
            Vm(bad).run(trace=trace)


CODE_HIGH = __import__("pyebpf.vm.memory", fromlist=["CODE"]).CODE  # code, slot 100: none
