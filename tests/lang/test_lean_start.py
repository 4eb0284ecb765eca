"""``pyebpf bt``'s start stays lean (issue 14: start to the first event).

The command's path from the interpreter's start to the first printed event
imports none of the standard library's heavy modules (each costs a start
milliseconds: ``typing`` ~7, ``dataclasses`` with ``inspect`` ~10,
``argparse`` with ``re``, ``gettext`` and ``shutil`` ~8, ``enum`` ~3);
the hand-written replacements it uses instead give exactly what the
modules would: ``quick_args`` what argparse parses, ``_printf_specs`` what
the ``PRINTF_SPEC`` pattern finds.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from budget import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from pyebpf.cli import bt as bt_cli
from pyebpf.cli import build_parser
from pyebpf.lang import output

from .harness import ROOT, bt_workload

#: what the start of ``pyebpf bt`` must not import (none is needed to run a
#: script; each costs milliseconds)
HEAVY = frozenset({"typing", "dataclasses", "inspect", "argparse", "json", "re", "enum",
                   "shutil", "gettext", "locale", "ast", "dis", "tokenize", "difflib",
                   "subprocess", "ctypes", "glob", "signal", "fnmatch", "tempfile"})

#: what this script's run does not need (the perf buffer reader, the object
#: info of the links, C definitions, the reader's background thread): each is
#: imported where it is used, not on the way to the first event
UNNEEDED = frozenset({"pyebpf.events.perf", "pyebpf.kernel.objinfo", "pyebpf.lang.cdefs",
                      "pyebpf.lang.records", "threading"})


def _imported(*argv: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``python -X importtime -m pyebpf ARGV``: the process and every
    module it imported (importtime prints one line per module).  The
    compiler's path: the compiled-program cache off (its path imports less:
    tests/lang/test_cache.py)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYEBPF_NO_CACHE="1")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "pyebpf", *argv],
                          capture_output=True, text=True, timeout=120, env=env, cwd=str(ROOT))
    names = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)$", proc.stderr, re.M))
    return proc, names


@pytest.mark.kernel
def test_a_run_to_its_first_event_imports_no_heavy_module() -> None:
    work = bt_workload()
    proc, names = _imported(
        "bt", "-e", f'BEGIN {{ printf("go %d %s\\n", 1, "x"); exit(); }} '
                    f'uprobe:{work}:compute {{ @c[arg0 % 8] = count(); }} '
                    f'uretprobe:{work}:request {{ @r = sum(retval); }}')
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("Attaching 3 probes...\ngo 1 x\n\n\n")
    assert "pyebpf.lang.codegen" in names and "pyebpf.loader" in names   # (the check sees)
    assert not names & HEAVY, sorted(names & HEAVY)
    assert not names & UNNEEDED, sorted(names & UNNEEDED)


#: runs ``python -m pyebpf ARGV``, then says how the cyclic collector was left
#: and how many collections scanned more than the youngest generation
_GC_PROBE = """
import atexit, gc, runpy, sys
older = []
gc.callbacks.append(lambda phase, info: older.append(info["generation"])
                    if phase == "stop" and info["generation"] > 0 else None)
atexit.register(lambda: print("gc", gc.isenabled(), gc.get_freeze_count() > 0, len(older),
                              file=sys.stderr))
sys.argv[0] = "pyebpf"
runpy.run_module("pyebpf", run_name="__main__")
"""


@pytest.mark.kernel
def test_the_start_is_not_scanned_by_the_collector() -> None:
    # the collector is off until the probes are attached, then on again, the
    # start's objects frozen out of its reach: neither the start nor the exit
    # scans them (each collection over them costs milliseconds, frees nothing)
    work = bt_workload()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", _GC_PROBE, "bt", "-e",
         f'BEGIN {{ printf("go\\n"); exit(); }} uprobe:{work}:compute {{ @c = count(); }}'],
        capture_output=True, text=True, timeout=120, env=env, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("Attaching 2 probes...\ngo\n")
    enabled, frozen, older = proc.stderr.splitlines()[-1].split()[1:]
    # (one collection of the older generations is the interpreter's own, at
    # its exit; before, the start made three, over all of its objects)
    assert (enabled, frozen) == ("True", "True") and int(older) <= 1, proc.stderr[-2000:]


def test_show_program_and_bad_scripts_keep_argparse_out() -> None:
    proc, names = _imported("bt", "-e", "BEGIN { @x = nosuch(1); }")
    assert proc.returncode == 1 and "nosuch" in proc.stderr
    assert not names & {"argparse", "typing", "dataclasses", "inspect"}


def test_the_help_still_lists_every_command() -> None:
    proc, names = _imported("--help")
    assert proc.returncode == 0
    assert "trace" in proc.stdout and "bt" in proc.stdout and "export" in proc.stdout
    assert "argparse" in names          # (the whole parser, as before)


# --------------------------------------------------------------- quick_args
def _by_argparse(argv: list[str]) -> dict[str, object] | None:
    """What the ``bt`` parser gives for ``argv`` (None: a usage error or extras)."""
    try:
        args, extra = build_parser("bt").parse_known_args(["bt", *argv])
    except SystemExit:
        return None
    return None if extra else vars(args)


PLAIN = [["-e", "BEGIN { exit(); }"], ["prog.bt"], ["prog.bt", "1", "two"],
         ["-e", "P", "a", "b"], ["a", "b", "-e", "P"], ["-l"], ["-l", "tracepoint:sched:*"],
         ["-e", "P", "-c", "./app 'x y'", "-f", "json"], ["-e", "P", "-p", "1"],
         ["--show-program", "-e", "P"], ["-e", "P", "--flamegraph", "f.svg", "--plot", "p.svg"],
         ["-e", ""], [], ["-e", "P", "-e", "Q"],
         # bpftrace's options
         ["-q", "-kk", "-o", "out.txt", "-B", "none", "-e", "P"],
         ["--unsafe", "--include", "a.h", "--include", "b.h", "-I", "d", "-e", "P"],
         ["-v", "-d", "-k", "-k", "-dd", "--usdt-file-activation", "--no-warnings", "p.bt"],
         ["-", "1"], ["--info"], ["-f", "json", "-q", "-", "x"]]


@pytest.mark.parametrize("argv", PLAIN)
def test_plain_command_lines_are_read_without_argparse(argv: list[str],
                                                       capsys: pytest.CaptureFixture) -> None:
    quick = bt_cli.quick_args(argv)
    assert quick is not None
    assert vars(quick) == _by_argparse(argv)


@pytest.mark.parametrize("argv", [["-h"], ["--show", "-e", "P"], ["-eP"], ["-e", "-x"],
                                  ["a", "-e", "P", "b"], ["-e", "P", "-f", "xml"],
                                  ["-e", "P", "-p", "0"], ["-e", "P", "-c", " open"],
                                  ["--", "-e"], ["-e", "P", "-5"], ["-e", "P", "--plot=a.svg"],
                                  # (each occurrence is checked, not only the last)
                                  ["-c", " q", "-c", "ls"], ["-f", "xml", "-f", "text"],
                                  ["-p", "0", "-p", "1"], ["-V"], ["--version"],
                                  ["-ve", "P"], ["-e", "P", "-p", "1x"]])
def test_the_rest_goes_to_the_parser(argv: list[str]) -> None:
    assert bt_cli.quick_args(argv) is None


WORDS = st.sampled_from(["-e", "-c", "-p", "-f", "-l", "--show-program", "--flamegraph",
                         "--plot", "-h", "--show", "--", "-", "-5", "text", "json", "xml",
                         "1", "0", "99999999999", "p.bt", "a b", "'q", "", " q", "BEGIN {}",
                         "f.svg", "-ejson", "--plot=x.svg", "-q", "-k", "-kk", "-o", "-B",
                         "none", "--include", "-I", "-d", "-dd", "--unsafe", "-V", "-v",
                         "--info", "-kq"])


@fuzz_settings(300)
@given(st.lists(WORDS, max_size=7))
def test_quick_args_agree_with_the_parser(argv: list[str]) -> None:
    quick = bt_cli.quick_args(argv)
    if quick is not None:
        assert vars(quick) == _by_argparse(argv)


# ------------------------------------------------------------ printf formats
_PATTERN = re.compile(output.PRINTF_SPEC + "|%%")


def _by_pattern(fmt: str) -> list[tuple[int, int, object]]:
    return [(m.start(), m.end(), None if m.group(0) == "%%" else
             (m.group("minus"), m.group("width"), m.group("prec"), m.group("len"),
              m.group("conv"))) for m in _PATTERN.finditer(fmt)]


def _by_scanner(fmt: str) -> list[tuple[int, int, object]]:
    return [(start, end, None if s is None else (s.minus, s.width, s.prec, s.len, s.conv))
            for start, end, s in output._printf_specs(fmt)]


@fuzz_settings(1000)
@given(st.text(alphabet="%%%%-.019hhlljztduxXocsprqi f", max_size=16))
def test_printf_scanner_finds_what_the_pattern_finds(fmt: str) -> None:
    assert _by_scanner(fmt) == _by_pattern(fmt)


@pytest.mark.parametrize("fmt", ["%d", "%-5.3lld|", "%%d", "%hhu%hd", "%llq %lz", "%.s",
                                 "%5%", "%-%d", "%08x %r %p", "100%", "%", "%l%d"])
def test_printf_scanner_examples(fmt: str) -> None:
    assert _by_scanner(fmt) == _by_pattern(fmt)
