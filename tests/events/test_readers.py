"""Both readers against the real kernel, fed by BPF_PROG_TEST_RUN.

Each XDP run outputs numbered events (an atomic fetch-add on a map), so
every event is distinct and its exact bytes are known (producers.expected).
"""
from __future__ import annotations

import ctypes
import gc
import signal
import select
import struct
import threading
import time

import pytest

from waiting import poll_until

from pyebpf.errors import LostEventsWarning, SizeError
from pyebpf.events import PerfBuffer, ReaderClosedError, RingBufferReader
from pyebpf.kernel.cpus import online_cpus
from pyebpf.maps import Bytes, PerCpuArrayMap, PerfEventArray, RingBuf

from .producers import Producer, expected

pytestmark = pytest.mark.kernel
CPUS = online_cpus()


def seqs(events) -> list[int]:
    return [struct.unpack_from("<Q", e)[0] for e in events]


# ------------------------------------------------------------ contents


def test_every_event_arrives_exactly(kind, no_fd_leak):
    with kind.reader() as r, kind.producer(r, 16) as prod:
        sent = prod.run(5000)
        got = r.read_batch(timeout=1)
        while len(got) < sent:
            more = r.read_batch(timeout=1)
            assert more, f"only {len(got)} of {sent} events arrived"
            got += more
        assert sorted(seqs(got)) == list(range(sent))
        # perf payloads carry the kernel's padding: raw_size 20 for 16 bytes
        assert {len(e) for e in got} == ({20} if kind.name == "perf" else {16})
        assert all(e[:16] == expected(s, 16) for e, s in zip(got, seqs(got)))
        assert r.lost == 0 and r.received == sent and r.malformed == 0


@pytest.mark.parametrize("payload", [12, 36, 100])
def test_records_wrapping_the_end_of_a_one_page_ring(kind, payload, no_fd_leak):
    # record sizes 24/48/112 (perf) and 24/48/112 (ring buffer) do not divide
    # the 4096-byte ring, so records straddle its end at every offset in turn
    with kind.reader(size=4096, decode=Bytes(payload)) as r, kind.producer(r, payload) as prod:
        got = []
        for _ in range(40):
            prod.run(20, cpu=CPUS[0])
            batch = r.drain()
            assert len(batch) == 20
            got += batch
        assert [struct.unpack_from("<Q", e)[0] for e in got] == list(range(800))
        assert got == [expected(s, payload) for s in range(800)]
        assert r.lost == 0


def test_perf_raw_payload_keeps_the_kernels_padding(no_fd_leak):
    # 13 bytes are not a multiple of 4: raw_size is 20 (4 + 20 = 24, 8-aligned)
    from pyebpf.loader import load
    from pyebpf.program import R1, R6, R10, Program
    with PerfBuffer(size=4096) as pb:
        p = Program("pad")
        p.mov(R6, R1)
        off = p.stack_zero(16)
        p.store(R10, off, 0x41, 1)
        p.perf_event_output(pb.array, off, 13)
        p.ret(2)
        with load(p, "xdp") as prog:
            prog.test_run(bytes(64))
        (ev,) = pb.read_batch(1)
        assert len(ev) == 20 and ev[:13] == b"A" + bytes(12)


# ------------------------------------------------------------ losses


def test_perf_lost_plus_received_is_sent(no_fd_leak):
    reports = []
    with PerfBuffer(size=4096, on_lost=lambda cpu, n: reports.append((cpu, n))) as pb, \
            Producer(pb.array, 16) as prod:
        cpu = CPUS[-1]
        prod.run(1000, cpu=cpu)
        first = pb.drain()
        assert 0 < len(first) < 1000
        # the kernel writes the LOST record before the next sample that fits
        prod.run(1, cpu=cpu)
        rest = pb.drain()
        got = first + rest
        assert len(got) + pb.lost == prod.sent == 1001
        assert pb.lost_per_cpu == {cpu: pb.lost} and reports == [(cpu, pb.lost)]
        assert seqs(got) == list(range(len(first))) + [1000]


def test_ringbuf_dropped_plus_received_is_sent(no_fd_leak):
    reports = []
    drops = PerCpuArrayMap("u64", 2)
    with drops, RingBufferReader(size=4096, drops=drops, drop_slot=1,
                                 on_lost=lambda cpu, n: reports.append((cpu, n))) as rb, \
            Producer(rb.ringbuf, 16, drops=drops, drop_slot=1) as prod:
        prod.run(1000, cpu=CPUS[-1])
        got = rb.drain()
        assert 0 < len(got) < 1000
        assert len(got) + rb.lost == 1000
        assert rb.dropped == rb.lost and rb.lost_per_cpu == {CPUS[-1]: rb.lost}
        rb.drain()
        assert reports == [(CPUS[-1], rb.lost)]
        assert seqs(got) == list(range(len(got)))
    assert drops.closed                      # ours, closed by the with block


def test_lost_events_warn_unless_handled(kind, no_fd_leak):
    with kind.reader(size=4096) as r, kind.producer(r, 16) as prod:
        with pytest.warns(LostEventsWarning, match="events lost") as rec:
            prod.run(600, cpu=CPUS[0])
            r.drain()
            prod.run(1, cpu=CPUS[0])         # (perf: brings the LOST record)
            r.drain()
        assert rec[0].filename == __file__   # points at the caller
        assert r.lost > 0


def test_concurrent_reader_accounts_for_every_event(kind, no_fd_leak):
    """A background reader and a producer on every CPU, with a small ring."""
    seen: list[bytes] = []
    with kind.reader(size=8192, on_lost=lambda cpu, n: None) as r, \
            kind.producer(r, 16, per_run=8) as prod:
        r.start(seen.append)
        for _ in range(20):
            for cpu in CPUS:
                prod.run(100, cpu=cpu)
        # A perf ring's LOST record is written by that CPU's next output
        # once the reader made room: until every event is seen or counted
        # lost, write one more event on each CPU and give the reader time
        # to take it (a write into a still-full ring is itself lost, and
        # the next round reports it)
        def accounted() -> bool:
            return len(seen) + r.lost >= prod.sent

        deadline = time.monotonic() + 30
        while not poll_until(accounted, 0.5):
            assert time.monotonic() < deadline, \
                f"{prod.sent} sent, {len(seen)} seen, {r.lost} lost after 30 s"
            for cpu in CPUS:
                prod.run(1, cpu=cpu)
        r.stop()
        r._thread.join(5)
        assert r.thread_error is None
        assert len(seen) + r.lost == prod.sent
        assert len(set(seqs(seen))) == len(seen)


# ------------------------------------------------------------ decoding


class Ev(ctypes.Structure):
    _fields_ = [("seq", ctypes.c_uint64), ("w8", ctypes.c_uint32), ("w12", ctypes.c_uint32)]


@pytest.mark.parametrize("decode,check", [
    ("<QII", lambda e, s: e == (s, s + 8, s + 12)),
    ("u64", lambda e, s: e == s),
    (Ev, lambda e, s: (e.seq, e.w8, e.w12) == (s, s + 8, s + 12)),
    (Bytes(8), lambda e, s: e == struct.pack("<Q", s)),
    (lambda b: struct.unpack_from("<Q", b)[0] * 2, lambda e, s: e == 2 * s),
])
def test_decoders(kind, decode, check, no_fd_leak):
    with kind.reader(decode=decode) as r, kind.producer(r, 16) as prod:
        prod.run(300, cpu=CPUS[0])
        got = r.read_batch(1)
        assert len(got) == 300
        assert all(check(e, s) for e, s in zip(got, range(300)))


def test_read_array(kind, no_fd_leak):
    np = pytest.importorskip("numpy")
    with kind.reader(decode=Ev) as r, kind.producer(r, 16) as prod:
        prod.run(500, cpu=CPUS[0])
        a = r.read_array(timeout=1)
        assert a.dtype.names == ("seq", "w8", "w12") and len(a) == 500
        assert (a["seq"] == np.arange(500)).all() and (a["w12"] == a["seq"] + 12).all()
        prod.run(10, cpu=CPUS[0])
        b = r.read_array(np.dtype([("seq", "<u8"), ("lo", "<u4")]), timeout=1)
        assert b["seq"].tolist() == list(range(500, 510))
        assert b["lo"].tolist() == [s + 8 for s in range(500, 510)]
        assert len(r.read_array(timeout=0)) == 0


def test_read_array_needs_a_layout(kind, no_fd_leak):
    pytest.importorskip("numpy")
    with kind.reader() as r:
        with pytest.raises(ValueError, match="dtype"):
            r.read_array(timeout=0)


# ------------------------------------------------------------ delivery


def test_poll_delivers_in_order_and_survives_a_failing_callback(kind, no_fd_leak):
    got = []

    def cb(ev):
        if ev == 5 and not got.count("boom"):
            got.append("boom")
            raise KeyboardInterrupt
        got.append(ev)

    with kind.reader(decode="u64", callback=cb) as r, kind.producer(r, 16) as prod:
        assert r.poll(0) == 0
        prod.run(10, cpu=CPUS[0])
        with pytest.raises(KeyboardInterrupt):
            r.poll(1)
        assert got == [0, 1, 2, 3, 4, "boom"]
        prod.run(2, cpu=CPUS[0])
        assert r.poll(1) == 6                  # 6..9 first, then the new 10, 11
        assert got[6:] == [6, 7, 8, 9, 10, 11]


def test_poll_without_callback_is_an_error(kind, no_fd_leak):
    with kind.reader() as r:
        with pytest.raises(ValueError, match="callback"):
            r.poll(0)


def test_read_batch_max_events_and_timeout(kind, no_fd_leak):
    with kind.reader(decode="u64") as r, kind.producer(r, 16) as prod:
        t0 = time.monotonic()
        assert r.read_batch(timeout=0.15) == []
        assert time.monotonic() - t0 >= 0.14       # a timeout never ends early
        prod.run(10, cpu=CPUS[0])
        assert r.read_batch(1, max_events=4) == [0, 1, 2, 3]
        assert r.read_batch(0) == [4, 5, 6, 7, 8, 9]


def test_iteration_until_stop(kind, no_fd_leak):
    with kind.reader(decode="u64") as r, kind.producer(r, 16) as prod:
        prod.run(10, cpu=CPUS[0])
        it = iter(r)
        assert [next(it) for _ in range(3)] == [0, 1, 2]
        it.close()                             # events 3..9 stay queued
        threading.Timer(0.2, r.stop).start()
        assert list(r) == list(range(3, 10))   # (it returns: stop() ended it)
        prod.run(1, cpu=CPUS[0])
        assert r.drain() == [10]


def test_background_thread_stops_on_close(kind, no_fd_leak):
    seen = []
    r = kind.reader(decode="u64")
    prod = kind.producer(r, 16)
    t = r.start(seen.append)
    prod.run(50, cpu=CPUS[0])
    poll_until(lambda: len(seen) >= 50, 10)
    r.close()
    assert not t.is_alive() and seen == list(range(50))
    prod.close()


# ------------------------------------------------------------ wakeups


def test_perf_wakes_by_watermark_and_flushes_below_it(no_fd_leak):
    with PerfBuffer(size=64 * 1024, flush_interval=0.05) as pb, Producer(pb.array, 16) as prod:
        assert pb.watermark == 16 * 1024
        prod.run(3, cpu=CPUS[0])
        # 3 x 32 bytes are below the watermark: no wakeup...
        assert select.select([pb.fileno()], [], [], 0.05)[0] == []
        # ...but the poll timeout still delivers them
        # (a bounded wait: were there no flush, this would block)
        assert len(pb.read_batch(timeout=30)) == 3
    with PerfBuffer(size=64 * 1024, wakeup_events=1) as pb, Producer(pb.array, 16) as prod:
        prod.run(1, cpu=CPUS[0])
        assert select.select([pb.fileno()], [], [], 1)[0] == [pb.fileno()]


def test_ringbuf_wakes_on_data(no_fd_leak):
    with RingBufferReader(size=4096) as rb, Producer(rb.ringbuf, 16) as prod:
        assert select.select([rb.fileno()], [], [], 0)[0] == []
        prod.run(1)
        assert select.select([rb.fileno()], [], [], 1)[0] == [rb.fileno()]


def test_ringbuf_skips_discarded_records(no_fd_leak):
    with RingBufferReader(size=4096, decode="u64") as rb, \
            Producer(rb.ringbuf, 12, per_run=4, discard_odd=True) as prod:
        prod.run(25)
        assert rb.read_batch(1) == list(range(0, 100, 2))


# ------------------------------------------------------------ lifetime


def test_close_is_idempotent_and_final(kind, no_fd_leak):
    r = kind.reader()
    r.close()
    r.close()
    assert r.closed
    for call in (lambda: r.read_batch(0), lambda: r.drain(), r.fileno):
        with pytest.raises(ReaderClosedError):
            call()


def test_closed_on_garbage_collection(kind, no_fd_leak):
    r = kind.reader()
    with kind.producer(r, 16) as prod:
        prod.run(10)
    r.drain()
    del r
    gc.collect()


def test_with_block_closes_after_an_exception(kind, no_fd_leak):
    with pytest.raises(RuntimeError):
        with kind.reader() as r:
            raise RuntimeError("boom")
    assert r.closed


def test_keyboard_interrupt_in_a_poll_loop_leaves_nothing_open(kind, no_fd_leak):
    def cb(ev):
        raise KeyboardInterrupt

    r = kind.reader(callback=cb)
    prod = kind.producer(r, 16)
    prod.run(5)
    deadline = time.monotonic() + 10           # should the callback never fire: fail
    try:
        with pytest.raises(KeyboardInterrupt):
            while time.monotonic() < deadline:
                r.poll(1)
    finally:
        r.close()
        prod.close()


def test_ctrl_c_while_waiting(kind, no_fd_leak):
    # Python keeps SIGINT ignored when it started ignored (pytest run as a
    # background job of a script, under nohup...): the test sets the handler
    # Python installs otherwise, so that it does not depend on how it was run
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    main = threading.get_ident()
    ctrl_c = threading.Timer(0.2, signal.pthread_kill, (main, signal.SIGINT))
    with kind.reader(decode="u64") as r, kind.producer(r, 16) as prod:
        # should the interrupt not come, an event ends the wait after 10 s:
        # read_batch returns and pytest.raises fails instead of hanging
        rescue = threading.Timer(10, prod.run, (1,))
        try:
            ctrl_c.start()
            rescue.start()
            with pytest.raises(KeyboardInterrupt):
                r.read_batch(timeout=None)       # blocks: nothing is sent
        finally:
            rescue.cancel()
            ctrl_c.join()
            rescue.join()
            signal.signal(signal.SIGINT, old)
        prod.run(3)
        assert r.read_batch(1) == [0, 1, 2]    # still usable afterwards


def test_failed_construction_leaves_nothing_open(no_fd_leak):
    with pytest.raises(SizeError, match="no slot"):
        PerfBuffer(cpus=[10_000])
    with pytest.raises(TypeError):
        RingBufferReader(RingBuf(4096), drops=PerfEventArray())
    with pytest.raises(ValueError, match="flush_interval"):
        RingBufferReader(flush_interval=0)
    gc.collect()


def test_maps_given_by_the_user_stay_open(no_fd_leak):
    with PerfEventArray() as arr, RingBuf(4096) as ring:
        with PerfBuffer(arr) as pb:
            assert pb.array is arr
        with RingBufferReader(ring) as rb:
            assert rb.ringbuf is ring and rb.lost == 0
        assert not arr.closed and not ring.closed
        # the closed reader emptied its slots; a new reader takes them over
        with PerfBuffer(arr, size=4096) as pb, Producer(arr, 16) as prod:
            prod.run(3)
            assert len(pb.read_batch(1)) == 3


def test_pause_and_resume(no_fd_leak):
    with PerfBuffer(size=4096, on_lost=lambda cpu, n: None) as pb, \
            Producer(pb.array, 16) as prod:
        pb.pause()
        prod.run(5, cpu=CPUS[0])
        assert pb.drain() == []
        pb.resume()
        prod.run(2, cpu=CPUS[0])
        assert seqs(pb.read_batch(1)) == [5, 6]
        assert pb.lost == 5                   # outputs while paused count as lost
