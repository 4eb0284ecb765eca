"""``pyebpf load``: load a text program into the kernel, test-run it, and show
what the kernel made of it (the rewritten instructions, the JIT's code)."""
from __future__ import annotations

import argparse
import sys

from .parser import Subparsers, add_command   # (Subparsers: at run time too, for the docs)

DESCRIPTION = """\
Load FILE, a program in text assembly, into the kernel as a program of
--type (the verifier checks it), print what was loaded, then as asked:
run it with BPF_PROG_TEST_RUN on the packet --test-run HEX (zero-padded to
14 bytes, the least XDP and socket programs take; --repeat N
times: the kernel's average time per run is printed), print the
instructions as the kernel rewrote them (--xlated: map addresses filled
in, helpers inlined) and the JIT's machine code (--jited).  The program is
unloaded when the command ends.

FILE needs no header; '# pyebpf: map' header lines (see 'pyebpf run')
create the maps the code names.  Needs root (or CAP_BPF) and the kernel.
"""

EPILOG = """\
examples:
  echo 'r0 = 2; exit' > pass.s; pyebpf load pass.s --type xdp --test-run '00 11 22'
  pyebpf load prog.s --type socket_filter --xlated --jited
  pyebpf load count.s --type xdp --test-run '' --repeat 1000

exit status: 0 loaded, 1 rejected by the verifier or bad input, 2 usage error
"""


def register(subparsers: Subparsers) -> None:
    """Add the ``load`` sub-command to ``subparsers``."""
    p = add_command(subparsers, "load", "load a text program into the kernel, test-run it, "
                    "show its rewritten and JIT code", DESCRIPTION, EPILOG)
    p.add_argument("file", metavar="FILE", help="text assembly (- for standard input)")
    p.add_argument("--type", "-t", dest="prog_type", metavar="TYPE", default="socket_filter",
                   help="program type: socket_filter (default), xdp, sched_cls, "
                        "kprobe, tracepoint...")
    p.add_argument("--dialect", choices=("llvm", "mnemonic"), default=None,
                   help="the text dialect (default: detected, '%%r1' means mnemonic)")
    p.add_argument("--test-run", metavar="HEX", default=None,
                   help="run the program on this packet (hex bytes; shorter than an "
                        "Ethernet header's 14, it is zero-padded to 14) and print r0")
    p.add_argument("--repeat", type=_positive, default=None, metavar="N",
                   help="with --test-run: run it N times (the time printed is the average)")
    p.add_argument("--xlated", action="store_true",
                   help="print the instructions as the kernel holds them after its rewrites")
    p.add_argument("--jited", action="store_true", help="print the JIT's machine code")
    p.set_defaults(func=run)


def _positive(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive count")
    return value


def run(args: argparse.Namespace) -> int:
    """``pyebpf load``: the exit status."""
    from ..errors import OptionError
    from ..loader import load, prog_type_of
    from ..text import assemble
    from ..text.lexer import read_source
    from .explain import header_maps

    if args.repeat is not None and args.test_run is None:
        raise OptionError("--repeat counts the runs of --test-run: give --test-run HEX too")
    data = packet(args.test_run) if args.test_run is not None else None
    text = read_source(args.file)
    name = "<stdin>" if args.file == "-" else args.file
    if not text.strip():
        raise OptionError(f"{name}: the file is empty")
    ptype = prog_type_of(args.prog_type)
    dialect = args.dialect or ("mnemonic" if "%r" in text else "llvm")
    program = assemble(text, dialect, name)
    _, maps = header_maps(text, name)
    try:
        with load(program, ptype, maps=maps) as prog:
            insns = prog.xlated()
            jited = prog.jited()
            print(f"loaded {name} as {args.prog_type}: {len(program.finalize())} instructions, "
                  f"{len(insns)} after the kernel's rewrites, {len(jited)} bytes of "
                  f"machine code")
            if data is not None:
                result = prog.test_run(data, repeat=args.repeat or 1)
                print(f"test run: r0 = {result.retval} (0x{result.retval:x})"
                      + (f", {result.duration_ns} ns per run (average of {args.repeat})"
                         if args.repeat else ""))
            if args.xlated:
                print("xlated (as the kernel holds it):")
                sys.stdout.write(_indent(prog.xlated_text()))
            if args.jited:
                print("jited (the JIT's machine code):")
                sys.stdout.write(_indent(prog.jited_asm()))
    finally:
        for m in maps.values():
            m.close()
    return 0


def packet(text: str) -> bytes:
    """The bytes of ``--test-run HEX``, zero-padded to an Ethernet header's 14."""
    from ..errors import OptionError
    cleaned = "".join(text.split())
    try:
        return bytes.fromhex(cleaned).ljust(14, b"\0")
    except ValueError:
        raise OptionError(f"--test-run {text!r}: expected hex bytes, e.g. '00 11 22'") from None


def _indent(text: str) -> str:
    return "".join(f"    {line}\n" for line in text.splitlines())
