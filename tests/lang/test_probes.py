"""pyebpf.lang.probes: attach points -> the probes bpftrace would attach,
named as bpftrace's ``probe`` builtin names them (checked against the
installed bpftrace on the same workload), the types the semantic pass gets,
clear refusals, and the new probe sources attached for real."""
from __future__ import annotations

import os
import re
import subprocess
import time

import pytest
from waiting import wait_exec
from systools import PYTHON as SYSTEM_PYTHON

from pyebpf.lang.ast import AttachPoint, Pos
from pyebpf.lang.probes import (PerfEventSource, ProbeSpecError, RawTracepointSource,
                                Resolver, resolve)
from pyebpf.lang.types import int_type

from .harness import bt_workload, run_bpftrace

P = Pos(1, 1)


def ap(raw: str, func_offset: int | None = None) -> AttachPoint:
    provider, _, rest = raw.partition(":")
    return AttachPoint(P, raw, provider, rest.split(":") if rest else [], func_offset)


def names(raw: str, **kw) -> list[str]:
    return [r.name for r in resolve(ap(raw), **kw)]


@pytest.fixture(scope="module")
def w() -> str:
    return bt_workload()


def _address_of(path: str, func: str) -> int:
    from pyebpf import elf
    return next(s.address for s in elf.open_elf(path).symbols() if s.name == func)


# ------------------------------------------------- names, against bpftrace
@pytest.mark.kernel
def test_probe_names_are_bpftraces(w):
    addr = _address_of(w, "lock_a")
    points = [f"uprobe:{w}:lock*", "uretprobe:libc:pthread_mutex_trylock", f"usdt:{w}:delta",
              f"usdt:{w}:btw:g*", f"uprobe:{w}:{addr:#x}",
              "tracepoint:syscalls:sys_enter_clock_nano*"]
    program = " ".join(f"{p} {{ @[probe] = count(); }}" for p in points)
    text = run_bpftrace(program, command=f"{w} 16 100")
    theirs = set(re.findall(r"^@\[(.*)\]: \d+$", text, re.M))
    ours = {n for p in points for n in names(p)}
    assert ours == theirs
    assert f"uprobe:{w}:{addr}" in ours                 # an address in decimal
    assert f"usdt:{w}:btw:delta" in ours                # the provider filled in
    assert "uretprobe:/" in " ".join(ours)              # libc resolved to its path


@pytest.mark.kernel
def test_relative_paths_stay_as_written(w):
    d, base = os.path.split(w)
    cwd = os.getcwd()
    os.chdir(d)
    try:
        ours = names(f"uprobe:./{base}:lock_a") + names(f"usdt:./{base}:*")
    finally:
        os.chdir(cwd)
    proc = subprocess.run(["bpftrace", "-e", f"uprobe:./{base}:lock_a, usdt:./{base}:* "
                           "{ @[probe] = count(); }", "-c", f"./{base} 8 100"],
                          capture_output=True, text=True, cwd=d, timeout=120)
    theirs = set(re.findall(r"^@\[(.*)\]: \d+$", proc.stdout, re.M))
    assert set(ours) == theirs == {f"uprobe:./{base}:lock_a", f"usdt:./{base}:btw:delta",
                                   f"usdt:./{base}:btw:gated", f"usdt:./{base}:btw:request"}


def test_timed_and_perf_names():
    assert names("profile:hz:99") == ["profile:hz:99"]
    assert names("p:ms:10") == ["profile:ms:10"]
    assert names("interval:s:1") == ["interval:s:1"]
    assert names("i:ms:100") == ["interval:ms:100"]
    assert names("software:faults:1") == ["software:faults:1"]
    assert names("rawtracepoint:sched_switch") == ["rawtracepoint:sched_switch"]
    src = resolve(ap("profile:us:500"))[0].source
    assert isinstance(src, PerfEventSource) and src.period == 500_000 and not src.one_cpu
    src = resolve(ap("interval:hz:4"))[0].source
    assert src.frequency == 4 and src.one_cpu
    assert resolve(ap("software:cs:7"))[0].source.event == (1, 3)


# ------------------------------------------------------------------ errors
def test_names_that_match_nothing_list_close_matches(w):
    # a uprobe of a missing function resolves to nothing, saying why on the
    # attach point (bpftrace 0.17 skips it unless nothing at all attaches)
    missing = ap(f"uprobe:{w}:lock_c")
    assert resolve(missing) == [] and "nothing matches" in missing.missing
    assert "lock_a" in missing.missing
    with pytest.raises(ProbeSpecError, match="delta"):
        resolve(ap(f"usdt:{w}:detla"))
    with pytest.raises(ProbeSpecError, match="sched_switch"):
        resolve(ap("tracepoint:sched:sched_swich"))
    with pytest.raises(ProbeSpecError, match="cpu-clock|task-clock"):
        resolve(ap("software:cpu-clok:1"))
    glob = ap(f"uprobe:{w}:zzz*")
    assert resolve(glob) == [] and "nothing matches 'zzz*'" in glob.missing


@pytest.mark.parametrize("raw", ["profile:hz", "profile:parsec:3", "interval:ms:x",
                                 "profile:hz:0", "uprobe:/bin/sh", "usdt:/bin/sh",
                                 "tracepoint:sched", "nosuch:x:y", "BEGIN"])
def test_malformed_attach_points_are_clear_errors(raw):
    with pytest.raises(ProbeSpecError) as info:
        resolve(ap(raw))
    assert raw.split(":")[0] in str(info.value) or "BEGIN" in str(info.value)


def test_kprobes_and_kfuncs_refused_with_the_feature_probes_reason():
    from pyebpf.kernel import features
    from pyebpf.kernel.constants import ProgType
    kp = features.has_kprobe_pmu()
    for raw in ("kprobe:vfs_read", "kretprobe:vfs_read"):
        if kp:                          # a kernel with kprobes: they resolve
            assert resolve(ap(raw))
            continue
        with pytest.raises(ProbeSpecError) as info:
            resolve(ap(raw))
        assert kp.reason in str(info.value)
    for raw in ("kfunc:vfs_read", "kretfunc:vfs_read"):
        with pytest.raises(ProbeSpecError) as info:
            resolve(ap(raw))
        assert features.has_prog_type(ProgType.TRACING).reason in str(info.value)


def test_hardware_refused_where_there_is_no_pmu():
    if os.path.isdir("/sys/bus/event_source/devices/cpu"):
        assert resolve(ap("hardware:cycles:1000"))      # a PMU: it resolves
        return
    with pytest.raises(ProbeSpecError, match="PMU"):
        resolve(ap("hardware:cycles:1000"))


# --------------------------------------------------------------- resolver
def test_usdt_arguments_are_uint64_as_in_bpftrace(w):
    """bpftrace 0.17 types every USDT argument uint64 (read sign-extended by
    its spec: ``-4@`` -3 prints -3 as a key and with %d, but sums unsigned
    and compares greater than 0)."""
    from pyebpf.usdt.notes import UsdtFile
    specs = {pr.name: pr for pr in UsdtFile(w).probes()}
    # the workload is built so that delta's d and small are 4- and 2-byte signed registers
    assert str(specs["delta"].arguments(1)[0]).startswith("-4@%")
    r = Resolver()
    for n in range(3):
        assert r.arg_type(ap(f"usdt:{w}:btw:delta"), n) == int_type(8, False)
    assert r.arg_type(ap(f"usdt:{w}:btw:request"), 0) == int_type(8, False)   # a pointer
    assert r.arg_type(ap(f"uprobe:{w}:compute"), 0) == int_type(8, False)
    assert r.retval_type(ap(f"uretprobe:{w}:compute")) == int_type(8, False)
    # (the workload is built with -g: compute(long a, long b) from its DWARF)
    rec = r.args_record(ap(f"uprobe:{w}:compute"))
    assert rec is not None and [(n, t) for n, _, t in rec.fields] == [
        ("a", int_type(8, True)), ("b", int_type(8, True))]


def test_tracepoint_args_record():
    r = Resolver()
    rec = r.args_record(ap("tracepoint:syscalls:sys_enter_openat"))
    fields = {n: (off, t) for n, off, t in rec.fields}
    assert rec.kind == "record"
    assert fields["dfd"][1] == int_type(4, True)          # an int stored in 8 bytes
    assert fields["filename"][1].kind == "pointer"
    assert fields["flags"][1].is_int
    assert fields["common_pid"][1] == int_type(4, True)
    assert r.arg_type(ap("tracepoint:syscalls:sys_enter_openat"), 0) == int_type(4, True)
    comm = dict((n, t) for n, _o, t in r.args_record(ap("tracepoint:sched:sched_switch")).fields)
    assert comm["prev_comm"].kind == "string" and comm["prev_comm"].size == 16


# ------------------------------------------------- the new sources, for real
def _count(src, seconds: float, pid: int | None = None, busy: bool = True) -> int:
    return _count_timed(src, seconds, pid, busy)[0]


def _count_timed(src, seconds: float, pid: int | None = None,
                 busy: bool = True) -> tuple[int, float]:
    """(hits, seconds the probe was attached for): a bounded window, not a
    wait for something."""
    from pyebpf.loader import load
    from pyebpf.maps import ArrayMap
    m = ArrayMap("u64", 1, name="hits")
    p = _counter(m)
    opts = dict(src.load_options)
    prog = load(p, opts.pop("prog_type", src.prog_type), **opts)
    try:
        t0 = time.monotonic()
        with src.attach(prog, pid):
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                if busy:
                    sum(range(10000))
                else:
                    time.sleep(0.01)
        return m[0], time.monotonic() - t0
    finally:
        prog.close()
        m.close()


def _counter(m):
    from pyebpf.program import Program
    p = Program("hits")
    key = p.stack_store(0, 4)
    p.map_increment(m, key)
    p.ret(0)
    return p


@pytest.mark.kernel
def test_profile_interval_software_and_rawtracepoint_attach(no_fd_leak):
    assert _count(resolve(ap("profile:hz:199"))[0].source, 0.5) >= 10
    n, took = _count_timed(resolve(ap("interval:ms:50"))[0].source, 0.55, busy=False)
    # one CPU, every 50 ms: never more than this run's own attached time allows
    assert 1 <= n <= took / 0.05 + 1, (n, took)
    assert _count(resolve(ap("software:cpu-clock:1000000"))[0].source, 0.3) >= 5
    assert _count(resolve(ap("rawtracepoint:sched_switch"))[0].source, 0.2, busy=False) > 0


@pytest.mark.kernel
def test_usdt_with_pid_and_semaphore(no_fd_leak, w):
    proc = subprocess.Popen([w, "200000", "200"], stdout=subprocess.DEVNULL)
    try:
        wait_exec(proc.pid, w)
        probes = resolve(ap("usdt:*:btw:gated"), pid=proc.pid)
        assert [r.name for r in probes] == [f"usdt:/proc/{proc.pid}/root{w}:btw:gated"]
        # btw:gated fires only while its semaphore is raised, which attaching does
        assert _count(probes[0].source, 0.3, pid=proc.pid, busy=False) > 0
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.kernel
def test_names_with_pid_are_bpftraces(w):
    proc = subprocess.Popen([w, "200000", "200"], stdout=subprocess.DEVNULL)
    try:
        wait_exec(proc.pid, w)
        points = ["usdt:*:btw:gated", "uprobe:libc:pthread_mutex_trylock", f"usdt:{w}:delta"]
        program = " ".join(f"{p} {{ @[probe] = count(); }}" for p in points)
        # (each point fires every 200 us: 1 s is ample on a loaded machine)
        text = run_bpftrace(program + " interval:ms:1000 { exit(); }", "-p", str(proc.pid))
        theirs = set(re.findall(r"^@\[(.*)\]: \d+$", text, re.M))
        assert {n for p in points for n in names(p, pid=proc.pid)} == theirs
    finally:
        proc.kill()
        proc.wait()


LSEEK = """import os
f = os.open("/etc/passwd", 0)
os.lseek(f, -5, 2)
try:
    os.lseek(f, -100000, 0)
except OSError:
    pass
"""


@pytest.mark.kernel
def test_uprobe_arguments_and_retval_are_unsigned_as_in_bpftrace(tmp_path):
    """bpftrace 0.17 reads a uprobe's argN and retval as uint64: a negative
    offset prints as a huge value and is not < 0; the Resolver says so."""
    from pyebpf.lang import output_maps
    py = SYSTEM_PYTHON
    if not os.path.exists(py):
        pytest.skip(f"{py} is not installed")
    script = tmp_path / "ls.py"
    script.write_text(LSEEK)
    text = run_bpftrace("uprobe:libc:lseek64 /pid == cpid && arg2 == 0/ { @v = arg1; "
                        "@neg = arg1 < 0; } uretprobe:libc:lseek64 /pid == cpid/ "
                        "{ @rn[retval < 0] = count(); } uretprobe:libc:lseek64 /pid == cpid && "
                        "retval > 1000000000/ { @rv = retval; }",
                        command=f"{py} {script}")
    r = Resolver()
    t_arg = r.arg_type(ap("uprobe:libc:lseek64"), 1)
    t_ret = r.retval_type(ap("uretprobe:libc:lseek64"))
    assert output_maps.format_map("@v", None, t_arg, {None: 2 ** 64 - 100000}) in text
    assert output_maps.format_map("@rv", None, t_ret, {None: 2 ** 64 - 1}) in text
    assert "@neg: 0\n" in text and "@rn[1]" not in text
