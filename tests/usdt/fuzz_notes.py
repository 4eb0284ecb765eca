"""Fuzzer for the ``.note.stapsdt`` parser.

Mutates ELF images (synthetic ones of every class/byte order, plus any files
given) and checks that reading them -- headers, every note, offsets,
semaphores, arguments, the JSON form -- either works or raises
:class:`~pyebpf.errors.UsdtNoteError`, never anything else.

    python3 tests/usdt/fuzz_notes.py --seconds 60 [--seed N] [FILE ...]

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
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from usdt_testlib import ElfSpec, Seg, build_elf, note_bytes, raw_note  # noqa: E402

from pyebpf.errors import UsdtNoteError, UsdtSpecError  # noqa: E402
from pyebpf.usdt import UsdtFile  # noqa: E402

BOUNDARY = [0, 1, 2, 3, 4, 7, 8, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x7fffffff, 0x80000000,
            0xffffffff, 2**63 - 1, 2**63, 2**64 - 1]


def seed_corpus() -> list[bytes]:
    """Synthetic ELF images covering each class, byte order and machine the
    parser handles, with one or several notes."""
    out = []
    shapes = [(64, True, 62, "8@%rdi -4@8(%rsp) -8@g(%rip)"), (32, True, 3, "-4@%eax 4@8(%esp)"),
              (64, False, 22, "-4@8(%r15) 8@%r2"), (32, False, 20, "8@%r3 4@i5"),
              (64, True, 183, "-4@[sp, 8] 8@x0"), (64, False, 183, "8@x1"),
              (32, True, 40, "4@[r0, #8] #5"), (64, True, 243, "8@8(sp) a0"),
              (64, True, 21, "8@0(3)"), (64, True, 8, "8@$4"), (64, True, 62, "")]
    for cls, le, machine, args in shapes:
        notes = b"".join(note_bytes("prov", f"n{i}", args, loc=0x1010 + i, base=0x2000,
                                    sema=0x3000 + 2 * i if i % 2 else 0, elfclass=cls, little=le)
                         for i in range(3))
        notes += raw_note(b"GNU\0", b"\1\2\3\4", 1, le)
        out.append(build_elf(ElfSpec(elfclass=cls, little=le, machine=machine, notes=notes)))
    out.append(build_elf(ElfSpec(
        segments=[Seg(0x400000, 0x1000, 0, 4), Seg(0x401000, 0x2000, 0x1000, 5),
                  Seg(0x604000, 0x1000, 0x3000, 6, filesz=0x800)],
        notes=note_bytes("a", "b", "1@%al", loc=0x401100, base=0x700000, sema=0x604010),
        stapsdt_base=0x700100)))
    return out


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One random mutation (or a few stacked ones)."""
    b = bytearray(data)
    for _ in range(rng.choice([1, 1, 1, 2, 3, 8])):
        if not b:
            b = bytearray(rng.randbytes(rng.randint(1, 64)))
            continue
        op = rng.randrange(8)
        pos = rng.randrange(len(b))
        if op == 0:                      # flip a bit
            b[pos] ^= 1 << rng.randrange(8)
        elif op == 1:                    # random byte
            b[pos] = rng.randrange(256)
        elif op == 2:                    # boundary integer, 4 or 8 bytes, either order
            v = rng.choice(BOUNDARY)
            size = rng.choice([4, 8])
            fmt = rng.choice("<>") + ("I" if size == 4 else "Q")
            packed = struct.pack(fmt, v & ((1 << (8 * size)) - 1))
            b[pos:pos + size] = packed
        elif op == 3:                    # truncate
            del b[rng.randrange(len(b)):]
        elif op == 4:                    # delete a slice
            del b[pos:pos + rng.randint(1, 16)]
        elif op == 5:                    # insert random bytes
            b[pos:pos] = rng.randbytes(rng.randint(1, 16))
        elif op == 6:                    # clobber a NUL (strings lose their end)
            z = b.find(b"\0", pos)
            if z >= 0:
                b[z] = rng.randrange(1, 256)
        else:                            # duplicate a slice
            n = rng.randint(1, 64)
            b[pos:pos] = b[pos:pos + n]
    return bytes(b)


#: an input that takes this long to read is a hang in the making (inputs are
#: a few kB; reading one takes about a millisecond)
SLOW_SECONDS = 5.0


def check_one(data: bytes) -> None:
    """Read ``data`` end to end; raise AssertionError on an exception other
    than UsdtNoteError (with the traceback), on an undecodable argument whose
    error is not a UsdtSpecError, or on an input that takes SLOW_SECONDS.
    (An input that never ends is caught by pytest-timeout, stacks dumped.)"""
    t0 = time.monotonic()
    try:
        _read_all(data)
    except UsdtNoteError as exc:
        assert str(exc) and exc.path == "<fuzz>", repr(exc)   # says what and where
    except Exception as exc:  # noqa: BLE001 - this is what the fuzzer looks for
        raise AssertionError(f"{type(exc).__name__} escaped the note parser:\n"
                             f"{traceback.format_exc()}\ninput ({len(data)} bytes): "
                             f"{data[:256].hex()}...") from exc
    took = time.monotonic() - t0
    assert took < SLOW_SECONDS, f"{took:.1f} s to read {len(data)} bytes: {data[:256].hex()}"


def _read_all(data: bytes) -> None:
    """Everything a user can ask of a file's notes."""
    f = UsdtFile.from_bytes(data, "<fuzz>")
    for n in f.iter_notes():
        n.to_dict()
        n.problems()
        for a in n.arguments:
            a.describe()
            if not a.decodable:
                assert isinstance(a.error, UsdtSpecError), repr(a.error)
        try:
            n.offset
        except UsdtNoteError:
            pass
        try:
            n.semaphore_offset
        except UsdtNoteError:
            pass
    f.probes()


def fuzz(seconds: float = 5.0, seed: int = 0, corpus: list[bytes] | None = None,
         max_iterations: int | None = None) -> int:
    """Mutate the corpus for ``seconds``; returns the number of inputs tried."""
    rng = random.Random(seed)
    pool = list(corpus or []) + seed_corpus()
    for d in pool:
        check_one(d)
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline and (max_iterations is None or n < max_iterations):
        data = mutate(rng.choice(pool), rng)
        check_one(data)
        n += 1
        if n % 50 == 0 and len(pool) < 200:
            pool.append(data)           # keep some mutants as new seeds
    return n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("files", nargs="*", help="ELF files to add to the corpus (small ones)")
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    corpus = []
    for path in args.files:
        with open(path, "rb") as f:
            corpus.append(f.read())
    print(f"seed {seed}")
    n = fuzz(args.seconds, seed, corpus)
    print(f"{n} inputs, no unexpected exception")
    return 0


if __name__ == "__main__":
    sys.exit(main())
