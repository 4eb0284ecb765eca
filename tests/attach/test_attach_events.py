"""Tracepoints, raw tracepoints, perf-event sampling and kprobes on the real kernel."""
from __future__ import annotations

import errno
import os
import subprocess

import pytest

from pyebpf import attach
from pyebpf.attach import tracefs as attach_tracefs
from pyebpf.attach import (attach_kprobe, attach_kretprobe, attach_perf_event,
                           attach_raw_tracepoint, attach_tracepoint, parse_tracepoint_format,
                           tracepoint_format)
from pyebpf.errors import AttachError, NotSupportedError, PermissionDeniedError
from pyebpf.kernel import features
from pyebpf.loader import load
from pyebpf.maps import HashMap
from pyebpf.program import R0, R1, R6, R7, Program
from waiting import read_line

from . import progs

OPEN_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY | os.O_NOCTTY   # as target.c opens
NR_GETPID = 39                                                           # x86-64


def gone(ids) -> bool:
    return not (set(ids) & set(attach.link_ids()))


# ------------------------------------------------------------ format parsing
SAMPLE_FORMAT = """\
name: sched_process_exec
ID: 301
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;
\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;
\tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;
\tfield:char comm[16];\toffset:20;\tsize:16;\tsigned:0;

print fmt: "filename=%s pid=%d old_pid=%d", __get_str(filename), REC->pid, REC->old_pid
"""


def test_parse_format_text():
    fmt = parse_tracepoint_format(SAMPLE_FORMAT, "sched", "sched_process_exec")
    assert fmt.id == 301 and fmt.name == "sched_process_exec"
    assert [f.name for f in fmt.fields if f.common] == \
        ["common_type", "common_flags", "common_preempt_count", "common_pid"]
    fn = fmt["filename"]
    assert fn.data_loc and fn.type == "char" and (fn.offset, fn.size) == (8, 4)
    pid = fmt.field("pid")
    assert (pid.type, pid.offset, pid.size, pid.signed) == ("pid_t", 12, 4, True)
    comm = fmt["comm"]
    assert (comm.type, comm.array_len, comm.size) == ("char", 16, 16)
    assert fmt.size == 36 and "pid" in fmt and "nope" not in fmt
    with pytest.raises(KeyError, match="old_pid"):
        fmt.field("oldpid")
    p = Program("f")
    fmt["pid"].load(p, R7)
    assert (p.insns[0].off, p.insns[0].src) == (12, 1)
    with pytest.raises(ValueError, match="array"):
        comm.load(p, R7)


@pytest.mark.kernel
def test_format_of_a_real_tracepoint():
    fmt = tracepoint_format("syscalls:sys_enter_openat")
    assert fmt.id == attach.tracepoint_id("syscalls:sys_enter_openat") > 0
    assert [f.name for f in fmt.fields if not f.common] == \
        ["__syscall_nr", "dfd", "filename", "flags", "mode"]
    assert fmt["flags"].size == 8 and fmt["filename"].type == "const char *"
    assert tracepoint_format("syscalls/sys_enter_openat") == fmt


@pytest.mark.kernel
def test_wrong_tracepoint_lists_close_matches():
    with pytest.raises(AttachError) as info:
        attach.tracepoint_id("syscalls:sys_enter_opnat")
    assert info.value.errno == errno.ENOENT
    assert "syscalls:sys_enter_openat" in str(info.value)
    with pytest.raises(AttachError, match="syscalls:sys_enter_openat"):
        attach.tracepoint_id("sycalls:sys_enter_openat")
    with pytest.raises(ValueError, match="category:event"):
        attach.tracepoint_id("sys_enter_openat")


# ------------------------------------------------------------------ tracefs
@pytest.mark.kernel
def test_tracefs_is_found_or_mounted():
    d = attach.tracefs_dir()
    assert os.path.isfile(os.path.join(d, "events", "syscalls", "sys_enter_openat", "id")) or \
        os.path.isdir(os.path.join(d, "events"))


@pytest.mark.kernel
def test_tracefs_mount_and_errors(tmp_path, monkeypatch):
    """No tracefs anywhere: mounted at the default place when root; a clear
    error saying how when that is not possible."""
    where = tmp_path / "tracing"
    monkeypatch.setattr(attach_tracefs, "_tracefs_found", None)
    monkeypatch.setattr(attach_tracefs, "_tracefs_mounts", lambda: [])
    monkeypatch.setattr(attach_tracefs, "_TRACEFS_DEFAULT", str(where))
    monkeypatch.setattr(attach_tracefs, "_TRACEFS_PLACES", (str(where),))
    with pytest.raises(NotSupportedError, match=f"mount -t tracefs nodev {where}"):
        attach.tracefs_dir(mount=False)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(PermissionDeniedError, match="only root can mount"):
        attach.tracefs_dir()
    monkeypatch.undo()
    monkeypatch.setattr(attach_tracefs, "_tracefs_found", None)
    monkeypatch.setattr(attach_tracefs, "_tracefs_mounts", lambda: [])
    monkeypatch.setattr(attach_tracefs, "_TRACEFS_DEFAULT", str(where))
    monkeypatch.setattr(attach_tracefs, "_TRACEFS_PLACES", (str(where),))
    try:
        assert attach.tracefs_dir() == str(where)          # really mounted there
        assert os.path.isdir(where / "events" / "sched")
    finally:
        subprocess.run(["umount", str(where)], check=False)
    monkeypatch.setattr(attach_tracefs, "_tracefs_found", None)


# ------------------------------------------------------------ tracepoints
def openat_counter(m, fmt, tgid: int) -> Program:
    """Count openat(..., OPEN_FLAGS) of process ``tgid``, reading fields by name."""
    p = Program("openat")
    p.mov(R6, R1)
    p.call("get_current_pid_tgid")
    p.rsh(R0, 32)
    p.jne(R0, tgid, "out")
    fmt["flags"].load(p, R7, ctx=R6)
    p.jne(R7, OPEN_FLAGS, "out")
    key = p.stack_store(0, 4)
    p.map_increment(m, key)
    p.label("out")
    p.ret(0)
    return p


@pytest.mark.kernel
@pytest.mark.parametrize("method", ["perf_link", "perf_ioctl"])
def test_tracepoint_sees_openat(no_fd_leak, method, target_pie, spawn):
    if method == "perf_link" and not features.has_perf_link():
        pytest.skip(features.has_perf_link().reason)
    t = spawn(target_pie)
    fmt = tracepoint_format("syscalls:sys_enter_openat")
    m = HashMap("u32", "u64", 1, name="opens")
    with attach_tracepoint(openat_counter(m, fmt, t.pid), "syscalls:sys_enter_openat",
                           method=method) as link:
        assert link.kind == "tracepoint" and link.method == method
        ids = link.link_ids
        assert t.run("open 37 /")[0] == 37
    assert dict(m.items()) == {0: 37}
    assert gone(ids)
    t.run("open 5 /")
    assert dict(m.items()) == {0: 37}


@pytest.mark.kernel
def test_tracepoint_needs_tracepoint_program(no_fd_leak):
    m = HashMap("u32", "u64", 1, name="x")
    with load(progs.counter(m), "kprobe") as prog:
        with pytest.raises(AttachError, match="TRACEPOINT"):
            attach_tracepoint(prog, "syscalls:sys_enter_openat")


# -------------------------------------------------------- raw tracepoints
@pytest.mark.kernel
def test_raw_tracepoint_fires(no_fd_leak, target_pie, spawn):
    t = spawn(target_pie)
    m = HashMap("u32", "u64", 1, name="getpids")
    p = Program("sysenter")
    p.mov(R6, R1)
    p.call("get_current_pid_tgid")
    p.rsh(R0, 32)
    p.jne(R0, t.pid, "out")
    p.ldxdw(R7, R6, 8)                 # args[1]: the syscall number
    p.jne(R7, NR_GETPID, "out")
    key = p.stack_store(0, 4)
    p.map_increment(m, key)
    p.label("out")
    p.ret(0)
    with attach_raw_tracepoint(p, "sys_enter") as link:
        (lid,) = link.link_ids
        assert link.info()[0].raw_tracepoint == "sys_enter"
        assert repr(link.info()[0]).startswith("LinkInfo(type=1 (RAW_TRACEPOINT), id=")
        t.run("getpid 250")
    assert dict(m.items()) == {0: 250}
    assert gone([lid])


@pytest.mark.kernel
def test_raw_tracepoint_wrong_name(no_fd_leak):
    m = HashMap("u32", "u64", 1, name="x")
    with pytest.raises(AttachError) as info:
        attach_raw_tracepoint(progs.counter(m), "sched_swtich")
    assert "sched_switch" in str(info.value)
    assert "sys_enter" in attach.list_raw_tracepoints()


# --------------------------------------------------------------- perf events
def _samples_by(helper: str, key: str) -> tuple[HashMap, Program]:
    """A map of samples counted by what ``helper`` returns (a ``key``-typed
    integer), and the PERF_EVENT program that counts them."""
    m = HashMap(key, "u64", 64, name="samples")
    p = Program("sample")
    p.call(helper)
    p.map_increment(m, p.stack_store(R0, 8 if key == "u64" else 4))
    p.ret(0)
    return m, p


@pytest.mark.kernel
def test_perf_event_sampling_on_every_cpu(no_fd_leak, target_pie, spawn):
    from pyebpf.kernel.cpus import online_cpus
    cpus = online_cpus()
    m, p = _samples_by("get_smp_processor_id", "u32")
    workers = [spawn(target_pie) for _ in cpus]
    with attach_perf_event(p, frequency=499) as link:
        assert link.kind == "perf_event" and len(link.fds) == len(cpus) * (
            2 if link.method == "perf_link" else 1)
        for w in workers:                      # keep every CPU busy for a while
            w.proc.stdin.write("spin 300\n")
            w.proc.stdin.flush()
        for w in workers:
            read_line(w.proc.stdout, "a worker to end its spin", 60)
        ids = link.link_ids
    samples = dict(m.items())
    assert set(samples) == set(cpus), samples
    assert all(v >= 5 for v in samples.values()), samples
    assert gone(ids)


THREADED = r"""
import sys, threading, time
def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
early = threading.Thread(target=spin, args=(1.5,))
early.start()
print(threading.get_native_id(), early.native_id, flush=True)
sys.stdin.readline()
late = threading.Thread(target=spin, args=(1.0,))
late.start()
print(late.native_id, flush=True)
spin(1.0)
early.join(); late.join()
"""


@pytest.mark.kernel
def test_perf_event_for_one_process_samples_its_threads_only(no_fd_leak):
    """With a pid: one event per thread, inherited by the threads started
    later; a busy process beside it is never sampled."""
    import sys
    m, p = _samples_by("get_current_pid_tgid", "u64")
    target = subprocess.Popen([sys.executable, "-c", THREADED], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    other = subprocess.Popen([sys.executable, "-c", THREADED], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout and target.stdin and other.stdin and other.stdout
        main, early = map(int, read_line(target.stdout, "the target's threads", 60).split())
        read_line(other.stdout, "the other process's threads", 60)
        with attach_perf_event(p, frequency=499, pid=target.pid) as link:
            assert str(target.pid) in link.target and "2 threads" in link.target, link.target
            for proc in (target, other):
                proc.stdin.write("go\n")
                proc.stdin.flush()
            late = int(read_line(target.stdout, "the late thread", 60))
            assert target.wait(60) == 0 and other.wait(60) == 0
        samples = {(k >> 32, k & 0xFFFFFFFF): v for k, v in m.items()}
    finally:
        for proc in (target, other):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
    assert {tgid for tgid, _ in samples} == {target.pid}, samples
    threads = {tid for _, tid in samples}
    assert {main, early, late} <= threads, (main, early, late, samples)


@pytest.mark.kernel
def test_perf_event_arguments():
    import sys
    m = HashMap("u32", "u64", 1, name="x")
    gone_pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout.strip()
    with pytest.raises(AttachError, match=f"no process with pid {gone_pid}") as info:
        attach_perf_event(progs.counter(m), 99, pid=int(gone_pid))
    assert info.value.errno == errno.ESRCH
    with pytest.raises(ValueError):
        attach_perf_event(progs.counter(m), frequency=None)
    with pytest.raises(ValueError, match="unknown perf event"):
        attach_perf_event(progs.counter(m), event="nope")


# ------------------------------------------------------------------ kprobes
@pytest.mark.kernel
def test_kprobe_follows_the_feature_probe(no_fd_leak):
    feat = features.has_kprobe_pmu()
    m = HashMap("u32", "u64", 1, name="kp")
    if feat:
        with attach_kprobe(progs.counter(m), "do_sys_openat2") as link:
            os.close(os.open("/", os.O_RDONLY))
        assert dict(m.items()).get(0, 0) >= 1 and link.closed
        return
    for fn in (attach_kprobe, attach_kretprobe):
        with pytest.raises(NotSupportedError) as info:
            fn(progs.counter(m), "do_sys_openat2")
        assert feat.reason in str(info.value)
    pytest.skip(feat.reason)
