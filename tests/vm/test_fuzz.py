"""Any bytes are a program the VM either runs or stops with a documented error:
never a Python exception, never a hang (pure; no kernel)."""
from __future__ import annotations

import struct

from budget import fuzz_settings
from hypothesis import given, strategies as st

from pyebpf.errors import PyebpfError
from pyebpf.isa import opcodes as op
from pyebpf.vm import Vm

# slots biased toward real opcodes, registers r0..r10 and small offsets
slot = st.builds(
    lambda code, dst, src, off, imm: struct.pack("<BBhi", code, src << 4 | dst, off, imm),
    st.one_of(st.integers(0, 255), st.sampled_from([0x07, 0x0f, 0x18, 0x61, 0x63, 0x79, 0x7b,
                                                    0x85, 0x8d, 0x95, 0xb7, 0xbf, 0xc3, 0xdb,
                                                    0x05, 0x06, 0x15, 0x1d, 0xe5, 0x0d])),
    st.integers(0, 11), st.integers(0, 11), st.integers(-600, 600),
    st.one_of(st.integers(-(1 << 31), (1 << 31) - 1), st.integers(-8, 260)))


@fuzz_settings(400)
@given(st.lists(slot, min_size=1, max_size=24), st.binary(max_size=32), st.booleans())
def test_any_program_runs_or_stops_cleanly(slots, mem, trace) -> None:
    data = b"".join(slots) + struct.pack("<BBhi", op.OP_EXIT, 0, 0, 0)
    try:
        vm = Vm(data, max_steps=2_000)
        r0 = vm.run(mem, trace=(lambda step: None) if trace else None)
    except PyebpfError:
        return
    assert 0 <= r0 < 1 << 64
