"""Event readers: how fast PerfBuffer and RingBufferReader drain 16-byte events.

The producer is an XDP program run by BPF_PROG_TEST_RUN: each run takes 8
sequence numbers with an atomic fetch-add and outputs 8 events of 16 bytes
(``(seq, 3 * seq + 7)``) with ``bpf_perf_event_output`` / ``bpf_ringbuf_output``.

* ``<reader>_drain_eps``: events/s of ``read_batch(0)`` (raw ``bytes``) over a
  burst already in a ring big enough to lose nothing (best of several rounds);
  ``_tuple_eps`` decodes ``"<QQ"`` tuples, ``_ctypes_eps`` a ctypes Structure,
  ``_numpy_eps`` uses ``read_array`` (when numpy is installed).
* ``<reader>_concurrent_eps``: a reader thread draining (``read_batch`` in a
  loop) while the producer, pinned to one CPU, fires bursts of 65,536 events
  (at several million events/s, faster than any pure-Python reader) into a
  default-sized ring (256 KiB); events/s received, ``_lost`` what the ring
  could not hold (perf: LOST records; ring buffer: the program's drop
  counter), ``_exact`` whether received + lost == sent, ``_producer_eps``
  the producer's own rate while its test_run calls last.
* ``mmap_module_vs_cffi``: drain rate with the ring walked through a Python
  ``mmap`` versus a raw ``mmap(2)`` via cffi over the same pages (the reader
  uses the first; the ratio shows why).

Run: ``python -m benchmarks events`` or ``python benchmarks/bench_events.py
[--quick]``.  Needs root (CAP_BPF + CAP_PERFMON).  Aim: >= 1,200,000 events/s.
"""
from __future__ import annotations

import ctypes
import gc
import os
import sys
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyebpf.events import PerfBuffer, RingBufferReader, _PerfRing  # noqa: E402
from pyebpf.kernel.cpus import online_cpus  # noqa: E402
from pyebpf.loader import load  # noqa: E402
from pyebpf.maps import ArrayMap  # noqa: E402
from pyebpf.program import R0, R1, R2, R6, R7, R8, Program  # noqa: E402

PER_RUN = 8
AIM = 1_200_000


class Event(ctypes.Structure):
    _fields_ = [("seq", ctypes.c_uint64), ("value", ctypes.c_uint64)]


class _Producer:
    """XDP program outputting PER_RUN events of 16 bytes per run."""

    def __init__(self, out_map, drops=None) -> None:
        self.seq = ArrayMap("u64", 1, name="bench_seq")
        p = Program("bench_events")
        p.mov(R6, R1)
        with p.bounded_loop(R8, PER_RUN) as brk:
            key = p.stack_store(0, 4)
            p.map_lookup(self.seq, key, brk)
            p.mov(R1, 1)
            p.atomic_add(R0, 0, R1, fetch=True)
            p.mov(R7, R1)
            p.mov(R2, R7)
            p.mul(R2, 3)
            p.add(R2, 7)
            p.output_record(out_map, [(R7, 8), (R2, 8)], drops=drops)
        p.ret(2)
        self.prog = load(p, "xdp")
        self.sent = 0

    def run(self, events: int, cpu: int) -> None:
        old = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {cpu})
        try:
            self.prog.test_run(bytes(64), repeat=max(1, events // PER_RUN))
        finally:
            os.sched_setaffinity(0, old)
        self.sent += max(1, events // PER_RUN) * PER_RUN

    def close(self) -> None:
        self.prog.close()
        self.seq.close()


def _reader(kind: str, **kw):
    return PerfBuffer(**kw) if kind == "perf" else RingBufferReader(drops=True, **kw)


def _producer(r) -> _Producer:
    if isinstance(r, PerfBuffer):
        return _Producer(r.array)
    return _Producer(r.ringbuf, r.drops)


def _drain_rate(kind: str, n: int, rounds: int, decode=None, numpy_dtype=None) -> float:
    """Best events/s of draining a burst of ``n`` events already in the ring."""
    size = 1 << max(20, (n * 32 * 2 - 1).bit_length())     # room for n records and more
    cpu = online_cpus()[0]
    best = 0.0
    with _reader(kind, size=size, decode=decode) as r:
        prod = _producer(r)
        try:
            for _ in range(rounds + 1):                      # the first round warms up
                prod.run(n, cpu)
                gc.collect()
                t0 = time.perf_counter()
                if numpy_dtype is not None:
                    got = len(r.read_array(numpy_dtype, timeout=0))
                else:
                    got = len(r.read_batch(0))
                dt = time.perf_counter() - t0
                if got != n:
                    raise RuntimeError(f"{kind}: drained {got} of {n} events")
                best = max(best, n / dt)
        finally:
            prod.close()
    return best


def _concurrent(kind: str, n: int) -> dict:
    """A reader thread draining while a producer thread fills a 256 KiB ring."""
    cpus = online_cpus()
    pcpu = cpus[0]
    with _reader(kind, on_lost=lambda cpu, k: None) as r:
        prod = _producer(r)
        received = 0
        stop = threading.Event()

        def reader() -> None:
            nonlocal received
            while not stop.is_set():
                received += len(r.read_batch(0.01))

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        t0 = time.perf_counter()
        chunk = 1 << 16                   # test_run has ~15 ms of fixed cost per call
        busy = 0.0
        while prod.sent < n:
            t1 = time.perf_counter()
            prod.run(chunk, pcpu)
            busy += time.perf_counter() - t1
        for cpu in cpus:                  # perf: bring out pending LOST records
            time.sleep(0.02)
            prod.run(PER_RUN, cpu)
        deadline = time.monotonic() + 10
        while received + r.lost < prod.sent and time.monotonic() < deadline:
            time.sleep(0.001)
        dt = time.perf_counter() - t0
        stop.set()
        t.join()
        received += len(r.read_batch(0))
        out = {f"{kind}_concurrent_eps": received / dt,
               f"{kind}_concurrent_sent": prod.sent,
               f"{kind}_concurrent_producer_eps": (prod.sent - PER_RUN * len(cpus)) / busy,
               f"{kind}_concurrent_lost": r.lost,
               f"{kind}_concurrent_exact": received + r.lost == prod.sent}
        prod.close()
    return out


def _mmap_vs_cffi(n: int) -> float:
    """Drain rate through the mmap module divided by the rate through cffi."""
    try:
        import cffi
    except ImportError:  # pragma: no cover
        return float("nan")
    ffi = cffi.FFI()
    ffi.cdef("void *mmap(void *, size_t, int, int, int, long); int munmap(void *, size_t);")
    libc = ffi.dlopen(None)
    cpu = online_cpus()[0]
    size = 1 << max(20, (n * 32 * 2 - 1).bit_length())
    rates = {"mmap": 0.0, "cffi": 0.0}
    with PerfBuffer(size=size, decode="<QQ") as pb:
        prod = _Producer(pb.array)
        try:
            prod.run(n, cpu)
            ring = pb._rings[0]
            length = 4096 + ring.size
            addr = libc.mmap(ffi.NULL, length, 3, 1, ring.fd.fileno(), 0)  # RW, MAP_SHARED
            if int(ffi.cast("intptr_t", addr)) == -1:
                return float("nan")
            whole = memoryview(ffi.buffer(addr, length))
            views = {"mmap": ring.data, "cffi": whole[4096:]}
            head = int.from_bytes(ring.meta[1024:1032], "little")
            for _ in range(3):
                for name, data in views.items():
                    fake = _PerfRing()                       # walk without consuming
                    fake.cpu, fake.fd, fake.mm = 0, None, None
                    fake.meta = memoryview(bytearray(ring.meta))
                    fake.tail_cell = memoryview(bytearray(8)).cast("Q")   # a private copy
                    fake.data, fake.size, fake.tail = data, ring.size, ring.tail
                    out: list = []
                    gc.collect()
                    t0 = time.perf_counter()
                    got = pb._drain_ring(fake, pb._dec, out)
                    dt = time.perf_counter() - t0
                    assert got == (head - ring.tail) // 32
                    rates[name] = max(rates[name], got / dt)
            views.clear()
            del data, fake
            whole.release()
            libc.munmap(addr, length)
        finally:
            prod.close()
    return rates["mmap"] / rates["cffi"]


def run(quick: bool = False) -> dict:
    """Measure and return the numbers (events per second unless named otherwise)."""
    n = 50_000 if quick else 200_000
    rounds = 2 if quick else 4
    out: dict = {"events": n, "event_bytes": 16}
    import importlib.util
    have_numpy = importlib.util.find_spec("numpy") is not None
    for kind in ("perf", "ringbuf"):
        out[f"{kind}_drain_eps"] = _drain_rate(kind, n, rounds)
        out[f"{kind}_tuple_eps"] = _drain_rate(kind, n, rounds, decode="<QQ")
        out[f"{kind}_ctypes_eps"] = _drain_rate(kind, n, rounds, decode=Event)
        if have_numpy:
            out[f"{kind}_numpy_eps"] = _drain_rate(kind, n, rounds,
                                                   numpy_dtype=[("seq", "<u8"), ("value", "<u8")])
        out.update(_concurrent(kind, n * 4))
    out["mmap_module_vs_cffi"] = _mmap_vs_cffi(n)
    out["aim_eps"] = AIM
    out["aim_ok"] = min(out["perf_drain_eps"], out["ringbuf_drain_eps"],
                        out["perf_tuple_eps"], out["ringbuf_tuple_eps"]) >= AIM
    return out


if __name__ == "__main__":
    res = run(quick="--quick" in sys.argv)
    for key, value in res.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
