"""``pyebpf disasm``: disassemble raw eBPF bytes or a section of an ELF object."""
from __future__ import annotations

import argparse
import sys

DESCRIPTION = """\
Disassemble eBPF instructions: raw bytes (8-byte little-endian slots, as
'pyebpf asm' writes them), or with --elf a section of an ELF object such as
'clang -target bpf -c' produces.

Jump and call targets get labels (L<slot>, F<slot>) so the output assembles
back to the same bytes with 'pyebpf asm'; slots that are not valid
instructions print as '.8byte 0x...'.
"""

EPILOG = """\
styles (llvm dialect):
  objdump   as llvm-objdump prints it:   r2 = *(u64 *)(r10 - 8) ; if w5 == 3 goto +1
  verifier  as the kernel verifier log:  r2 = *(u64 *)(r10 -8) ; if w5 == 0x3 goto pc+1

examples:
  pyebpf disasm prog.bin
  pyebpf disasm --elf prog.o --section xdp --style verifier
  pyebpf disasm --dialect mnemonic --no-labels --index prog.bin
"""


def register(subparsers) -> None:
    p = subparsers.add_parser("disasm", help="disassemble raw eBPF bytes or an ELF section",
                              description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE", nargs="?",
                   help="raw instruction bytes, or - for standard input")
    p.add_argument("--elf", metavar="OBJ", help="read the instructions from this ELF object")
    p.add_argument("--section", metavar="NAME",
                   help="the ELF section (default: the first executable section with code)")
    p.add_argument("--dialect", choices=("llvm", "mnemonic"), default="llvm",
                   help="output dialect (default: llvm)")
    p.add_argument("--style", choices=("objdump", "verifier"), default="objdump",
                   help="llvm dialect spelling (default: objdump)")
    p.add_argument("--no-labels", dest="labels", action="store_false",
                   help="print numeric jump offsets instead of labels")
    p.add_argument("--index", action="store_true", help="prefix each instruction with its slot index")
    p.set_defaults(func=run)


def elf_section(path: str, section: str | None = None) -> tuple[str, bytes]:
    """(name, bytes) of ``section`` of the ELF object at ``path``, or of its
    first executable section with code."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.constants import SH_FLAGS
    from elftools.elf.elffile import ELFFile

    from ..errors import PyebpfError

    class ElfInputError(PyebpfError, ValueError):
        pass

    with open(path, "rb") as f:
        try:
            elf = ELFFile(f)
        except ELFError as exc:
            raise ElfInputError(f"{path}: not an ELF object ({exc})") from None
        if section is not None:
            sec = elf.get_section_by_name(section)
            if sec is None:
                names = ", ".join(s.name for s in elf.iter_sections() if s.name) or "none"
                raise ElfInputError(f"{path}: no section {section!r} (sections: {names})")
            return sec.name, sec.data()
        for sec in elf.iter_sections():
            if sec["sh_flags"] & SH_FLAGS.SHF_EXECINSTR and sec["sh_size"] > 0 \
                    and sec["sh_type"] == "SHT_PROGBITS":
                return sec.name, sec.data()
        raise ElfInputError(f"{path}: no executable section with code")


def run(args: argparse.Namespace) -> int:
    from ..text import disassemble

    if args.elf:
        if args.file:
            print("pyebpf disasm: give either FILE or --elf OBJ, not both", file=sys.stderr)
            return 2
        _, data = elf_section(args.elf, args.section)
    elif args.file is None:
        print("pyebpf disasm: give FILE (raw bytes, - for stdin) or --elf OBJ", file=sys.stderr)
        return 2
    elif args.section:
        print("pyebpf disasm: --section needs --elf", file=sys.stderr)
        return 2
    elif args.file == "-":
        data = sys.stdin.buffer.read()
    else:
        with open(args.file, "rb") as f:
            data = f.read()
    style = args.style
    if args.dialect == "mnemonic" and style != "objdump":
        print("pyebpf disasm: --style applies to the llvm dialect only", file=sys.stderr)
        return 2
    sys.stdout.write(disassemble(data, args.dialect, style, labels=args.labels,
                                 show_index=args.index))
    return 0
