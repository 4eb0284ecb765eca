"""``bt -l``: pyebpf.lang.probes.list_probes prints what ``bpftrace -l`` prints
for tracepoints, a binary's functions and USDT probes (the installed
bpftrace 0.17 is the reference)."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from systools import PYTHON as SYSTEM_PYTHON

from pyebpf.lang.probes import SOFTWARE_EVENTS, ProbeSpecError, list_probes

from .harness import bt_workload

PYTHON = SYSTEM_PYTHON


def bpftrace_l(pattern: str) -> list[str]:
    if shutil.which("bpftrace") is None:
        pytest.skip("bpftrace is not installed")
    proc = subprocess.run(["bpftrace", "-l", pattern], capture_output=True, text=True,
                          timeout=120)
    return proc.stdout.splitlines()


@pytest.mark.parametrize("pattern", [
    "tracepoint:syscalls:sys_enter_open*", "t:sched:sched_sw*", "tracepoint:sched:*",
    "tracepoint:*:sys_enter_openat", "tracepoint:*", "tracepoint:sched:sched_switch",
    "tracepoint:nosuch:*"])
def test_tracepoints_like_bpftrace(pattern):
    assert list_probes(pattern) == bpftrace_l(pattern)


@pytest.mark.parametrize("suffix", ["*", "lock*", "*e*", "nap", "nomatch*"])
def test_workload_functions_like_bpftrace(suffix):
    w = bt_workload()
    pattern = f"uprobe:{w}:{suffix}"
    ours = list_probes(pattern)
    assert ours == bpftrace_l(pattern)
    assert (f"uprobe:{w}:lock_b_inner" in ours) == (suffix in ("*", "lock*", "*e*"))


@pytest.mark.parametrize("kind", ["uretprobe", "u"])
def test_short_and_return_kinds_like_bpftrace(kind):
    w = bt_workload()
    pattern = f"{kind}:{w}:lock*"
    assert list_probes(pattern) == bpftrace_l(pattern)


@pytest.mark.parametrize("suffix", ["*", "btw:*", "*:g*", "delta", "nomatch"])
@pytest.mark.parametrize("kind", ["usdt", "U"])
def test_workload_usdt_like_bpftrace(kind, suffix):
    w = bt_workload()
    pattern = f"{kind}:{w}:{suffix}"
    assert list_probes(pattern) == bpftrace_l(pattern)


@pytest.mark.parametrize("suffix", ["*", "python:function*", "*:gc__*"])
def test_python_usdt_like_bpftrace(suffix):
    import os
    if not os.path.exists(PYTHON):
        pytest.skip(f"{PYTHON} is not installed")
    pattern = f"usdt:{PYTHON}:{suffix}"
    ours = list_probes(pattern)
    assert ours == bpftrace_l(pattern)
    assert ours


def test_software_events():
    # bpftrace 0.17 lists the literal "software:*:" here (a bug of that
    # version); pyebpf lists each event bpftrace accepts
    assert list_probes("software:*") == [f"software:{n}:" for n in sorted(SOFTWARE_EVENTS)]
    assert list_probes("software:cpu*") == ["software:cpu-clock:", "software:cpu-migrations:"]
    assert list_probes("software:faults") == ["software:page-faults:"]     # an alias


def test_no_pattern_and_bare_patterns():
    every = list_probes()
    assert "tracepoint:sched:sched_switch" in every and "software:cpu-clock:" in every
    assert list_probes("*sched_switch*") == ["tracepoint:sched:sched_switch"]


def test_bad_patterns_are_clear_errors():
    for pattern in ("uprobe:", "usdt:", "nosuch:*"):
        with pytest.raises(ProbeSpecError):
            list_probes(pattern)
    with pytest.raises(ProbeSpecError, match="does not exist"):
        list_probes("uprobe:/no/such/file:*")
