"""Events from the VM through pyebpf.events' readers -- the same code as for the kernel.

One program outputs numbered events (perf event output, ring-buffer output,
reserve + submit / discard); it runs in the kernel (XDP, BPF_PROG_TEST_RUN,
pinned to CPU 0) and in the VM (cpu 0), and the very same reader code
(:func:`read_everything`) reads both: the events, their order and the lost
counts must be equal -- also when the rings overflow.
"""
from __future__ import annotations

import os
import threading

import pytest
from waiting import wait_blocked_in_poll

from pyebpf.events import PerfBuffer, RingBufferReader
from pyebpf.maps import ArrayMap, MapSpec, PerCpuArrayMap, PerfEventArray, RingBuf
from pyebpf.program import R0, R1, R2, R3, R6, R7, R8, R9, R10, Program
from pyebpf.text import assemble
from pyebpf.vm import Vm, VmMap

XDP_PASS = 2
FORMAT = "<QI"           # 12 bytes: no padding in a perf sample (4 + 12 = 16)


def producer(out, seq, per_run: int, *, drops=None, reserve_every: int = 0) -> Program:
    """Each run outputs ``per_run`` events ``(seq, 3 * seq + 7)``, seq from the
    counter map ``seq``.  Ring buffer: with ``reserve_every`` N, event seq % N == 1
    goes through reserve + submit, seq % N == 2 through reserve + discard."""
    p = Program("events", license="GPL")
    p.mov(R6, R1)
    with p.bounded_loop(R8, per_run) as brk:
        key = p.stack_store(0, 4)
        p.map_lookup(seq, key, brk)
        p.mov(R1, 1)
        p.atomic_add(R0, 0, R1, fetch=True)
        p.mov(R7, R1)
        buf = p.stack.alloc(16)
        p.store(R10, buf, R7, 8)
        p.mov(R2, R7)
        p.mul(R2, 3)
        p.add(R2, 7)
        p.store(R10, buf + 8, R2, 4)
        if out.map_type == PerfEventArray.map_type:
            p.perf_event_output(out, buf, 12)
            continue_ = None
        else:
            continue_ = p.fresh_label("next")
            if reserve_every:
                plain = p.fresh_label("plain")
                p.mov(R9, R7)
                p.mod(R9, reserve_every)
                p.jeq(R9, 0, plain)
                p.jgt(R9, 2, plain)
                p.ld_map(R1, out)
                p.mov(R2, 12)
                p.mov(R3, 0)
                p.call("ringbuf_reserve")
                p.jeq(R0, 0, continue_)
                p.load(R2, R10, buf, 8)
                p.store(R0, 0, R2, 8)
                p.load(R2, R10, buf + 8, 4)
                p.store(R0, 8, R2, 4)
                p.mov(R1, R0)
                p.mov(R2, 0)
                discard = p.fresh_label("discard")
                p.jeq(R9, 2, discard)
                p.call("ringbuf_submit")
                p.ja(continue_)
                p.label(discard)
                p.call("ringbuf_discard")
                p.ja(continue_)
                p.label(plain)
            p.ringbuf_output(out, buf, 12, drops=drops)
        if continue_ is not None:
            p.label(continue_)
    p.ret(XDP_PASS)
    return p


def read_everything(reader) -> tuple[list, int]:
    """The reader code both runs share: poll with a callback, then drain."""
    got: list = []
    reader.callback = got.append
    reader.poll(0)
    got += reader.drain()
    return got, reader.lost


class Kernel:
    """Runs ``program`` with BPF_PROG_TEST_RUN on CPU 0."""

    def __init__(self, program: Program) -> None:
        from pyebpf.loader import load
        self.prog = load(program, "xdp")

    def run(self, times: int) -> None:
        old = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {0})
        try:
            self.prog.test_run(bytes(64), repeat=times)
        finally:
            os.sched_setaffinity(0, old)

    def close(self) -> None:
        self.prog.close()


class InVm:
    """Runs ``program`` in the VM on its CPU 0; ``maps``: the VM's maps."""

    def __init__(self, program: Program) -> None:
        self.vm = Vm(program)

    def map(self, kernel_map):
        return self.vm.maps[kernel_map.name]

    def run(self, times: int) -> None:
        for _ in range(times):
            assert self.vm.run(ctx=bytes(64)) == XDP_PASS

    def close(self) -> None:
        pass


def _perf_session(where: str, size: int, batches: list[int], per_run: int):
    """Events and lost counts after each batch of runs, read with one reader code."""
    with PerfEventArray(name="out") as arr, ArrayMap("u64", 1, name="seq") as seq:
        program = producer(arr, seq, per_run)
        runner = Kernel(program) if where == "kernel" else InVm(program)
        target = arr if where == "kernel" else runner.map(arr)
        lost_seen: list[tuple[int, int]] = []
        try:
            with PerfBuffer(target, size=size, decode=FORMAT,
                            on_lost=lambda cpu, n: lost_seen.append((cpu, n))) as reader:
                out = []
                for runs in batches:
                    runner.run(runs)
                    out.append(read_everything(reader))
                return out, reader.lost_per_cpu, lost_seen
        finally:
            runner.close()


def _ringbuf_session(where: str, size: int, batches: list[int], per_run: int):
    with RingBuf(size, name="rb") as rb, PerCpuArrayMap("u64", 1, name="drops") as drops, \
            ArrayMap("u64", 1, name="seq") as seq:
        program = producer(rb, seq, per_run, drops=drops, reserve_every=5)
        runner = Kernel(program) if where == "kernel" else InVm(program)
        ring = rb if where == "kernel" else runner.map(rb)
        counter = drops if where == "kernel" else runner.map(drops)
        try:
            with RingBufferReader(ring, drops=counter, decode=FORMAT,
                                  on_lost=lambda cpu, n: None) as reader:
                out = []
                for runs in batches:
                    runner.run(runs)
                    out.append(read_everything(reader))
                return out, reader.lost_per_cpu
        finally:
            runner.close()


def _expected(first: int, count: int) -> list[tuple[int, int]]:
    return [(s, (3 * s + 7) & 0xFFFFFFFF) for s in range(first, first + count)]


@pytest.mark.kernel
def test_perf_events_equal_kernel_and_vm() -> None:
    kernel = _perf_session("kernel", 1 << 16, [3, 5], 4)
    vm = _perf_session("vm", 1 << 16, [3, 5], 4)
    assert vm == kernel
    (first, lost1), (second, lost2) = kernel[0]
    assert first == _expected(0, 12) and second == _expected(12, 20) and lost1 == lost2 == 0


@pytest.mark.kernel
def test_perf_overflow_lost_counts_equal_kernel_and_vm() -> None:
    # a one-page ring holds 170 samples of 24 bytes; 300 overflow it, the loss is
    # reported by a LOST record before the next sample that fits (the second batch)
    kernel = _perf_session("kernel", 4096, [300, 1], 1)
    vm = _perf_session("vm", 4096, [300, 1], 1)
    assert vm == kernel
    batches, per_cpu, seen = kernel
    (first, lost1), (second, lost2) = batches
    assert len(first) == 170 and lost1 == 0
    assert second == _expected(300, 1) and lost2 == 130
    assert per_cpu == {0: 130} and seen == [(0, 130)]


@pytest.mark.kernel
def test_ringbuf_events_equal_kernel_and_vm() -> None:
    # reserve + submit, reserve + discard and output; 4096 bytes hold 170 24-byte
    # records (discarded ones take room too), the rest are counted as drops
    kernel = _ringbuf_session("kernel", 4096, [3, 400, 2], 4)
    vm = _ringbuf_session("vm", 4096, [3, 400, 2], 4)
    assert vm == kernel
    batches, per_cpu = kernel
    first = batches[0][0]
    assert first == [e for e in _expected(0, 12) if e[0] % 5 != 2]
    assert batches[1][1] > 0 and per_cpu == {0: batches[2][1]}
    assert len(batches[2][0]) > 0


# ---------------------------------------------------------------- the VM alone (no kernel)

PERF_TEXT = """
    r6 = r1
    r1 = 0x61626364
    *(u32 *)(r10 - 8) = r1
    *(u32 *)(r10 - 4) = r1
    r1 = r6
    r2 = ev ll
    r3 = {flags} ll
    r4 = r10
    r4 += -8
    r5 = 8
    call bpf_perf_event_output
    exit"""


def _perf_vm(flags: int = 0xFFFFFFFF, cpu: int = 0) -> Vm:
    return Vm(assemble(PERF_TEXT.format(flags=flags)), {"ev": MapSpec(PerfEventArray, 4, name="ev")},
              cpu=cpu, ncpus=4)


def test_perf_errnos_follow_the_kernel() -> None:
    vm = _perf_vm(cpu=1)
    with PerfBuffer(vm.maps["ev"], cpus=[0], size=4096) as reader:
        assert vm.run(ctx=b"") == -2 & (2**64 - 1)            # no ring for CPU 1: -ENOENT
        vm.cpu = 0
        assert vm.run(ctx=b"") == 0
        assert reader.drain() == [b"dcbadcba" + bytes(4)]   # raw_size: padded as the kernel's
    vm = _perf_vm(flags=1)
    with PerfBuffer(vm.maps["ev"], cpus=[0, 1], size=4096):
        assert vm.run(ctx=b"") == -95 & (2**64 - 1)           # CPU 1's event from CPU 0
    vm = _perf_vm(flags=1 << 32)
    with PerfBuffer(vm.maps["ev"], cpus=[0], size=4096):
        assert vm.run(ctx=b"") == -22 & (2**64 - 1)           # flags beyond the index


def test_a_sample_too_big_for_a_record_header_is_refused() -> None:
    from pyebpf.events.memring import MemoryPerfRing
    ring = MemoryPerfRing(1 << 17)
    assert ring.output(bytes(0xFFED)) == -7 and ring.head == 0 and ring.lost == 0   # (not a crash)
    assert ring.output(bytes(0xFFEC)) == 0 and ring.head == 0xFFF8          # the largest


def test_closing_the_reader_empties_the_slot() -> None:
    vm = _perf_vm()
    reader = PerfBuffer(vm.maps["ev"], cpus=[0], size=4096)
    assert set(vm.maps["ev"].perf_rings) == {0}
    reader.close()
    assert vm.maps["ev"].perf_rings == {}
    assert vm.run(ctx=b"") == 0
    assert vm.maps["ev"].records == [(0, b"dcbadcba")]       # no reader: kept in records


def test_pause_counts_losses() -> None:
    vm = _perf_vm()
    lost = []
    with PerfBuffer(vm.maps["ev"], cpus=[0], size=4096,
                    on_lost=lambda cpu, n: lost.append((cpu, n))) as reader:
        reader.pause()
        assert vm.run(ctx=b"") == -28 & (2**64 - 1)           # -ENOSPC
        reader.resume()
        assert vm.run(ctx=b"") == 0
        assert reader.drain() == [b"dcbadcba" + bytes(4)]
        assert lost == [(0, 1)] and reader.lost == 1


@pytest.mark.parametrize("kind", ["perf", "ringbuf"])
def test_a_waiting_reader_is_woken(kind: str) -> None:
    # flush_interval is long: only the VM's wakeup can end the wait early
    if kind == "perf":
        vm = _perf_vm()
        reader = PerfBuffer(vm.maps["ev"], cpus=[0], size=4096, wakeup_events=1,
                            flush_interval=30)
    else:
        text = """
            r1 = 0x61626364
            *(u32 *)(r10 - 4) = r1
            r1 = rb ll
            r2 = r10
            r2 += -4
            r3 = 4
            r4 = 0
            call bpf_ringbuf_output
            exit"""
        vm = Vm(assemble(text), {"rb": MapSpec(RingBuf, 4096, name="rb")})
        reader = RingBufferReader(vm.maps["rb"], flush_interval=30)
    got: list = []
    with reader:
        t = threading.Thread(target=lambda: got.extend(reader.read_batch(timeout=20)))
        t.start()
        wait_blocked_in_poll(t)           # the reader waits before the event comes
        assert vm.run(ctx=b"") == 0
        t.join(30)
        # woken by the event: a reader not woken would return [] after 20 s
        # (the flush interval, 30 s, is longer)
        assert not t.is_alive()
    assert [bytes(g[:4]) for g in got] == [b"dcba"]


def test_ringbuf_full_and_unsubmitted_reservations() -> None:
    text = """
        r1 = rb ll
        r2 = 4000
        r3 = 0
        call bpf_ringbuf_reserve
        r6 = r0
        r1 = rb ll
        r2 = 100
        r3 = 0
        call bpf_ringbuf_reserve
        r0 = r6
        exit"""
    vm = Vm(assemble(text), {"rb": MapSpec(RingBuf, 4096, name="rb")})
    assert vm.run() != 0                     # the first fits; the second finds no room
    rb = vm.maps["rb"]
    assert rb.records == [] and rb.ring.prod == 4008
    with RingBufferReader(rb) as reader:     # the forgotten reservation was discarded
        assert reader.drain() == []
        assert rb.ring.consumer_pos == 4008


def test_a_ring_buffer_vmmap_needs_a_valid_size() -> None:
    from pyebpf.errors import OptionError
    from pyebpf.kernel.constants import MapType
    with pytest.raises(OptionError, match="power of two"):
        VmMap(MapType.RINGBUF, 0, 0, 5000, "rb")


def test_readers_refuse_other_objects() -> None:
    from pyebpf.errors import ArgumentTypeError
    from pyebpf.kernel.constants import MapType
    with pytest.raises(ArgumentTypeError, match="PerfEventArray"):
        PerfBuffer(VmMap(MapType.HASH, 4, 8, 4, "h"))
    with pytest.raises(ArgumentTypeError, match="RingBuf"):
        RingBufferReader(VmMap(MapType.HASH, 4, 8, 4, "h"))


def test_readers_of_vm_maps_leak_nothing() -> None:
    import gc
    vm = _perf_vm()
    rb = Vm(assemble("r0 = 0\nexit"), {"rb": MapSpec(RingBuf, 4096, name="rb")}).maps["rb"]
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        with PerfBuffer(vm.maps["ev"], cpus=[0], size=4096):
            pass
        with RingBufferReader(rb):
            pass
    PerfBuffer(vm.maps["ev"], cpus=[0], size=4096)      # dropped without close: the GC's
    RingBufferReader(rb)
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) == before
    assert vm.maps["ev"].perf_rings == {} and rb.ring.fd == -1
