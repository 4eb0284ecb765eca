"""XDP programs that output numbered events, run with BPF_PROG_TEST_RUN.

Every event starts with a sequence number taken with an atomic fetch-add on
an array map (so all events of all runs and CPUs are distinct), followed by
u32 words ``(seq + i) & 0xffffffff`` at byte offsets ``i = 8, 12, ...``:
:func:`expected` rebuilds the exact payload from the number.
"""
from __future__ import annotations

import contextlib
import os
import struct
from typing import Iterator

from pyebpf.loader import load
from pyebpf.maps import ArrayMap
from pyebpf.program import R0, R1, R2, R3, R6, R7, R8, R9, R10, Program

XDP_PASS = 2


def expected(seq: int, payload: int) -> bytes:
    """The payload the producer sends for event number ``seq``."""
    out = struct.pack("<Q", seq)
    for i in range(8, payload, 4):
        out += struct.pack("<I", (seq + i) & 0xFFFFFFFF)
    return out


class Producer:
    """``Producer(out_map, payload=16)``: each run of the program outputs
    ``per_run`` events of ``payload`` bytes (a multiple of 4, >= 8) to
    ``out_map`` (a PerfEventArray or RingBuf); ``drops``/``drop_slot`` are
    passed to ``ringbuf_output``.  ``discard_odd`` (ring buffer only) reserves every
    event but discards those with an odd number instead of submitting them.
    """

    def __init__(self, out_map, payload: int = 16, *, per_run: int = 1, drops=None,
                 drop_slot: int = 0, discard_odd: bool = False) -> None:
        if payload < 8 or payload % 4:
            raise ValueError("payload must be a multiple of 4, >= 8")
        self.payload = payload
        self.per_run = per_run
        self.sent = 0
        self.seq = ArrayMap("u64", 1, name="seq")
        kind = "perf" if out_map.map_type == 4 else "ringbuf"
        p = Program("producer")
        p.mov(R6, R1)
        with p.bounded_loop(R8, per_run) as brk:
            key = p.stack_store(0, 4)
            p.map_lookup(self.seq, key, brk)
            p.mov(R1, 1)
            p.atomic_add(R0, 0, R1, fetch=True)        # r1 = this event's number
            p.mov(R7, R1)
            if discard_odd:
                self._reserve_commit(p, out_map, brk)
            else:
                buf = p.stack.alloc((payload + 7) // 8 * 8)
                p.store(R10, buf, R7, 8)
                for i in range(8, payload, 4):
                    p.mov(R2, R7)
                    p.add(R2, i)
                    p.store(R10, buf + i, R2, 4)
                if kind == "perf":
                    p.perf_event_output(out_map, buf, payload)
                else:
                    p.ringbuf_output(out_map, buf, payload, drops=drops, drop_slot=drop_slot)
        p.ret(XDP_PASS)
        self.program = p
        self.prog = load(p, "xdp")

    def _reserve_commit(self, p: Program, out_map, brk: str) -> None:
        p.ld_map(R1, out_map)
        p.mov(R2, self.payload)
        p.mov(R3, 0)
        p.call("ringbuf_reserve")
        p.jeq(R0, 0, brk)
        p.mov(R9, R0)
        p.store(R9, 0, R7, 8)
        for i in range(8, self.payload, 4):
            p.mov(R2, R7)
            p.add(R2, i)
            p.store(R9, i, R2, 4)
        odd = p.fresh_label("odd")
        done = p.fresh_label("done")
        p.mov(R2, R7)
        p.and_(R2, 1)
        p.jne(R2, 0, odd)
        p.mov(R1, R9)
        p.mov(R2, 0)
        p.call("ringbuf_submit")
        p.ja(done)
        p.label(odd)
        p.mov(R1, R9)
        p.mov(R2, 0)
        p.call("ringbuf_discard")
        p.label(done)

    def run(self, runs: int = 1, cpu: int | None = None) -> int:
        """Run the program ``runs`` times (on ``cpu`` if given); return events sent."""
        if runs <= 0:
            return 0
        with pinned(cpu):
            self.prog.test_run(bytes(64), repeat=runs)
        n = runs * self.per_run
        self.sent += n
        return n

    def close(self) -> None:
        self.prog.close()
        self.seq.close()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextlib.contextmanager
def pinned(cpu: int | None) -> Iterator[None]:
    """Run the block on ``cpu`` only (None: leave the affinity alone)."""
    if cpu is None:
        yield
        return
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)
