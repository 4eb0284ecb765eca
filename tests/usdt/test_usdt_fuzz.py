"""Fuzzing the note parser: random and mutated note descriptors, ELF headers
and whole files only ever raise UsdtNoteError (see fuzz_notes.py for the
long-running harness)."""
from __future__ import annotations

import os
import random
import struct

import pytest
from systools import PYTHON as SYSTEM_PYTHON
from budget import SCALE, fuzz_settings
from fuzz_notes import check_one, fuzz, mutate, seed_corpus
from hypothesis import given
from hypothesis import strategies as st
from usdt_testlib import ElfSpec, Seg, build_elf, build_forms, note_bytes, raw_note

from pyebpf.errors import UsdtNoteError
from pyebpf.usdt import UsdtFile

owners = st.sampled_from([b"stapsdt\0", b"stapsdt", b"stapsdt\0\0", b"GNU\0", b""]) | \
    st.binary(max_size=12)


@fuzz_settings(300)
@given(owner=owners, desc=st.binary(max_size=96), ntype=st.sampled_from([3, 3, 3, 1, 0, 2**32 - 1]),
       namesz=st.none() | st.integers(0, 2**32 - 1), descsz=st.none() | st.integers(0, 2**32 - 1),
       elfclass=st.sampled_from([32, 64]), little=st.booleans(), tail=st.binary(max_size=8))
def test_random_note_descriptors(owner, desc, ntype, namesz, descsz, elfclass, little, tail):
    notes = note_bytes("ok", "first", "8@%rax", elfclass=elfclass, little=little) + \
        raw_note(owner, desc, ntype, little, namesz=namesz, descsz=descsz) + tail
    machine = 62 if little else 22
    if elfclass == 32:
        machine = 3 if little else 20
    check_one(build_elf(ElfSpec(elfclass=elfclass, little=little, machine=machine, notes=notes)))


@st.composite
def descriptors(draw):
    """Well-formed-looking descriptors with hostile strings and addresses."""
    addr = st.integers(0, 2**64 - 1)
    text = st.binary(max_size=24).filter(lambda b: b"\0" not in b)
    return (struct.pack("<QQQ", draw(addr), draw(addr), draw(addr)) + draw(text) + b"\0"
            + draw(text) + b"\0" + draw(text) + draw(st.sampled_from([b"\0", b""])))


@fuzz_settings(300)
@given(descriptors(), st.integers(-4, 4))
def test_hostile_descriptor_contents(desc, size_delta):
    notes = raw_note(b"stapsdt\0", desc, 3, descsz=max(0, len(desc) + size_delta))
    check_one(build_elf(ElfSpec(notes=notes)))


segments = st.lists(st.builds(Seg, st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1),
                              st.integers(0, 2**64 - 1), st.integers(0, 7),
                              st.none() | st.integers(0, 2**64 - 1)), max_size=5)


@fuzz_settings(300)
@given(machine=st.integers(0, 300), etype=st.integers(0, 5), segs=segments,
       loc=st.integers(0, 2**64 - 1), base=st.integers(0, 2**64 - 1),
       sema=st.integers(0, 2**64 - 1), sbase=st.none() | st.integers(0, 2**64 - 1),
       note_type=st.sampled_from([7, 7, 1, 8, 0]), align=st.sampled_from([0, 1, 4, 8, 16]))
def test_random_headers_and_layouts(machine, etype, segs, loc, base, sema, sbase, note_type,
                                    align):
    notes = note_bytes("p", "n", "8@%rdi -4@8(%rsp)", loc=loc, base=base, sema=sema)
    check_one(build_elf(ElfSpec(machine=machine, etype=etype, segments=segs, notes=notes,
                                stapsdt_base=sbase, note_type=note_type, note_align=align)))


@fuzz_settings(300)
@given(st.binary(max_size=512))
def test_random_bytes(data):
    check_one(data)
    check_one(b"\x7fELF" + data)


def test_mutation_fuzzer(tmp_path):
    corpus = []
    try:
        corpus.append(build_forms("gcc-O2", tmp_path).read_bytes())
    except (FileNotFoundError, RuntimeError):
        pass
    n = fuzz(seconds=4 * SCALE, seed=20240607, corpus=corpus)
    assert n > 100


def test_truncated_real_files():
    path = SYSTEM_PYTHON
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed")
    with open(path, "rb") as f:
        data = f.read()
    rng = random.Random(7)
    cuts = [0, 1, 4, 16, 63, 64, 65, 1000, len(data) - 1, len(data) - 100] + \
        [rng.randrange(len(data)) for _ in range(10)]
    for cut in cuts:
        check_one(data[:cut])
    # and a few mutations of the header area of the real file
    head = data[:4096]
    for _ in range(200):
        check_one(mutate(head, rng) + data[4096:])


def test_seed_corpus_parses_cleanly():
    for data in seed_corpus():
        f = UsdtFile.from_bytes(data)
        assert len(f.notes()) in (1, 3)


def test_check_one_reports_foreign_exceptions(monkeypatch):
    import pyebpf.usdt.notes as notes_mod

    def boom(*a, **k):
        raise KeyError("boom")
    monkeypatch.setattr(notes_mod, "_iter_section", boom)
    with pytest.raises(AssertionError, match="KeyError escaped"):
        check_one(seed_corpus()[0])
    check_one(b"nope")                       # UsdtNoteError is the accepted outcome
    with pytest.raises(UsdtNoteError):
        UsdtFile.from_bytes(b"nope")
