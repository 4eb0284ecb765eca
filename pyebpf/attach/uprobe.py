"""Uprobes and uretprobes: resolving their locations and attaching them.

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
"""
from __future__ import annotations

import errno as E
import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Sequence

    from ..loader import LoadedProgram
    from ._programs import AttachableProgram, ProgramSource

from .. import elf as _elf
from ..errors import (ArgumentTypeError, AttachError, KernelError, NotSupportedError,
                      OptionError, PermissionDeniedError)
from ..kernel import features, perf
from ..kernel import syscall as _sys
from ..kernel.constants import AttachType, ProgType
from ..kernel.syscall import Fd
from ._programs import check_type, is_loaded, load, prog_fd
from .link import PERF_IOCTL, PERF_LINK, UPROBE_MULTI, Link, attach_perf_fd, close_groups

__all__ = ["uprobe_method", "uprobe_load_options", "load_uprobe_program",
           "resolve_uprobe", "resolve_uprobes",
           "attach_uprobe", "attach_uretprobe", "attach_uprobes"]

_METHODS = ("auto", UPROBE_MULTI, PERF_LINK, PERF_IOCTL)


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


def load_uprobe_program(source: ProgramSource, *, method: str = "auto", **load_kw: Any
                        ) -> LoadedProgram:
    """Load a uprobe/uretprobe program with the options this kernel's attach
    mechanism needs (see :func:`uprobe_load_options`); extra keywords go to
    :func:`pyebpf.loader.load` (``maps=``, ``log_level=``...)."""
    from ..loader import load as load_program
    opts = uprobe_load_options(method)
    return load_program(source, opts["prog_type"],
                        expected_attach_type=opts["expected_attach_type"], **load_kw)


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


def attach_uprobe(prog: AttachableProgram, binary: str, where: Any, *, pid: int | None = None,
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


def attach_uretprobe(prog: AttachableProgram, binary: str, where: Any, **kw: Any) -> Link:
    """:func:`attach_uprobe` with ``retprobe=True``."""
    return attach_uprobe(prog, binary, where, retprobe=True, **kw)


def attach_uprobes(prog: AttachableProgram, binary: str, where: Sequence[Any], *,
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
    owned: LoadedProgram | None = None
    loaded: LoadedProgram | Fd | int
    if is_loaded(prog):
        loaded = prog
        check_type(prog, ProgType.KPROBE, f"attach_{kind}")
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
        loaded = owned = load(prog, ProgType.KPROBE, eat)
        known_eat = eat
    target = f"{path}:" + ",".join(loc.name for loc in locs[:4]) + \
        (f",... ({n} locations)" if n > 4 else "")
    try:
        if chosen == UPROBE_MULTI:
            try:
                groups = [[_multi_link(loaded, path, locs, cookies, refs, pid, retprobe, kind)]]
            except AttachError as exc:
                if known_eat is not None or exc.errno != E.EINVAL or method == UPROBE_MULTI:
                    raise
                # a program loaded elsewhere without expected_attach_type=48
                chosen = PERF_LINK if features.has_perf_link() else PERF_IOCTL
                groups = _perf_uprobes(loaded, path, locs, cookies, refs, pid, retprobe,
                                       chosen, kind)
        else:
            groups = _perf_uprobes(loaded, path, locs, cookies, refs, pid, retprobe, chosen,
                                   kind)
    except BaseException:
        if owned is not None:
            owned.close()
        raise
    return Link(kind, target, chosen, groups, program=loaded, owns_program=owned is not None,
                locations=locs, pid=pid, cookies=cookies,
                parallel_close=chosen != UPROBE_MULTI,
                attach_seconds=time.perf_counter() - t0)


def _multi_link(prog: LoadedProgram | Fd | int, path: str, locs: Sequence[_elf.Location], cookies: list[int],
                refs: list[int], pid: int | None, retprobe: bool, kind: str) -> Fd:
    try:
        return _sys.uprobe_multi_link(
            prog_fd(prog), path, [loc.file_offset for loc in locs],
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


def _perf_uprobes(prog: LoadedProgram | Fd | int, path: str, locs: Sequence[_elf.Location], cookies: list[int],
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
            group.extend(attach_perf_fd(prog, pfd, method, cookie))
    except BaseException:
        close_groups(groups, True)
        raise
    return groups
