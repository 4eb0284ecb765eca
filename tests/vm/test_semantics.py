"""The VM's instruction semantics, edge by edge (the kernel's behaviour, kernel/bpf/core.c
and the verifier's rewrites).  Pure: no kernel."""
from __future__ import annotations

import pytest

from pyebpf.text import assemble
from pyebpf.vm import Vm, VmError
from pyebpf.vm import semantics

U64 = (1 << 64) - 1


def run(text: str, mem: bytes | None = None, **kw) -> int:
    return Vm(assemble(text, "llvm"), **kw).run(mem)


def r0_after(setup: str, op: str) -> int:
    return run(f"{setup}\n{op}\nexit")


@pytest.mark.parametrize("text, expected", [
    # division and modulo by zero: 0, and dst unchanged (ALU: zero-extended)
    ("r0 = -5\nr1 = 0\nr0 /= r1", 0),
    ("r0 = -5\nr1 = 0\nr0 %= r1", U64 - 4),
    ("r0 = -5\nr1 = 0\nw0 %= w1", 0xFFFFFFFB),
    ("r0 = -5\nr1 = 0\nw0 /= w1", 0),
    ("r0 = -5\nr1 = 0\nr0 s/= r1", 0),
    ("r0 = -5\nr1 = 0\nr0 s%= r1", U64 - 4),
    ("r0 = -5\nr1 = 0\nw0 s%= w1", 0xFFFFFFFB),
    # signed division truncates toward zero; modulo takes the dividend's sign
    ("r0 = -13\nr0 s/= 3", U64 - 3),
    ("r0 = -13\nr0 s%= 3", U64),
    ("r0 = 13\nr0 s%= -3", 1),
    ("w0 = -13\nw0 s/= 3", 0xFFFFFFFC),
    # MIN / -1 is MIN, MIN % -1 is 0 (the verifier's rewrite)
    ("r0 = 0x8000000000000000 ll\nr0 s/= -1", 1 << 63),
    ("r0 = 0x8000000000000000 ll\nr0 s%= -1", 0),
    ("w0 = 0x80000000\nw0 s/= -1", 0x80000000),
    # ALU32 immediate is 32 bits; ALU64 imm sign-extended then unsigned for div
    ("r0 = -1\nr0 /= -1", 1),
    ("r0 = 10\nr0 /= -1", 0),
    ("w0 = -1\nw0 /= -1", 1),
    # shifts are masked to the width
    ("r0 = 1\nr1 = 68\nr0 <<= r1", 16),
    ("w0 = 1\nw1 = 36\nw0 <<= w1", 16),
    ("r0 = -1\nr1 = 65\nr0 >>= r1", U64 >> 1),
    ("r0 = -16\nr0 s>>= 2", U64 - 3),
    ("w0 = -16\nw0 s>>= 2", 0xFFFFFFFC),
    ("r0 = -16\nw0 >>= 2", 0x3FFFFFFC),
    # 32-bit results are zero-extended
    ("r0 = -1\nw0 += 1", 0),
    ("r0 = -1\nw0 = w0", 0xFFFFFFFF),
    ("r0 = 5\nw0 = -w0", 0xFFFFFFFB),
    ("r0 = 5\nr0 = -r0", U64 - 4),
    ("r0 = 3\nr0 *= -1", U64 - 2),
    # sign-extending moves
    ("r1 = 0x80\nr0 = (s8)r1", U64 - 0x7F),
    ("r1 = 0x8000\nw0 = (s16)w1", 0xFFFF8000),
    ("r1 = 0xffffffff\nr0 = (s32)r1", U64),
    ("r1 = 0x7f\nr0 = (s8)r1", 0x7F),
    # byte swaps
    ("r0 = 0x1122334455667788 ll\nr0 = be16 r0", 0x8877),
    ("r0 = 0x1122334455667788 ll\nr0 = be32 r0", 0x88776655),
    ("r0 = 0x1122334455667788 ll\nr0 = be64 r0", 0x8877665544332211),
    ("r0 = 0x1122334455667788 ll\nr0 = le16 r0", 0x7788),
    ("r0 = 0x1122334455667788 ll\nr0 = le32 r0", 0x55667788),
    ("r0 = 0x1122334455667788 ll\nr0 = le64 r0", 0x1122334455667788),
    ("r0 = 0x1122334455667788 ll\nr0 = bswap16 r0", 0x8877),
    ("r0 = 0x1122334455667788 ll\nr0 = bswap64 r0", 0x8877665544332211),
])
def test_alu(text: str, expected: int) -> None:
    assert run(text + "\nexit") == expected


@pytest.mark.parametrize("cond, taken", [
    ("if r1 > r2", True), ("if r1 s> r2", False), ("if w1 > w2", True), ("if w1 s< w2", True),
    ("if r1 == -1", True), ("if w1 == -1", True), ("if r1 & 0x100", True), ("if w2 & 1", False),
    ("if r1 s<= -1", True), ("if r2 < 2", False), ("if w1 s>= 0", False), ("if r1 != r1", False),
])
def test_conditional_jumps(cond: str, taken: bool) -> None:
    text = f"r1 = -1\nr2 = 2\nr0 = 0\n{cond} goto yes\nexit\nyes:\nr0 = 1\nexit"
    assert run(text) == int(taken)


def test_jmp32_compares_low_bits_only() -> None:
    text = "r1 = 0x100000005 ll\nr0 = 0\nif w1 == 5 goto +1\nexit\nr0 = 1\nexit"
    assert run(text) == 1
    assert run(text.replace("w1 == 5", "r1 == 5")) == 0


def test_atomics() -> None:
    text = """
        r1 = 10
        *(u64 *)(r10 - 8) = r1
        r2 = 5
        lock *(u64 *)(r10 - 8) += r2
        r3 = 1
        r3 = atomic_fetch_or((u64 *)(r10 - 8), r3)
        r4 = 0xff
        r4 = xchg_64(r10 - 8, r4)
        r0 = 0xff
        r5 = 7
        r0 = cmpxchg_64(r10 - 8, r0, r5)
        r6 = *(u64 *)(r10 - 8)
        r0 <<= 8
        r0 |= r6
        r0 <<= 8
        r0 |= r4
        r0 <<= 8
        r0 |= r3
        exit"""
    # fetch_or saw 15, xchg saw 15|1, cmpxchg saw 0xff (equal: stores 7)
    assert run(text) == (0xFF << 24) | (7 << 16) | (15 << 8) | 15


def test_cmpxchg_mismatch_and_32_bit_atomics() -> None:
    text = """
        r1 = -1
        *(u64 *)(r10 - 8) = r1
        w0 = 3
        w2 = 9
        w0 = cmpxchg32_32(r10 - 8, w0, w2)
        r3 = *(u64 *)(r10 - 8)
        exit"""
    assert run(text) == 0xFFFFFFFF      # old value, zero-extended; memory unchanged
    text2 = """
        r1 = -1
        *(u64 *)(r10 - 8) = r1
        w2 = 1
        lock *(u32 *)(r10 - 8) += w2
        r0 = *(u64 *)(r10 - 8)
        exit"""
    assert run(text2) == 0xFFFFFFFF00000000


def test_load_acquire_store_release() -> None:
    text = """
        r7 = 0x1234
        store_release((u16 *)(r10 - 8), w7)
        r0 = load_acquire((u64 *)(r10 - 8))
        exit"""
    assert run(text) == 0x1234


def test_sign_extending_loads() -> None:
    text = "r0 = *(s8 *)(r1 + 0)\nr2 = *(s16 *)(r1 + 0)\nr3 = *(s32 *)(r1 + 0)\nr0 ^= r2\nr0 ^= r3\nexit"
    mem = bytes([0x80, 0x80, 0x00, 0x80])
    s8 = U64 - 0x7F
    s16 = U64 - 0x7F7F
    s32 = (0x80008080 - (1 << 32)) & U64
    assert run(text, mem) == s8 ^ s16 ^ s32


def test_gotol_and_ja() -> None:
    assert run("r0 = 1\ngotol +1\nr0 = 2\nexit") == 1
    assert run("r0 = 1\ngoto +1\nr0 = 2\nexit") == 1


def test_may_goto_falls_through_until_the_budget_is_spent() -> None:
    text = "r0 = 0\nloop:\nmay_goto out\nr0 += 1\ngoto loop\nout:\nexit"
    vm = Vm(assemble(text))
    vm.may_goto_budget = 1000
    assert vm.run() == 1000
    from pyebpf.vm.machine import MAY_GOTO_BUDGET
    assert Vm(assemble(text)).may_goto_budget == MAY_GOTO_BUDGET == 8 << 20


def test_local_calls_restore_callee_saved_registers() -> None:
    text = """
        r6 = 100
        r1 = 5
        call f
        r0 += r6
        exit
    f:
        r6 = 1
        r0 = r1
        r0 *= 3
        *(u64 *)(r10 - 8) = r0
        r0 = *(u64 *)(r10 - 8)
        exit"""
    assert run(text) == 115


def test_callx_of_a_function_address_and_gotox() -> None:
    text = "r1 = func(f) ll\ncallx r1\nexit\nf:\nr0 = 42\nexit"
    assert run(text) == 42
    text = "r1 = func(there) ll\nr0 = 1\ngotox r1\nr0 = 2\nthere:\nexit"
    assert run(text) == 1


def test_legacy_packet_loads_are_big_endian_and_abort_out_of_range() -> None:
    pkt = bytes(range(16))
    assert Vm(assemble("r0 = *(u16 *)skb[2]\nexit")).run(ctx=b"", packet=pkt) == 0x0203
    assert Vm(assemble("r8 = 4\nr0 = *(u32 *)skb[r8 + 1]\nexit")).run(ctx=b"", packet=pkt) == 0x05060708
    # out of the packet: the program ends at once with r0 = 0
    assert Vm(assemble("r0 = 7\nr0 = *(u32 *)skb[14]\nr0 = 9\nexit")).run(ctx=b"", packet=pkt) == 0


def test_the_table_is_what_runs() -> None:
    # every ALU row is exercised by the translation, and the table prints
    text = semantics.table()
    for name in semantics.ALU:
        assert f" {name} " in text
    assert semantics.sdiv(-7, 2) == -3 and semantics.smod(-7, 2) == -1
    assert semantics.smod(5, 0) == 5 and semantics.sdiv(5, 0) == 0


def test_invalid_instruction_stops_the_run_at_it() -> None:
    from pyebpf.isa import Insn
    prog = [Insn(0xB7, 0, 0, 0, 3), Insn(0xFF), Insn(0x95)]
    with pytest.raises(VmError, match=r"insn 1.*invalid instruction"):
        Vm(prog).run()
    # an invalid instruction that is never reached does not matter
    assert Vm([Insn(0xB7, 0, 0, 0, 3), Insn(0x95), Insn(0xFF)]).run() == 3
