"""``python -m pyebpf object``: the listing, and ``--load``'s one line per program."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from .conftest import unpin_by_name

pytestmark = pytest.mark.kernel
ROOT = pathlib.Path(__file__).resolve().parents[2]


def pyebpf(*argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "pyebpf", *argv], capture_output=True,
                          text=True, env=env, timeout=120)


def test_listing(objects):
    res = pyebpf("object", objects["multi"])
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "tracepoint/syscalls/sys_enter_getppid" in out
    assert "first" in out and "second" in out and "raw_one" in out
    assert "counts                   hash, key 4, value 8, max_entries 128" in out
    assert "pinned by name" in out and "inner array" in out
    assert "scale                    .rodata.cfg+0, 8 bytes" in out
    assert ("tracepoint/syscalls/sys_enter_getppid: 1 map relocation, 6 global data, "
            "3 bpf-to-bpf calls, 3 externs") in out
    assert "externs: _stext (ksym), LINUX_KERNEL_VERSION (kconfig), CONFIG_HZ (kconfig)" in out


def test_listing_leaves_out_an_empty_text_section(objects):
    # clang writes an empty .text when every function is in a SEC(): it needs
    # nothing and was listed as ".text: nothing"
    res = pyebpf("object", objects["broken"])
    assert res.returncode == 0, res.stderr
    needs = res.stdout.split("needs:\n", 1)[1].splitlines()
    assert needs == ["  tracepoint/syscalls/sys_enter_getpid: 1 map relocation"], res.stdout


def test_load_verdicts(objects):
    res = pyebpf("object", objects["kinds"], "--load")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "program on_switch (tracing): loaded" in lines
    assert "program dump_task (tracing): loaded" in lines
    assert "program on_nanosleep (kprobe): loaded" in lines
    assert any(ln.startswith("program on_nanosleep_entry (tracing): skipped: this kernel "
                             "refuses fentry programs on 'do_nanosleep' (EPERM") for ln in lines)
    assert any(ln.startswith("program on_file_open (lsm): skipped: this kernel refuses lsm "
                             "programs on 'file_open' (EPERM")
               for ln in lines)
    assert lines[-1] == "6 loaded, 0 rejected, 2 skipped"


def test_load_rejected_names_the_line(objects):
    res = pyebpf("object", objects["broken"], "--load")
    assert res.returncode == 1
    lines = res.stdout.splitlines()
    assert lines[0].startswith("program bad_read (tracepoint): rejected: broken.bpf.c:19: "
                               "verifier rejected the program")
    assert "program good (tracepoint): loaded" in lines
    assert lines[-1] == "1 loaded, 1 rejected, 0 skipped"


def test_load_rejected_at_an_unresolved_core_relocation_names_it(objects):
    # the verifier only sees "invalid func unknown#195896080": the loader's
    # stand-in for a relocation that found nothing, which the message must name
    res = pyebpf("object", objects["corefail"], "--load")
    assert res.returncode == 1
    first = res.stdout.splitlines()[0]
    assert first.startswith("program read_missing (tracepoint): rejected: corefail.bpf.c:")
    assert "invalid func unknown#195896080; the loader wrote that call (0xbad2310, as libbpf " \
           "does) in place of an instruction whose CO-RE relocation has no match in the " \
           "kernel's BTF: struct task_struct___missing.pyebpf_no_such_field " \
           "(field_byte_offset) at instruction " in first, first


def test_load_with_settings(objects):
    unpin_by_name()
    try:
        res = pyebpf("object", objects["multi"], "--load", "--set", "scale=9")
        assert res.returncode == 0, res.stderr
        assert res.stdout.splitlines()[-1] == "3 loaded, 0 rejected, 0 skipped"
        res = pyebpf("object", objects["execsnoop"], "--set", "nope=1")
        assert res.returncode == 1 and "no global variable 'nope'" in res.stderr
    finally:
        unpin_by_name()
