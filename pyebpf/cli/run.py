"""``pyebpf run FILE.s|NAME``: load, attach and run a program written in text
assembly with a header -- a file, or one of the ready programs of asm/ that
come with pyebpf (``pyebpf run --list``)."""
from __future__ import annotations

import argparse
import os
import sys
import time

from . import command_line, pid, positive_int, seconds

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..session.base import Session

from .parser import Subparsers, add_command   # (Subparsers: at run time too, for the docs)

DESCRIPTION = """\
Load a program written in text assembly (llvm dialect) whose header declares
its maps, its attach point(s) and its output -- the files of asm/ -- then
attach it, print its events as they come, and its maps at the end (bpftrace's
format, or JSON lines).  'pyebpf run FILE --info' describes a file.

PROGRAM is a file, or the name of a ready program that comes with pyebpf
(the files of asm/: 'pyebpf run opensnoop'); 'pyebpf run --list' lists them.

header lines (see asm/README.md):
  # pyebpf: description TEXT
  # pyebpf: param NAME[=DEFAULT] HELP        ${NAME} in the file; -D NAME=VALUE
  # pyebpf: map NAME TYPE key=T value=T entries=N show=count|hist|lhist:LO:HI:STEP
  # pyebpf: output MAP fields=NAME:T,... format="printf format"
  # pyebpf: program NAME attach=PROBE [type=TYPE]   (then its instructions)

A file whose header declares maps but no 'program ... attach=' line is one
program of --type TYPE (xdp, socket_filter, sched_cls...): it is loaded with
its maps, run with BPF_PROG_TEST_RUN on the packet --test-run HEX (default
14 zero bytes; --repeat N times), and r0, the events of its output map and
its show= maps are printed.
"""

EPILOG = """\
examples:
  pyebpf run --list
  pyebpf run count_calls -D BINARY=./app -D FUNC=work -c './app 100'
  pyebpf run latency_hist -D BINARY=./app -D FUNC=slow -p 1234 -d 10
  pyebpf run opensnoop --json
  pyebpf run execsnoop --info
  pyebpf run ./my_program.s -d 5
  pyebpf run ./count_packets.s --type xdp --test-run '00 11 22' --repeat 100

exit status: 0 ok (also after Ctrl-C: the maps are printed), 1 error (file,
verifier, attach; or a map that could not be formatted, printed raw instead),
2 usage error, 130 Ctrl-C before the programs were attached.  A verifier
rejection's full log goes to --log FILE or to a new /tmp/pyebpf-verifier-*.log
(the message gives its path).
"""


def register(subparsers: Subparsers) -> None:
    """Add the ``run`` sub-command to ``subparsers``."""
    p = add_command(subparsers, "run",
                    "load and run a ready program (asm/) or a file of text assembly",
                    DESCRIPTION, EPILOG)
    p.add_argument("file", metavar="PROGRAM", nargs="?",
                   help="a program file (FILE.s), or the name of a ready program (see --list)")
    p.add_argument("--list", action="store_true",
                   help="list the ready programs that come with pyebpf, and exit")
    p.add_argument("-D", "--define", action="append", default=[], metavar="NAME=VALUE",
                   help="set a parameter of the file (its ${NAME} placeholders)")
    p.add_argument("-p", "--pid", type=pid, metavar="PID",
                   help="the process to trace (${PID}; uprobes attach for it); stop when it exits")
    p.add_argument("-c", "--command", dest="cmd", metavar="CMD", type=command_line,
                   help="start CMD once attached, trace it (${PID}), stop when it exits")
    p.add_argument("--unsafe", action="store_true",
                   help="attach uprobes even where no instruction start is proven")
    p.add_argument("-d", "--duration", type=seconds, metavar="S", help="stop after S seconds")
    p.add_argument("-n", "--max-events", type=positive_int, metavar="N",
                   help="stop after N events")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--info", action="store_true", help="describe the file (parameters, maps, programs) and exit")
    p.add_argument("--log", metavar="FILE",
                   help="where to write the verifier's log if it rejects a program "
                        "(default: a new /tmp/pyebpf-verifier-*.log, whose path is printed)")
    p.add_argument("-q", "--quiet", action="store_true", help="no status lines on stderr")
    p.add_argument("--type", "-t", dest="prog_type", metavar="TYPE",
                   help="a file of maps and code without an attach= line: its program type "
                        "(xdp, socket_filter...); it is test-run, not attached")
    p.add_argument("--test-run", metavar="HEX", default=None,
                   help="with --type: the packet to run it on (hex bytes, zero-padded to 14)")
    p.add_argument("--repeat", type=positive_int, default=None, metavar="N",
                   help="with --type: run it N times")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``pyebpf run``: describe, list or run a program (see the module docs); the exit status."""
    from ..session import asmfile
    from ..text.lexer import read_source
    from .runner import target_error

    if args.list:
        print(list_programs())
        return 0
    if args.file is None:
        print("pyebpf run: error: a PROGRAM is required: a file, or the name of a ready "
              "program ('pyebpf run --list' lists them)", file=sys.stderr)
        return 2
    status = target_error("run", args.pid, args.cmd)
    if status is not None:
        return status
    values = {}
    for d in args.define:
        name, eq, value = d.partition("=")
        if not eq or not name:
            print(f"pyebpf run: error: -D {d!r}: expected NAME=VALUE", file=sys.stderr)
            return 2
        values[name] = value
    t0 = time.perf_counter()
    path = resolve_program(args.file)
    if args.prog_type is not None:
        return test_run(args, path, values)
    if args.test_run is not None or args.repeat is not None:
        from ..errors import OptionError
        raise OptionError("--test-run and --repeat run a program of --type TYPE (a file "
                          "without attach= lines): give --type too")
    af = asmfile.parse_asm_file(read_source(path), path)
    if args.info:
        print(af.info())
        return 0
    from .runner import RunOptions, run_session

    def loaded(pid: int | None) -> Session:
        return asmfile.AsmSession(af, values, pid, unsafe=args.unsafe, attach=False)

    def attached(session: Session) -> str:
        n = len(session.links)
        return f"Attached {n} program{'s' if n != 1 else ''} of {args.file}"
    opts = RunOptions(command="run", cmd=args.cmd, pid=args.pid, json_mode=args.json,
                      duration=args.duration, max_events=args.max_events, quiet=args.quiet)
    return run_session(loaded, opts, attached, t0)


def test_run(args: argparse.Namespace, path: str, values: dict[str, str]) -> int:
    """``pyebpf run FILE --type TYPE``: a file whose header declares maps (and
    no ``program ... attach=`` line) loaded whole as one program of TYPE, run
    with BPF_PROG_TEST_RUN, then r0, the output map's events and the
    ``show=`` maps printed as at the end of a run (bpftrace's format, or JSON
    lines)."""
    import json

    from ..errors import OptionError
    from ..loader import load, prog_type_of
    from ..text import assemble
    from ..text.lexer import read_source
    from ..session import asmfile
    from .load import packet

    refused = [flag for flag, given in (("-p", args.pid), ("-c", args.cmd),
                                        ("-d", args.duration), ("-n", args.max_events))
               if given is not None]
    if refused:
        raise OptionError(f"--type runs the program once with BPF_PROG_TEST_RUN, not on a "
                          f"probe: {', '.join(refused)} {'does' if len(refused) == 1 else 'do'} not apply")
    text = read_source(path)
    af = asmfile.parse_asm_file(text, path, need_program=False)
    if af.programs:
        raise OptionError(f"{path}: its header attaches its programs (line "
                          f"{af.programs[0].line}); --type is for a file without attach= "
                          f"lines (a program line takes type=TYPE)")
    ptype = prog_type_of(args.prog_type)
    data = packet(args.test_run if args.test_run is not None else "")
    with asmfile.AsmSession(af, values, attach=False) as session:
        code = "\n".join(asmfile.substitute(line, session.values, path, n)
                         for n, line in enumerate(text.splitlines(), 1))
        with load(assemble(code, "llvm", path), ptype, maps=session.maps) as prog:
            result = prog.test_run(data, repeat=args.repeat or 1)
        events = session.read_events(0)            # the output map's, if it has one
        if args.json:
            print(json.dumps({"type": "test_run", "retval": result.retval,
                              "repeat": args.repeat or 1}))
            for obj in [e.to_json() for e in events] + session.json_objects():
                print(json.dumps(obj))
        else:
            print(f"r0 = {result.retval} (0x{result.retval:x})"
                  + (f", {args.repeat} runs" if args.repeat else ""))
            print("".join(e.line for e in events), end="")
            shown = session.format_text()
            if shown:
                print("\n" + shown, end="")
    return 0


def programs_dir() -> str | None:
    """The directory of the ready programs: ``pyebpf/programs`` in an install
    (the wheel maps asm/ there), else the ``asm/`` of the checkout this
    ``pyebpf`` package is in; None if neither exists."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    installed = os.path.join(package, "programs")
    if os.path.isdir(installed):
        return installed
    checkout = os.path.dirname(package)
    if os.path.isfile(os.path.join(checkout, "pyproject.toml")):
        asm = os.path.join(checkout, "asm")
        if os.path.isdir(asm):
            return asm
    return None


def bundled_programs() -> dict[str, str]:
    """The ready programs, ``{name: path}`` (the name is the file's without
    ``.s``), sorted by name."""
    directory = programs_dir()
    if directory is None:
        return {}
    return {f[:-2]: os.path.join(directory, f)
            for f in sorted(os.listdir(directory)) if f.endswith(".s")}


def resolve_program(name: str) -> str:
    """The file ``pyebpf run NAME`` loads: ``NAME`` itself if it exists, else
    the ready program of that name (with or without ``.s``; not for a
    path with a ``/``).  Raises :class:`~pyebpf.session.asmfile.AsmFileError`
    naming the ready programs (and the closest ones) otherwise."""
    from ..session.asmfile import AsmFileError

    if os.path.exists(name):
        return name
    programs = bundled_programs()
    stem = name[:-2] if name.endswith(".s") else name
    if "/" not in name and stem in programs:
        return programs[stem]
    if not programs:
        raise AsmFileError("no such file (and no ready programs were found with pyebpf)", name)
    base = os.path.basename(stem)
    if base in programs:
        hint = f"; the ready program of that name is 'pyebpf run {base}'"
    else:
        from ..errors import close_matches
        near = close_matches(base, list(programs))
        hint = f"; did you mean {' or '.join(near)}?" if near else ""
    what = "no such file" if "/" in name else "no such file or ready program"
    raise AsmFileError(f"{what}{hint} (ready programs: "
                       f"{', '.join(programs)}; 'pyebpf run --list' describes them)", name)


def list_programs() -> str:
    """``pyebpf run --list``: each ready program's name and description."""
    from ..session.asmfile import read_asm_file

    programs = bundled_programs()
    if not programs:
        return "no ready programs were found with pyebpf"
    width = max(len(n) for n in programs)
    return "\n".join(f"{n:<{width}}  {read_asm_file(p).description}"
                     for n, p in programs.items())
