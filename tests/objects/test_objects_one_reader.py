"""One reading of an object file, one message: ``pyebpf disasm``, ``pyebpf
object``, :func:`~pyebpf.objects.listing.disassemble_object` and
:func:`~pyebpf.objects.open_object` read a file with the same reader
(:class:`~pyebpf.objects.elfobj.ObjElf`), so a damaged object gets the same
message, naming the file, from each (issue 24, item 14: ``pyebpf disasm``
went on to pyelftools, which said ``Invalid argument`` without the file name,
ran out of memory or failed with an internal error)."""
from __future__ import annotations

import random
import struct

import pytest

from pyebpf.cli import main
from pyebpf.objects import ObjectFileError, open_object
from pyebpf.objects.elfobj import ObjElf
from pyebpf.objects.listing import disassemble_object

_SHDR = 64


def _shoff(data: bytes) -> int:
    return struct.unpack_from("<Q", data, 0x28)[0]


def _put(data: bytes, at: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


def _section_field(data: bytes, index: int, field: int, value: int) -> bytes:
    return _put(data, _shoff(data) + index * _SHDR + field, "<Q", value)


#: name -> (the damage, the message all readers give)
DAMAGE = {
    "table-past-the-end": (lambda d: _put(d, 0x3C, "<H", struct.unpack_from("<H", d, 0x3C)[0] + 50),
                           "the section table runs past the end of the file"),
    "table-offset-huge": (lambda d: _put(d, 0x28, "<Q", 2**64 - 1),
                          "the section table runs past the end of the file"),
    "cut-in-the-table": (lambda d: d[:_shoff(d) + 100],
                         "the section table runs past the end of the file"),
    "entry-size-zero": (lambda d: _put(d, 0x3A, "<H", 0),
                        "the section table runs past the end of the file"),
    # pyelftools: "Invalid argument" (an OSError without the file name)
    "section-offset-2**62": (lambda d: _section_field(d, 2, 24, 1 << 62),
                             "section 2 (.text) runs past the end"),
    # pyelftools: an internal error (ValueError from a seek)
    "section-offset-2**63": (lambda d: _section_field(d, 2, 24, 1 << 63),
                             "section 2 (.text) runs past the end"),
    # pyelftools: "out of memory"
    "section-size-2**62": (lambda d: _section_field(d, 2, 32, 1 << 62),
                           "section 2 (.text) runs past the end"),
    "names-index-out-of-range": (lambda d: _put(d, 0x3E, "<H", 999),
                                 "section-name table index 999 out of range"),
}


def _cli(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    status = main(list(argv))
    return status, capsys.readouterr().err


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_object_gets_one_message_from_every_reader(objects, tmp_path, capsys, damage):
    make, expected = DAMAGE[damage]
    with open(objects["execsnoop"], "rb") as fh:
        bad = make(fh.read())
    path = str(tmp_path / "bad.o")
    with open(path, "wb") as fh:
        fh.write(bad)
    with pytest.raises(ObjectFileError) as info:
        open_object(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and expected in message, message
    with pytest.raises(ObjectFileError) as info:
        disassemble_object(path)
    assert str(info.value) == message
    for argv in (["disasm", path], ["disasm", "--elf", path], ["disasm", path, "--section",
                                                                 ".text"], ["object", path]):
        status, err = _cli(capsys, *argv)
        assert (status, err) == (1, f"pyebpf {argv[0]}: {message}\n"), argv


def test_mutated_section_tables_never_escape_the_reader(objects, tmp_path, capsys):
    """Bounded and seeded: 250 objects with their ELF header or section table
    mutated.  ``pyebpf disasm`` lists each or refuses it with the file's name;
    when the reader refuses an object, disasm and object say the same."""
    with open(objects["execsnoop"], "rb") as fh:
        good = fh.read()
    shoff = _shoff(good)
    rng = random.Random(24)
    path = str(tmp_path / "m.o")
    refused = 0
    for _ in range(250):
        kind = rng.randrange(3)
        if kind == 0:                                  # a header field
            at, fmt = rng.choice([(0x28, "<Q"), (0x3A, "<H"), (0x3C, "<H"), (0x3E, "<H")])
            value = rng.getrandbits(64 if fmt == "<Q" else 16)
            bad = _put(good, at, fmt, value)
        elif kind == 1:                                # cut short
            bad = good[:rng.randrange(shoff, len(good))]
        else:                                          # 8 bytes of the section table
            at = rng.randrange(shoff, len(good) - 8)
            bad = _put(good, at, "<Q", rng.getrandbits(rng.choice((16, 33, 62, 64))))
        with open(path, "wb") as fh:
            fh.write(bad)
        status, err = _cli(capsys, "disasm", path)
        assert status in (0, 1), err
        if status == 0:
            continue
        assert err.startswith(f"pyebpf disasm: {path}: ") and "internal error" not in err, err
        try:
            ObjElf.read(path)
        except ObjectFileError as exc:
            refused += 1
            assert err == f"pyebpf disasm: {exc}\n"
            assert _cli(capsys, "object", path) == (1, f"pyebpf object: {exc}\n")
    assert refused >= 50          # (the mutations reach the reader's checks)
