"""bpf(2), perf_event_open(2) and their ioctls: the only code that calls the kernel.

Conventions
-----------
* Every attr is sized libbpf-style: ``offsetofend(union bpf_attr, <last field
  this wrapper can set>)``.  Older kernels accept it as long as the bytes they
  do not know are zero, newer ones zero-extend.
* Python buffers handed to the kernel (keys, values, logs, paths) stay
  referenced by a local variable until the syscall has returned.
* Failures raise the exceptions of :mod:`pyebpf.errors`, with a hint that says
  what to try.  ``EAGAIN``/``EINTR`` are retried a bounded number of times.
* File descriptors are owned by :class:`Fd` objects: closed by ``close()``, by a
  ``with`` block, or when garbage collected; never fd 0.
"""
from __future__ import annotations

import errno as E
import fcntl
import os
import weakref

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Sequence

    from .ffi import CData

from ..errors import (AttachError, EncodingError, KernelError, MapFullError,
                      NotSupportedError, OptionError, PermissionDeniedError,
                      ResourceLimitError, SizeError, VerifierError)
from .constants import (BPF_ANY, BPF_STATS_RUN_TIME, PERF_EVENT_IOC_DISABLE,
                        PERF_EVENT_IOC_ENABLE, PERF_EVENT_IOC_ID,
                        PERF_EVENT_IOC_PAUSE_OUTPUT, PERF_EVENT_IOC_RESET,
                        PERF_EVENT_IOC_SET_BPF, PERF_EVENT_IOC_SET_OUTPUT,
                        PERF_FLAG_FD_CLOEXEC, AttachType, Cmd, LinkType,
                        MapType, ProgType, enum_name)
from .ffi import NR_BPF, NR_PERF_EVENT_OPEN, ffi, lib, offsetofend, sys_bpf, \
    sys_ioctl, sys_perf_event_open
from .._record import Record, record

__all__ = [
    "ENOTSUPP", "Fd", "bpf", "try_bpf", "error_for", "new_attr", "attr_size",
    "map_create", "map_lookup", "map_update", "map_delete", "map_get_next_key",
    "map_lookup_and_delete", "map_freeze", "map_lookup_batch", "map_update_batch",
    "map_delete_batch", "MapOps", "BatchOps",
    "obj_pin", "obj_get", "bpffs_mounted", "mount_bpffs", "ensure_bpffs",
    "prog_load", "verifier_message", "prog_test_run", "TestRun",
    "ProgInfo", "MapInfo", "LinkInfo", "UprobeMultiLinkInfo", "JitedImage",
    "obj_get_info_by_fd", "prog_info", "map_info", "link_info",
    "prog_xlated_insns", "prog_jited", "prog_jited_insns",
    "prog_get_fd_by_id", "map_get_fd_by_id", "link_get_fd_by_id",
    "prog_get_next_id", "map_get_next_id", "link_get_next_id",
    "enable_stats", "link_create", "perf_event_link", "uprobe_multi_link",
    "raw_tracepoint_open", "link_detach", "task_fd_query", "TaskFdQuery",
    "perf_event_open", "perf_event_enable", "perf_event_disable",
    "perf_event_reset", "perf_event_set_bpf", "perf_event_set_output",
    "perf_event_pause_output", "perf_event_id",
]

#: Kernel-internal "operation not supported" that leaks out of some bpf() paths.
ENOTSUPP = 524
_NOT_SUPPORTED = (E.EOPNOTSUPP, ENOTSUPP)
_RETRIES = 5                      # EAGAIN/EINTR retries (libbpf: PROG_LOAD_ATTEMPTS)
_LOG_MAX = (1 << 30) - 1           # the kernel's bound on log_size (UINT_MAX >> 2)
DEFAULT_LOG_SIZE = 64 * 1024

_ATTR = "union bpf_attr"
_ATTR_P = "union bpf_attr *"


def attr_size(*fields: str) -> int:
    """``offsetofend(union bpf_attr, fields...)``: the size to pass for a command."""
    return offsetofend(_ATTR, *fields)


_SZ_MAP_CREATE = attr_size("map_create", "map_extra")
_SZ_ELEM = attr_size("elem", "flags")
_SZ_BATCH = attr_size("batch", "flags")
_SZ_PROG_LOAD = attr_size("prog_load", "log_true_size")
_SZ_PROG_LOAD_FD_ARRAY_CNT = attr_size("prog_load", "fd_array_cnt")
_SZ_OBJ = attr_size("obj", "file_flags")
_SZ_TEST = attr_size("test", "batch_size")
_SZ_GET_ID = attr_size("get_id", "open_flags")
_SZ_INFO = attr_size("info", "info")
_SZ_RAW_TP = attr_size("raw_tracepoint", "prog_fd")
_SZ_RAW_TP_COOKIE = attr_size("raw_tracepoint", "cookie")
_SZ_TASK_FD_QUERY = attr_size("task_fd_query", "probe_addr")
_SZ_LINK_CREATE = attr_size("link_create", "uprobe_multi", "pid")
_SZ_LINK_DETACH = attr_size("link_detach", "link_fd")
_SZ_ENABLE_STATS = attr_size("enable_stats", "type")


def new_attr() -> CData:
    """A zeroed ``union bpf_attr *`` (owned by the returned cdata)."""
    return ffi.new(_ATTR_P)


def _addr(cdata: CData) -> int:
    """Address of a cffi object as the u64 an attr field wants."""
    return int(ffi.cast("uintptr_t", cdata))


def _cmd_name(cmd: int) -> str:
    return "BPF_" + enum_name(Cmd, cmd)


# --------------------------------------------------------------------- memlock
_memlock_done = False


def _raise_memlock() -> None:
    """Raise RLIMIT_MEMLOCK to infinity once, as libbpf does.

    Kernels before 5.11 charge maps and programs to it (and fail with EPERM
    or ENOMEM at a few hundred KiB); newer kernels use memcg accounting and
    ignore it, so this is harmless there.
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


# ---------------------------------------------------------------------- errors
def _read_sysctl(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _perm_hint(perf: bool = False) -> str:
    parts = []
    if os.geteuid() != 0:
        parts.append("run as root, or give the process CAP_BPF"
                     + (" and CAP_PERFMON" if perf else " (plus CAP_PERFMON for tracing "
                        "programs, CAP_NET_ADMIN for network ones)"))
        ub = _read_sysctl("/proc/sys/kernel/unprivileged_bpf_disabled")
        if ub and ub != "0":
            parts.append(f"kernel.unprivileged_bpf_disabled={ub} forbids bpf() "
                         "without CAP_BPF")
    else:
        parts.append("running as root, so a security policy (kernel lockdown, an LSM, "
                     "seccomp) or the object itself (read-only / frozen map) refuses this")
    if perf:
        para = _read_sysctl("/proc/sys/kernel/perf_event_paranoid")
        if para is not None:
            parts.append(f"kernel.perf_event_paranoid={para} (needs CAP_PERFMON "
                         "or a lower value)")
    return "; ".join(parts)


def error_for(err: int, operation: str, detail: str = "", hint: str = "",
              *, cls: type[KernelError] | None = None) -> KernelError:
    """Build the exception for a failed system call.

    ``err`` is the errno, ``operation`` names the call (``"BPF_MAP_CREATE"``),
    ``detail`` says what was being done, ``hint`` what to try (a default hint
    is chosen from the errno when empty).  ``cls`` forces the class.
    """
    if cls is None:
        if err in (E.EPERM, E.EACCES):
            cls = PermissionDeniedError
            hint = hint or _perm_hint()
        elif err in (E.ENOMEM, E.EMFILE, E.ENFILE, E.E2BIG):
            cls = ResourceLimitError
            if not hint:
                if err == E.ENOMEM:
                    hint = ("out of memory or over RLIMIT_MEMLOCK (on kernels before 5.11 "
                            "BPF memory is charged to it): try `ulimit -l unlimited` or a "
                            "smaller max_entries")
                elif err in (E.EMFILE, E.ENFILE):
                    hint = ("too many open files: close unused maps/programs/links or "
                            "raise `ulimit -n`")
                else:
                    hint = "an argument exceeds a kernel limit"
        elif err in _NOT_SUPPORTED:
            cls = NotSupportedError
            hint = hint or "this kernel does not support the operation for this object type"
        else:
            cls = KernelError
            if not hint and err == E.EBADF:
                hint = "the file descriptor is not open or is not the right kind of BPF object"
    return cls(err, operation, detail, hint)


# ------------------------------------------------------------------------ bpf()
def try_bpf(cmd: int, attr: CData, size: int) -> int:
    """Call ``bpf(cmd, attr, size)``; return the result (>= 0) or ``-errno``.

    Retries EAGAIN/EINTR up to 5 times.  ``attr`` is a cffi pointer (usually
    from :func:`new_attr`).
    """
    if not _memlock_done:
        _raise_memlock()
    tries = 0
    while True:
        ret: int = sys_bpf(NR_BPF, cmd, attr, size)
        if ret >= 0:
            return ret
        err: int = ffi.errno
        if err in (E.EAGAIN, E.EINTR) and tries < _RETRIES:
            tries += 1
            continue
        return -err


def bpf(cmd: int, attr: CData, size: int, detail: str = "") -> int:
    """``bpf(cmd, attr, size)`` that raises a :class:`KernelError` subclass on failure.

    ``size`` should be the offset-end of the last field set (see :func:`attr_size`).
    """
    ret = try_bpf(cmd, attr, size)
    if ret < 0:
        raise error_for(-ret, _cmd_name(cmd), detail)
    return ret


# -------------------------------------------------------------------------- Fd
def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


class Fd:
    """Owns one file descriptor.

    ``close()`` is idempotent; the fd is also closed at the end of a ``with``
    block and when the object is garbage collected.  Fd 0 is never handed out:
    if the kernel returns 0 (stdin was closed), it is moved to the lowest free
    fd >= 1 with ``F_DUPFD_CLOEXEC`` (in many attrs 0 means "no fd").
    """

    __slots__ = ("_fd", "_finalizer", "__weakref__")

    def __init__(self, fd: int) -> None:
        fd = int(fd)
        if fd < 0:
            raise OptionError(f"invalid file descriptor {fd}")
        if fd == 0:
            new = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 1)
            os.close(0)
            fd = new
        self._fd = fd
        self._finalizer = weakref.finalize(self, _close_quietly, fd)

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

    def close(self) -> None:
        """Close the fd (does nothing the second time)."""
        if self._fd >= 0:
            self._fd = -1
            self._finalizer()

    def detach(self) -> int:
        """Give up ownership: return the fd number, which this object no longer closes."""
        fd = self.fileno()
        self._finalizer.detach()
        self._fd = -1
        return fd

    def dup(self) -> "Fd":
        """A new :class:`Fd` for the same open file (close-on-exec)."""
        return Fd(fcntl.fcntl(self.fileno(), fcntl.F_DUPFD_CLOEXEC, 1))

    def __enter__(self) -> "Fd":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Fd {self._fd}>" if self._fd >= 0 else "<Fd closed>"


def _as_fd(fd: "int | Fd | Any") -> int:
    """An fd number from an int, an :class:`Fd` or anything with ``fileno()``."""
    if isinstance(fd, int):
        return fd
    return fd.fileno()


def _obj_name(name: str) -> bytes:
    """A kernel object name: at most 15 chars of ``[A-Za-z0-9_.]`` (others become ``_``)."""
    out = bytearray()
    for ch in name[:15]:
        out += ch.encode() if (ch.isascii() and (ch.isalnum() or ch in "_.")) else b"_"
    return bytes(out)


# ------------------------------------------------------------------------ maps
def map_create(map_type: int, key_size: int, value_size: int, max_entries: int, *,
               flags: int = 0, name: str = "", inner_map_fd: int = 0,
               numa_node: int | None = None, map_extra: int = 0, btf_fd: int = 0,
               btf_key_type_id: int = 0, btf_value_type_id: int = 0,
               map_ifindex: int = 0) -> Fd:
    """BPF_MAP_CREATE.  Returns the map's :class:`Fd`.

    ``numa_node`` sets BPF_F_NUMA_NODE.  Raises :class:`NotSupportedError` when
    the kernel rejects the type or the sizes (EINVAL), with the reason spelled out.
    """
    attr = new_attr()
    mc = attr.map_create
    mc.map_type = map_type
    mc.key_size = key_size
    mc.value_size = value_size
    mc.max_entries = max_entries
    mc.map_flags = flags | (4 if numa_node is not None else 0)
    mc.inner_map_fd = _as_fd(inner_map_fd)
    mc.numa_node = numa_node or 0
    nm = _obj_name(name)
    ffi.memmove(mc.map_name, nm, len(nm))
    mc.map_ifindex = map_ifindex
    mc.btf_fd = btf_fd
    mc.btf_key_type_id = btf_key_type_id
    mc.btf_value_type_id = btf_value_type_id
    mc.map_extra = map_extra
    ret = try_bpf(Cmd.MAP_CREATE, attr, _SZ_MAP_CREATE)
    if ret < 0:
        err = -ret
        tname = enum_name(MapType, map_type)
        what = (f"map type {tname} ({map_type}), key_size={key_size}, "
                f"value_size={value_size}, max_entries={max_entries}, flags={flags:#x}")
        if err == E.EINVAL:
            raise NotSupportedError(
                err, "BPF_MAP_CREATE", what,
                f"map type {tname} is not supported by this kernel, or its key/value "
                "size, max_entries or flags are invalid for it (e.g. PERF_EVENT_ARRAY "
                "needs 4/4; RINGBUF needs 0/0 and a power-of-2 multiple of the page "
                "size; QUEUE/STACK need key_size 0)")
        raise error_for(err, "BPF_MAP_CREATE", what)
    return Fd(ret)


def _elem_attr(fd: int, key_cd: CData, value_cd: CData, flags: int) -> CData:
    attr = new_attr()
    el = attr.elem
    el.map_fd = fd
    el.key = _addr(key_cd) if key_cd is not None else 0
    el.value = _addr(value_cd) if value_cd is not None else 0
    el.flags = flags
    return attr


def _map_elem_error(cmd: int, err: int, fd: int) -> KernelError:
    op = _cmd_name(cmd)
    if cmd == Cmd.MAP_UPDATE_ELEM:
        if err == E.E2BIG:
            return MapFullError(err, op, f"map fd {fd} is full (or the array index is out "
                                "of range)", "delete elements, raise max_entries, or use "
                                "an LRU map that evicts old entries")
        if err == E.EEXIST:
            return KernelError(err, op, "the key already exists and BPF_NOEXIST was given")
        if err == E.EPERM:
            return PermissionDeniedError(
                err, op, f"map fd {fd} refused the update from user space",
                "the map is frozen (BPF_MAP_FREEZE) or was created with BPF_F_RDONLY; "
                "otherwise: " + _perm_hint())
        if err == E.EINVAL:
            return KernelError(err, op, f"map fd {fd}",
                               "bad flags for this map type (BPF_F_LOCK needs a spin lock "
                               "in the value), or the map does not allow updates from user "
                               "space")
    if cmd == Cmd.MAP_DELETE_ELEM and err == E.EINVAL:
        return NotSupportedError(err, op, f"map fd {fd}",
                                 "elements of array maps cannot be deleted; write zero instead")
    if err in _NOT_SUPPORTED:
        return NotSupportedError(err, op, f"map fd {fd}",
                                 "this map type does not support the operation from user space")
    if err == E.EINVAL:
        return KernelError(err, op, f"fd {fd}",
                           "the fd is not a BPF map, or the flags are invalid for this map type")
    return error_for(err, op, f"map fd {fd}")


def _buf(data: bytes | bytearray | memoryview | None) -> CData:
    return ffi.from_buffer(data) if data else None


def map_lookup(fd: "int | Fd", key: bytes | None, value_size: int, flags: int = 0) -> bytes | None:
    """BPF_MAP_LOOKUP_ELEM: the value bytes (``value_size`` long), or None if absent.

    ``key`` is None for queue/stack maps (peek).  For per-CPU maps
    ``value_size`` must be ``round_up(value_size, 8) * num_possible_cpus()``.
    """
    fd = _as_fd(fd)
    kb = _buf(key)
    vb = bytearray(value_size)
    vcd = ffi.from_buffer(vb)
    attr = _elem_attr(fd, kb, vcd, flags)
    ret = try_bpf(Cmd.MAP_LOOKUP_ELEM, attr, _SZ_ELEM)
    if ret < 0:
        if ret == -E.ENOENT:
            return None
        raise _map_elem_error(Cmd.MAP_LOOKUP_ELEM, -ret, fd)
    return bytes(vb)


def map_update(fd: "int | Fd", key: bytes | None, value: bytes, flags: int = BPF_ANY) -> None:
    """BPF_MAP_UPDATE_ELEM (``key`` None for queue/stack push)."""
    fd = _as_fd(fd)
    kb = _buf(key)
    vb = ffi.from_buffer(value)
    attr = _elem_attr(fd, kb, vb, flags)
    ret = try_bpf(Cmd.MAP_UPDATE_ELEM, attr, _SZ_ELEM)
    if ret < 0:
        raise _map_elem_error(Cmd.MAP_UPDATE_ELEM, -ret, fd)


def map_delete(fd: "int | Fd", key: bytes) -> bool:
    """BPF_MAP_DELETE_ELEM; False if the key was absent."""
    fd = _as_fd(fd)
    kb = _buf(key)
    attr = _elem_attr(fd, kb, None, 0)
    ret = try_bpf(Cmd.MAP_DELETE_ELEM, attr, _SZ_ELEM)
    if ret < 0:
        if ret == -E.ENOENT:
            return False
        raise _map_elem_error(Cmd.MAP_DELETE_ELEM, -ret, fd)
    return True


def map_get_next_key(fd: "int | Fd", key: bytes | None, key_size: int) -> bytes | None:
    """BPF_MAP_GET_NEXT_KEY: the key after ``key`` (None: the first), or None at the end."""
    fd = _as_fd(fd)
    kb = _buf(key)
    nb = bytearray(key_size)
    ncd = ffi.from_buffer(nb)
    attr = _elem_attr(fd, kb, ncd, 0)
    ret = try_bpf(Cmd.MAP_GET_NEXT_KEY, attr, _SZ_ELEM)
    if ret < 0:
        if ret == -E.ENOENT:
            return None
        raise _map_elem_error(Cmd.MAP_GET_NEXT_KEY, -ret, fd)
    return bytes(nb)


def map_lookup_and_delete(fd: "int | Fd", key: bytes | None, value_size: int,
                          flags: int = 0) -> bytes | None:
    """BPF_MAP_LOOKUP_AND_DELETE_ELEM (queue/stack pop with ``key`` None); None if empty/absent."""
    fd = _as_fd(fd)
    kb = _buf(key)
    vb = bytearray(value_size)
    vcd = ffi.from_buffer(vb)
    attr = _elem_attr(fd, kb, vcd, flags)
    ret = try_bpf(Cmd.MAP_LOOKUP_AND_DELETE_ELEM, attr, _SZ_ELEM)
    if ret < 0:
        if ret == -E.ENOENT:
            return None
        raise _map_elem_error(Cmd.MAP_LOOKUP_AND_DELETE_ELEM, -ret, fd)
    return bytes(vb)


def map_freeze(fd: "int | Fd") -> None:
    """BPF_MAP_FREEZE: make the map read-only from user space, for good."""
    fd = _as_fd(fd)
    attr = new_attr()
    attr.elem.map_fd = fd
    ret = try_bpf(Cmd.MAP_FREEZE, attr, _SZ_ELEM)
    if ret < 0:
        err = -ret
        if err == E.EBUSY:
            raise KernelError(err, "BPF_MAP_FREEZE", f"map fd {fd}",
                              "the map is mmap'ed writable or already frozen")
        if err == E.EINVAL:
            raise NotSupportedError(err, "BPF_MAP_FREEZE", f"map fd {fd}",
                                    "this kernel or map type cannot be frozen")
        raise error_for(err, "BPF_MAP_FREEZE", f"map fd {fd}")


class MapOps:
    """Pre-allocated attrs and buffers for fast element operations on one map.

    The caller packs the key into :attr:`key` (a bytearray of ``key_size``),
    calls an operation, and reads the value from :attr:`value`.  Nothing is
    allocated per call.  Not thread-safe: the owner serialises calls.

    Operations return True on success and False when the kernel says ENOENT
    (absent key, empty queue, end of iteration); other errors raise.
    """

    __slots__ = ("fd", "key_size", "value_size", "key", "value", "next_key",
                 "_kcd", "_vcd", "_ncd", "_attrs", "_a_lookup", "_a_update",
                 "_a_delete", "_a_next", "_a_first", "_a_lookup_del", "_update_el",
                 "_uflags")

    def __init__(self, fd: int, key_size: int, value_size: int) -> None:
        self.fd = fd
        self.key_size = key_size
        self.value_size = value_size
        self.key = bytearray(key_size)
        self.value = bytearray(value_size)
        self.next_key = bytearray(key_size)
        self._kcd = ffi.from_buffer(self.key) if key_size else None
        self._vcd = ffi.from_buffer(self.value) if value_size else None
        self._ncd = ffi.from_buffer(self.next_key) if key_size else None
        k = _addr(self._kcd) if key_size else 0
        v = _addr(self._vcd) if value_size else 0
        n = _addr(self._ncd) if key_size else 0
        self._attrs = attrs = ffi.new("union bpf_attr[6]")
        for i, (kk, vv) in enumerate(((k, v), (k, v), (k, 0), (k, n), (0, n), (k, v))):
            el = attrs[i].elem
            el.map_fd = fd
            el.key = kk
            el.value = vv
        self._a_lookup = attrs + 0
        self._a_update = attrs + 1
        self._update_el = attrs[1].elem
        self._a_delete = attrs + 2
        self._a_next = attrs + 3
        self._a_first = attrs + 4
        self._a_lookup_del = attrs + 5
        self._uflags = 0

    def invalidate(self) -> None:
        """Point every attr at an impossible fd (after the map's fd is closed,
        its number may be reused by another object)."""
        for i in range(6):
            self._attrs[i].elem.map_fd = 0xFFFFFFFF

    def _fail(self, cmd: int, attr: CData) -> bool:
        err = ffi.errno
        tries = 0
        while err in (E.EAGAIN, E.EINTR) and tries < _RETRIES:
            tries += 1
            if sys_bpf(NR_BPF, cmd, attr, _SZ_ELEM) >= 0:
                return True
            err = ffi.errno
        if err == E.ENOENT:
            return False
        raise _map_elem_error(cmd, err, self.fd)

    def lookup(self) -> bool:
        """Look up :attr:`key`; the value lands in :attr:`value`."""
        if sys_bpf(NR_BPF, 1, self._a_lookup, _SZ_ELEM) < 0:
            return self._fail(1, self._a_lookup)
        return True

    def update(self, flags: int = BPF_ANY) -> bool:
        """Store :attr:`value` under :attr:`key` (False: BPF_EXIST and key absent)."""
        if flags != self._uflags:
            self._update_el.flags = self._uflags = flags
        if sys_bpf(NR_BPF, 2, self._a_update, _SZ_ELEM) < 0:
            return self._fail(2, self._a_update)
        return True

    def delete(self) -> bool:
        """Delete :attr:`key` (False: absent)."""
        if sys_bpf(NR_BPF, 3, self._a_delete, _SZ_ELEM) < 0:
            return self._fail(3, self._a_delete)
        return True

    def next(self, first: bool = False) -> bool:
        """Put the key after :attr:`key` (or the first key) in :attr:`next_key`."""
        a = self._a_first if first else self._a_next
        if sys_bpf(NR_BPF, 4, a, _SZ_ELEM) < 0:
            return self._fail(4, a)
        return True

    def lookup_and_delete(self) -> bool:
        """Pop :attr:`key` (or the head of a queue/stack) into :attr:`value`."""
        if sys_bpf(NR_BPF, 21, self._a_lookup_del, _SZ_ELEM) < 0:
            return self._fail(21, self._a_lookup_del)
        return True


class BatchOps:
    """Buffers and attr for the BPF_MAP_*_BATCH commands on one map.

    :attr:`keys` and :attr:`values` hold up to :attr:`count` packed entries.
    ``value_size`` is the per-entry size as the kernel copies it (per-CPU maps:
    ``round_up(value_size, 8) * num_possible_cpus()``).
    """

    __slots__ = ("fd", "key_size", "value_size", "count", "keys", "values",
                 "_kcd", "_vcd", "_tok", "_tokcd", "_attr", "_b")

    def __init__(self, fd: int, key_size: int, value_size: int, count: int) -> None:
        self.fd = fd
        self.key_size = key_size
        self.value_size = value_size
        self._alloc(count)
        tsz = max(key_size, 8)
        self._tok = [bytearray(tsz), bytearray(tsz)]
        self._tokcd = [ffi.from_buffer(t) for t in self._tok]
        self._attr = new_attr()
        self._b = self._attr.batch
        self._b.map_fd = fd

    def _alloc(self, count: int) -> None:
        self.count = count
        self.keys = bytearray(self.key_size * count)
        self.values = bytearray(self.value_size * count)
        self._kcd = ffi.from_buffer(self.keys)
        self._vcd = ffi.from_buffer(self.values)

    def _call(self, cmd: int) -> int:
        return try_bpf(cmd, self._attr, _SZ_BATCH)

    def _error(self, cmd: int, err: int, done: int, total: int) -> KernelError:
        op = _cmd_name(cmd)
        detail = f"map fd {self.fd}, after {done} of {total} elements"
        if err in _NOT_SUPPORTED or err == E.EINVAL and cmd != Cmd.MAP_UPDATE_BATCH:
            return NotSupportedError(err, op, detail,
                                     "batch operations need Linux 5.6+ and a map type that "
                                     "implements them; use per-element calls")
        if cmd == Cmd.MAP_UPDATE_BATCH and err == E.E2BIG:
            return MapFullError(err, op, detail, "delete elements, raise max_entries, or use "
                                "an LRU map that evicts old entries")
        if cmd == Cmd.MAP_UPDATE_BATCH and err == E.EPERM:
            return _map_elem_error(Cmd.MAP_UPDATE_ELEM, err, self.fd)
        return error_for(err, op, detail)

    def lookup(self, first: bool, delete: bool = False, elem_flags: int = 0) -> tuple[int, bool]:
        """Fetch the next chunk into :attr:`keys`/:attr:`values`.

        ``first`` starts from the beginning of the map.  Returns ``(n, done)``:
        ``n`` entries were copied; ``done`` is True at the end of the map.
        Grows the buffers by itself when a hash bucket does not fit (ENOSPC).
        """
        cmd = Cmd.MAP_LOOKUP_AND_DELETE_BATCH if delete else Cmd.MAP_LOOKUP_BATCH
        b = self._b
        while True:
            b.in_batch = 0 if first else _addr(self._tokcd[0])
            b.out_batch = _addr(self._tokcd[1])
            b.keys = _addr(self._kcd)
            b.values = _addr(self._vcd)
            b.count = self.count
            b.elem_flags = elem_flags
            b.flags = 0
            ret = self._call(cmd)
            n = b.count
            if ret >= 0:
                self._tok.reverse()
                self._tokcd.reverse()
                return n, False
            if ret == -E.ENOENT:
                return n, True
            if ret == -E.ENOSPC and n == 0 and self.count < (1 << 24):
                self._alloc(self.count * 2)
                continue
            raise self._error(cmd, -ret, 0, self.count)

    def update(self, n: int, elem_flags: int = BPF_ANY) -> None:
        """Write the first ``n`` packed entries of :attr:`keys`/:attr:`values`."""
        self._run(Cmd.MAP_UPDATE_BATCH, n, elem_flags, with_values=True)

    def delete(self, n: int) -> int:
        """Delete the first ``n`` keys of :attr:`keys`; returns how many were deleted.

        Keys that are absent are skipped (they do not stop the batch).
        """
        return self._run(Cmd.MAP_DELETE_BATCH, n, 0, with_values=False)

    def _run(self, cmd: int, n: int, elem_flags: int, with_values: bool) -> int:
        b = self._b
        done = 0
        deleted = 0
        ks, vs = self.key_size, self.value_size
        while done < n:
            b.in_batch = 0
            b.out_batch = 0
            b.keys = _addr(self._kcd) + done * ks
            b.values = (_addr(self._vcd) + done * vs) if with_values else 0
            b.count = n - done
            b.elem_flags = elem_flags
            b.flags = 0
            ret = self._call(cmd)
            got: int = b.count
            if ret >= 0:
                return deleted + got
            err = -ret
            if cmd == Cmd.MAP_DELETE_BATCH and err == E.ENOENT:
                deleted += got
                done += got + 1          # skip the absent key and go on
                continue
            raise self._error(cmd, err, done + got, n)
        return deleted


def map_lookup_batch(fd: "int | Fd", key_size: int, value_size: int,
                     chunk: int = 4096) -> Iterable[tuple[bytes, bytes]]:
    """Yield every ``(key, value)`` of a map with BPF_MAP_LOOKUP_BATCH (raw bytes)."""
    ops = BatchOps(_as_fd(fd), key_size, value_size, chunk)
    first, done = True, False
    while not done:
        n, done = ops.lookup(first)
        first = False
        for i in range(n):
            yield (bytes(ops.keys[i * key_size:(i + 1) * key_size]),
                   bytes(ops.values[i * value_size:(i + 1) * value_size]))


def map_update_batch(fd: "int | Fd", keys: bytes, values: bytes, count: int,
                     key_size: int, value_size: int, elem_flags: int = BPF_ANY) -> None:
    """BPF_MAP_UPDATE_BATCH of ``count`` packed keys and values."""
    if len(keys) != count * key_size or len(values) != count * value_size:
        raise SizeError(f"expected {count} keys of {key_size} bytes and values of "
                        f"{value_size} bytes, got {len(keys)} and {len(values)} bytes")
    ops = BatchOps(_as_fd(fd), key_size, value_size, count)
    ops.keys[:] = keys
    ops.values[:] = values
    ops.update(count, elem_flags)


def map_delete_batch(fd: "int | Fd", keys: bytes, count: int, key_size: int) -> int:
    """BPF_MAP_DELETE_BATCH of ``count`` packed keys; returns how many were deleted."""
    if len(keys) != count * key_size:
        raise SizeError(f"expected {count} keys of {key_size} bytes, got {len(keys)} bytes")
    ops = BatchOps(_as_fd(fd), key_size, 0, count)
    ops.keys[:] = keys
    return ops.delete(count)


# ----------------------------------------------------------------- pin / bpffs
BPF_FS_MAGIC = 0xCAFE4A11
_BPFFS_DEFAULT = "/sys/fs/bpf"


def _mounts() -> list[tuple[str, str]]:
    out = []
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    out.append((parts[1].replace("\\040", " "), parts[2]))
    except OSError:
        pass
    return out


def bpffs_mounted(path: str = _BPFFS_DEFAULT) -> bool:
    """True if ``path`` lies on a mounted bpf filesystem."""
    path = os.path.realpath(path)
    best, best_type = "", ""
    for mnt, fstype in _mounts():
        if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
            best, best_type = mnt, fstype
    return best_type == "bpf"


def mount_bpffs(path: str = _BPFFS_DEFAULT) -> None:
    """``mount -t bpf bpf <path>`` (needs root / CAP_SYS_ADMIN)."""
    os.makedirs(path, exist_ok=True)
    if lib.mount(b"bpf", path.encode(), b"bpf", 0, ffi.NULL) != 0:
        err = ffi.errno
        raise error_for(err, "mount", f"mounting bpffs at {path}",
                        f"as root run: mount -t bpf bpf {path}")


def ensure_bpffs(path: str) -> None:
    """Make sure ``path`` (a pin path) is on bpffs.

    If it is under /sys/fs/bpf and nothing is mounted there, mount bpffs when
    root; otherwise raise :class:`PermissionDeniedError` saying how.
    """
    parent = os.path.dirname(os.path.abspath(path)) or "/"
    if bpffs_mounted(parent):
        return
    real = os.path.realpath(parent)
    if real == _BPFFS_DEFAULT or real.startswith(_BPFFS_DEFAULT + "/"):
        if os.geteuid() == 0 and not bpffs_mounted(_BPFFS_DEFAULT):
            mount_bpffs(_BPFFS_DEFAULT)
            if real != _BPFFS_DEFAULT:
                os.makedirs(real, exist_ok=True)
            return
    raise PermissionDeniedError(
        E.EPERM, "BPF_OBJ_PIN", f"{parent} is not on a bpf filesystem",
        f"pin under /sys/fs/bpf (mount it as root: mount -t bpf bpf /sys/fs/bpf) "
        f"or mount bpffs at {parent}")


def obj_pin(path: str, fd: "int | Fd") -> None:
    """BPF_OBJ_PIN: pin a map/program/link at ``path`` (on bpffs)."""
    ensure_bpffs(path)
    p = os.fsencode(path) + b"\0"
    pb = ffi.from_buffer(p)
    attr = new_attr()
    attr.obj.pathname = _addr(pb)
    attr.obj.bpf_fd = _as_fd(fd)
    ret = try_bpf(Cmd.OBJ_PIN, attr, _SZ_OBJ)
    if ret < 0:
        err = -ret
        hint = ""
        if err == E.EEXIST:
            hint = f"something is already pinned at {path}: unpin it (os.unlink) first"
        elif err == E.ENOENT:
            hint = "the parent directory does not exist: create it with os.makedirs"
        elif err == E.EPERM:
            hint = "the path must be on a bpf filesystem (mount -t bpf bpf /sys/fs/bpf)"
        raise error_for(err, "BPF_OBJ_PIN", f"pinning fd {_as_fd(fd)} at {path}", hint)


def obj_get(path: str, *, flags: int = 0) -> Fd:
    """BPF_OBJ_GET: open the object pinned at ``path``.

    ``flags``: BPF_F_RDONLY / BPF_F_WRONLY (0 = read-write).
    """
    p = os.fsencode(path) + b"\0"
    pb = ffi.from_buffer(p)
    attr = new_attr()
    attr.obj.pathname = _addr(pb)
    attr.obj.file_flags = flags
    ret = try_bpf(Cmd.OBJ_GET, attr, _SZ_OBJ)
    if ret < 0:
        err = -ret
        hint = f"nothing is pinned at {path}" if err == E.ENOENT else ""
        if err == E.EINVAL:
            hint = f"{path} is not a pinned BPF object"
        raise error_for(err, "BPF_OBJ_GET", f"opening {path}", hint)
    return Fd(ret)


# ------------------------------------------------------------------- programs
_VERIFIER_NOISE = ("processed ", "verification time", "stack depth", "max_states_per_insn",
                   "mark_precise", "func#", "Live regs", "last_idx", "parent didn't",
                   "regs=", "from ")

_VERIFIER_HINTS = (
    ("R0 !read_ok", "r0 is the program's return value: set it (e.g. r0 = 0) before exit"),
    ("!read_ok", "a register is read before anything was written to it"),
    ("invalid mem access 'map_value_or_null'",
     "compare the result of bpf_map_lookup_elem with NULL before using it"),
    ("_or_null", "a pointer that may be NULL is used: check it against 0 first"),
    ("invalid mem access 'scalar'",
     "a plain number is dereferenced: kernel or user memory must be read with "
     "bpf_probe_read_kernel/bpf_probe_read_user"),
    ("invalid mem access 'inv'",
     "a plain number is dereferenced: kernel or user memory must be read with "
     "bpf_probe_read_kernel/bpf_probe_read_user"),
    ("invalid func unknown#", "this kernel does not know that helper id"),
    ("cannot use helper", "that helper is not available to this program type"),
    ("unknown func", "that helper or kfunc is not available to this program type"),
    ("GPL", "this helper is GPL-only: load with license='GPL'"),
    ("unreachable insn", "remove dead code or fix the jump offsets"),
    ("back-edge", "loops must be bounded so that the verifier can prove they end"),
    ("infinite loop", "loops must be bounded so that the verifier can prove they end"),
    ("program is too large",
     "the verifier gave up after 1M instructions: a loop it cannot bound, or too many "
     "paths; bound loops with a counter (Program.bounded_loop) or may_goto"),
    ("jump out of range", "a jump targets an instruction outside the program"),
    ("invalid indirect read from stack",
     "stack memory passed to a helper must be initialised first"),
    ("invalid read from stack", "the stack slot is read before it was written"),
    ("invalid stack off", "stack accesses must be within r10-512 .. r10-1"),
    ("invalid bpf_context access",
     "the context (r1 at entry) was read at an offset or size this program type "
     "does not allow"),
    ("unbounded memory access",
     "check the index/length against a constant bound before using it"),
    ("min value is negative", "check that the index/length is >= 0 before using it"),
    ("too large", "the program or a value is too big: split the program"),
    ("misaligned", "the access is not aligned to its size"),
)


def verifier_message(log: str) -> str:
    """The verifier's last meaningful line (skips stats like ``processed N insns``)."""
    for line in reversed(log.splitlines()):
        s = line.strip()
        if not s or s.startswith(_VERIFIER_NOISE):
            continue
        return s
    return ""


def _verifier_hint(message: str) -> str:
    for needle, hint in _VERIFIER_HINTS:
        if needle in message:
            return hint
    return ""


def _decode_log(buf: bytearray | None) -> str:
    if not buf:
        return ""
    end = buf.find(0)
    raw = buf if end < 0 else buf[:end]
    return raw.decode("utf-8", "replace")


def prog_load(prog_type: int, insns: bytes, license: str = "GPL", *, name: str = "",
              log_level: int = 0, log_size: int = DEFAULT_LOG_SIZE,
              expected_attach_type: int = 0, prog_flags: int = 0, kern_version: int = 0,
              fd_array: "Sequence[int | Fd] | None" = None, attach_btf_id: int = 0,
              attach_prog_fd: int = 0, prog_ifindex: int = 0) -> tuple[Fd, str]:
    """BPF_PROG_LOAD.  Returns ``(fd, log)``.

    ``insns`` is the raw instruction bytes (8 per slot).  With ``log_level`` 0 the
    program is loaded without a log; if the kernel rejects it, it is loaded again
    with ``log_level=1`` to get the verifier's explanation.  With ``log_level`` 1
    (branches), 2 (every instruction) or 4 (stats; may be or-ed) the log of a
    successful load is returned too.  The log buffer starts at ``log_size`` and
    grows as the kernel asks (``log_true_size``, or x8 on kernels without it, up
    to 1 GiB), because a truncated log turns success into ENOSPC.

    Raises :class:`VerifierError` (``.log``, ``.message``; ``index``/``origin``
    are left None for the loader to fill) when the verifier rejects the
    program, :class:`PermissionDeniedError`, :class:`NotSupportedError` or
    :class:`ResourceLimitError` otherwise.
    """
    code = bytes(insns)
    if len(code) % 8 or not code:
        raise EncodingError(f"program must be a non-empty multiple of 8 bytes, got {len(code)}")
    insn_cd = ffi.from_buffer(code)
    lic = license.encode() + b"\0"
    lic_cd = ffi.from_buffer(lic)
    fda = None
    if fd_array:
        fda = ffi.new("int32_t[]", [_as_fd(f) for f in fd_array])
    attr = new_attr()
    pl = attr.prog_load
    pl.prog_type = prog_type
    pl.insn_cnt = len(code) // 8
    pl.insns = _addr(insn_cd)
    pl.license = _addr(lic_cd)
    pl.kern_version = kern_version
    pl.prog_flags = prog_flags
    nm = _obj_name(name)
    ffi.memmove(pl.prog_name, nm, len(nm))
    pl.prog_ifindex = prog_ifindex
    pl.expected_attach_type = expected_attach_type
    pl.attach_btf_id = attach_btf_id
    pl.attach_prog_fd = _as_fd(attach_prog_fd)
    pl.fd_array = _addr(fda) if fda is not None else 0

    level = log_level
    size = max(int(log_size), 128) if level else 0
    asked_log = bool(log_level)
    while True:
        logbuf = bytearray(size) if level else None
        log_cd = ffi.from_buffer(logbuf) if level else None
        pl.log_level = level
        pl.log_size = size
        pl.log_buf = _addr(log_cd) if level else 0
        pl.log_true_size = 0
        ret = try_bpf(Cmd.PROG_LOAD, attr, _SZ_PROG_LOAD)
        if ret >= 0:
            return Fd(ret), (_decode_log(logbuf) if asked_log else "")
        err = -ret
        if err == E.ENOSPC and level:
            true_size = pl.log_true_size
            if true_size > size:
                new = true_size
            elif true_size == 0 and size < _LOG_MAX:
                new = size * 8           # old kernel without log_true_size
            else:
                new = 0
            if new and size < _LOG_MAX:
                size = min(new, _LOG_MAX)
                continue
            raise ResourceLimitError(err, "BPF_PROG_LOAD",
                                     f"the verifier log does not fit in {size} bytes",
                                     "use a lower log_level")
        if level == 0 and err in (E.EACCES, E.EINVAL, E.E2BIG, E.ENOSPC, E.EFAULT):
            level = 1                    # load again only to learn why
            size = max(int(log_size), 128)
            continue
        log = _decode_log(logbuf)
        raise _prog_load_error(err, log, prog_type, expected_attach_type, license)


def _prog_load_error(err: int, log: str, prog_type: int, expected_attach_type: int,
                     license: str) -> KernelError:
    tname = enum_name(ProgType, prog_type)
    message = verifier_message(log)
    if log.strip() and err in (E.EACCES, E.EINVAL, E.E2BIG, E.EFAULT, E.ERANGE, E.ENOTSUP,
                               ENOTSUPP):
        return VerifierError(err, log, message or os.strerror(err),
                             hint=_verifier_hint(message))
    if err == E.EPERM:
        return PermissionDeniedError(err, "BPF_PROG_LOAD", f"program type {tname}", _perm_hint())
    if err == E.E2BIG:
        return ResourceLimitError(err, "BPF_PROG_LOAD", f"program type {tname}",
                                  "the program has too many instructions "
                                  "(limit 1,000,000 verified / 4096 unprivileged)")
    if err in (E.EINVAL, *_NOT_SUPPORTED):
        return NotSupportedError(
            err, "BPF_PROG_LOAD", f"program type {tname} ({prog_type}), "
            f"expected_attach_type {enum_name(AttachType, expected_attach_type)}",
            "this kernel does not support that program type, or it needs another "
            "expected_attach_type / attach_btf_id / prog_flags"
            + ("" if license else "; the license must not be empty"))
    return error_for(err, "BPF_PROG_LOAD", f"program type {tname}")


@record
class TestRun(Record):
    """Result of :func:`prog_test_run` (a tuple: ``retval, data_out, duration_ns, ctx_out``)."""

    retval: int
    data_out: bytes
    duration_ns: int
    ctx_out: bytes | None


TestRun.__test__ = False  # type: ignore[attr-defined]  # not a pytest class


def prog_test_run(fd: "int | Fd", data: bytes = b"", repeat: int = 1,
                  ctx: bytes | None = None, data_size_out: int | None = None, *,
                  flags: int = 0, cpu: int = 0, batch_size: int = 0) -> TestRun:
    """BPF_PROG_TEST_RUN: run the program ``repeat`` times on ``data`` (and ``ctx``).

    ``data_size_out`` is the size of the output buffer (default: ``len(data)``
    plus 4 KiB of room for programs that grow the packet; 0 = no output).
    ``duration_ns`` is the kernel's average per run.  Returns :class:`TestRun`.
    """
    fd = _as_fd(fd)
    if data_size_out is None:
        data_size_out = len(data) + 4096 if data else 0
    din = _buf(data)
    dout = bytearray(data_size_out) if data_size_out else None
    dout_cd = _buf(dout)
    cin = _buf(ctx)
    cout = bytearray(len(ctx)) if ctx else None
    cout_cd = _buf(cout)
    attr = new_attr()
    t = attr.test
    t.prog_fd = fd
    t.data_size_in = len(data)
    t.data_size_out = data_size_out
    t.data_in = _addr(din) if din is not None else 0
    t.data_out = _addr(dout_cd) if dout_cd is not None else 0
    # the kernel runs once for repeat 0; raw_tracepoint programs insist on 0
    t.repeat = 0 if repeat == 1 else repeat
    t.ctx_size_in = len(ctx) if ctx else 0
    t.ctx_size_out = len(ctx) if ctx else 0
    t.ctx_in = _addr(cin) if cin is not None else 0
    t.ctx_out = _addr(cout_cd) if cout_cd is not None else 0
    t.flags = flags
    t.cpu = cpu
    t.batch_size = batch_size
    ret = try_bpf(Cmd.PROG_TEST_RUN, attr, _SZ_TEST)
    if ret == -E.EINVAL and cout is not None:
        # raw_tracepoint (and some other) programs take ctx in but give none back;
        # the kernel checks this before running, so trying again is safe
        t.ctx_size_out = 0
        t.ctx_out = 0
        cout = None
        ret = try_bpf(Cmd.PROG_TEST_RUN, attr, _SZ_TEST)
    if ret < 0:
        err = -ret
        detail = f"program fd {fd}"
        if err == E.ENOSPC:
            raise ResourceLimitError(err, "BPF_PROG_TEST_RUN", detail,
                                     f"the output is {t.data_size_out} bytes: pass "
                                     f"data_size_out >= {t.data_size_out}")
        if err in _NOT_SUPPORTED:
            raise NotSupportedError(err, "BPF_PROG_TEST_RUN", detail,
                                    "this program type cannot be test-run "
                                    "(XDP, socket filter, tc, raw_tracepoint, syscall... can)")
        if err == E.EINVAL:
            raise KernelError(err, "BPF_PROG_TEST_RUN", detail,
                              "the data/ctx sizes, repeat or flags are invalid for this "
                              "program type (e.g. XDP/skb programs need >= 14 bytes of data; "
                              "raw_tracepoint programs take only ctx and no repeat)")
        raise error_for(err, "BPF_PROG_TEST_RUN", detail)
    out = bytes(dout[:min(t.data_size_out, data_size_out)]) if dout is not None else b""
    ctx_out = bytes(cout[:t.ctx_size_out]) if cout is not None else None
    return TestRun(t.retval, out, t.duration, ctx_out)


# ------------------------------------------------------------------- obj info
def obj_get_info_by_fd(fd: "int | Fd", info: CData) -> None:
    """BPF_OBJ_GET_INFO_BY_FD into ``info`` (a cffi ``struct bpf_*_info *``)."""
    fd = _as_fd(fd)
    attr = new_attr()
    attr.info.bpf_fd = fd
    attr.info.info_len = ffi.sizeof(info[0])
    attr.info.info = _addr(info)
    ret = try_bpf(Cmd.OBJ_GET_INFO_BY_FD, attr, _SZ_INFO)
    if ret < 0:
        raise error_for(-ret, "BPF_OBJ_GET_INFO_BY_FD", f"fd {fd}")


def _cstr(arr: CData) -> str:
    raw: bytes = ffi.string(arr)
    return raw.decode("utf-8", "replace")


@record
class ProgInfo(Record):
    """What the kernel tells about a loaded program (``struct bpf_prog_info``)."""

    type: int
    id: int
    tag: str                    #: 8-byte tag as 16 hex digits
    name: str
    jited_len: int
    xlated_len: int
    load_time_ns: int           #: ns since boot
    created_by_uid: int
    map_ids: tuple[int, ...]
    run_cnt: int                #: only counted while stats are enabled (:func:`enable_stats`)
    run_time_ns: int
    recursion_misses: int
    verified_insns: int
    gpl_compatible: bool
    btf_id: int
    nr_jited_ksyms: int

    @property
    def type_name(self) -> str:
        """The program type's name (``"XDP"``; ``"#<n>"`` when unknown here)."""
        return enum_name(ProgType, self.type)


@record
class MapInfo(Record):
    """What the kernel tells about a map (``struct bpf_map_info``)."""

    type: int
    id: int
    key_size: int
    value_size: int
    max_entries: int
    flags: int
    name: str
    map_extra: int
    btf_id: int

    @property
    def type_name(self) -> str:
        """The map type's name (``"HASH"``; ``"#<n>"`` when unknown here)."""
        return enum_name(MapType, self.type)


@record
class UprobeMultiLinkInfo(Record):
    """The uprobe_multi part of a link's info."""

    path: str
    offsets: tuple[int, ...]
    ref_ctr_offsets: tuple[int, ...]
    cookies: tuple[int, ...]
    flags: int
    pid: int


@record
class LinkInfo(Record):
    """What the kernel tells about a link (``struct bpf_link_info``)."""

    type: int
    id: int
    prog_id: int
    uprobe_multi: UprobeMultiLinkInfo | None = None
    raw_tracepoint: str | None = None
    perf_event_type: int | None = None    #: enum bpf_perf_event_type for perf links

    @property
    def type_name(self) -> str:
        """The link type's name (``"UPROBE_MULTI"``; ``"#<n>"`` when unknown here)."""
        return enum_name(LinkType, self.type)


@record
class JitedImage(Record):
    """JIT'd machine code of a program and where its functions live."""

    code: bytes
    ksyms: tuple[int, ...]       #: kernel address of each function
    func_lens: tuple[int, ...]   #: byte length of each function


def prog_info(fd: "int | Fd") -> ProgInfo:
    """The :class:`ProgInfo` of a program (including its map ids)."""
    info = ffi.new("struct bpf_prog_info *")
    obj_get_info_by_fd(fd, info)
    map_ids: tuple[int, ...] = ()
    n = info.nr_map_ids
    if n:
        ids = ffi.new("uint32_t[]", n)
        info2 = ffi.new("struct bpf_prog_info *")
        info2.nr_map_ids = n
        info2.map_ids = _addr(ids)
        obj_get_info_by_fd(fd, info2)
        map_ids = tuple(ids[i] for i in range(min(n, info2.nr_map_ids)))
    return ProgInfo(
        type=info.type, id=info.id, tag=bytes(ffi.buffer(info.tag)).hex(),
        name=_cstr(info.name), jited_len=info.jited_prog_len,
        xlated_len=info.xlated_prog_len, load_time_ns=info.load_time,
        created_by_uid=info.created_by_uid, map_ids=map_ids, run_cnt=info.run_cnt,
        run_time_ns=info.run_time_ns, recursion_misses=info.recursion_misses,
        verified_insns=info.verified_insns, gpl_compatible=bool(info.gpl_compatible & 1),
        btf_id=info.btf_id, nr_jited_ksyms=info.nr_jited_ksyms)


def prog_xlated_insns(fd: "int | Fd") -> bytes:
    """The program as the kernel rewrote it (xlated instructions, 8 bytes each).

    Map fds appear as map ids/addresses the way the kernel dumps them.
    """
    info = ffi.new("struct bpf_prog_info *")
    obj_get_info_by_fd(fd, info)
    n = info.xlated_prog_len
    if not n:
        return b""
    buf = bytearray(n)
    cd = ffi.from_buffer(buf)
    info2 = ffi.new("struct bpf_prog_info *")
    info2.xlated_prog_len = n
    info2.xlated_prog_insns = _addr(cd)
    obj_get_info_by_fd(fd, info2)
    if info2.xlated_prog_insns == 0:
        raise PermissionDeniedError(E.EPERM, "BPF_OBJ_GET_INFO_BY_FD",
                                    "the kernel withheld the xlated instructions",
                                    "needs CAP_SYS_ADMIN/CAP_PERFMON and kernel.kptr_restrict < 2")
    return bytes(buf[:min(n, info2.xlated_prog_len)])


def prog_jited(fd: "int | Fd") -> JitedImage:
    """The JIT'd machine code with its function addresses and lengths."""
    info = ffi.new("struct bpf_prog_info *")
    obj_get_info_by_fd(fd, info)
    n, nks, nfl = info.jited_prog_len, info.nr_jited_ksyms, info.nr_jited_func_lens
    if not n:
        return JitedImage(b"", (), ())
    buf = bytearray(n)
    cd = ffi.from_buffer(buf)
    ks = ffi.new("uint64_t[]", max(nks, 1))
    fl = ffi.new("uint32_t[]", max(nfl, 1))
    info2 = ffi.new("struct bpf_prog_info *")
    info2.jited_prog_len = n
    info2.jited_prog_insns = _addr(cd)
    info2.nr_jited_ksyms = nks
    info2.jited_ksyms = _addr(ks) if nks else 0
    info2.nr_jited_func_lens = nfl
    info2.jited_func_lens = _addr(fl) if nfl else 0
    obj_get_info_by_fd(fd, info2)
    if info2.jited_prog_insns == 0:
        raise PermissionDeniedError(E.EPERM, "BPF_OBJ_GET_INFO_BY_FD",
                                    "the kernel withheld the JIT'd code",
                                    "needs CAP_SYS_ADMIN/CAP_PERFMON and kernel.kptr_restrict < 2")
    return JitedImage(bytes(buf[:min(n, info2.jited_prog_len)]),
                      tuple(ks[i] for i in range(nks)),
                      tuple(fl[i] for i in range(nfl)))


def prog_jited_insns(fd: "int | Fd") -> bytes:
    """Just the JIT'd machine code bytes of a program."""
    return prog_jited(fd).code


def map_info(fd: "int | Fd") -> MapInfo:
    """The :class:`MapInfo` of a map."""
    info = ffi.new("struct bpf_map_info *")
    obj_get_info_by_fd(fd, info)
    return MapInfo(type=info.type, id=info.id, key_size=info.key_size,
                   value_size=info.value_size, max_entries=info.max_entries,
                   flags=info.map_flags, name=_cstr(info.name), map_extra=info.map_extra,
                   btf_id=info.btf_id)


def link_info(fd: "int | Fd") -> LinkInfo:
    """The :class:`LinkInfo` of a link (with uprobe_multi / raw_tracepoint details)."""
    info = ffi.new("struct bpf_link_info *")
    obj_get_info_by_fd(fd, info)
    um = rtp = pet = None
    if info.type == LinkType.UPROBE_MULTI:
        cnt = info.uprobe_multi.count
        path = bytearray(4096)
        pcd = ffi.from_buffer(path)
        offs = ffi.new("uint64_t[]", max(cnt, 1))
        refs = ffi.new("uint64_t[]", max(cnt, 1))
        cks = ffi.new("uint64_t[]", max(cnt, 1))
        info2 = ffi.new("struct bpf_link_info *")
        u = info2.uprobe_multi
        u.path = _addr(pcd)
        u.path_size = len(path)
        if cnt:
            u.count = cnt
            u.offsets = _addr(offs)
            u.ref_ctr_offsets = _addr(refs)
            u.cookies = _addr(cks)
        obj_get_info_by_fd(fd, info2)
        n = min(cnt, u.count)
        um = UprobeMultiLinkInfo(
            path=_decode_log(path), offsets=tuple(offs[i] for i in range(n)),
            ref_ctr_offsets=tuple(refs[i] for i in range(n)),
            cookies=tuple(cks[i] for i in range(n)), flags=u.flags, pid=u.pid)
    elif info.type == LinkType.RAW_TRACEPOINT:
        buf = bytearray(max(info.raw_tracepoint.tp_name_len, 1) + 1)
        cd = ffi.from_buffer(buf)
        info2 = ffi.new("struct bpf_link_info *")
        info2.raw_tracepoint.tp_name = _addr(cd)
        info2.raw_tracepoint.tp_name_len = len(buf)
        obj_get_info_by_fd(fd, info2)
        rtp = _decode_log(buf)
    elif info.type == LinkType.PERF_EVENT:
        pet = info.perf_event.type
    return LinkInfo(type=info.type, id=info.id, prog_id=info.prog_id,
                    uprobe_multi=um, raw_tracepoint=rtp, perf_event_type=pet)


# ----------------------------------------------------------------- ids / fds
def _get_fd_by_id(cmd: int, what: str, obj_id: int, open_flags: int) -> Fd:
    attr = new_attr()
    attr.get_id.start_id = obj_id
    attr.get_id.open_flags = open_flags
    ret = try_bpf(cmd, attr, _SZ_GET_ID)
    if ret < 0:
        err = -ret
        hint = f"no {what} with id {obj_id} (it was freed?)" if err == E.ENOENT else ""
        raise error_for(err, _cmd_name(cmd), f"{what} id {obj_id}", hint)
    return Fd(ret)


def prog_get_fd_by_id(prog_id: int) -> Fd:
    """BPF_PROG_GET_FD_BY_ID."""
    return _get_fd_by_id(Cmd.PROG_GET_FD_BY_ID, "program", prog_id, 0)


def map_get_fd_by_id(map_id: int, open_flags: int = 0) -> Fd:
    """BPF_MAP_GET_FD_BY_ID (``open_flags``: BPF_F_RDONLY / BPF_F_WRONLY)."""
    return _get_fd_by_id(Cmd.MAP_GET_FD_BY_ID, "map", map_id, open_flags)


def link_get_fd_by_id(link_id: int) -> Fd:
    """BPF_LINK_GET_FD_BY_ID."""
    return _get_fd_by_id(Cmd.LINK_GET_FD_BY_ID, "link", link_id, 0)


def _get_next_id(cmd: int, start: int) -> int | None:
    attr = new_attr()
    attr.get_id.start_id = start
    ret = try_bpf(cmd, attr, _SZ_GET_ID)
    if ret < 0:
        if ret == -E.ENOENT:
            return None
        raise error_for(-ret, _cmd_name(cmd))
    next_id: int = attr.get_id.next_id
    return next_id


def prog_get_next_id(start: int = 0) -> int | None:
    """The id of the next loaded program after ``start`` (None at the end)."""
    return _get_next_id(Cmd.PROG_GET_NEXT_ID, start)


def map_get_next_id(start: int = 0) -> int | None:
    """The id of the next map after ``start`` (None at the end)."""
    return _get_next_id(Cmd.MAP_GET_NEXT_ID, start)


def link_get_next_id(start: int = 0) -> int | None:
    """The id of the next link after ``start`` (None at the end)."""
    return _get_next_id(Cmd.LINK_GET_NEXT_ID, start)


def enable_stats(stats_type: int = BPF_STATS_RUN_TIME) -> Fd:
    """BPF_ENABLE_STATS: run_cnt/run_time_ns are counted while the returned Fd is open."""
    attr = new_attr()
    attr.enable_stats.type = stats_type
    ret = try_bpf(Cmd.ENABLE_STATS, attr, _SZ_ENABLE_STATS)
    if ret < 0:
        err = -ret
        if err == E.EINVAL:
            raise NotSupportedError(err, "BPF_ENABLE_STATS", f"type {stats_type}",
                                    "needs Linux 5.8+; or set the sysctl "
                                    "kernel.bpf_stats_enabled=1")
        raise error_for(err, "BPF_ENABLE_STATS")
    return Fd(ret)


# ---------------------------------------------------------------------- links
def link_create(prog_fd: "int | Fd", target_fd: "int | Fd", attach_type: int, *,
                flags: int = 0, bpf_cookie: int = 0, path: str | None = None,
                offsets: Sequence[int] = (), ref_ctr_offsets: Sequence[int] | None = None,
                cookies: Sequence[int] | None = None, pid: int = 0,
                uprobe_multi_flags: int = 0) -> Fd:
    """BPF_LINK_CREATE.

    * ``attach_type=AttachType.PERF_EVENT`` (41): ``target_fd`` is a perf event
      fd; ``bpf_cookie`` is what ``bpf_get_attach_cookie()`` returns.
    * ``attach_type=AttachType.TRACE_UPROBE_MULTI`` (48): ``target_fd`` is 0;
      ``path`` of the binary, file ``offsets``, optional ``ref_ctr_offsets``
      (semaphores) and ``cookies`` (one per offset), ``pid`` (0 = all) and
      ``uprobe_multi_flags`` (BPF_F_UPROBE_MULTI_RETURN for uretprobes).  The
      program must be loaded as KPROBE with ``expected_attach_type=48``.
    * other attach types: ``target_fd`` and ``flags`` only.
    """
    attr = new_attr()
    lc = attr.link_create
    lc.prog_fd = _as_fd(prog_fd)
    lc.target_fd = _as_fd(target_fd)
    lc.attach_type = attach_type
    lc.flags = flags
    keep: list[Any] = []
    size = attr_size("link_create", "flags")
    detail = f"prog fd {lc.prog_fd}, attach type {enum_name(AttachType, attach_type)}"
    if attach_type == AttachType.PERF_EVENT:
        lc.perf_event.bpf_cookie = bpf_cookie
        size = attr_size("link_create", "perf_event", "bpf_cookie")
        detail += f", perf event fd {lc.target_fd}"
    elif attach_type == AttachType.TRACE_UPROBE_MULTI:
        if path is None or not offsets:
            raise OptionError("uprobe_multi needs a path and at least one offset")
        n = len(offsets)
        for name, seq in (("ref_ctr_offsets", ref_ctr_offsets), ("cookies", cookies)):
            if seq is not None and len(seq) != n:
                raise OptionError(f"{name} must have one entry per offset ({n}), got {len(seq)}")
        pb = ffi.from_buffer(os.fsencode(path) + b"\0")
        ob = ffi.new("uint64_t[]", list(offsets))
        keep += [pb, ob]
        um = lc.uprobe_multi
        um.path = _addr(pb)
        um.offsets = _addr(ob)
        if ref_ctr_offsets is not None:
            rb = ffi.new("uint64_t[]", list(ref_ctr_offsets))
            keep.append(rb)
            um.ref_ctr_offsets = _addr(rb)
        if cookies is not None:
            cb = ffi.new("uint64_t[]", list(cookies))
            keep.append(cb)
            um.cookies = _addr(cb)
        um.cnt = n
        um.flags = uprobe_multi_flags
        um.pid = pid
        size = attr_size("link_create", "uprobe_multi", "pid")
        detail += f", {path} at {n} offset(s)" + (f", pid {pid}" if pid else "")
    ret = try_bpf(Cmd.LINK_CREATE, attr, size)
    del keep
    if ret < 0:
        err = -ret
        if err in (E.EPERM, E.EACCES):
            raise error_for(err, "BPF_LINK_CREATE", detail)
        hint = ""
        if err == E.EINVAL:
            hint = ("this kernel lacks the attach type, or the program's type / "
                    "expected_attach_type does not match it")
        elif err == E.EBADF:
            hint = "the program or target fd is not valid (perf links need a perf event fd)"
        elif err == E.ENOENT and attach_type == AttachType.TRACE_UPROBE_MULTI:
            hint = f"{path} does not exist"
        elif err == E.ESRCH:
            hint = f"no process with pid {pid}"
        elif err in _NOT_SUPPORTED:
            hint = "not supported by this kernel for this program/attach type"
        raise AttachError(err, "BPF_LINK_CREATE", detail, hint)
    return Fd(ret)


def perf_event_link(prog_fd: "int | Fd", perf_fd: "int | Fd", cookie: int = 0) -> Fd:
    """Attach a program to a perf event fd with a BPF link (Linux 5.15+)."""
    return link_create(prog_fd, perf_fd, AttachType.PERF_EVENT, bpf_cookie=cookie)


def uprobe_multi_link(prog_fd: "int | Fd", path: str, offsets: Sequence[int], *,
                      ref_ctr_offsets: Sequence[int] | None = None,
                      cookies: Sequence[int] | None = None, pid: int = 0,
                      retprobe: bool = False) -> Fd:
    """Attach a program to many uprobes of one binary at once (Linux 6.6+)."""
    return link_create(prog_fd, 0, AttachType.TRACE_UPROBE_MULTI, path=path,
                       offsets=offsets, ref_ctr_offsets=ref_ctr_offsets, cookies=cookies,
                       pid=pid, uprobe_multi_flags=1 if retprobe else 0)


def raw_tracepoint_open(name: str | None, prog_fd: "int | Fd", cookie: int = 0) -> Fd:
    """BPF_RAW_TRACEPOINT_OPEN: attach a RAW_TRACEPOINT program to tracepoint ``name``."""
    nb = ffi.from_buffer(name.encode() + b"\0") if name else None
    attr = new_attr()
    rt = attr.raw_tracepoint
    rt.name = _addr(nb) if nb is not None else 0
    rt.prog_fd = _as_fd(prog_fd)
    rt.cookie = cookie
    ret = try_bpf(Cmd.RAW_TRACEPOINT_OPEN, attr, _SZ_RAW_TP_COOKIE if cookie else _SZ_RAW_TP)
    if ret < 0:
        err = -ret
        hint = f"no raw tracepoint named {name!r}" if err == E.ENOENT else ""
        if err == E.EINVAL:
            hint = "the program must be of type RAW_TRACEPOINT (or TRACING with attach_btf_id)"
        cls = PermissionDeniedError if err in (E.EPERM, E.EACCES) else AttachError
        raise error_for(err, "BPF_RAW_TRACEPOINT_OPEN", f"tracepoint {name!r}", hint, cls=cls)
    return Fd(ret)


def link_detach(link_fd: "int | Fd") -> None:
    """BPF_LINK_DETACH: detach the link's program, keeping the link fd open."""
    attr = new_attr()
    attr.link_detach.link_fd = _as_fd(link_fd)
    bpf(Cmd.LINK_DETACH, attr, _SZ_LINK_DETACH, f"link fd {_as_fd(link_fd)}")


@record
class TaskFdQuery(Record):
    """What BPF_TASK_FD_QUERY reports about a perf event / raw tracepoint fd."""

    prog_id: int
    fd_type: int
    name: str
    probe_offset: int
    probe_addr: int


def task_fd_query(pid: int, fd: int, flags: int = 0) -> TaskFdQuery:
    """BPF_TASK_FD_QUERY: which program is attached to ``fd`` of process ``pid``."""
    buf = bytearray(4096)
    bcd = ffi.from_buffer(buf)
    attr = new_attr()
    q = attr.task_fd_query
    q.pid = pid
    q.fd = fd
    q.flags = flags
    q.buf_len = len(buf)
    q.buf = _addr(bcd)
    bpf(Cmd.TASK_FD_QUERY, attr, _SZ_TASK_FD_QUERY, f"pid {pid} fd {fd}")
    return TaskFdQuery(q.prog_id, q.fd_type, _decode_log(buf), q.probe_offset, q.probe_addr)


# -------------------------------------------------------------- perf events
def perf_event_open(attr: CData, pid: int = -1, cpu: int = 0, group_fd: int = -1,
                    flags: int = PERF_FLAG_FD_CLOEXEC) -> Fd:
    """perf_event_open(2).  ``attr`` is a ``struct perf_event_attr *`` (see :mod:`.perf`).

    PERF_FLAG_FD_CLOEXEC is always added.  ``attr.size`` defaults to the
    size of the declared struct when left 0.  A :class:`pyebpf.kernel.perf.PerfAttr`
    is accepted too.
    """
    attr = getattr(attr, "ptr", attr)
    if attr.size == 0:
        attr.size = ffi.sizeof("struct perf_event_attr")
    tries = 0
    while True:
        ret = sys_perf_event_open(NR_PERF_EVENT_OPEN, attr, pid, cpu, group_fd,
                                  flags | PERF_FLAG_FD_CLOEXEC)
        if ret >= 0:
            return Fd(ret)
        err = ffi.errno
        if err in (E.EINTR, E.EAGAIN) and tries < _RETRIES:
            tries += 1
            continue
        break
    detail = f"type {attr.type}, config {attr.config:#x}, pid {pid}, cpu {cpu}"
    if err in (E.EPERM, E.EACCES):
        raise PermissionDeniedError(err, "perf_event_open", detail, _perm_hint(perf=True))
    if err in (E.ENOENT, E.EOPNOTSUPP, E.ENODEV):
        raise NotSupportedError(err, "perf_event_open", detail,
                                "this kernel or PMU does not provide that event")
    if err == E.E2BIG:
        raise NotSupportedError(err, "perf_event_open", detail,
                                f"perf_event_attr.size {attr.size} is newer than this kernel")
    if err == E.ESRCH:
        raise KernelError(err, "perf_event_open", detail, f"no process with pid {pid}")
    if err == E.EINVAL:
        raise KernelError(err, "perf_event_open", detail,
                          "an attr field is invalid for this event type (e.g. a uprobe "
                          "offset outside the file, or a bad pid/cpu combination)")
    raise error_for(err, "perf_event_open", detail)


def _ioctl(fd: "int | Fd", request: int, arg: int, name: str) -> int:
    fdn = _as_fd(fd)
    ret: int = sys_ioctl(fdn, request, arg)
    if ret < 0:
        raise error_for(ffi.errno, name, f"fd {fdn}")
    return ret


def perf_event_enable(fd: "int | Fd") -> None:
    """PERF_EVENT_IOC_ENABLE."""
    _ioctl(fd, PERF_EVENT_IOC_ENABLE, 0, "PERF_EVENT_IOC_ENABLE")


def perf_event_disable(fd: "int | Fd") -> None:
    """PERF_EVENT_IOC_DISABLE."""
    _ioctl(fd, PERF_EVENT_IOC_DISABLE, 0, "PERF_EVENT_IOC_DISABLE")


def perf_event_reset(fd: "int | Fd") -> None:
    """PERF_EVENT_IOC_RESET."""
    _ioctl(fd, PERF_EVENT_IOC_RESET, 0, "PERF_EVENT_IOC_RESET")


def perf_event_set_bpf(fd: "int | Fd", prog_fd: "int | Fd") -> None:
    """PERF_EVENT_IOC_SET_BPF: the legacy (pre-link) way to attach a program."""
    _ioctl(fd, PERF_EVENT_IOC_SET_BPF, _as_fd(prog_fd), "PERF_EVENT_IOC_SET_BPF")


def perf_event_set_output(fd: "int | Fd", target_fd: "int | Fd | None") -> None:
    """PERF_EVENT_IOC_SET_OUTPUT: send ``fd``'s records to ``target_fd``'s ring (None: stop)."""
    arg = -1 if target_fd is None else _as_fd(target_fd)
    _ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, arg & 0xFFFFFFFFFFFFFFFF, "PERF_EVENT_IOC_SET_OUTPUT")


def perf_event_pause_output(fd: "int | Fd", pause: bool = True) -> None:
    """PERF_EVENT_IOC_PAUSE_OUTPUT: stop (or resume) writing to the ring buffer."""
    _ioctl(fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 1 if pause else 0, "PERF_EVENT_IOC_PAUSE_OUTPUT")


def perf_event_id(fd: "int | Fd") -> int:
    """PERF_EVENT_IOC_ID: the event's unique id (as in sample ids)."""
    out = ffi.new("uint64_t *")
    _ioctl(fd, PERF_EVENT_IOC_ID, _addr(out), "PERF_EVENT_IOC_ID")
    event_id: int = out[0]
    return event_id

