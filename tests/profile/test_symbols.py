"""Native frames named where the binary lets us: a stripped file's
MiniDebugInfo (``.gnu_debugdata``), a separate debug file found through
``.gnu_debuglink``, and JIT code from ``/tmp/perf-PID.map``."""
from __future__ import annotations

import lzma
import os
import shutil
import subprocess

import pytest

from pyebpf import elf
from pyebpf.symbols.stacks import Symbolizer, read_perf_map

from .conftest import build


def _tool(name: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        pytest.skip(f"{name} is not installed (binutils)")
    return exe


def _offset_of(path: str, name: str) -> int:
    ef = elf.open_elf(path)
    return ef.address_to_offset(ef.symbol(name).address)


def test_minidebuginfo_names_a_stripped_files_functions(tmp_path):
    exe = build("shapes.c")
    objcopy, strip = _tool("objcopy"), _tool("strip")
    keep = tmp_path / "keep"
    keep.write_text("hot\ncold\nwork\nspin\nleaf\nother\n")
    mini = tmp_path / "mini"
    subprocess.run([objcopy, "--only-keep-debug", exe, str(mini)], check=True)
    subprocess.run([objcopy, "-S", "--remove-section", ".gdb_index", "--remove-section",
                    ".comment", f"--keep-symbols={keep}", str(mini)], check=True)
    xz = tmp_path / "mini.xz"
    xz.write_bytes(lzma.compress(mini.read_bytes(), format=lzma.FORMAT_XZ))
    stripped = tmp_path / "shapes-mini"
    subprocess.run([strip, "--strip-all", "-o", str(stripped), exe], check=True)
    assert Symbolizer()._in_file(str(stripped), _offset_of(exe, "hot"), False) is None
    subprocess.run([objcopy, "--add-section", f".gnu_debugdata={xz}", str(stripped)],
                   check=True)
    sym = Symbolizer()
    assert sym._in_file(str(stripped), _offset_of(exe, "hot"), False) == "hot+0"
    assert sym._in_file(str(stripped), _offset_of(exe, "cold") + 4, False) == "cold+4"


def test_a_debug_file_found_through_gnu_debuglink(tmp_path):
    exe = build("shapes.c")
    objcopy, strip = _tool("objcopy"), _tool("strip")
    stripped = tmp_path / "shapes-linked"
    debug = tmp_path / "shapes-linked.dbg"
    subprocess.run([objcopy, "--only-keep-debug", "--remove-section", ".note.gnu.build-id",
                    exe, str(debug)], check=True)
    subprocess.run([strip, "--strip-all", "--remove-section", ".note.gnu.build-id", "-o",
                    str(stripped), exe], check=True)
    subprocess.run([objcopy, f"--add-gnu-debuglink={debug}", str(stripped)], check=True,
                   cwd=tmp_path)
    assert Symbolizer()._in_file(str(stripped), _offset_of(exe, "work"), False) == "work+0"
    os.unlink(debug)
    from pyebpf.symbols import stacks
    stacks._debug_file.cache_clear()
    assert Symbolizer()._in_file(str(stripped), _offset_of(exe, "work"), False) is None


def test_jit_frames_from_the_perf_map(tmp_path):
    pid = os.getpid()
    path = f"/tmp/perf-{pid}.map"
    assert not os.path.exists(path)
    try:
        with open(path, "w") as f:
            f.write("1000 40 py::hot:/srv/app.py\n1040 10 py::cold:/srv/app.py\nbad line\n")
        assert read_perf_map(path) == ([0x1000, 0x1040], [0x40, 0x10],
                                       ["py::hot:/srv/app.py", "py::cold:/srv/app.py"])
        sym = Symbolizer()
        assert sym.frame(0x1004, pid) == "py::hot:/srv/app.py+4"
        assert sym.frame(0x1045, pid, 1) == "py::cold:/srv/app.py+5"
        assert sym.frame(0x1050, pid) == "0x1050"
    finally:
        os.unlink(path)
