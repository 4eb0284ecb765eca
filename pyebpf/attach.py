"""Attach loaded programs to uprobes, tracepoints, raw tracepoints, perf events, kprobes.

Every ``attach_*`` function returns a :class:`Link`: a context manager that
owns the kernel objects of the attachment (BPF link fds, perf event fds, and
the program when it loaded it itself).  ``detach()`` is idempotent, closes
everything in one go, and also runs when the link is garbage collected::

    from pyebpf.attach import attach_uprobe, load_uprobe_program
    prog = load_uprobe_program(p)                    # p: a DSL Program
    with attach_uprobe(prog, "libc", "malloc", pid=1234) as link:
        ...                                          # counting
    # detached here: no link, no probe, no fd left

Uprobes: uprobe_multi or perf links
-----------------------------------
Where the kernel has ``BPF_TRACE_UPROBE_MULTI`` (6.6+), one link carries every
offset of an attachment, even a single one: attaching costs one syscall and
detaching one ~25-50 ms close, where each perf-event uprobe costs ~100 ms to
close.  Otherwise each offset gets a uprobe PMU perf event (no tracefs),
attached with a BPF perf link (5.15+, carries the cookie) or, on older
kernels, ``PERF_EVENT_IOC_SET_BPF``.

The catch: a uprobe_multi program must be *loaded* with
``expected_attach_type=BPF_TRACE_UPROBE_MULTI`` (48), and such a program can
then not be used with a perf link.  So the choice is made at load time:

* :func:`load_uprobe_program` loads a program with the right options for this
  kernel (and remembers them); :func:`uprobe_load_options` returns them for
  ``pyebpf.loader.load(p, **uprobe_load_options())``;
* every ``attach_uprobe*`` also accepts an unloaded program (a DSL
  ``Program``, assembly text, instruction bytes) and loads it itself; the link
  then owns that program;
* a program loaded some other way (expected_attach_type unknown) is tried
  with uprobe_multi first and, when the kernel refuses it (EINVAL), with
  perf events.  ``method=`` forces a mechanism.

Locations are resolved by :mod:`pyebpf.elf`: ``"sym"``, ``"sym+off"``,
``"sym@@VER"``, ``"0xADDR"`` (an ELF virtual address, as ``nm`` prints), an
``int`` (a **file offset**, what the kernel takes; the unit of
``attach_uprobes(..., [offsets])`` and of USDT notes), or a
:class:`pyebpf.elf.Location`.  Binaries are paths or bpftrace-like names
(``"libc"``, ``"libc.so.6"``, ``"python3"``).

A location must provably start an instruction: a uprobe's breakpoint written
into the middle of one corrupts the traced program.  Inside a function symbol
this is checked by disassembling the function; elsewhere (stripped binaries,
raw addresses and file offsets between symbols) from the nearest instruction
start known without symbols (a function start in ``.eh_frame``, the entry
point, a section start).  Whatever cannot be proven is refused with
:class:`pyebpf.elf.InstructionBoundaryError`; ``unsafe=True`` skips the check.

Tracepoints need tracefs for the event id; it is mounted at
/sys/kernel/tracing when absent (root only).  Raw tracepoints, perf events
and uprobes never need it.
"""
from __future__ import annotations

import errno as E
import os
import time
import weakref

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Sequence

from . import elf as _elf
from .errors import (ArgumentTypeError, AttachError, KernelError, NotSupportedError,
                     OptionError, PermissionDeniedError, ProgramError, UnknownNameError,
                     close_matches)
from .kernel import features, perf
from .kernel import syscall as _sys
from .kernel.constants import (PERF_ATTR_FLAG_FREQ, PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE,
                               AttachType, ProgType)
from .kernel.cpus import online_cpus
from .kernel.syscall import Fd
from ._record import Record, record

__all__ = [
    "Link", "UPROBE_MULTI", "PERF_LINK", "PERF_IOCTL",
    "uprobe_method", "uprobe_load_options", "load_uprobe_program",
    "resolve_uprobe", "resolve_uprobes",
    "attach_uprobe", "attach_uretprobe", "attach_uprobes",
    "tracefs_dir", "list_tracepoints", "tracepoint_id", "tracepoint_format",
    "TracepointField", "TracepointFormat", "attach_tracepoint",
    "list_raw_tracepoints", "attach_raw_tracepoint",
    "attach_perf_event", "PERF_EVENTS",
    "attach_kprobe", "attach_kretprobe",
    "link_ids",
]

#: One BPF_TRACE_UPROBE_MULTI link for every offset (Linux 6.6+).
UPROBE_MULTI = "uprobe_multi"
#: One uprobe PMU perf event per offset, each with a BPF perf link (5.15+).
PERF_LINK = "perf_link"
#: One uprobe PMU perf event per offset, program set with PERF_EVENT_IOC_SET_BPF.
PERF_IOCTL = "perf_ioctl"
_METHODS = ("auto", UPROBE_MULTI, PERF_LINK, PERF_IOCTL)


# ====================================================================== links
def _close_group(group: Sequence[Fd]) -> None:
    for fd in group:
        fd.close()


def _close_groups(groups: Sequence[Sequence[Fd]], parallel: bool) -> None:
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


def _finalize(groups: list[list[Fd]], parallel: bool, program: Any) -> None:
    _close_groups(groups, parallel)
    if program is not None:
        try:
            program.close()
        except Exception:     # pragma: no cover - best effort in a finalizer
            pass


class Link:
    """An attachment: owns the kernel objects that keep a program attached.

    Attributes:
        kind: ``"uprobe"``, ``"uretprobe"``, ``"tracepoint"``,
            ``"raw_tracepoint"``, ``"perf_event"``, ``"kprobe"``, ``"kretprobe"``.
        target: what it is attached to, for humans.
        method: ``"uprobe_multi"``, ``"perf_link"``, ``"perf_ioctl"`` or
            ``"raw_tracepoint"``.
        locations: the resolved :class:`pyebpf.elf.Location` of each uprobe.
        link_ids: kernel ids of the BPF links (empty for ``perf_ioctl``); they
            disappear from ``BPF_LINK_GET_NEXT_ID`` once detached.
        program: the program attached (owned, and closed on detach, when the
            attach call loaded it).
        attach_seconds, detach_seconds: how long attaching and the last
            detach took.

    ``detach()`` (alias ``close()``) closes every fd, concurrently where the
    kernel makes closing slow; it is idempotent and runs at the end of a
    ``with`` block and on garbage collection.
    """

    def __init__(self, kind: str, target: str, method: str, groups: list[list[Fd]], *,
                 program: Any = None, owns_program: bool = False,
                 locations: Sequence[_elf.Location] = (), pid: int | None = None,
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
        ids = []
        if method != PERF_IOCTL:
            for g in groups:
                # the BPF link is the last fd of a group (perf fd first)
                try:
                    ids.append(_sys.link_info(g[-1]).id)
                except KernelError:
                    pass
        self.link_ids: tuple[int, ...] = tuple(ids)
        self._finalizer = weakref.finalize(self, _finalize, groups, parallel_close,
                                           program if owns_program else None)

    @property
    def fds(self) -> tuple[Fd, ...]:
        """The owned file descriptors (empty once detached)."""
        if not self._finalizer.alive:
            return ()
        return tuple(fd for g in self._groups for fd in g if not fd.closed)

    @property
    def closed(self) -> bool:
        """True once detached."""
        return not self._finalizer.alive

    @property
    def offsets(self) -> tuple[int, ...]:
        """File offsets of the uprobes (empty for other kinds)."""
        return tuple(loc.file_offset for loc in self.locations)

    def detach(self) -> None:
        """Detach and close everything (does nothing the second time)."""
        if self._finalizer.alive:
            t0 = time.perf_counter()
            self._finalizer()
            self.detach_seconds = time.perf_counter() - t0

    close = detach

    def info(self) -> list[_sys.LinkInfo]:
        """``link_info`` of each BPF link (type, id, program id, uprobe_multi details)."""
        if self.closed or self.method == PERF_IOCTL:
            return []
        return [_sys.link_info(g[-1]) for g in self._groups]

    def __enter__(self) -> "Link":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.detach()

    def __repr__(self) -> str:
        state = "detached" if self.closed else f"{len(self._groups)} attachment(s)"
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


# ================================================================== programs
def _prog_fd(prog: Any) -> int:
    if isinstance(prog, int):
        return prog
    if hasattr(prog, "fileno"):
        fd: int = prog.fileno()
        return fd
    return int(prog.fd)


def _is_loaded(prog: Any) -> bool:
    return isinstance(prog, (int, Fd)) or (hasattr(prog, "fileno") and hasattr(prog, "fd"))


def _check_type(prog: Any, want: int, what: str) -> None:
    ptype = getattr(prog, "prog_type", None)
    if ptype is not None and int(ptype) != int(want):
        raise AttachError(E.EINVAL, what, f"the program is of type {ProgType(ptype).name}",
                          f"{what} needs a program loaded as {ProgType(want).name} "
                          f"(load(p, {ProgType(want).name.lower()!r}))")


def _load(source: Any, prog_type: int, expected_attach_type: int = 0) -> Any:
    from .loader import load
    return load(source, prog_type, expected_attach_type=expected_attach_type)


def _prepare(prog: Any, prog_type: int, what: str, eat: int = 0) -> tuple[Any, bool]:
    """(loaded program, owned?) from a loaded program or a source to load."""
    if _is_loaded(prog):
        _check_type(prog, prog_type, what)
        return prog, False
    return _load(prog, prog_type, eat), True


# ===================================================================== uprobes
def uprobe_method(method: str = "auto") -> str:
    """The mechanism ``attach_uprobe*`` will use: ``"uprobe_multi"`` where the
    kernel has it, else ``"perf_link"``, else ``"perf_ioctl"``.

    An explicit ``method`` is checked against the kernel's features (raises
    :class:`NotSupportedError` with the feature probe's reason).
    """
    if method not in _METHODS:
        raise OptionError(f"method must be one of {', '.join(_METHODS)}, not {method!r}")
    if method == "auto":
        if features.has_uprobe_multi():
            return UPROBE_MULTI
        return PERF_LINK if features.has_perf_link() else PERF_IOCTL
    if method == UPROBE_MULTI:
        f = features.has_uprobe_multi()
    elif method == PERF_LINK:
        f = features.has_perf_link()
    else:
        f = features.has_uprobe_pmu()
    if method != UPROBE_MULTI and not features.has_uprobe_pmu():
        f = features.has_uprobe_pmu()
    if not f:
        raise NotSupportedError(E.EOPNOTSUPP, "attach_uprobe", f"method {method!r}", f.reason)
    return method


def uprobe_load_options(method: str = "auto") -> dict[str, int]:
    """Keyword arguments for :func:`pyebpf.loader.load` of a uprobe program::

        load(p, **uprobe_load_options())   # prog_type=KPROBE, expected_attach_type=48 or 0
    """
    m = uprobe_method(method)
    return {"prog_type": int(ProgType.KPROBE),
            "expected_attach_type": int(AttachType.TRACE_UPROBE_MULTI) if m == UPROBE_MULTI
            else 0}


def load_uprobe_program(source: Any, *, method: str = "auto", **load_kw: Any) -> Any:
    """Load a uprobe/uretprobe program with the options this kernel's attach
    mechanism needs (see :func:`uprobe_load_options`); extra keywords go to
    :func:`pyebpf.loader.load` (``maps=``, ``log_level=``...)."""
    from .loader import load
    opts = uprobe_load_options(method)
    loaded = load(source, opts["prog_type"], expected_attach_type=opts["expected_attach_type"],
                  **load_kw)
    return loaded


def _binary_path(binary: str, pid: int | None) -> str:
    return _elf.resolve_library(binary, pid)


def _one_location(ef: _elf.ElfFile, path: str, where: Any, check_boundary: bool,
                  retprobe: bool) -> _elf.Location:
    if isinstance(where, _elf.Location):
        loc = where
    elif isinstance(where, int) and not isinstance(where, bool):
        if where < 0:
            raise OptionError(f"file offset must be >= 0, not {where}")
        loc = ef.location_at_offset(where, check_boundary=check_boundary)
    elif isinstance(where, str):
        loc = ef.resolve(where, check_boundary=check_boundary)
    else:
        raise ArgumentTypeError(f"a probe location is a symbol string, an int file offset or an "
                                f"elf.Location, not {type(where).__name__}")
    if retprobe and loc.symbol is not None and loc.symbol_offset:
        raise _elf.ElfError(
            f"a uretprobe goes on a function's entry, not at {loc.name} in {path}: it "
            "replaces the return address the call pushed, which is only where the "
            "kernel expects it at the first instruction")
    return loc._replace(path=path)


def resolve_uprobes(binary: str, where: Iterable[Any], *, pid: int | None = None,
                    check_boundary: bool = True, retprobe: bool = False,
                    unsafe: bool = False) -> tuple[str, list[_elf.Location]]:
    """Resolve a binary name and its probe locations: ``(path, [Location...])``.

    Pure (no kernel): use it to check a probe before attaching.  See the
    module docstring for the forms of ``where``; ``unsafe=True`` (or
    ``check_boundary=False``) accepts locations not proven to start an
    instruction.
    """
    path = _binary_path(binary, pid)
    ef = _elf.open_elf(path)
    check = check_boundary and not unsafe
    return path, [_one_location(ef, path, w, check, retprobe) for w in where]


def resolve_uprobe(binary: str, where: Any, *, pid: int | None = None,
                   check_boundary: bool = True, retprobe: bool = False,
                   unsafe: bool = False) -> _elf.Location:
    """Resolve one probe location (see :func:`resolve_uprobes`)."""
    return resolve_uprobes(binary, [where], pid=pid, check_boundary=check_boundary,
                           retprobe=retprobe, unsafe=unsafe)[1][0]


def _check_pid(pid: int | None) -> None:
    if pid is None:
        return
    if pid <= 0:
        raise OptionError(f"pid must be a positive process id, not {pid} (None = every process)")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise AttachError(E.ESRCH, "attach_uprobe", f"pid {pid}",
                          "no such process (it exited?)") from None
    except PermissionError:
        pass


def attach_uprobe(prog: Any, binary: str, where: Any, *, pid: int | None = None,
                  retprobe: bool = False, cookie: int = 0, ref_ctr_offset: int = 0,
                  method: str = "auto", check_boundary: bool = True,
                  unsafe: bool = False) -> Link:
    """Attach ``prog`` to one uprobe (or uretprobe).

    Args:
        prog: a loaded KPROBE-type program (best: from :func:`load_uprobe_program`)
            or a program to load (DSL ``Program``, text, bytes).
        binary: a path, or a name like ``"libc"``, ``"libc.so.6"``, ``"python3"``.
        where: ``"sym"``, ``"sym+off"``, ``"sym@@VER"``, ``"0xADDR"`` (virtual
            address), an ``int`` file offset, or a :class:`pyebpf.elf.Location`.
        pid: only this process fires the probe (None: every process).
        retprobe: fire on return (``rax`` holds the return value).
        cookie: the value ``bpf_get_attach_cookie()`` returns in the program.
        ref_ctr_offset: file offset of a USDT semaphore the kernel increments
            while the probe is attached.
        method: ``"auto"``, ``"uprobe_multi"``, ``"perf_link"`` or ``"perf_ioctl"``.
        check_boundary: refuse locations not proven to start an instruction.
        unsafe: attach even where that is not proven (same as
            ``check_boundary=False``): the caller vouches for the address, since a
            breakpoint inside an instruction corrupts the traced program.

    Raises:
        SymbolNotFoundError, InstructionBoundaryError, LibraryNotFoundError
        (resolution); AttachError, NotSupportedError, PermissionDeniedError
        (kernel).
    """
    return attach_uprobes(prog, binary, [where], pid=pid, retprobe=retprobe,
                          cookies=[cookie], ref_ctr_offsets=[ref_ctr_offset],
                          method=method, check_boundary=check_boundary, unsafe=unsafe)


def attach_uretprobe(prog: Any, binary: str, where: Any, **kw: Any) -> Link:
    """:func:`attach_uprobe` with ``retprobe=True``."""
    return attach_uprobe(prog, binary, where, retprobe=True, **kw)


def attach_uprobes(prog: Any, binary: str, where: Sequence[Any], *,
                   cookies: Sequence[int] | None = None,
                   ref_ctr_offsets: Sequence[int] | None = None, pid: int | None = None,
                   retprobe: bool = False, method: str = "auto",
                   check_boundary: bool = True, unsafe: bool = False) -> Link:
    """Attach ``prog`` to many locations of one binary as one :class:`Link`.

    ``where`` holds locations in any form :func:`attach_uprobe` accepts (ints
    are file offsets, e.g. USDT probe sites); ``cookies`` and
    ``ref_ctr_offsets`` have one entry per location.  With uprobe_multi this
    is one kernel link; with perf events one event per location, all closed
    together (concurrently) on detach.  ``unsafe`` and ``check_boundary`` are
    those of :func:`attach_uprobe`.
    """
    where = list(where)
    if not where:
        raise OptionError("attach_uprobes needs at least one location")
    n = len(where)
    for name, seq in (("cookies", cookies), ("ref_ctr_offsets", ref_ctr_offsets)):
        if seq is not None and len(seq) != n:
            raise OptionError(f"{name} must have one entry per location ({n}), got {len(seq)}")
    cookies = [int(c) for c in cookies] if cookies is not None else [0] * n
    refs = [int(r) for r in ref_ctr_offsets] if ref_ctr_offsets is not None else [0] * n
    if any(c < 0 or c >= 1 << 64 for c in cookies):
        raise OptionError("cookies are u64 values")
    kind = "uretprobe" if retprobe else "uprobe"
    t0 = time.perf_counter()
    _check_pid(pid)       # first: a library name is looked up in the process's maps
    path, locs = resolve_uprobes(binary, where, pid=pid, check_boundary=check_boundary,
                                 retprobe=retprobe, unsafe=unsafe)
    chosen = uprobe_method(method)
    known_eat = None
    owned = False
    if _is_loaded(prog):
        _check_type(prog, ProgType.KPROBE, f"attach_{kind}")
        known_eat = getattr(prog, "expected_attach_type", None)
        if chosen == UPROBE_MULTI and known_eat not in (None, AttachType.TRACE_UPROBE_MULTI):
            if method == UPROBE_MULTI:
                raise AttachError(E.EINVAL, f"attach_{kind}", "method 'uprobe_multi'",
                                  "the program was loaded without expected_attach_type="
                                  "BPF_TRACE_UPROBE_MULTI (48); load it with "
                                  "load_uprobe_program() or **uprobe_load_options()")
            chosen = PERF_LINK if features.has_perf_link() else PERF_IOCTL
        elif chosen != UPROBE_MULTI and known_eat == AttachType.TRACE_UPROBE_MULTI and \
                chosen == PERF_LINK:
            raise AttachError(E.EINVAL, f"attach_{kind}", f"method {chosen!r}",
                              "the program was loaded for uprobe_multi "
                              "(expected_attach_type=48), which perf links refuse; load it "
                              "with uprobe_load_options(method) for that method")
    else:
        eat = AttachType.TRACE_UPROBE_MULTI if chosen == UPROBE_MULTI else 0
        prog = _load(prog, ProgType.KPROBE, eat)
        known_eat = eat
        owned = True
    target = f"{path}:" + ",".join(loc.name for loc in locs[:4]) + \
        (f",... ({n} locations)" if n > 4 else "")
    try:
        if chosen == UPROBE_MULTI:
            try:
                groups = [[_multi_link(prog, path, locs, cookies, refs, pid, retprobe, kind)]]
            except AttachError as exc:
                if known_eat is not None or exc.errno != E.EINVAL or method == UPROBE_MULTI:
                    raise
                # a program loaded elsewhere without expected_attach_type=48
                chosen = PERF_LINK if features.has_perf_link() else PERF_IOCTL
                groups = _perf_uprobes(prog, path, locs, cookies, refs, pid, retprobe,
                                       chosen, kind)
        else:
            groups = _perf_uprobes(prog, path, locs, cookies, refs, pid, retprobe, chosen,
                                   kind)
    except BaseException:
        if owned:
            prog.close()
        raise
    return Link(kind, target, chosen, groups, program=prog, owns_program=owned,
                locations=locs, pid=pid, cookies=cookies,
                parallel_close=chosen != UPROBE_MULTI,
                attach_seconds=time.perf_counter() - t0)


def _multi_link(prog: Any, path: str, locs: Sequence[_elf.Location], cookies: list[int],
                refs: list[int], pid: int | None, retprobe: bool, kind: str) -> Fd:
    try:
        return _sys.uprobe_multi_link(
            _prog_fd(prog), path, [loc.file_offset for loc in locs],
            ref_ctr_offsets=refs if any(refs) else None,
            cookies=cookies if any(cookies) else None, pid=pid or 0, retprobe=retprobe)
    except (PermissionDeniedError, NotSupportedError):
        raise
    except KernelError as exc:
        raise _attach_error(exc, kind, path, locs) from exc


def _attach_error(exc: KernelError, kind: str, path: str,
                  locs: Sequence[_elf.Location]) -> AttachError:
    where = ", ".join(loc.name for loc in locs[:6]) + (", ..." if len(locs) > 6 else "")
    hint = exc.hint
    if exc.errno == E.EINVAL and not hint.startswith("this kernel lacks"):
        hint = hint or "an offset may be outside the file"
    return AttachError(exc.errno or 0, f"attach_{kind}", f"{path} at {where}: "
                       f"{exc.operation} failed", hint)


def _perf_uprobes(prog: Any, path: str, locs: Sequence[_elf.Location], cookies: list[int],
                  refs: list[int], pid: int | None, retprobe: bool, method: str,
                  kind: str) -> list[list[Fd]]:
    if method == PERF_IOCTL and any(cookies):
        raise NotSupportedError(E.EOPNOTSUPP, f"attach_{kind}", "BPF cookies",
                                "cookies need BPF perf links (Linux 5.15+) or uprobe_multi: "
                                + features.has_perf_link().reason)
    groups: list[list[Fd]] = []
    try:
        for loc, cookie, ref in zip(locs, cookies, refs):
            attr = perf.uprobe_attr(path, loc.file_offset, retprobe=retprobe,
                                    ref_ctr_offset=ref)
            try:
                pfd = attr.open(pid=pid if pid else -1, cpu=-1 if pid else 0)
            except (PermissionDeniedError, NotSupportedError):
                raise
            except KernelError as exc:
                raise _attach_error(exc, kind, path, [loc]) from exc
            group = [pfd]
            groups.append(group)
            group.extend(_attach_perf_fd(prog, pfd, method, cookie))
    except BaseException:
        _close_groups(groups, True)
        raise
    return groups


def _attach_perf_fd(prog: Any, pfd: Fd, method: str, cookie: int = 0) -> list[Fd]:
    """Attach ``prog`` to an open perf event; returns the link fd (if any) to own."""
    if method == PERF_IOCTL:
        _sys.perf_event_set_bpf(pfd, _prog_fd(prog))
        _sys.perf_event_enable(pfd)
        return []
    lfd = _sys.perf_event_link(_prog_fd(prog), pfd, cookie)
    try:
        _sys.perf_event_enable(pfd)
    except KernelError:
        lfd.close()
        raise
    return [lfd]


def _perf_method(method: str, what: str) -> str:
    if method not in ("auto", PERF_LINK, PERF_IOCTL):
        raise OptionError(f"method for {what} must be 'auto', 'perf_link' or 'perf_ioctl', "
                          f"not {method!r}")
    if method == "auto":
        return PERF_LINK if features.has_perf_link() else PERF_IOCTL
    if method == PERF_LINK and not features.has_perf_link():
        raise NotSupportedError(E.EOPNOTSUPP, what, "perf links", features.has_perf_link().reason)
    return method


# ================================================================ tracepoints
_TRACEFS_DEFAULT = "/sys/kernel/tracing"
_TRACEFS_PLACES = (_TRACEFS_DEFAULT, "/sys/kernel/debug/tracing")
_tracefs_found: str | None = None


def _unescape_mount(path: str) -> str:
    import re
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def _tracefs_mounts() -> list[str]:
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, sep, right = line.partition(" - ")
                if not sep:
                    continue
                fstype = right.split()[0]
                if fstype == "tracefs":
                    out.append(_unescape_mount(left.split()[4]))
    except OSError:
        pass
    return out


def _tracefs_denied(path: str) -> str:
    """Why this user cannot use the tracefs mounted at ``path``."""
    try:
        st = os.stat(path)
        how = f" (mode {st.st_mode & 0o7777:o}, owner uid {st.st_uid})"
    except OSError:
        how = ""
    return f"tracefs is mounted at {path}{how}, but this user may not read it"


def tracefs_dir(mount: bool = True) -> str:
    """The tracefs mount point (``/sys/kernel/tracing`` usually).

    When tracefs is not mounted and ``mount`` is true, it is mounted at
    /sys/kernel/tracing (root only).  Otherwise raises
    :class:`PermissionDeniedError` (not root) or :class:`NotSupportedError`
    saying how to mount it.
    """
    global _tracefs_found
    if _tracefs_found and os.path.isdir(os.path.join(_tracefs_found, "events")):
        return _tracefs_found
    mounts = _tracefs_mounts()
    denied = None
    for c in mounts + list(_TRACEFS_PLACES):
        events = os.path.join(c, "events")
        try:
            os.stat(events)
        except PermissionError:        # mounted, but this user may not look inside
            denied = denied or c
            continue
        except OSError:
            continue
        if os.path.isdir(events):
            _tracefs_found = c
            return c
    if denied is not None:
        raise PermissionDeniedError(E.EACCES, "tracefs", _tracefs_denied(denied),
                                    "run as root (tracepoints need tracefs and CAP_PERFMON)")
    how = f"as root: mount -t tracefs nodev {_TRACEFS_DEFAULT}"
    if not mount:
        raise NotSupportedError(E.ENOENT, "tracefs", "tracefs is not mounted", how)
    if os.geteuid() != 0:
        raise PermissionDeniedError(E.EACCES, "tracefs",
                                    "tracefs is not mounted and only root can mount it", how)
    _sys.mount_tracefs(_TRACEFS_DEFAULT)
    if not os.path.isdir(os.path.join(_TRACEFS_DEFAULT, "events")):
        raise NotSupportedError(E.ENOENT, "tracefs", f"tracefs at {_TRACEFS_DEFAULT} has no "
                                "events directory", "the kernel lacks CONFIG_EVENT_TRACING")
    _tracefs_found = _TRACEFS_DEFAULT
    return _TRACEFS_DEFAULT


def _split_tp(name: str) -> tuple[str, str]:
    text = name.strip()
    for prefix in ("tracepoint:", "t:"):
        if text.startswith(prefix) and text.count(":") == 2:
            text = text[len(prefix):]
    sep = ":" if ":" in text else "/"
    cat, s, event = text.partition(sep)
    if not s or not cat or not event or sep in event:
        raise OptionError(f"a tracepoint is named 'category:event' (e.g. "
                          f"'syscalls:sys_enter_openat'), not {name!r}")
    return cat, event


def list_tracepoints(category: str | None = None) -> list[str]:
    """Every tracepoint as ``"category:event"`` (mounts tracefs if needed)."""
    events = os.path.join(tracefs_dir(), "events")
    cats = [category] if category else sorted(os.listdir(events))
    out = []
    for c in cats:
        d = os.path.join(events, c)
        try:
            names = sorted(os.listdir(d))
        except (NotADirectoryError, FileNotFoundError):
            continue
        out += [f"{c}:{n}" for n in names if os.path.isdir(os.path.join(d, n))]
    return out


def _tp_dir(name: str) -> tuple[str, str, str]:
    cat, event = _split_tp(name)
    d = os.path.join(tracefs_dir(), "events", cat, event)
    if not os.path.isfile(os.path.join(d, "id")):
        full = f"{cat}:{event}"
        in_cat = list_tracepoints(cat) if os.path.isdir(os.path.dirname(d)) else []
        everything = list_tracepoints()
        close = close_matches(full, in_cat, n=5, cutoff=0.6) or \
            close_matches(full, everything, n=5, cutoff=0.6)
        if not close and not in_cat:
            close = close_matches(cat, sorted({t.split(':')[0] for t in everything}),
                                              n=3, cutoff=0.6)
            close = [f"category {c}" for c in close]
        raise AttachError(E.ENOENT, "tracepoint", f"no tracepoint {full!r} "
                          f"({len(everything)} exist)",
                          ("close matches: " + ", ".join(close)) if close else
                          "list them with pyebpf.attach.list_tracepoints()")
    return cat, event, d


def tracepoint_id(name: str) -> int:
    """The perf event id of tracepoint ``"category:event"`` (from tracefs)."""
    _c, _e, d = _tp_dir(name)
    with open(os.path.join(d, "id")) as f:
        return int(f.read().strip())


@record
class TracepointField(Record):
    """One field of a tracepoint's record (the context of a TRACEPOINT program).

    ``type`` is the C declaration's type (``"const char *"``), ``array_len``
    the element count of a fixed array, ``data_loc`` marks a
    ``__data_loc`` field (a u32: offset of the data in the low 16 bits,
    length in the high 16).
    """

    name: str
    type: str
    offset: int
    size: int
    signed: bool
    array_len: int | None = None
    data_loc: bool = False
    common: bool = False

    def load(self, program: Any, dst: Any, ctx: Any = None) -> Any:
        """Emit ``dst = ctx->field`` (default ctx ``r1``) with the field's width,
        sign-extended when the field is signed."""
        if self.array_len is not None:
            raise ProgramError(f"{self.name} is an array ({self.type}[{self.array_len}]); "
                               f"read it with probe_read_kernel from ctx+{self.offset}")
        if self.size not in (1, 2, 4, 8):
            raise ProgramError(f"{self.name} is {self.size} bytes; only 1/2/4/8 load directly")
        if ctx is None:
            from .program import R1
            ctx = R1
        return program.load(dst, ctx, self.offset, self.size,
                            signed=self.signed and self.size < 8)


@record
class TracepointFormat(Record):
    """The parsed ``events/<category>/<event>/format`` file."""

    category: str
    name: str
    id: int
    fields: tuple[TracepointField, ...]
    print_fmt: str = ""

    @property
    def size(self) -> int:
        """Bytes up to the end of the last field."""
        return max((f.offset + f.size for f in self.fields), default=0)

    def field(self, name: str) -> TracepointField:
        """The field called ``name`` (also ``fmt[name]``); KeyError lists the fields."""
        for f in self.fields:
            if f.name == name:
                return f
        names = [f.name for f in self.fields]
        close = close_matches(name, names, n=4, cutoff=0.5)
        hint = f" (close: {', '.join(close)})" if close else ""
        raise UnknownNameError(f"{self.category}:{self.name} has no field {name!r}; fields: "
                               f"{', '.join(names)}{hint}")

    def __getitem__(self, name: str) -> TracepointField:  # type: ignore[override]
        return self.field(name)     # (a name, not a tuple index)

    def __contains__(self, name: object) -> bool:
        return any(f.name == name for f in self.fields)


_FIELD = (r"field:(?P<decl>[^;]*);\s*offset:(?P<off>\d+);\s*size:(?P<size>\d+);"
          r"(?:\s*signed:(?P<signed>-?\d+);)?")
_DECL = r"^(?P<type>.*?)\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?:\[(?P<len>[^\]]*)\])?\s*$"


def parse_tracepoint_format(text: str, category: str = "", name: str = "") -> TracepointFormat:
    """Parse the text of a tracepoint ``format`` file."""
    import re                        # (not at module level: it costs start-up ~5 ms)
    field_re, decl_re = re.compile(_FIELD), re.compile(_DECL)
    tp_id = 0
    fields: list[TracepointField] = []
    print_fmt = ""
    common = True
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("name:") and not name:
            name = s.split(":", 1)[1].strip()
        elif s.startswith("ID:"):
            tp_id = int(s.split(":", 1)[1])
        elif s.startswith("print fmt:"):
            print_fmt = s.split(":", 1)[1].strip()
        elif not s and fields:
            common = False
        else:
            m = field_re.search(s)
            if not m:
                continue
            decl = m.group("decl").strip()
            data_loc = decl.startswith("__data_loc")
            if data_loc:
                decl = decl[len("__data_loc"):].strip()
            dm = decl_re.match(decl)
            if not dm:
                continue
            ftype = dm.group("type").strip()
            alen = dm.group("len")
            array_len = None
            if alen is not None and not data_loc:
                try:
                    array_len = int(alen, 0)
                except ValueError:
                    array_len = 0
            if data_loc and ftype.endswith("[]"):
                ftype = ftype[:-2].strip()
            fields.append(TracepointField(
                dm.group("name"), ftype, int(m.group("off")), int(m.group("size")),
                m.group("signed") == "1", array_len, data_loc, common))
    return TracepointFormat(category, name, tp_id, tuple(fields), print_fmt)


def tracepoint_format(name: str) -> TracepointFormat:
    """Field names, offsets, sizes and signedness of tracepoint ``"category:event"``."""
    cat, event, d = _tp_dir(name)
    with open(os.path.join(d, "format")) as f:
        return parse_tracepoint_format(f.read(), cat, event)


def attach_tracepoint(prog: Any, name: str, *, method: str = "auto") -> Link:
    """Attach a TRACEPOINT program to ``"category:event"`` (e.g.
    ``"syscalls:sys_enter_openat"``), on every CPU and process.

    ``prog`` is loaded as ``"tracepoint"`` or is a source to load.  The
    program's context is the record described by :func:`tracepoint_format`.
    A wrong name raises :class:`AttachError` listing close matches.
    """
    t0 = time.perf_counter()
    tp_id = tracepoint_id(name)
    chosen = _perf_method(method, "attach_tracepoint")
    prog, owned = _prepare(prog, ProgType.TRACEPOINT, "attach_tracepoint")
    try:
        pfd = perf.tracepoint_attr(tp_id).open(pid=-1, cpu=0)
        try:
            extra = _attach_perf_fd(prog, pfd, chosen)
        except BaseException:
            pfd.close()
            raise
    except BaseException:
        if owned:
            prog.close()
        raise
    cat, event = _split_tp(name)
    return Link("tracepoint", f"{cat}:{event}", chosen, [[pfd] + extra], program=prog,
                owns_program=owned, attach_seconds=time.perf_counter() - t0)


# ============================================================ raw tracepoints
def list_raw_tracepoints() -> list[str]:
    """Names accepted by :func:`attach_raw_tracepoint` (from ``/proc/kallsyms``'
    ``__traceiter_*`` symbols; empty when kallsyms is unreadable)."""
    names = set()
    try:
        with open("/proc/kallsyms") as f:
            for line in f:
                i = line.find(" __traceiter_")
                if i >= 0:
                    names.add(line[i + len(" __traceiter_"):].split()[0])
    except OSError:
        pass
    return sorted(names)


def attach_raw_tracepoint(prog: Any, name: str) -> Link:
    """Attach a RAW_TRACEPOINT program to kernel tracepoint ``name`` (``"sys_enter"``,
    ``"sched_switch"``); no tracefs needed.  The context is ``u64 args[]``, the
    tracepoint's raw arguments."""
    t0 = time.perf_counter()
    prog, owned = _prepare(prog, ProgType.RAW_TRACEPOINT, "attach_raw_tracepoint")
    try:
        fd = _sys.raw_tracepoint_open(name, _prog_fd(prog))
    except KernelError as exc:
        if owned:
            prog.close()
        if exc.errno == E.ENOENT:
            known = list_raw_tracepoints()
            close = close_matches(name, known, n=5, cutoff=0.6)
            raise AttachError(E.ENOENT, "attach_raw_tracepoint",
                              f"no raw tracepoint {name!r} ({len(known)} exist)",
                              ("close matches: " + ", ".join(close)) if close else
                              "the name is a tracepoint name without category, e.g. "
                              "'sys_enter' or 'sched_switch'") from exc
        raise
    return Link("raw_tracepoint", name, "raw_tracepoint", [[fd]], program=prog,
                owns_program=owned, attach_seconds=time.perf_counter() - t0)


# ================================================================ perf events
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


def attach_perf_event(prog: Any, frequency: int | None = 99, *, period: int | None = None,
                      cpus: Iterable[int] | None = None, event: "str | tuple[int, int]" =
                      "cpu-clock", pid: int = -1, method: str = "auto") -> Link:
    """Attach a PERF_EVENT program to a sampling event on each CPU.

    By default the software ``cpu-clock`` event at ``frequency`` Hz on every
    online CPU, for every process.  ``period`` (events per sample) replaces
    ``frequency``; ``event`` is a name from :data:`PERF_EVENTS` or a
    ``(type, config)`` pair; ``pid`` restricts sampling to one process.
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
    cpu_list = list(cpus) if cpus is not None else online_cpus()
    if not cpu_list:
        raise OptionError("no CPUs to sample on")
    t0 = time.perf_counter()
    chosen = _perf_method(method, "attach_perf_event")
    prog, owned = _prepare(prog, ProgType.PERF_EVENT, "attach_perf_event")
    groups: list[list[Fd]] = []
    try:
        for cpu in cpu_list:
            a = perf.PerfAttr()
            p = a.ptr
            p.type = ptype
            p.config = config
            if frequency is not None:
                p.sample_freq = frequency
                p.flags = PERF_ATTR_FLAG_FREQ
            else:
                p.sample_period = period
            pfd = a.open(pid=pid, cpu=cpu)
            group = [pfd]
            groups.append(group)
            group.extend(_attach_perf_fd(prog, pfd, chosen))
    except BaseException:
        _close_groups(groups, False)
        if owned:
            prog.close()
        raise
    what = f"{event if isinstance(event, str) else event} " + \
        (f"@{frequency}Hz" if frequency is not None else f"every {period}") + \
        f" on CPUs {','.join(map(str, cpu_list))}"
    return Link("perf_event", what, chosen, groups, program=prog, owns_program=owned,
                pid=None if pid == -1 else pid, attach_seconds=time.perf_counter() - t0)


# ==================================================================== kprobes
def attach_kprobe(prog: Any, function: str, offset: int = 0, *, retprobe: bool = False,
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
    t0 = time.perf_counter()
    chosen = _perf_method(method, f"attach_{kind}")
    prog, owned = _prepare(prog, ProgType.KPROBE, f"attach_{kind}")
    try:
        try:
            pfd = perf.kprobe_attr(function, offset, retprobe=retprobe).open(pid=-1, cpu=0)
        except KernelError as exc:
            if isinstance(exc, PermissionDeniedError):
                raise
            raise AttachError(exc.errno or 0, f"attach_{kind}", f"{function}+{offset:#x}",
                              "no such kernel function, or it cannot be probed (inlined, "
                              "notrace, or blacklisted in /sys/kernel/debug/kprobes/"
                              "blacklist)") from exc
        try:
            extra = _attach_perf_fd(prog, pfd, chosen)
        except BaseException:
            pfd.close()
            raise
    except BaseException:
        if owned:
            prog.close()
        raise
    return Link(kind, f"{function}+{offset:#x}" if offset else function, chosen,
                [[pfd] + extra], program=prog, owns_program=owned,
                attach_seconds=time.perf_counter() - t0)


def attach_kretprobe(prog: Any, function: str, **kw: Any) -> Link:
    """:func:`attach_kprobe` with ``retprobe=True``."""
    return attach_kprobe(prog, function, retprobe=True, **kw)
