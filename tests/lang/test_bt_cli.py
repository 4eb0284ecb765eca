"""``pyebpf bt`` on the command line: running, listing, showing, errors
pointing at the script, stopping."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest
from waiting import read_line, wait_exec

from .harness import ROOT, bt_workload

# (each test that needs the kernel is marked `kernel`; the others run under every Python)


def bt(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "pyebpf", "bt", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=str(ROOT))


@pytest.mark.kernel
def test_begin_exit() -> None:
    proc = bt("-e", 'BEGIN { printf("hi %d\\n", 42); @n = 5; exit(); }')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Attaching 1 probe...\nhi 42\n\n\n@n: 5\n"


# 010 and 0x10: the analysis and the code generator read "$1" alike, as bpftrace (8, 16)
@pytest.mark.kernel
@pytest.mark.parametrize("params, printed", [(("7", "9"), "7 10\n"),
                                             (("010", "0x10"), "8 17\n")])
def test_file_and_positional_parameters(tmp_path, params, printed) -> None:
    f = tmp_path / "p.bt"
    f.write_text('BEGIN {\n  printf("%d %d\\n", $1, $2 + 1);\n  exit();\n}\n')
    proc = bt(str(f), *params)
    assert proc.returncode == 0, proc.stderr
    assert printed in proc.stdout


def test_semantic_error_points_at_the_script() -> None:
    proc = bt("-e", "BEGIN { @x = nosuch(1); }")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("pyebpf bt: stdin:1:") and "ERROR" in lines[0]
    assert lines[1] == "BEGIN { @x = nosuch(1); }"
    assert "~" in lines[2]


@pytest.mark.kernel
def test_verifier_rejection_points_at_the_script_line(tmp_path) -> None:
    f = tmp_path / "loop.bt"
    f.write_text("BEGIN {\n  @a = 1;\n  while (1) { @x = 1; }\n}\n")
    proc = bt(str(f))
    assert proc.returncode == 1
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"pyebpf bt: {f}:3:") and "verifier" in first
    assert "infinite loop" in first
    assert proc.stderr.splitlines()[1] == "  while (1) { @x = 1; }"


def test_missing_probe_is_one_line() -> None:
    proc = bt("-e", "uprobe:/nonexistent/binary:f { @ = count(); }")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "/nonexistent/binary" in proc.stderr


def test_usage_errors() -> None:
    assert bt().returncode == 2
    assert bt("-e", "BEGIN {}", "-p", "1", "-c", "true").returncode == 2


@pytest.mark.kernel
def test_list_tracepoints() -> None:
    proc = bt("-l", "tracepoint:syscalls:sys_enter_openat*")
    assert proc.returncode == 0, proc.stderr
    assert "tracepoint:syscalls:sys_enter_openat" in proc.stdout.split()


@pytest.mark.kernel
def test_show_program_needs_no_privilege() -> None:
    from tests.unprivileged import python_argv
    w = bt_workload()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([*python_argv(), "-m", "pyebpf", "bt", "--show-program", "-e",
                           f"uprobe:{w}:compute /arg0 > 2/ {{\n  @c[arg0] = count();\n}}"],
                          capture_output=True, text=True, timeout=60, env=env, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert f"; probe uprobe:{w}:compute" in proc.stdout
    assert "stdin:2: @c[arg0] = count();" in proc.stdout
    assert "stdin:1: uprobe:" in proc.stdout      # the predicate's line


@pytest.mark.kernel
def test_command_runs_and_its_end_stops(tmp_path) -> None:
    w = bt_workload()
    proc = bt("-e", f"uprobe:{w}:compute {{ @n = count(); }} END {{ printf(\"end\\n\"); }}",
              "-c", f"{w} 12 1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("end\n\n\n@n: 12\n")


@pytest.mark.kernel
def test_cpid_is_the_command() -> None:
    w = bt_workload()
    proc = bt("-e", f'uprobe:{w}:compute /pid == cpid/ {{ @n = count(); }}', "-c", f"{w} 5 1")
    assert proc.returncode == 0, proc.stderr
    assert "@n: 5" in proc.stdout


@pytest.mark.kernel
def test_pid_option_traces_that_process_and_ends_with_it() -> None:
    w = bt_workload()
    # 80 calls 100 ms apart: 8 s, time for pyebpf bt to attach on a loaded machine
    target = subprocess.Popen([w, "80", "100000"], stdout=subprocess.DEVNULL)
    try:
        wait_exec(target.pid, w)
        proc = bt("-e", f"uprobe:{w}:compute {{ @n = count(); }}", "-p", str(target.pid),
                  timeout=60)
    finally:
        target.wait(30)
    assert proc.returncode == 0, proc.stderr
    n = int(proc.stdout.rsplit("@n: ", 1)[1])
    assert 0 < n <= 80


@pytest.mark.kernel
@pytest.mark.parametrize("tool", ["pyebpf", "bpftrace"])
def test_stop_signal_drops_the_backlog_of_system_commands(tool: str) -> None:
    # 200 system() events come in 1 s; the first one's command SIGINTs the
    # tracer (its parent) after 0.5 s, while ~100 more events wait unread.
    # Those are not run (bpftrace stops reading events on a stop signal);
    # END's printf is printed, then the map.
    program = ('interval:ms:5 /@n < 200/ { @n++; if (@n == 1) { '
               'system("sleep 0.5; kill -INT $PPID"); } else { system("echo foo"); } } '
               'END { printf("end\\n"); }')
    if tool == "bpftrace":
        if shutil.which("bpftrace") is None:
            pytest.skip("bpftrace is not installed")
        cmd = ["bpftrace", "--unsafe", "-e", program]
    else:
        cmd = [sys.executable, "-m", "pyebpf", "bt", "--unsafe", "-e", program]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(ROOT),
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    foos, sep, rest = proc.stdout.partition("end\n")
    assert sep and rest.startswith("\n\n@n: "), proc.stdout
    lines = foos.splitlines()
    assert lines[0] == "Attaching 2 probes..." and set(lines[1:]) <= {"foo"}, proc.stdout
    assert len(lines) < 20, proc.stdout


@pytest.mark.kernel
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stop_signal_prints_the_maps(sig: int) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "pyebpf", "bt", "-e",
                             'interval:ms:20 { @n = count(); printf("tick\\n"); } '
                             'END { printf("end\\n"); }'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=str(ROOT))
    assert proc.stdout is not None
    assert proc.stdout.readline() == "Attaching 2 probes...\n"
    assert read_line(proc.stdout, "the first tick") == "tick\n"   # @n is set
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    ticks, sep, rest = out.partition("end\n")
    assert sep and set(ticks.splitlines()) <= {"tick"}, out
    assert rest.startswith("\n\n@n: "), out


@pytest.mark.kernel
def test_json_lines() -> None:
    proc = bt("-f", "json", "-e", 'BEGIN { printf("a\\n"); @x[1] = 2; exit(); }')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        '{"type": "attached_probes", "data": {"probes": 1}}',
        '{"type": "printf", "data": "a\\n"}', "", "",
        '{"type": "map", "data": {"@x": {"1": 2}}}']
