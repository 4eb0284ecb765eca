"""``pyebpf bt``: run a bpftrace program, compiled in pure Python.

``pyebpf bt -e 'PROGRAM'``, ``pyebpf bt FILE.bt`` or ``pyebpf bt -`` (the
program on stdin), with bpftrace 0.17's options (``-c CMD``, ``-p PID``,
``-f text|json``, ``-l [PATTERN]``, ``-q``, ``-o FILE``, ``-B``, ``-k``,
``--unsafe``, ``--include``, ``-I``, ``--info``...: see
:mod:`pyebpf.cli.btopts`) and pyebpf's own (``--show-program``, the
generated eBPF, needing no privilege; ``--flamegraph``, ``--plot``). The output is
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

def register(subparsers: Subparsers) -> None:
    """Add the ``bt`` sub-command to ``subparsers``: bpftrace 0.17's options
    (its ``-h`` text is :data:`~pyebpf.cli.btopts.USAGE`) and pyebpf's own."""
    from .. import __version__
    from .btopts import USAGE, command_words
    from .parser import add_program_command
    p = add_program_command(
        subparsers, "bt", "run a bpftrace program (-e PROGRAM or FILE.bt)", "", "",
        cmd_help="run CMD once attached (its pid is cpid); stop when it exits",
        pid_help="attach uprobes/USDT for process PID only; stop when it exits",
        cmd_type=command_words)
    p.help_text = USAGE
    # (values bpftrace checks itself are checked by run, with its messages)
    p.add_argument("-f", dest="format", default="text", help="output format: text, json")
    p.add_argument("-l", dest="list", action="store_true", help="list probes and exit")
    p.add_argument("-q", dest="quiet", action="store_true", help="no 'Attaching' line")
    p.add_argument("-o", dest="output", metavar="FILE", help="write the output to FILE")
    p.add_argument("-v", dest="verbose", action="store_true", help="verbose")
    p.add_argument("-k", dest="helper_check", action="count", default=0,
                   help="warn when helpers fail (-kk: more of them)")
    p.add_argument("-B", dest="buffering", default="line", help="line, full or none")
    p.add_argument("-d", dest="dry_run", action="count", default=0,
                   help="dry run: print the generated eBPF and exit")
    p.add_argument("--unsafe", action="store_true", help="allow unsafe builtins and uprobes")
    p.add_argument("--include", dest="includes", action="append", metavar="FILE",
                   help="#include FILE before the program")
    p.add_argument("-I", dest="include_dirs", action="append", metavar="DIR",
                   help="search DIR for #include files")
    p.add_argument("--info", action="store_true", help="print the kernel's BPF support")
    p.add_argument("-V", "--version", action="version",
                   version=f"pyebpf bt {__version__} (the bpftrace v0.17.0 language)")
    p.add_argument("--usdt-file-activation", dest="usdt_file_activation",
                   action="store_true", help="accepted: semaphores are the kernel's")
    p.add_argument("--no-warnings", dest="no_warnings", action="store_true",
                   help="no -k warnings in the text output")
    p.add_argument("--show-program", action="store_true",
                   help="print the generated eBPF per probe (with the script lines) and exit")
    p.add_argument("--flamegraph", metavar="FILE.svg",
                   help="at the end, also draw every map keyed by a stack (ustack/kstack; "
                        "other keys become the root frames) as a flame graph; with several "
                        "such maps, FILE-NAME.svg each (.folded and .json also accepted)")
    p.add_argument("--no-cache", dest="no_cache", action="store_true",
                   help="compile the program even if the compiled-program cache has it "
                        "(also PYEBPF_NO_CACHE=1); and do not store it there")
    p.add_argument("--plot", metavar="FILE.svg",
                   help="at the end, also draw every hist/lhist map as a bar chart, one per "
                        "key of a keyed map; several charts: FILE-NAME.svg each")
    p.set_defaults(func=run)


#: the options ``quick_args`` reads: option -> (attribute, how: "flag", "value",
#: "append" (a value, each added to a list) or a number (a count, added))
_OPTIONS: dict[str, tuple[str, Any]] = {
    "-e": ("program", "value"), "-c": ("cmd", "value"), "-p": ("pid", "value"),
    "-f": ("format", "value"), "-l": ("list", "flag"), "-q": ("quiet", "flag"),
    "-o": ("output", "value"), "-v": ("verbose", "flag"), "-B": ("buffering", "value"),
    "-k": ("helper_check", 1), "-kk": ("helper_check", 2), "-d": ("dry_run", 1),
    "-dd": ("dry_run", 2), "--unsafe": ("unsafe", "flag"), "--include": ("includes", "append"),
    "-I": ("include_dirs", "append"), "--info": ("info", "flag"),
    "--usdt-file-activation": ("usdt_file_activation", "flag"),
    "--no-warnings": ("no_warnings", "flag"), "--show-program": ("show_program", "flag"),
    "--flamegraph": ("flamegraph", "value"), "--plot": ("plot", "value"),
    "--no-cache": ("no_cache", "flag")}


def quick_args(argv: list[str]) -> Any:
    """The arguments of ``pyebpf bt`` (``argv`` after ``bt``) as the parser
    :func:`register` declares would give them, read without building that
    parser -- or None, for any command line beyond the plain forms (an
    abbreviated or joined option, ``--``, a value or word starting with
    ``-``, positionals on both sides of an option, a value refused, ``-h``,
    ``--version``): the parser reads those, and prints their errors.
    (argparse and the building of the parser are a tenth of ``bt``'s start-up.)"""
    from types import SimpleNamespace

    from .btopts import OptionProblem, check_pid, command_words
    values: dict[str, Any] = {"program": None, "cmd": None, "pid": None, "format": "text",
                              "list": False, "quiet": False, "output": None, "verbose": False,
                              "helper_check": 0, "buffering": "line", "dry_run": 0,
                              "unsafe": False, "includes": None, "include_dirs": None,
                              "info": False, "usdt_file_activation": False,
                              "no_warnings": False, "show_program": False, "flamegraph": None,
                              "plot": None, "no_cache": False}
    words: list[str] = []
    words_end = -1                 # index just past the last positional word
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-") or arg == "-":
            if words and words_end != i:
                return None        # (positionals around an option: argparse's own rules)
            words.append(arg)
            i = words_end = i + 1
            continue
        option = _OPTIONS.get(arg)
        if option is None:
            return None
        name, how = option
        if how == "flag":
            values[name] = True
            i += 1
            continue
        if isinstance(how, int):
            values[name] += how
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
            if name == "cmd":
                value = command_words(value)
            elif name == "pid":
                check_pid(value)   # (kept as written, as the parser keeps it)
        except Exception:          # refused (OptionProblem, ArgumentTypeError): the parser says why
            return None
        if how == "append":
            value = (values[name] or []) + [value]
        values[name] = value
    return SimpleNamespace(command="bt", file=words[0] if words else None, params=words[1:],
                           func=run, **values)


def run(args: argparse.Namespace) -> int:
    """``pyebpf bt``: the exit status."""
    from .btopts import OptionProblem, check_buffering, check_format
    from .runner import bpftrace_error, program_target, program_text, target_error
    try:
        check_format(args.format)
        check_buffering(args.buffering)
    except OptionProblem as exc:
        bpftrace_error("bt", str(exc))
        return 2
    if args.info:
        from .btopts import info_text
        sys.stdout.write(info_text())
        return 0
    if args.list:
        return _list(args.program or args.file, args.pid, getattr(args, "verbose", False))
    status = program_target("bt", args, exists=False)     # (-p read first, as bpftrace)
    if status is not None:
        return status
    got = program_text("bt", args)
    if isinstance(got, int):
        return got
    text, filename, params = got
    status = target_error("bt", args.pid, args.cmd)
    if status is not None:
        return status
    why = _check_picture_options(args)
    if why:
        print(f"pyebpf bt: error: {why}", file=sys.stderr)
        return 2
    prog: Any = None
    key = None
    user_probes = _user_probes(text)
    if _cacheable(args, text):
        if user_probes and not _primed:   # (the kernel's first-uprobe wait: see _prime)
            _prime()
        from ..lang.fastpath import cached_program
        prog, key = cached_program(text, filename, params, args.unsafe)
    if prog is None:
        from ..lang.api import compile
        # (a script error is a PyebpfError: reported as 'pyebpf bt: FILE:LINE:COL-END:
        # ERROR: ...', bpftrace's text, then the line and the caret)
        prog = compile(text, filename=filename, pid=args.pid, params=params, unsafe=args.unsafe,
                       command=args.cmd, includes=args.includes or (),
                       include_dirs=args.include_dirs or (), helper_check=args.helper_check)
    else:
        key = None                   # (found there: nothing to store)
        user_probes = False          # (primed already)
    if not args.no_warnings:
        for warning in prog.warnings:
            print(warning, file=sys.stderr)
    if args.show_program or args.dry_run:
        sys.stdout.write(prog.show())
        return 0
    out = _output(args.output)
    if out is None:
        return 1
    try:
        return _run(prog, args, out, key, user_probes)
    finally:
        if out is not sys.stdout:
            out.close()


def _output(path: str | None) -> TextIO | None:
    """Where the program's output goes: ``-o FILE`` (created or emptied),
    else stdout; None when FILE cannot be opened (bpftrace's error printed)."""
    if path is None:
        return sys.stdout
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as exc:
        from .runner import bpftrace_error
        bpftrace_error("bt", f'Failed to open output file: "{path}": {exc.strerror}')
        return None


def _list(pattern: str | None, pid: int | None = None, verbose: bool = False) -> int:
    from ..lang.listing import list_probes
    for name in list_probes(pattern, pid=pid, verbose=bool(verbose)):
        print(name)
    return 0


def _cacheable(args: argparse.Namespace, text: str) -> bool:
    """Whether the compiled-program cache may hold this run's program (see
    :mod:`pyebpf.lang.btcache`): not with ``-c``/``-p`` (the probes depend
    on the process), headers, ``-k``, ``-v``, pictures, nor a program that
    reads the start time (``elapsed``) or a cgroup's id (``cgroupid``: a
    cgroup made again has another)."""
    from ..lang.btcache import disabled
    return not (disabled(getattr(args, "no_cache", False)) or args.cmd or args.pid is not None
                or args.includes or args.include_dirs or "#" in text or args.helper_check
                or args.verbose or args.show_program or args.dry_run
                or getattr(args, "flamegraph", None) or getattr(args, "plot", None)
                or "elapsed" in text or "cgroupid" in text)


def _user_probes(text: str) -> bool:
    """Whether the program may have uprobes or USDT probes (a quick look at
    its text: a false yes costs a primer, ~0.2 ms)."""
    return any(word in text for word in ("uprobe", "uretprobe", "usdt", "u:", "U:"))


#: the primer was started (by :func:`prime_early`, from the command line's entry)
_primed = False


def prime_early(argv: list[str]) -> None:
    """Called by :func:`pyebpf.cli.entry` for ``pyebpf bt ARGS`` before
    anything else: when ``argv`` (ARGS) looks like a program with uprobes,
    start the primer (see :func:`_prime`) now -- the earlier, the less of
    its wait is left at the attach. (A program in a file is primed by
    :func:`run`, once read.)"""
    if any(_user_probes(arg) for arg in argv):
        _prime()


def _prime() -> None:
    """Start the primer of the kernel's first-uprobe wait (~15 ms), to
    overlap it with the imports, the maps' creation and the programs'
    loading (:func:`pyebpf.kernel.bare.prime_uprobes`)."""
    global _primed
    _primed = True
    from ..kernel.bare import prime_uprobes
    prime_uprobes()


def _run(prog: Any, args: argparse.Namespace, out: TextIO,
         cache_key: tuple[Any, ...] | None = None, user_probes: bool = False) -> int:
    """Attach, print events until a stop condition, then END and the maps;
    the compiled program stored in the cache under ``cache_key`` once
    started (when it can be). ``user_probes``: the program may attach
    uprobes, and the kernel's first-uprobe wait is to be primed before its
    start."""
    import os

    from . import StopSignals
    from .runner import RunGuard

    json_mode = args.format == "json"
    flush = args.buffering != "full"
    stops = StopSignals()
    maps_now = _MapsRequest()
    with maps_now, RunGuard(stops, kill_child=True) as guard:
        child = guard.child = _spawn(args.cmd) if args.cmd else None
        stops.hold()

        # bpftrace's order: BEGIN runs before the other probes are attached
        # (its events come first in the ring), then every probe is attached,
        # and only then the 'Attaching' line, the test suite's signal and
        # BEGIN's events: a workload started on that line is traced
        if user_probes:
            _prime()             # (a compiled program's: the compiling took longer than the wait)
        run = guard.resource = prog.start(child=child, json=json_mode, release=False)
        run.show_warnings = not args.no_warnings
        if not args.quiet:
            n = run.attached_count()
            out.write('{"type": "attached_probes", "data": {"probes": %d}}\n' % n
                      if json_mode else f"Attaching {n} probe{'s' if n != 1 else ''}...\n")
            out.flush()
        from . import started
        started()                               # (the collector back on: see pyebpf.cli)
        if args.verbose:
            _verbose(run)
        if os.environ.get(NOTIFY_ATTACHED):     # bpftrace's signal to its test suite
            sys.stdout.flush()
            print(NOTIFY_ATTACHED, file=sys.stderr, flush=True)
        _emit(run.poll(0), out, flush)
        if cache_key is not None:
            from ..lang import btcache
            entry = btcache.entry_of(run, prog.warnings)
            if entry is not None:
                btcache.store(cache_key, entry)
        _loop(run, stops, child, args.pid, out, flush, maps_now)
        run.stop(discard=stops.requested)      # (a stop signal: the backlog is not run)
        _emit(run.poll(0), out, True)
        text = run.format_exit()
        if out is not sys.stdout and text.startswith("\n\n"):
            sys.stdout.write("\n\n")     # (bpftrace too: the maps in the file, these not)
            text = text[2:]
        out.write(text)
        out.flush()
        sys.stdout.flush()
        return _pictures(run, args)


#: the environment variable whose name bpftrace prints (on stderr) once its
#: probes are attached, when it is set: its test suite waits for that line
NOTIFY_ATTACHED = "__BPFTRACE_NOTIFY_PROBES_ATTACHED"


def _verbose(run: Any) -> None:
    """``-v``: each probe's program, on stderr."""
    for plan, loaded in zip(run.unit.probes, run.loaded):
        print(f"Attached {plan.name}: program id {loaded.info().id}, "
              f"{len(loaded.insns)} instructions", file=sys.stderr)
    sys.stderr.flush()


def _spawn(cmd: list[str]) -> Any:
    """The ``-c`` command, spawned and held (:class:`pyebpf.session.live.Child`)."""
    from ..session.live import Child
    return Child(cmd)


def _check_picture_options(args: argparse.Namespace) -> str | None:
    """Why --flamegraph/--plot cannot be written, or None (checked before tracing)."""
    import os
    if getattr(args, "flamegraph", None):
        from ..errors import OptionError
        from ..draw.output import format_of
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
    from ..draw.output import ProfileWriteError
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


def _signal_module() -> Any:
    """The signal module's C part (``signal`` itself imports enum: ~3 ms
    of every start, see ``pyebpf.cli``)."""
    try:
        import _signal  # type: ignore[import-not-found]  # (CPython's C module)
        return _signal
    except ImportError:
        import signal
        return signal


class _MapsRequest:
    """SIGUSR1 while ``pyebpf bt`` runs: print every map and go on, as
    bpftrace does (the signal's default action would end the process).
    A context manager: the handler is set on entry, the old one put back on
    exit; :meth:`take` says whether a request came since the last call."""

    def __init__(self) -> None:
        self.requested = False
        self._old: Any = None

    def __enter__(self) -> _MapsRequest:
        signal = _signal_module()
        self._old = signal.signal(signal.SIGUSR1, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        signal = _signal_module()
        signal.signal(signal.SIGUSR1, self._old)

    def _handler(self, signum: int, frame: Any) -> None:
        self.requested = True

    def take(self) -> bool:
        """True once per request (the maps are printed from the loop, not
        from the handler, between two events)."""
        got, self.requested = self.requested, False
        return got


def _loop(run: Any, stops: Any, child: Any, pid: int | None, out: TextIO,
          flush: bool = True, maps_now: _MapsRequest | None = None) -> None:
    """Print events until exit(), the command's or process's end, or a stop
    signal; the maps too on SIGUSR1 (``maps_now``)."""
    watch = None
    if pid is not None:
        from ..session.live import _ProcessWatch
        watch = _ProcessWatch(pid)

    def events() -> None:
        while not run.exited:
            _emit(run.poll(0.1), out, flush)
            if maps_now is not None and maps_now.take():
                out.write(run.format_maps())
                out.flush()
            if (child is not None and child.poll()) or (watch is not None and watch.poll()):
                _emit(run.poll(0), out, flush)
                return

    try:
        stops.run(events, child, run.child_started)
    finally:
        if watch is not None:
            watch.close()


def _emit(events: Any, out: TextIO, flush: bool = True) -> None:
    for ev in events:
        if ev.text:
            out.write(ev.text)
        if ev.error:
            sys.stderr.write(ev.error)
    if flush:
        out.flush()

