"""Running a trace until it should stop, printing as it goes.

:class:`Child` starts a command for ``-c`` so that probes are attached before
it runs: the process is forked and waits on a pipe; the tracer attaches
(filtering on the child's pid, which is known now and stays the same across
``exec``), then lets it ``exec``.  An ``exec`` failure is reported through a
close-on-exec pipe, so "command not found" is an error of the tracer, not a
silent exit status 127.

:func:`run_loop` waits for events (the reader's batched drains, never a
system call per event), prints them as text or JSON lines, prints the
aggregations every ``interval`` seconds if asked, and returns when the
duration is over, ``max_events`` were printed, the traced process exited, or
on Ctrl-C / SIGTERM (:class:`KeyboardInterrupt`, which the caller turns into
the final printing).
"""
from __future__ import annotations

import dataclasses
import json
import os
import select
import signal
import sys
import time
from typing import Any, Callable, TextIO

__all__ = ["Child", "RunResult", "run_loop", "print_final", "sigterm_as_interrupt"]


class Child:
    """A command started stopped, released by :meth:`go` (see the module docs)."""

    def __init__(self, argv: list[str]) -> None:
        if not argv:
            raise ValueError("-c needs a command")
        self.argv = argv
        go_r, go_w = os.pipe()
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:                       # the child
            try:
                os.close(go_w)
                os.close(err_r)
                if not os.read(go_r, 1):   # the tracer gave up
                    os._exit(1)
                os.close(go_r)
                os.execvp(argv[0], argv)
            except OSError as exc:
                try:
                    os.write(err_w, f"{exc.errno}".encode())
                finally:
                    os._exit(127)
            os._exit(127)
        os.close(go_r)
        os.close(err_w)
        self.pid = pid
        self._go = go_w
        self._err = err_r
        self.status: int | None = None
        self.pidfd: int | None = None
        try:
            self.pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.pidfd = None

    def go(self) -> None:
        """Let the command run; raises OSError when it cannot be executed."""
        os.write(self._go, b"x")
        os.close(self._go)
        self._go = -1
        data = os.read(self._err, 64)      # EOF at a successful exec
        os.close(self._err)
        self._err = -1
        if data:
            err = int(data or b"0")
            self.wait()
            raise OSError(err, f"cannot run {self.argv[0]!r}: {os.strerror(err)}")

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
        if self.status is None:
            _, status = os.waitpid(self.pid, 0)
            self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def kill(self) -> None:
        """Stop a command that never got to run, or still runs (tracer error)."""
        if self._go >= 0:
            os.close(self._go)             # the child reads EOF and exits
            self._go = -1
        if self._err >= 0:
            os.close(self._err)
            self._err = -1
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            self.wait()
        self.close()

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class _ProcessWatch:
    """Tells when a process (not our child) has exited."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        try:
            self.pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.pidfd = None

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

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


@dataclasses.dataclass
class RunResult:
    """Why and after how much the loop stopped."""

    reason: str            # "duration", "max-events", "exited", "interrupted"
    events: int = 0
    seconds: float = 0.0


def sigterm_as_interrupt() -> Callable[[], None]:
    """Make SIGTERM stop the trace like Ctrl-C; returns a function that
    restores the previous handler."""
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGTERM, handler)
    return lambda: signal.signal(signal.SIGTERM, old)


def run_loop(session: Any, *, out: TextIO = sys.stdout, json_mode: bool = False,
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
    reader = getattr(session, "reader", None)
    err = sys.stderr if err is None else err
    reported = [0, 0.0]                  # lost events reported, when
    header = getattr(session, "header", lambda: None)()
    if header and not json_mode:
        out.write(header)
        out.flush()

    def emit(events: list) -> bool:
        nonlocal count
        lost = getattr(session, "lost", 0)
        if lost > reported[0] and time.monotonic() - reported[1] >= 1.0:
            err.write(f"pyebpf: {lost - reported[0]} events lost ({lost} so far)\n")
            err.flush()
            reported[:] = [lost, time.monotonic()]
        if max_events is not None:
            events = events[:max(0, max_events - count)]
        if json_mode:
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
                    print_interval(session, out, json_mode, clear, table, err)
                    next_print += interval
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


def _text(session: Any, results: Any = None, table: bool = False) -> str:
    if table and hasattr(session, "format_table"):
        return session.format_table(results)
    return session.format_text(results) if results is not None else session.format_text()


def print_interval(session: Any, out: TextIO, json_mode: bool, clear: bool,
                   table: bool = False, err: TextIO | None = None,
                   command: str = "trace") -> bool:
    """The aggregations now (a time line first in text mode); reset after if
    ``clear``.  A map that cannot be formatted is printed raw, as by
    :func:`print_final`; returns False then."""
    stamp = time.strftime("%H:%M:%S")
    text, ok = _maps_text(session, json_mode, table, sys.stderr if err is None else err,
                          command, stamp)
    out.write(text if json_mode else f"{stamp}\n{text}\n")
    out.flush()
    if clear:
        session.clear()
    return ok


def print_final(session: Any, out: TextIO, err: TextIO, json_mode: bool,
                table: bool = False, command: str = "trace") -> bool:
    """The aggregations at the end (bpftrace's layout) and the lost-event count.

    Results are data: an aggregation that cannot be formatted (or read and
    decoded) is printed raw -- ``@name (raw): {key: value}``, or a ``{"type":
    "raw"}`` JSON object -- after a one-line warning on ``err`` naming the
    error, and the others are still printed.  Returns False if that happened
    (the command then exits 1), True when everything was printed normally."""
    aggs = session.trace.aggregates if hasattr(session, "trace") else session.aggregates
    ok = True
    if aggs:
        text, ok = _maps_text(session, json_mode, table, err, command)
        out.write(text if json_mode else "\n" + text)
    lost = session.lost
    if session.reader is not None:
        try:
            lost = max(lost, session.reader.lost)
        except Exception:
            pass
    if lost:
        if json_mode:
            out.write(json.dumps({"type": "lost", "data": {"events": lost}}) + "\n")
        err.write(f"pyebpf {command}: {lost} events lost (the rings were full: try "
                  "--buffer-size, or aggregate in the kernel instead of printing)\n")
    out.flush()
    return ok


def _maps_text(session: Any, json_mode: bool, table: bool, err: TextIO, command: str,
               stamp: str | None = None) -> tuple[str, bool]:
    """Every aggregation formatted, map by map (JSON objects get ``"time":
    stamp``); one that fails is raw, after a warning.  (text, all formatted)."""
    try:
        results = session.results()
    except Exception as exc:
        _format_warning(err, command, "read the results", exc)
        aggs = session.trace.aggregates if hasattr(session, "trace") else session.aggregates
        raw = _raw_results(session, aggs)
        return "".join(_raw_chunk(name, raw[name], json_mode, exc) for name in sorted(raw)), False
    chunks, ok = [], True
    for name in sorted(results):
        one = {name: results[name]}
        try:
            if json_mode:
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
    from .render import format_raw, raw_json
    if json_mode:
        return json.dumps({"type": "raw", "data": {_at(name): raw_json(data)},
                           "error": f"{type(exc).__name__}: {exc}"}) + "\n"
    return format_raw(name, data)


def _raw_results(session: Any, aggs: list) -> dict[str, Any]:
    """Each aggregation's map as read, undecoded: when decoding failed."""
    out: dict[str, Any] = {}
    for a in aggs:
        name = getattr(a, "display", None) or a.name
        try:
            impl = getattr(a, "impl", None)
            out[name] = impl.read() if impl is not None else dict(session.maps[a.name].items())
        except Exception as exc:       # nothing left to print for this one
            out[name] = f"<unreadable: {type(exc).__name__}: {exc}>"
    return out
