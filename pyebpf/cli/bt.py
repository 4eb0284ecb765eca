"""``pyebpf bt``: run a bpftrace program, compiled in pure Python.

``pyebpf bt -e 'PROGRAM'`` or ``pyebpf bt FILE.bt``, with bpftrace's
``-c CMD``, ``-p PID``, ``-f text|json``, ``-l [PATTERN]``, and
``--show-program`` (the generated eBPF; needs no privilege). The output is
bpftrace 0.17's: printf lines as events come, then at exit END's output and
every map. A script error is printed as bpftrace prints it (the line and a
caret) after ``pyebpf bt:``, exit status 1.
"""
from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, TextIO

    from .parser import Subparsers

DESCRIPTION = """\
Run a bpftrace program: probes (BEGIN, END, uprobe, uretprobe, usdt,
tracepoint...), predicates, maps, scratch variables, printf and the
aggregations -- compiled to eBPF in pure Python, no LLVM.  The output is
bpftrace 0.17's: printf lines as events come, then at exit END's output and
every map, printed as bpftrace prints them.
"""

EPILOG = """\
examples:
  pyebpf bt -e 'BEGIN { printf("hello\\n"); exit(); }'
  pyebpf bt -e 'uprobe:./app:work { @calls[arg0] = count(); }' -c './app 100'
  pyebpf bt -e 't:syscalls:sys_enter_openat { printf("%s\\n", str(args->filename)); }'
  pyebpf bt latency.bt -p 1234
  pyebpf bt -e 'uretprobe:libc:malloc { @ = hist(retval); }' --show-program
  pyebpf bt -l 'tracepoint:syscalls:*open*'
  pyebpf bt -e 'uretprobe:libc:pthread_mutex_trylock /retval/ { @f[ustack] = count(); }'
      -c ./app --flamegraph fails.svg      (and --plot FILE.svg for hist/lhist maps)

exit status: 0 ok (also after Ctrl-C: the maps are printed), 1 error (a script
error, printed with the line and a caret as bpftrace prints it; a missing
probe; a verifier rejection; a picture that could not be drawn: its data is
saved as text beside it), 2 usage error, 130 Ctrl-C before attaching.
"""


def register(subparsers: Subparsers) -> None:
    """Add the ``bt`` sub-command to ``subparsers``."""
    from .parser import add_program_command
    p = add_program_command(
        subparsers, "bt", "run a bpftrace program (-e PROGRAM or FILE.bt)", DESCRIPTION, EPILOG,
        cmd_help="run CMD once attached (its pid is cpid); stop when it exits",
        pid_help="attach uprobes/USDT for process PID only; stop when it exits")
    p.add_argument("-f", dest="format", choices=("text", "json"), default="text",
                   help="output format (default: text)")
    p.add_argument("-l", dest="list", action="store_true",
                   help="list the probes matching the program/FILE argument (a pattern) and exit")
    p.add_argument("--show-program", action="store_true",
                   help="print the generated eBPF per probe (with the script lines) and exit")
    p.add_argument("--flamegraph", metavar="FILE.svg",
                   help="at the end, also draw every map keyed by a stack (ustack/kstack; "
                        "other keys become the root frames) as a flame graph; with several "
                        "such maps, FILE-NAME.svg each (.folded and .json also accepted)")
    p.add_argument("--plot", metavar="FILE.svg",
                   help="at the end, also draw every hist/lhist map as a bar chart, one per "
                        "key of a keyed map; several charts: FILE-NAME.svg each")
    p.set_defaults(func=run)


#: the options ``quick_args`` reads: option -> (attribute, takes a value)
_OPTIONS = {"-e": ("program", True), "-c": ("cmd", True), "-p": ("pid", True),
            "-f": ("format", True), "-l": ("list", False),
            "--show-program": ("show_program", False), "--flamegraph": ("flamegraph", True),
            "--plot": ("plot", True)}


def quick_args(argv: list[str]) -> Any:
    """The arguments of ``pyebpf bt`` (``argv`` after ``bt``) as the parser
    :func:`register` declares would give them, read without building that
    parser -- or None, for any command line beyond the plain forms (an
    abbreviated or joined option, ``--``, a value or word starting with
    ``-``, positionals on both sides of an option, a value the option refuses,
    ``-h``): the parser reads those, and prints their errors.  (argparse and
    the building of the parser are a tenth of ``bt``'s start-up.)"""
    from types import SimpleNamespace

    from . import command_line, pid
    values: dict[str, Any] = {"program": None, "cmd": None, "pid": None, "format": "text",
                              "list": False, "show_program": False, "flamegraph": None,
                              "plot": None}
    words: list[str] = []
    words_end = -1                 # index just past the last positional word
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            if words and words_end != i:
                return None        # (positionals around an option: argparse's own rules)
            words.append(arg)
            i = words_end = i + 1
            continue
        option = _OPTIONS.get(arg)
        if option is None:
            return None
        name, takes_value = option
        if not takes_value:
            values[name] = True
            i += 1
            continue
        if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
            return None
        value: Any = argv[i + 1]
        i += 2
        # (each occurrence is checked, as argparse does: a bad -c before a good one is an error)
        if name == "format" and value not in ("text", "json"):
            return None
        try:
            value = command_line(value) if name == "cmd" else pid(value) if name == "pid" \
                else value
        except Exception:          # refused (ArgumentTypeError): the parser says why
            return None
        values[name] = value
    return SimpleNamespace(command="bt", file=words[0] if words else None, params=words[1:],
                           func=run, **values)


def run(args: argparse.Namespace) -> int:
    """``pyebpf bt``: the exit status."""
    if args.list:
        return _list(args.program or args.file, args.pid, getattr(args, "verbose", False))
    from .runner import program_text, target_error
    got = program_text("bt", args)
    if got is None:
        return 2
    text, filename, params = got
    status = target_error("bt", args.pid, args.cmd)
    if status is not None:
        return status
    why = _check_picture_options(args)
    if why:
        print(f"pyebpf bt: error: {why}", file=sys.stderr)
        return 2
    from ..lang.api import compile
    # (a script error is a PyebpfError: reported as 'pyebpf bt: FILE:LINE:COL-END:
    # ERROR: ...', bpftrace's text, then the line and the caret)
    prog = compile(text, filename=filename, pid=args.pid, params=params, command=args.cmd)
    for warning in prog.warnings:
        print(warning, file=sys.stderr)
    if args.show_program:
        sys.stdout.write(prog.show())
        return 0
    return _run(prog, args)


def _list(pattern: str | None, pid: int | None = None, verbose: bool = False) -> int:
    from ..lang.listing import list_probes
    for name in list_probes(pattern, pid=pid, verbose=bool(verbose)):
        print(name)
    return 0


def _run(prog: Any, args: argparse.Namespace) -> int:
    """Attach, print events until a stop condition, then END and the maps."""
    from . import StopSignals
    from .runner import RunGuard

    json_mode = args.format == "json"
    out = sys.stdout
    stops = StopSignals()
    with RunGuard(stops, kill_child=True) as guard:
        child = guard.child = _spawn(args.cmd) if args.cmd else None
        stops.hold()
        run = guard.resource = prog.start(child=child, json=json_mode, release=False)
        n = run.attached_count()
        if json_mode:
            out.write('{"type": "attached_probes", "data": {"probes": %d}}\n' % n)
        else:
            out.write(f"Attaching {n} probe{'s' if n != 1 else ''}...\n")
        out.flush()
        _loop(run, stops, child, args.pid, out)
        run.stop()
        _emit(run.poll(0), out)
        text = run.format_exit()
        out.write(text)
        out.flush()
        return _pictures(run, args)


def _spawn(cmd: list[str]) -> Any:
    """The ``-c`` command, spawned and held (:class:`pyebpf.trace.live.Child`)."""
    from ..trace.live import Child
    return Child(cmd)


def _check_picture_options(args: argparse.Namespace) -> str | None:
    """Why --flamegraph/--plot cannot be written, or None (checked before tracing)."""
    import os
    if getattr(args, "flamegraph", None):
        from ..errors import OptionError
        from ..profile.output import format_of
        try:
            format_of(args.flamegraph)
        except OptionError as exc:
            return f"--flamegraph: {exc}"
    plot = getattr(args, "plot", None)
    if plot and os.path.splitext(plot)[1].lower() != ".svg":
        return f"--plot: {plot}: a chart is an SVG file (FILE.svg)"
    return None


def _pictures(run: Any, args: argparse.Namespace) -> int:
    """Draw what --flamegraph/--plot ask for (after the text); 1 when a
    drawing failed (its data saved as text, said on stderr)."""
    if not (getattr(args, "flamegraph", None) or getattr(args, "plot", None)):
        return 0
    from ..profile.output import ProfileWriteError
    from ..lang import pictures
    status = 0
    for option, draw, what in ((args.flamegraph, pictures.write_flamegraphs, "stack-keyed"),
                               (args.plot, pictures.write_plots, "hist/lhist")):
        if not option:
            continue
        try:
            written = draw(run, option)
        except (ProfileWriteError, OSError) as exc:
            print(f"pyebpf bt: {exc}", file=sys.stderr)
            status = 1
            continue
        if not written:
            print(f"pyebpf bt: {option}: no {what} map to draw", file=sys.stderr)
        for f in written:
            print(f"pyebpf bt: wrote {f}", file=sys.stderr)
    return status


def _loop(run: Any, stops: Any, child: Any, pid: int | None, out: TextIO) -> None:
    """Print events until exit(), the command's or process's end, or a stop signal."""
    watch = None
    if pid is not None:
        from ..trace.live import _ProcessWatch
        watch = _ProcessWatch(pid)
    try:
        try:
            stops.arm()
            if child is not None:
                child.go()
                run.child_started()
            while not run.exited:
                _emit(run.poll(0.1), out)
                if (child is not None and child.poll()) or (watch is not None and watch.poll()):
                    _emit(run.poll(0), out)
                    break
        finally:
            stops.hold()
    except KeyboardInterrupt:
        pass
    finally:
        if watch is not None:
            watch.close()


def _emit(events: Any, out: TextIO) -> None:
    for ev in events:
        if ev.text:
            out.write(ev.text)
        if ev.error:
            sys.stderr.write(ev.error)
    out.flush()

