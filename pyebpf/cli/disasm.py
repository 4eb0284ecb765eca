"""``pyebpf disasm``: disassemble raw eBPF bytes or a section of an ELF object."""
from __future__ import annotations

import argparse
import struct
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..objects.elfobj import ObjElf

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


def elf_section(elf: ObjElf, section: str | None = None) -> tuple[str, bytes, dict[int, str]]:
    """(name, bytes, relocations) of ``section`` of ``elf`` (any ELF file, read
    as :class:`~pyebpf.objects.elfobj.ObjElf` reads BPF objects, with
    ``bpf=False``), or of its first executable section with code.
    ``relocations`` maps slot indexes to ``"R_BPF_64_64 symbol"`` notes.  A
    missing section is an :class:`~pyebpf.objects.ObjectError`."""
    from ..objects import ObjectError, ObjectFileError

    if section is not None:
        sec = elf.section(section)
        if sec is None:
            names = ", ".join(s.name for s in elf.sections if s.name) or "none"
            raise ObjectError(f"{elf.path}: no section {section!r} (sections: {names})")
    else:
        sec = next((s for s in elf.sections if s.is_code and s.size > 0), None)
        if sec is None:
            raise ObjectError(f"{elf.path}: no executable section with code")
    notes: dict[int, str] = {}
    for rel in elf.sections:
        if rel.type not in _REL_SIZES or rel.info != sec.index:
            continue
        size = _REL_SIZES[rel.type]
        symbols = elf.symbols if rel.link < len(elf.sections) and \
            elf.sections[rel.link].type == _SHT_SYMTAB else []
        body = rel.data
        for at in range(0, len(body) - size + 1, size):
            r_offset, r_info = struct.unpack_from("<QQ", body, at)
            symi, kind = r_info >> 32, r_info & 0xFFFFFFFF
            if symi >= len(symbols) and symi:
                raise ObjectFileError(f"{elf.path}: relocation in {rel.name} names symbol "
                                      f"{symi} of {len(symbols)}")
            name = symbols[symi].name if symi else ""
            notes[r_offset // 8] = f"{_RELOC_NAMES.get(kind, f'type {kind}')} {name or '?'}"
    return sec.name, sec.data, notes


#: SHT_REL and SHT_RELA: the size of one entry
_REL_SIZES = {9: 16, 4: 24}
_SHT_SYMTAB = 2
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
    """The listing of the ELF file at ``path`` (its bytes ``data`` if read
    already).  The file is read once, by the reader ``pyebpf object`` uses
    (a damaged file: the same message).  A BPF object is listed whole; another
    ELF file (another machine, not relocatable) has the raw bytes of one
    section disassembled, its relocations as comments."""
    from ..objects.elfobj import ObjElf
    from ..objects.listing import disassemble_object
    from ..text import disassemble

    elf = ObjElf.read("<stdin>" if path == "-" else path, data, bpf=False)
    if elf.is_bpf:
        return disassemble_object(elf.path, args.section, data=elf.data,
                                  annotate=args.annotate, dialect=args.dialect,
                                  style=args.style, labels=args.labels,
                                  show_index=args.index or args.annotate)
    _, code, notes = elf_section(elf, args.section)
    return disassemble(code, args.dialect, args.style, labels=args.labels,
                       show_index=args.index, comments=notes)
