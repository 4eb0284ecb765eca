"""The kernel layer: the only part of pyebpf that calls the kernel.

* :mod:`.ffi` -- the one cffi ``cdef`` (UAPI layouts; ABI mode, no compiler)
* :mod:`.constants` -- command, map, program, attach and link type numbers, flags
* :mod:`.syscall` -- ``bpf()``, typed wrappers, :class:`Fd`, perf_event_open, ioctls
* :mod:`.perf` -- perf_event_attr builders (BPF output, uprobe PMU)
* :mod:`.features` -- cached feature probes
* :mod:`.cpus` -- possible/online CPUs
"""
from __future__ import annotations

from .constants import AttachType, Cmd, LinkType, MapType, ProgType
from .cpus import num_possible_cpus, online_cpus, possible_cpus
from .syscall import (Fd, JitedImage, LinkInfo, MapInfo, ProgInfo, TestRun, bpf,
                      enable_stats, link_create, link_get_fd_by_id, link_info,
                      map_create, map_get_fd_by_id, map_info, obj_get, obj_pin,
                      perf_event_link, perf_event_open, prog_get_fd_by_id, prog_info,
                      prog_jited, prog_jited_insns, prog_load, prog_test_run,
                      prog_xlated_insns, raw_tracepoint_open, uprobe_multi_link)

__all__ = [
    "AttachType", "Cmd", "LinkType", "MapType", "ProgType",
    "possible_cpus", "online_cpus", "num_possible_cpus",
    "Fd", "bpf", "map_create", "prog_load", "prog_test_run", "TestRun",
    "prog_info", "map_info", "link_info", "ProgInfo", "MapInfo", "LinkInfo",
    "JitedImage", "prog_xlated_insns", "prog_jited", "prog_jited_insns",
    "prog_get_fd_by_id", "map_get_fd_by_id", "link_get_fd_by_id", "enable_stats",
    "obj_pin", "obj_get", "link_create", "perf_event_link", "uprobe_multi_link",
    "raw_tracepoint_open", "perf_event_open", "bpf_available",
]

_available: str | None | bool = False


def bpf_available() -> str | None:
    """None when bpf() works here (a tiny array map can be created), else why not.

    The answer is cached after the first call.
    """
    global _available
    if _available is not False:
        return _available  # type: ignore[return-value]
    from ..errors import KernelError
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
