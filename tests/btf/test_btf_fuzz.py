"""pyebpf.btf on damaged BTF: every reader gives a result or BtfError (with
the offset), never an IndexError or another exception.  Mutants of real
blobs (see fuzz_btf.py, also a long-running harness), plus fixed cases."""
from __future__ import annotations

import random
import struct

import pytest
from btf_samples import every_kind
from budget import fuzz_settings
from fuzz_btf import check_one, corpus_of, fuzz, mutate
from hypothesis import given
from hypothesis import strategies as st

from pyebpf.btf import Btf, BtfBuilder, BtfError


@pytest.fixture(scope="module", params=["built", "clang"])
def corpus(request) -> list:
    """The blobs mutated: one BTF of every kind built here, or (a case of
    its own, which skips visibly when clang/bpftool are missing rather than
    shrinking the corpus) the BTF of the C test objects."""
    if request.param == "built":
        return [(every_kind().build(), None)]
    return corpus_of(list(request.getfixturevalue("bpf_objects").values()))


@fuzz_settings(300)
@given(pick=st.integers(0, 2**16), seed=st.integers(0, 2**32 - 1))
def test_mutated_blobs_give_results_or_btf_error(corpus, pick, seed):
    btf, ext = corpus[pick % len(corpus)]
    rng = random.Random(seed)
    if ext is not None and seed % 2:
        check_one(btf, mutate(ext, rng), seed)
    else:
        check_one(mutate(btf, rng), ext, seed)


@fuzz_settings(100)
@given(cut=st.integers(0, 1 << 16))
def test_truncated_blobs(corpus, cut):
    btf, ext = corpus[-1]
    check_one(btf[:cut % (len(btf) + 1)], ext)


def test_mutation_fuzzer_runs(corpus):
    assert fuzz(corpus, seconds=2.0, seed=20261126) > 20


def test_check_one_reports_foreign_exceptions(monkeypatch):
    def boom(self, tid):
        raise IndexError("boom")
    monkeypatch.setattr(Btf, "size_of", boom)
    with pytest.raises(AssertionError, match="IndexError escaped"):
        check_one(every_kind().build())


def _blob_with_words(words: list[int], strings: bytes = b"\0a\0") -> bytes:
    body = struct.pack(f"<{len(words)}I", *words)
    return struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(body), len(body), len(strings)) \
        + body + strings


@pytest.mark.parametrize("data,match,offset", [
    (b"\x9f\xeb\x01\x00", "too short", 0),
    (b"\x00" * 24, "bad magic", 0),
    (_blob_with_words([1]), "truncated type record", 24),
    (_blob_with_words([1, 2 << 24]), "runs past the type section", 24),
    (_blob_with_words([1, 31 << 24, 0]), "unknown kind 31", 28),
    (_blob_with_words([1, (4 << 24) | 2, 8, 1, 1, 0]), "runs past the type section", 24),
    (_blob_with_words([0, 2 << 24, 0], b"a\0"), "empty string", 36),
])
def test_damage_names_the_offset(data, match, offset):
    with pytest.raises(BtfError, match=match) as info:
        Btf(data)
    assert info.value.offset == offset
    assert f"offset {offset:#x}" in str(info.value)


def test_bad_references_and_loops_are_btf_errors():
    b = BtfBuilder()
    b.add_int("int", 4)
    b.add_typedef("loop", 3)            # 2 -> 3 -> 2
    b.add_typedef("pool", 2)
    b.add_struct("s", 4, [("x", 5, 0)])
    b.add_struct("", 4, [("", 5, 0)])     # an anonymous struct that holds itself
    btf = Btf(b.build())
    with pytest.raises(BtfError, match="loop"):
        btf.resolve(2)
    with pytest.raises(BtfError, match="nested deeper"):
        btf.dump_c(4)
    with pytest.raises(BtfError, match="loop"):
        btf.align_of(4)
    with pytest.raises(BtfError, match="loop"):
        btf.size_of(2)
    raw = bytearray(every_kind().build())
    btf = Btf(bytes(raw))
    ptr = next(i for i in btf.ids() if btf.kind(i) == 2)
    off = 24 + 4 * btf._offsets[ptr - 1] + 8
    struct.pack_into("<I", raw, off, 999)
    with pytest.raises(BtfError, match=r"refers to type \[999\]") as info:
        Btf(bytes(raw))[ptr]
    assert info.value.offset == 24 + 4 * btf._offsets[ptr - 1]
