"""Recipes (pyebpf.trace.Trace) against the real kernel, on the C workload
whose calls are deterministic: every count and histogram is known exactly."""
from __future__ import annotations

import os
import subprocess

import pytest

from pyebpf.errors import OptionError, ProgramError
from pyebpf.lang.errors import LangError
from pyebpf.probes.sources import ProbeSpecError
from pyebpf.session.live import Child
from pyebpf.trace import Trace, log2_bucket
from pyebpf.trace import recipes

from .conftest import NAMES, expected

# (each test that needs the kernel is marked `kernel`; the others run under every Python)
N = 200


def run(trace: Trace, argv: list[str]):
    """Start ``argv`` stopped, attach with its pid, let it run to the end;
    returns (session, results) -- the session is still open (close it)."""
    child = Child(argv)
    try:
        session = trace.start(child.pid)
    except BaseException:
        child.kill()
        raise
    child.go()
    child.wait()
    child.close()
    return session, session.results()


def buckets(values, bucket=log2_bucket):
    out = {}
    for v in values:
        out[bucket(v)] = out.get(bucket(v), 0) + 1
    return out


@pytest.mark.kernel
def test_count_hist_stats_exact(workload, no_fd_leak):
    t = (Trace(f"uprobe:{workload}:work").count(by="arg0").hist("arg1").lhist("arg1", 0, 5000, 1000)
         .sum("arg0").min("arg1").max("arg1").avg("arg1").stats("arg1").count())
    s, res = run(t, [workload, str(N)])
    with s:
        exp = expected(N)
        a1 = exp["work_arg1"]
        assert res["@count"] == {(k,): v for k, v in exp["work_arg0"].items()}
        assert res["@hist"] == buckets(a1)
        assert res["@lhist"] == buckets(a1, lambda v: 1 + v // 1000)
        assert res["@sum"] == sum(i % 10 for i in range(N))
        assert (res["@min"], res["@max"]) == (min(a1), max(a1))
        assert res["@avg"] == sum(a1) // N
        assert res["@stats"] == (N, sum(a1) // N, sum(a1))
        assert res["@count2"] == N
        text = s.format_text()
        assert "@count[3]: 20\n" in text and f"@stats: count {N}, average" in text
        assert text.index("@avg") < text.index("@count[") < text.index("@hist:")
        # the typed readers: one aggregation each, in its kind's shape
        assert s.counts("@count") == res["@count"] and s.value("@sum") == res["@sum"]
        assert s.histogram("hist") == res["@hist"] and s.stats("@stats") == res["@stats"]
        assert (s.value("@min"), s.value("@avg")) == (min(a1), sum(a1) // N)
        with pytest.raises(ProgramError, match="@hist is an unkeyed hist.*histogram()"):
            s.counts("@hist")
        with pytest.raises(ProgramError, match="no aggregation @nope; the trace has @avg, "):
            s.value("@nope")


@pytest.mark.kernel
def test_string_keys_comm_and_filters(workload, no_fd_leak):
    t = (Trace(f"uprobe:{workload}:greet", filters=["arg1 >= 3"])
         .count(by="str(arg0)").count(by="comm, arg1 % 2"))
    s, res = run(t, [workload, str(N)])
    with s:
        names = expected(N)["greet_names"][3:]
        assert res["@count"] == {(n,): names.count(n) for n in NAMES}
        comm = os.path.basename(workload)[:15]
        assert s.counts("@count2") == res["@count2"]
        assert res["@count2"] == {(comm, 0): sum(1 for i in range(3, N) if i % 2 == 0),
                                  (comm, 1): sum(1 for i in range(3, N) if i % 2 == 1)}
        assert f"@count2[{comm}, 1]: " in s.format_text()


@pytest.mark.kernel
def test_string_filter(workload):
    t = Trace(f"uprobe:{workload}:greet", filters=['str(arg0) == "bob"', "arg1 < 100"]).count()
    s, res = run(t, [workload, str(N)])
    with s:
        assert res["@"] == sum(1 for i in range(100) if i % 3 == 1)


@pytest.mark.kernel
def test_latency_and_retval(workload, no_fd_leak):
    t = Trace(f"uprobe:{workload}:slow").hist("latency / 1000").count(by="retval, arg0")
    s, res = run(t, [workload, str(N), "300"])
    with s:
        calls = expected(N)["slow_calls"]
        hist = res["@hist"]
        assert sum(hist.values()) == calls
        assert min(hist) >= log2_bucket(300)          # nanosleep(300 us) lasts at least that
        assert res["@count"] == {(300, 300): calls}
        # the two-probe program a user would write: the entry saves the time
        # and arg0 by thread, the return runs the actions
        assert t.text().startswith(f"uprobe:{workload}:slow") and "@__arg0[tid] = arg0" in t.text()
        assert len(t.programs) == 2


@pytest.mark.kernel
def test_uretprobe_retval(workload):
    t = Trace(f"uretprobe:{workload}:work").sum("retval")
    s, res = run(t, [workload, str(N)])
    with s:
        assert res["@"] == sum((i % 10) * 3 + i * 37 % 5000 for i in range(N))


@pytest.mark.kernel
def test_user_stacks_are_symbolized_after_exit(workload, no_fd_leak):
    t = recipes.stacks(f"uprobe:{workload}:work")
    s, res = run(t, [workload, "50"])
    with s:
        (stack,) = res["@"]
        frames = stack[0]
        assert [f.split("+")[0] for f in frames[:3]] == ["work", "outer", "main"]
        assert frames[0] == "work+0"
        assert res["@"][stack] == 50
        text = s.format_text()
        assert text.startswith("@[\n    work+0\n    outer+") and text.endswith("]: 50\n")
        assert ";outer+" in str(s.json_objects())


@pytest.mark.kernel
def test_events_perf_and_ring(workload, no_fd_leak):
    # (ring=False asked for the perf buffer: the language's run has one ring
    # buffer, which both now take)
    for ring in (False, True):
        t = Trace(f"uprobe:{workload}:greet", ring=ring).print(
            "%s %d %s", "name=str(arg0)", "arg1", "comm")
        s, _ = run(t, [workload, "30"])
        with s:
            evs = s.read_events(0)
            assert [e.fields["arg1"] for e in evs] == list(range(30))
            names = [e.fields["name"] for e in evs]
            # the first call reads the string before its page was touched
            assert names[1:] == expected(30)["greet_names"][1:]
            assert evs[5].line == f"carol 5 {os.path.basename(workload)[:15]}\n"
            assert evs[0].to_json()["probe"] == f"uprobe:{workload}:greet"
            assert s.lost == 0


@pytest.mark.kernel
def test_timestamps(workload):
    import time
    t = Trace(f"uprobe:{workload}:slow").print(None, "nsecs", "elapsed", "tid", "pid", "cpu", "uid")
    t0 = time.monotonic_ns()
    s, _ = run(t, [workload, "24", "2000"])
    t1 = time.monotonic_ns()
    with s:
        evs = sorted(s.read_events(0), key=lambda e: e.fields["nsecs"])
        assert len(evs) == 3
        for e in evs:
            f = e.fields
            assert t0 <= f["nsecs"] <= t1 and 0 < f["elapsed"] < t1 - t0
            assert f["tid"] == f["pid"] > 0 and f["cpu"] < os.cpu_count() and f["uid"] == 0
        gaps = [b.fields["elapsed"] - a.fields["elapsed"] for a, b in zip(evs, evs[1:])]
        assert all(g >= 2_000_000 for g in gaps)         # slow(2000 us) in between


@pytest.mark.kernel
def test_several_probes_glob_and_func(workload):
    t = Trace(f"uprobe:{workload}:work", f"uprobe:{workload}:greet").count(by="probe")
    s, res = run(t, [workload, "40"])
    with s:
        assert res["@"] == {(f"uprobe:{workload}:work",): 40, (f"uprobe:{workload}:greet",): 40}
    t = Trace(f"uprobe:{workload}:[gw]*").count(by="func")
    s, res = run(t, [workload, "40"])
    with s:
        assert res["@"] == {("work",): 40, ("greet",): 40}


@pytest.mark.kernel
def test_pid_filter_keeps_other_processes_out(workload):
    other = subprocess.Popen([workload, "100000", "1000"], stdout=subprocess.DEVNULL)
    try:
        t = Trace(f"uprobe:{workload}:work").count()
        s, res = run(t, [workload, "77"])
        with s:
            assert res["@"] == 77
    finally:
        other.kill()
        other.wait()


@pytest.mark.kernel
def test_tracepoint_fields(workload):
    t = (Trace("tracepoint:syscalls:sys_enter_openat", filters=['str(args.filename) == "/dev/null"'])
         .count(by="args.dfd").count(by="str(args.filename)"))
    s, res = run(t, [workload, str(N)])
    with s:
        opens = expected(N)["opens"]
        assert res["@count"] == {(-100,): opens}        # AT_FDCWD, a signed field
        assert res["@count2"] == {("/dev/null",): opens}


@pytest.mark.kernel
def test_usdt_probe(workload):
    t = Trace(f"usdt:{workload}:pyebpf_test:tick").count(by="arg1").hist("arg0")
    s, res = run(t, [workload, str(N)])
    with s:
        assert res["@count"] == {(k,): v for k, v in expected(N)["work_arg0"].items()}
        assert res["@hist"] == buckets(range(N))


def test_show_and_program(workload):
    with recipes.latency(f"uprobe:{workload}:slow", unit="us") as t:
        text = t.show()
        program = t.text()
        assert text.startswith(program)              # the bpftrace program, then its eBPF
        assert f"uretprobe:{workload}:slow /@__start[tid]/" in program
        assert "@latency_us = hist($latency / 1000);" in program
        assert "; probe uprobe:" in text and "bpf_ktime_get_ns" in text
        assert len(t.programs) == 2 and t.program is not t.programs[0]
        assert t.aggregates[0].name == "latency_us"


def test_errors_before_loading(workload):
    with pytest.raises(ProbeSpecError, match="nothing matches 'nope'"):
        Trace(f"uprobe:{workload}:nope").count().build()
    with pytest.raises(ProbeSpecError, match=r"nothing matches 'zz\*'"):
        Trace(f"uprobe:{workload}:zz*").count().build()
    with pytest.raises(OptionError, match="latency needs a function probe"):
        Trace("tracepoint:syscalls:sys_enter_openat").hist("latency").build()
    with pytest.raises(OptionError, match="no return value"):
        Trace("tracepoint:syscalls:sys_enter_openat").sum("retval").build()
    with pytest.raises(LangError, match="does not contain a field named 'nme'"):
        Trace("tracepoint:syscalls:sys_enter_openat").count(by="args.nme").build()
    with pytest.raises(LangError, match="close matches"):
        Trace("tracepoint:syscalls:sys_enter_opnat").count().build()
    with pytest.raises(ValueError, match="2 conversion"):
        Trace(f"uprobe:{workload}:work").print("%d %d", "arg0")
    # the arguments at a return: refused, as the language refuses them
    with pytest.raises(LangError, match="arg0 builtin can only be used"):
        Trace(f"uretprobe:{workload}:work").sum("arg0").build()
    with pytest.raises(OptionError, match="two aggregations are named @n"):
        Trace(f"uprobe:{workload}:work").count(name="n").sum("arg0", name="n").build()


@pytest.mark.kernel
def test_cxx_stacks_are_demangled(tmp_path):
    import shutil
    if shutil.which("g++") is None or shutil.which("c++filt") is None:
        pytest.skip("g++ or c++filt is not installed")
    from .conftest import HERE
    exe = tmp_path / "cxx_workload"
    subprocess.run(["g++", "-O0", "-g", "-fno-omit-frame-pointer", "-o", str(exe),
                    str(HERE / "cxx_workload.cpp")], check=True, capture_output=True)
    t = Trace(f"uprobe:{exe}:_ZNK6shapes6Circle4areaEi").count(by="ustack").count(by="func")
    s, res = run(t, [str(exe), "25"])
    with s:
        (stack,) = res["@count"]
        assert stack[0][0] == "shapes::Circle::area(int) const+0"
        assert stack[0][1].startswith("long measure<shapes::Circle>(shapes::Circle const&, int)+")
        assert stack[0][2].startswith("main+")
        assert res["@count"][stack] == 25
        assert res["@count2"] == {("shapes::Circle::area(int) const",): 25}


def test_importing_trace_does_not_import_the_compiler():
    """The language's compiler is imported when a trace is built, not with
    the API (which re-exports the language's aggregation classes)."""
    import sys
    code = ("import sys, pyebpf.trace, pyebpf.trace.recipes; "
            "print(sorted(m for m in sys.modules if m.startswith('pyebpf.lang.')))")
    from .conftest import ROOT
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=str(ROOT), env={"PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "['pyebpf.lang.aggregations']"
