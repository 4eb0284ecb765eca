"""Instruction metadata: each instruction carries its origin and comment, the
disassembler shows them (``dis``-like source lines and a ``-->`` mark), and a
verifier rejection shows the failing instruction in its context."""
from __future__ import annotations

import pytest

from pyebpf.errors import VerifierError
from pyebpf.program import R0, R1, R3, Program
from pyebpf.text import assemble, disassemble, get_instructions
from pyebpf.text.disasm import context

HERE = __file__


def _program() -> Program:
    p = Program("meta")
    p.comment("start")
    p.mov(R0, 1)
    p.ja("out")                  # a jump: finalize copies it, with its comment
    p.comment("skipped")
    p.mov(R0, 2)
    p.label("out")
    p.comment("done")
    p.comment("really")
    p.exit()
    return p


def test_comments_belong_to_the_next_instruction():
    insns = _program().finalize()
    assert [i.comment for i in insns] == ["start", None, "skipped", "done; really"]


def test_comment_before_a_jump_survives_finalize():
    p = Program("j")
    p.comment("leave")
    p.ja("end")
    p.label("end")
    p.exit()
    assert p.finalize()[0].comment == "leave"
    assert p.insns[0].comment == "leave"


def test_a_subprogram_keeps_its_comments():
    p = Program("main")
    p.call_local("f")
    p.exit()
    f = p.subprogram("f")
    f.comment("the function")
    f.mov(R0, 7)
    f.exit()
    assert [i.comment for i in p.finalize()] == [None, None, "the function", None]


def test_records_carry_origin_and_comment():
    recs = get_instructions(_program())
    assert recs[0].comment == "start"
    assert recs[0].origin.startswith(f"{HERE}:")
    assert get_instructions(bytes(_program().encode()))[0].origin is None


def test_disassembly_prints_comments_and_still_assembles():
    p = _program()
    text = disassemble(p)
    assert "r0 = 1  # start" in text and "exit  # done; really" in text
    assert assemble(text).encode() == p.encode()


def test_source_lines_and_mark():
    p = _program()
    lines = disassemble(p, source=True, mark=2, show_index=True).splitlines()
    origins = [line.strip()[2:] for line in lines if line.strip().startswith("# ")]
    assert len(origins) == 4 and all(o.startswith(f"{HERE}:") for o in origins)
    marked = [line for line in lines if line.startswith("-->")]
    assert len(marked) == 1 and "2: r0 = 2" in marked[0], lines


def test_context_marks_the_instruction_with_each_source_line():
    insns = _program().finalize()
    shown = context(insns, 2, before=1, after=1).splitlines()
    assert [line[:3] for line in shown] == ["   ", "-->", "   "]
    assert "r0 = 2" in shown[1] and f"# {HERE}:" in shown[1]
    assert context(insns, 99) == ""


@pytest.mark.kernel
def test_verifier_error_shows_the_failing_instruction_in_context():
    from pyebpf.loader import load
    p = Program("bad")
    p.mov(R0, 1)
    p.mov(R1, 2)
    p.add(R0, R3)                 # R3 was never written
    p.exit()
    with pytest.raises(VerifierError) as info:
        load(p, "socket_filter", check=False)
    exc = info.value
    marked = [line for line in exc.context.splitlines() if line.startswith("-->")]
    assert len(marked) == 1 and "r0 += r3" in marked[0] and f"# {HERE}:" in marked[0]
    assert exc.context.splitlines()[0].strip().startswith("0: r0 = 1")
    assert exc.context in str(exc).replace("\n  ", "\n")
