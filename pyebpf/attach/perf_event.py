"""Perf-event attachments: sampling events on each CPU, and kprobes through the kprobe PMU.

Both open perf events and attach the program to each with a BPF perf link
(Linux 5.15+) or ``PERF_EVENT_IOC_SET_BPF`` (:func:`pyebpf.attach.link.perf_method`).
"""
from __future__ import annotations

import errno as E
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable

    from ._programs import AttachableProgram

from ..errors import (AttachError, KernelError, NotSupportedError, OptionError,
                      PermissionDeniedError)
from ..kernel import features, perf
from ..kernel.constants import (PERF_ATTR_FLAG_FREQ, PERF_ATTR_FLAG_INHERIT, PERF_TYPE_HARDWARE,
                               PERF_TYPE_SOFTWARE, ProgType)
from ..kernel.cpus import online_cpus
from ..kernel.syscall import Fd
from ._programs import prepare
from .link import Link, close_groups, attach_perf_fd, perf_method

__all__ = ["PERF_EVENTS", "attach_perf_event", "attach_kprobe", "attach_kretprobe",
           "attach_breakpoint", "BREAKPOINT_MODES"]

#: hardware breakpoint access kinds (``HW_BREAKPOINT_R``/``W``/``X``), by letter
BREAKPOINT_MODES = {"r": 1, "w": 2, "x": 4}


#: Named perf events for :func:`attach_perf_event`: ``(perf type, config)``.
PERF_EVENTS: dict[str, tuple[int, int]] = {
    "cpu-clock": (PERF_TYPE_SOFTWARE, 0),
    "task-clock": (PERF_TYPE_SOFTWARE, 1),
    "page-faults": (PERF_TYPE_SOFTWARE, 2),
    "context-switches": (PERF_TYPE_SOFTWARE, 3),
    "cpu-migrations": (PERF_TYPE_SOFTWARE, 4),
    "cycles": (PERF_TYPE_HARDWARE, 0),
    "cpu-cycles": (PERF_TYPE_HARDWARE, 0),
    "instructions": (PERF_TYPE_HARDWARE, 1),
    "cache-misses": (PERF_TYPE_HARDWARE, 3),
    "branch-misses": (PERF_TYPE_HARDWARE, 5),
}


def attach_perf_event(prog: AttachableProgram, frequency: int | None = 99, *,
                      period: int | None = None,
                      cpus: Iterable[int] | None = None, event: "str | tuple[int, int]" =
                      "cpu-clock", pid: int = -1, method: str = "auto") -> Link:
    """Attach a PERF_EVENT program to a sampling event on each CPU.

    By default the software ``cpu-clock`` event at ``frequency`` Hz on every
    online CPU, for every process.  ``period`` (events per sample) replaces
    ``frequency``; ``event`` is a name from :data:`PERF_EVENTS` or a
    ``(type, config)`` pair.  ``pid`` samples one process only: one event
    per thread of it, on whichever CPU the thread runs, inherited by the
    threads and processes it starts later (other processes are never
    interrupted); with ``cpus`` too, one event per CPU of ``cpus`` for
    thread ``pid`` alone.
    """
    if (frequency is None) == (period is None):
        if period is not None:
            raise OptionError("give either frequency or period, not both")
        raise OptionError("give a sampling frequency (Hz) or a period")
    if isinstance(event, str):
        try:
            ptype, config = PERF_EVENTS[event]
        except KeyError:
            raise OptionError(f"unknown perf event {event!r}; known: "
                              f"{', '.join(PERF_EVENTS)} (or pass (type, config))") from None
    else:
        ptype, config = event
    per_thread = pid != -1 and cpus is None
    if per_thread:
        targets = [(tid, -1) for tid in _threads(pid)]
        where = f" in process {pid} ({len(targets)} threads)"
    else:
        cpu_list = list(cpus) if cpus is not None else online_cpus()
        if not cpu_list:
            raise OptionError("no CPUs to sample on")
        targets = [(pid, cpu) for cpu in cpu_list]
        where = f" on CPUs {','.join(map(str, cpu_list))}"

    def fill(p: Any) -> None:
        p.type = ptype
        p.config = config
        if frequency is not None:
            p.sample_freq = frequency
            p.flags = PERF_ATTR_FLAG_FREQ
        else:
            p.sample_period = period
        if per_thread:
            p.flags |= PERF_ATTR_FLAG_INHERIT
    what = f"{event if isinstance(event, str) else event} " + \
        (f"@{frequency}Hz" if frequency is not None else f"every {period}") + where
    return _attach_each(prog, "perf_event", what, method, targets, pid, fill)


def _threads(pid: int) -> list[int]:
    """The thread ids of process ``pid`` (an :class:`AttachError` when there
    is no such process)."""
    import os
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except (FileNotFoundError, NotADirectoryError, ValueError):
        raise AttachError(E.ESRCH, "attach_perf_event", f"pid {pid}",
                          f"no process with pid {pid}") from None


def _attach_each(prog: AttachableProgram, kind: str, what: str, method: str,
                 targets: list[tuple[int, int]], pid: int, fill: Callable[[Any], None]) -> Link:
    """Open one perf event per ``(thread, cpu)`` of ``targets`` (thread -1:
    every process; cpu -1: any CPU), its attr set by ``fill(attr)``, and
    attach ``prog`` (a PERF_EVENT program) to each; on a failure everything
    opened here is closed.  ``pid`` is the process the link names (-1: none)."""
    t0 = time.perf_counter()
    chosen = perf_method(method, f"attach_{kind}")
    loaded, owned = prepare(prog, ProgType.PERF_EVENT, f"attach_{kind}")
    groups: list[list[Fd]] = []
    try:
        for thread, cpu in targets:
            a = perf.PerfAttr()
            fill(a.ptr)
            pfd = a.open(pid=thread, cpu=cpu)
            group = [pfd]
            groups.append(group)
            group.extend(attach_perf_fd(loaded, pfd, chosen))
    except BaseException:
        close_groups(groups, False)
        if owned is not None:
            owned.close()
        raise
    return Link(kind, what, chosen, groups, program=loaded,
                owns_program=owned is not None, pid=None if pid == -1 else pid, attach_seconds=time.perf_counter() - t0)


def attach_breakpoint(prog: AttachableProgram, address: int, length: int, mode: str = "w", *,
                      pid: int = -1, cpus: Iterable[int] | None = None) -> Link:
    """Attach a PERF_EVENT program to a hardware breakpoint (a watchpoint):
    it runs after each access of ``mode`` (``r``, ``w``, ``x`` or a
    combination such as ``rw``) to the ``length`` bytes (1, 2, 4 or 8) at
    ``address`` -- in process ``pid``'s address space (any CPU), or, with
    ``pid`` -1, on each CPU of ``cpus`` (default: every online one; a kernel
    address).

    The CPU has few debug registers (four on x86-64): when they are all
    taken, perf_event_open fails with ENOSPC, raised as a
    :class:`~pyebpf.errors.KernelError` whose ``errno`` is 28."""
    from ..kernel.constants import PERF_TYPE_BREAKPOINT
    bits = 0
    for c in mode:
        if c not in BREAKPOINT_MODES:
            raise OptionError(f"watchpoint mode {mode!r}: each letter one of r, w, x")
        bits |= BREAKPOINT_MODES[c]
    if not bits or length not in (1, 2, 4, 8):
        raise OptionError(f"a watchpoint is 1, 2, 4 or 8 bytes ({length} asked) with a mode "
                          f"of r, w, x ({mode!r} asked)")
    cpu_list = [-1] if pid != -1 else (list(cpus) if cpus is not None else online_cpus())

    def fill(p: Any) -> None:
        p.type = PERF_TYPE_BREAKPOINT
        p.bp_type = bits
        p.bp_addr = address
        p.bp_len = length
        p.sample_period = 1
    return _attach_each(prog, "breakpoint", f"{address:#x}:{length}:{mode}", "auto",
                        [(pid, cpu) for cpu in cpu_list], pid, fill)


def attach_one_event(prog: AttachableProgram, prog_type: int, kind: str, what: str, method: str,
                     open_event: Callable[[], Fd]) -> Link:
    """Open one perf event (``open_event()``, every CPU and process) and attach
    ``prog`` to it: the sequence kprobes and tracepoints share.

    ``prog`` is prepared as ``prog_type``; on any failure the event, and the
    program if it was loaded here, are closed.  ``kind`` and ``what`` name
    the :class:`Link` (and ``attach_<kind>`` in errors).
    """
    t0 = time.perf_counter()
    chosen = perf_method(method, f"attach_{kind}")
    loaded, owned = prepare(prog, prog_type, f"attach_{kind}")
    try:
        pfd = open_event()
        try:
            extra = attach_perf_fd(loaded, pfd, chosen)
        except BaseException:
            pfd.close()
            raise
    except BaseException:
        if owned is not None:
            owned.close()
        raise
    return Link(kind, what, chosen, [[pfd] + extra], program=loaded,
                owns_program=owned is not None, attach_seconds=time.perf_counter() - t0)


# ==================================================================== kprobes
def attach_kprobe(prog: AttachableProgram, function: str, offset: int = 0, *, retprobe: bool = False,
                  method: str = "auto") -> Link:
    """Attach a KPROBE program to kernel function ``function`` (+``offset``)
    through the kprobe PMU.

    Raises :class:`NotSupportedError` carrying the feature probe's reason when
    the kernel has no kprobe PMU (CONFIG_KPROBES off).
    """
    kind = "kretprobe" if retprobe else "kprobe"
    feat = features.has_kprobe_pmu()
    if not feat:
        raise NotSupportedError(E.EOPNOTSUPP, f"attach_{kind}", f"{function}+{offset:#x}",
                                feat.reason)
    if retprobe and offset:
        raise OptionError("a kretprobe goes on a function's entry (offset 0)")
    what = f"{function}+{offset:#x}"

    def open_event() -> Fd:
        try:
            return perf.kprobe_attr(function, offset, retprobe=retprobe).open(pid=-1, cpu=0)
        except KernelError as exc:
            if isinstance(exc, PermissionDeniedError):
                raise
            raise AttachError(exc.errno or 0, f"attach_{kind}", what,
                              "no such kernel function, or it cannot be probed (inlined, "
                              "notrace, or blacklisted in /sys/kernel/debug/kprobes/"
                              "blacklist)") from exc
    return attach_one_event(prog, ProgType.KPROBE, kind, what if offset else function,
                            method, open_event)


def attach_kretprobe(prog: AttachableProgram, function: str, **kw: Any) -> Link:
    """:func:`attach_kprobe` with ``retprobe=True``."""
    return attach_kprobe(prog, function, retprobe=True, **kw)
