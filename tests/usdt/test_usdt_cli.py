"""``python -m pyebpf list``: text, --brief and --json output, -p PID,
library names, filters and errors (run as a subprocess, as users do)."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest
from systools import JVM_LIBS, LIBPYTHON, LIBPYTHON_NAME, POSTGRES, PYTHON as SYSTEM_PYTHON
from usdt_testlib import ElfSpec, build_elf, has_readelf, note_bytes, raw_note, readelf_notes
from waiting import read_line

ROOT = pathlib.Path(__file__).resolve().parents[2]
PY311 = SYSTEM_PYTHON


def pyebpf(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "pyebpf", "list", *args], capture_output=True,
                       text=True, cwd=ROOT, env=env, timeout=60)
    if check and r.returncode != 0:
        raise AssertionError(f"exit {r.returncode}: {r.stderr}")
    return r


def need(path: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed")


@pytest.fixture
def synthetic(tmp_path) -> pathlib.Path:
    notes = (note_bytes("app", "start", "8@%rdi -4@8(%rsp) 2@$-15536", loc=0x1010, base=0x2000,
                        sema=0x3002)
             + note_bytes("app", "start", "8@%rsi -4@%edx 2@$7", loc=0x1020, base=0x2000,
                          sema=0x3002)
             + note_bytes("app", "stop", "8@%bogus -4@g_table(,%rdi,4)", loc=0x1030,
                          base=0x2000)
             + note_bytes("lib", "tick", "", loc=0x1040, base=0x2000))
    p = tmp_path / "app.elf"
    p.write_bytes(build_elf(ElfSpec(notes=notes)))
    return p


def test_help():
    r = pyebpf("--help")
    for word in ("TARGET", "-p PID", "--json", "--brief", "-P", "-n", "libc", "/proc/PID/root",
                 "one object per note"):
        assert word in r.stdout, word


def test_listed_in_top_level_help():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "pyebpf", "--help"], capture_output=True,
                         text=True, cwd=ROOT, env=env).stdout
    assert "list" in out


def test_text_output(synthetic):
    out = pyebpf(str(synthetic)).stdout
    assert f"{synthetic}  (x86_64, ET_DYN" in out
    assert "app:start  [2 locations, semaphore 0x3002 (file offset 0x2002)]" in out
    assert "location 0x1010  file offset 0x1010  base 0x2000" in out
    assert "location 0x1020" in out
    assert "arg0  8@%rdi" in out and "u64 in rdi" in out
    assert "s32 at [rsp + 8]" in out
    assert "u16 = 50000 (written -15536)" in out
    assert "app:stop  [1 location, no semaphore]" in out
    assert "undecodable: unknown x86_64 register %bogus" in out
    assert "s32 at [&g_table + rdi*4]" in out          # arg 1 still decoded
    assert "lib:tick" in out and "(no arguments)" in out


def test_json_output(synthetic):
    data = json.loads(pyebpf(str(synthetic), "--json").stdout)
    assert isinstance(data, list) and len(data) == 4           # one object per note
    first = data[0]
    for key in ("path", "provider", "name", "location", "base", "semaphore", "args",
                "arguments"):
        assert key in first
    assert first["path"] == str(synthetic)
    assert (first["provider"], first["name"]) == ("app", "start")
    assert (first["location"], first["base"], first["semaphore"]) == (0x1010, 0x2000, 0x3002)
    assert first["args"] == "8@%rdi -4@8(%rsp) 2@$-15536"
    assert first["offset"] == 0x1010 and first["semaphore_offset"] == 0x2002
    a0, a1, a2 = first["arguments"]
    assert (a0["kind"], a0["reg"], a0["size"], a0["signed"]) == ("reg", "rdi", 8, False)
    assert (a1["kind"], a1["reg"], a1["offset"], a1["signed"]) == ("deref", "rsp", 8, True)
    assert (a2["kind"], a2["imm"], a2["value"]) == ("const", -15536, 50000)
    stop = data[2]
    assert stop["arguments"][0]["kind"] is None and "error" in stop["arguments"][0]
    assert stop["arguments"][1]["kind"] == "sym_index"
    assert data[3]["args"] == "" and data[3]["arguments"] == []


def test_brief_and_filters(synthetic):
    out = pyebpf(str(synthetic), "--brief").stdout.splitlines()
    assert out == [f"usdt:{synthetic}:app:start", f"usdt:{synthetic}:app:stop",
                   f"usdt:{synthetic}:lib:tick"]
    assert pyebpf(str(synthetic), "--brief", "-P", "lib").stdout.split() == \
        [f"usdt:{synthetic}:lib:tick"]
    assert pyebpf(str(synthetic), "--brief", "-n", "st*").stdout.count("\n") == 2
    assert pyebpf(str(synthetic), "--brief", "app:stop").stdout.split() == \
        [f"usdt:{synthetic}:app:stop"]
    assert pyebpf(str(synthetic), "--brief", "*:tick").stdout.split() == \
        [f"usdt:{synthetic}:lib:tick"]
    data = json.loads(pyebpf(str(synthetic), "--json", "-n", "start").stdout)
    assert len(data) == 2 and {d["location"] for d in data} == {0x1010, 0x1020}
    r = pyebpf(str(synthetic), "-n", "nothing*")
    assert r.stdout == "" and "no USDT probes matching the filter" in r.stderr


@pytest.mark.skipif(not has_readelf(), reason="readelf is not installed")
def test_json_agrees_with_readelf_on_postgres():
    need(POSTGRES)
    data = json.loads(pyebpf(POSTGRES, "--json").stdout)
    theirs = readelf_notes(POSTGRES)
    assert len(data) == len(theirs) == 71 or len(data) == len(theirs)
    for d, t in zip(data, theirs):
        assert (d["provider"], d["name"], d["location"], d["base"], d["semaphore"],
                d["args"]) == (t.provider, t.name, t.location, t.base, t.semaphore, t.args)
        assert len(d["arguments"]) == len(t.args.split())
        assert all(a["kind"] for a in d["arguments"])


def test_text_output_of_python():
    need(PY311)
    out = pyebpf(PY311).stdout
    assert "python:gc__start  [1 location, semaphore 0xa8426e (file offset 0x68326e)]" in out
    assert "location 0x4287f3  file offset 0x287f3" in out
    assert "-4@112(%rsp)  s32 at [rsp + 112]" in out


def test_library_name():
    need(LIBPYTHON)
    out = pyebpf(LIBPYTHON_NAME, "--brief").stdout
    assert ":python:function__entry" in out and f"{LIBPYTHON_NAME}.so" in out
    r = pyebpf("libc")                  # glibc has no USDT probes here: not an error
    assert r.returncode == 0 and "no USDT probes in" in r.stderr


@pytest.fixture
def python_process():
    need(PY311)
    p = subprocess.Popen([PY311, "-c", "import sys, time; print('up', flush=True); "
                                       "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert read_line(p.stdout, "python to start").strip() == "up"
        yield p.pid
    finally:
        p.kill()
        p.wait()


def test_pid_json(python_process):
    pid = python_process
    data = json.loads(pyebpf("-p", str(pid), "--json").stdout)
    exe = [d for d in data if d["module"] == PY311]
    assert len(exe) == 8
    for d in exe:
        # same mount namespace: the path itself (else /proc/PID/root/...)
        assert d["path"] in (PY311, f"/proc/{pid}/root{PY311}") and d["pid"] == pid
        assert d["provider"] == "python" and d["offset"] > 0
    gc = next(d for d in exe if d["name"] == "gc__start")
    assert gc["semaphore"] == 0xa8426e and gc["semaphore_offset"] == 0x68326e


def test_pid_text_and_module_filter(python_process):
    pid = python_process
    out = pyebpf("-p", str(pid), "python3*", "gc__*").stdout
    assert f"{PY311}  (x86_64, ET_EXEC)" in out
    assert "python:gc__start" in out and "python:gc__done" in out
    assert "python:line" not in out
    brief = pyebpf("-p", str(pid), "--brief").stdout
    assert f"{PY311}:python:function__entry" in brief


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="needs root and unshare(1) to make a private mount namespace")
def test_pid_in_another_mount_namespace(tmp_path):
    """A process whose executable exists only in its own mount namespace (as
    in a container) is read through /proc/PID/root."""
    need(PY311)
    d = tmp_path / "ns"
    d.mkdir()
    script = (f"mount -t tmpfs none {d} && cp {PY311} {d}/py && exec {d}/py -c "
              "'import time; print(1, flush=True); time.sleep(60)'")
    p = subprocess.Popen(["unshare", "--mount", "--fork", "sh", "-c", script],
                         stdout=subprocess.PIPE, text=True)
    pid = None
    try:
        assert read_line(p.stdout, "python in its mount namespace to start").strip() == "1"
        # unshare --fork: the traced program is unshare's only child
        with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
            pid = int(f.read().split()[0])
        assert not (d / "py").exists()                  # not visible from here
        data = json.loads(pyebpf("-p", str(pid), "--json").stdout)
        mine = [x for x in data if x["module"] == f"{d}/py"]
        assert len(mine) == 8
        assert all(x["path"] == f"/proc/{pid}/root{d}/py" for x in mine)
    finally:
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.kill()
        p.wait()


def test_errors(tmp_path):
    r = pyebpf(str(tmp_path / "missing"), check=False)
    assert r.returncode == 1 and "pyebpf list:" in r.stderr and "does not exist" in r.stderr
    text = tmp_path / "text.txt"
    text.write_text("hello\n")
    r = pyebpf(str(text), check=False)
    assert r.returncode == 1 and "not an ELF file" in r.stderr
    r = pyebpf(check=False)
    assert r.returncode == 2 and "give a TARGET" in r.stderr
    r = pyebpf("-p", "999999999", check=False)
    assert r.returncode == 1 and "no process 999999999" in r.stderr
    r = pyebpf("no-such-library-xyz", check=False)
    assert r.returncode == 1 and "cannot find 'no-such-library-xyz'" in r.stderr
    r = pyebpf(str(tmp_path / "dir/missing"), check=False)
    assert r.returncode == 1 and "does not exist" in r.stderr
    bad = tmp_path / "bad.elf"
    bad.write_bytes(build_elf(ElfSpec(notes=note_bytes("p", "ok", "")
                                      + raw_note(b"stapsdt\0", b"\0" * 10, 3))))
    r = pyebpf(str(bad), check=False)
    assert r.returncode == 1 and "descriptor too short" in r.stderr
    assert "Traceback" not in r.stderr


def test_cli_lists_libjvm():
    # (how fast: benchmarks/bench_usdt_parse.py)
    path = JVM_LIBS[-1]
    need(path)
    data = json.loads(pyebpf(path, "--json").stdout)
    assert len(data) > 500
