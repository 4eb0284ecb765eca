"""The ``.eh_frame`` parser of pyebpf.elf: FDE function ranges of real
binaries equal what readelf and pyelftools read; synthetic sections in every
pointer encoding, class and byte order round-trip; bad bytes give ElfError."""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess

import pytest
from systools import PYTHON as SYSTEM_PYTHON
from budget import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from pyebpf.elf import ElfError, ElfFile, open_elf, parse_eh_frame, resolve_library

REAL_FILES = [SYSTEM_PYTHON, resolve_library("libc"), "/lib64/ld-linux-x86-64.so.2"]


def readelf_fdes(path: str) -> list[tuple[int, int]]:
    # (readelf exits 1 on libc for want of its separate debug file; its frames are there)
    out = subprocess.run(["readelf", "--debug-dump=frames", path], capture_output=True,
                         text=True).stdout
    return sorted((int(a, 16), int(b, 16) - int(a, 16))
                  for a, b in re.findall(r"FDE cie=\w+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", out))


@pytest.fixture(scope="module")
def stripped_targets(tmp_path_factory) -> list[str]:
    from attach.conftest import build
    if shutil.which("strip") is None:
        pytest.skip("strip is not installed")
    out = []
    for variant in ("pie", "nopie", "moved"):
        dst = tmp_path_factory.mktemp("eh") / f"target_{variant}.stripped"
        subprocess.run(["strip", "-s", "-o", str(dst), build(variant)], check=True)
        out.append(str(dst))
    return out


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf is not installed")
@pytest.mark.parametrize("path", REAL_FILES)
def test_matches_readelf_on_system_binaries(path):
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed")
    ours = ElfFile(path).eh_frame_functions()
    assert len(ours) > 100
    assert ours == readelf_fdes(path)


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf is not installed")
def test_matches_readelf_on_stripped_builds(stripped_targets):
    for path in stripped_targets:
        ours = ElfFile(path).eh_frame_functions()
        assert ours and ours == readelf_fdes(path)


def test_matches_pyelftools(stripped_targets):
    from elftools.elf.elffile import ELFFile
    for path in stripped_targets + ["/lib64/ld-linux-x86-64.so.2"]:
        if not os.path.exists(path):
            continue
        with open(path, "rb") as fh:
            cfi = ELFFile(fh).get_dwarf_info().EH_CFI_entries()
            theirs = sorted((e.header["initial_location"], e.header["address_range"])
                            for e in cfi if type(e).__name__ == "FDE")
        assert ElfFile(path).eh_frame_functions() == theirs


def test_fde_starts_are_the_function_symbols(stripped_targets):
    """Every function the compiler emitted has an FDE at its symbol's address."""
    from attach.conftest import build
    full = open_elf(build("pie"))
    starts = {s for s, _ in open_elf(stripped_targets[0]).eh_frame_functions()}
    for name in ("target_add", "target_mul", "main"):
        assert full.symbol(name).address in starts


# ------------------------------------------------------------- synthetic
_FORMATS = {0x00: None, 0x01: "uleb", 0x02: "H", 0x03: "I", 0x04: "Q", 0x09: "sleb",
            0x0A: "h", 0x0B: "i", 0x0C: "q"}


def _uleb(v: int) -> bytes:
    out = bytearray()
    while True:
        byte, v = v & 0x7F, v >> 7
        out.append(byte | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _sleb(v: int) -> bytes:
    out = bytearray()
    while True:
        byte, v = v & 0x7F, v >> 7
        done = (v == 0 and not byte & 0x40) or (v == -1 and byte & 0x40)
        out.append(byte | (0 if done else 0x80))
        if done:
            return bytes(out)


def _encode(fmt: int, stored: int, e: str, addr_size: int) -> bytes:
    code = _FORMATS[fmt] or ("Q" if addr_size == 8 else "I")
    if code == "uleb":
        return _uleb(stored)
    if code == "sleb":
        return _sleb(stored)
    return struct.pack(e + code, stored)


def _range_of(fmt: int, addr_size: int) -> tuple[int, int]:
    code = _FORMATS[fmt] or ("Q" if addr_size == 8 else "I")
    if code == "uleb":
        return 0, 2**40
    if code == "sleb":
        return -2**40, 2**40
    bits = 8 * struct.calcsize(code)
    return (-2**(bits - 1), 2**(bits - 1) - 1) if code.islower() else (0, 2**bits - 1)


@st.composite
def eh_frames(draw):
    """``(section bytes, address, address size, little endian, expected FDEs)``."""
    addr_size = draw(st.sampled_from([4, 8]))
    little = draw(st.booleans())
    e = "<" if little else ">"
    base = draw(st.integers(0, 2**(8 * addr_size) - 1))
    mask = 2**(8 * addr_size) - 1
    data = bytearray()
    expected = []
    for _ in range(draw(st.integers(0, 3))):
        fmt = draw(st.sampled_from(sorted(_FORMATS)))
        pcrel = draw(st.booleans())
        enc = fmt | (0x10 if pcrel else 0)
        aug = draw(st.sampled_from(["zR", "zPLR", "zRS", "zLR"]))
        version = draw(st.sampled_from([1, 3]))
        body = bytearray([version]) + aug.encode() + b"\0"
        body += _uleb(1) + _sleb(-8) + (bytes([16]) if version == 1 else _uleb(16))
        augdata = bytearray()
        for ch in aug[1:]:
            if ch == "R":
                augdata.append(enc)
            elif ch == "L":
                augdata.append(0x1B)
            elif ch == "P":
                augdata += bytes([0x00]) + _encode(0, 0x1234, e, addr_size)
        body += _uleb(len(augdata)) + augdata + b"\x0c\x07\x08"      # DW_CFA_def_cfa
        cie_pos = len(data)
        data += struct.pack(e + "II", 4 + len(body), 0) + body
        lo, hi = _range_of(fmt, addr_size)
        for _ in range(draw(st.integers(0, 4))):
            stored = draw(st.integers(max(lo, -2**(8 * addr_size - 1)),
                                      min(hi, 2**(8 * addr_size) - 1)))
            size = draw(st.integers(0, min(hi, 2**16)))
            fde_pos = len(data)
            field = fde_pos + 8
            begin = _encode(fmt, stored, e, addr_size)
            fbody = begin + _encode(fmt, size, e, addr_size)
            if "z" in aug:
                fbody += _uleb(0)
            fbody += b"\x00" * draw(st.integers(0, 5))                  # DW_CFA_nop
            data += struct.pack(e + "II", 4 + len(fbody), field - 4 - cie_pos) + fbody
            start = stored + (base + field if pcrel else 0)
            expected.append((start & mask, size))
        if draw(st.booleans()):
            data += b"\0\0\0\0"                                          # a terminator
    return bytes(data), base, addr_size, little, sorted(expected)


@fuzz_settings(300)
@given(eh_frames())
def test_synthetic_sections_round_trip(case):
    data, base, addr_size, little, expected = case
    assert parse_eh_frame(data, base, address_size=addr_size, little_endian=little) == expected


def test_encodings_not_known_from_the_file_are_skipped():
    cie = bytes([1]) + b"zR\0" + _uleb(1) + _sleb(-8) + bytes([16]) + _uleb(1) + bytes([0x3B])
    fde = struct.pack("<iI", 0x100, 0x10)
    data = struct.pack("<II", 4 + len(cie), 0) + cie
    data += struct.pack("<II", 4 + len(fde), len(data) + 4) + fde
    assert parse_eh_frame(data, 0x1000) == []          # DW_EH_PE_datarel: needs .got


@pytest.mark.parametrize("data", [
    b"\x10\0\0\0" + b"\0" * 8,                          # longer than the section
    b"\xff\xff\xff\xff\x01",                            # a truncated 64-bit length
    struct.pack("<II", 8, 0x1000) + b"\0\0\0\0",        # an FDE pointing before the section
    struct.pack("<II", 5, 0) + b"\x01",                 # a CIE without an augmentation end
    struct.pack("<II", 9, 0) + b"\x01zR\0\x80\x80\x80\x80",   # a LEB128 running off
])
def test_malformed_sections_raise_elf_error(data):
    with pytest.raises(ElfError):
        parse_eh_frame(data, 0x1000)


@fuzz_settings(300)
@given(st.binary(max_size=256), st.integers(0, 2**64 - 1), st.sampled_from([4, 8]),
       st.booleans())
def test_random_bytes_give_fdes_or_elf_error(data, base, addr_size, little):
    try:
        fdes = parse_eh_frame(data, base, address_size=addr_size, little_endian=little)
    except ElfError:
        return
    assert fdes == sorted(fdes)


@fuzz_settings(300)
@given(st.data())
def test_mutated_real_section_gives_fdes_or_elf_error(data):
    ef = open_elf(REAL_FILES[1])
    sec = ef.section(".eh_frame")
    raw = bytearray(ef.section_data(sec)[:4096])
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    try:
        parse_eh_frame(bytes(raw[:cut]), sec.addr)
    except ElfError:
        pass
