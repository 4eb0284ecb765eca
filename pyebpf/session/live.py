"""Running a trace until it should stop, printing as it goes.

:class:`Child` starts a command for ``-c`` so that probes are attached before
it runs: the process is forked and waits on a pipe; the tracer attaches
(filtering on the child's pid, which is known now and stays the same across
``exec``), then lets it ``exec``.  An ``exec`` failure is reported through a
close-on-exec pipe, so "command not found" is an error of the tracer, not a
silent exit status 127.  The command's lifetime follows the tracer's: when
the tracer ends without stopping it (killed by SIGKILL, crashed), the kernel
sends the command SIGKILL (``PR_SET_PDEATHSIG``), so it never runs on
untraced.  Between ``fork`` and ``exec`` the child runs none of the tracer's
Python signal handlers (SIGTERM or Ctrl-C then simply end it), and the
command starts with the signal mask and dispositions the tracer started with
(SIGPIPE at its default, as ``subprocess`` does).

:func:`run_loop` waits for events (the reader's batched drains, never a
system call per event), prints them as text or JSON lines, prints the
aggregations every ``interval`` seconds if asked, and returns when the
duration is over, ``max_events`` were printed, the traced process exited, or
on Ctrl-C / SIGTERM (:class:`KeyboardInterrupt`, which the caller turns into
the final printing).
"""
from __future__ import annotations

import errno
import os
import select
import signal
import sys
import time

from .._record import dataclass
from ..kernel.lifetime import Owner, close_fd

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Callable, NoReturn, TextIO
    from types import FrameType

    from .base import PrintedEvent, Session

    #: a thread's signal mask, as :func:`signal.pthread_sigmask` returns it
    SignalMask = set[int | signal.Signals]

__all__ = ["Child", "RunResult", "run_loop", "print_final", "sigterm_as_interrupt"]


class Child(Owner):
    """A command started stopped, released by :meth:`go` (see the module docs).

    It owns a pidfd of the command (when the kernel gives one): ``close()``,
    ``with`` and garbage collection close it.

    Create it from the thread that lives as long as the trace (the main
    thread): the kernel's parent-death signal follows the thread that forked.
    """

    def __init__(self, argv: list[str]) -> None:
        if not argv:
            raise ValueError("-c needs a command")
        self.argv = argv
        self.pid = 0
        self.status: int | None = None
        self.pidfd: int | None = None
        self._go = -1
        self._err = -1
        mask = _hold_signals()
        try:
            try:
                self._spawn(mask)
            finally:
                _release_signals(mask)     # a signal held meanwhile is handled here
        except BaseException:
            self.kill()                    # (nothing to do if the fork failed)
            raise

    def _spawn(self, mask: SignalMask) -> None:
        """Fork (signals held: see :func:`_hold_signals`); the child waits on a pipe."""
        parent = os.getpid()
        from ..kernel import process  # noqa: F401  (before the fork: the child calls it)
        go_r, go_w = os.pipe()
        try:
            err_r, err_w = os.pipe2(os.O_CLOEXEC)
        except BaseException:
            _close_all(go_r, go_w)
            raise
        try:
            pid = os.fork()
        except BaseException:
            _close_all(go_r, go_w, err_r, err_w)
            raise
        if pid == 0:
            _exec_when_released(self.argv, go_r, go_w, err_r, err_w, mask, parent)
        self.pid, self._go, self._err = pid, go_w, err_r
        _close_all(go_r, err_w)
        try:
            self.pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.pidfd = None
        else:
            self._own(close_fd, self.pidfd)

    def go(self) -> None:
        """Let the command run; raises OSError when it cannot be executed.

        Signals are held until the command has exec'd: Ctrl-C or SIGTERM in
        the middle is handled just after, with every pipe closed exactly once."""
        mask = _hold_signals()
        try:
            go, self._go = self._go, -1
            try:
                os.write(go, b"x")
                released = True
            except BrokenPipeError:        # the child is gone already (killed)
                released = False
            finally:
                os.close(go)
            err, self._err = self._err, -1
            try:
                data = os.read(err, 64)    # EOF at a successful exec
            finally:
                os.close(err)
        finally:
            _release_signals(mask)
        if not released:
            status = self.wait()
            raise OSError(errno.ECHILD, f"cannot run {self.argv[0]!r}: it ended before it "
                          f"started (status {status})")
        if data:
            err_no = int(data)
            self.wait()
            raise OSError(err_no, f"cannot run {self.argv[0]!r}: {os.strerror(err_no)}")

    def poll(self) -> bool:
        """True once the command has exited (and was reaped)."""
        if self.status is not None:
            return True
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            return False
        self.status = os.waitstatus_to_exitcode(status)
        return True

    def wait(self) -> int:
        """Wait for the command to exit; its exit code (-N: killed by signal N)."""
        if self.status is None:
            _, status = os.waitpid(self.pid, 0)
            self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def kill(self) -> None:
        """Stop a command that never got to run, or still runs (tracer error):
        SIGTERM, then wait for it.  Safe to call at any point, and again."""
        mask = _hold_signals()
        try:
            go, self._go = self._go, -1    # the child reads EOF and exits
            err, self._err = self._err, -1
            _close_all(go, err)
            if self.pid and self.status is None:
                try:
                    os.kill(self.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        finally:
            _release_signals(mask)
        if self.pid:
            self.wait()
        self.close()

    def _close_resources(self) -> None:
        self.pidfd = None          # (closed by the release function)


# ---------------------------------------------------------------------------
# signals around fork and exec

#: every signal a handler can be set for
_ALL_SIGNALS = signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}
#: what Python ignores at start-up and a command expects at its default (as
#: ``subprocess``'s ``restore_signals`` does)
_PYTHON_IGNORES = {signal.SIGPIPE, signal.SIGXFSZ}


def _hold_signals() -> SignalMask:
    """Block the signals that have a Python-level handler; returns the mask
    to give to :func:`_release_signals`.  (The others run no Python code: a
    forked child meets their default action, or ignores them, as it should.)

    While held, no Python-level handler runs (``sigterm_as_interrupt``'s
    raises KeyboardInterrupt wherever the main thread is), so a few steps
    complete or do not start at all: a fork whose child must never run the
    parent's handlers, a pipe closed and forgotten in one go.  (The mask is
    the calling thread's: another thread that does not block a signal may
    take it, and its handler then runs in the main thread all the same.  The
    forked child is safe either way, and the command-line tools fork before
    any other thread starts.)"""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, ())    # (changes nothing)
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, _python_handled())
    except BaseException:       # a handler ran on the way out: the mask is set already
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        raise
    return old


def _release_signals(mask: SignalMask) -> None:
    """Restore ``mask``; the handlers of the signals that came meanwhile run
    now (and may raise KeyboardInterrupt from here)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _python_handled() -> set[signal.Signals]:
    """The signals whose handler is a Python function (SIGINT's, SIGTERM's
    from :func:`sigterm_as_interrupt`, SIGALRM's from a test runner...)."""
    return {sig for sig in _ALL_SIGNALS if callable(signal.getsignal(sig))}


def _close_all(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            os.close(fd)


def _exec_when_released(argv: list[str], go_r: int, go_w: int, err_r: int, err_w: int,
                        mask: SignalMask, parent: int) -> NoReturn:
    """The forked child (signals held): never returns into the tracer's code.

    Python-level handlers go back to the default action before the signals
    are released, so SIGTERM or Ctrl-C before ``exec`` ends the child quietly
    instead of raising in a copy of the tracer.  The child dies with the
    tracer (PR_SET_PDEATHSIG, SIGKILL), waits until :meth:`Child.go` (EOF: the
    tracer gave up), then execs with the tracer's original signal mask."""
    try:
        _default_handlers()
        _die_with(parent)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(go_w)
        os.close(err_r)
        if not os.read(go_r, 1):
            os._exit(1)                     # the tracer gave up
        os.close(go_r)
        os.execvp(argv[0], argv)
    except BaseException as exc:
        err_no = exc.errno if isinstance(exc, OSError) and exc.errno else errno.EINVAL
        try:
            os.write(err_w, str(err_no).encode())
        except BaseException:   # the tracer is gone: nobody to tell
            pass
    finally:
        os._exit(127)


def _default_handlers() -> None:
    """Every Python-level handler back to the default action, and the signals
    Python ignores too (see ``_PYTHON_IGNORES``); signals ignored when the
    tracer started stay ignored, as ``exec`` keeps them."""
    for sig in _python_handled() | _PYTHON_IGNORES:
        signal.signal(sig, signal.SIG_DFL)


def _die_with(parent: int) -> None:
    """Have the kernel SIGKILL this process when the tracer ends, however it
    ends (even SIGKILL): an untraced command must not outlive its tracer.

    SIGKILL rather than SIGTERM: the tracer's own ways of stopping the command
    send SIGTERM and wait; this one is for when the tracer could not, and
    nobody would be left to insist if the command ignored SIGTERM.  (The
    setting is cleared by exec of a set-user-ID or set-group-ID program.)"""
    from ..kernel.process import set_death_signal   # imported by _spawn before the fork
    set_death_signal(signal.SIGKILL)    # (cannot fail: EINVAL is for a bad signal number)
    if os.getppid() != parent:                # the tracer died before prctl
        os._exit(1)


class _ProcessWatch(Owner):
    """Tells when a process (not our child) has exited; owns a pidfd when
    the kernel gives one."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        try:
            self.pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.pidfd = None
        else:
            self._own(close_fd, self.pidfd)

    def poll(self) -> bool:
        if self.pidfd is not None:
            return bool(select.select([self.pidfd], [], [], 0)[0])
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        return False

    def _close_resources(self) -> None:
        self.pidfd = None          # (closed by the release function)


@dataclass
class RunResult:
    """Why and after how much the loop stopped."""

    reason: str            # "duration", "max-events", "exited", "interrupted"
    events: int = 0
    seconds: float = 0.0


def sigterm_as_interrupt() -> Callable[[], None]:
    """Make SIGTERM stop the trace like Ctrl-C; returns a function that
    restores the previous handler."""
    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGTERM, handler)

    def restore() -> None:
        signal.signal(signal.SIGTERM, old)
    return restore


def run_loop(session: Session, *, out: TextIO = sys.stdout, json_mode: bool = False,
             duration: float | None = None, max_events: int | None = None,
             child: Child | None = None, pid: int | None = None,
             interval: float | None = None, clear: bool = False,
             tick: float = 0.1, err: TextIO | None = None,
             table: bool = False) -> RunResult:
    """Print events (and the aggregations every ``interval`` s) until a stop
    condition; see the module docs.  KeyboardInterrupt propagates after the
    events drained so far were printed."""
    t0 = time.monotonic()
    deadline = t0 + duration if duration is not None else None
    next_print = t0 + interval if interval else None
    watch = _ProcessWatch(pid) if pid and child is None else None
    count = 0
    reader = session.reader
    errors = sys.stderr if err is None else err
    reported, reported_at = 0, 0.0       # lost events reported, when
    header = session.header()
    if header and not json_mode:
        out.write(header)
        out.flush()

    def emit(events: Sequence[PrintedEvent]) -> bool:
        nonlocal count, reported, reported_at
        lost = session.lost
        if lost > reported and time.monotonic() - reported_at >= 1.0:
            errors.write(f"pyebpf: {lost - reported} events lost ({lost} so far)\n")
            errors.flush()
            reported, reported_at = lost, time.monotonic()
        if max_events is not None:
            events = events[:max(0, max_events - count)]
        if json_mode:
            import json          # (here: json and the re it imports cost a start ~2 ms)
            out.write("".join(json.dumps(ev.to_json()) + "\n" for ev in events))
        else:
            out.write("".join(ev.line for ev in events))
        if events:
            out.flush()
        count += len(events)
        return max_events is not None and count >= max_events

    try:
        while True:
            now = time.monotonic()
            waits = [tick if reader is not None else 1.0]
            if deadline is not None:
                if now >= deadline:
                    emit(session.read_events(0))
                    return RunResult("duration", count, now - t0)
                waits.append(deadline - now)
            if next_print is not None:
                if now >= next_print:
                    print_interval(session, out, json_mode, clear, table, errors)
                    next_print += interval or 0.0
                    continue
                waits.append(next_print - now)
            wait = max(0.0, min(waits))
            if reader is not None:
                if emit(session.read_events(wait)):
                    return RunResult("max-events", count, time.monotonic() - t0)
            else:
                fds = [f for f in (child.pidfd if child else None,
                                   watch.pidfd if watch else None) if f is not None]
                select.select(fds, [], [], wait)
            ended = (child is not None and child.poll()) or (watch is not None and watch.poll())
            if ended:
                # what the process did last is in the rings: drain until empty
                while reader is not None:
                    batch = session.read_events(0)
                    if not batch or emit(batch):
                        break
                return RunResult("exited", count, time.monotonic() - t0)
    finally:
        if watch is not None:
            watch.close()


def _text(session: Session, results: dict[str, Any], table: bool = False) -> str:
    return session.format_table(results) if table else session.format_text(results)


def print_interval(session: Session, out: TextIO, json_mode: bool, clear: bool,
                   table: bool = False, err: TextIO | None = None,
                   command: str = "trace") -> bool:
    """The aggregations now (a time line first in text mode); with ``clear``
    the values printed become the starting point of the next ones (one read:
    a hit is in exactly one printing).  A map that cannot be formatted is
    printed raw, as by :func:`print_final`; returns False then."""
    stamp = time.strftime("%H:%M:%S")
    text, ok = _maps_text(session, json_mode, table, sys.stderr if err is None else err,
                          command, stamp, clear)
    out.write(text if json_mode else f"{stamp}\n{text}\n")
    out.flush()
    return ok


def print_final(session: Session, out: TextIO, err: TextIO, json_mode: bool,
                table: bool = False, command: str = "trace") -> bool:
    """The aggregations at the end (bpftrace's layout) and the lost-event count.

    Results are data: an aggregation that cannot be formatted (or read and
    decoded) is printed raw -- ``@name (raw): {key: value}``, or a ``{"type":
    "raw"}`` JSON object -- after a one-line warning on ``err`` naming the
    error, and the others are still printed.  Returns False if that happened
    (the command then exits 1), True when everything was printed normally."""
    ok = True
    if session.aggregation_names():
        text, ok = _maps_text(session, json_mode, table, err, command)
        out.write(text if json_mode else "\n" + text)
    lost = session.lost_events()
    if lost:
        if json_mode:
            import json
            out.write(json.dumps({"type": "lost", "data": {"events": lost}}) + "\n")
        err.write(f"pyebpf {command}: {lost} events lost (the rings were full: try "
                  "--buffer-size, or aggregate in the kernel instead of printing)\n")
    out.flush()
    return ok


def _maps_text(session: Session, json_mode: bool, table: bool, err: TextIO, command: str,
               stamp: str | None = None, clear: bool = False) -> tuple[str, bool]:
    """Every aggregation formatted, map by map (JSON objects get ``"time":
    stamp``); one that fails is raw, after a warning.  (text, all formatted)."""
    try:
        results = session.results(clear=True) if clear else session.results()
    except Exception as exc:
        _format_warning(err, command, "read the results", exc)
        raw = session.raw_results()
        return "".join(_raw_chunk(name, raw[name], json_mode, exc) for name in sorted(raw)), False
    chunks, ok = [], True
    for name in sorted(results):
        one = {name: results[name]}
        try:
            if json_mode:
                import json
                objs = session.json_objects(one)
                for obj in objs if stamp else ():
                    obj["time"] = stamp
                chunk = "".join(json.dumps(o) + "\n" for o in objs)
            else:
                chunk = _text(session, one, table)
        except Exception as exc:
            ok = False
            _format_warning(err, command, f"format {_at(name)}", exc)
            chunk = _raw_chunk(name, results[name], json_mode, exc)
        chunks.append(chunk)
    return "".join(chunks), ok


def _at(name: str) -> str:
    return name if name.startswith("@") else "@" + name


def _format_warning(err: TextIO, command: str, what: str, exc: BaseException) -> None:
    err.write(f"pyebpf {command}: warning: could not {what} ({type(exc).__name__}: "
              f"{str(exc)[:200]}); printing the raw contents instead\n")
    err.flush()


def _raw_chunk(name: str, data: Any, json_mode: bool, exc: BaseException) -> str:
    from ..draw.render import format_raw, raw_json
    if json_mode:
        import json
        return json.dumps({"type": "raw", "data": {_at(name): raw_json(data)},
                           "error": f"{type(exc).__name__}: {exc}"}) + "\n"
    return format_raw(name, data)
