"""Helpers shared by the USDT tests: synthetic ELF images, readelf parsing,
the files on this machine that carry stapsdt notes, and building the C test
program (tests/usdt/usdt_forms.c) in its variants."""
from __future__ import annotations

import functools
import glob
import os
import pathlib
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass, field

import systools

HERE = pathlib.Path(__file__).resolve().parent
FORMS_C = HERE / "usdt_forms.c"
FORMS_SEMA_C = HERE / "usdt_forms_sema.c"
FORMS_MAIN_C = HERE / "usdt_forms_main.c"

# The files the brief names; each test skips the absent ones with a reason.
KNOWN_FILES = [
    systools.PYTHON,
    systools.LIBPYTHON,
    systools.POSTGRES,
    *systools.JVM_LIBS,
    *sorted(glob.glob("/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.*"))[-1:],
]
SCAN_DIRS = ["/usr/bin", "/usr/lib/gcc"]
JVM_LIBS = systools.JVM_LIBS


# ---------------------------------------------------------------------------
# synthetic ELF images

def note_bytes(provider: str | bytes, name: str | bytes, args: str | bytes, loc: int = 0,
               base: int = 0, sema: int = 0, elfclass: int = 64, little: bool = True,
               ntype: int = 3, owner: bytes = b"stapsdt\0", align: int = 4) -> bytes:
    """One note (header, name, descriptor) as sys/sdt.h lays it out."""
    e = "<" if little else ">"
    enc = (lambda s: s if isinstance(s, bytes) else s.encode())
    a = "Q" if elfclass == 64 else "I"
    desc = struct.pack(e + a * 3, loc, base, sema) + enc(provider) + b"\0" + enc(name) + \
        b"\0" + enc(args) + b"\0"
    return raw_note(owner, desc, ntype, little, align)


def raw_note(owner: bytes, desc: bytes, ntype: int = 3, little: bool = True,
             align: int = 4, namesz: int | None = None, descsz: int | None = None) -> bytes:
    e = "<" if little else ">"
    pad = (lambda b: b + b"\0" * (-len(b) % align))
    hdr = struct.pack(e + "III", len(owner) if namesz is None else namesz,
                      len(desc) if descsz is None else descsz, ntype)
    return hdr + pad(owner) + pad(desc)


@dataclass
class Seg:
    vaddr: int
    memsz: int
    offset: int
    flags: int  # 1 X, 2 W, 4 R
    filesz: int | None = None


@dataclass
class ElfSpec:
    elfclass: int = 64
    little: bool = True
    machine: int = 62          # EM_X86_64
    etype: int = 3             # ET_DYN
    segments: list[Seg] = field(default_factory=lambda: [
        Seg(0, 0x1000, 0, 4), Seg(0x1000, 0x1000, 0x1000, 5), Seg(0x3000, 0x1000, 0x2000, 6)])
    notes: bytes = b""
    note_align: int = 4
    note_type: int = 7         # SHT_NOTE
    stapsdt_base: int | None = 0x2000
    extra_note_sections: list[bytes] = field(default_factory=list)


def build_elf(spec: ElfSpec) -> bytes:
    """A minimal but well-formed ELF image: program headers, .shstrtab,
    .note.stapsdt (plus extra ones), optional .stapsdt.base."""
    e = "<" if spec.little else ">"
    is64 = spec.elfclass == 64
    ehsize = 64 if is64 else 52
    phentsize = 56 if is64 else 32
    shentsize = 64 if is64 else 40
    names = b"\0.shstrtab\0.note.stapsdt\0.stapsdt.base\0"
    n_shstr, n_note, n_base = 1, names.index(b".note.stapsdt"), names.index(b".stapsdt.base")
    body = bytearray()
    off = ehsize + phentsize * len(spec.segments)
    sections = []  # (name, type, flags, addr, offset, size, align)
    shstr_off = off
    body += names
    sections.append((n_shstr, 3, 0, 0, shstr_off, len(names), 1))
    for data in [spec.notes, *spec.extra_note_sections]:
        while (off + len(body)) % 8:
            body += b"\0"
        note_off = off + len(body)
        body += data
        sections.append((n_note, spec.note_type, 0, 0, note_off, len(data), spec.note_align))
    if spec.stapsdt_base is not None:
        base_off = off + len(body)
        body += b"\0"
        sections.append((n_base, 1, 2, spec.stapsdt_base, base_off, 1, 1))
    while (off + len(body)) % 8:
        body += b"\0"
    shoff = off + len(body)
    ident = b"\x7fELF" + bytes([2 if is64 else 1, 1 if spec.little else 2, 1, 0]) + b"\0" * 8
    if is64:
        eh = ident + struct.pack(e + "HHIQQQIHHHHHH", spec.etype, spec.machine, 1, 0, ehsize,
                                 shoff, 0, ehsize, phentsize, len(spec.segments), shentsize,
                                 len(sections) + 1, 1)
    else:
        eh = ident + struct.pack(e + "HHIIIIIHHHHHH", spec.etype, spec.machine, 1, 0, ehsize,
                                 shoff, 0, ehsize, phentsize, len(spec.segments), shentsize,
                                 len(sections) + 1, 1)
    ph = b""
    for s in spec.segments:
        filesz = s.memsz if s.filesz is None else s.filesz
        if is64:
            ph += struct.pack(e + "IIQQQQQQ", 1, s.flags, s.offset, s.vaddr, s.vaddr, filesz,
                              s.memsz, 0x1000)
        else:
            ph += struct.pack(e + "IIIIIIII", 1, s.offset, s.vaddr, s.vaddr, filesz, s.memsz,
                              s.flags, 0x1000)
    sh = b"\0" * shentsize
    for name, typ, flags, addr, soff, size, align in sections:
        if is64:
            sh += struct.pack(e + "IIQQQQIIQQ", name, typ, flags, addr, soff, size, 0, 0, align, 0)
        else:
            sh += struct.pack(e + "IIIIIIIIII", name, typ, flags, addr, soff, size, 0, 0, align, 0)
    return eh + ph + bytes(body) + sh


# ---------------------------------------------------------------------------
# readelf

@dataclass(frozen=True)
class ReadelfNote:
    provider: str
    name: str
    location: int
    base: int
    semaphore: int
    args: str


def readelf_notes(path: str) -> list[ReadelfNote]:
    """The stapsdt notes as ``readelf -n -W`` prints them."""
    out = subprocess.run(["readelf", "-n", "-W", path], capture_output=True, check=True,
                         env={**os.environ, "LC_ALL": "C"}).stdout.decode("utf-8", "replace")
    notes = []
    cur: dict = {}
    for line in out.splitlines():
        if "NT_STAPSDT" in line:
            cur = {}
        if "Provider: " in line:
            cur["provider"] = line.split("Provider: ", 1)[1]
        elif line.lstrip().startswith("Name: ") and "provider" in cur:
            cur["name"] = line.lstrip()[len("Name: "):]
        elif line.lstrip().startswith("Location: "):
            m = re.match(r"Location: (0x[0-9a-f]+), Base: (0x[0-9a-f]+), "
                         r"Semaphore: (0x[0-9a-f]+)", line.strip())
            assert m, line
            cur["location"], cur["base"], cur["semaphore"] = (int(g, 16) for g in m.groups())
        elif line.lstrip().startswith("Arguments:"):
            rest = line.split("Arguments:", 1)[1]
            cur["args"] = rest[1:] if rest.startswith(" ") else rest
            notes.append(ReadelfNote(**cur))
            cur = {}
    return notes


def has_readelf() -> bool:
    return shutil.which("readelf") is not None


@functools.lru_cache(maxsize=None)
def scanned_files() -> tuple[str, ...]:
    """Every ELF file under SCAN_DIRS with a .note.stapsdt section (found by
    reading the section names with pyelftools, independently of pyebpf)."""
    from elftools.elf.elffile import ELFFile
    found = []
    for top in SCAN_DIRS:
        for root, _dirs, files in os.walk(top):
            for fn in files:
                p = os.path.join(root, fn)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                try:
                    with open(p, "rb") as f:
                        if f.read(4) != b"\x7fELF":
                            continue
                        f.seek(0)
                        elf = ELFFile(f)
                        if elf.get_section_by_name(".note.stapsdt") is not None:
                            found.append(p)
                except Exception:  # noqa: BLE001 - a scan of foreign files
                    continue
    return tuple(sorted(found))


def all_note_files() -> list[str]:
    """KNOWN_FILES (present or not) plus the scanned ones, deduplicated."""
    out = list(KNOWN_FILES)
    for p in scanned_files():
        if p not in out and os.path.realpath(p) not in {os.path.realpath(q) for q in out
                                                        if os.path.exists(q)}:
            out.append(p)
    return out


# ---------------------------------------------------------------------------
# the C test program

#: build variants: name -> (compiler, flags, shared library?)
VARIANTS = {
    "gcc-O0": ("gcc", ["-O0"], False),
    "gcc-O2": ("gcc", ["-O2"], False),
    "gcc-O2-nopie": ("gcc", ["-O2", "-fno-pie", "-no-pie"], False),
    "gcc-O0-nopie": ("gcc", ["-O0", "-fno-pie", "-no-pie"], False),
    "gcc-O2-shared": ("gcc", ["-O2", "-fPIC", "-shared", "-DUSDT_FORMS_LIB"], True),
    "clang-O0": ("clang", ["-O0"], False),
    "clang-O2": ("clang", ["-O2"], False),
    "clang-O2-shared": ("clang", ["-O2", "-fPIC", "-shared", "-DUSDT_FORMS_LIB"], True),
}


def build_forms(variant: str, outdir: pathlib.Path) -> pathlib.Path:
    """Compile usdt_forms in ``variant`` into ``outdir``; returns the binary
    (or libusdt_forms-<variant>.so).  Raises RuntimeError with the compiler's
    output on failure."""
    cc, flags, shared = VARIANTS[variant]
    if shutil.which(cc) is None:
        raise FileNotFoundError(cc)
    out = outdir / (f"libusdt_forms-{variant}.so" if shared else f"usdt_forms-{variant}")
    cmd = [cc, "-g", "-Wall", *flags, "-o", str(out), str(FORMS_C), str(FORMS_SEMA_C)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return out


def expected_table() -> dict[str, list[tuple[int, bool, bool]]]:
    """The EXPECTED table of usdt_forms.c: probe -> [(size, signed, float)]."""
    text = FORMS_C.read_text()
    block = text.split(" * EXPECTED (", 1)[1].split("*/", 1)[0]
    table = {}
    for line in block.splitlines():
        m = re.match(r"\s*\*\s+(\w+):\s+(.*)$", line)
        if not m:
            continue
        items = []
        for tok in m.group(2).split():
            fm = re.fullmatch(r"(-?)(\d+)(f?)", tok)
            assert fm, (line, tok)
            items.append((int(fm.group(2)), fm.group(1) == "-", fm.group(3) == "f"))
        table[m.group(1)] = items
    return table
