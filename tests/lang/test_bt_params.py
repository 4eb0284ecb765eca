"""Positional parameters as bpftrace 0.17 reads them (strings in ``str()``,
numbers elsewhere, in attach points, as constant lengths and counts; the
numbers it refuses), and SIGUSR1 printing the maps of a running ``pyebpf
bt`` (issue 24 items 8, 9, 13; issue 25 item 5)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest
from waiting import read_line

from pyebpf import lang
from pyebpf.lang.errors import LangError
from pyebpf.lang.sema import param_int

from .harness import ROOT, normalize


@pytest.mark.parametrize("text, value", [
    ("3", 3), (" 7", 7), ("\t+3", 3), ("-5", -5), ("010", 8), ("0x10", 16), ("0X1f", 31),
    ("00", 0), ("9223372036854775807", 2 ** 63 - 1), ("-9223372036854775808", -2 ** 63),
    # refused by bpftrace (std::stoll over the whole text)
    ("", None), ("3 ", None), ("abc", None), ("08", None), ("0x", None), ("1e3", None),
    ("1_000", None), ("\u0663", None), ("0x1ffffffffffffffff", None),
    ("18446744073709551616", None), ("18446744073709551615", None),
    ("9223372036854775808", None), ("0" * 300 + "7", 7), ("9" * 5000, None)])
def test_a_parameter_is_a_number_as_bpftrace_reads_it(text: str, value: int | None) -> None:
    assert param_int(text) == value


@pytest.mark.parametrize("given", ["0x1ffffffffffffffff", "18446744073709551616", "\u0663",
                                   "1_000", "3 ", ""])
def test_numbers_bpftrace_refuses_are_refused_with_its_message(given: str) -> None:
    with pytest.raises(LangError) as err:
        lang.compile('BEGIN { printf("%d\\n", $1); exit() }', params=[given])
    assert err.value.message == (f'$1 used numerically but given "{given}". '
                                 'Try using str($1).')


def test_a_missing_parameter_is_zero_and_an_empty_string() -> None:
    shown = lang.compile('BEGIN { printf("%d %s\\n", $2, str($2)); exit() }',
                         params=["x"]).show()
    assert "probe_read" not in shown          # str($2) reads no memory


def test_attach_points_take_parameters_before_they_are_split() -> None:
    prog = lang.compile('i:$1:$2 { exit() } BEG$3 { exit() }', params=["ms", "7", "IN"])
    aps = [ap for p in prog.script.probes for ap in p.attach_points]
    assert [(ap.provider, ap.parts) for ap in aps] == [("interval", ["ms", "7"]),
                                                        ("BEGIN", [])]


@pytest.mark.parametrize("program, params, message", [
    ('i:ms:$1x { exit() }', ["1"], "Found trailing text 'x' in positional parameter index. "
                                   "Try quoting the trailing text."),
    ('i:ms:$0 { exit() }', ["1"], "param $0 is out of integer range [1, 9223372036854775807]"),
    ('i:ms:$1 { exit() }', [], "stoull"),
    ('BEGIN { printf("%s", str($1 + 3)); }', ["ab"],
     "only addition of a single constant less or equal to the length of $1 (which is 2) "
     "is allowed inside str()"),
    ('BEGIN { printf("%s", str($#)); }', ["ab"], "use $#, not str($#)"),
])
def test_refusals_are_bpftrace_s(program: str, params: list[str], message: str) -> None:
    with pytest.raises(LangError) as err:
        lang.compile(program, params=params)
    assert err.value.message == message


@pytest.mark.kernel
@pytest.mark.parametrize("program, params", [
    ('BEGIN { printf("[%s] [%s] [%s] %d\\n", str($1), str($2), str($1 + 2), $#); exit() }',
     ["3xy", "abc"]),
    ('BEGIN { printf("-%s-%s-\\n", str($1), str($3)); exit() }', ["0x1ffffffffffffffff"]),
    ('BEGIN { $x = str($1); if ($x == "hello") { printf("eq\\n") } '
     'if (str($1) != str($2)) { printf("ne\\n") } exit() }', ["hello", "hell"]),
    ('BEGIN { if (strncmp("hello", "hell", $1) == 0) { printf("ok\\n"); } '
     '@n = strncmp(str($2), "hexx", $1); exit() }', ["3", "help"]),
    ('BEGIN { $a = 1; unroll ($1) { $a = $a + 1; } @a = $a; exit() }', ["10"]),
    ('i:ms:$1 { printf("tick\\n"); exit(); } BEG$2 { @begin = 1 }', ["1", "IN"]),
    ('BEGIN { printf("%d %d %d\\n", $1, $2, $3 + 1); exit() }', ["-5", " 010", "0x10"]),
    ('BEGIN { @ = kaddr(str($1)) > 0; exit() }', ["vfs_read"]),
])
def test_parameters_print_what_bpftrace_prints(program: str, params: list[str]) -> None:
    if shutil.which("bpftrace") is None:
        pytest.skip("bpftrace is not installed")
    theirs = _stdout(["bpftrace"], program, params)
    ours = _stdout([sys.executable, "-m", "pyebpf", "bt"], program, params)
    assert normalize(ours) == normalize(theirs), program


def _stdout(tool: list[str], program: str, params: list[str]) -> str:
    """The tool's output for ``-e program -- params`` (the parameters after
    the program, which the harness's helpers do not put), without the
    ``Attaching`` line."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([*tool, "-e", program, "--", *params], capture_output=True,
                          text=True, timeout=60, env=env, cwd=str(ROOT))
    assert proc.returncode == 0, f"{tool[0]}: {proc.stderr}"
    return "\n".join(ln for ln in proc.stdout.split("\n") if not ln.startswith("Attaching "))


@pytest.mark.kernel
def test_sigusr1_prints_the_maps_and_the_run_goes_on() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "pyebpf", "bt", "-e",
                             'BEGIN { @scalar = 5; printf("ready\\n"); } '
                             'END { printf("end\\n"); }'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=str(ROOT))
    try:
        assert proc.stdout is not None
        assert read_line(proc.stdout, "Attaching") == "Attaching 2 probes...\n"
        assert read_line(proc.stdout, "BEGIN's line") == "ready\n"
        for _ in range(3):                  # printed each time, the run going on
            proc.send_signal(signal.SIGUSR1)
            assert read_line(proc.stdout, "the maps") == "@scalar: 5\n"
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode == 0, err
    assert out == "end\n\n\n@scalar: 5\n"


@pytest.mark.parametrize("program, messages", [
    ('BEGIN { unroll($1) { @a++ } }', ['$1 used numerically but given "abc"',
                                       "invalid unroll value"]),
    ('BEGIN { @x = strncmp("a", "b", $1); }', ['$1 used numerically but given "abc"',
                                               "strncmp: invalid size value"]),
])
def test_where_a_literal_is_wanted_a_word_is_refused_twice_as_bpftrace_does(
        program: str, messages: list[str]) -> None:
    with pytest.raises(LangError) as err:
        lang.compile(program, params=["abc"])
    assert [d.message for d in err.value.diagnostics] == messages


@pytest.mark.parametrize("program, params", [
    ('BEGIN { unroll($1) { @a++ } exit() }', ["101"]),
    ('BEGIN { @x = strncmp("a", "b", $1); exit() }', ["abc"]),
    ('BEGIN {\n  unroll($1) { @a++ } exit() }', ["x"]),
    ('BEGIN { @x = $1 + str($1); exit() }', ["1"]),
])
def test_refusals_match_the_installed_bpftrace(program: str, params: list[str]) -> None:
    if shutil.which("bpftrace") is None:
        pytest.skip("bpftrace is not installed")
    theirs = subprocess.run(["bpftrace", "-e", program, "--", *params], capture_output=True,
                            text=True, timeout=60)
    expected = "\n".join(ln for ln in theirs.stderr.splitlines() if "RLIMIT" not in ln)
    with pytest.raises(LangError) as err:
        lang.compile(program, params=params)
    assert str(err.value) == expected.rstrip("\n")
