import inspect

import pytest

from pyebpf.errors import ProgramError
from pyebpf.isa import decode, opcodes as op
from pyebpf.program import R0, R1, R2, R3, R6, R10, W1, W2, Program
from pyebpf.program.check import check_program


def here(delta=0):
    frame = inspect.currentframe().f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno + delta}"


def test_chaining_and_bytes():
    p = Program("answer")
    p.mov(R0, 42).exit()
    assert p.encode().hex() == "b70000002a000000" + "9500000000000000"


def test_widths_select_class():
    p = Program()
    p.add(W1, W2).add(R1, R2).jeq(W1, 3, 0).jeq(R1, 3, 0)
    codes = [i.code for i in p.finalize()]
    assert codes == [op.ALU | op.ADD | op.X, op.ALU64 | op.ADD | op.X, op.JMP32 | op.JEQ, op.JMP | op.JEQ]
    with pytest.raises(ProgramError, match="mixed widths"):
        p.add(W1, R2)


def test_labels_forward_backward_and_ld_imm64_slots():
    p = Program()
    p.mov(R0, 0)
    p.label("top")
    p.lddw(R1, 1 << 40)           # two slots
    p.jgt(R0, 5, "out")           # forward over add+ja
    p.add(R0, 1).ja("top")        # backward over jgt, lddw (2 slots)
    p.label("out")
    p.exit()
    insns = p.finalize()
    assert insns[2].off == 2
    assert insns[4].off == -5
    assert decode(p.encode())[2].off == 2


def test_origin_is_the_callers_line():
    p = Program()
    p.mov(R0, 1); line = here()
    assert p.insns[0].origin == line


def test_undefined_label_names_line():
    p = Program()
    p.ja("nowhere"); line = here()
    with pytest.raises(ProgramError) as exc:
        p.encode()
    assert line in str(exc.value) and "nowhere" in str(exc.value)


def test_jump_too_far():
    p = Program()
    p.ja("far")
    for _ in range(40000):
        p.mov(R0, 0)
    p.label("far")
    p.exit()
    with pytest.raises(ProgramError, match="gotol"):
        p.encode()
    q = Program()
    q.gotol("far")
    for _ in range(40000):
        q.mov(R0, 0)
    q.label("far")
    q.exit()
    assert q.finalize()[0].imm == 40000


def test_duplicate_label():
    p = Program()
    p.label("a")
    with pytest.raises(ProgramError, match="already defined"):
        p.label("a")


def test_subprogram_calls():
    p = Program()
    p.call_local("double").exit()
    f = p.subprogram("double")
    f.mov(R0, R1).add(R0, R1).exit()
    insns = p.finalize()
    assert insns[0].src == op.CALL_LOCAL and insns[0].imm == 1
    assert len(insns) == 5


def test_stack_frame_limit():
    p = Program()
    assert p.stack.alloc(500) == -504  # rounded up to 8
    line = here(2)
    with pytest.raises(ProgramError, match="over the kernel's limit of 512") as exc:
        p.stack.alloc(16)
    assert exc.value.origin == line


def test_helper_by_name_and_unknown():
    p = Program()
    p.call("bpf_ktime_get_ns").call("map_lookup_elem")
    assert [i.imm for i in p.insns] == [5, 1]
    with pytest.raises(ProgramError, match="did you mean"):
        p.call("ktime_get_nss")


def test_immediate_range():
    with pytest.raises(ProgramError, match="lddw"):
        Program().mov(R0, 1 << 40)


class FakeMap:  # a stand-in with the sizes the checker needs (not a kernel mock)
    def __init__(self, name, key_size, value_size):
        self.name, self.key_size, self.value_size = name, key_size, value_size


def check(p, **kw):
    check_program(p.finalize(), license=p.license, maps=p.maps, **kw)


def test_checker_uninitialised_key():
    m = FakeMap("m", 8, 8)
    p = Program()
    p.stw(R10, -8, 0)           # only 4 of the 8 key bytes
    p.ld_map(R1, m)
    p.stack_pointer(R2, -8)
    p.call("map_lookup_elem"); line = here()
    p.ret(0)
    with pytest.raises(ProgramError, match="byte r10 -4 is never written") as exc:
        check(p)
    assert exc.value.origin == line


def test_checker_map_argument_and_null_deref():
    p = Program()
    p.mov(R1, 5)
    p.stack_pointer(R2, -8)
    p.call("map_lookup_elem"); line = here()
    p.ret(0)
    with pytest.raises(ProgramError, match="must be a map") as exc:
        check(p)
    assert exc.value.origin == line
    q = Program()
    k = q.stack_store(1, 8)
    q.ld_map(R1, "m").stack_pointer(R2, k).call("map_lookup_elem")
    q.ldxdw(R0, R0, 0); line = here()
    q.exit()
    with pytest.raises(ProgramError, match="may be NULL") as exc:
        check(q)
    assert exc.value.origin == line


def test_checker_gpl_and_uninit_register():
    p = Program(license="MIT")
    p.mov(R6, R1)
    p.stack_zero(8)
    p.stack_pointer(R1, -8).mov(R2, 8).mov(R3, 0)
    p.call("probe_read_user"); line = here()
    p.ret(0)
    with pytest.raises(ProgramError, match="GPL-only") as exc:
        check(p)
    assert exc.value.origin == line
    q = Program()
    q.add(R2, 1); line = here()
    q.ret(0)
    with pytest.raises(ProgramError, match="r2, which is never written") as exc:
        check(q)
    assert exc.value.origin == line


def test_idioms_pass_the_checker():
    m = FakeMap("counts", 4, 8)
    p = Program()
    k = p.stack_store(7, 4)
    p.map_increment(m, k)
    with p.bounded_loop(R6, 4):
        p.add(R0, 1) if False else p.mov(R0, 0)
    p.probe_read_user(R6, 16)
    p.ret(0)
    check(p)


def test_checker_counts_helper_output_as_initialised():
    m = FakeMap("m", 16, 8)
    p = Program()
    p.mov(R6, R1)
    buf = p.probe_read_user(R6, 16)      # the helper writes the 16 bytes
    p.ld_map(R1, m).stack_pointer(R2, buf).call("map_lookup_elem")
    p.ret(0)
    check(p)


def test_drop_unreachable_removes_dead_code_and_moves_labels_and_comments():
    p = Program()
    p.mov(R0, 0)
    p.ja("over")
    p.comment("dead line")
    p.mov(R0, 1)                   # unreachable: both ways around it jump
    p.label("dead")
    p.add(R0, 2)                   # unreachable too (nothing jumps to "dead")
    p.label("over")
    p.jeq(R0, 0, "out")
    p.mov(R0, 3)
    p.label("out")
    p.exit()
    assert p.drop_unreachable() == 2
    assert p.labels == {"dead": 2, "over": 2, "out": 4}
    insns = p.finalize()
    assert [i.code for i in insns][:3] == [op.ALU64 | op.MOV | op.K, op.OP_JA,
                                           op.JMP | op.JEQ | op.K]
    assert insns[1].off == 0 and insns[2].off == 1
    assert insns[2].comment == "dead line"
    assert p.drop_unreachable() == 0


def test_drop_unreachable_leaves_a_body_with_raw_offsets_alone():
    p = Program()
    p.mov(R0, 0).ja(1).mov(R0, 1).exit()
    assert p.drop_unreachable() == 0 and len(p.insns) == 4
