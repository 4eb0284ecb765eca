"""The ring walks on synthetic memory: every layout a kernel may leave behind.

The readers are given fake rings (bytearrays laid out like the kernel's), so
records that wrap the end, lost records, busy and discarded records, and
every start offset can be generated at will by hypothesis.
"""
from __future__ import annotations

import ctypes
import struct

import pytest
from hypothesis import given, settings, strategies as st

from pyebpf.events import (BPF_RINGBUF_BUSY_BIT, BPF_RINGBUF_DISCARD_BIT, PerfBuffer,
                           RingBufferReader, _PerfRing, _position_cell)
from pyebpf.maps import Bytes

# ---------------------------------------------------------------- perf


def fake_perf(size: int, tail: int, records: list[tuple], decode=None):
    """A PerfBuffer over one fake ring of ``size`` bytes whose data_tail is
    ``tail``, holding ``records``: ("s", payload) samples or ("l", count)."""
    data = bytearray(size)
    pos = tail
    for rec in records:
        if rec[0] == "s":
            payload = rec[1]
            raw = (len(payload) + 4 + 7) // 8 * 8 - 4      # 4 + raw is a multiple of 8
            body = struct.pack("<I", raw) + payload + b"\xee" * (raw - len(payload))
            blob = struct.pack("<IHH", 9, 0, 8 + len(body)) + body
        else:
            blob = struct.pack("<IHHQQ", 2, 0, 24, 77, rec[1])
        for i, b in enumerate(blob):
            data[(pos + i) % size] = b
        pos += len(blob)
    assert pos - tail <= size
    meta = bytearray(4096)
    struct.pack_into("<QQQQ", meta, 1024, pos, tail, 4096, size)
    pb = PerfBuffer.__new__(PerfBuffer)
    pb._setup(decode, None, lambda cpu, n: None, 0.05)
    r = _PerfRing()
    r.cpu, r.fd, r.mm, r.meta, r.data, r.size, r.tail = 0, None, None, memoryview(meta), \
        memoryview(data), size, tail
    r.tail_cell = _position_cell(r.meta, 1032)
    pb._rings = [r]
    return pb, r, pos


def padded(payload: bytes) -> bytes:
    raw = (len(payload) + 4 + 7) // 8 * 8 - 4
    return payload + b"\xee" * (raw - len(payload))


record = st.one_of(
    st.tuples(st.just("s"), st.binary(min_size=0, max_size=60)),
    st.tuples(st.just("l"), st.integers(1, 1 << 40)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(record, max_size=40), st.integers(0, 1 << 20), st.sampled_from([256, 512, 1024]))
def test_perf_walk_any_layout(records, tail, size):
    tail = tail * 8                                   # records are 8-aligned
    total = sum(8 + 4 + len(padded(r[1])) if r[0] == "s" else 24 for r in records)
    if total > size:
        records = records[:len(records) // 2]
        total = sum(8 + 4 + len(padded(r[1])) if r[0] == "s" else 24 for r in records)
        if total > size:
            return
    pb, ring, head = fake_perf(size, tail, records)
    try:
        got = pb.drain()
        assert got == [padded(r[1]) for r in records if r[0] == "s"]
        assert pb.lost == sum(r[1] for r in records if r[0] == "l")
        assert struct.unpack_from("<Q", ring.meta, 1032)[0] == head == ring.tail
        assert pb.drain() == []
    finally:
        pb.close()


@pytest.mark.parametrize("payload_size", [12, 36, 100])
def test_perf_uniform_runs_across_the_end(payload_size):
    size = 1024
    rec = 8 + 4 + len(padded(bytes(payload_size)))
    for start in range(0, size, 8):
        payloads = [struct.pack("<Q", start + i) + bytes(payload_size - 8)
                    for i in range(size // rec)]
        pb, ring, head = fake_perf(size, start, [("s", p) for p in payloads], decode="<Q")
        try:
            assert pb.drain() == [start + i for i in range(len(payloads))]
        finally:
            pb.close()


def test_perf_header_in_the_last_8_bytes():
    size = 256
    pb, ring, head = fake_perf(size, size - 8, [("s", b"abcdefgh" * 2), ("l", 5),
                                                ("s", b"xyz")])
    try:
        assert pb.drain() == [b"abcdefgh" * 2 + b"\xee" * 4, b"xyz" + b"\xee"]
        assert pb.lost == 5
    finally:
        pb.close()


def test_perf_short_records_are_counted_not_decoded():
    pb, ring, head = fake_perf(512, 0, [("s", b"12345678"), ("s", b"1234")], decode="<QQ")
    try:
        # 8 and 4 payload bytes (+ padding: raw 12 / 4) are both short of 16
        assert pb.drain() == []
        assert pb.malformed == 2
    finally:
        pb.close()


class Pair(ctypes.Structure):
    _fields_ = [("a", ctypes.c_uint32), ("b", ctypes.c_uint16)]


def test_perf_decoders_on_mixed_runs():
    recs = [("s", struct.pack("<IH", i, i * 2) + b"zz") for i in range(20)]
    recs.insert(7, ("l", 3))
    for decode, check in [
        ("<IH", lambda got: got == [(i, i * 2) for i in range(20)]),
        ("@IH", lambda got: got == [(i, i * 2) for i in range(20)]),
        (Pair, lambda got: [(p.a, p.b) for p in got] == [(i, i * 2) for i in range(20)]),
        (Bytes(6), lambda got: got == [r[1][:6] for r in recs if r[0] == "s"]),
        (len, lambda got: got == [12] * 20),
    ]:
        pb, ring, head = fake_perf(1024, 1000, recs, decode=decode)
        try:
            assert check(pb.drain()), decode
            assert pb.lost == 3
        finally:
            pb.close()


# ---------------------------------------------------------------- ring buffer


def fake_ringbuf(size: int, cons: int, records: list[tuple], decode=None):
    """A RingBufferReader over a fake ring: ``records`` are (payload, flag)
    with flag "", "busy" or "discard"."""
    ring = bytearray(size)
    pos = cons
    for payload, flag in records:
        ln = len(payload) | {"": 0, "busy": BPF_RINGBUF_BUSY_BIT,
                             "discard": BPF_RINGBUF_DISCARD_BIT}[flag]
        blob = struct.pack("<II", ln, 0) + payload
        blob += bytes(-len(blob) % 8)
        for i, b in enumerate(blob):
            ring[(pos + i) % size] = b
        pos += len(blob)
    assert pos - cons <= size
    rb = RingBufferReader.__new__(RingBufferReader)
    rb._setup(decode, None, None, 0.05)
    rb.size = size
    rb.drops = None
    rb._cons_view = memoryview(bytearray(struct.pack("<Q", cons)))
    rb._cons_cell = _position_cell(rb._cons_view, 0)
    rb._prod_view = memoryview(bytearray(struct.pack("<Q", pos)))
    rb._data = memoryview(bytes(ring + ring))           # the double mapping
    rb._cons = cons
    return rb, pos


rb_record = st.tuples(st.binary(min_size=0, max_size=50),
                      st.sampled_from(["", "", "", "discard", "busy"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(rb_record, max_size=30), st.integers(0, 1 << 20), st.sampled_from([256, 512]))
def test_ringbuf_walk_any_layout(records, cons, size):
    cons *= 8
    while sum(8 + (len(p) + 7) // 8 * 8 for p, _ in records) > size:
        records = records[:-1]
    rb, prod = fake_ringbuf(size, cons, records)
    try:
        got = rb.drain()
        want, stop = [], cons
        for payload, flag in records:
            if flag == "busy":
                break
            stop += 8 + (len(payload) + 7) // 8 * 8
            if flag == "":
                want.append(payload)
        else:
            stop = prod
        assert got == want
        assert struct.unpack_from("<Q", rb._cons_view, 0)[0] == stop == rb._cons
    finally:
        rb.close()


def test_ringbuf_uniform_run_stops_at_busy_record():
    recs = [(struct.pack("<Q", i), "") for i in range(50)]
    recs[30] = (recs[30][0], "busy")
    rb, prod = fake_ringbuf(4096, 4096 - 24 * 5, recs, decode="u64")
    try:
        assert rb.drain() == list(range(30))
        assert rb._cons == 4096 - 24 * 5 + 30 * 16
    finally:
        rb.close()


def test_numpy_from_mixed_records():
    np = pytest.importorskip("numpy")
    recs = [("s", struct.pack("<QI", i, i + 1)) for i in range(40)]
    recs.insert(3, ("l", 1))
    pb, ring, head = fake_perf(1024, 1000, recs, decode="<QI")
    try:
        a = pb.read_array()
        assert a.dtype.names == ("f0", "f1") and len(a) == 40
        assert a["f0"].tolist() == list(range(40)) and a["f1"].tolist() == list(range(1, 41))
        assert isinstance(a, np.ndarray)
    finally:
        pb.close()
