"""Links: the objects that own an attachment's kernel fds, and their lifetime.

A :class:`Link` holds groups of fds (per attachment point: the perf event fd
first, then the BPF link fd, if any) and the program when the attach call
loaded it.  Closing is the one place of an attachment's teardown: idempotent,
run by ``detach()``/``close()``, by the end of a ``with`` block and by the
garbage collector (an :class:`~pyebpf.kernel.lifetime.Owner`), concurrently where the kernel makes
closing slow.  :func:`attach_perf_fd` is how every perf-event attachment
(uprobe PMU, tracepoint, perf event, kprobe) becomes a group of such fds.
"""
from __future__ import annotations

import errno as E
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

    from ..elf import Location
    from ..loader import LoadedProgram

from ..errors import KernelError, NotSupportedError, OptionError
from ..kernel import features
from ..kernel import syscall as _sys
from ..kernel.lifetime import Owner, close_all, close_quietly
from ..kernel.syscall import Fd
from ._programs import prog_fd

__all__ = ["Link", "link_ids", "UPROBE_MULTI", "PERF_LINK", "PERF_IOCTL"]

#: One BPF_TRACE_UPROBE_MULTI link for every offset (Linux 6.6+).
UPROBE_MULTI = "uprobe_multi"
#: One uprobe PMU perf event per offset, each with a BPF perf link (5.15+).
PERF_LINK = "perf_link"
#: One uprobe PMU perf event per offset, program set with PERF_EVENT_IOC_SET_BPF.
PERF_IOCTL = "perf_ioctl"


def _close_group(group: Sequence[Fd]) -> None:
    for fd in group:
        fd.close()


def close_groups(groups: Sequence[Sequence[Fd]], parallel: bool) -> None:
    """Close each group's fds in order; groups concurrently when ``parallel``.

    Closing a perf-event uprobe blocks ~100 ms in the kernel (a synchronous
    unregister); doing them from threads overlaps part of that wait.
    """
    groups = [g for g in groups if g]
    if not parallel or len(groups) < 2:
        for g in groups:
            _close_group(g)
        return
    import threading
    threads = []
    try:
        for g in groups:
            t = threading.Thread(target=_close_group, args=(g,), daemon=True)
            t.start()
            threads.append(t)
    except RuntimeError:          # interpreter shutting down: no new threads
        pass
    for t in threads:
        t.join()
    for g in groups:              # whatever did not get a thread
        _close_group(g)


def _release(groups: list[list[Fd]], parallel: bool, program: Any,
             extras: list[Any] | None = None) -> None:
    """What a :class:`Link` owns, released: its fds, then the program it
    loaded, then what :meth:`Link.own` gave it (the last given first)."""
    close_groups(groups, parallel)
    if program is not None:
        close_quietly(program)
    if extras:
        close_all(extras)


class Link(Owner):
    """An attachment: owns the kernel objects that keep a program attached.

    Attributes:
        kind: ``"uprobe"``, ``"uretprobe"``, ``"tracepoint"``,
            ``"raw_tracepoint"``, ``"perf_event"``, ``"kprobe"``, ``"kretprobe"``.
        target: what it is attached to, for humans.
        method: ``"uprobe_multi"``, ``"perf_link"``, ``"perf_ioctl"`` or
            ``"raw_tracepoint"``.
        locations: the resolved :class:`pyebpf.elf.Location` of each uprobe.
        link_ids: kernel ids of the BPF links (empty for ``perf_ioctl``); they
            disappear from ``BPF_LINK_GET_NEXT_ID`` once detached (read it
            while attached: it is asked of the kernel on first read).
        program: the program attached (owned, and closed on detach, when the
            attach call loaded it).
        attach_seconds, detach_seconds: how long attaching and the last
            detach took.

    ``detach()`` (alias ``close()``) closes every fd, concurrently where the
    kernel makes closing slow; it is idempotent and runs at the end of a
    ``with`` block and on garbage collection (an
    :class:`~pyebpf.kernel.lifetime.Owner`).
    """

    def __init__(self, kind: str, target: str, method: str, groups: list[list[Fd]], *,
                 program: Any = None, owns_program: bool = False,
                 locations: Sequence[Location] = (), pid: int | None = None,
                 cookies: Sequence[int] = (), parallel_close: bool = False,
                 attach_seconds: float = 0.0) -> None:
        self.kind = kind
        self.target = target
        self.method = method
        self.program = program
        self.locations = tuple(locations)
        self.pid = pid
        self.cookies = tuple(cookies)
        self.attach_seconds = attach_seconds
        self.detach_seconds: float | None = None
        self._groups = groups
        self._link_ids: tuple[int, ...] | None = None
        self._extras: list[Any] = []
        self._own(_release, groups, parallel_close, program if owns_program else None,
                  self._extras)

    def own(self, thing: Any) -> None:
        """Close ``thing`` too when this link is detached (or collected),
        after its fds and program: what the attachment needs for as long as
        it lasts (the USDT argument specs an object's program reads).
        ``thing`` has ``close()`` and must not refer to the link."""
        if self.closed:
            raise OptionError("this link is detached already")
        self._extras.append(thing)

    @property
    def link_ids(self) -> tuple[int, ...]:
        """The kernel ids of the BPF links (empty for ``perf_ioctl``): asked of
        the kernel when first read (not at attach time: two syscalls per link
        and the object-info module, which an attach alone does not need), then
        kept; empty if first read once detached."""
        if self._link_ids is None:
            ids = []
            if self.method != PERF_IOCTL and not self.closed:
                for g in self._groups:
                    # the BPF link is the last fd of a group (perf fd first)
                    try:
                        ids.append(_sys.link_info(g[-1]).id)
                    except KernelError:
                        pass
            self._link_ids = tuple(ids)
        return self._link_ids

    @property
    def fds(self) -> tuple[Fd, ...]:
        """The owned file descriptors (empty once detached)."""
        if self.closed:
            return ()
        return tuple(fd for g in self._groups for fd in g if not fd.closed)

    @property
    def offsets(self) -> tuple[int, ...]:
        """File offsets of the uprobes (empty for other kinds)."""
        return tuple(loc.file_offset for loc in self.locations)

    def detach(self) -> None:
        """Detach and close everything (does nothing the second time)."""
        if not self.closed:
            t0 = time.perf_counter()
            Owner.close(self)
            self.detach_seconds = time.perf_counter() - t0

    close = detach

    def info(self) -> list[_sys.LinkInfo]:
        """``link_info`` of each BPF link (type, id, program id, uprobe_multi details)."""
        if self.closed or self.method == PERF_IOCTL:
            return []
        return [_sys.link_info(g[-1]) for g in self._groups]

    def __repr__(self) -> str:
        state = "detached, closed" if self.closed else f"{len(self._groups)} attachment(s)"
        return f"<Link {self.kind} {self.target} via {self.method} ({state})>"


def link_ids() -> list[int]:
    """Ids of every BPF link in the system (``BPF_LINK_GET_NEXT_ID``)."""
    out: list[int] = []
    cur = 0
    while True:
        nxt = _sys.link_get_next_id(cur)
        if nxt is None:
            return out
        out.append(nxt)
        cur = nxt


def attach_perf_fd(prog: LoadedProgram | Fd | int, pfd: Fd, method: str,
                   cookie: int = 0) -> list[Fd]:
    """Attach ``prog`` to an open perf event; returns the link fd (if any) to own."""
    if method == PERF_IOCTL:
        _sys.perf_event_set_bpf(pfd, prog_fd(prog))
        _sys.perf_event_enable(pfd)
        return []
    lfd = _sys.perf_event_link(prog_fd(prog), pfd, cookie)
    try:
        _sys.perf_event_enable(pfd)
    except KernelError:
        lfd.close()
        raise
    return [lfd]


def perf_method(method: str, what: str) -> str:
    """The perf-event attach mechanism for ``what``: ``"perf_link"`` where the kernel
    has BPF perf links, else ``"perf_ioctl"``; an explicit ``method`` is checked."""
    if method not in ("auto", PERF_LINK, PERF_IOCTL):
        raise OptionError(f"method for {what} must be 'auto', 'perf_link' or 'perf_ioctl', "
                          f"not {method!r}")
    if method == "auto":
        return PERF_LINK if features.has_perf_link() else PERF_IOCTL
    if method == PERF_LINK and not features.has_perf_link():
        raise NotSupportedError(E.EOPNOTSUPP, what, "perf links", features.has_perf_link().reason)
    return method
