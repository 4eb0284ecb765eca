"""pyebpf.elf on malformed files: every reader gives a result or ElfError.

Mutants of real files (see fuzz_elf.py, also a long-running harness), plus
fixed regression tests for crashes found before: ``os.pread`` of an unchecked
``sh_size``, ``build_id`` on a short or NOBITS note, ``sh_entsize`` smaller
than a symbol, and pyelftools' seek errors.
"""
from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
import sys

import pytest
from budget import fuzz_settings
from fuzz_elf import _tables, check_one, fuzz, mutate
from hypothesis import given
from hypothesis import strategies as st

from pyebpf import elf
from pyebpf.elf import ElfError, ElfFile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "usdt"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[bytes]:
    """Small real ELF files: the attach tests' target (PIE, non-PIE, a moved
    section) unstripped and stripped, and small system files."""
    from attach.conftest import build
    out = []
    tmp = tmp_path_factory.mktemp("corpus")
    for variant in ("pie", "nopie", "moved"):
        path = build(variant)
        out.append(open(path, "rb").read())
        if shutil.which("strip"):
            dst = tmp / f"{variant}.stripped"
            subprocess.run(["strip", "-s", "-o", str(dst), path], check=True)
            out.append(dst.read_bytes())
    for path in ("/usr/bin/true", "/lib/x86_64-linux-gnu/libdl.so.2"):
        if os.path.exists(path) and os.path.getsize(path) < 1 << 17:
            out.append(open(path, "rb").read())
    from usdt_testlib import ElfSpec, build_elf, note_bytes   # 32-bit and big-endian images
    for cls, little, machine in ((32, True, 3), (64, False, 22), (32, False, 20)):
        out.append(build_elf(ElfSpec(elfclass=cls, little=little, machine=machine,
                                     notes=note_bytes("p", "n", "4@%eax", elfclass=cls,
                                                      little=little))))
    return out


@fuzz_settings(300)
@given(pick=st.integers(0, 2**16), seed=st.integers(0, 2**32 - 1))
def test_mutated_files_give_results_or_elf_error(corpus, tmp_path_factory, pick, seed):
    rng = random.Random(seed)
    data = mutate(corpus[pick % len(corpus)], rng)
    check_one(data, str(tmp_path_factory.getbasetemp() / "mutant"), seed)


def test_mutation_fuzzer_runs(corpus, tmp_path):
    n = fuzz(corpus, seconds=2.0, seed=20240607, workdir=str(tmp_path))
    assert n > 50


@fuzz_settings(100)
@given(cut=st.integers(0, 1 << 16))
def test_truncated_files(corpus, tmp_path_factory, cut):
    data = corpus[0]
    check_one(data[:cut % (len(data) + 1)], str(tmp_path_factory.getbasetemp() / "cut"))


def test_check_one_reports_foreign_exceptions(corpus, tmp_path, monkeypatch):
    def boom(self):
        raise KeyError("boom")
    monkeypatch.setattr(ElfFile, "eh_frame_functions", boom)
    with pytest.raises(AssertionError, match="KeyError escaped"):
        check_one(corpus[0], str(tmp_path / "f"))


# ---------------------------------------------------- fixed regressions
def _patch_section(data: bytes, name: str, field: int, size: int, value: int) -> bytes:
    """``data`` with one field of section ``name``'s header set to ``value``."""
    _ph, shdrs, _secs = _tables(data)
    str_hdr = shdrs[struct.unpack_from("<H", data, 62)[0]]
    str_off, = struct.unpack_from("<Q", data, str_hdr + 24)
    b = bytearray(data)
    for h in shdrs:
        name_off, = struct.unpack_from("<I", data, h)
        end = data.index(b"\0", str_off + name_off)
        if data[str_off + name_off:end] == name.encode():
            b[h + field:h + field + size] = value.to_bytes(size, "little")
            return bytes(b)
    raise AssertionError(f"no section {name}")


SH_TYPE, SH_SIZE, SH_ENTSIZE = (4, 4), (32, 8), (56, 8)


@pytest.fixture
def target(corpus) -> bytes:
    return corpus[0]                                   # the unstripped PIE target


def _open(tmp_path, data: bytes) -> ElfFile:
    path = tmp_path / "f"
    path.write_bytes(data)
    return ElfFile(str(path))


@pytest.mark.parametrize("size", [2**62, 2**64 - 1, 0x7fffffffffffffff, 10**9])
def test_huge_section_size_is_an_elf_error(tmp_path, target, size):
    ef = _open(tmp_path, _patch_section(target, ".symtab", *SH_SIZE, size))
    with pytest.raises(ElfError, match="not inside the file"):
        ef.symbols()
    with pytest.raises(ElfError, match="section .symtab"):
        ef.section_data(ef.section(".symtab"))


def test_build_id_of_a_short_note_is_an_elf_error(tmp_path, target):
    ef = _open(tmp_path, _patch_section(target, ".note.gnu.build-id", *SH_SIZE, 8))
    with pytest.raises(ElfError, match="shorter than a note header"):
        ef.build_id
    ef = _open(tmp_path, _patch_section(target, ".note.gnu.build-id", *SH_SIZE, 20))
    with pytest.raises(ElfError, match="runs past its section"):
        ef.build_id


def test_build_id_of_a_nobits_note_is_none(tmp_path, target):
    ef = _open(tmp_path, _patch_section(target, ".note.gnu.build-id", *SH_TYPE, 8))
    assert ef.build_id is None
    assert len(_open(tmp_path, target).build_id) == 20


@pytest.mark.parametrize("entsize", [1, 8, 23])
def test_symbol_entries_smaller_than_a_symbol_are_an_elf_error(tmp_path, target, entsize):
    ef = _open(tmp_path, _patch_section(target, ".symtab", *SH_ENTSIZE, entsize))
    with pytest.raises(ElfError, match="entries of"):
        ef.symbols()


def test_huge_string_table_offset_through_pyelftools(tmp_path, target):
    """e_shstrndx out of range sends the file to pyelftools, whose seek to
    an offset past the largest file size raised OSError(EINVAL)."""
    b = bytearray(target)
    shstrndx, = struct.unpack_from("<H", b, 62)
    _ph, shdrs, _secs = _tables(target)
    b[shdrs[shstrndx] + 24:shdrs[shstrndx] + 32] = (2**62).to_bytes(8, "little")
    with pytest.raises(ElfError):
        _open(tmp_path, bytes(b))


def test_short_reads_stop_at_the_end_of_the_file(tmp_path, target):
    ef = _open(tmp_path, target)
    seg = ef.segments[-1]
    assert len(ef.read(seg.vaddr, 2**62)) == len(target) - seg.offset
    with pytest.raises(ElfError):
        ef.read(seg.vaddr, -1)


def test_damaged_ld_so_cache_reads_as_empty(tmp_path):
    src = "/etc/ld.so.cache"
    if not os.path.exists(src):
        pytest.skip("no /etc/ld.so.cache")
    data = open(src, "rb").read()
    assert elf.ld_so_cache(src)
    pos = data.find(b"glibc-ld.so.cache1.1")
    rng = random.Random(3)
    for i, bad in enumerate([data[:pos + 24], data[:pos + 60],
                             data[:pos + 20] + b"\xff\xff\xff\x7f" + data[pos + 24:],
                             b"ld.so-1.7.0\0\x01"] +
                            [bytes(rng.randrange(256) if rng.random() < 0.01 else c
                                   for c in data[:4096]) for _ in range(20)]):
        path = tmp_path / f"cache{i}"
        path.write_bytes(bad)
        entries = elf.ld_so_cache(str(path))
        assert isinstance(entries, list)
