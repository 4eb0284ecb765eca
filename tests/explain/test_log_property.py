"""Property tests of the verifier-log parser over logs the kernel wrote for
random programs (branches on an unknown value, constants, stack traffic,
sometimes a forbidden access), and over arbitrary text."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, strategies as st

from budget import fuzz_settings
from pyebpf.explain import explain, parse_log, split_state
from pyebpf.isa import is_jump, jump_offset
from pyebpf.text import assemble

INSN_LINE = re.compile(r"^\d+: \([0-9a-f]{2}\) ", re.M)
OPS = ["r3 += {n}", "r3 ^= {n}", "r4 = r3", "r4 += r2", "r3 &= {n}", "r3 = r2",
       "*(u64 *)(r10 - 8) = r3", "r3 = *(u64 *)(r10 - 8)", "w3 = w2", "r3 >>= {s}"]


@st.composite
def programs(draw):
    """A program whose every conditional jump goes forward, which may end
    with an access the verifier refuses."""
    body = ["r2 = *(u32 *)(r1 + 0)", "r3 = 0", "r4 = 0", "*(u64 *)(r10 - 8) = r3"]
    n = draw(st.integers(1, 14))
    for i in range(n):
        if draw(st.booleans()):
            skip = draw(st.integers(0, n - i))
            cmp = draw(st.sampled_from([">", "<", "==", "!=", "s>", "&"]))
            body.append(f"if r2 {cmp} {draw(st.integers(0, 20))} goto +{skip}")
        else:
            op = draw(st.sampled_from(OPS))
            body.append(op.format(n=draw(st.integers(0, 15)), s=draw(st.integers(0, 63))))
    # the jumps may land on any of these, so they exist whatever was drawn
    body += ["r0 = 0"] * (n + 1)
    if draw(st.booleans()):
        body.append(draw(st.sampled_from(["r0 = *(u64 *)(r10 + 8)", "r0 = *(u64 *)(r3 + 0)",
                                          "r5 = r10\nr5 += r3\nr0 = *(u8 *)(r5 - 1)"])))
        body.append("r0 = 0")
    body.append("exit")
    return "\n".join(body) + "\n"


@pytest.mark.kernel
@fuzz_settings(40)
@given(programs())
def test_parsed_kernel_logs(src):
    prog = assemble(src, filename="fuzz.s")
    insns = prog.finalize()
    e = explain(prog, "socket_filter")
    p = e.parsed
    by_slot = {}
    slot = 0
    for insn in insns:
        by_slot[slot] = insn
        slot += insn.slots
    # every instruction line of the log is one step, at a real instruction
    assert len(p.steps) == len(INSN_LINE.findall(e.log))
    assert all(s.index in by_slot for s in p.steps)
    for s in p.steps:
        if s.state:
            names = split_state(s.state)
            assert " ".join(f"{k}={v}" for k, v in names.items()) == s.state
    # the path to the last step is a walk of the program from its start
    path = p.path()
    assert path and path[0].index == 0
    for a, b in zip(path, path[1:]):
        insn = by_slot[a.index]
        target = a.index + 1 + jump_offset(insn) if is_jump(insn) else None
        assert b.index in (a.index + insn.slots, target), (a, b)
        if b.branch is not None:
            assert b.branch == (a.index, b.index)
    if e.accepted:
        # (the log may end with a branch pruned as safe: its path ends at the jump)
        assert p.error is None
        assert any(s.text == "exit" for s in p.steps)
        assert p.stats["processed"] >= len(path)
    else:
        assert path[-1].index == e.error.index
        assert p.error and e.error.message in p.error
        assert e.text().count("\n--> ") == 1


@fuzz_settings(300)
@given(st.lists(st.one_of(
    st.text(max_size=60),
    st.sampled_from(["from 3 to 9: R1=1", "to caller at 4:", "7: (95) exit", "2: R1=ctx()",
                     "func#1 @12", "processed x insns", "stack depth 8+", "12: (bf) r1 = r2  ; R1=1",
                     "returning from callee:", "from a to b: x", "99999999999999999999: (05) goto pc+1"])),
    max_size=30))
def test_any_text_parses(lines):
    p = parse_log("\n".join(lines))
    assert len(p.path()) <= len(p.steps)
    for s in p.steps:
        split_state(s.state)
