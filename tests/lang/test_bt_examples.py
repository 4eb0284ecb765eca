"""The programs the issue names, on tests/lang/btworkload.c: a USDT filter
with strings and variables, pthread_mutex_trylock failures by user stack,
an entry/return latency histogram -- run by bpftrace (checked against what
the workload is known to do) and compared with ``pyebpf bt``."""
from __future__ import annotations

import re

import pytest

from .harness import bt_workload, compare_with_bpftrace, expected_deltas, expected_requests, run_bpftrace

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
uretprobe:%(w)s:nap /@start[tid]/ { $ms = (nsecs - @start[tid]) / 1000000;
  printf("lat %%d\\n", $ms); @lat_ms = hist($ms); delete(@start[tid]); }"""

#: the naps of ``btworkload 48 2500`` in milliseconds (a nap never sleeps less)
NAPS_MS = [2, 10, 40, 2, 10, 40]


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


def _latencies(text: str) -> tuple[list[int], str]:
    """The ``lat N`` lines' values of a LATENCY run, and the rest of its output."""
    values = [int(v) for v in re.findall(r"^lat (\d+)$", text, re.M)]
    rest = "\n".join(ln for ln in text.split("\n") if not ln.startswith("lat "))
    return values, rest


def _check_latency_run(text: str) -> None:
    """A LATENCY run's histogram is what bpftrace prints for the latencies that
    same run measured, which are the naps' or longer (a loaded machine only
    delays): one run's own data, so no bucket depends on the machine's load."""
    values, hist = _latencies(text)
    assert len(values) == len(NAPS_MS), text
    assert all(v >= n for v, n in zip(sorted(values), sorted(NAPS_MS))), values
    fill = " ".join(f"@lat_ms = hist({v});" for v in values)
    empty = "@start[0] = 0; delete(@start[0]);"       # printed at exit, empty
    assert hist == run_bpftrace(f"BEGIN {{ {fill} {empty} exit(); }}"), text


def test_bpftrace_latency(w):
    _check_latency_run(run_bpftrace(LATENCY % {"w": w}, command=f"{w} 48 2500"))


# ---- pyebpf bt against bpftrace
def test_usdt_filter_same_as_bpftrace(w):
    compare_with_bpftrace(USDT_FILTER % {"w": w}, command=f"{w} 24 100")


def test_signed_usdt_arguments_same_as_bpftrace(w):
    compare_with_bpftrace(SIGNED % {"w": w}, command=f"{w} 14 100")


def _stacks(text: str) -> dict[int, list[str]]:
    """``@fail[ustack]``'s stacks by their count (the two paths' counts differ)."""
    found = re.findall(r"^@fail\[\n((?:    \S+\n)+)\]: (\d+)$", text, re.M)
    return {int(n): [ln.strip() for ln in frames.splitlines()] for frames, n in found}


def test_trylock_by_stack_same_as_bpftrace(w):
    """bpftrace 0.17 prints a user stack of a process that exited as bare
    addresses; pyebpf still names its frames (on purpose). So the counts per
    stack must be equal and each frame pyebpf names in the workload must be
    the address bpftrace printed, less one load base (ASLR) for all of them."""
    from pyebpf.elf import open_elf

    from .harness import run_pyebpf_bt
    theirs = _stacks(run_bpftrace(TRYLOCK, command=f"{w} 20 100"))
    ours = _stacks(run_pyebpf_bt(TRYLOCK, command=f"{w} 20 100"))
    assert sorted(ours) == sorted(theirs) == [4, 10]
    assert [f.split("+")[0] for f in ours[10][:3]] == ["try_take", "lock_a", "main"], ours
    assert [f.split("+")[0] for f in ours[4][:3]] == ["lock_b_inner", "lock_b", "main"], ours
    elf = open_elf(w)
    bases = set()
    for n in (4, 10):
        assert len(ours[n]) == len(theirs[n]), (ours, theirs)
        for mine, addr in list(zip(ours[n], theirs[n]))[:3]:
            name, off = mine.split("+")
            bases.add(int(addr, 16) - elf.resolve(name, check_boundary=False).address - int(off))
        assert ours[n][3:] == ours[4][3:] and theirs[n][3:] == theirs[4][3:]  # libc's part
    assert len(bases) == 1 and bases.pop() % 4096 == 0, (ours, theirs)


def test_latency_same_as_bpftrace(w):
    from .harness import run_pyebpf_bt
    _check_latency_run(run_pyebpf_bt(LATENCY % {"w": w}, command=f"{w} 48 2500"))
