"""`pyebpf trace` and `pyebpf run` as a user meets them: --help, errors and
exit statuses, JSON lines, stopping (duration, -n, the command's exit,
Ctrl-C), intervals, --show-program, startup time."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pyebpf.cli import COMMANDS
from waiting import read_until, wait_until

from .conftest import ROOT, cli


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    proc = cli(command, "--help")
    assert proc.returncode == 0 and proc.stderr == ""
    text = proc.stdout
    # (bt's help is laid out as bpftrace's -h)
    assert text.startswith(f"USAGE:\n    pyebpf {command} " if command == "bt"
                           else f"usage: pyebpf {command}")
    assert all(len(line) <= 100 for line in text.splitlines()), "lines too long for a terminal"


def test_main_help_lists_trace_and_run():
    proc = cli("--help")
    assert proc.returncode == 0
    assert "trace" in proc.stdout and "run" in proc.stdout


def test_trace_help_reads_well():
    text = cli("trace", "--help").stdout
    for words in ("uprobe:PATH:SYMBOL", "usdt:PATH:[PROVIDER:]NAME", "tracepoint:CATEGORY:NAME",
                  "--count", "--hist", "--print", "--json", "-c CMD", "-p PID", "--duration",
                  "latency", "examples:", "exit status"):
        assert words in text, words


@pytest.mark.parametrize("args, status, words", [
    (["trace"], 2, "the following arguments are required: PROBE"),
    (["trace", "uprobe:/bin/true:main", "--bogus"], 2, "unrecognized arguments"),
    (["trace", "uprobe:/bin/true:main", "-p", "1", "-c", "true"], 2, "exclude each other"),
    (["trace", "uprobe:/bin/true:main", "-n", "3"], 2, "add --print"),
    (["trace", "uprobe:/bin/true:main", "--duration", "-1"], 2, "positive"),
    (["trace", "kprobe:vfs_read"], 1, "kprobe probes are not available: "),
    (["trace", "kretprobe:vfs_read"], 1, "kretprobe probes are not available: "),
    (["trace", "bogus:vfs_read"], 1, "starts with a probe kind"),
    (["trace", "uprobe:/nonexistent/bin:main"], 1, "does not exist"),
    (["trace", "uprobe:/bin/true:no_such_function_xyz"], 1, "nothing matches"),
    (["trace", "uprobe:/bin/true:main", "--hist", "arg0 +"], 1, "unexpected end"),
    (["trace", "uprobe:/bin/true:main", "--print", "%d %d", "arg0"], 1, "2 conversion"),
    # (these two read tracefs: the kernel's)
    pytest.param(["trace", "tracepoint:syscalls:sys_enter_opnat"], 1, "close matches",
                 marks=pytest.mark.kernel),
    pytest.param(["trace", "tracepoint:syscalls:sys_enter_openat", "--hist", "latency"], 1,
                 "latency needs", marks=pytest.mark.kernel),
    (["run"], 2, "required"),
])
def test_errors_and_exit_status(args, status, words):
    proc = cli(*args)
    assert proc.returncode == status, (proc.stdout, proc.stderr)
    assert words in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("spec", ["kprobe:vfs_read", "kr:vfs_read"])
def test_a_kprobe_gets_the_reason_bt_gives(spec):
    """pyebpf trace names why kprobes cannot be used here, in bt's words
    (it said 'not a probe spec' before)."""
    trace = cli("trace", spec, "--count")
    bt = cli("bt", "-e", f"{spec} {{ @ = count(); }}")
    assert trace.returncode == bt.returncode == 1, (trace.stderr, bt.stderr)
    why = trace.stderr.strip().removeprefix("pyebpf trace: ")
    assert why == bt.stderr.strip().removeprefix("pyebpf bt: "), (trace.stderr, bt.stderr)
    assert "probes are not available: " in why and "not a probe spec" not in why


@pytest.mark.kernel
def test_command_not_found():
    proc = cli("trace", "tracepoint:syscalls:sys_enter_openat", "-c", "/no/such/command")
    assert proc.returncode == 1 and "cannot run '/no/such/command'" in proc.stderr


@pytest.mark.kernel
def test_json_lines_and_max_events(workload):
    # (the ring buffer keeps the order of the events; per-CPU perf rings are
    # drained one after the other, so a process that moved between CPUs
    # may have its events printed out of order, as with bpftrace)
    proc = cli("trace", f"uprobe:{workload}:greet", "--print", "%s %d", "who=str(arg0)", "arg1",
               "--count", "--json", "-n", "5", "--ringbuf", "-c", f"{workload} 1000000 0")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and all(line.startswith("{") for line in lines), lines
    objs = [json.loads(line) for line in lines]
    events = [o for o in objs if o["type"] == "event"]
    assert [e["fields"]["arg1"] for e in events] == [0, 1, 2, 3, 4]
    assert events[1]["fields"]["who"] == "bob"
    assert events[0]["probe"] == f"uprobe:{workload}:greet"
    (m,) = [o for o in objs if o["type"] == "map"]
    assert m["data"]["@"] >= 5


@pytest.mark.kernel
def test_text_events_and_duration(workload):
    # the workload alone would run for hours (a million 20 ms naps): --duration
    # 1 stops it; at most 1 s / 20 ms events (+ slack), at least one
    t0 = time.monotonic()
    proc = cli("trace", f"uprobe:{workload}:slow", "--print", "slept %d us, tid %d", "arg0", "tid",
               "--duration", "1", "-c", f"{workload} 1000000 20000")
    took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr
    lines = [x for x in proc.stdout.splitlines() if x]
    assert 1 <= len(lines) <= 60 and all(x.startswith("slept 20000 us, tid ") for x in lines)
    assert took < 120
    assert "Attached 1 probe in" in proc.stderr


def voluntary_switches(pid: int) -> int:
    """How many times process ``pid`` went to sleep (nanosleep, ...)."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("voluntary_ctxt_switches"))


#: x86_64 numbers of poll, select, pselect6, ppoll, epoll_wait, epoll_pwait, epoll_pwait2
_WAITING_SYSCALLS = {"7", "23", "270", "271", "232", "281", "441"}


def waits_in_its_loop(pid: int) -> bool:
    """Whether process ``pid``'s main thread is blocked in select/poll/epoll:
    for pyebpf trace, the trace loop (its setup waits in none of them)."""
    with open(f"/proc/{pid}/syscall") as f:
        return f.read().split()[0] in _WAITING_SYSCALLS


@pytest.mark.kernel
def test_ctrl_c_prints_the_aggregations(workload):
    target = subprocess.Popen([workload, "100000000", "1000"], stdout=subprocess.DEVNULL)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = None
    try:
        # (SIGINT at its default in the tracer, even if pytest runs with it
        # ignored, as a background job of a script does)
        proc = subprocess.Popen([sys.executable, "-m", "pyebpf", "trace", f"uprobe:{workload}:work",
                                 "--count", "arg0", "-p", str(target.pid)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                cwd=str(ROOT),
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        read_until(proc.stderr, "Attached", "pyebpf trace to attach")
        # the target sleeps once every 8 calls of work(): 3 more sleeps and
        # it called work() at least 16 times since the attach, every arg0 0-9
        slept = voluntary_switches(target.pid)
        wait_until(lambda: voluntary_switches(target.pid) >= slept + 3,
                   "the target to call work() 16 times")
        # and the tracer is in its loop (a Ctrl-C before it prints the
        # results too: tests/cli/test_stop_signals.py)
        wait_until(lambda: waits_in_its_loop(proc.pid), "pyebpf trace to enter its loop")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()
        target.kill()
        target.wait()
    assert proc.returncode == 0, err
    rows = [x for x in out.splitlines() if x.startswith("@[")]
    assert len(rows) == 10 and all(int(x.split(": ")[1]) > 0 for x in rows), out
    assert "Traceback" not in err


@pytest.mark.kernel
def test_stops_when_the_traced_process_exits(workload):
    target = subprocess.Popen([workload, "300", "1000"], stdout=subprocess.DEVNULL)
    try:
        proc = cli("trace", f"uprobe:{workload}:work", "--count", "-p", str(target.pid),
                   timeout=30)
    finally:
        target.wait()
    assert proc.returncode == 0 and proc.stdout.strip().startswith("@: ")


@pytest.mark.kernel
def test_interval_prints_while_tracing(workload):
    proc = cli("trace", f"uprobe:{workload}:slow", "--count", "--interval", "0.3", "--clear",
               "-c", f"{workload} 80 100000")
    assert proc.returncode == 0, proc.stderr
    counts = [int(x.split(": ")[1]) for x in proc.stdout.splitlines() if x.startswith("@: ")]
    assert len(counts) >= 3
    assert sum(counts) == 10          # 80 / 8 calls, each counted once thanks to --clear


@pytest.mark.kernel
def test_show_program(workload):
    proc = cli("trace", f"uprobe:{workload}:slow", "--hist", "latency", "--show-program")
    assert proc.returncode == 0
    text = proc.stdout
    # the program the flags translate to, then its eBPF: the entry saves
    # the time, the return takes the latency
    assert "; as a bpftrace program" in text and ";     @__start[tid] = nsecs;" in text
    assert ";     @ = hist($latency);" in text
    assert "; probe uprobe:" in text and "; probe uretprobe:" in text
    assert "bpf_ktime_get_ns" in text and "exit" in text


@pytest.mark.kernel
def test_startup_time_is_reported(workload):
    """The time from start to attached is reported, and is part of this run's
    own wall time (how quick: benchmarks' cold start, not a test)."""
    t0 = time.monotonic()
    proc = cli("trace", f"uprobe:{workload}:work", "--count", "-c", f"{workload} 1")
    took = time.monotonic() - t0
    assert proc.returncode == 0
    ms = int(proc.stderr.split("Attached 1 probe in ")[1].split(" ms")[0])
    assert 0 <= ms <= took * 1000


@pytest.mark.kernel
def test_tables(workload):
    proc = cli("trace", "-q", f"uprobe:{workload}:greet", "--print", "pid", "comm", "n=arg1",
               "-c", f"{workload} 3")
    lines = [x for x in proc.stdout.splitlines() if not x.startswith("total")]
    assert lines[0].split() == ["PID", "COMM", "N"]
    assert [x.split()[1:] for x in lines[1:]] == [["workload", "0"], ["workload", "1"],
                                                  ["workload", "2"]]
    proc = cli("trace", "-q", f"uprobe:{workload}:work", "--count", "arg0 % 2", "--sum", "arg0",
               "--by", "arg0 % 2", "--table", "-c", f"{workload} 100")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "@count\nARG0 % 2  COUNT\n" in out and "@sum\nARG0 % 2  SUM(arg0)\n" in out
    rows = out.split("@sum\n")[1].splitlines()[1:3]
    assert [r.split() for r in rows] == [["1", "250"], ["0", "200"]]


def _bt_workload() -> str:
    """tests/lang's workload (its USDT btw:delta has signed -4@ arguments)."""
    from lang.harness import bt_workload
    return bt_workload()


# The six defects issue 14 lists in the flag CLI, each with what bpftrace
# 0.17 prints for the same question on the same workload (checked by hand).
@pytest.mark.kernel
@pytest.mark.parametrize("flags, maps", [
    # a string key of up to 8 bytes came back as an integer: the results
    # were "printed raw" (exit 1) instead of @[ali]: 9
    (["--count", "str(arg0, 3)"],
     ["@[]: 1", "@[ali]: 9", "@[bob]: 10", "@[car]: 10"]),
    # str(E, N) gave N - 1 characters; bpftrace's gives N
    (["--count", "str(arg0, 4)"],
     ["@[]: 1", "@[alic]: 9", "@[bob]: 10", "@[caro]: 10"]),
    # a key list starting with str() did not parse (the reverse order did)
    (["--count", "str(arg0), arg1"],
     ["@[, 0]: 1", "@[alice, 3]: 1", "@[bob, 1]: 1", "@[carol, 2]: 1"]),
], ids=["str-key-8-bytes", "str-length", "str-first-in-key-list"])
def test_issue14_string_keys(workload, flags, maps):
    proc = cli("trace", f"uprobe:{workload}:greet", *flags, "-q", "-c",
               f"{workload} {30 if 'arg1' not in flags[1] else 4}")
    assert proc.returncode == 0, proc.stderr
    assert "raw" not in proc.stderr
    assert sorted(x for x in proc.stdout.splitlines() if x.startswith("@")) == sorted(maps)


@pytest.mark.kernel
def test_issue14_signed_usdt_keys_and_negative_filter():
    """btw:delta's arg1 is a signed int (-4@): keys print -3 (not
    18446744073709551613), and ``arg1 < -2`` is accepted (it was refused)
    and means what it means in bpftrace 0.17: the comparison is unsigned
    (bpftrace warns of it), so -3 and 0..3 pass, -1 and -2 do not."""
    w = _bt_workload()
    proc = cli("trace", f"usdt:{w}:btw:delta", "--count", "arg1", "-q", "-c", f"{w} 14")
    assert proc.returncode == 0, proc.stderr
    got = sorted(x for x in proc.stdout.splitlines() if x.startswith("@"))
    assert got == sorted(f"@[{d}]: 2" for d in range(-3, 4))
    proc = cli("trace", f"usdt:{w}:btw:delta", "--count", "arg1", "--filter", "arg1 < -2",
               "-q", "-c", f"{w} 14")
    assert proc.returncode == 0, proc.stderr
    got = sorted(x for x in proc.stdout.splitlines() if x.startswith("@"))
    assert got == sorted(f"@[{d}]: 2" for d in (-3, 0, 1, 2, 3))


@pytest.mark.kernel
def test_issue14_probe_names_each_matched_function(workload):
    """``--count probe`` on a glob counts per matched probe, as bpftrace."""
    proc = cli("trace", f"uprobe:{workload}:*e*", "--count", "probe", "-q", "-c",
               f"{workload} 30")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert f"@[uprobe:{workload}:greet]: 30" in lines
    assert f"@[uprobe:{workload}:outer]: 30" in lines
    assert not any("*e*" in x for x in lines)


@pytest.mark.kernel
def test_func_keys_name_the_functions_after_exit(workload):
    """``--count func`` on a glob: each function by name, though the command
    has exited when the map is printed (the language's usym would print an
    address then)."""
    proc = cli("trace", f"uprobe:{workload}:[gw]*", "--count", "func", "-q", "-c",
               f"{workload} 20")
    assert proc.returncode == 0, proc.stderr
    assert sorted(x for x in proc.stdout.splitlines() if x.startswith("@")) == \
        ["@[greet]: 20", "@[work]: 20"]


@pytest.mark.kernel
def test_lost_events_are_reported(workload):
    """A ring too small for the events: the losses are counted (the
    program counts what the ring refuses), said on stderr and in a
    {"type": "lost"} object, and every event is either printed or lost."""
    n = 200000
    proc = cli("trace", "-q", f"uprobe:{workload}:work", "--print", "arg0", "arg1", "--json",
               "--buffer-size", "4096", "-c", f"{workload} {n}", timeout=120)
    assert proc.returncode == 0, proc.stderr
    objs = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    events = sum(1 for o in objs if o["type"] == "event")
    (lost,) = [o["data"]["events"] for o in objs if o["type"] == "lost"]
    assert lost > 0 and events + lost == n
    assert f"pyebpf trace: {lost} events lost" in proc.stderr
