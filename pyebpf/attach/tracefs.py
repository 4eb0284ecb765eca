"""Where tracefs is: found in the mount table or the usual places, mounted when absent.

Tracepoints need tracefs for their event ids and record formats; raw
tracepoints, perf events and uprobes never do.  :func:`tracefs_dir` remembers
the mount point it found.
"""
from __future__ import annotations

import errno as E
import os

from ..errors import NotSupportedError, PermissionDeniedError
from ..kernel import syscall as _sys

__all__ = ["tracefs_dir"]

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
