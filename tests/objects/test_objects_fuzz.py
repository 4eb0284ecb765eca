"""Damaged objects: opening a truncated or corrupted object raises a
:class:`~pyebpf.errors.PyebpfError` (or succeeds), never another exception."""
from __future__ import annotations

import pytest
from budget import fuzz_settings
from hypothesis import given, strategies as st

from pyebpf.errors import PyebpfError
from pyebpf.objects import BpfObject

_DATA: dict[str, bytes] = {}


@pytest.fixture(scope="module", autouse=True)
def _samples(objects) -> None:
    """The objects' bytes in _DATA (not a test argument: hypothesis would
    print megabytes of it with a failing example)."""
    for name in ("execsnoop", "multi", "uprobe"):
        with open(objects[name], "rb") as fh:
            _DATA[name] = fh.read()


def _open(data: bytes) -> None:
    try:
        obj = BpfObject("<fuzz>", data)
    except PyebpfError:
        return
    obj.needs()
    for name in obj.globals:
        try:
            obj.globals[name]
        except PyebpfError:
            pass
    obj.close()


@fuzz_settings(150)
@given(which=st.sampled_from(["execsnoop", "multi", "uprobe"]), cut=st.floats(0, 1))
def test_truncated(which, cut):
    data = _DATA[which]
    _open(data[:int(len(data) * cut)])


@fuzz_settings(300)
@given(which=st.sampled_from(["execsnoop", "multi", "uprobe"]),
       flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_corrupted(which, flips):
    data = bytearray(_DATA[which])
    for where, value in flips:
        data[min(int(len(data) * where), len(data) - 1)] = value
    _open(bytes(data))


def _shdr_at(data: bytes, name: str) -> int:
    """The file offset of section ``name``'s header."""
    import struct
    from pyebpf.objects.elfobj import ObjElf
    elf = ObjElf(data)
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    return shoff + 64 * elf.section(name).index


def test_huge_bss_is_refused_not_allocated():
    import struct
    from pyebpf.objects import ObjectFileError
    data = bytearray(_DATA["execsnoop"])
    struct.pack_into("<Q", data, _shdr_at(data, ".bss") + 32, 1 << 40)
    with pytest.raises(ObjectFileError, match="claims 1099511627776 bytes of zeros"):
        BpfObject("<bss>", bytes(data))


def test_relocation_to_a_symbol_of_no_section():
    import struct
    from pyebpf.objects.elfobj import ObjElf
    data = bytearray(_DATA["multi"])
    elf = ObjElf(bytes(data))
    symtab = next(s for s in elf.sections if s.type == 2)
    sec = elf.section("tracepoint/syscalls/sys_enter_getppid")
    symi = next(iter(sec.relocs.values()))
    entry = struct.unpack_from("<Q", data, _shdr_at(data, symtab.name) + 24)[0] + 24 * symi
    struct.pack_into("<H", data, entry + 6, 0xFFF1)          # st_shndx = SHN_ABS
    before = BpfObject("<multi>", _DATA["multi"]).needs()[sec.name]["map relocations"]
    obj = BpfObject("<abs>", bytes(data))
    # the relocation site is still counted (needs() reports the section's
    # map relocations as they stand; the bad symbol is refused at load)
    assert before >= 1
    assert obj.needs()[sec.name]["map relocations"] == before
    obj.close()
