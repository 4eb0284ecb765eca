"""Every file on this machine that carries stapsdt notes: the parser agrees
with ``readelf -n`` on every probe, location, base, semaphore and argument
string; every argument decodes; the file offsets land on the probe's nop and
the semaphores on zeroed counters in a writable section (computed
independently through the section headers)."""
from __future__ import annotations

import collections
import os

import pytest
from systools import POSTGRES
from usdt_testlib import JVM_LIBS, KNOWN_FILES, all_note_files, has_readelf, readelf_notes

from pyebpf.usdt import ArgKind, UsdtFile

FILES = all_note_files()


def _need(path: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed on this machine")


@pytest.fixture(scope="module")
def parsed():
    cache: dict[str, UsdtFile] = {}

    def get(path: str) -> UsdtFile:
        if path not in cache:
            cache[path] = UsdtFile(path)
        return cache[path]
    return get


@pytest.mark.skipif(not has_readelf(), reason="readelf is not installed")
@pytest.mark.parametrize("path", FILES)
def test_agrees_with_readelf(path, parsed):
    _need(path)
    ours = [(n.provider, n.name, n.location, n.base, n.semaphore, n.args)
            for n in parsed(path).notes()]
    theirs = [(t.provider, t.name, t.location, t.base, t.semaphore, t.args)
              for t in readelf_notes(path)]
    assert len(ours) == len(theirs) > 0
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, f"note {i}: ours {a} readelf {b}"


@pytest.mark.parametrize("path", FILES)
def test_every_argument_decodes(path, parsed):
    _need(path)
    f = parsed(path)
    assert f.elf.arch == "x86_64"
    for n in f.notes():
        for a in n.arguments:
            assert a.decodable, f"{n.probe} in {path}: {a.error}"
            assert a.size in (1, 2, 4, 8)


@pytest.mark.parametrize("path", FILES)
def test_offsets_hit_the_nop_and_the_semaphores(path, parsed):
    _need(path)
    from elftools.elf.elffile import ELFFile
    f = parsed(path)
    with open(path, "rb") as fh:
        elf = ELFFile(fh)
        writable = [(s["sh_addr"], s["sh_size"], s["sh_offset"], s.name)
                    for s in elf.iter_sections()
                    if s["sh_flags"] & 1 and s["sh_type"] == "SHT_PROGBITS"]  # SHF_WRITE
        for n in f.notes():
            fh.seek(n.offset)
            assert fh.read(1) == b"\x90", f"{n.probe}: no nop at file offset {n.offset:#x}"
            if not n.semaphore:
                assert n.semaphore_offset == 0
                continue
            sec = [s for s in writable if s[0] <= n.semaphore_address < s[0] + s[1]]
            assert sec, f"{n.probe}: semaphore {n.semaphore_address:#x} in no writable section"
            addr, _size, off, _name = sec[0]
            assert n.semaphore_offset == n.semaphore_address - addr + off
            fh.seek(n.semaphore_offset)
            assert fh.read(2) == b"\0\0"         # a counter nobody holds yet


def test_known_files_are_covered():
    present = [p for p in KNOWN_FILES if os.path.exists(p)]
    if not present:
        pytest.skip("none of the known USDT binaries is installed")
    assert set(present) <= set(FILES)


def test_forms_in_this_machines_binaries(parsed):
    """A survey of the argument kinds, and the ones we know must be there."""
    kinds: collections.Counter = collections.Counter()
    for path in FILES:
        if os.path.exists(path):
            for n in parsed(path).notes():
                kinds.update(a.kind for a in n.arguments)
    if not kinds:
        pytest.skip("no USDT binaries installed")
    assert kinds[ArgKind.REG] and kinds[ArgKind.CONST]
    if os.path.exists(POSTGRES):
        assert kinds[ArgKind.RIP] >= 6 and kinds[ArgKind.DEREF]


def test_multi_location_probes_with_differing_specs(parsed):
    path = next((p for p in JVM_LIBS if os.path.exists(p)), None)
    if path is None:
        pytest.skip("no libjvm.so installed")
    probes = parsed(path).probes()
    multi = [p for p in probes if len(p.locations) > 1]
    assert multi
    assert any(len({n.args for n in p.locations}) > 1 for p in multi)
    for p in multi:
        assert len({n.location for n in p.locations}) == len(p.locations)


@pytest.mark.parametrize("path", JVM_LIBS)
def test_libjvm_parses(path):
    # (how fast: benchmarks/bench_usdt_parse.py, not a test on a loaded machine)
    _need(path)
    notes = UsdtFile(path).notes()
    assert len(notes) > 500
    assert len({(n.provider, n.name) for n in notes}) > 100


@pytest.mark.parametrize("path", [p for p in KNOWN_FILES])
def test_offsets_agree_with_pyebpf_elf(path, parsed):
    """The note parser's own PT_LOAD arithmetic and pyebpf.elf's agree."""
    _need(path)
    from pyebpf.elf import open_elf
    elf = open_elf(path)
    for n in parsed(path).notes():
        assert elf.address_to_offset(n.address) == n.offset
        if n.semaphore:
            assert elf.address_to_offset(n.semaphore_address) == n.semaphore_offset
