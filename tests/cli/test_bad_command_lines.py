"""Bad command lines, one table for every sub-command: each must end with exit
status 1 (bad input, kernel refusal) or 2 (usage), a message on stderr that
names the problem, and never a traceback.

The cases run as real subprocesses (``python -m pyebpf``), all of them at
once in a few threads when the first case is collected (a session fixture),
so the table costs a few seconds, not one start-up per case in a row.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from .conftest import ROOT

HUGE = "9" * 5000                    # over CPython's 4300-digit int() limit
DEEP = "(" * 1200 + "arg0" + ")" * 1200
TP = "tracepoint:syscalls:sys_enter_getpid"
COUNT_CALLS = str(ROOT / "asm" / "count_calls.s")

# (id, argv, expected status, words stderr must contain[, stdin bytes]).
# In argv, {d} is a directory of prepared inputs (see the inputs fixture).
CASES: list[tuple] = [
    # -- pyebpf itself
    ("no-command", [], 2, "required: COMMAND"),
    ("unknown-command", ["bogus"], 2, "invalid choice: 'bogus'"),
    ("unknown-flag", ["--bogus"], 2, "error:"),
    # -- asm
    ("asm-missing-arg", ["asm"], 2, "required: FILE"),
    ("asm-missing-file", ["asm", "/nonexistent/x.s"], 1, "/nonexistent/x.s: No such file"),
    ("asm-directory", ["asm", "{d}"], 1, "Is a directory"),
    ("asm-non-utf8", ["asm", "{d}/latin1.s", "-o", "-"], 1, "latin1.s:2:7: error: not UTF-8"),
    ("asm-binary", ["asm", sys.executable, "-o", "-"], 1, "not UTF-8 text"),
    ("asm-binary-stdin", ["asm", "-", "-o", "-"], 1, "<stdin>:1:1: error: not UTF-8", b"\xff\xfe\0"),
    ("asm-huge-decimal", ["asm", "{d}/huge.s", "-o", "-"], 1, "is too long (5000 digits)"),
    ("asm-huge-hex", ["asm", "{d}/hugehex.s", "-o", "-"], 1, "is too long (4998 digits)"),
    ("asm-huge-register", ["asm", "{d}/hugereg.s", "-o", "-"], 1, "is too long"),
    ("asm-huge-call", ["asm", "{d}/hugecall.s", "-o", "-"], 1, "is too long"),
    ("asm-deep-parens", ["asm", "{d}/deep.s", "-o", "-"], 1, "deep.s:1:"),
    ("asm-bad-register", ["asm", "{d}/badreg.s", "-o", "-"], 1, "register r11 does not exist"),
    ("asm-bad-dialect", ["asm", "--dialect", "intel", "{d}/good.s"], 2, "invalid choice: 'intel'"),
    ("asm-output-directory", ["asm", "{d}/good.s", "-o", "{d}"], 1, "Is a directory"),
    ("asm-data-bad-raw-hex", ["asm", "{d}/badraw.data", "-o", "-"], 1,
     "badraw.data:2:3: error: -- raw: 'zz'"),
    ("asm-data-bad-mem-hex", ["asm", "{d}/badmem.data", "-o", "-"], 1,
     "badmem.data:4:4: error: -- mem: 'xy' is not a hex byte"),
    ("asm-data-huge-raw", ["asm", "{d}/hugeraw.data", "-o", "-"], 1, "-- raw:"),
    ("asm-data-huge-result", ["asm", "{d}/hugeresult.data", "-o", "-"], 1,
     "-- result: '99999"),
    # -- disasm
    ("disasm-nothing", ["disasm"], 2, "give FILE"),
    ("disasm-missing-file", ["disasm", "/nonexistent/x.bin"], 1, "No such file"),
    ("disasm-directory", ["disasm", "{d}"], 1, "Is a directory"),
    ("disasm-elf-truncated", ["disasm", "--elf", "{d}/truncated.o"], 1,
     "truncated.o: the section table runs past the end of the file"),
    ("disasm-elf-not-elf", ["disasm", "--elf", "{d}/good.s"], 1, "good.s: not an ELF file"),
    ("disasm-elf-empty", ["disasm", "--elf", "{d}/empty.s"], 1, "empty.s: not an ELF file"),
    ("disasm-elf-missing", ["disasm", "--elf", "/nonexistent/x.o"], 1, "No such file"),
    ("disasm-elf-directory", ["disasm", "--elf", "{d}"], 1, "Is a directory"),
    ("disasm-elf-no-section", ["disasm", "--elf", sys.executable, "--section", "nope"], 1,
     "no section 'nope'"),
    ("disasm-file-and-elf", ["disasm", "x.bin", "--elf", "y.o"], 2, "not both"),
    ("disasm-section-no-elf", ["disasm", "x.bin", "--section", "xdp"], 2, "--section needs --elf"),
    ("disasm-style-mnemonic", ["disasm", "--dialect", "mnemonic", "--style", "verifier", "x"], 2,
     "llvm dialect only"),
    ("disasm-bad-style", ["disasm", "--style", "gnu", "x"], 2, "invalid choice: 'gnu'"),
    # -- conformance
    ("conformance-nothing", ["conformance"], 2, "required: directory"),
    ("conformance-missing-dir", ["conformance", "/nonexistent/dir"], 1, "is not a directory"),
    ("conformance-a-file", ["conformance", "{d}/good.s"], 1, "is not a directory"),
    ("conformance-no-tests", ["conformance", "{d}/emptydir"], 1, "no *.data files"),
    # -- list
    ("list-nothing", ["list"], 2, "give a TARGET"),
    ("list-missing-file", ["list", "/nonexistent/lib.so"], 1, "does not exist"),
    ("list-unknown-library", ["list", "libnosuchlib_xyz"], 1, "no library or program named"),
    ("list-unknown-pid", ["list", "-p", "999999999"], 1, "no process 999999999"),
    ("list-pid-zero", ["list", "-p", "0"], 2, "expected a positive integer, not 0"),
    ("list-pid-word", ["list", "-p", "abc"], 2, "expected a positive integer, not 'abc'"),
    ("list-pid-huge", ["list", "-p", HUGE], 2, "(5000 characters)"),
    ("list-not-elf", ["list", "{d}/good.s"], 1, "not an ELF file"),
    ("list-truncated-elf", ["list", "{d}/truncated.o"], 1, "not a readable ELF file"),
    ("list-directory", ["list", "{d}"], 1, "Is a directory"),
    ("list-json-and-brief", ["list", "--json", "--brief", "libc"], 2, "not allowed with"),
    ("list-bad-flag", ["list", "libc", "--bogus"], 2, "pyebpf list: error: unrecognized"),
    # -- trace: probes
    ("trace-nothing", ["trace"], 2, "required: PROBE"),
    ("trace-unknown-kind", ["trace", "kprobes:vfs_read"], 1, "starts with a probe kind"),
    ("trace-kprobe", ["trace", "kprobe:vfs_read"], 1, "kprobe probes are not available: "),
    ("trace-missing-binary", ["trace", "uprobe:/nonexistent/bin:main"], 1, "does not exist"),
    ("trace-unknown-symbol", ["trace", f"uprobe:{sys.executable}:no_such_function_xyz"], 1,
     "nothing matches"),
    ("trace-directory-binary", ["trace", "uprobe:{d}:main"], 1, "is a directory"),
    ("trace-not-elf-binary", ["trace", "uprobe:{d}/good.s:main"], 1, "is not an ELF file"),
    ("trace-truncated-binary", ["trace", "uprobe:{d}/truncated.o:main"], 1, "is not an ELF file"),
    ("trace-usdt-truncated-binary", ["trace", "usdt:{d}/truncated.o:x"], 1,
     "not a readable ELF file"),
    ("trace-unknown-tracepoint", ["trace", "tracepoint:syscalls:sys_enter_opnat"], 1,
     "close matches"),
    ("trace-unknown-category", ["trace", "tracepoint:nosuchcat:x"], 1,
     "ERROR: tracepoint not found: nosuchcat:x"),
    ("trace-unknown-usdt", ["trace", f"usdt:{sys.executable}:no_such_probe_xyz"], 1,
     "no_such_probe_xyz"),
    ("trace-huge-offset", ["trace", f"uprobe:{sys.executable}:main+{HUGE}"], 1, "integer literal out of range"),
    ("trace-unknown-pid", ["trace", TP, "-p", "999999999"], 1, "no process 999999999"),
    ("trace-command-not-found", ["trace", TP, "-q", "-c", "/no/such/command"], 1,
     "cannot run '/no/such/command'"),
    # -- trace: flags
    ("trace-duration-nan", ["trace", TP, "-d", "nan"], 2, "positive, finite number of seconds"),
    ("trace-duration-1e400", ["trace", TP, "-d", "1e400"], 2, "finite number of seconds"),
    ("trace-duration-inf", ["trace", TP, "--duration", "inf"], 2, "finite number of seconds"),
    ("trace-duration-zero", ["trace", TP, "-d", "0"], 2, "positive"),
    ("trace-duration-negative", ["trace", TP, "-d", "-1"], 2, "positive"),
    ("trace-duration-word", ["trace", TP, "-d", "ten"], 2, "expected a number of seconds"),
    ("trace-duration-century", ["trace", TP, "-d", "3e9"], 2, "more than a year"),
    ("trace-interval-nan", ["trace", TP, "--interval", "nan"], 2, "--interval"),
    ("trace-max-events-zero", ["trace", TP, "--print", "pid", "-n", "0"], 2,
     "expected a positive integer, not 0"),
    ("trace-max-events-negative", ["trace", TP, "--print", "pid", "-n", "-3"], 2,
     "expected a positive integer"),
    ("trace-max-events-no-print", ["trace", TP, "-n", "3"], 2, "add --print"),
    ("trace-command-empty", ["trace", TP, "-c", ""], 2, "expected a command, not an empty"),
    ("trace-command-blank", ["trace", TP, "-c", "  \t "], 2, "expected a command, not an empty"),
    ("trace-command-unbalanced-quote", ["trace", TP, "-c", "echo 'x"], 2, "No closing quotation"),
    ("trace-pid-and-command", ["trace", TP, "-p", "1", "-c", "true"], 2, "exclude each other"),
    ("trace-pid-zero", ["trace", TP, "-p", "0"], 2, "-p/--pid"),
    ("trace-pid-too-big", ["trace", TP, "-p", "99999999999"], 2, "not a process id"),
    ("trace-clear-alone", ["trace", TP, "--clear"], 2, "--clear goes with --interval"),
    ("trace-table-and-json", ["trace", TP, "--table", "--json"], 2, "exclude each other"),
    ("trace-strlen-zero", ["trace", TP, "--strlen", "0"], 2, "--strlen"),
    ("trace-buffer-size-zero", ["trace", TP, "--buffer-size", "0"], 2, "--buffer-size"),
    ("trace-bad-flag", ["trace", TP, "--bogus"], 2, "pyebpf trace: error: unrecognized"),
    # -- trace: expressions
    ("trace-lhist-not-int", ["trace", TP, "--lhist", "arg0", "0", "10", "x"], 1,
     "MIN, MAX and STEP are integers"),
    ("trace-expr-unfinished", ["trace", TP, "--hist", "arg0 +"], 1, "unexpected end"),
    ("trace-expr-unknown-name", ["trace", TP, "--count", "nosuchvar"], 1, "Unknown identifier"),
    ("trace-printf-arity", ["trace", TP, "--print", "%d %d", "arg0"], 1, "2 conversion"),
    # (the language's own limits: a literal's digits, the nesting depth; each
    # reported as one line)
    ("trace-expr-huge-number", ["trace", TP, "--hist", f"arg0 + {HUGE}"], 1, "is too long (5000 digits"),
    ("trace-filter-deep-nesting", ["trace", TP, "--filter", DEEP + " > 1"], 1, "nest more than 64 levels"),
    ("trace-hist-deep-nesting", ["trace", TP, "--hist", DEEP], 1, "nest more than 64 levels"),
    # -- vm
    ("vm-nothing", ["vm"], 2, "required: ACTION"),
    ("vm-run-nothing", ["vm", "run"], 2, "required: FILE"),
    ("vm-run-missing-file", ["vm", "run", "/nonexistent/x.s"], 1, "/nonexistent/x.s: No such file"),
    ("vm-run-directory", ["vm", "run", "{d}"], 1, "Is a directory"),
    ("vm-run-non-utf8", ["vm", "run", "{d}/latin1.s"], 1, "latin1.s:2:7: error: not UTF-8"),
    ("vm-run-empty", ["vm", "run", "{d}/empty.s"], 1, "the file is empty"),
    ("vm-run-bad-mem", ["vm", "run", "--mem", "zz", "{d}/good.s"], 1, "not hex bytes"),
    ("vm-run-fault", ["vm", "run", "-"], 1, "<stdin>:1: insn 0 (r0 = *(u64 *)(r10 + 8)): load",
     b"r0 = *(u64 *)(r10 + 8)\nexit\n"),
    ("vm-run-endless", ["vm", "run", "--max-steps", "50", "-"], 1, "stopped after 50", b"l:\ngoto l\n"),
    ("vm-step-stdin", ["vm", "step", "-"], 1, "reads its commands from standard input"),
    # -- explain
    ("explain-nothing", ["explain"], 2, "required: FILE"),
    ("explain-missing-file", ["explain", "/nonexistent/x.s"], 1, "/nonexistent/x.s: No such file"),
    ("explain-directory", ["explain", "{d}"], 1, "Is a directory"),
    ("explain-non-utf8", ["explain", "{d}/latin1.s"], 1, "latin1.s:2:7: error: not UTF-8"),
    ("explain-empty", ["explain", "{d}/empty.s"], 1, "the file is empty"),
    # -- load
    ("load-nothing", ["load"], 2, "required: FILE"),
    ("load-missing-file", ["load", "/nonexistent/x.s"], 1, "/nonexistent/x.s: No such file"),
    ("load-empty", ["load", "{d}/empty.s"], 1, "the file is empty"),
    ("load-bad-type", ["load", "{d}/good.s", "--type", "bogus"], 1,
     "unknown program type 'bogus'"),
    ("load-repeat-alone", ["load", "{d}/empty.s", "--repeat", "3"], 1,
     "give --test-run HEX too"),
    ("load-repeat-zero", ["load", "{d}/empty.s", "--test-run", "", "--repeat", "0"], 2,
     "'0' is not a positive count"),
    ("load-bad-hex", ["load", "{d}/empty.s", "--test-run", "zz"], 1, "expected hex bytes"),
    ("explain-bad-register", ["explain", "{d}/badreg.s"], 1, "register r11 does not exist"),
    ("explain-unknown-type", ["explain", "--type", "bogus", "{d}/good.s"], 1,
     "unknown program type 'bogus'"),
    ("explain-visits-zero", ["explain", "--visits", "0", "{d}/good.s"], 2,
     "expected a positive integer, not 0"),
    ("explain-rejected", ["explain", "{d}/verifier.s"], 1, "verifier rejected the program"),
    ("explain-log-unwritable", ["explain", "{d}/good.s", "--log", "{d}/no/such/dir/v.log"], 1,
     "No such file or directory"),
    # -- run
    ("run-nothing", ["run"], 2, "a PROGRAM is required"),
    ("run-missing-file", ["run", "/nonexistent/x.s"], 1, "/nonexistent/x.s: no such file (ready programs:"),
    # -- bt
    ("bt-nothing", ["bt"], 2, "a program is required"),
    ("bt-missing-file", ["bt", "/nonexistent/x.bt"], 1,
     "ERROR: failed to open file '/nonexistent/x.bt': No such file or directory"),
    ("bt-directory", ["bt", "{d}"], 1, "Is a directory"),
    ("bt-binary", ["bt", sys.executable], 1, "not UTF-8 text"),
    ("bt-syntax-error", ["bt", "-e", "BEGIN {"], 1,
     "pyebpf bt: stdin:1:7-8: ERROR: syntax error, unexpected end of file"),
    ("bt-bad-format", ["bt", "-e", "BEGIN {}", "-f", "xml"], 2,
     'ERROR: Invalid output format "xml"\nValid formats: \'text\', \'json\''),
    ("bt-bad-pid", ["bt", "-p", "12x", "-e", "BEGIN {}"], 2,
     "ERROR: pid '12x' is not a valid decimal number"),
    ("bt-bad-buffering", ["bt", "-B", "some", "-e", "BEGIN {}"], 2,
     "ERROR: USAGE: -B must be either 'line', 'full', or 'none'."),
    ("bt-bad-flag", ["bt", "-idonotexist"], 2, "unrecognized arguments: -idonotexist\nUSAGE:\n"
     "    pyebpf bt [options] FILE [ARG...]\n"),
    ("bt-unwritable-output", ["bt", "-e", "BEGIN { exit(); }", "-o", "{d}/no/such/out"], 1,
     'ERROR: Failed to open output file: "{d}/no/such/out": No such file or directory'),
    ("bt-missing-include", ["bt", "-e", "#include <no/such/header.h>\nBEGIN { exit(); }"], 1,
     "pyebpf bt: stdin:1:10-28: ERROR: 'no/such/header.h' file not found"),
    ("bt-banned-kretprobe", ["bt", "-e", "kretprobe:_raw_spin_lock { exit(); }"], 1,
     "error: kretprobe:_raw_spin_lock can't be used as it might lock up your system."),
    ("bt-missing-tracepoint", ["bt", "-e", "t:syscalls:nonsense { exit(); }"], 1,
     "pyebpf bt: stdin:1:1-20: ERROR: tracepoint not found: syscalls:nonsense\n"
     "t:syscalls:nonsense { exit(); }\n~~~~~~~~~~~~~~~~~~~"),
    ("bt-pid-and-command", ["bt", "-e", "BEGIN {}", "-p", "1", "-c", "true"], 2,
     "-p and -c exclude each other"),
    ("bt-missing-binary", ["bt", "-e", "uprobe:/nonexistent/b:f { }"], 1,
     "/nonexistent/b does not exist"),
    # -- export
    ("export-nothing", ["export"], 2, "a program is required"),
    ("export-missing-file", ["export", "/nonexistent/x.bt"], 1,
     "pyebpf export: ERROR: failed to open file '/nonexistent/x.bt': No such file or directory"),
    ("export-syntax-error", ["export", "-e", "BEGIN {"], 1,
     "pyebpf export: stdin:1:7-8: ERROR: syntax error, unexpected end of file"),
    ("export-bad-listen", ["export", "-e", "BEGIN {}", "--listen", "nowhere"], 2,
     "expected HOST:PORT"),
    ("export-bad-port", ["export", "-e", "BEGIN {}", "--listen", "127.0.0.1:99999"], 2,
     "expected HOST:PORT"),
    ("export-unbindable", ["export", "-e", "BEGIN {}", "--listen", "203.0.113.1:9435"], 1,
     "cannot listen on 203.0.113.1:9435"),
    ("export-bad-prefix", ["export", "-e", "BEGIN {}", "--prefix", "9x"], 2,
     "cannot start a metric name"),
    ("export-max-series-zero", ["export", "-e", "BEGIN {}", "--max-series", "0"], 2,
     "expected a positive integer"),
    ("export-pid-and-command", ["export", "-e", "BEGIN {}", "-p", "1", "-c", "true"], 2,
     "-p and -c exclude each other"),
    ("export-unknown-pid", ["export", "-e", "BEGIN {}", "-p", "4000000"], 1,
     "no process 4000000"),
    ("export-bad-pid", ["export", "-e", "BEGIN {}", "-p", "999999999"], 2,
     "pyebpf export: ERROR: pid '999999999' out of valid pid range [1,4194304]"),
    ("export-missing-web-config", ["export", "-e", "BEGIN {}", "--web.config.file",
                                   "/nonexistent/web.yml"], 1, "/nonexistent/web.yml: No such file"),
    ("export-bad-web-config", ["export", "-e", "BEGIN {}", "--web.config.file", "{d}/web.yml"],
     1, "the password of 'u' is not a bcrypt hash"),
    ("export-missing-binary", ["export", "-e", "uprobe:/nonexistent/b:f { @ = count(); }"], 1,
     "/nonexistent/b does not exist"),
    ("run-directory", ["run", "{d}"], 1, "Is a directory"),
    ("run-non-utf8", ["run", "{d}/latin1.s"], 1, "latin1.s:2:7: error: not UTF-8"),
    ("run-binary", ["run", sys.executable], 1, "not UTF-8 text"),
    ("run-empty", ["run", "{d}/empty.s"], 1, "nothing to load"),
    ("run-missing-parameters", ["run", COUNT_CALLS], 1, "BINARY, FUNC have no default"),
    ("run-bad-define", ["run", COUNT_CALLS, "-D", "BINARY"], 2, "expected NAME=VALUE"),
    ("run-missing-binary", ["run", COUNT_CALLS, "-D", "BINARY=/nonexistent/b", "-D", "FUNC=f"],
     1, "/nonexistent/b does not exist"),
    ("run-duration-nan", ["run", COUNT_CALLS, "-d", "nan"], 2, "finite number of seconds"),
    ("run-duration-1e400", ["run", COUNT_CALLS, "-d", "1e400"], 2, "finite number of seconds"),
    ("run-max-events-zero", ["run", COUNT_CALLS, "-n", "0"], 2, "expected a positive integer"),
    ("run-command-empty", ["run", COUNT_CALLS, "-c", ""], 2, "expected a command, not an empty"),
    ("run-command-unbalanced-quote", ["run", COUNT_CALLS, "-c", "a 'b"], 2,
     "No closing quotation"),
    ("run-pid-and-command", ["run", COUNT_CALLS, "-p", "1", "-c", "true"], 2,
     "exclude each other"),
    ("run-unknown-pid", ["run", COUNT_CALLS, "-p", "999999999"], 1, "no process 999999999"),
    ("run-verifier-log-unwritable", ["run", "{d}/verifier.s", "--log", "{d}/no/such/dir/v.log"], 1,
     "the verifier log could not be written"),
    # -- profile
    ("profile-format", ["profile", "-o", "{d}/p.png"], 2, "unknown output format '.png'"),
    ("profile-no-extension", ["profile", "-o", "{d}/p"], 2, "unknown output format '(no ext"),
    ("profile-hz-zero", ["profile", "-F", "0"], 2, "expected a positive integer, not 0"),
    ("profile-hz-huge", ["profile", "-F", "1000000"], 2, "at most 100000 Hz"),
    ("profile-pid-and-command", ["profile", "-p", "1", "-c", "true"], 2, "not allowed with"),
    ("profile-unknown-pid", ["profile", "-p", "999999999"], 1, "no process 999999999"),
    ("profile-missing-command", ["profile", "-c", "/nonexistent/cmd"], 1,
     "cannot run '/nonexistent/cmd'"),
    ("profile-duration-nan", ["profile", "-d", "nan"], 2, "finite number of seconds"),
    # -- demo
    ("demo-requests-zero", ["demo", "-n", "0"], 2, "expected a positive integer, not 0"),
    ("demo-requests-negative", ["demo", "-n", "-5"], 2, "expected a positive integer"),
    ("demo-requests-word", ["demo", "-n", "many"], 2, "not 'many'"),
    ("demo-bad-flag", ["demo", "--bogus"], 2, "pyebpf demo: error: unrecognized"),
    # -- object
    ("object-nothing", ["object"], 2, "required: OBJ"),
    ("object-missing-file", ["object", "/nonexistent/x.o"], 1,
     "cannot read /nonexistent/x.o: No such file"),
    ("object-directory", ["object", "{d}"], 1, "Is a directory"),
    ("object-not-elf", ["object", "{d}/good.s"], 1, "not an ELF file"),
    ("object-empty", ["object", "{d}/empty.s"], 1, "not an ELF file"),
    ("object-not-bpf", ["object", "{d}/truncated.o"], 1, "is not BPF (247)"),
    ("object-bad-set", ["object", "{d}/good.s", "--set", "novalue"], 1,
     "--set wants NAME=VALUE, not 'novalue'"),
    ("object-bad-flag", ["object", "{d}/good.s", "--bogus"], 2, "unrecognized arguments"),
]

# A program the kernel's verifier refuses (pyebpf's own checks let it through):
# a read far past the end of the uprobe context (struct pt_regs).
VERIFIER_REJECTED = """\
# pyebpf: description reads past its context: the verifier refuses it
# pyebpf: map counts array key=u32 value=u64 entries=1 show=count
# pyebpf: program bad attach=uprobe:libc:getpid
    r0 = *(u64 *)(r1 + 4000)
    r0 = 0
    exit
"""


def _truncated_elf() -> bytes:
    """The first part of a real ELF object: a valid header whose section
    headers lie past the end of the file."""
    with open(os.path.realpath(sys.executable), "rb") as f:
        return f.read(4096)


def make_inputs(d: pathlib.Path) -> None:
    """The files the cases name as {d}/..."""
    (d / "emptydir").mkdir()
    (d / "empty.s").write_text("")
    (d / "good.s").write_text("r0 = 0\nexit\n")
    (d / "latin1.s").write_bytes(b"r0 = 0\nr1 = 1\xe9\nexit\n")      # byte 0xe9 at 2:7
    (d / "huge.s").write_text(f"r0 = {HUGE}\nexit\n")
    (d / "hugehex.s").write_text(f"r0 = 0x{'f' * 4998}\nexit\n")
    (d / "hugereg.s").write_text(f"r{HUGE} = 0\nexit\n")
    (d / "hugecall.s").write_text(f"call bpf_foo#{HUGE}\nexit\n")
    (d / "deep.s").write_text(f"r0 = {'(' * 1200}1{')' * 1200}\nexit\n")
    (d / "badreg.s").write_text("r11 = 0\nexit\n")
    (d / "web.yml").write_text("basic_auth_users:\n  u: plaintext\n")
    (d / "badraw.data").write_text("-- raw\n  zz\n-- result\n0x0\n")
    (d / "badmem.data").write_text("-- asm\nexit\n-- mem\n00 xy\n-- result\n0x0\n")
    (d / "hugeraw.data").write_text(f"-- raw\n0x{'f' * 40}\n-- result\n0x0\n")
    (d / "hugeresult.data").write_text(f"-- asm\nexit\n-- result\n{HUGE}\n")
    (d / "truncated.o").write_bytes(_truncated_elf())
    (d / "verifier.s").write_text(VERIFIER_REJECTED)


def run_case(argv: list[str], stdin: bytes | None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYEBPF_DEBUG", None)
    try:
        return subprocess.run([sys.executable, "-m", "pyebpf", *argv], input=stdin or b"",
                              capture_output=True, timeout=60, env=env, cwd=str(ROOT))
    except subprocess.TimeoutExpired as exc:     # (a trace that never stops)
        return subprocess.CompletedProcess(exc.cmd, None, exc.stdout or b"",
                                           (exc.stderr or b"") + b"\n[timed out after 60 s]")


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    """Every case's CompletedProcess, run in parallel threads."""
    d = tmp_path_factory.mktemp("bad-inputs")
    make_inputs(d)
    jobs = {}
    with ThreadPoolExecutor(max_workers=max(2, min(6, (os.cpu_count() or 2) * 2))) as pool:
        for case in CASES:
            name, argv = case[0], [a.replace("{d}", str(d)) for a in case[1]]
            stdin = case[4] if len(case) > 4 else None
            jobs[name] = (pool.submit(run_case, argv, stdin), d)
        return {name: (job.result(), d) for name, (job, d) in jobs.items()}


def test_the_table_is_big_and_covers_every_command():
    from pyebpf.cli import COMMANDS
    names = [c[0] for c in CASES]
    assert len(names) == len(set(names)) and len(names) >= 60
    for command in COMMANDS:
        assert any(n.startswith(command + "-") for n in names), command


#: the cases that need the kernel (they fail without capabilities), and
#: those that may read tracefs; the others run under every Python
#: (.ci/test-pythons runs the tests not marked ``kernel``)
_KERNEL_CASES = {"conformance-missing-dir", "conformance-a-file", "conformance-no-tests",
                 "trace-command-not-found", "explain-rejected", "explain-log-unwritable",
                 "run-missing-binary", "run-verifier-log-unwritable", "profile-missing-command"}


def _needs_kernel(case: tuple) -> bool:
    return case[0] in _KERNEL_CASES or any(
        a.startswith(("tracepoint:", "kprobe:")) for a in case[1])


@pytest.mark.parametrize("name, argv, status, words", [
    pytest.param(*c[:4], id=c[0], marks=[pytest.mark.kernel] if _needs_kernel(c) else [])
    for c in CASES])
def test_bad_command_line(results, name, argv, status, words):
    proc, d = results[name]
    err = proc.stderr.decode(errors="replace")
    words = words.replace("{d}", str(d))
    assert "Traceback" not in err and "Exception ignored" not in err, err[-3000:]
    assert proc.returncode == status, (proc.returncode, err[-2000:])
    assert words in err, err[-2000:]
    lines = err.splitlines()
    # (bt's errors about its command line are bpftrace's, as bpftrace prints them)
    assert lines and (lines[0].startswith("pyebpf")
                      or name.startswith("bt-") and lines[0].startswith("ERROR: ")), err[-2000:]
    # one message: its first line names the command; an assembler error
    # quotes the line under it (with a caret), a kernel error adds a hint;
    # bt's usage error then shows its usage, as bpftrace does
    assert len(lines) <= (7 if name == "bt-bad-flag" else 4), err[-2000:]
    assert all(len(line) <= 600 for line in lines), "a message line was not shortened"


def test_internal_errors_are_one_line_with_a_hint(tmp_path):
    """An exception that is not a documented error (a bug) is reported by its
    type and message, with the hint; PYEBPF_DEBUG=1 adds the traceback."""
    code = ("import sys, pyebpf.cli.asm as m\n"
            "def boom(args): raise ZeroDivisionError('a planted bug')\n"
            "m.run = boom\n"
            "from pyebpf.cli import entry\n"
            "sys.argv = ['pyebpf', 'asm', 'x.s']\n"
            "entry()\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYEBPF_DEBUG", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    assert proc.stderr == ("pyebpf asm: internal error: ZeroDivisionError: a planted bug "
                           "(a bug in pyebpf; PYEBPF_DEBUG=1 shows the traceback)\n")
    env["PYEBPF_DEBUG"] = "1"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    # (3.13 underlines the failing expression between the frame and the exception)
    assert "Traceback" in proc.stderr and "in boom\n" in proc.stderr
    assert "\nZeroDivisionError: a planted bug\n" in proc.stderr
    assert proc.stderr.splitlines()[-1] == "pyebpf asm: internal error: ZeroDivisionError: " \
                                           "a planted bug"


def test_help_documents_exit_statuses_and_debug():
    proc = run_case(["--help"], None)
    text = proc.stdout.decode()
    assert proc.returncode == 0
    for words in ("exit status", "130", "PYEBPF_DEBUG=1", "2 usage error"):
        assert words in text, words
