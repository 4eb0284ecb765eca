"""The kernel layer: the only part of pyebpf that calls the kernel.

* :mod:`.constants` -- command, map, program, attach and link type numbers,
  flags (pure: importing it, or this package, loads no cffi)
* :mod:`.ffi` -- the one cffi ``cdef`` (UAPI layouts; ABI mode, no compiler)
* :mod:`.core` -- ``bpf()``, attr sizing, :class:`Fd` and the syscall conventions
* :mod:`.hints` -- errno -> exception and hint, verifier hints (tables)
* :mod:`.mapops`, :mod:`.prog`, :mod:`.objinfo`, :mod:`.links`, :mod:`.fs` --
  the typed wrappers, one module per concern
* :mod:`.perf` -- perf_event_open, its ioctls, perf_event_attr builders
* :mod:`.process` -- process controls :mod:`os` lacks (prctl)
* :mod:`.syscall` -- every wrapper under one name (its table says where each lives)
* :mod:`.features` -- cached feature probes
* :mod:`.cpus` -- possible/online CPUs

The CPU helpers and wrappers this package names are imported on first use,
so that ``import pyebpf.kernel.constants`` costs no cffi.
"""
from __future__ import annotations

from .._lazy import lazy_dir, lazy_getattr
from .constants import AttachType, Cmd, LinkType, MapType, ProgType

TYPE_CHECKING = False
if TYPE_CHECKING:       # what __getattr__ imports on first use, as type checkers see it
    from .cpus import (num_possible_cpus as num_possible_cpus, online_cpus as online_cpus,
                       possible_cpus as possible_cpus)
    from .syscall import (Fd as Fd, JitedImage as JitedImage, LinkInfo as LinkInfo,
                          MapInfo as MapInfo, ProgInfo as ProgInfo, TestRun as TestRun,
                          bpf as bpf, enable_stats as enable_stats, link_create as link_create,
                          link_get_fd_by_id as link_get_fd_by_id, link_info as link_info,
                          map_create as map_create, map_get_fd_by_id as map_get_fd_by_id,
                          map_info as map_info, obj_get as obj_get, obj_pin as obj_pin,
                          perf_event_link as perf_event_link, perf_event_open as perf_event_open,
                          prog_get_fd_by_id as prog_get_fd_by_id, prog_info as prog_info,
                          prog_jited as prog_jited, prog_jited_insns as prog_jited_insns,
                          prog_load as prog_load, prog_test_run as prog_test_run,
                          prog_xlated_insns as prog_xlated_insns,
                          raw_tracepoint_open as raw_tracepoint_open,
                          uprobe_multi_link as uprobe_multi_link)

#: the names this package lends from :mod:`.cpus` and :mod:`.syscall` (imported on first use)
_LAZY = {
    **dict.fromkeys(("possible_cpus", "online_cpus", "num_possible_cpus"), "cpus"),
    **dict.fromkeys((
        "Fd", "bpf", "map_create", "prog_load", "prog_test_run", "TestRun",
        "prog_info", "map_info", "link_info", "ProgInfo", "MapInfo", "LinkInfo",
        "JitedImage", "prog_xlated_insns", "prog_jited", "prog_jited_insns",
        "prog_get_fd_by_id", "map_get_fd_by_id", "link_get_fd_by_id", "enable_stats",
        "obj_pin", "obj_get", "link_create", "perf_event_link", "uprobe_multi_link",
        "raw_tracepoint_open", "perf_event_open",
    ), "syscall"),
}

__all__ = [
    "AttachType", "Cmd", "LinkType", "MapType", "ProgType", *_LAZY, "bpf_available",
]


__getattr__ = lazy_getattr(globals(), _LAZY)
__dir__ = lazy_dir(globals(), _LAZY)


_available: str | None | bool = False


def bpf_available() -> str | None:
    """None when bpf() works here (a tiny array map can be created), else why not.

    The answer is cached after the first call.
    """
    global _available
    if _available is not False:
        return _available  # type: ignore[return-value]
    from ..errors import KernelError
    from .mapops import map_create
    reason: str | None
    try:
        fd = map_create(MapType.ARRAY, 4, 4, 1, name="pyebpf_probe")
    except KernelError as exc:
        reason = str(exc)
    except OSError as exc:  # pragma: no cover - e.g. seccomp returning ENOSYS oddly
        reason = f"bpf() failed: {exc}"
    except Exception as exc:  # pragma: no cover - cffi/libc trouble
        reason = f"bpf() cannot be called: {type(exc).__name__}: {exc}"
    else:
        fd.close()
        reason = None
    _available = reason
    return reason
