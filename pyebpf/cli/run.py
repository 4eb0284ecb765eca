"""``pyebpf run FILE.s``: load, attach and run a program of asm/ (text + header)."""
from __future__ import annotations

import argparse
import sys
import time

from . import command_line, pid, positive_int, process_exists, seconds

DESCRIPTION = """\
Load a program written in text assembly (llvm dialect) whose header declares
its maps, its attach point(s) and its output -- the files of asm/ -- then
attach it, print its events as they come, and its maps at the end (bpftrace's
format, or JSON lines).  'pyebpf run FILE --info' describes a file.

header lines (see asm/README.md):
  # pyebpf: description TEXT
  # pyebpf: param NAME[=DEFAULT] HELP        ${NAME} in the file; -D NAME=VALUE
  # pyebpf: map NAME TYPE key=T value=T entries=N show=count|hist|lhist:LO:HI:STEP
  # pyebpf: output MAP fields=NAME:T,... format="printf format"
  # pyebpf: program NAME attach=PROBE [type=TYPE]   (then its instructions)
"""

EPILOG = """\
examples:
  pyebpf run asm/count_calls.s -D BINARY=./app -D FUNC=work -c './app 100'
  pyebpf run asm/latency_hist.s -D BINARY=./app -D FUNC=slow -p 1234 -d 10
  pyebpf run asm/opensnoop.s --json
  pyebpf run asm/execsnoop.s --info

exit status: 0 ok (also after Ctrl-C: the maps are printed), 1 error (file,
verifier, attach; or a map that could not be formatted, printed raw instead),
2 usage error, 130 Ctrl-C before the programs were attached.  A verifier
rejection's full log goes to --log FILE or to a new /tmp/pyebpf-verifier-*.log
(the message gives its path).
"""


def register(subparsers) -> None:
    p = subparsers.add_parser("run", help="load and run a program of asm/ (text with a header)",
                              description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE.s", help="the program file")
    p.add_argument("-D", "--define", action="append", default=[], metavar="NAME=VALUE",
                   help="set a parameter of the file (its ${NAME} placeholders)")
    p.add_argument("-p", "--pid", type=pid, metavar="PID",
                   help="the process to trace (${PID}; uprobes attach for it); stop when it exits")
    p.add_argument("-c", "--command", dest="cmd", metavar="CMD", type=command_line,
                   help="start CMD once attached, trace it (${PID}), stop when it exits")
    p.add_argument("-d", "--duration", type=seconds, metavar="S", help="stop after S seconds")
    p.add_argument("-n", "--max-events", type=positive_int, metavar="N",
                   help="stop after N events")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--info", action="store_true", help="describe the file (parameters, maps, programs) and exit")
    p.add_argument("--log", metavar="FILE",
                   help="where to write the verifier's log if it rejects a program "
                        "(default: a new /tmp/pyebpf-verifier-*.log, whose path is printed)")
    p.add_argument("-q", "--quiet", action="store_true", help="no status lines on stderr")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..text.lexer import read_source
    from ..trace import asmfile, live

    if args.pid is not None and args.cmd:
        print("pyebpf run: error: -p and -c exclude each other", file=sys.stderr)
        return 2
    if args.pid is not None and not process_exists(args.pid):
        print(f"pyebpf run: no process {args.pid}", file=sys.stderr)
        return 1
    values = {}
    for d in args.define:
        name, eq, value = d.partition("=")
        if not eq or not name:
            print(f"pyebpf run: error: -D {d!r}: expected NAME=VALUE", file=sys.stderr)
            return 2
        values[name] = value
    t0 = time.perf_counter()
    af = asmfile.parse_asm_file(read_source(args.file), args.file)
    if args.info:
        print(af.info())
        return 0
    child = None
    session = None
    restore = live.sigterm_as_interrupt()
    try:
        if args.cmd:
            child = live.Child(args.cmd)
        pid = child.pid if child else args.pid
        session = asmfile.AsmSession(af, values, pid)
        if not args.quiet:
            n = len(session.links)
            print(f"Attached {n} program{'s' if n != 1 else ''} of {args.file} in "
                  f"{(time.perf_counter() - t0) * 1000:.0f} ms. "
                  + ("Running the command." if child else "Hit Ctrl-C to end."),
                  file=sys.stderr, flush=True)
        if child:
            child.go()
        try:
            live.run_loop(session, json_mode=args.json, duration=args.duration,
                          max_events=args.max_events, child=child, pid=args.pid)
        except KeyboardInterrupt:
            pass
        session.detach()
        if child is not None and not child.poll():
            child.kill()
        printed = live.print_final(session, sys.stdout, sys.stderr, args.json, command="run")
        return 0 if printed else 1
    except BaseException:
        if child is not None and child.status is None:
            child.kill()
        raise
    finally:
        restore()
        if session is not None:
            session.close()
        if child is not None:
            child.close()
