"""``bt -l``: pyebpf.lang.listing.list_probes prints what ``bpftrace -l`` prints
for tracepoints, a binary's functions and USDT probes (the installed
bpftrace 0.17 is the reference)."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from systools import PYTHON as SYSTEM_PYTHON
from waiting import wait_exec, wait_until

from pyebpf.lang.listing import list_probes
from pyebpf.lang.probes import SOFTWARE_EVENTS, ProbeSpecError

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


@pytest.mark.parametrize("pattern", [
    "tracepoint:sched:sched_process_exec",          # a __data_loc string
    "tracepoint:sched:sched_switch",                # char prev_comm[16]
    "tracepoint:syscalls:sys_enter_openat"])        # a pointer
def test_tracepoint_fields_like_bpftrace(pattern):
    # -lv: a __data_loc field is written as the format file declares it
    # ("__data_loc char[] filename"), not as the string it points to
    if shutil.which("bpftrace") is None:
        pytest.skip("bpftrace is not installed")
    proc = subprocess.run(["bpftrace", "-lv", pattern], capture_output=True, text=True,
                          timeout=120)
    assert list_probes(pattern, verbose=True) == proc.stdout.splitlines()


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
    for pattern in ("uprobe:", "usdt:", "nosuch:*", "uprobe:*", "uprobe:/bin/sh"):
        with pytest.raises(ProbeSpecError):
            list_probes(pattern)
    with pytest.raises(ProbeSpecError, match="does not exist"):
        list_probes("uprobe:/no/such/file:*")


def _bpftrace_l_pid(pattern: str, pid: int) -> list[str]:
    if shutil.which("bpftrace") is None:
        pytest.skip("bpftrace is not installed")
    proc = subprocess.run(["bpftrace", "-l", pattern, "-p", str(pid)], capture_output=True,
                          text=True, timeout=120)
    return proc.stdout.splitlines()


@pytest.mark.parametrize("form", ["*:{w}:*", "uprobe:{d}/btwork*:comp*", "usdt:{d}/btwo*:btw:*",
                                  "*:{d}/btworkload:lock*", "u*:{w}:*"])
def test_wildcard_kinds_and_files_like_bpftrace(form):
    import os
    w = bt_workload()
    pattern = form.format(w=w, d=os.path.dirname(w))
    ours = list_probes(pattern)
    assert ours and ours == bpftrace_l(pattern)


def test_kind_wildcards_without_a_path_are_the_kernels():
    got = list_probes("*ware:*")
    assert "software:cpu-clock:" in got and "hardware:cpu-cycles:" in got
    assert {p.split(":")[0] for p in got} == {"software", "hardware"}
    # hardware events are listed as bpftrace lists them, PMU or not
    assert [p for p in list_probes() if p.startswith("hardware:")]
    with pytest.raises(ProbeSpecError, match="No probe type matched for x\\*"):
        list_probes("x*:*")


def test_invalid_characters_are_refused_as_bpftrace_refuses_them():
    from pyebpf.lang.errors import LangError
    with pytest.raises(LangError) as info:
        list_probes("\\n")
    assert str(info.value).startswith("stdin:1:1-2: ERROR: invalid character '\\'")


def _maps_libc(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/maps") as f:
            return "/libc.so" in f.read()
    except OSError:
        return False


@pytest.mark.kernel
@pytest.mark.parametrize("pattern", ["*:*", "uprobe:*", "usdt:*", "usdt:*:btw:*", "uprobe:lock*",
                                     "usdt:{w}:*"])
def test_a_process_s_probes_like_bpftrace(pattern):
    w = bt_workload()
    pattern = pattern.format(w=w)
    proc = subprocess.Popen([w, "1000000", "1000"], stdout=subprocess.DEVNULL)
    try:
        wait_exec(proc.pid, w)      # (and its libraries mapped, as both tools list them)
        wait_until(lambda: _maps_libc(proc.pid), f"process {proc.pid} to map libc")
        ours = list_probes(pattern, pid=proc.pid)
        assert ours and ours == _bpftrace_l_pid(pattern, proc.pid)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.kernel
def test_a_process_in_another_mount_namespace(tmp_path):
    """-p of a process whose binary only its own mount namespace sees: listed,
    and attached, through /proc/PID/root."""
    import os
    import sys
    w = bt_workload()
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("needs unshare(1) and root")
    root = tmp_path / "private"
    root.mkdir()
    script = (f"mount -t tmpfs none {root} && cp {w} {root}/hidden_w && "
              f"exec {root}/hidden_w 1000000 1000")
    proc = subprocess.Popen([unshare, "-m", "--propagation", "private", "sh", "-c", script],
                            stdout=subprocess.DEVNULL)
    try:
        for _ in range(200):             # (bounded: until it has exec'ed)
            try:
                if os.readlink(f"/proc/{proc.pid}/exe").endswith("hidden_w"):
                    break
            except OSError:
                pass
            subprocess.run(["sleep", "0.01"])
        assert not os.path.exists(f"{root}/hidden_w")
        shown = f"/proc/{proc.pid}/root{root}/hidden_w"
        assert f"uprobe:{shown}:compute" in list_probes("uprobe:*", pid=proc.pid)
        assert f"usdt:{shown}:btw:request" in list_probes("usdt:*", pid=proc.pid)
        from .harness import ROOT
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        run = subprocess.run([sys.executable, "-m", "pyebpf", "bt", "-p", str(proc.pid), "-e",
                              f"uprobe:{root}/hidden_w:compute {{ printf(\"hit\\n\"); exit(); }}"],
                             capture_output=True, text=True, timeout=60, env=env)
        assert run.stdout.startswith("Attaching 1 probe...\nhit\n"), run.stderr
    finally:
        proc.kill()
        proc.wait()
