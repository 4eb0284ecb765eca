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
