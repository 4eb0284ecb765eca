"""Tail calls from bpf-to-bpf subprograms: the VM against the kernel (6.18).

The kernel lets a subprogram tail-call (x86-64 JIT, since 5.10): the called
program replaces the subprogram's frame, and its exit returns to the
subprogram's caller; the caller frames stay, so a chain nests deeper than the
8 frames one program may use.  The tail-call count (33) is shared by every
frame of a run (since 6.10).  The verifier refuses a tail-calling subprogram
whose callers' stack is 256 bytes or more.
"""
from __future__ import annotations

import struct

import pytest

from pyebpf.kernel.constants import MapType
from pyebpf.maps import ArrayMap
from pyebpf.program import R0, R1, R2, R3, R6, R7, R10, Program
from pyebpf.text import assemble
from pyebpf.vm import Vm, VmError, VmMap


def chain(hits, caller_stack: int = 8) -> Program:
    """``main``: count the visit (hits[0] += 1, r7 = the count before), call
    ``sub`` (which tail-calls jmp[0], or returns 1000 when that fails), then
    ``r0 = r0 * 3 + the count kept on the stack``: the result depends on every
    level's order.  ``caller_stack``: bytes of stack main uses."""
    p = Program("chain", license="GPL")
    p.mov(R6, R1)
    key = p.stack_store(0, 4)
    p.mov(R7, 0)
    skip = p.fresh_label("skip")
    p.map_lookup(hits, key, skip)
    p.mov(R7, 1)
    p.atomic_add(R0, 0, R7, fetch=True)
    p.label(skip)
    p.store(R10, -caller_stack, R7, 8)
    p.mov(R1, R6)
    p.call_local("sub")
    p.mul(R0, 3)
    p.load(R7, R10, -caller_stack, 8)
    p.add(R0, R7)
    p.exit()
    sub = p.subprogram("sub")
    sub.ld_map(R2, "jmp")
    sub.mov(R3, 0)
    sub.call("tail_call")
    sub.mov(R0, 1000)
    sub.exit()
    return p


def _expected() -> int:
    r0 = 1000                       # the 34th tail call fails
    for level in reversed(range(34)):   # the entry + 33 tail calls, innermost first
        r0 = (r0 * 3 + level) & (2**64 - 1)
    return r0


def _btf_and_func_info(program: Program) -> tuple[bytes, bytes]:
    """BTF with ``int main(void *ctx)`` (global) and ``static int sub(void *ctx)``,
    and the func_info records that place them: the kernel allows tail calls
    in subprograms only for programs with BTF."""
    from pyebpf.btf.writer import BtfBuilder
    b = BtfBuilder()
    int_id = b.add_int("int", 4, signed=True)
    ptr = b.add_ptr(0)
    proto = b.add_func_proto(int_id, [("ctx", ptr)])
    main = b.add_func("chain", proto, linkage=1)
    sub = b.add_func("sub", proto, linkage=0)
    insns, labels = program.layout()
    sub_slot = sum(i.slots for i in insns[:labels["sub"]])
    return b.build(), struct.pack("<IIII", 0, main, sub_slot, sub)


def _kernel(program: Program, hits: ArrayMap) -> int:
    from pyebpf.isa import encode
    from pyebpf.kernel import syscall as sys_
    from pyebpf.kernel.btf import btf_load
    from pyebpf.loader import bind_maps, prog_type_of
    blob, func_info = _btf_and_func_info(program)
    jmp = sys_.map_create(MapType.PROG_ARRAY, 4, 4, 4, name="jmp")
    btf = btf_load(blob)
    try:
        bound, _ = bind_maps(list(program.finalize()), {"jmp": jmp.fileno(), "hits": hits})
        fd, _ = sys_.prog_load(prog_type_of("xdp"), encode(bound), "GPL", name="chain",
                               btf_fd=btf.fileno(), func_info=func_info)
        with fd:
            sys_.map_update(jmp, struct.pack("<I", 0), struct.pack("<I", fd.fileno()))
            return sys_.prog_test_run(fd, bytes(64)).retval
    finally:
        jmp.close()
        btf.close()


def _vm(program: Program, hits) -> tuple[int, Vm]:
    table = VmMap(MapType.PROG_ARRAY, 4, 4, 4, "jmp")
    table.programs[0] = program
    vm = Vm(program, {"jmp": table, "hits": hits})
    return vm.run(ctx=bytes(64)), vm


@pytest.mark.kernel
def test_a_tail_call_chain_through_subprograms_agrees_with_the_kernel() -> None:
    with ArrayMap("u64", 1, name="hits") as hits:
        program = chain(hits)
        kernel = _kernel(program, hits)
        kernel_hits = hits[0]
        r0, vm = _vm(program, hits)
    # (test_run's retval is 32 bits)
    assert kernel == _expected() & 0xFFFFFFFF and kernel_hits == 34   # the kernel's own rules
    assert r0 & 0xFFFFFFFF == kernel and vm.maps["hits"][0] == kernel_hits
    assert vm.depth == 0


@pytest.mark.kernel
def test_the_kernel_refuses_a_deep_caller_stack() -> None:
    # what the VM documents but does not check: 256 bytes above a tail-calling subprogram
    from pyebpf.errors import VerifierError
    with ArrayMap("u64", 1, name="hits") as hits:
        with pytest.raises(VerifierError, match="tail_calls are not allowed"):
            _kernel(chain(hits, caller_stack=264), hits)
        r0, _ = _vm(chain(hits, caller_stack=264), hits)
    assert r0 == _expected()


def test_a_tail_call_from_a_subprogram_returns_to_its_caller() -> None:
    # (before: "the VM runs tail calls from the main frame only")
    target = assemble("r0 = 7\nexit")
    table = VmMap(MapType.PROG_ARRAY, 4, 4, 4, "jmp")
    table.programs[1] = target
    text = """
        r6 = 5
        call sub
        r0 += r6
        exit
    sub:
        r6 = 100
        r2 = jmp ll
        r3 = 1
        call bpf_tail_call
        r0 = 1
        exit"""
    vm = Vm(assemble(text), {"jmp": table})
    assert vm.run(ctx=b"") == 12                # 7 from the target + the caller's r6
    assert vm.depth == 0


def test_each_program_has_its_own_frame_limit() -> None:
    # 9 nested calls in one program are too many, even after a tail call
    calls = "\n".join(f"f{i}:\n    call f{i + 1}\n    exit" for i in range(9))
    text = """
        call sub
        exit
    sub:
        r2 = jmp ll
        r3 = 0
        call bpf_tail_call
        exit"""
    table = VmMap(MapType.PROG_ARRAY, 4, 4, 4, "jmp")
    table.programs[0] = assemble(f"call f0\nexit\n{calls}\nf9:\n    r0 = 1\n    exit")
    with pytest.raises(VmError, match="call depth over 8 frames"):
        Vm(assemble(text), {"jmp": table}).run(ctx=b"")
    table.programs[0] = assemble("call f0\nexit\n" + "\n".join(
        f"f{i}:\n    call f{i + 1}\n    exit" for i in range(5)) + "\nf5:\n    r0 = 9\n    exit")
    assert Vm(assemble(text), {"jmp": table}).run(ctx=b"") == 9     # 2 + 7 frames: fine
