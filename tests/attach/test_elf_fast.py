"""The struct header parser of pyebpf.elf gives what pyelftools gives, and the
common path (64-bit little-endian files) does not import pyelftools."""
from __future__ import annotations

import glob
import os
import struct
import subprocess
import sys

import pytest

from pyebpf import elf

LIBC = elf.resolve_library("libc")


def _files() -> list[str]:
    out = [LIBC, sys.executable, "/proc/self/exe", "/bin/ls"]
    for pattern in ("/usr/lib/x86_64-linux-gnu/lib*.so*", "/usr/bin/*"):
        out += sorted(glob.glob(pattern))[:40]
    return [p for p in out if os.path.isfile(p)]


def _both(path: str) -> tuple[elf.ElfFile, elf.ElfFile | None]:
    """(headers parsed by pyelftools, headers parsed by struct or None)."""
    slow = object.__new__(elf.ElfFile)
    slow.path, slow._data = path, None
    slow._parse_pyelftools(path)
    fast = object.__new__(elf.ElfFile)
    fast.path, fast._data = path, None
    return slow, (fast if fast._parse_fast(path) else None)


def test_fast_headers_equal_pyelftools(target_pie, target_nopie, target_moved):
    checked = 0
    for path in [target_pie, target_nopie, target_moved] + _files():
        try:
            slow, fast = _both(path)
        except elf.ElfError:
            continue
        if fast is None:
            assert not (slow.elfclass == 64 and slow.little_endian
                        and slow.machine == "EM_X86_64"), path
            continue
        for attr in ("type", "machine", "elfclass", "little_endian", "entry", "segments",
                     "sections"):
            assert getattr(fast, attr) == getattr(slow, attr), (path, attr)
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize("which", ["libc", "target_pie", "target_moved"])
def test_fast_symbols_equal_pyelftools(which, request, monkeypatch):
    path = LIBC if which == "libc" else request.getfixturevalue(which)
    fast = elf.ElfFile(path)
    with monkeypatch.context() as m:
        m.setattr(elf.ElfFile, "_parse_fast", lambda self, path: False)
        slow = elf.ElfFile(path)
    assert slow.sections == fast.sections
    assert slow.symbols() == fast.symbols()
    assert slow.build_id == fast.build_id
    name = "malloc" if which == "libc" else "main"
    assert slow.resolve(name) == fast.resolve(name)


@pytest.mark.parametrize("blob", [b"", b"\x7fELF", b"\x7fELF\x02\x01" + b"\0" * 40,
                                  b"not an elf at all" * 8])
def test_bad_files_still_rejected(tmp_path, blob):
    p = tmp_path / "bad"
    p.write_bytes(blob)
    with pytest.raises(elf.ElfError):
        elf.ElfFile(str(p))


def test_truncated_section_table_falls_back(tmp_path):
    data = bytearray(open(LIBC, "rb").read())
    (e_shoff,) = struct.unpack_from("<Q", data, 0x28)
    p = tmp_path / "trunc.so"
    p.write_bytes(bytes(data[:e_shoff + 10]))
    fast = object.__new__(elf.ElfFile)
    assert not fast._parse_fast(str(p))


def test_directory_and_missing():
    with pytest.raises(elf.ElfError):
        elf.ElfFile("/")
    with pytest.raises(FileNotFoundError):
        elf.ElfFile("/nonexistent/file")


def test_no_pyelftools_on_the_uprobe_path():
    code = ("import sys, pyebpf.attach, pyebpf.elf as e; "
            f"e.open_elf({LIBC!r}).resolve('malloc'); "
            f"e.open_elf({LIBC!r}).build_id; "
            "print('elftools' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(elf.__file__))))
    assert out.stdout.strip() == "False"
