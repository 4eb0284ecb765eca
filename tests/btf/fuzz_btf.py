"""Fuzzer for :mod:`pyebpf.btf`.

Mutates real BTF blobs (bytes flipped, header fields and type-record words
set to boundary values, blobs truncated) and reads each mutant with every
reader -- the index, each type, names, sizes, alignments, member offsets, C
declarations and definitions, ``.BTF.ext`` records and CO-RE resolution of
each relocation against the mutant itself -- checking that what comes out is
a result or :class:`pyebpf.btf.BtfError`, never another exception.

    python3 tests/btf/fuzz_btf.py --seconds 60 [--seed N] [FILE.o ...]

The test suite runs :func:`fuzz` for a few seconds with a fixed seed.
"""
from __future__ import annotations

import argparse
import os
import random
import struct
import sys
import time
import traceback

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))

from pyebpf.btf import Btf, BtfError, BtfExt  # noqa: E402
from pyebpf.btf.core import CoreResolver  # noqa: E402

BOUNDARY = [0, 1, 2, 3, 4, 7, 8, 12, 16, 19, 20, 24, 31, 32, 0x7f, 0x80, 0xff, 0x100, 0xffff,
            0x10000, 0x7fffffff, 0x80000000, 0xffffffff]
#: the kinds' info words with vlen 0..3 and kind_flag on and off
INFOS = [(k << 24) | v | (f << 31) for k in range(0, 21) for v in (0, 1, 3) for f in (0, 1)]


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One mutant of a BTF (or .BTF.ext) blob."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        if not b:
            break
        if op < 0.25:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op < 0.45 and len(b) >= 24:                     # a header field
            at = rng.choice([4, 8, 12, 16, 20])
            struct.pack_into("<I", b, at, rng.choice(BOUNDARY))
        elif op < 0.75 and len(b) >= 28:                     # a type-record word
            at = 24 + 4 * rng.randrange((len(b) - 24) // 4)
            value = rng.choice(INFOS) if rng.random() < 0.5 else rng.choice(BOUNDARY)
            struct.pack_into("<I", b, at, value)
        elif op < 0.9:
            del b[rng.randrange(len(b) + 1):]
        else:
            at = rng.randrange(len(b) + 1)
            b[at:at] = bytes(rng.randrange(256) for _ in range(rng.choice([1, 4, 12])))
    return bytes(b)


def _exercise(btf: Btf) -> None:
    for tid in range(len(btf)):
        for call in (btf.__getitem__, btf.resolve, btf.size_of, btf.align_of, btf.format,
                     btf.dump_c):
            try:
                call(tid)
            except BtfError:
                pass
        try:
            t = btf[tid]
        except BtfError:
            continue
        if t.name:
            btf.find(t.name)
            btf.find_prefixed(t.name[:3])
            for m in t.members[:3]:
                if m.name:
                    try:
                        btf.member_offset(tid, m.name)
                    except BtfError:
                        pass


def check_one(data: bytes, ext: bytes | None = None, seed: int = 0) -> None:
    """Read one mutant with every reader; anything but BtfError fails."""
    try:
        try:
            btf = Btf(data)
        except BtfError:
            return
        _exercise(btf)
        if ext is None:
            return
        try:
            parsed = BtfExt(ext, btf)
        except BtfError:
            return
        resolver = CoreResolver(btf)
        for relos in parsed.core_relos.values():
            for r in relos:
                try:
                    resolver.resolve(btf, r)
                except BtfError:
                    pass
    except BtfError:
        return
    except Exception as exc:  # noqa: BLE001 - the point of the fuzzer
        raise AssertionError(f"{type(exc).__name__} escaped (seed {seed}): {exc}\n"
                             f"{traceback.format_exc()}") from None


def fuzz(corpus: list[tuple[bytes, bytes | None]], seconds: float = 5.0, seed: int = 0) -> int:
    """Mutate ``(btf, ext)`` pairs of the corpus for ``seconds``; return the count."""
    rng = random.Random(seed)
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        btf, ext = rng.choice(corpus)
        s = rng.randrange(1 << 32)
        r = random.Random(s)
        if ext is not None and r.random() < 0.5:
            check_one(btf, mutate(ext, r), s)
        else:
            check_one(mutate(btf, r), ext, s)
        n += 1
    return n


def corpus_of(paths: list[str]) -> list[tuple[bytes, bytes | None]]:
    """``(.BTF, .BTF.ext)`` of ELF objects (raw BTF files: no ext)."""
    from pyebpf.btf.reader import elf_section
    out = []
    for p in paths:
        with open(p, "rb") as f:
            head = f.read(4)
        if head == b"\x7fELF":
            btf = elf_section(p, ".BTF")
            if btf:
                out.append((btf, elf_section(p, ".BTF.ext")))
        else:
            out.append((open(p, "rb").read(), None))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from btf_samples import every_kind
    corpus = corpus_of(args.files) + [(every_kind().build(), None)]
    n = fuzz(corpus, args.seconds, args.seed)
    print(f"{n} mutants, seed {args.seed}: no exception but BtfError")
    return 0


if __name__ == "__main__":
    sys.exit(main())
