"""``pyebpf trace``: bpftrace-style one-liners, generated and run in pure Python."""
from __future__ import annotations

import argparse
import importlib
import sys
import time

from . import command_line, pid, positive_int, process_exists, report, seconds

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..lang.flags import Question
    from ..session.base import Session

from .parser import Subparsers   # (at run time too, for documentation tools)

DESCRIPTION = """\
Trace a probe and count, aggregate or print what happens there -- like a
bpftrace one-liner: the flags become a bpftrace program (--show-program
prints it), compiled in Python (no compiler) and run as 'pyebpf bt' runs
programs, the aggregations computed in the kernel.

probes (bpftrace's syntax):
  uprobe:PATH:SYMBOL         function entry (SYMBOL: name, name+off, 0xADDR or a glob)
  uretprobe:PATH:SYMBOL      function return
  usdt:PATH:[PROVIDER:]NAME  a USDT (sys/sdt.h) probe
  tracepoint:CATEGORY:NAME   a kernel tracepoint
  (PATH: a path, or a name like libc or python3; u: ur: U: t: are accepted)

expressions (for --count KEY, --hist EXPR, --print, --filter):
  arg0..argN     arguments (tracepoints: the fields in order)
  args.NAME      a tracepoint field        retval    return value
  latency        ns from entry to return (attaches the entry and return probes)
  pid tid uid gid cpu nsecs elapsed comm ustack kstack probe func
  pystack        the Python frames of a CPython 3.10-3.13 thread (-p, -c or a
                 probe in a CPython binary names the process to read)
  str(EXPR[,N])  a string in user memory   EXPR / 1000, EXPR % 10, EXPR & 0xff ...
  KEY may list several expressions: --count 'comm, arg0'
  (expressions are the bpftrace language's: C precedence, casts, ternaries...)
"""

EPILOG = """\
examples:
  pyebpf trace 'uprobe:/bin/bash:readline' --count comm
  pyebpf trace 'uprobe:./app:work' --count arg0 -c './app 1000'
  pyebpf trace 'uprobe:libc:malloc' --hist arg0 -p 1234 --duration 10
  pyebpf trace 'uprobe:./app:slow' --hist 'latency / 1000'
  pyebpf trace 'uretprobe:libc:read' --stats retval --by comm
  pyebpf trace 'tracepoint:syscalls:sys_enter_openat' \\
        --print '%-6d %-16s %s' pid comm 'str(args.filename)'
  pyebpf trace 'uprobe:./app:work' --count ustack --json
  pyebpf trace 'uprobe:libpython3.12.so:PyObject_GetIter' --count pystack -p 1234
  pyebpf trace 'uprobe:libc:open' --print pid comm 'str(arg0)'     (a table)
  pyebpf trace 'uprobe:libc:malloc' --sum arg0 --by comm --table
  pyebpf trace 'uprobe:./app:work' --hist arg1 --show-program

output: bpftrace's text (@name[key]: value, histograms with @ bars), or with
--json one JSON object per line: {"type": "event", "probe": ..., "fields":
{...}} per event, then one object per aggregation ({"type": "map" | "hist" |
"stats", "data": {"@name": {key: value}}}), and {"type": "lost", ...} if events
were lost.  One aggregation is named @, several @count, @hist...

stops at Ctrl-C or SIGTERM (printing the aggregations first; Ctrl-C works even
if SIGINT was ignored when pyebpf started), after --duration, after -n events,
or when the -c command / -p process exits.

exit status: 0 ok (also after Ctrl-C: the results are printed), 1 error (bad
probe, expression, kernel refusal, command not found; or a result that could
not be formatted, printed raw instead), 2 usage error, 130 Ctrl-C before the
probes were attached.  A verifier rejection's full log goes to --log FILE or
to a new /tmp/pyebpf-verifier-*.log (the message gives its path).
"""


def register(subparsers: Subparsers) -> None:
    """Add the ``trace`` sub-command to ``subparsers``."""
    p = subparsers.add_parser("trace", help="bpftrace-style one-liners: count, histogram, print",
                              description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("probes", nargs="+", metavar="PROBE", help="one or more probes (see above)")
    a = p.add_argument_group("actions (any number; default: --count probe)")
    a.add_argument("--count", action="append", nargs="?", const="", metavar="KEY",
                   help="count hits, per KEY if given (e.g. arg0, comm, ustack, pystack, "
                        "'comm, arg0')")
    a.add_argument("--hist", action="append", metavar="EXPR",
                   help="log2 histogram of EXPR (e.g. arg1, latency, 'latency / 1000')")
    a.add_argument("--lhist", action="append", nargs=4, metavar=("EXPR", "MIN", "MAX", "STEP"),
                   help="linear histogram of EXPR in [MIN, MAX) by STEP")
    for kind in ("sum", "min", "max", "avg", "stats"):
        a.add_argument(f"--{kind}", action="append", metavar="EXPR",
                       help=f"{kind} of EXPR" if kind != "stats" else
                       "count, average and total of EXPR")
    a.add_argument("--by", metavar="KEY", help="key the --hist/--lhist/--sum/--min/--max/--avg/"
                   "--stats aggregations by KEY")
    a.add_argument("--print", nargs="+", metavar="FMT_OR_FIELD", dest="print_",
                   help="print one line per hit: a printf format (when it contains %%) "
                        "followed by fields, or just fields; name=EXPR names a field in JSON")
    a.add_argument("--filter", action="append", metavar="COND", default=[],
                   help="only when COND holds: 'arg0 > 100', 'comm == \"bash\"' (repeatable: all must hold)")
    o = p.add_argument_group("what to trace and when to stop")
    o.add_argument("-p", "--pid", type=pid, metavar="PID", help="trace only this process; stop when it exits")
    o.add_argument("-c", "--command", dest="cmd", metavar="CMD", type=command_line,
                   help="start CMD (split like a shell would, not run by one) once the probes "
                        "are attached, trace only it, and stop when it exits")
    o.add_argument("--unsafe", action="store_true",
                   help="attach uprobes even where no instruction start is proven")
    o.add_argument("-d", "--duration", type=seconds, metavar="S", help="stop after S seconds")
    o.add_argument("-n", "--max-events", type=positive_int, metavar="N",
                   help="stop after N printed events")
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="one JSON object per line")
    out.add_argument("--table", action="store_true",
                     help="print keyed aggregations as tables (a column per key, rows by "
                          "decreasing value) instead of bpftrace's @name[key]: value")
    out.add_argument("--interval", type=seconds, metavar="S",
                     help="print the aggregations every S seconds while tracing")
    out.add_argument("--clear", action="store_true", help="with --interval: reset them after each print")
    out.add_argument("--strlen", type=positive_int, default=64, metavar="N",
                     help="bytes read by str() (default 64, bpftrace's)")
    out.add_argument("--ringbuf", action="store_true",
                     help="(kept for old command lines: events always go through one BPF "
                          "ring buffer, in order)")
    out.add_argument("--buffer-size", type=positive_int, default=1 << 20, metavar="BYTES",
                     help="bytes of the events' ring buffer (default 1 MiB)")
    out.add_argument("--show-program", action="store_true",
                     help="print the generated eBPF programs (llvm dialect) and exit")
    out.add_argument("--log", metavar="FILE",
                     help="where to write the verifier's log if it rejects a program "
                          "(default: a new /tmp/pyebpf-verifier-*.log, whose path is printed)")
    out.add_argument("-q", "--quiet", action="store_true", help="no status lines on stderr")
    p.set_defaults(func=run)


def _usage(args: argparse.Namespace, msg: str) -> int:
    """Print a usage error; its exit status."""
    print(f"pyebpf trace: error: {msg}", file=sys.stderr)
    return 2


def build_question(args: argparse.Namespace) -> Question:
    """The :class:`~pyebpf.lang.flags.Question` the flags ask."""
    from ..errors import OptionError
    from ..lang.flags import Question
    q = Question(args.probes, filters=args.filter, strlen=args.strlen, pid=args.pid,
                 cpid=bool(args.cmd))
    for key in args.count or []:
        q.add("count", None, key or None)
    by = args.by
    for kind in ("hist", "sum", "min", "max", "avg", "stats"):
        for expr in getattr(args, kind) or []:
            q.add(kind, expr, by)
    for expr, lo, hi, step in args.lhist or []:
        try:
            lo_i, hi_i, step_i = int(lo, 0), int(hi, 0), int(step, 0)
        except ValueError:
            raise OptionError(f"--lhist {expr} {lo} {hi} {step}: MIN, MAX and STEP are "
                              "integers") from None
        q.add("lhist", expr, by, (lo_i, hi_i, step_i))
    if args.print_:
        items = args.print_
        if "%" in items[0]:
            q.print(items[0], items[1:])
        else:
            q.print(None, items)
    return q


def _as_comment(program: str) -> str:
    """The bpftrace program the flags translate to, as comment lines above
    the generated eBPF of ``--show-program``."""
    lines = ["; as a bpftrace program (pyebpf bt -e '...' runs the same):"]
    lines += [f";   {x}" if x else ";" for x in program.rstrip("\n").split("\n")]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """``pyebpf trace``: build the trace, show it or run it; the exit status."""
    if args.pid is not None and args.cmd:
        return _usage(args, "-p and -c exclude each other")
    if args.max_events is not None and not args.print_:
        return _usage(args, "-n/--max-events counts printed events: add --print")
    if args.table and args.json:
        return _usage(args, "--table and --json exclude each other")
    if args.clear and not args.interval:
        return _usage(args, "--clear goes with --interval")
    if args.pid is not None and not process_exists(args.pid):
        print(f"pyebpf trace: no process {args.pid}", file=sys.stderr)
        return 1
    # "Attached ... in N ms" counts from here, after the tracing package (its
    # maps and kernel layers) and its run loop are imported, as it always did
    importlib.import_module("pyebpf.session.live")
    t0 = time.perf_counter()
    try:
        from ..lang.flagsession import FlagTrace
        trace = FlagTrace(build_question(args),
                          ring_size=args.buffer_size if args.buffer_size != 1 << 20 else None,
                          unsafe=args.unsafe, command=args.cmd)
    except ValueError as exc:
        report("trace", str(exc))
        return 1
    if args.show_program:
        print(_as_comment(trace.shown_text()))
        print(trace.show())
        return 0
    from .runner import RunOptions, run_session

    def loaded(pid: int | None) -> Session:
        return trace.start(pid, attach=False)

    def attached(session: Session) -> str:
        n = session.probe_count()
        return f"Attached {n} probe{'s' if n != 1 else ''}"
    opts = RunOptions(command="trace", cmd=args.cmd, pid=args.pid, json_mode=args.json,
                      duration=args.duration, max_events=args.max_events,
                      interval=args.interval, clear=args.clear, table=args.table,
                      quiet=args.quiet)
    return run_session(loaded, opts, attached, t0)
