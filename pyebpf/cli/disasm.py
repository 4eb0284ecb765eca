"""``pyebpf disasm``: disassemble raw eBPF bytes or a section of an ELF object."""
from __future__ import annotations

import argparse
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, BinaryIO

from .parser import Subparsers, add_command   # (Subparsers: at run time too, for the docs)

DESCRIPTION = """\
Disassemble eBPF instructions: raw bytes (8-byte little-endian slots, as
'pyebpf asm' writes them), or a BPF object file such as 'clang -target bpf
-c' produces (FILE or --elf OBJ).

An object is listed as 'llvm-objdump -d -r -S' lists it: every code section
(or --section NAME), its functions and labels from the symbol table, and as
comments its relocations (maps, global data, calls, callbacks, externs and
kfuncs), its CO-RE relocations resolved to member names and its C source
lines from the BTF line info.  --no-annotations leaves plain text to edit.

Jump and call targets get labels (symbol names, or L<slot>, F<slot>) so the
output assembles back to the same bytes with 'pyebpf asm' (an object's code
sections, one after the other); slots that are not valid instructions print
as '.8byte 0x...'.
"""

EPILOG = """\
styles (llvm dialect):
  objdump   as llvm-objdump prints it:   r2 = *(u64 *)(r10 - 8) ; if w5 == 3 goto +1
  verifier  as the kernel verifier log:  r2 = *(u64 *)(r10 -8) ; if w5 == 0x3 goto pc+1

examples:
  pyebpf disasm prog.bin
  pyebpf disasm execsnoop.bpf.o
  pyebpf disasm prog.o --section xdp --style verifier
  pyebpf disasm prog.o --no-annotations > prog.s && pyebpf asm prog.s -o code.bin
  pyebpf disasm --dialect mnemonic --no-labels --index prog.bin
"""


def register(subparsers: Subparsers) -> None:
    """Add the ``disasm`` sub-command to ``subparsers``."""
    p = add_command(subparsers, "disasm", "disassemble raw eBPF bytes or a BPF object file",
                    DESCRIPTION, EPILOG)
    p.add_argument("file", metavar="FILE", nargs="?",
                   help="raw instruction bytes or a BPF object, or - for standard input")
    p.add_argument("--elf", metavar="OBJ", help="read the instructions from this ELF object")
    p.add_argument("--section", metavar="NAME",
                   help="of an object, only this section (default: every code section)")
    p.add_argument("--no-annotations", dest="annotate", action="store_false",
                   help="of an object, only labels and instructions (no relocation, CO-RE or "
                        "source comments, no slot indexes)")
    p.add_argument("--dialect", choices=("llvm", "mnemonic"), default="llvm",
                   help="output dialect (default: llvm)")
    p.add_argument("--style", choices=("objdump", "verifier"), default="objdump",
                   help="llvm dialect spelling (default: objdump)")
    p.add_argument("--no-labels", dest="labels", action="store_false",
                   help="print numeric jump offsets instead of labels")
    p.add_argument("--index", action="store_true", help="prefix each instruction with its slot "
                   "index (an annotated object listing always does)")
    p.set_defaults(func=run)


def elf_section(path: str, section: str | None = None) -> tuple[str, bytes, dict[int, str]]:
    """(name, bytes, relocations) of ``section`` of the ELF object at ``path``,
    or of its first executable section with code.  ``relocations`` maps slot
    indexes to ``"R_BPF_64_64 symbol"`` notes.  A file that is not a whole,
    well-formed ELF object is an :class:`~pyebpf.elf.ElfError`."""
    import struct

    from elftools.common.exceptions import ELFError

    from ..elf import ElfError

    with open(path, "rb") as f:
        try:
            return _read_section(f, path, section)
        except ElfError:
            raise
        except (ELFError, struct.error, ValueError, LookupError, AttributeError,
                TypeError) as exc:
            # pyelftools reads lazily: a truncated or corrupt file fails anywhere
            raise ElfError(f"{path}: a damaged or truncated ELF object ({type(exc).__name__}: "
                           f"{exc or 'malformed'})") from None


def _read_section(f: BinaryIO, path: str, section: str | None
                  ) -> tuple[str, bytes, dict[int, str]]:
    from elftools.common.exceptions import ELFError
    from elftools.elf.constants import SH_FLAGS
    from elftools.elf.elffile import ELFFile
    from elftools.elf.relocation import RelocationSection

    from ..elf import ElfError

    try:
        elf = ELFFile(f)
    except ELFError as exc:
        raise ElfError(f"{path}: not an ELF object ({exc})") from None
    if section is not None:
        sec = elf.get_section_by_name(section)
        if sec is None:
            names = ", ".join(s.name for s in elf.iter_sections() if s.name) or "none"
            raise ElfError(f"{path}: no section {section!r} (sections: {names})")
    else:
        sec = next((s for s in elf.iter_sections()
                    if s["sh_flags"] & SH_FLAGS.SHF_EXECINSTR and s["sh_size"] > 0
                    and s["sh_type"] == "SHT_PROGBITS"), None)
        if sec is None:
            raise ElfError(f"{path}: no executable section with code")
    index = elf.get_section_index(sec.name)
    notes: dict[int, str] = {}
    for rel in elf.iter_sections():
        if not isinstance(rel, RelocationSection) or rel["sh_info"] != index:
            continue
        symtab: Any = elf.get_section(rel["sh_link"])   # (a symbol table)
        for r in rel.iter_relocations():
            sym = symtab.get_symbol(r["r_info_sym"])
            name = sym.name or (elf.get_section(sym["st_shndx"]).name
                                if isinstance(sym["st_shndx"], int) else "?")
            kind = _RELOC_NAMES.get(r["r_info_type"], f"type {r['r_info_type']}")
            notes[r["r_offset"] // 8] = f"{kind} {name}"
    data = sec.data()
    if len(data) != sec["sh_size"] and sec["sh_type"] != "SHT_NOBITS":
        raise ElfError(f"{path}: section {sec.name!r} is cut short ({len(data)} of "
                       f"{sec['sh_size']} bytes: is the file truncated?)")
    return sec.name, data, notes


_RELOC_NAMES = {1: "R_BPF_64_64", 2: "R_BPF_64_ABS64", 3: "R_BPF_64_ABS32", 4: "R_BPF_64_NODYLD32",
                10: "R_BPF_64_32"}


def run(args: argparse.Namespace) -> int:
    """Disassemble the bytes or the ELF object the arguments name; the exit status."""
    from ..text import disassemble

    if args.dialect == "mnemonic" and args.style != "objdump":
        print("pyebpf disasm: --style applies to the llvm dialect only", file=sys.stderr)
        return 2
    if args.elf:
        if args.file:
            print("pyebpf disasm: give either FILE or --elf OBJ, not both", file=sys.stderr)
            return 2
        sys.stdout.write(_object(args, args.elf))
        return 0
    if args.file is None:
        print("pyebpf disasm: give FILE (raw bytes or an object, - for stdin) or --elf OBJ",
              file=sys.stderr)
        return 2
    try:
        data = _read(args.file)
    except OSError as exc:
        if not args.section:
            raise
        data, why = b"", f" ({args.file}: {exc.strerror or exc})"
    else:
        why = f" ({args.file} is not one)"
    if data[:4] == b"\x7fELF":
        sys.stdout.write(_object(args, args.file, data))
        return 0
    if args.section:
        print(f"pyebpf disasm: --section needs --elf OBJ or an ELF object as FILE{why}",
              file=sys.stderr)
        return 2
    sys.stdout.write(disassemble(data, args.dialect, args.style, labels=args.labels,
                                 show_index=args.index))
    return 0


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as f:
        return f.read()


def _object(args: argparse.Namespace, path: str, data: bytes | None = None) -> str:
    """The listing of the object at ``path`` (its bytes ``data`` if read already).
    An ELF file that is not a BPF object (another machine, not relocatable)
    has the raw bytes of one section disassembled, its relocations as comments."""
    from ..objects import ObjectFileError
    from ..objects.listing import disassemble_object
    from ..text import disassemble

    try:
        return disassemble_object("<stdin>" if path == "-" else path, args.section, data=data,
                                  annotate=args.annotate, dialect=args.dialect,
                                  style=args.style, labels=args.labels,
                                  show_index=args.index or args.annotate)
    except ObjectFileError:
        if path == "-":
            raise
    _, code, notes = elf_section(path, args.section)
    return disassemble(code, args.dialect, args.style, labels=args.labels,
                       show_index=args.index, comments=notes)
