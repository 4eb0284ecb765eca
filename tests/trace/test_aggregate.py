"""In-kernel aggregations, fed deterministically by BPF_PROG_TEST_RUN, and
their printing compared with bpftrace's."""
import shutil
import subprocess

import pytest

from pyebpf.lang.aggregations import log2_bucket_range
from pyebpf.loader import load
from pyebpf.maps import ArrayMap
from pyebpf.program import R1, R6, R7, Program
from pyebpf.trace import Count, Histogram, Sum, format_count, format_hist, log2_bucket

N = 1000


def expected_buckets(values, bucket):
    out = {}
    for v in values:
        out[bucket(v)] = out.get(bucket(v), 0) + 1
    return out


def test_log2_bucket_matches_its_range():
    for v in [-5, 0, 1, 2, 3, 4, 7, 8, 1023, 1024, 2**40, 2**63 - 1]:
        lo, hi = log2_bucket_range(log2_bucket(v))
        assert (lo is None or lo <= v) and v < hi


@pytest.mark.kernel
def test_aggregations_in_the_kernel(no_fd_leak):
    """Each run gets a distinct value 0..N-1 (an atomic fetch-add on a map),
    so every aggregate has an exact expected value."""
    with ArrayMap("u64", 1, name="seq") as seq, Histogram("h") as h, \
            Histogram("hk", keyed=True) as hk, Histogram("lh", linear=(0, 20, 5)) as lh, \
            Count("c", keyed=True) as c, Count("n") as n, Sum("s") as s:
        p = Program("agg")
        p.mov(R6, 1)
        p.ld_map_value(R1, seq, 0)
        p.atomic_add(R1, 0, R6, fetch=True)
        p.mov(R7, R6).and_(R7, 3)
        h.emit(p, R6)
        hk.emit(p, R6, key=R7)
        lh.emit(p, R6)
        c.emit(p, key=R7)
        n.emit(p)
        s.emit(p, R6)
        p.ret(2)
        with load(p, "xdp") as prog:
            prog.test_run(bytes(64), repeat=N)
        values = range(N)
        assert h.read() == expected_buckets(values, log2_bucket)
        assert lh.read() == expected_buckets(values, lambda v: 0 if v < 0 else min(1 + v // 5, 5))
        assert hk.read() == {k: expected_buckets([v for v in values if v % 4 == k], log2_bucket)
                             for k in range(4)}
        assert c.read() == {k: N // 4 for k in range(4)}
        assert n.read() == N
        assert s.read() == sum(values)


@pytest.mark.skipif(shutil.which("bpftrace") is None, reason="bpftrace is not installed")
@pytest.mark.kernel
def test_printing_matches_bpftrace():
    values = [0, 1, 2, 3, 5, 300, 1500, 2_000_000, -1]
    lin = [7, 25, -1, 12, 12]
    script = "BEGIN { " + " ".join(f"@h = hist({v});" for v in values) + " " + \
        " ".join(f"@l = lhist({v}, 0, 20, 5);" for v in lin) + \
        " @c[1] = count(); @c[2] = count(); @c[2] = count(); exit(); }"
    out = subprocess.run(["bpftrace", "-e", script], capture_output=True, text=True, timeout=60).stdout
    ours = format_hist("h", expected_buckets(values, log2_bucket))
    assert ours in out, f"ours:\n{ours}\nbpftrace:\n{out}"
    lin_ours = format_hist("l", expected_buckets(lin, lambda v: 0 if v < 0 else min(1 + v // 5, 5)),
                           linear=(0, 20, 5))
    assert lin_ours in out, f"ours:\n{lin_ours}\nbpftrace:\n{out}"
    assert format_count("c", {1: 1, 2: 2}) in out
