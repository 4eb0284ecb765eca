"""pyebpf's own maps and programs carry BTF in the real kernel: bpftool shows
map keys/values structured and programs' Python (or .s) source lines, the
verifier's log and VerifierError agree on the failing line, and a kernel that
refuses the BTF costs a warning, never a map or a program."""
from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import warnings

import pytest
from btf_testlib import BPFTOOL

import pyebpf.btf.own as own
from pyebpf.errors import BtfWarning, VerifierError
from pyebpf.kernel import btf as kbtf
from pyebpf.loader import load
from pyebpf.maps import (ArrayMap, Bytes, HashMap, LruHashMap, PerCpuArrayMap, PerCpuHashMap,
                         PerfEventArray, QueueMap, RingBuf, StackTraceMap)
from pyebpf.program import R0, R1, R2, R3, R4, R6, Program

pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(BPFTOOL is None, reason="bpftool is needed (make debs)")]
HERE = os.path.abspath(__file__)


class Event(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint32), ("flags", ctypes.c_uint32, 3),
                ("comm", ctypes.c_char * 16), ("lat", ctypes.c_int64)]


def bpftool_json(*args: str):
    out = subprocess.run([BPFTOOL, "-j", *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def bpftool_text(*args: str) -> str:
    return subprocess.run([BPFTOOL, *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def btf_state():
    """Forget refusals before and after the test (the state is per process)."""
    saved = (kbtf._LOAD_REFUSED, set(kbtf._REFUSED))
    kbtf._LOAD_REFUSED = None
    kbtf._REFUSED.clear()
    own._MAP_CACHE.clear()
    yield
    kbtf._LOAD_REFUSED = saved[0]
    kbtf._REFUSED.clear()
    kbtf._REFUSED.update(saved[1])
    own._MAP_CACHE.clear()


# --------------------------------------------------------------------- maps
def test_bpftool_dumps_keys_and_values_structured(no_fd_leak):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with HashMap(Bytes(16), Event, 8, name="by_comm") as m, \
                ArrayMap("<QI", 2, name="pairs") as a, HashMap("s32", "s64", 4) as ints:
            m[b"bash".ljust(16, b"\0")] = Event(42, 5, b"bash", -7)
            a[1] = (10, 20)
            ints[-3] = -4
            show = bpftool_json("map", "show", "id", str(m.id))
            assert show["btf_id"] > 0
            (entry,) = bpftool_json("map", "dump", "id", str(m.id))
            assert entry["formatted"] == {"key": "bash", "value": {
                "pid": 42, "flags": "0x5", "comm": "bash", "lat": -7}}   # (bitfields in hex)
            dumped = bpftool_json("map", "dump", "id", str(a.id))
            assert dumped[1]["formatted"] == {"key": 1, "value": {"f0": 10, "f1": 20}}
            (entry,) = bpftool_json("map", "dump", "id", str(ints.id))
            assert entry["formatted"] == {"key": -3, "value": -4}
            # the BTF fd was closed after creation: the map holds its BTF
            assert not any(os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:btf"
                           for fd in os.listdir("/proc/self/fd")
                           if os.path.exists(f"/proc/self/fd/{fd}"))


@pytest.mark.parametrize("cls, args", [
    (PerCpuArrayMap, ("u64", 2)), (PerCpuHashMap, ("u32", "<QQ", 4)),
    (LruHashMap, ("u64", "u32", 4))])
def test_every_dict_map_kind_is_typed(cls, args, no_fd_leak):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with cls(*args) as m:
            m[1] = 7 if args[-2] != "<QQ" else (7, 8)
            assert bpftool_json("map", "show", "id", str(m.id)).get("btf_id", 0) > 0
            dumped = bpftool_json("map", "dump", "id", str(m.id))
            entry = next(e for e in dumped if e.get("formatted", {}).get("key") == 1)
            if cls is LruHashMap:
                assert entry["formatted"]["value"] == 7
            else:
                values = [v["value"] for v in entry["formatted"]["values"]]
                assert values[0] == (7 if cls is PerCpuArrayMap else {"f0": 7, "f1": 8})


@pytest.mark.parametrize("make", [lambda: RingBuf(4096), lambda: QueueMap("u64", 4),
                                  lambda: PerfEventArray(), lambda: StackTraceMap(4)])
def test_maps_the_kernel_types_not_get_no_btf(make, no_fd_leak):
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # no refusal: not even tried
        with make() as m:
            assert "btf_id" not in bpftool_json("map", "show", "id", str(m.id))


def test_btf_false_and_pyebpf_btf_0_opt_out(monkeypatch, no_fd_leak):
    with HashMap("u32", "u64", 4, btf=False) as m:
        assert "btf_id" not in bpftool_json("map", "show", "id", str(m.id))
    monkeypatch.setenv("PYEBPF_BTF", "0")
    with ArrayMap("u64", 4) as m:
        assert "btf_id" not in bpftool_json("map", "show", "id", str(m.id))
    p = Program("nobtf")
    p.mov(R0, 0).exit()
    with load(p, "socket_filter") as prog:
        assert "btf_id" not in bpftool_json("prog", "show", "id", str(prog.info().id))


def _wrong_sizes(key, value):
    """BTF the kernel loads, but whose value type has the wrong size for the map."""
    o = own.OwnBtf()
    kid = o.integer(4, False)
    vid = o.integer(2, False)            # 2 bytes; the map's value is 8
    return o.build(), kid, vid


def test_a_refused_map_btf_costs_a_warning_not_the_map(btf_state, monkeypatch, no_fd_leak):
    monkeypatch.setattr(own, "map_btf", _wrong_sizes)
    with pytest.warns(BtfWarning, match="refused the BTF of HASH maps"):
        m = HashMap("u32", "u64", 4)
    with m:
        m[1] = 2
        assert m[1] == 2 and "btf_id" not in bpftool_json("map", "show", "id", str(m.id))
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # said once; not tried again for this type
        with HashMap("u32", "u64", 4) as m2:
            m2[1] = 3
    monkeypatch.undo()
    with ArrayMap("u64", 2) as a:                # other types still get their BTF
        assert bpftool_json("map", "show", "id", str(a.id))["btf_id"] > 0


def test_a_refused_btf_load_is_said_once(btf_state, monkeypatch, no_fd_leak):
    monkeypatch.setattr(own, "map_btf", lambda k, v: (b"not btf at all", 1, 2))
    with pytest.warns(BtfWarning, match="refused to load BTF"):
        m = HashMap("u32", "u64", 4)
    m.close()
    assert not kbtf.own_btf_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = Program("after")
        p.mov(R0, 0).exit()
        with load(p, "socket_filter") as prog, ArrayMap("u32", 2) as a:
            assert "btf_id" not in bpftool_json("prog", "show", "id", str(prog.info().id))
            assert "btf_id" not in bpftool_json("map", "show", "id", str(a.id))


# ------------------------------------------------------------------ programs
def _with_subprogram() -> Program:
    p = Program("linum")
    p.mov(R6, R1)
    p.call_local("helper")
    p.add(R0, 1)
    p.exit()
    sub = p.subprogram("helper")
    sub.mov(R0, 41)
    sub.exit()
    return p


def test_bpftool_shows_the_python_lines(no_fd_leak):
    p = _with_subprogram()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with load(p, "socket_filter") as prog:
            pid = str(prog.info().id)
            assert bpftool_json("prog", "show", "id", pid)["btf_id"] > 0
            dumped = bpftool_json("prog", "dump", "xlated", "id", pid, "linum")
            text = bpftool_text("prog", "dump", "xlated", "id", pid, "linum")
    origins = [i.origin for i in p.finalize()]
    assert [(d["file"], d["line_num"]) for d in dumped] == \
        [(o.rpartition(":")[0], int(o.rpartition(":")[2])) for o in origins]
    assert [d["src"] for d in dumped] == ["p.mov(R6, R1)", 'p.call_local("helper")',
                                          "p.add(R0, 1)", "p.exit()", "sub.mov(R0, 41)",
                                          "sub.exit()"]
    assert dumped[0]["proto"] == "int linum()" and dumped[4]["proto"] == "int helper()"
    assert f"; p.add(R0, 1) [file:{HERE} line_num:{origins[2].rpartition(':')[2]}" in text


def test_bpftool_shows_the_assembly_lines(tmp_path, no_fd_leak):
    path = tmp_path / "answer.s"
    path.write_text("; the answer\nr0 = 42\n  exit\n")
    from pyebpf.text import assemble
    with load(assemble(path.read_text(), filename=str(path)), "socket_filter") as prog, \
            load("r0 = 7\nexit\n", "socket_filter") as inline:
        dumped = bpftool_json("prog", "dump", "xlated", "id", str(prog.info().id), "linum")
        assert [(d["src"], d["file"], d["line_num"], d["line_col"]) for d in dumped] == \
            [("r0 = 42", str(path), 2, 1), ("exit", str(path), 3, 3)]   # (bpftool trims)
        dumped = bpftool_json("prog", "dump", "xlated", "id", str(inline.info().id), "linum")
        assert [d["src"] for d in dumped] == ["r0 = 7", "exit"]


def test_callback_subprograms_load_with_btf(no_fd_leak):
    p = Program("loop")
    p.mov(R1, 3)
    p.ld_func(R2, "cb")
    p.mov(R3, 0)
    p.mov(R4, 0)
    p.call("loop")
    p.mov(R0, 0)
    p.exit()
    cb = p.subprogram("cb")
    cb.mov(R0, 0)
    cb.exit()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with load(p, "socket_filter") as prog:
            dumped = bpftool_json("prog", "dump", "xlated", "id", str(prog.info().id), "linum")
    assert [d["proto"] for d in dumped if "proto" in d] == ["int loop()", "int cb()"]


def test_the_verifier_log_and_the_error_agree(no_fd_leak):
    p = Program("bad")
    p.mov(R0, 0)
    p.ldxdw(R0, R1, 30000)       # out of the context
    p.exit()
    with pytest.raises(VerifierError) as info:
        load(p, "socket_filter", check=False)
    exc = info.value
    file, _, line = exc.origin.rpartition(":")
    assert file == HERE and exc.index == 1
    # the log's source line before the failing instruction is the same line
    before = exc.log.split("\n1: (79)")[0]
    last = re.findall(r"^; (.*) @ (\S+):(\d+)$", before, re.M)[-1]
    assert last == ("p.ldxdw(R0, R1, 30000)       # out of the context",
                    os.path.basename(HERE), line)
    assert "arg#0" not in exc.log                # no complaint about the function's type


def test_a_refused_program_btf_costs_a_warning_not_the_load(btf_state, monkeypatch, no_fd_leak):
    real = own.program_btf

    def broken(insns, name, program=None, source=None):
        got = real(insns, name, program, source)
        # a line record past the end of the program: the kernel refuses it
        got.line_info += (len(insns) + 5).to_bytes(4, "little") + bytes(12)
        return got
    monkeypatch.setattr(own, "program_btf", broken)
    p = Program("refused")
    p.mov(R0, 0).exit()
    with pytest.warns(BtfWarning, match="refused the BTF of programs"):
        prog = load(p, "socket_filter")
    with prog:
        assert prog.test_run(bytes(64)).retval == 0
        assert "btf_id" not in bpftool_json("prog", "show", "id", str(prog.info().id))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with load(p, "socket_filter"):
            pass
    # a program that is wrong whatever its BTF still fails with its own error
    kbtf._REFUSED.clear()
    bad = Program("bad")
    bad.exit()
    with pytest.raises(VerifierError, match="R0 !read_ok"):
        load(bad, "socket_filter", check=False)


def test_a_wrong_program_is_not_retried_without_btf(btf_state, no_fd_leak):
    p = Program("bad")
    p.mov(R0, 0)
    p.ldxdw(R0, R1, 30000)
    p.exit()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(VerifierError) as info:
            load(p, "socket_filter", check=False)
    assert "; p.ldxdw(R0, R1, 30000) @" in info.value.log
    assert not kbtf._REFUSED


def test_generated_code_shows_what_it_does(no_fd_leak):
    # pyebpf trace / bt code carries "<probe: action>" origins, not file lines
    p = Program("gen")
    p.mov(R0, 0)
    p.exit()
    insns = p.finalize()
    for insn in insns:
        insn.origin = "<uprobe:/bin/true:main: @calls = count()>"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with load(insns, "socket_filter") as prog:
            dumped = bpftool_json("prog", "dump", "xlated", "id", str(prog.info().id), "linum")
    assert dumped[0]["src"] == "<uprobe:/bin/true:main: @calls = count()>"
    assert "src" not in dumped[1]                   # one record: the line did not change


def test_a_fault_in_describing_costs_a_warning_not_the_map_or_load(btf_state, monkeypatch,
                                                                  no_fd_leak):
    def boom(*args, **kw):
        raise RuntimeError("boom")
    monkeypatch.setattr(own, "map_btf", boom)
    monkeypatch.setattr(own, "program_btf", boom)
    with pytest.warns(BtfWarning, match="could not describe a map's types .*boom"):
        m = HashMap("u32", "u64", 4)
    m.close()
    p = Program("fault")
    p.mov(R0, 0).exit()
    with pytest.warns(BtfWarning, match="could not describe a program .*boom"):
        prog = load(p, "socket_filter")
    with prog:
        assert prog.test_run(bytes(64)).retval == 0
