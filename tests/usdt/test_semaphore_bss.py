"""One meaning of vaddr -> file offset (issue 13 §2): the note reader and
pyebpf.elf agree on a semaphore in ``.bss`` (a segment whose p_filesz <
p_memsz), and the kernel really updates such a semaphore through the offset
they give.

The rule (pyebpf/elf/headers.py): a semaphore (the uprobe ``ref_ctr_offset``)
may lie in the zero-filled tail of the last page the file maps; past that
page it is anonymous memory the kernel never reaches, which is refused."""
from __future__ import annotations

import functools

import pytest

from pyebpf.elf import ElfError, ElfFile, ElfWriter
from pyebpf.elf import layouts as L
from pyebpf.elf.writer import pack_note
from pyebpf.errors import UsdtNoteError
from pyebpf.usdt import Provider, UsdtFile
from pyebpf.usdt import provider as provider_mod

IN_PAGE, PAST_PAGE = 0x10, 0x2000        # semaphore offsets into .bss


def _image() -> tuple[bytes, int]:
    """An ET_DYN with a probe whose semaphores live in .bss: one in the page
    the file maps, one two pages further (anonymous memory at run time)."""
    w = ElfWriter()
    w.add_section(".stapsdt.base", L.SHT_PROGBITS, L.SHF_ALLOC, data=b"\0")
    w.add_section(".text", L.SHT_PROGBITS, L.SHF_ALLOC | L.SHF_EXECINSTR, data=b"\x90\xc3",
                  align=16)
    w.add_section(".data", L.SHT_PROGBITS, L.SHF_ALLOC | L.SHF_WRITE, data=b"\1" * 24, align=8)
    w.add_section(".bss", L.SHT_NOBITS, L.SHF_ALLOC | L.SHF_WRITE, size=0x3000, align=8)
    w.add_section(".note.stapsdt", L.SHT_NOTE, 0, align=4)
    w.layout()
    text, base, bss = w.address(".text"), w.address(".stapsdt.base"), w.address(".bss")
    addr = L.layout("Addr")
    notes = b""
    for name, sema in (("near", bss + IN_PAGE), ("far", bss + PAST_PAGE)):
        desc = addr.pack(text) + addr.pack(base) + addr.pack(sema) + b"p\0" + \
            name.encode() + b"\0\0"
        notes += pack_note(b"stapsdt\0", 3, desc)
    w.set_data(".note.stapsdt", notes)
    return w.build(), bss


def test_both_readers_agree_on_a_semaphore_in_bss():
    data, bss = _image()
    ef = ElfFile.from_bytes(data, "mem.so")
    seg = ef.segments[-1]
    assert seg.filesz < seg.memsz and seg.contains(bss + PAST_PAGE)     # really .bss
    notes = {n.name: n for n in UsdtFile.from_bytes(data, "mem.so").notes()}
    near, far = notes["near"], notes["far"]
    assert not seg.has_address(near.semaphore_address)                  # no file bytes
    # in the page the file maps: both readers give the same offset, the
    # usual arithmetic (what libbpf computes too)
    want = near.semaphore_address - seg.vaddr + seg.offset
    assert near.semaphore_offset == want
    assert ef.address_to_offset(near.semaphore_address, backing="mapping") == want
    # file bytes are another question: the probe location has them, the semaphore not
    assert ef.address_to_offset(near.address) == near.offset
    with pytest.raises(ElfError, match="zero-filled"):
        ef.address_to_offset(near.semaphore_address)
    # past that page: anonymous memory, refused by both (libbpf would hand
    # the kernel an offset it never finds in the process)
    with pytest.raises(UsdtNoteError, match="past the last page mapped"):
        far.semaphore_offset  # noqa: B018
    with pytest.raises(ElfError, match="past the last page mapped"):
        ef.address_to_offset(far.semaphore_address, backing="mapping")
    assert any("past the last page mapped" in p for p in far.problems())


def test_the_rule_is_one_routine():
    """Segment.file_offset is the arithmetic both readers call."""
    data, bss = _image()
    ef = ElfFile.from_bytes(data)
    seg = ef.segments[-1]
    assert seg.file_offset(bss + IN_PAGE) is None
    assert seg.file_offset(bss + IN_PAGE, "mapping") == bss + IN_PAGE - seg.vaddr + seg.offset
    assert seg.file_offset(bss + PAST_PAGE, "mapping") is None
    assert seg.mapped_end % 0x1000 == 0 and seg.vaddr + seg.filesz <= seg.mapped_end


@pytest.mark.kernel
def test_the_kernel_updates_a_semaphore_in_bss(monkeypatch, no_fd_leak):
    """A Provider whose semaphores are in .bss (after .dynamic, in the page the
    file maps): attaching sets the semaphore through the offset the rule
    gives, detaching clears it."""
    monkeypatch.setattr(provider_mod, "build_provider_elf",
                        functools.partial(provider_mod.build_provider_elf,
                                          semaphore_section=".bss"))
    with Provider("bsssema") as app:
        hit = app.probe("hit", int)
        app.load()
        ef = ElfFile(app.path)
        assert ef.section(".bss").type == "SHT_NOBITS" and ef.section(".probes") is None
        u = hit.usdt()
        (n,) = u.locations
        seg = ef.segments[-1]
        assert seg.filesz < seg.memsz and not seg.has_address(n.semaphore_address)
        assert not hit.enabled
        with u.count() as c:
            assert hit.enabled and hit.semaphore == 1
            hit.fire(1)
            hit.fire(2)
            assert c.value == 2
        assert not hit.enabled and hit.semaphore == 0
