"""The flag CLI's questions as bpftrace programs (pyebpf.lang.flags): the
program ``--show-program`` prints above the eBPF, run by ``pyebpf bt``,
gives what ``pyebpf trace`` gives with the flags on the same workload."""
from __future__ import annotations

import pytest

from pyebpf.lang.flags import Question
from pyebpf.lang.parser import parse

from .conftest import cli


def shown_program(*flags: str) -> str:
    """The bpftrace program of ``pyebpf trace FLAGS --show-program``."""
    proc = cli("trace", *flags, "--show-program")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("; as a bpftrace program")
    out = []
    for x in lines[1:]:
        if not x.startswith(";"):
            break
        out.append(x[4:])
    return "\n".join(out) + "\n"


def result_lines(stdout: str) -> list[str]:
    """Maps and events, sorted (keyed maps print in hash order in bpftrace)."""
    return sorted(x for x in stdout.splitlines()
                  if x.strip() and not x.startswith(("total ", "Attaching")))


def test_program_text():
    q = Question(["uprobe:/bin/x:work"], filters=["arg1 > 100", 'comm == "a\\"b"'])
    q.add("count", None, "arg0, str(arg1, 4)").add("hist", "arg1 / 10 * 2", "comm")
    assert q.finish().program_text() == (
        'uprobe:/bin/x:work /arg1 > 100 && comm == "a\\"b"/\n{\n'
        "  @count[arg0, str(arg1, 4)] = count();\n"
        "  @hist[comm] = hist((arg1 / 10) * 2);\n}\n")
    q = Question(["tracepoint:syscalls:sys_enter_openat"]).print(None, ["pid", "str(args.filename)"])
    assert q.finish().program_text() == (
        'BEGIN\n{\n  printf("PID     STR(ARGS.FILENAME)\\n");\n}\n'
        "tracepoint:syscalls:sys_enter_openat\n{\n"
        '  printf("%-7d %s\\n", pid, str(args->filename));\n}\n')
    assert Question(["usdt:/bin/x:p:tick"]).finish().program_text() == \
        "usdt:/bin/x:p:tick\n{\n  @[probe] = count();\n}\n"
    # -c and -p keep other processes out; C precedence, as the language has it
    q = Question(["t:syscalls:sys_enter_openat"], cpid=True).add("sum", "args.dfd + 1 * 2")
    assert q.finish().program_text() == ("tracepoint:syscalls:sys_enter_openat /pid == cpid/\n"
                                         "{\n  @ = sum(args->dfd + (1 * 2));\n}\n")
    q = Question(["uprobe:/bin/x:work"], pid=42, strlen=8).add("count", None, "str(arg0)")
    assert q.finish().program_text() == ("uprobe:/bin/x:work /pid == 42/\n"
                                         "{\n  @[str(arg0, 8)] = count();\n}\n")


def test_filters_stay_whole_when_joined():
    """Each filter is one operand of the && that joins them with the pid's
    test: ``pid == N && a || b`` kept other processes' hits where b held."""
    q = Question(["uprobe:/bin/x:work"], filters=["arg0 == 1 || arg1 == 2", "arg2 ? 1 : 0",
                                                   "arg3 && arg4"], pid=5)
    assert q.add("count", None).finish().program_text().startswith(
        "uprobe:/bin/x:work /pid == 5 && ((arg0 == 1) || (arg1 == 2)) && (arg2 ? 1 : 0) && "
        "arg3 && arg4/\n")


@pytest.mark.parametrize("flags", [
    ["--count", "arg0, arg1 % 7", "--hist", "latency / 1000", "--filter", "arg0 > -1"],
    ["--print", 'x "%d"\t%s', "arg0", "str(arg1, 3)", "--stats", "retval"],
    ["--lhist", "arg1", "0", "100", "7", "--by", "func, probe, ustack"],
])
def test_programs_parse(workload, flags):
    """Whatever the flags say translates to a program the language accepts."""
    parse(shown_program(f"uprobe:{workload}:work", *flags))


@pytest.mark.kernel
@pytest.mark.parametrize("probe, flags, n", [
    ("work", ["--count", "arg0"], 200),
    ("work", ["--count", "arg0", "--filter", "arg1 > 100"], 200),
    ("work", ["--hist", "arg1"], 200),
    ("work", ["--lhist", "arg1", "0", "5000", "500"], 200),
    ("work", ["--sum", "arg1", "--by", "arg0", "--avg", "arg1"], 200),
    ("work", ["--stats", "arg1", "--min", "arg1", "--max", "arg1"], 200),
    ("work", ["--count", "arg0 % 3", "--sum", "arg1 / 100 * 2"], 60),
    ("work", ["--count", "retval"], 30),
    ("greet", ["--count", "str(arg0), arg1"], 5),
    ("greet", ["--count", "str(arg0, 3)"], 50),
    ("greet", ["--count", "comm", "--filter", 'str(arg0) == "bob"'], 50),
    ("greet", ["--print", "%d %s", "arg1", "str(arg0)"], 5),
    ("greet", ["--print", "arg1", "str(arg0, 3)"], 5),
    ("*e*", ["--count", "probe"], 20),
    ("slow", ["--count", "arg0", "--stats", "latency / 1000000000"], 40),
    ("pyebpf_test:tick", ["--count", "arg1", "--filter", "arg0 >= 10"], 40),
])
def test_same_results_as_the_flags(workload, probe, flags, n):
    kind = "usdt" if ":" in probe else "uprobe"
    spec = f"{kind}:{workload}:{probe}"
    program = shown_program(spec, *flags)
    by_flags = cli("trace", spec, *flags, "-q", "-c", f"{workload} {n}")
    by_program = cli("bt", "-e", program, "-c", f"{workload} {n}")
    assert by_flags.returncode == 0 and by_program.returncode == 0, (by_flags.stderr,
                                                                    by_program.stderr)
    assert result_lines(by_flags.stdout) == result_lines(by_program.stdout)
    assert result_lines(by_flags.stdout)
