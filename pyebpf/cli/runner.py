"""The run of ``pyebpf trace`` and ``pyebpf run``: one sequence for both.

:func:`run_session`: start the ``-c`` command (stopped), load the programs,
attach them, print "Attached ...", let the command run, loop (events,
intervals) until a stop condition, print the results, detach, close.

Stopping (:class:`~pyebpf.cli.StopSignals`): Ctrl-C or SIGTERM before
anything is attached ends the command with status 130; from the first
attach on, a stop signal always leads to the results being printed (exit
0), whenever it comes -- during the attaching, the "Attached" line, the
start of the command, the loop -- and a signal during the final printing
cannot cut it.  SIGINT stops a trace even if it was ignored when pyebpf
started (a background job of a script), as bpftrace does; its disposition
is restored afterwards.

When the traced command has exited, the results are final: they are printed
before detaching (the kernel unregisters uprobes synchronously, which can
take a while).  Otherwise (``--duration``, ``-n``, a signal) the probes are
detached first, then the command is stopped, then the results printed.
"""
from __future__ import annotations

import sys
import time

from . import FAILURE, OK, StopSignals, process_exists

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, Callable

    from ..session.base import Session
    from ..session.live import Child

__all__ = ["run_session", "RunOptions", "RunGuard", "program_text", "program_target",
           "target_error", "bpftrace_error"]


def program_text(command: str, args: argparse.Namespace) -> tuple[str, str, list[str]] | int:
    """The program of a bpftrace-language command (``bt``, ``export``):
    ``(text, filename, params)`` from ``-e PROGRAM`` (then a FILE operand is
    the first parameter), from FILE, or from standard input for FILE ``-``;
    else the exit status, the error printed: 2 without a program, 1 when
    FILE does not exist (bpftrace's message)."""
    params = list(args.params)
    if args.program is not None:
        if args.file is not None:
            params.insert(0, args.file)
        return args.program, "stdin", params
    if args.file is None:
        print(f"pyebpf {command}: error: a program is required: -e 'PROGRAM' or FILE.bt "
              f"(see 'pyebpf {command} --help')", file=sys.stderr)
        return 2
    if args.file == "-":
        return sys.stdin.read(), "stdin", params
    try:
        f = open(args.file, encoding="utf-8")
    except FileNotFoundError as exc:
        bpftrace_error(command, f"failed to open file '{args.file}': {exc.strerror}")
        return 1
    with f:
        return f.read(), args.file, params


def bpftrace_error(command: str, message: str) -> None:
    """Print an error bpftrace also reports, in its words: ``ERROR: message``
    for ``bt`` (as bpftrace prints it), ``pyebpf COMMAND: ERROR: message``
    for the other commands."""
    prefix = "" if command == "bt" else f"pyebpf {command}: "
    print(f"{prefix}ERROR: {message}", file=sys.stderr, flush=True)


def program_target(command: str, args: argparse.Namespace, *,
                   exists: bool = True) -> int | None:
    """:func:`target_error` for a bpftrace-language command, whose ``-p`` is
    read here as bpftrace reads it (decimal, in ``[1, 4194304]``, its
    messages): ``args.pid`` becomes the number.  The exit status of a bad
    ``-p``/``-c``, or None."""
    if isinstance(args.pid, str):
        from .btopts import OptionProblem, check_pid
        try:
            args.pid = check_pid(args.pid)
        except OptionProblem as exc:
            bpftrace_error(command, str(exc))
            return 2
    return target_error(command, args.pid, args.cmd, exists=exists)


def target_error(command: str, pid: int | None, cmd: list[str] | None, *,
                 exists: bool = True) -> int | None:
    """The exit status of a bad ``-p``/``-c`` pair (the error printed):
    2 when both are given, 1 when ``-p``'s process does not exist (checked
    only with ``exists``); None when they are fine."""
    if pid is not None and cmd:
        print(f"pyebpf {command}: error: -p and -c exclude each other", file=sys.stderr)
        return 2
    if exists and pid is not None and not process_exists(pid):
        print(f"pyebpf {command}: no process {pid}", file=sys.stderr)
        return 1
    return None


class RunGuard:
    """The teardown of a command's run, as a ``with`` block: on the way out
    the stop signals are restored, ``resource`` (the session, profiler or
    run, when set) closed and ``child`` (the ``-c`` command, when set)
    closed -- killed first if it still runs and the block failed, or always
    with ``kill_child``."""

    def __init__(self, stops: StopSignals, *, kill_child: bool = False) -> None:
        self.stops = stops
        self.kill_child = kill_child
        self.resource: Any = None
        self.child: Child | None = None

    def __enter__(self) -> RunGuard:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        child = self.child
        if exc_type is not None and child is not None and child.status is None:
            child.kill()
        self.stops.restore()
        if self.resource is not None:
            self.resource.close()
        if child is not None:
            if self.kill_child and child.status is None:
                child.kill()
            child.close()


class RunOptions:
    """What ``trace`` and ``run`` share on their command lines (see their ``--help``)."""

    def __init__(self, *, command: str, cmd: list[str] | None = None, pid: int | None = None,
                 json_mode: bool = False, duration: float | None = None,
                 max_events: int | None = None, interval: float | None = None,
                 clear: bool = False, table: bool = False, quiet: bool = False) -> None:
        self.command = command
        self.cmd = cmd
        self.pid = pid
        self.json_mode = json_mode
        self.duration = duration
        self.max_events = max_events
        self.interval = interval
        self.clear = clear
        self.table = table
        self.quiet = quiet


def run_session(open_session: Callable[[int | None], Session], opts: RunOptions,
                attached: Callable[[Session], str], t0: float | None = None) -> int:
    """Run a trace from loading to the final printing (see the module docs);
    returns the exit status.

    ``open_session(pid)`` loads the programs without attaching them (pid:
    the ``-c`` command's, or ``-p``'s); ``attached(session)`` is the start
    of the status line on stderr ("Attached 2 probes"), completed with the
    time taken since ``t0`` (a :func:`time.perf_counter` reading; default:
    now) and what happens next.
    """
    from ..session import live

    t0 = time.perf_counter() if t0 is None else t0
    stops = StopSignals()
    with RunGuard(stops) as guard:
        child = guard.child = live.Child(opts.cmd) if opts.cmd else None
        session = guard.resource = open_session(child.pid if child else opts.pid)
        stops.hold()                      # from the first attach on, the results are printed
        session.attach()
        if not opts.quiet:
            print(f"{attached(session)} in "
                  f"{(time.perf_counter() - t0) * 1000:.0f} ms. "
                  + ("Running the command." if child else "Hit Ctrl-C to end."),
                  file=sys.stderr, flush=True)
        _loop(session, stops, child, opts)
        return OK if _finish(session, child, opts) else FAILURE


def _loop(session: Session, stops: StopSignals, child: Child | None, opts: RunOptions) -> None:
    """Let the command run and loop until a stop condition or a stop signal;
    returns with the stop signals held (see :class:`StopSignals`)."""
    from ..session import live

    def loop() -> None:
        live.run_loop(session, json_mode=opts.json_mode, duration=opts.duration,
                      max_events=opts.max_events, child=child, pid=opts.pid,
                      interval=opts.interval, clear=opts.clear, table=opts.table)

    stops.run(loop, child, session.child_started)


def _finish(session: Session, child: Child | None, opts: RunOptions) -> bool:
    """Print the results and detach, in the order that gives them soonest;
    True when everything was printed normally."""
    from ..session import live

    def final() -> bool:
        return live.print_final(session, sys.stdout, sys.stderr, opts.json_mode, opts.table,
                                command=opts.command)
    if child is not None and child.poll():
        printed = final()                 # the command has exited: the results are final
        session.detach()
        return printed
    session.detach()
    if child is not None and not child.poll():
        child.kill()                      # --duration / -n / a stop signal: the command goes too
    return final()
