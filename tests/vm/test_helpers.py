"""Emulated helpers and in-VM maps (no kernel: MapSpec describes, the VM holds)."""
from __future__ import annotations

import pytest

from pyebpf.maps import (ArrayMap, HashMap, LruHashMap, MapSpec, PerCpuArrayMap, PerfEventArray,
                         RingBuf)
from pyebpf.program import R0, R1, R2, R3, R4, R5, R6, R10, Program
from pyebpf.text import assemble
from pyebpf.vm import Vm, VmError, VmMap


def counter_program(m) -> Program:
    p = Program("count")
    key = p.stack_store(7, 4)
    p.map_increment(m, key, 5)
    p.map_increment(m, key, 1)
    p.mov(R0, 0)
    p.exit()
    return p


@pytest.mark.parametrize("cls, args", [
    (HashMap, ("u32", "u64", 16)),
    (LruHashMap, ("u32", "u64", 16)),
    (ArrayMap, ("u64", 16)),
])
def test_map_increment_with_a_mapspec(cls, args) -> None:
    spec = MapSpec(cls, *args, name="counts")
    vm = Vm(counter_program(spec))
    vm.run()
    assert vm.maps["counts"][7] == 6
    vm.run()
    assert vm.maps["counts"][7] == 12


def test_lookup_update_delete_and_errnos() -> None:
    spec = MapSpec(HashMap, "u32", "u64", 2, name="h")
    text = """
        r1 = 1
        *(u32 *)(r10 - 4) = r1
        r1 = 100
        *(u64 *)(r10 - 16) = r1
        r1 = h ll
        r2 = r10
        r2 += -4
        r3 = r10
        r3 += -16
        r4 = 1
        call bpf_map_update_elem
        r6 = r0
        r1 = h ll
        r2 = r10
        r2 += -4
        r3 = r10
        r3 += -16
        r4 = 1
        call bpf_map_update_elem
        r7 = r0
        r1 = h ll
        r2 = r10
        r2 += -4
        call bpf_map_delete_elem
        r8 = r0
        r1 = h ll
        r2 = r10
        r2 += -4
        call bpf_map_delete_elem
        r9 = r0
        r1 = h ll
        r2 = r10
        r2 += -4
        call bpf_map_lookup_elem
        exit"""
    vm = Vm(assemble(text), {"h": spec})
    vm.run()
    # insert ok 0; NOEXIST on an existing key -EEXIST; delete 0; again -ENOENT; lookup NULL
    u64 = 2**64 - 1
    assert vm.R[6:10] == [0, -17 & u64, 0, -2 & u64]
    assert vm.R[0] >> 32 == 0 and len(vm.maps["h"]) == 0


def test_a_looked_up_value_is_live_and_bounded() -> None:
    spec = MapSpec(ArrayMap, "u32", 4, name="a")
    base = """
        r1 = 2
        *(u32 *)(r10 - 4) = r1
        r1 = a ll
        r2 = r10
        r2 += -4
        call bpf_map_lookup_elem
        if r0 == 0 goto out
        r1 = 99
        *(u32 *)(r0 + {off}) = r1
    out:
        exit"""
    vm = Vm(assemble(base.format(off=0)), {"a": spec})
    vm.run()
    assert vm.maps["a"][2] == 99
    with pytest.raises(VmError, match=r"offset 4 in a value of map a of 4 bytes.*out of bounds"):
        Vm(assemble(base.format(off=4)), {"a": spec}).run()


def test_hash_full_and_lru_eviction() -> None:
    for cls, survivors in ((HashMap, {1, 2}), (LruHashMap, {2, 3})):
        m = VmMap.of(MapSpec(cls, "u32", "u64", 2, name="m"))
        for k in (1, 2, 3):
            try:
                m[k] = k
            except ValueError:
                pass
        assert {int.from_bytes(k, "little") if isinstance(k, bytes) else k for k, _ in m.items()} \
            == survivors


def test_percpu_array_uses_the_vm_cpu() -> None:
    spec = MapSpec(PerCpuArrayMap, "u64", 1, name="pc")
    p = Program("pc")
    key = p.stack_store(0, 4)
    p.map_increment(spec, key, 3)
    p.mov(R0, 0)
    p.exit()
    vm = Vm(p, ncpus=4, cpu=2)
    vm.run()
    assert vm.maps["pc"][0] == [0, 0, 3, 0]


def test_ringbuf_reserve_submit_discard_output() -> None:
    spec = MapSpec(RingBuf, 4096, name="rb")
    text = """
        r1 = rb ll
        r2 = 8
        r3 = 0
        call bpf_ringbuf_reserve
        if r0 == 0 goto out
        r1 = 0x1122334455667788 ll
        *(u64 *)(r0 + 0) = r1
        r1 = r0
        r2 = 0
        call bpf_ringbuf_submit
        r1 = rb ll
        r2 = 4
        r3 = 0
        call bpf_ringbuf_reserve
        r1 = r0
        r2 = 0
        call bpf_ringbuf_discard
        r1 = 0x41424344
        *(u32 *)(r10 - 4) = r1
        r1 = rb ll
        r2 = r10
        r2 += -4
        r3 = 4
        r4 = 0
        call bpf_ringbuf_output
    out:
        r0 = 0
        exit"""
    vm = Vm(assemble(text), {"rb": spec})
    vm.run()
    assert vm.maps["rb"].records == [bytes.fromhex("8877665544332211"), b"DCBA"]


def test_a_submitted_record_is_no_longer_writable() -> None:
    spec = MapSpec(RingBuf, 4096, name="rb")
    text = """
        r1 = rb ll
        r2 = 8
        r3 = 0
        call bpf_ringbuf_reserve
        r6 = r0
        r1 = r0
        r2 = 0
        call bpf_ringbuf_submit
        r1 = 1
        *(u64 *)(r6 + 0) = r1
        exit"""
    with pytest.raises(VmError, match=r"insn 10 .*a reservation in ring buffer rb, which is gone"):
        Vm(assemble(text), {"rb": spec}).run()


def test_perf_event_output_records() -> None:
    spec = MapSpec(PerfEventArray, name="ev")
    text = """
        r6 = r1
        r1 = 0x61626364
        *(u32 *)(r10 - 4) = r1
        r1 = r6
        r2 = ev ll
        r3 = 0xffffffff ll
        r4 = r10
        r4 += -4
        r5 = 4
        call bpf_perf_event_output
        exit"""
    vm = Vm(assemble(text), {"ev": spec}, cpu=1)
    assert vm.run(ctx=b"") == 0
    assert vm.maps["ev"].records == [(1, b"dcba")]


def test_current_task_helpers_and_clock() -> None:
    text = """
        call bpf_get_current_pid_tgid
        r6 = r0
        call bpf_get_current_uid_gid
        r7 = r0
        r1 = r10
        r1 += -16
        r2 = 16
        call bpf_get_current_comm
        r8 = *(u64 *)(r10 - 16)
        call bpf_ktime_get_ns
        r9 = r0
        call bpf_get_smp_processor_id
        exit"""
    vm = Vm(assemble(text), pid=11, tgid=22, uid=33, gid=44, comm="hello", cpu=3)
    vm.ktime = lambda: 123456
    assert vm.run() == 3
    assert vm.R[6] == 22 << 32 | 11 and vm.R[7] == 44 << 32 | 33
    assert vm.R[8].to_bytes(8, "little") == b"hello\0\0\0"
    assert vm.R[9] == 123456


def test_prandom_is_32_bits_and_seedable() -> None:
    import random
    vm = Vm(assemble("call bpf_get_prandom_u32\nexit"))
    vm.random = random.Random(5)
    first = vm.run()
    vm.random = random.Random(5)
    assert vm.run() == first < 1 << 32


def test_trace_printk_is_captured() -> None:
    p = Program("p")
    fmt = b"u=%u x=%lx s=%s %%\0"
    p.stack_zero(32, -32)
    for i in range(0, len(fmt), 8):
        chunk = fmt[i:i + 8].ljust(8, b"\0")
        p.lddw(R1, int.from_bytes(chunk, "little"))
        p.stxdw(R10, -32 + i, R1)
    p.lddw(R1, int.from_bytes(b"hi\0\0\0\0\0\0", "little"))
    p.stxdw(R10, -40, R1)
    p.mov(R1, R10)
    p.add(R1, -32)
    p.mov(R2, len(fmt))
    p.mov(R3, -1)
    p.mov(R4, -1)
    p.mov(R5, R10)
    p.add(R5, -40)
    p.call("trace_printk")
    p.exit()
    vm = Vm(p)
    vm.run()
    assert vm.printk == ["u=4294967295 x=ffffffffffffffff s=hi %"]


def test_probe_read_from_user_memory() -> None:
    text = """
        r1 = r10
        r1 += -8
        r2 = 8
        r3 = 0x7fff0000 ll
        call bpf_probe_read_user
        r6 = r0
        r1 = r10
        r1 += -16
        r2 = 8
        r3 = 0x7fff0010 ll
        call bpf_probe_read_user_str
        r7 = r0
        r1 = r10
        r1 += -24
        r2 = 8
        r3 = 0x1000 ll
        call bpf_probe_read_kernel
        r8 = r0
        r0 = *(u64 *)(r10 - 8)
        exit"""
    vm = Vm(assemble(text), user_memory={0x7FFF0000: b"ABCDEFGH" + bytes(8) + b"xyz\0junk"})
    assert vm.run().to_bytes(8, "little") == b"ABCDEFGH"
    assert vm.R[6] == 0 and vm.R[7] == 4
    assert vm.stack()[512 - 16:512 - 12] == b"xyz\0"
    assert vm.R[8] == (-14) & (2**64 - 1)          # -EFAULT, buffer zeroed
    assert vm.stack()[512 - 24:512 - 16] == bytes(8)


def test_unknown_helper_is_named() -> None:
    with pytest.raises(VmError, match=r"insn 0.*bpf_skb_store_bytes \(id 9\) is not emulated"):
        Vm(assemble("call bpf_skb_store_bytes\nexit")).run()


def test_custom_helper() -> None:
    seen = []

    def double(vm, insn, r1, r2, r3, r4, r5):
        seen.append(insn)
        return r1 * 2

    assert Vm(assemble("r1 = 21\ncall 9\nexit"), helpers={9: double}).run() == 42
    assert seen == [1]


def test_tail_call() -> None:
    from pyebpf.kernel.constants import MapType
    target = assemble("r0 = 77\nexit")
    table = VmMap(MapType.PROG_ARRAY, 4, 4, 4, "jmp")
    table.programs[1] = target
    text = """
        r0 = 5
        r2 = jmp ll
        r3 = {idx}
        call bpf_tail_call
        exit"""
    assert Vm(assemble(text.format(idx=1)), {"jmp": table}).run(ctx=b"") == 77
    assert Vm(assemble(text.format(idx=2)), {"jmp": table}).run(ctx=b"") == 5   # empty slot


def test_missing_map_is_a_clear_error() -> None:
    with pytest.raises(VmError, match=r"map 'nope' was not given to the VM"):
        Vm(assemble("r1 = nope ll\nr0 = 0\nexit")).run()


def test_unsupported_map_kind() -> None:
    from pyebpf.errors import OptionError
    with pytest.raises(OptionError, match="does not emulate"):
        VmMap(11, 8, 8, 1, "lpm")


@pytest.mark.parametrize("helper", ["bpf_probe_read_user", "bpf_probe_read_kernel_str",
                                    "bpf_get_current_comm"])
def test_a_huge_size_is_an_error_not_an_allocation(helper: str) -> None:
    text = f"r1 = r10\nr1 += -8\nr2 = -1\nr3 = 0\ncall {helper}\nexit"
    with pytest.raises(VmError, match=r"insn 4 .*18446744073709551615 bytes.*out of bounds"):
        Vm(assemble(text)).run()


def test_run_takes_bytes_only() -> None:
    from pyebpf.errors import OptionError
    with pytest.raises(OptionError, match="takes bytes, not int"):
        Vm(assemble("r0 = 0\nexit")).run(10**12)
