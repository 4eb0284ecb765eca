"""``python -m pyebpf asm`` and ``disasm``: outputs, exit codes and messages."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from pyebpf.text import assemble

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
CLANG = shutil.which("clang") or shutil.which("clang-14")

SOURCE = """\
    r0 = 0
    r1 = counts ll            # a symbolic map reference
    if r1 == 0 goto out
    r0 = 1
out:
    exit
"""


def pyebpf(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pyebpf", *args], input=stdin,
                          capture_output=True, env=ENV, cwd=ROOT, timeout=60)


def test_asm_writes_raw_bytes(tmp_path):
    src = tmp_path / "prog.s"
    src.write_text(SOURCE)
    out = tmp_path / "prog.bin"
    r = pyebpf("asm", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == assemble(SOURCE).encode()
    assert len(out.read_bytes()) == 6 * 8
    # stdin in, stdout out
    r = pyebpf("asm", "-", "-o", "-", stdin=SOURCE.encode())
    assert r.returncode == 0 and r.stdout == out.read_bytes()
    r = pyebpf("asm", "-", stdin=SOURCE.encode())       # default: stdout (not a tty here)
    assert r.returncode == 0 and r.stdout == out.read_bytes()


def test_asm_mnemonic_and_conformance_files(tmp_path, conformance_dir):
    r = pyebpf("asm", "--dialect", "mnemonic", "-", stdin=b"mov32 %r0, 1\nexit\n")
    assert r.returncode == 0 and r.stdout == bytes.fromhex("b400000001000000" "9500000000000000")
    data = conformance_dir / "lddw.data"
    r = pyebpf("asm", str(data))
    assert r.returncode == 0
    assert r.stdout == bytes.fromhex("1800000088776655" "0000000044332211" "9500000000000000")


def test_asm_error_exit_status_and_location(tmp_path):
    src = tmp_path / "bad.s"
    src.write_text("r0 = 0\nr1 += 0x100000000\nexit\n")
    r = pyebpf("asm", str(src), "-o", str(tmp_path / "out.bin"))
    assert r.returncode == 1
    err = r.stderr.decode()
    assert f"{src}:2:7: error: immediate 0x100000000 does not fit in 32 bits" in err
    assert "r1 += 0x100000000" in err and "^" in err
    assert not (tmp_path / "out.bin").exists()
    r = pyebpf("asm", "-", stdin=b"exit\ngoto nowhere\n")
    assert r.returncode == 1 and b"<stdin>:2:6: error: unknown label 'nowhere'" in r.stderr
    r = pyebpf("asm", "--dialect", "mnemonic", "-", stdin=b"foo %r1\n")
    assert r.returncode == 1 and b"<stdin>:1:1: error: Invalid mnemonic: foo" in r.stderr


def test_usage_errors():
    assert pyebpf("asm").returncode == 2
    assert pyebpf("asm", "--dialect", "intel", "-").returncode == 2
    assert pyebpf("disasm").returncode == 2
    assert pyebpf("disasm", "--style", "verifier", "--dialect", "mnemonic", "-",
                  stdin=b"").returncode == 2
    r = pyebpf("asm", "/nonexistent/file.s")
    assert r.returncode == 1 and b"No such file" in r.stderr


def test_help():
    for cmd in ("asm", "disasm"):
        r = pyebpf(cmd, "--help")
        assert r.returncode == 0
        assert b"--dialect" in r.stdout and b"example" in r.stdout


def test_disasm_raw(tmp_path):
    code = assemble(SOURCE).encode()
    binf = tmp_path / "prog.bin"
    binf.write_bytes(code)
    r = pyebpf("disasm", str(binf))
    assert r.returncode == 0
    text = r.stdout.decode()
    assert "r1 = map_fd(0) ll" in text and "goto L5" in text and "L5:" in text
    assert assemble(text).encode() == code
    r = pyebpf("disasm", "--style", "verifier", "--no-labels", "-", stdin=code)
    assert r.returncode == 0 and "if r1 == 0x0 goto pc+1" in r.stdout.decode()
    r = pyebpf("disasm", "--dialect", "mnemonic", "--index", str(binf))
    lines = r.stdout.decode().splitlines()
    assert lines[0].split() == ["0:", "mov", "%r0,", "0"]
    assert assemble(r.stdout.decode(), "mnemonic").encode() == code
    # not whole slots: reported, never a crash
    r = pyebpf("disasm", "-", stdin=code + b"\x01\x02")
    assert r.returncode == 0 and b"2 trailing bytes" in r.stdout


@pytest.mark.skipif(CLANG is None, reason="clang is needed to build an ELF object")
def test_disasm_elf(tmp_path):
    src = tmp_path / "x.c"
    src.write_text('__attribute__((section("xdp"), used)) int f(void *ctx) { return 2; }\n'
                   '__attribute__((section("tc"), used)) int g(void *ctx) { return 3; }\n'
                   'int counter;\n'
                   '__attribute__((section("kprobe"), used)) int h(void *ctx) { return counter; }\n')
    obj = tmp_path / "x.o"
    subprocess.run([CLANG, "-target", "bpf", "-O2", "-c", str(src), "-o", str(obj)], check=True)
    r = pyebpf("disasm", "--elf", str(obj), "--no-annotations")
    assert r.returncode == 0 and r.stdout.decode().split() == [
        "#", "section", "xdp", "f:", "r0", "=", "2", "exit",
        "#", "section", "tc", "g:", "r0", "=", "3", "exit",
        "#", "section", "kprobe", "h:", "r1", "=", "0", "ll", "r0", "=", "*(u32", "*)(r1",
        "+", "0)", "exit"]
    r = pyebpf("disasm", "--elf", str(obj), "--section", "tc", "--dialect", "mnemonic",
               "--no-annotations")
    assert r.returncode == 0 and r.stdout.decode().split() == ["#", "section", "tc", "g:", "mov",
                                                               "%r0,", "3", "exit"]
    r = pyebpf("disasm", str(obj), "--section", "kprobe")
    assert r.returncode == 0 and "     0: r1 = 0 ll  # counter (.bss+0)" in r.stdout.decode()
    r = pyebpf("disasm", "--elf", str(obj), "--section", "nope")
    assert r.returncode == 1 and b"no section 'nope'" in r.stderr and b"xdp" in r.stderr
    r = pyebpf("disasm", "--elf", str(src))
    assert r.returncode == 1 and b"not an ELF file" in r.stderr
