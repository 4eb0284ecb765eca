"""bpf(2) itself: attrs, the call, and :class:`Fd`; the conventions every wrapper keeps.

Conventions
-----------
* Every attr is sized libbpf-style: ``offsetofend(union bpf_attr, <last field
  this wrapper can set>)``.  Older kernels accept it as long as the bytes they
  do not know are zero, newer ones zero-extend.
* Python buffers handed to the kernel (keys, values, logs, paths) stay
  referenced by a local variable until the syscall has returned.
* Failures raise the exceptions of :mod:`pyebpf.errors`, with a hint that says
  what to try (chosen by the tables of :mod:`.hints`).  ``EAGAIN``/``EINTR``
  are retried a bounded number of times.
* File descriptors are owned by :class:`Fd` objects: closed by ``close()``, by a
  ``with`` block, or when garbage collected (every owner of kernel objects
  derives from :class:`.lifetime.Owner`); never fd 0.

The wrappers live beside this module, one per concern: :mod:`.mapops` (map
elements and batches), :mod:`.prog` (loading, test runs), :mod:`.objinfo`
(object info, ids), :mod:`.links`, :mod:`.fs` (bpffs, pinning, mounts) and
:mod:`.perf` (perf_event_open and its ioctls).
"""
from __future__ import annotations

import errno as E
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .ffi import CData

from ..errors import KernelError, OptionError
from .ffi import NR_BPF, ffi, offsetofend, sys_bpf
from .lifetime import Owner, close_fd

__all__ = ["Fd", "bpf", "try_bpf", "kernel_error", "new_attr", "attr_size", "addr", "as_fd",
           "obj_name", "buf", "decode_cstr", "cstr", "RETRIES"]

#: EAGAIN/EINTR retries (libbpf: PROG_LOAD_ATTEMPTS)
RETRIES = 5

_ATTR_P = "union bpf_attr *"


def attr_size(*fields: str) -> int:
    """``offsetofend(union bpf_attr, fields...)``: the size to pass for a command."""
    return offsetofend("union bpf_attr", *fields)


def new_attr() -> CData:
    """A zeroed ``union bpf_attr *`` (owned by the returned cdata)."""
    return ffi.new(_ATTR_P)


def addr(cdata: CData) -> int:
    """Address of a cffi object as the u64 an attr field wants."""
    return int(ffi.cast("uintptr_t", cdata))


def buf(data: bytes | bytearray | memoryview | None) -> CData:
    """A cffi view of ``data`` for an attr pointer (None for empty or no data)."""
    return ffi.from_buffer(data) if data else None


def decode_cstr(data: bytearray | None) -> str:
    """The NUL-terminated text the kernel wrote into ``data`` (a log, a path)."""
    if not data:
        return ""
    end = data.find(0)
    raw = data if end < 0 else data[:end]
    return raw.decode("utf-8", "replace")


def cstr(arr: CData) -> str:
    """A cffi ``char[]`` field (an object name) as text."""
    raw: bytes = ffi.string(arr)
    return raw.decode("utf-8", "replace")


def obj_name(name: str) -> bytes:
    """A kernel object name: at most 15 chars of ``[A-Za-z0-9_.]`` (others become ``_``)."""
    out = bytearray()
    for ch in name[:15]:
        out += ch.encode() if (ch.isascii() and (ch.isalnum() or ch in "_.")) else b"_"
    return bytes(out)


# --------------------------------------------------------------------- memlock
_memlock_done = False


def _raise_memlock() -> None:
    """Raise RLIMIT_MEMLOCK to infinity once, as libbpf does where it matters.

    Kernels before 5.11 charge maps and programs to it (and fail with EPERM
    at a few hundred KiB); newer kernels use memcg accounting and ignore it.
    :func:`try_bpf` calls this on the first EPERM and tries again, so that a
    newer kernel's process pays neither the ``resource`` module nor the
    system calls (libbpf probes for memcg accounting to the same end).
    """
    global _memlock_done
    _memlock_done = True
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        if soft != resource.RLIM_INFINITY:
            try:
                resource.setrlimit(resource.RLIMIT_MEMLOCK,
                                   (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            except (ValueError, OSError):
                if hard != soft:
                    resource.setrlimit(resource.RLIMIT_MEMLOCK, (hard, hard))
    except Exception:  # pragma: no cover - best effort only
        pass


# ------------------------------------------------------------------------ bpf()
def kernel_error(operation: str | int, err: int, detail: str = "",
                 **context: Any) -> KernelError:
    """The exception for ``operation`` failing with ``err``: :func:`.hints.kernel_error`.

    The policy tables of :mod:`.hints` are imported with the first failure, so
    that a start-up without one does not pay for them.
    """
    from .hints import kernel_error as choose
    return choose(operation, err, detail, **context)


def try_bpf(cmd: int, attr: CData, size: int) -> int:
    """Call ``bpf(cmd, attr, size)``; return the result (>= 0) or ``-errno``.

    Retries EAGAIN/EINTR up to 5 times.  ``attr`` is a cffi pointer (usually
    from :func:`new_attr`).
    """
    tries = 0
    while True:
        ret: int = sys_bpf(NR_BPF, cmd, attr, size)
        if ret >= 0:
            return ret
        err: int = ffi.errno
        if err in (E.EAGAIN, E.EINTR) and tries < RETRIES:
            tries += 1
            continue
        if err == E.EPERM and not _memlock_done:     # maybe a pre-5.11 kernel's memlock
            _raise_memlock()
            continue
        return -err


def bpf(cmd: int, attr: CData, size: int, detail: str = "") -> int:
    """``bpf(cmd, attr, size)`` that raises a :class:`KernelError` subclass on failure.

    ``size`` should be the offset-end of the last field set (see :func:`attr_size`).
    """
    ret = try_bpf(cmd, attr, size)
    if ret < 0:
        raise kernel_error(cmd, -ret, detail)
    return ret


# -------------------------------------------------------------------------- Fd
class Fd(Owner):
    """Owns one file descriptor.

    ``close()`` is idempotent; the fd is also closed at the end of a ``with``
    block and when the object is garbage collected (the lifetime of every
    :class:`~.lifetime.Owner`).  Fd 0 is never handed out: if the kernel
    returns 0 (stdin was closed), it is moved to the lowest free fd >= 1 with
    ``F_DUPFD_CLOEXEC`` (in many attrs 0 means "no fd").
    """

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        fd = int(fd)
        if fd < 0:
            raise OptionError(f"invalid file descriptor {fd}")
        if fd == 0:
            import fcntl            # (rare: not loaded at start-up)
            new = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 1)
            os.close(0)
            fd = new
        self._fd = fd
        self._own(close_fd, fd)

    @property
    def closed(self) -> bool:
        """True once closed or detached."""
        return self._fd < 0

    def fileno(self) -> int:
        """The fd number; raises ``KernelError(EBADF)`` once closed."""
        fd = self._fd
        if fd < 0:
            raise KernelError(E.EBADF, "Fd.fileno", "this file descriptor was already closed")
        return fd

    def __int__(self) -> int:
        return self.fileno()

    def _close_resources(self) -> None:
        self._fd = -1

    def detach(self) -> int:
        """Give up ownership: return the fd number, which this object no longer closes."""
        fd = self.fileno()
        self._disown()
        self._fd = -1
        return fd

    def dup(self) -> "Fd":
        """A new :class:`Fd` for the same open file (close-on-exec)."""
        import fcntl
        return Fd(fcntl.fcntl(self.fileno(), fcntl.F_DUPFD_CLOEXEC, 1))

    def __repr__(self) -> str:
        return f"<Fd {self._fd}>" if self._fd >= 0 else "<Fd closed>"


def as_fd(fd: "int | Fd | Any") -> int:
    """An fd number from an int, an :class:`Fd` or anything with ``fileno()``."""
    if isinstance(fd, int):
        return fd
    return fd.fileno()
