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
from typing import Callable

from . import FAILURE, OK, StopSignals

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..trace.live import Child
    from ..trace.session import Session

__all__ = ["run_session", "RunOptions"]


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
    from ..trace import live

    t0 = time.perf_counter() if t0 is None else t0
    stops = StopSignals()
    child: Child | None = None
    session: Session | None = None
    try:
        if opts.cmd:
            child = live.Child(opts.cmd)
        session = open_session(child.pid if child else opts.pid)
        stops.hold()                      # from the first attach on, the results are printed
        session.attach()
        if not opts.quiet:
            print(f"{attached(session)} in "
                  f"{(time.perf_counter() - t0) * 1000:.0f} ms. "
                  + ("Running the command." if child else "Hit Ctrl-C to end."),
                  file=sys.stderr, flush=True)
        _loop(session, stops, child, opts)
        return OK if _finish(session, child, opts) else FAILURE
    except BaseException:
        if child is not None and child.status is None:
            child.kill()
        raise
    finally:
        stops.restore()
        if session is not None:
            session.close()
        if child is not None:
            child.close()


def _loop(session: Session, stops: StopSignals, child: Child | None, opts: RunOptions) -> None:
    """Let the command run and loop until a stop condition or a stop signal;
    returns with the stop signals held (see :class:`StopSignals`)."""
    from ..trace import live
    try:
        try:
            stops.arm()
            if child is not None:
                child.go()
            live.run_loop(session, json_mode=opts.json_mode, duration=opts.duration,
                          max_events=opts.max_events, child=child, pid=opts.pid,
                          interval=opts.interval, clear=opts.clear, table=opts.table)
        finally:
            stops.hold()
    except KeyboardInterrupt:
        pass


def _finish(session: Session, child: Child | None, opts: RunOptions) -> bool:
    """Print the results and detach, in the order that gives them soonest;
    True when everything was printed normally."""
    from ..trace import live

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
