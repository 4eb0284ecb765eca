"""``pyebpf bt``'s bpftrace options (-q, -o, -k/-kk, -B, -d, -v, --include,
--info, -V, '-' for stdin, the attached-probes notification), their
refusals in bpftrace's words, and the JSON/zero() printing bpftrace does --
compared with bpftrace 0.17 where it prints."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pyebpf.cli import btopts
from pyebpf.lang import compile as bt_compile
from pyebpf.lang.errors import LangError
from pyebpf.lang.includes import find_headers

from .harness import ROOT, compare_with_bpftrace, run_bpftrace, run_pyebpf_bt


def bt(*args: str, stdin: str | None = None, env: dict[str, str] | None = None,
       cwd: str | None = None) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "pyebpf", "bt", *args], capture_output=True,
                          text=True, timeout=120, env=full, cwd=cwd or str(ROOT), input=stdin)


# ------------------------------------------------------------ option values
@pytest.mark.parametrize("text, value", [("1", 1), ("4194304", 4194304), ("+7", 7)])
def test_pid_values_bpftrace_takes(text: str, value: int) -> None:
    assert btopts.check_pid(text) == value


@pytest.mark.parametrize("text, message", [
    ("a1111", "pid 'a1111' is not a valid decimal number"),
    ("111a1", "pid '111a1' is not a valid decimal number"),
    ("0x10", "pid '0x10' is not a valid decimal number"),
    ("", "pid '' is not a valid decimal number"),
    ("0", "pid '0' out of valid pid range [1,4194304]"),
    ("-5", "pid '-5' out of valid pid range [1,4194304]"),
    ("4194305", "pid '4194305' out of valid pid range [1,4194304]")])
def test_pid_values_bpftrace_refuses(text: str, message: str) -> None:
    with pytest.raises(btopts.OptionProblem) as info:
        btopts.check_pid(text)
    assert str(info.value) == message


@pytest.mark.parametrize("text, words", [
    ("./app 100", ["./app", "100"]), ("echo 'A'", ["echo", "'A'"]),
    ('echo "a b"', ["echo", '"a', 'b"']), ("echo  x", ["echo", "", "x"])])
def test_command_words_are_split_as_bpftrace_splits_them(text: str, words: list[str]) -> None:
    assert btopts.command_words(text) == words


@pytest.mark.parametrize("text", ["", " ", " ls"])
def test_command_without_a_program_first_is_refused(text: str) -> None:
    import argparse
    with pytest.raises(argparse.ArgumentTypeError):
        btopts.command_words(text)


def test_help_is_the_usage_in_bpftraces_layout() -> None:
    proc = bt("-h")
    assert proc.returncode == 0 and proc.stdout == btopts.USAGE
    for heading in ("USAGE:", "OPTIONS:", "TROUBLESHOOTING OPTIONS:", "ENVIRONMENT:",
                    "EXAMPLES:"):
        assert f"\n{heading}\n" in "\n" + proc.stdout
    for option in ("-B MODE", "-f FORMAT", "-o FILE", "-I DIR", "--include FILE", "-q",
                   "--unsafe", "--info", "-kk", "-V, --version", "--usdt-file-activation",
                   "--no-warnings", "-d, -dd", "--show-program", "--flamegraph", "--plot"):
        assert option in proc.stdout, option


def test_version_names_the_language() -> None:
    for flag in ("-V", "--version"):
        proc = bt(flag)
        assert proc.returncode == 0 and "(the bpftrace v0.17.0 language)" in proc.stdout


def test_dry_run_prints_the_program_and_runs_nothing() -> None:
    proc = bt("-d", "-e", 'BEGIN { printf("x\\n"); }')
    assert proc.returncode == 0 and "Attaching" not in proc.stdout
    assert proc.stdout == bt("--show-program", "-e", 'BEGIN { printf("x\\n"); }').stdout


# ---------------------------------------------------------------- #include
def test_headers_are_found_as_a_compiler_finds_them(tmp_path) -> None:
    (tmp_path / "mine.h").write_text("#define MINE 1\n")
    script = tmp_path / "p.bt"
    text = '#include <linux/types.h>\n#include "mine.h"\nBEGIN { exit(); }\n'
    got = find_headers(text, str(script), includes=["errno.h"])
    assert [(h.name, h.line) for h in got] == [("errno.h", 0), ("linux/types.h", 1),
                                              ("mine.h", 2)]
    assert got[2].path == str(tmp_path / "mine.h") and os.path.isfile(got[1].path)
    # -I directories come first
    assert find_headers("", "stdin", ["mine.h"], [str(tmp_path)])[0].path.startswith(
        str(tmp_path))


def test_a_missing_header_is_refused_at_its_line() -> None:
    with pytest.raises(LangError) as info:
        bt_compile('  #include <lol/no.h>\nBEGIN { exit(); }\n')
    assert str(info.value) == ("stdin:1:12-22: ERROR: 'lol/no.h' file not found\n"
                               "  #include <lol/no.h>\n"
                               "           ~~~~~~~~~~")
    with pytest.raises(LangError, match="'lol/no.h' file not found"):
        bt_compile('BEGIN { exit(); }', includes=["lol/no.h"])


def test_include_headers_macros_apply_as_an_include_lines_do(tmp_path) -> None:
    (tmp_path / "mine.h").write_text("#define MINE 7\n")
    prog = bt_compile('BEGIN { @ = EPERM + MINE; exit(); }', includes=["errno.h", "mine.h"],
                      include_dirs=[str(tmp_path)])
    total = prog.script.probes[0].block.stmts[0].value
    assert (total.left.value, total.right.value) == (1, 7)
    for via_line in (True, False):     # an #include line's macros, the same way
        text = ('#include <errno.h>\n' if via_line else '') + 'BEGIN { @ = ENOENT; exit(); }'
        got = bt_compile(text, includes=() if via_line else ["errno.h"])
        assert got.script.probes[0].block.stmts[0].value.value == 2


@pytest.mark.kernel
def test_include_macros_and_strerror_as_bpftrace() -> None:
    compare_with_bpftrace('BEGIN { print(strerror(EPERM)); printf("%d\\n", ENOENT); exit(); }',
                          "--include", "errno.h", exact=True)


def test_the_program_keeps_its_headers_for_the_c_definitions() -> None:
    prog = bt_compile('#include <linux/types.h>\nBEGIN { exit(); }', includes=["errno.h"])
    assert [h.name for h in prog.headers] == ["errno.h", "linux/types.h"]


# ----------------------------------------------------------- error messages
def test_missing_tracepoint_points_at_the_attach_point() -> None:
    with pytest.raises(LangError) as info:
        bt_compile('t:syscalls:nonsense { printf("hit"); exit(); }')
    assert str(info.value).startswith(
        "stdin:1:1-20: ERROR: tracepoint not found: syscalls:nonsense\n"
        't:syscalls:nonsense { printf("hit"); exit(); }\n'
        "~~~~~~~~~~~~~~~~~~~\n")


@pytest.mark.parametrize("func", ["_raw_spin_lock", "_raw_spin_lock_irqsave",
                                  "_raw_spin_unlock_irqrestore", "queued_spin_lock_slowpath"])
def test_banned_kretprobes(func: str) -> None:
    from pyebpf.lang.probes import ProbeSpecError
    with pytest.raises(ProbeSpecError) as info:
        bt_compile(f"kretprobe:{func} {{ exit(); }}")
    assert str(info.value) == (f"error: kretprobe:{func} can't be used as it might lock up "
                               "your system.")


def test_uprobe_address_and_offset_refusals_in_bpftraces_words() -> None:
    with pytest.raises(Exception, match=r"^Could not resolve address: /bin/bash:0xa: "):
        bt_compile('uprobe:/bin/bash:10 { exit(); }')
    with pytest.raises(Exception,
                       match=r"^Offset outside the function bounds \('echo_builtin' size is \d+\)"):
        bt_compile('uprobe:/bin/bash:echo_builtin+1000000 { exit(); }')


@pytest.mark.kernel
def test_kaddr_of_no_symbol() -> None:
    with pytest.raises(LangError) as info:
        bt_compile('BEGIN { print(kaddr("asdfzzzzzzz")) }').show()
    first = str(info.value).split("\n")[0]
    assert first.startswith("stdin:1:") and \
        first.endswith(": ERROR: Failed to resolve kernel symbol: asdfzzzzzzz")


# ------------------------------------------------------------- running
@pytest.mark.kernel
def test_program_on_stdin_quiet_and_notified(tmp_path) -> None:
    proc = bt("-q", "-", stdin='BEGIN { printf("hello\\n"); exit(); }\n',
              env={"__BPFTRACE_NOTIFY_PROBES_ATTACHED": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "hello\n\n\n"
    assert proc.stderr == "__BPFTRACE_NOTIFY_PROBES_ATTACHED\n"
    assert "__BPFTRACE" not in bt("-e", "BEGIN { exit(); }").stderr


@pytest.mark.kernel
def test_output_file_holds_the_output(tmp_path) -> None:
    out = tmp_path / "out.txt"
    out.write_text("old contents\n")
    proc = bt("-o", str(out), "-B", "full", "-e",
              'BEGIN { printf("SUCCESS %d\\n", 1); @=lhist(50, 0, 100, 10); exit(); }')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "\n\n"             # (bpftrace too: these on stdout)
    text = out.read_text()
    assert text.startswith("Attaching 1 probe...\nSUCCESS 1\n@: \n[50, 60)")


@pytest.mark.kernel
def test_info_reports_the_kernels_support() -> None:
    proc = bt("--info")
    assert proc.returncode == 0, proc.stderr
    assert "\n  perf_event_array: yes\n" in proc.stdout
    assert proc.stdout.startswith("System\n  OS: Linux")


@pytest.mark.kernel
def test_verbose_names_each_probes_program() -> None:
    proc = bt("-v", "-e", "BEGIN { exit(); } END { }")
    assert proc.returncode == 0, proc.stderr
    assert "Attached BEGIN: program id" in proc.stderr
    assert "Attached END: program id" in proc.stderr


# ---------------------------------------------------- against bpftrace 0.17
@pytest.mark.kernel
@pytest.mark.parametrize("args", [("-k",), ("-kk",), ("-kk", "-f", "json")])
def test_helper_errors_as_bpftrace(args: tuple[str, ...]) -> None:
    compare_with_bpftrace('i:s:1 { @[1] = 1; printf("%d\\n", @[2]); delete(@[3]); '
                          '$x = @[4]; @[5]++; exit(); }', *args)


@pytest.mark.kernel
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_no_warnings_silences_the_text_warnings_only(fmt: str) -> None:
    compare_with_bpftrace('i:s:1 { @[1] = 1; delete(@[3]); exit(); }', "--no-warnings",
                          "-k", "-f", fmt, exact=True)


@pytest.mark.kernel
def test_failed_reads_are_reported_with_kk() -> None:
    # (BEGIN reads through the legacy probe_read_str, as bpftrace 0.17)
    out = compare_with_bpftrace('BEGIN { printf("%s|\\n", str(0)); exit(); }', "-kk", exact=True)
    assert out.split("\n")[:4] == [
        "stdin:1:25-31: WARNING: Failed to probe_read_str: Bad address (-14)",
        'BEGIN { printf("%s|\\n", str(0)); exit(); }',
        "                        ~~~~~~", "|"]


def _helpers_called(prog: object) -> dict[str, list[int]]:
    unit = prog.generate()      # type: ignore[attr-defined]
    return {pl.name: [i.imm for i in pl.program.finalize() if i.code == 0x85]
            for pl in unit.probes}


def test_reads_where_the_probe_has_no_address_space_use_probe_read() -> None:
    # bpftrace 0.17: BEGIN/END, interval, profile... read through the legacy
    # probe_read (4), a tracepoint through probe_read_kernel (113); curtask's
    # memory is the kernel's everywhere
    prog = bt_compile('struct foo {int a;}; BEGIN { $t = ((struct foo*) 0)->a; '
                      '$u = *(int32*)8; $p = ((struct task_struct *)curtask)->pid; '
                      '$s = str(8); } '
                      'i:s:1 { $t = ((struct foo*) 0)->a; } '
                      'tracepoint:sched:sched_switch { $t = ((struct foo*) 0)->a; }')
    assert _helpers_called(prog) == {"BEGIN": [4, 4, 35, 113, 45], "interval:s:1": [4],
                                     "tracepoint:sched:sched_switch": [113]}


@pytest.mark.kernel
@pytest.mark.parametrize("probe", ["BEGIN", "i:ms:1"])
def test_a_failed_member_read_is_reported_as_bpftrace_reports_it(probe: str) -> None:
    compare_with_bpftrace('struct foo {int a;}; ' + probe + ' { $tmp = ((struct foo*) 0)->a; '
                          'exit(); }', "-kk", "-q", "-f", "json", exact=True)


@pytest.mark.kernel
def test_no_helper_check_by_default() -> None:
    out = compare_with_bpftrace('i:s:1 { @[1] = 1; delete(@[3]); exit(); }', exact=True)
    assert "WARNING" not in out


@pytest.mark.kernel
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_zeroed_histograms_as_bpftrace(fmt: str) -> None:
    compare_with_bpftrace(
        'BEGIN { @hist = hist(2); @h = lhist(2, 0, 100, 10); @k[1] = hist(3); @k[2] = hist(9); '
        '@e = hist(3); @n[1] = lhist(5, 0, 10, 1); zero(@hist); zero(@h); zero(@k); '
        'clear(@e); zero(@n); clear(@n); @k[2] = hist(100); exit(); }', "-f", fmt, exact=True)


@pytest.mark.kernel
def test_join_is_its_own_json_type() -> None:
    # (the command's own output comes before or after: lines compared as sets)
    program = 'tracepoint:syscalls:sys_enter_execve /pid == cpid/ { join(args->argv, ","); }'
    theirs = run_bpftrace(program, "-f", "json", command="/bin/echo a b")
    ours = run_pyebpf_bt(program, "-f", "json", command="/bin/echo a b")
    assert '{"type": "join", "data": "/bin/echo,a,b"}' in theirs.split("\n")
    assert set(ours.split("\n")) == set(theirs.split("\n"))
