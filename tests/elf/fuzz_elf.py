"""Fuzzer for :mod:`pyebpf.elf`.

Mutates real ELF files (bytes flipped, header and table fields set to
boundary values, files truncated) and reads each mutant with every public
reader of :class:`pyebpf.elf.ElfFile` -- headers, sections, segments and the
address <-> offset maps, symbols and their lookups, the build id, the
``.eh_frame`` functions, instruction starts and probe resolution -- and
checks that what comes out is a result or :class:`pyebpf.elf.ElfError`,
never another exception.

    python3 tests/elf/fuzz_elf.py --seconds 60 [--seed N] [FILE ...]

The test suite runs :func:`fuzz` for a few seconds with a fixed seed.
"""
from __future__ import annotations

import argparse
import os
import random
import struct
import sys
import tempfile
import time
import traceback

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))

from pyebpf.elf import ElfError, ElfFile, parse_eh_frame, relocations  # noqa: E402

BOUNDARY = [0, 1, 2, 3, 4, 7, 8, 12, 16, 23, 24, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000,
            0x7fffffff, 0x80000000, 0xffffffff, 2**63 - 1, 2**63, 2**64 - 1]

# field offsets (64-bit little-endian): (offset, size) in the ELF header and
# in one section / program header
_EHDR_FIELDS = [(16, 2), (18, 2), (24, 8), (32, 8), (40, 8), (54, 2), (56, 2), (58, 2),
                (60, 2), (62, 2)]
_SHDR_FIELDS = [(0, 4), (4, 4), (8, 8), (16, 8), (24, 8), (32, 8), (40, 4), (44, 4),
                (56, 8)]
_PHDR_FIELDS = [(0, 4), (4, 4), (8, 8), (16, 8), (32, 8), (40, 8)]


def _tables(data: bytes) -> tuple[list[int], list[int], dict[str, tuple[int, int]]]:
    """Offsets of the section and program headers of a 64-bit LE image and
    ``{section name: (offset, size)}`` (empty where the image is not one)."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return [], [], {}
    phoff, shoff = struct.unpack_from("<QQ", data, 32)
    phnum, shnum, shstrndx = struct.unpack_from("<H", data, 56)[0], \
        *struct.unpack_from("<HH", data, 60)
    phdrs = [phoff + 56 * i for i in range(phnum) if phoff + 56 * (i + 1) <= len(data)]
    shdrs = [shoff + 64 * i for i in range(shnum) if shoff + 64 * (i + 1) <= len(data)]
    sections: dict[str, tuple[int, int]] = {}
    if shstrndx < len(shdrs):
        str_off, str_size = struct.unpack_from("<QQ", data, shdrs[shstrndx] + 24)
        names = data[str_off:str_off + str_size]
        for h in shdrs:
            name_off, = struct.unpack_from("<I", data, h)
            off, size = struct.unpack_from("<QQ", data, h + 24)
            end = names.find(b"\0", name_off)
            if end > 0:
                sections[names[name_off:end].decode("latin-1")] = (off, size)
    return phdrs, shdrs, sections


def _set(b: bytearray, pos: int, size: int, value: int) -> None:
    if 0 <= pos and pos + size <= len(b):
        b[pos:pos + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One random mutation (or a few stacked ones) of an ELF image."""
    b = bytearray(data)
    for _ in range(rng.choice([1, 1, 1, 2, 3, 6])):
        if not b:
            b = bytearray(rng.randbytes(rng.randint(1, 64)))
            continue
        phdrs, shdrs, sections = _tables(bytes(b))
        op = rng.randrange(10)
        if op == 0 and len(b) >= 64:                      # an ELF header field
            pos, size = rng.choice(_EHDR_FIELDS)
            _set(b, pos, size, rng.choice(BOUNDARY + [rng.randrange(len(b) + 1)]))
        elif op in (1, 2) and shdrs:                      # a section header field
            pos, size = rng.choice(_SHDR_FIELDS)
            value = rng.choice(BOUNDARY + [rng.randrange(len(b) + 1), rng.randrange(len(shdrs))])
            _set(b, rng.choice(shdrs) + pos, size, value)
        elif op == 3 and phdrs:                           # a program header field
            pos, size = rng.choice(_PHDR_FIELDS)
            _set(b, rng.choice(phdrs) + pos, size, rng.choice(BOUNDARY))
        elif op == 4 and sections:                        # bytes inside an interesting section
            name = rng.choice([n for n in (".eh_frame", ".note.gnu.build-id", ".dynsym",
                                           ".symtab", ".gnu.version_d", ".gnu.version_r",
                                           ".gnu.version", ".text", ".strtab") if n in sections]
                              or list(sections))
            off, size = sections[name]
            if size and off + size <= len(b):
                pos = off + rng.randrange(size)
                if rng.random() < 0.5:
                    _set(b, pos, rng.choice([1, 2, 4, 8]), rng.choice(BOUNDARY))
                else:
                    b[pos] ^= 1 << rng.randrange(8)
        elif op == 5:                                     # truncate
            del b[rng.randrange(len(b)):]
        elif op == 6:                                     # flip a bit anywhere
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op == 7:                                     # a boundary integer anywhere
            _set(b, rng.randrange(len(b)), rng.choice([4, 8]), rng.choice(BOUNDARY))
        elif op == 8:                                     # delete a slice
            pos = rng.randrange(len(b))
            del b[pos:pos + rng.randint(1, 64)]
        else:                                             # random bytes
            pos = rng.randrange(len(b))
            b[pos:pos + 8] = rng.randbytes(8)
    return bytes(b)


def _calls(ef: ElfFile, rng: random.Random):
    """Every public reader of ``ef``, as zero-argument callables."""
    yield lambda: (ef.type, ef.machine, ef.elfclass, ef.little_endian, ef.entry,
                   ef.is_shared, repr(ef))
    for sec in ef.sections[:64]:
        yield lambda sec=sec: ef.section_data(sec)
        yield lambda sec=sec: ef.section(sec.name)
    yield lambda: ef.build_id
    for seg in ef.segments[:16]:
        for v in (seg.vaddr, seg.vaddr + seg.filesz - 1, seg.vaddr + seg.memsz):
            yield lambda v=v: ef.segment_for_address(v)
            yield lambda v=v: ef.address_to_offset(v)
            yield lambda v=v: ef.read(v, 64)
        for o in (seg.offset, seg.offset + seg.filesz // 2):
            yield lambda o=o: ef.offset_to_address(o, executable=True)
            yield lambda o=o: ef.location_at_offset(o)
        yield lambda seg=seg: str(seg)
    yield ef.symbols
    yield lambda: relocations(ef)
    yield ef.eh_frame_functions
    yield ef.known_instruction_starts
    syms = []
    try:
        syms = ef.symbols()
    except ElfError:
        pass
    for sym in rng.sample(syms, min(len(syms), 6)):
        yield lambda sym=sym: ef.find_symbols(sym.versioned_name)
        yield lambda sym=sym: ef.symbol(sym.name)
        yield lambda sym=sym: ef.symbolize(sym.address + rng.randrange(max(sym.size, 1)))
        yield lambda sym=sym: ef.function_at(sym.address + 1)
        yield lambda sym=sym: ef.resolve(sym.versioned_name)
        yield lambda sym=sym: ef.resolve(f"{sym.name}+{rng.randrange(1, 64)}")
        yield lambda sym=sym: ef.instruction_boundaries(sym)
        yield lambda sym=sym: str(sym)
    yield lambda: ef.symbol("no_such_symbol_here")
    for seg in [s for s in ef.segments if s.executable][:4]:
        for _ in range(6):
            v = seg.vaddr + rng.randrange(max(1, min(seg.filesz, 1 << 20)))
            yield lambda v=v: ef.check_instruction_address(v)
            yield lambda v=v: ef.resolve(hex(v))
    sec = ef.section(".eh_frame")
    if sec is not None and sec.size < 1 << 22:
        def direct() -> None:
            data = ef.section_data(sec)
            parse_eh_frame(data, sec.addr, address_size=ef.elfclass // 8,
                           little_endian=ef.little_endian)
        yield direct


def check_one(data: bytes, path: str, seed: int = 0) -> None:
    """Write ``data`` to ``path`` and read it with every reader; raise
    AssertionError (with the traceback) for any exception but ElfError."""
    with open(path, "wb") as f:
        f.write(data)
    rng = random.Random(seed)
    try:
        try:
            ef = ElfFile(path)
        except ElfError:
            return
        for call in _calls(ef, rng):
            try:
                call()
            except ElfError:
                pass
    except Exception as exc:  # noqa: BLE001 - this is what the fuzzer looks for
        raise AssertionError(f"{type(exc).__name__} escaped pyebpf.elf:\n"
                             f"{traceback.format_exc()}\ninput: {len(data)} bytes, "
                             f"seed {seed}") from exc


def fuzz(corpus: list[bytes], seconds: float = 5.0, seed: int = 0,
         max_iterations: int | None = None, workdir: str | None = None) -> int:
    """Mutate the corpus for ``seconds``; returns the number of inputs tried."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = os.path.join(tmp, "mutant")
        for d in corpus:
            check_one(d, path)
        deadline = time.monotonic() + seconds
        n = 0
        while time.monotonic() < deadline and (max_iterations is None or n < max_iterations):
            data = mutate(rng.choice(corpus), rng)
            check_one(data, path, rng.randrange(2**32))
            n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("files", nargs="+", help="ELF files to mutate (small ones are faster)")
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    corpus = []
    for path in args.files:
        with open(path, "rb") as f:
            corpus.append(f.read())
    print(f"seed {seed}")
    n = fuzz(corpus, args.seconds, seed)
    print(f"{n} inputs, no foreign exception")
    return 0


if __name__ == "__main__":
    sys.exit(main())
