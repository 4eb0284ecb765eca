"""Waiting in tests: on a condition, never on a guessed delay, and never
without a bound.

A test that must wait for something another thread or process does (a
tracer attached, a child ready, a reader caught up) polls for the thing
itself with :func:`wait_until`, or reads a child's line with
:func:`read_line`; both fail with a message that names what did not happen,
after a bounded time, instead of hanging (the per-test timeout of
pytest-timeout is the last resort, not the plan).  ``from waiting import
wait_until`` works from any test: tests/ is on sys.path.
"""
from __future__ import annotations

import os
import threading
import time
from typing import IO, Any, Callable, TypeVar

T = TypeVar("T")

#: how long a wait lasts by default (seconds): long enough for a loaded
#: 2-core CI machine, short enough that a failure is seen well before the
#: per-test timeout
DEFAULT_TIMEOUT = 30.0


class WaitTimeout(AssertionError):
    """A condition a test waited for did not come true in time."""


def poll_until(predicate: Callable[[], T], timeout: float,
               interval: float = 0.005) -> T:
    """Call ``predicate`` until it returns a true value or ``timeout``
    seconds passed; returns its last value (true, or false on timeout).

    The polling interval starts at ``interval`` and doubles up to 0.1 s, so
    a condition met at once costs a few milliseconds and a long wait does not
    spin."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            return value
        time.sleep(min(interval, left))
        interval = min(interval * 2, 0.1)


def wait_until(predicate: Callable[[], T], what: str, timeout: float = DEFAULT_TIMEOUT,
               *, detail: Callable[[], Any] | None = None) -> T:
    """Wait for ``predicate()`` to be true and return its value; after
    ``timeout`` seconds fail with :class:`WaitTimeout` ("timed out after
    Ns waiting for WHAT"), followed by ``detail()`` when given (the state
    that explains the failure: counts, a child's output...)."""
    value = poll_until(predicate, timeout)
    if not value:
        msg = f"timed out after {timeout:g} s waiting for {what}"
        if detail is not None:
            msg += f": {detail()}"
        raise WaitTimeout(msg)
    return value


def read_line(stream: IO[Any], what: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
    """One line of a child's pipe (``stream.readline()``), failing with
    :class:`WaitTimeout` when none comes within ``timeout`` seconds.

    The read runs in a daemon thread, so a line already buffered by
    ``stream`` is found (a ``select`` on the file descriptor would miss it).
    After a timeout that thread stays blocked until the pipe closes: the
    caller's cleanup kills the child, which closes it.  At end of file the
    empty line is returned, as by ``readline``."""
    box: list[Any] = []

    def reader() -> None:
        try:
            box.append(stream.readline())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box.append(exc)

    thread = threading.Thread(target=reader, name=f"read_line: {what}", daemon=True)
    thread.start()
    thread.join(timeout)
    if not box:
        raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what}")
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


def read_until(stream: IO[Any], needle: str, what: str,
               timeout: float = DEFAULT_TIMEOUT) -> list[Any]:
    """Read lines of ``stream`` until one contains ``needle``; returns the
    lines read (that one last).  Fails with :class:`WaitTimeout` when the
    line does not come within ``timeout`` seconds, or the pipe closes first
    (the child exited: its lines are in the message).

    What ``stream`` read ahead of that line stays in its buffer, where
    ``stream.read()`` finds it but ``Popen.communicate`` (which reads the
    file descriptor) does not."""
    deadline = time.monotonic() + timeout
    lines: list[Any] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what}; "
                              f"read so far: {lines!r}")
        try:
            line = read_line(stream, what, left)
        except WaitTimeout:
            raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what}; "
                              f"read so far: {lines!r}") from None
        lines.append(line)
        if needle in line:
            return lines
        if not line:
            raise WaitTimeout(f"end of the output before {what}; read: {lines!r}")


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def _mapped(pid: int, path: str) -> bool:
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any(line.rstrip("\n").endswith(" " + path) for line in f)
    except OSError:
        return False


def wait_exec(pid: int, path: str, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Wait until process ``pid`` runs ``path`` and has it mapped (its exec is
    done: a child just started by Popen may still be the forked Python, and
    the kernel names the new executable in ``/proc/PID/exe`` before it maps
    its segments)."""
    real = os.path.realpath(path)
    wait_until(lambda: _exe(pid) == real and _mapped(pid, real),
               f"process {pid} to run {real}", timeout, detail=lambda: _exe(pid) or "gone")


#: the system calls a thread blocks in while it waits for a file descriptor
_WAIT_SYSCALLS = {7, 23, 232, 270, 271, 281, 441}   # x86_64: poll, select, epoll_wait,
#                                  pselect6, ppoll, epoll_pwait, epoll_pwait2


def wait_blocked_in_poll(thread: threading.Thread, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Wait until ``thread`` is blocked in poll/select/epoll (read from
    /proc/self/task/TID/syscall), e.g. a reader waiting for data."""
    def blocked() -> bool:
        try:
            with open(f"/proc/self/task/{thread.native_id}/syscall") as f:
                first = f.read().split()[0]
        except (OSError, IndexError):
            return False
        return first.lstrip("-").isdigit() and int(first) in _WAIT_SYSCALLS
    wait_until(blocked, f"thread {thread.name} to block in poll")
