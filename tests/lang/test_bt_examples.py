"""The programs the issue names, on tests/lang/btworkload.c: a USDT filter
with strings and variables, pthread_mutex_trylock failures by user stack,
an entry/return latency histogram -- run by bpftrace (checked against what
the workload is known to do) and compared with ``pyebpf bt`` (skipped while
``pyebpf bt`` does not exist)."""
from __future__ import annotations

import re

import pytest

from .harness import (bt_workload, compare_with_bpftrace, expected_deltas, expected_requests,
                      pyebpf_bt_available, run_bpftrace)

pytestmark = pytest.mark.kernel

USDT_FILTER = """BEGIN { @filter_host = "beta"; @filter_path = "/x"; }
usdt:%(w)s:btw:request {
  $host = str(arg0, arg1);
  if (arg2 != 0) { $path = str(arg2, arg3); }
  if ($path == @filter_path && $host == @filter_host) { printf("%%s %%s\\n", $host, $path); }
  @req[$host] = count();
}"""

SIGNED = """usdt:%(w)s:btw:delta { @d[arg1] = count(); @small[arg2] = sum(arg1);
  @neg[arg1 < 0] = count(); @lo = min(arg2); @hi = max(arg1);
  printf("%%d %%d\\n", arg1, arg2); }"""

TRYLOCK = """uretprobe:libc:pthread_mutex_trylock /retval != 0 && pid == cpid/ {
  @fail[ustack] = count(); }"""

LATENCY = """uprobe:%(w)s:nap { @start[tid] = nsecs; }
uretprobe:%(w)s:nap /@start[tid]/ { @lat_ms = hist((nsecs - @start[tid]) / 1000000);
  delete(@start[tid]); }"""


def _mask_addresses(text: str) -> str:
    # stacks of a process that has exited print as raw addresses, which ASLR moves
    return re.sub(r"0x[0-9a-f]+", "0xADDR", text)


@pytest.fixture(scope="module")
def w() -> str:
    return bt_workload()


# ---- the bpftrace side: the workload does what the scripts expect
def test_bpftrace_usdt_filter(w):
    text = run_bpftrace(USDT_FILTER % {"w": w}, command=f"{w} 24 100")
    hits = [h for h, p in expected_requests(24) if h == "beta" and p == "/x"]
    assert text.count("beta /x\n") == len(hits) == 2
    assert "@req[alpha.example]: 8" in text


def test_bpftrace_signed_usdt_arguments(w):
    text = run_bpftrace(SIGNED % {"w": w}, command=f"{w} 14 100")
    lines = [ln for ln in text.split("\n") if re.fullmatch(r"-?\d+ -?\d+", ln)]
    assert lines == [f"{d} {s}" for _i, d, s in expected_deltas(14)]
    assert "@d[-3]: 2" in text


def test_bpftrace_trylock_failures_by_stack(w):
    text = _mask_addresses(run_bpftrace(TRYLOCK, command=f"{w} 20 100"))
    counts = sorted(int(n) for n in re.findall(r"^\]: (\d+)$", text, re.M))
    assert counts == [4, 10]          # lock_b every 5th i, lock_a every 2nd


def test_bpftrace_latency(w):
    # naps of 2.5, 10 and 40 ms, two each: in milliseconds far from the
    # buckets' edges, so a loaded machine's delays do not move them
    text = run_bpftrace(LATENCY % {"w": w}, command=f"{w} 48 2500")
    assert re.search(r"^\[2, 4\)\s+2 \|", text, re.M), text
    assert re.search(r"^\[8, 16\)\s+2 \|", text, re.M), text
    assert re.search(r"^\[32, 64\)\s+2 \|", text, re.M), text


# ---- pyebpf bt against bpftrace
needs_bt = pytest.mark.skipif(pyebpf_bt_available() is not None,
                              reason=str(pyebpf_bt_available()))


@needs_bt
def test_usdt_filter_same_as_bpftrace(w):
    compare_with_bpftrace(USDT_FILTER % {"w": w}, command=f"{w} 24 100")


@needs_bt
def test_signed_usdt_arguments_same_as_bpftrace(w):
    compare_with_bpftrace(SIGNED % {"w": w}, command=f"{w} 14 100")


@needs_bt
def test_trylock_by_stack_same_as_bpftrace(w):
    from .harness import normalize, run_pyebpf_bt
    theirs = normalize(_mask_addresses(run_bpftrace(TRYLOCK, command=f"{w} 20 100")))
    ours = normalize(_mask_addresses(run_pyebpf_bt(TRYLOCK, command=f"{w} 20 100")))
    assert ours == theirs


@needs_bt
def test_latency_same_as_bpftrace(w):
    compare_with_bpftrace(LATENCY % {"w": w}, command=f"{w} 48 2500")
