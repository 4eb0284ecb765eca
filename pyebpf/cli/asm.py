"""``pyebpf asm``: assemble a text file into raw instruction bytes."""
from __future__ import annotations

import argparse
import sys

from .parser import Subparsers   # (at run time too, for documentation tools)

DESCRIPTION = """\
Assemble eBPF text into raw instruction bytes (8-byte little-endian slots,
16 for ld_imm64) -- the format the kernel's BPF_PROG_LOAD takes and
'pyebpf disasm' reads.

dialects:
  llvm      LLVM/kernel pseudo-C, e.g.  r0 = *(u32 *)(r1 + 4) ; if w0 > 5 goto out
            (also accepts llvm-objdump and verifier-log lines pasted as they are)
  mnemonic  bpf_conformance/uBPF syntax, e.g.  ldxw %r0, [%r1+4] ; jgt32 %r0, 5, out

A bpf_conformance test file (*.data) is read through its '-- raw' or '-- asm'
section (mnemonic dialect).

A pasted 'llvm-objdump -d -r' listing assembles to the section's bytes: a
call followed by its R_BPF_64_32 relocation line is the relocated call
(src_reg=1) llvm means.  Without that line, llvm's 'call -1' is refused
('call pc-1' is the relative call, 'call unknown#-1' the helper number).
'pyebpf disasm OBJ.o' listings assemble to the object's code sections.
"""

EPILOG = """\
examples:
  pyebpf asm prog.s -o prog.bin
  echo 'r0 = 0; exit' | pyebpf asm - | xxd
  pyebpf asm --dialect mnemonic test.s -o - | pyebpf disasm -

exit status: 0 ok, 1 bad input (the message names file:line:column), 2 usage error
"""


def register(subparsers: Subparsers) -> None:
    """Add the ``asm`` sub-command to ``subparsers``."""
    p = subparsers.add_parser("asm", help="assemble text into raw eBPF bytes",
                              description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE", help="the source file, or - for standard input")
    p.add_argument("--dialect", choices=("llvm", "mnemonic"), default=None,
                   help="the text dialect (default: llvm; mnemonic for *.data files)")
    p.add_argument("-o", "--output", metavar="OUT", default="-",
                   help="where to write the bytes: a file, or - for standard output "
                        "(the default; refused when it is a terminal)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Assemble ``args.file`` and write the bytes; the exit status."""
    from ..text import assemble, parse_conformance
    from ..text.lexer import read_source

    text = read_source(args.file)
    name = "<stdin>" if args.file == "-" else args.file
    if name.endswith(".data") and "\n-- " in "\n" + text:
        test = parse_conformance(text, name)
        raw = test.raw_bytes()
        data = raw if raw is not None else assemble(test.asm or "", args.dialect or "mnemonic",
                                                    name).encode()
    else:
        data = assemble(text, args.dialect or "llvm", name).encode()
    if args.output == "-":
        out = sys.stdout.buffer
        if out.isatty():
            print("pyebpf asm: refusing to write binary to a terminal; use -o FILE or a pipe",
                  file=sys.stderr)
            return 1
        out.write(data)
        out.flush()
    else:
        with open(args.output, "wb") as f:
            f.write(data)
    return 0
