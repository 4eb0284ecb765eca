"""``pyebpf explain FILE.s``: load a program with the verifier's full log and
show, beside each instruction and its source line, what the verifier thought
there (see :mod:`pyebpf.explain`)."""
from __future__ import annotations

import argparse
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from . import positive_int
from .parser import Subparsers, add_command   # (Subparsers: at run time too, for the docs)

DESCRIPTION = """\
Load a program written in text assembly with the verifier's full log (log
level 2 and its statistics), then print each instruction under the source
line that emitted it, beside the verifier's register and stack state after
it (one line per distinct state: a loop's body is walked once per
iteration).  For a program the verifier rejects, print its complaint and the
path it walked to the failing instruction -- branch by branch ('from X to
Y'), through subprogram calls -- with the failing instruction marked '-->'
and the state the verifier had before it.

FILE may carry an asm/ header (see 'pyebpf run'): its '# pyebpf: map' lines
create the maps the program refers to, and its 'program ... attach=PROBE'
line, if any, gives the program type.  Needs root (or CAP_BPF) and the kernel.
"""

EPILOG = """\
examples:
  pyebpf explain prog.s --type socket_filter
  pyebpf explain asm/count_calls.s
  pyebpf explain --all --log verifier.log bad.s --type xdp

exit status: 0 accepted, 1 rejected (the explanation is printed, the
verifier's complaint goes to stderr too) or bad input, 2 usage error
"""


def register(subparsers: Subparsers) -> None:
    """Add the ``explain`` sub-command to ``subparsers``."""
    p = add_command(subparsers, "explain",
                    "show the verifier's state at each instruction, or its path to a rejection",
                    DESCRIPTION, EPILOG)
    p.add_argument("file", metavar="FILE", help="text assembly (- for standard input)")
    p.add_argument("--type", "-t", dest="prog_type", metavar="TYPE", default=None,
                   help="program type: socket_filter, xdp, kprobe, uprobe, tracepoint... "
                        "(default: the header's probe, else socket_filter)")
    p.add_argument("--dialect", choices=("llvm", "mnemonic"), default="llvm",
                   help="the text dialect (default: llvm)")
    p.add_argument("--all", action="store_true",
                   help="a rejection: show the whole path (default: its last 200 steps)")
    p.add_argument("--visits", type=positive_int, default=3, metavar="N",
                   help="an accepted program: at most N distinct states per instruction "
                        "(default: 3)")
    p.add_argument("--log", metavar="FILE", help="also write the verifier's raw log to FILE")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``pyebpf explain``: the exit status (see the module docs)."""
    from ..errors import OptionError
    from ..text.lexer import read_source
    from ..loader import prog_type_of

    text = read_source(args.file)
    name = "<stdin>" if args.file == "-" else args.file
    if not text.strip():
        raise OptionError(f"{name}: the file is empty")
    ptype, maps = header_maps(text, name)
    if args.prog_type is not None:
        ptype = args.prog_type
    ptype_num = prog_type_of(ptype or "socket_filter")
    from ..explain import explain
    from ..text import assemble
    program = assemble(text, args.dialect, name)
    try:
        result = explain(program, ptype_num, maps=maps)
    finally:
        for m in maps.values():
            m.close()
    sys.stdout.write(result.text(limit=None if args.all else 200, visits=args.visits))
    sys.stdout.flush()
    if args.log:                       # (after the explanation: a bad path loses nothing)
        with open(args.log, "w", encoding="utf-8") as f:
            f.write(result.log)
    if result.error is not None:
        from . import report
        report("explain", result.error.summary.splitlines()[0])
        return 1
    return 0


def header_maps(text: str, name: str) -> tuple[str | None, dict[str, Any]]:
    """The program type the asm header's probe needs (or None) and the maps its
    ``map`` lines declare (created; the caller closes them)."""
    if "# pyebpf:" not in text:
        return None, {}
    from ..session.asmfile import parse_asm_file
    af = parse_asm_file(text, name, need_program=False)
    ptype = None
    if af.programs:
        pd = af.programs[0]
        ptype = pd.type or pd.attach.partition(":")[0] or None
    maps: dict[str, Any] = {}
    try:
        for d in af.maps.values():
            maps[d.name] = d.spec().create()
    except BaseException:
        for m in maps.values():
            m.close()
        raise
    return ptype, maps
