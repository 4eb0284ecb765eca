"""Messages that say what is true and where to look: the verifier's log
(written to a file the user can open), tracefs for an unprivileged user, and
the documented errors of the text readers (huge numbers, bad hex, bytes that
are not UTF-8) instead of Python's own exceptions."""
from __future__ import annotations

import glob
import os
import re
import subprocess
import tempfile

import pytest
import unprivileged

from pyebpf.errors import AssemblyError, VerifierError
from pyebpf.text import assemble, parse_conformance

from .conftest import ROOT, cli

# read past the end of the uprobe context: pyebpf's checks pass, the verifier refuses
REJECTED = "r0 = *(u64 *)(r1 + 4000)\nr0 = 0\nexit\n"
REJECTED_FILE = """\
# pyebpf: description reads past its context: the verifier refuses it
# pyebpf: map counts array key=u32 value=u64 entries=1 show=count
# pyebpf: program bad attach=uprobe:libc:getpid
    r0 = *(u64 *)(r1 + 4000)
    r0 = 0
    exit
"""


# ---------------------------------------------------------------- verifier log
@pytest.mark.kernel
def test_python_api_points_to_the_log_attribute():
    from pyebpf import load
    with pytest.raises(VerifierError) as ei:
        load(REJECTED, "kprobe")
    exc = ei.value
    assert str(exc).endswith("\n  (the full log is in the exception's .log attribute)")
    assert str(exc).startswith(exc.summary) and "invalid bpf_context access" in exc.summary
    assert "invalid bpf_context access" in exc.log


@pytest.mark.kernel
def test_cli_writes_the_log_to_a_temporary_file(tmp_path):
    prog = tmp_path / "rejected.s"
    prog.write_text(REJECTED_FILE)
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "pyebpf-verifier-*.log")))
    proc = cli("run", str(prog), "-d", "1")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    m = re.search(r"\(the full verifier log, (\d+) lines, is in (\S+)\)\n\Z", proc.stderr)
    assert m, proc.stderr
    path = m.group(2)
    try:
        assert path not in before and os.path.basename(path).startswith("pyebpf-verifier-")
        with open(path) as f:
            log = f.read()
        assert "invalid bpf_context access" in log and log.count("\n") == int(m.group(1))
        assert ".log attribute" not in proc.stderr
    finally:
        os.unlink(path)


@pytest.mark.kernel
def test_cli_log_option_names_the_file(tmp_path):
    prog = tmp_path / "rejected.s"
    prog.write_text(REJECTED_FILE)
    log = tmp_path / "verifier.log"
    proc = cli("run", str(prog), "--log", str(log))
    assert proc.returncode == 1
    assert proc.stderr.rstrip().endswith(f"is in {log})")
    assert "invalid bpf_context access" in log.read_text()
    # pyebpf trace takes --log too
    assert "--log FILE" in cli("trace", "--help").stdout


# ---------------------------------------------------------------- tracefs
def _tracefs() -> str | None:
    for path in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        if os.path.isdir(os.path.join(path, "events")):
            return path
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start an unprivileged process")
def test_tracefs_mounted_but_not_readable_says_so():
    path = _tracefs()
    if path is None:
        pytest.skip("tracefs is not mounted")
    if os.stat(path).st_mode & 0o005 == 0o005:
        pytest.skip(f"{path} is readable by everyone here")
    code = ("from pyebpf.attach import tracefs_dir\n"
            "try:\n    tracefs_dir()\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)\n")
    proc = subprocess.run([*unprivileged.python_argv(), "-c", code], capture_output=True,
                          text=True, cwd="/",
                          env={"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("PermissionDeniedError ") and "not mounted" not in out, out
    assert f"tracefs is mounted at {path} (mode " in out and "this user may not read it" in out


# ---------------------------------------------------------------- text readers
@pytest.mark.parametrize("line, column", [
    ("r0 = " + "9" * 5000, 6),
    ("r0 = 0x" + "f" * 5000, 6),
    ("r0 = -" + "9" * 5000, 7),
    ("r" + "1" * 5000 + " = 0", 1),
    ("call foo#" + "7" * 5000, 6),
])
def test_huge_numbers_are_assembly_errors(line, column):
    for dialect_line in (line, line + "\nexit"):
        with pytest.raises(AssemblyError) as ei:
            assemble(dialect_line)
        assert "is too long" in ei.value.reason and ei.value.column == column
        assert len(str(ei.value).splitlines()[0]) < 200


def test_long_numbers_with_leading_zeros_still_count():
    assert assemble("r0 = " + "0" * 60 + "7\nexit").encode() == assemble("r0 = 7\nexit").encode()


def test_non_utf8_source_names_line_and_column():
    from pyebpf.text.lexer import decode_source
    with pytest.raises(AssemblyError) as ei:
        decode_source("r0 = 0\nr1 = 2 # caf\u00e9\nexit\n".encode("latin-1"), "x.s")
    assert (ei.value.filename, ei.value.line, ei.value.column) == ("x.s", 2, 13)
    assert "not UTF-8 text: byte 0xe9" in str(ei.value)


@pytest.mark.parametrize("text, words, line, column", [
    ("-- raw\n  zz\n-- result\n0x0\n", "-- raw: 'zz' is not a 64-bit slot", 2, 3),
    ("-- raw\n0x" + "f" * 17 + "\n-- result\n0x0\n", "is not a 64-bit slot", 2, 1),
    ("-- raw\n" + "9" * 5000 + "\n-- result\n0x0\n", "is not a 64-bit slot", 2, 1),
    ("-- raw\n18446744073709551616\n-- result\n0x0\n", "does not fit in 64 bits", 2, 1),
    ("-- asm\nexit\n-- mem\n00 0g 11\n-- result\n0x0\n", "-- mem: '0g' is not a hex byte", 4, 4),
    ("-- asm\nexit\n-- mem\n00 123\n-- result\n0x0\n", "-- mem: '123' is not a hex byte", 4, 4),
    ("-- asm\nexit\n-- result\n " + "9" * 5000 + "\n", "-- result: '9999", 4, 2),
])
def test_conformance_file_errors(text, words, line, column):
    with pytest.raises(AssemblyError) as ei:
        parse_conformance(text, "t.data")
    assert words in str(ei.value)
    assert (ei.value.filename, ei.value.line, ei.value.column) == ("t.data", line, column)


def test_conformance_file_still_reads_byte_rows_and_numbers():
    t = parse_conformance("-- raw\nb7 00 00 00 07 00 00 00\n0x95\n-- mem\nuBPF: 0a ff\n"
                          "-- result\n0x7\n", "t.data")
    assert t.raw == [0x7_000000b7, 0x95] and t.mem == b"\x0a\xff" and t.result == 7
