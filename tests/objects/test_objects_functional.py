"""The test objects at work: events through pyebpf's readers, const volatile
settings, global data, externs, callbacks and uprobes on a gcc-built target."""
from __future__ import annotations

import os
import struct
import subprocess
import time

import pytest

import pyebpf
from pyebpf.events import PerfBuffer, RingBufferReader
from pyebpf.kernel.features import kernel_version_code
from pyebpf.objects import open_object

from .conftest import unpin_by_name

pytestmark = pytest.mark.kernel

#: struct event of execsnoop.bpf.c
EVENT = struct.Struct("<IIII16s64s")


def _exec_fail(path: str) -> None:
    try:
        os.execv(path, [path])
    except OSError:
        pass


def test_execsnoop_events_and_const_volatile_filter(objects):
    marker_path = f"/nonexistent/pyebpf-execsnoop-{os.getpid()}"
    obj = open_object(objects["execsnoop"])
    obj.globals["targ_tgid"] = os.getpid()        # only this process
    obj.globals["marker"] = 0xABC
    with obj.load():
        assert obj.globals["targ_tgid"] == os.getpid()
        assert obj.globals["calls"] == 7
        with RingBufferReader(obj.maps["events"], decode=EVENT.unpack) as reader:
            obj.attach_all()
            subprocess.run(["/bin/true"], check=True)          # another tgid: filtered
            _exec_fail(marker_path + "-a")
            _exec_fail(marker_path + "-b")
            events = []
            deadline = time.monotonic() + 5
            while len(events) < 2 and time.monotonic() < deadline:
                events += reader.read_batch(timeout=0.5)
        assert len(events) == 2, events
        for ev, suffix, calls in zip(events, "ab", (7, 8)):
            pid, ppid, marker, ncalls, comm, filename = ev
            assert pid == os.getpid()
            assert ppid == os.getppid()                     # CO-RE: task->real_parent->tgid
            assert marker == 0xABC
            assert ncalls == calls                          # .data, incremented
            assert filename.rstrip(b"\0").decode() == f"{marker_path}-{suffix}"
            assert comm.rstrip(b"\0")
        assert obj.globals["seen"] == 2                    # .bss, read back from the map
        assert obj.globals["calls"] == 9


def test_several_programs_per_section_perf_buffer_externs(objects):
    unpin_by_name()
    obj = open_object(objects["multi"])
    obj.globals["scale"] = 5
    try:
        with obj.load():
            assert obj.maps[".rodata.cfg"].frozen
            with PerfBuffer(obj.maps["pb"], decode="<IIQ") as pb:
                obj.attach_all()
                os.getppid()
                got = []
                deadline = time.monotonic() + 5
                while not any(e[1] == os.getpid() for e in got) and time.monotonic() < deadline:
                    got += pb.read_batch(timeout=0.5)
            mine = [e for e in got if e[1] == os.getpid()]
            assert mine and mine[0] == (1, os.getpid(), 5)
            counts = obj.maps["counts"]
            assert counts[1] >= 5 and counts[1] % 5 == 0   # bump(1, scale) in first
            assert 2 in counts                              # bump(2, 1) in second
            assert 3 in counts                              # raw_tp/sys_enter
            assert obj.globals["loops"] == 10               # bpf_loop callback
            assert obj.globals["kver"] == kernel_version_code()
            with open("/proc/kallsyms") as fh:
                stext = next(int(ln.split()[0], 16) for ln in fh if ln.split()[2] == "_stext")
            assert obj.globals["fops"] == stext             # typeless ksym
            assert obj.globals["hz"] in (100, 250, 300, 1000)
    finally:
        unpin_by_name()


def test_uprobe_object_traces_a_gcc_built_target(objects, adder):
    with pyebpf.load_object(objects["uprobe"]) as obj:
        obj.programs["on_add"].attach(adder, "add")
        obj.programs["on_add_ret"].attach(adder, "add")
        out = subprocess.run([adder, "4"], capture_output=True, text=True, check=True).stdout
        assert out.strip() == str(sum(i + 100 for i in range(1, 5)))
        assert obj.globals["calls"] == 4
        assert obj.globals["total"] == sum(i + 100 for i in range(1, 5))
        assert obj.globals["last_ret"] == 104


def test_tp_btf_attaches_by_section_name(objects):
    with pyebpf.load_object(objects["kinds1"]) as obj:
        obj.programs["on_switch"].attach()
        deadline = time.monotonic() + 5
        while obj.globals["hits"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert obj.globals["hits"] > 0


#: struct event of opensnoop.bpf.c
OPEN_EVENT = "<IIii16s128s"
#: struct life_event of bootstrap.bpf.c
LIFE_EVENT = "<IIIB3xQ16s128s"


def _opener(paths: list[tuple[str, int]]) -> tuple[int, int, int]:
    """Fork a child that, once told to, opens ``paths`` with their flags,
    reports each result (fd or -errno) through a pipe and exits; returns
    (pid, go-pipe write end, results-pipe read end)."""
    go_r, go_w = os.pipe()
    res_r, res_w = os.pipe()
    pid = os.fork()
    if pid == 0:                                        # pragma: no cover - the child
        try:
            os.close(go_w)
            os.close(res_r)
            os.read(go_r, 1)
            results = []
            for path, flags in paths:
                try:
                    results.append(os.open(path, flags))
                except OSError as exc:
                    results.append(-exc.errno)
            os.write(res_w, struct.pack(f"<{len(results)}i", *results))
        finally:
            os._exit(0)
    os.close(go_r)
    os.close(res_w)
    return pid, go_w, res_r


def test_opensnoop_pairs_enter_and_exit_through_a_perf_buffer(objects, tmp_path):
    existing = tmp_path / "present"
    existing.write_text("x")
    paths = [(str(existing), os.O_RDONLY),
             (os.devnull, os.O_WRONLY | os.O_APPEND),
             (str(tmp_path), os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK),
             (str(tmp_path / "missing"), os.O_RDONLY)]
    pid, go, results = _opener(paths)
    try:
        obj = open_object(objects["opensnoop"])
        obj.globals["targ_pid"] = pid                   # only the child
        with obj.load():
            with PerfBuffer(obj.maps["opens"], decode=OPEN_EVENT) as pb:
                obj.attach_all()
                with open(existing) as fh:              # this process: filtered out
                    fh.read()
                os.write(go, b"g")
                rets = struct.unpack(f"<{len(paths)}i", os.read(results, 4 * len(paths)))
                events = []
                deadline = time.monotonic() + 5
                while len(events) < len(paths) and time.monotonic() < deadline:
                    events += pb.read_batch(timeout=0.5)
                events += pb.read_batch(timeout=0.2)    # nothing more may come
            assert len(obj.maps["inflight"]) == 0       # every entry paired and deleted
    finally:
        os.close(go)
        os.close(results)
        os.waitpid(pid, 0)
    assert rets[-1] == -2 and min(rets[:-1]) >= 0
    assert len(events) == len(paths), events
    for (epid, tid, ret, flags, comm, path), (want_path, want_flags), want_ret in zip(
            events, paths, rets):
        assert epid == tid == pid
        assert ret == want_ret
        assert flags == want_flags | os.O_CLOEXEC       # os.open makes fds non-inheritable
        assert path.rstrip(b"\0").decode() == want_path
        assert comm.rstrip(b"\0")


def _lives(reader: RingBufferReader, pids: set[int], want: int) -> list[tuple]:
    """The events of ``pids`` the reader delivers, until ``want`` of them came
    (or 5 s passed), plus whatever comes in a further 0.2 s."""
    got: list[tuple] = []
    deadline = time.monotonic() + 5
    while len(got) < want and time.monotonic() < deadline:
        got += [e for e in reader.read_batch(timeout=0.5) if e[0] in pids]
    got += [e for e in reader.read_batch(timeout=0.2) if e[0] in pids]
    return got


def _run_children(codes: list[int]) -> dict[int, int]:
    """Run ``/bin/sh -c 'exit N'`` for each N; ``{pid: N}``."""
    out = {}
    for code in codes:
        child = subprocess.Popen(["/bin/sh", "-c", f"sleep 0.01; exit {code}"])
        assert child.wait() == code
        out[child.pid] = code
    return out


def test_bootstrap_exec_and_exit_events_through_a_ring_buffer(objects):
    with pyebpf.load_object(objects["bootstrap"]) as obj:
        with RingBufferReader(obj.maps["lives"], decode=LIFE_EVENT) as reader:
            obj.attach_all()
            t0 = time.monotonic()
            children = _run_children([3, 0, 7])
            elapsed = time.monotonic() - t0
            events = _lives(reader, set(children), 2 * len(children))
    assert len(events) == 2 * len(children), events
    for pid, code in children.items():
        (execd, exited) = [e for e in events if e[0] == pid]
        _, ppid, exit_code, is_exit, duration, comm, filename = execd
        assert (ppid, exit_code, is_exit, duration) == (os.getpid(), 0, 0, 0)
        assert comm.rstrip(b"\0") == b"sh"
        assert filename.rstrip(b"\0") == b"/bin/sh"
        _, ppid, exit_code, is_exit, duration, comm, filename = exited
        assert (ppid, exit_code, is_exit) == (os.getpid(), code, 1)
        assert 10_000_000 <= duration <= elapsed * 1e9      # slept 10 ms, ran within t0..
        assert comm.rstrip(b"\0") == b"sh"


def test_bootstrap_min_duration_filters_exits(objects):
    obj = open_object(objects["bootstrap"])
    obj.globals["min_duration_ns"] = 60 * 10**9
    with obj.load():
        with RingBufferReader(obj.maps["lives"], decode=LIFE_EVENT) as reader:
            obj.attach_all()
            children = _run_children([3, 5])
            events = _lives(reader, set(children), len(children))
    assert sorted(e[0] for e in events) == sorted(children)   # the execs only
    assert not any(e[3] for e in events)
