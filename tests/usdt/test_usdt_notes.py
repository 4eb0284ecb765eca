"""The note parser on synthetic ELF images (every layout rule, 32-bit and
big-endian files, every malformation) and on objects clang cross-compiles
for other architectures."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from usdt_testlib import ElfSpec, Seg, build_elf, note_bytes, raw_note, readelf_notes

from pyebpf.errors import UsdtError, UsdtNoteError, UsdtSpecError
from pyebpf.usdt import ArgKind, UsdtFile, UsdtProbe, group_probes, host_arch, parse_args

EM_386, EM_PPC, EM_PPC64, EM_S390, EM_ARM, EM_X86_64, EM_AARCH64, EM_RISCV = \
    3, 20, 21, 22, 40, 62, 183, 243


def parse(spec: ElfSpec) -> UsdtFile:
    return UsdtFile.from_bytes(build_elf(spec), "mem.elf")


def one(spec: ElfSpec):
    notes = parse(spec).notes()
    assert len(notes) == 1
    return notes[0]


# ---------------------------------------------------------------------------
# fields, offsets, .stapsdt.base

def test_fields_and_offsets():
    n = one(ElfSpec(notes=note_bytes("prov", "name", "8@%rdi -4@8(%rsp)", loc=0x1010,
                                     base=0x2000, sema=0x3002)))
    assert (n.provider, n.name, n.args) == ("prov", "name", "8@%rdi -4@8(%rsp)")
    assert (n.location, n.base, n.semaphore) == (0x1010, 0x2000, 0x3002)
    assert n.address == 0x1010 and n.offset == 0x1010
    # data segment: vaddr 0x3000 at file offset 0x2000
    assert n.semaphore_address == 0x3002 and n.semaphore_offset == 0x2002
    assert n.probe == "prov:name" and n.index == 0 and n.path == "mem.elf"
    assert n.arch == "x86_64" and n.elf.traceable is (host_arch() == "x86_64")
    assert [a.kind for a in n.arguments] == [ArgKind.REG, ArgKind.DEREF]
    assert n.arg(1).offset == 8 and n.arg_count == 2


def test_vaddr_differs_from_offset_in_each_segment():
    # like an ET_EXEC at 0x400000, or lld's layout, and a data segment whose
    # delta differs from the text segment's (python3.11 has this)
    segs = [Seg(0x400000, 0x1000, 0, 4), Seg(0x401000, 0x2000, 0x1000, 5),
            Seg(0x604cc8, 0x1000, 0x3cc8, 6, filesz=0x800)]
    n = one(ElfSpec(segments=segs, etype=2, stapsdt_base=None,
                    notes=note_bytes("p", "n", "", loc=0x401234, sema=0x604d00)))
    assert n.offset == 0x1234
    assert n.semaphore_offset == 0x3d00
    assert n.arguments == ()


@pytest.mark.parametrize("section_base,note_base,delta", [
    (0x2000, 0x1000, 0x1000),     # prelinked: both non-zero -> adjust
    (0x2000, 0x2000, 0),
    (0, 0x1000, 0),               # section at 0: no adjustment (libbpf fix 69d85c5f)
    (0x2000, 0, 0),               # note base 0: no adjustment
    (None, 0x1000, 0),            # no .stapsdt.base section
])
def test_stapsdt_base_adjustment(section_base, note_base, delta):
    segs = [Seg(0, 0x1000, 0, 4), Seg(0x1000, 0x2000, 0x1000, 5), Seg(0x3000, 0x2000, 0x3000, 6)]
    n = one(ElfSpec(stapsdt_base=section_base, segments=segs,
                    notes=note_bytes("p", "n", "", loc=0x1010, base=note_base, sema=0x3000)))
    assert n.location == 0x1010 and n.base == note_base     # raw values untouched
    assert n.address == 0x1010 + delta
    assert n.semaphore_address == 0x3000 + delta             # moved like everything else
    assert n.offset == 0x1010 + delta


def test_location_must_be_in_an_executable_segment():
    n = one(ElfSpec(notes=note_bytes("p", "n", "", loc=0x0100)))   # in the R segment
    with pytest.raises(UsdtNoteError, match="non-executable segment") as info:
        n.offset  # noqa: B018
    err = info.value
    assert err.path == "mem.elf" and err.note == 0 and err.probe == "p:n"
    assert "probe location 0x100" in str(err)
    n = one(ElfSpec(notes=note_bytes("p", "n", "", loc=0x9000)))
    with pytest.raises(UsdtNoteError, match="in no PT_LOAD segment"):
        n.offset  # noqa: B018
    assert n.problems() and n.to_dict()["offset"] is None


def test_semaphore_must_be_in_a_non_executable_segment():
    n = one(ElfSpec(notes=note_bytes("p", "n", "", loc=0x1010, sema=0x1020)))
    assert n.offset == 0x1010
    with pytest.raises(UsdtNoteError, match="executable segment"):
        n.semaphore_offset  # noqa: B018
    n = one(ElfSpec(notes=note_bytes("p", "n", "", loc=0x1010, sema=0)))
    assert n.semaphore_offset == 0 and n.semaphore_address == 0


def test_relocatable_objects_have_no_offsets():
    n = one(ElfSpec(etype=1, notes=note_bytes("p", "n", "8@%rax")))
    assert not n.elf.traceable and "ET_REL" in n.elf.untraceable_reason
    with pytest.raises(UsdtNoteError, match="relocatable"):
        n.offset  # noqa: B018
    assert n.arguments[0].reg == "rax"


# ---------------------------------------------------------------------------
# classes, byte orders, architectures

@pytest.mark.parametrize("elfclass,little,machine,arch,args,reg", [
    (32, True, EM_386, "i386", "-4@%eax 4@8(%esp)", "eax"),
    (32, False, EM_PPC, "ppc", "8@%r3 4@i5", "r3"),
    (64, False, EM_S390, "s390x", "-4@8(%r15) 8@%r2", "r15"),
    (64, False, EM_AARCH64, "aarch64", "-4@[sp, 8] 8@x0", "sp"),
    (64, True, EM_AARCH64, "aarch64", "-4@[sp, 8] 8@x0", "sp"),
    (32, True, EM_ARM, "arm", "4@[r0, #8] 4@#5", "r0"),
    (32, False, EM_ARM, "arm", "4@[fp, #-8]", "fp"),
    (64, True, EM_RISCV, "riscv64", "8@8(sp) 8@a0", "sp"),
    (32, True, EM_RISCV, "riscv32", "4@8(sp)", "sp"),
    (64, True, EM_PPC64, "ppc64le", "8@0(3)", "r3"),
    (64, False, EM_PPC64, "ppc64", "8@0(3)", "r3"),
    (32, True, EM_X86_64, "x32", "-4@%r8d", "r8"),
])
def test_classes_and_byte_orders(elfclass, little, machine, arch, args, reg):
    big = 0xfedc_ba98 if elfclass == 32 else 0xfedc_ba98_7654_3210
    segs = [Seg(0, 0x1000, 0, 4), Seg(0x1000, 0x1000, 0x1000, 5), Seg(0x3000, 0x1000, 0x2000, 6)]
    f = parse(ElfSpec(elfclass=elfclass, little=little, machine=machine, segments=segs,
                      stapsdt_base=None, notes=note_bytes("p", "n", args, loc=0x1010, base=big, sema=0x3002,
                                       elfclass=elfclass, little=little)
                      + note_bytes("p", "m", "", loc=0x1020, elfclass=elfclass, little=little)))
    notes = f.notes()
    assert [n.name for n in notes] == ["n", "m"]
    n = notes[0]
    assert f.elf.arch == arch and f.elf.elfclass == elfclass and f.elf.little_endian is little
    assert (n.location, n.base, n.semaphore) == (0x1010, big, 0x3002)
    assert n.offset == 0x1010 and n.semaphore_offset == 0x2002
    assert all(a.decodable for a in n.arguments), n.arguments
    assert n.arguments[0].reg == reg and n.arguments[0].arch == arch
    if arch != host_arch() or not little or elfclass == 32:
        assert not f.elf.traceable and f.elf.untraceable_reason
        assert f.elf.untraceable_reason in n.problems()


def test_unknown_machine_keeps_notes_but_not_arguments():
    n = one(ElfSpec(machine=8, notes=note_bytes("p", "n", "8@$4 -4@-8($fp)")))   # MIPS
    assert n.arch == "mips64" and n.args == "8@$4 -4@-8($fp)"
    assert len(n.arguments) == 2 and not any(a.decodable for a in n.arguments)
    with pytest.raises(UsdtSpecError, match="no USDT argument decoder for architecture 'mips64'"):
        n.arg(0)


@pytest.mark.parametrize("elfclass,little,machine,match", [
    (64, False, EM_X86_64, "never big-endian"),
    (64, True, EM_386, "EM_386 with ELFCLASS64"),
    (32, True, EM_S390, "never little-endian"),
])
def test_inconsistent_headers(elfclass, little, machine, match):
    with pytest.raises(UsdtNoteError, match=match):
        parse(ElfSpec(elfclass=elfclass, little=little, machine=machine,
                      notes=note_bytes("p", "n", "", elfclass=elfclass, little=little)))


# ---------------------------------------------------------------------------
# many notes, grouping, laziness

def test_probes_group_locations_in_order():
    notes = (note_bytes("a", "x", "8@%rdi", loc=0x1010, sema=0x3000)
             + note_bytes("a", "y", "", loc=0x1020)
             + raw_note(b"GNU\0", b"\x01\x02\x03\x04", 3)           # not stapsdt: skipped
             + note_bytes("a", "x", "-4@8(%rsp) 8@$1", loc=0x1030, sema=0x3000)
             + note_bytes("a", "x", "8@%rsi", loc=0x1040, sema=0x3004)
             + note_bytes("b", "x", "", loc=0x1050, ntype=4)          # wrong type: skipped
             + note_bytes("b", "z", "", loc=0x1060))
    f = parse(ElfSpec(notes=notes))
    assert [n.index for n in f.notes()] == [0, 1, 2, 3, 4]
    probes = f.probes()
    assert [(p.provider, p.name, len(p)) for p in probes] == [("a", "x", 3), ("a", "y", 1),
                                                               ("b", "z", 1)]
    px = probes[0]
    assert isinstance(px, UsdtProbe) and px.semaphores == (0x3000, 0x3004)
    assert px.arg_count == 2
    assert [a.text if a else None for a in px.arguments(1)] == [None, "8@$1", None]
    assert [n.location for n in px] == [0x1010, 0x1030, 0x1040]
    assert [p.name for p in f.probes(provider="a", name="x*")] == ["x"]
    assert [p.name for p in f.probes(provider="b")] == ["z"]
    assert len(group_probes(f.notes() + f.notes())) == 3


def test_iteration_is_lazy_up_to_a_malformed_note():
    notes = (note_bytes("a", "ok", "") + note_bytes("a", "ok2", "")
             + raw_note(b"stapsdt\0", b"\0" * 10, 3))
    f = parse(ElfSpec(notes=notes))
    it = f.iter_notes()
    assert next(it).name == "ok" and next(it).name == "ok2"
    with pytest.raises(UsdtNoteError, match="descriptor too short"):
        next(it)


def test_several_note_sections_and_8_byte_alignment():
    f = parse(ElfSpec(notes=note_bytes("a", "one", "", align=8), note_align=8,
                      extra_note_sections=[note_bytes("a", "two", "")]))
    assert [(n.name, n.index) for n in f.notes()] == [("one", 0), ("two", 1)]


def test_no_notes():
    f = parse(ElfSpec(notes=b""))
    assert f.notes() == [] and f.probes() == [] and not f.has_notes


# ---------------------------------------------------------------------------
# malformed notes: always UsdtNoteError, naming the file and the note

def _desc(provider=b"p", name=b"n", args=b"", elfclass=64) -> bytes:
    return b"\0" * (3 * (8 if elfclass == 64 else 4)) + provider + b"\0" + name + b"\0" + \
        args + b"\0"


MALFORMED = [
    ("truncated header", b"\x08\0\0\0\x20\0", "truncated note header"),
    ("desc past end", raw_note(b"stapsdt\0", _desc(), 3, descsz=500), "runs past the end"),
    ("name past end", raw_note(b"stapsdt\0", b"", 3, namesz=4000), "runs past the end"),
    ("desc too short", raw_note(b"stapsdt\0", b"\0" * 26, 3), "descriptor too short: 26"),
    ("desc too short 32", raw_note(b"stapsdt\0", b"\0" * 8, 3), "descriptor too short"),
    ("provider no NUL", raw_note(b"stapsdt\0", b"\0" * 24 + b"provider", 3),
     "provider string is not NUL-terminated"),
    ("name no NUL", raw_note(b"stapsdt\0", b"\0" * 24 + b"p\0name", 3),
     "name string is not NUL-terminated"),
    ("args no NUL", raw_note(b"stapsdt\0", b"\0" * 24 + b"p\0n\08@%rax", 3),
     "argument string is not NUL-terminated"),
    ("owner no NUL", raw_note(b"stapsdt", _desc(), 3), "not the NUL-terminated 'stapsdt'"),
    ("empty provider", raw_note(b"stapsdt\0", _desc(provider=b""), 3), "empty provider"),
    ("empty name", raw_note(b"stapsdt\0", _desc(name=b""), 3), "empty probe name"),
    ("not utf8", raw_note(b"stapsdt\0", _desc(name=b"\xff\xfe"), 3), "not UTF-8"),
]


@pytest.mark.parametrize("what,notes,match", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_notes(what, notes, match):
    with pytest.raises(UsdtNoteError, match=match) as info:
        parse(ElfSpec(notes=note_bytes("ok", "first", "") + notes)).notes()
    err = info.value
    assert isinstance(err, UsdtError) and isinstance(err, ValueError)
    assert err.path == "mem.elf"
    assert err.note == 1 and err.offset is not None and "stapsdt note #1" in str(err)


def test_32bit_descriptor_needs_only_4_byte_addresses():
    notes = raw_note(b"stapsdt\0", _desc(elfclass=32), 3)
    assert parse(ElfSpec(elfclass=32, machine=EM_386, notes=notes)).notes()[0].name == "n"
    with pytest.raises(UsdtNoteError, match="descriptor too short"):
        parse(ElfSpec(elfclass=64, notes=raw_note(b"stapsdt\0", b"\0" * 12 + b"p\0n\0\0", 3))
              ).notes()


def test_note_section_of_the_wrong_type():
    with pytest.raises(UsdtNoteError, match="not SHT_NOTE"):
        parse(ElfSpec(note_type=1, notes=note_bytes("p", "n", "")))
    assert parse(ElfSpec(note_type=8, notes=note_bytes("p", "n", ""))).notes() == []  # NOBITS


@pytest.mark.parametrize("data,match", [
    (b"", "bad magic"), (b"MZ\0\0" * 20, "bad magic"), (b"\x7fELF", "not a readable ELF"),
    (b"\x7fELF\x03\x01\x01" + b"\0" * 60, "not a readable ELF"),
])
def test_not_elf(data, match):
    with pytest.raises(UsdtNoteError, match=match):
        UsdtFile.from_bytes(data)


def test_truncated_file():
    data = build_elf(ElfSpec(notes=note_bytes("p", "n", "8@%rax")))
    for cut in (20, 63, 64, 100, len(data) - 70, len(data) - 1):
        with pytest.raises(UsdtNoteError):
            UsdtFile.from_bytes(data[:cut]).notes()


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        UsdtFile(tmp_path / "nope")


def test_to_dict_is_json_ready():
    n = one(ElfSpec(notes=note_bytes("p", "n", "8@%rdi 4@%bad", loc=0x1010, base=0x2000,
                                     sema=0x3002)))
    d = json.loads(json.dumps(n.to_dict()))
    for key in ("path", "provider", "name", "location", "base", "semaphore", "args",
                "arguments", "offset", "semaphore_offset", "errors"):
        assert key in d
    assert d["location"] == 0x1010 and d["semaphore"] == 0x3002 and d["args"] == "8@%rdi 4@%bad"
    assert d["arguments"][0]["reg"] == "rdi" and d["arguments"][1]["kind"] is None
    assert any("argument 1" in e for e in d["errors"])


# ---------------------------------------------------------------------------
# real objects for other architectures (clang cross-compiles sys/sdt.h)

CROSS_SRC = r"""
#include <sys/sdt.h>
struct s { long a; int b; short c; signed char d; double e; float f; };
long g_long = 5; int g_tab[8]; unsigned char g_bytes[8];
__attribute__((noinline)) void f_regs(signed char a, unsigned char b, short c,
    unsigned short d, int e, unsigned int f, long long g, unsigned long long h)
{ STAP_PROBE8(x, regs, a, b, c, d, e, f, g, h); }
__attribute__((noinline)) void f_mem(struct s *p, int i)
{ STAP_PROBE8(x, mem, p->a, p->b, p->c, p->d, p->e, p->f, g_long, g_tab[i]); }
__attribute__((noinline)) void f_const(void)
{ STAP_PROBE4(x, consts, -5, 250, (long long)-5000000000LL, 1.5); }
"""

#: clang target -> (arch, elfclass, little, extra flags).  riscv: clang 14
#: cannot do memory operands there ("nor"), so registers and constants only.
CROSS = {
    "aarch64-linux-gnu": ("aarch64", 64, True, []),
    "aarch64_be-linux-gnu": ("aarch64", 64, False, []),
    "arm-linux-gnueabihf": ("arm", 32, True, []),
    "armeb-linux-gnueabi": ("arm", 32, False, []),
    "riscv64-linux-gnu": ("riscv64", 64, True, ["-DSTAP_SDT_ARG_CONSTRAINT=nr"]),
    "riscv32-linux-gnu": ("riscv32", 32, True, ["-DSTAP_SDT_ARG_CONSTRAINT=nr"]),
    "s390x-linux-gnu": ("s390x", 64, False, []),
    "powerpc64le-linux-gnu": ("ppc64le", 64, True, []),
    "powerpc64-linux-gnu": ("ppc64", 64, False, []),
    "i386-linux-gnu": ("i386", 32, True, []),
    "x86_64-linux-gnux32": ("x32", 32, True, []),
}


@pytest.fixture(scope="module")
def cross_dir(tmp_path_factory):
    if shutil.which("clang") is None:
        pytest.skip("clang is not installed")
    d = tmp_path_factory.mktemp("usdt_cross")
    (d / "x.c").write_text(CROSS_SRC)
    return d


def _sdt_include() -> list[str]:
    import glob
    hits = glob.glob("/usr/include/*/sys/sdt.h") + glob.glob("/usr/include/sys/sdt.h")
    if not hits:
        pytest.skip("sys/sdt.h is not installed (systemtap-sdt-dev)")
    return [f"-I{hits[0].rsplit('/sys/sdt.h', 1)[0]}"]


@pytest.mark.parametrize("target", sorted(CROSS))
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_cross_compiled_objects(cross_dir, target, opt):
    arch, elfclass, little, flags = CROSS[target]
    out = cross_dir / f"{target}{opt}.o"
    r = subprocess.run(["clang", f"--target={target}", opt, "-c", "-ffreestanding",
                        *_sdt_include(), *flags, "-o", str(out), str(cross_dir / "x.c")],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"clang cannot build for {target}: {r.stderr.strip()[:400]}"
    f = UsdtFile(out)
    assert (f.elf.arch, f.elf.elfclass, f.elf.little_endian) == (arch, elfclass, little)
    assert f.elf.elf_type == "ET_REL" and not f.elf.traceable
    theirs = readelf_notes(str(out))
    if arch.startswith("riscv"):
        # RISC-V objects size their notes with ADD32/SUB32 relocations (linker
        # relaxation): unreadable before linking, and we say so.  Decode the
        # argument strings readelf (which applies relocations) shows instead.
        with pytest.raises(UsdtNoteError, match="relocatable object"):
            f.notes()
        args_of = [parse_args(t.args, arch) for t in theirs]
    else:
        notes = f.notes()
        assert [(n.provider, n.name, n.args) for n in notes] == \
            [(t.provider, t.name, t.args) for t in theirs]
        args_of = [n.arguments for n in notes]
    assert [t.name for t in theirs] == ["regs", "mem", "consts"]
    for args in args_of:
        for a in args:
            assert a.decodable, (target, a)
    sizes = [(a.size, a.signed, a.is_float) for a in args_of[0]]
    assert sizes == [(1, True, False), (1, False, False), (2, True, False), (2, False, False),
                     (4, True, False), (4, False, False), (8, True, False), (8, False, False)]
    consts = args_of[2]
    assert consts[0].size == 4 and consts[0].signed and consts[3].is_float
    if consts[0].kind is ArgKind.CONST:
        assert consts[0].value == -5 and consts[1].value == 250
        assert consts[2].value == -5000000000
