"""The bpf() calls of a start that cannot wait: ``pyebpf bt``'s programs
from its compiled-program cache (:mod:`pyebpf.lang.fastpath`) are created,
loaded, run and attached through these, which need the cffi declaration
alone -- none of the kernel layer's records, error tables or BTF (a few
milliseconds of imports on every start).

Fds are plain ints, the caller's to close. The creating calls return
``-errno`` on failure (the caller decides: the cache's user compiles the
program again); the others raise the kernel layer's error
(:func:`pyebpf.kernel.core.kernel_error`, imported with the failure).

:func:`prime_uprobes` overlaps a start's longest wait in the kernel (at the
first uprobe registered: an RCU grace period) with its other work, in a
thread (the system call releases the GIL).
"""
from __future__ import annotations

import _thread
import os

from .constants import AttachType, Cmd, ProgType
from .ffi import NR_BPF, ffi, sys_bpf

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

__all__ = ["map_create", "prog_load", "prog_test_run", "uprobe_multi_link", "elem",
           "prime_uprobes", "LOOKUP", "UPDATE", "DELETE", "NEXT_KEY"]

#: the element commands :func:`elem` takes
LOOKUP, UPDATE, DELETE, NEXT_KEY = (int(Cmd.MAP_LOOKUP_ELEM), int(Cmd.MAP_UPDATE_ELEM),
                                    int(Cmd.MAP_DELETE_ELEM), int(Cmd.MAP_GET_NEXT_KEY))
_SIZE = ffi.sizeof("union bpf_attr")
_ENOENT, _EINTR, _EAGAIN = 2, 4, 11
_UPROBE_MULTI_RETURN = 1       # BPF_F_UPROBE_MULTI_RETURN


def _addr(cdata: Any) -> int:
    return int(ffi.cast("uintptr_t", cdata))


def _try(cmd: int, attr: Any) -> int:
    """``bpf(cmd, attr)``: the result, or ``-errno`` (EINTR, EAGAIN: tried again)."""
    ret = -_EINTR
    for _ in range(5):
        ret = int(sys_bpf(NR_BPF, cmd, attr, _SIZE))
        if ret >= 0:
            return ret
        ret = -ffi.errno
        if ret not in (-_EINTR, -_EAGAIN):
            break
    return ret


def _raise(cmd: int, err: int, detail: str) -> None:
    from .core import kernel_error
    raise kernel_error(cmd, err, detail)


def _fd(ret: int) -> int:
    """A new fd moved off 0 (stdin was closed: 0 means "no fd" in many attrs)."""
    if ret == 0:
        import fcntl
        ret = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 1)
        os.close(0)
    return ret


def map_create(map_type: int, key_size: int, value_size: int, max_entries: int,
               flags: int = 0, name: bytes = b"") -> int:
    """BPF_MAP_CREATE: the map's fd, or ``-errno``."""
    attr = ffi.new("union bpf_attr *")
    mc = attr.map_create
    mc.map_type, mc.key_size, mc.value_size = map_type, key_size, value_size
    mc.max_entries, mc.map_flags = max_entries, flags
    ffi.memmove(mc.map_name, name[:15], min(len(name), 15))
    ret = _try(int(Cmd.MAP_CREATE), attr)
    return _fd(ret) if ret >= 0 else ret


def prog_load(prog_type: int, code: bytes | bytearray, license: str = "GPL",
              name: bytes = b"", expected_attach_type: int = 0) -> int:
    """BPF_PROG_LOAD of raw instructions, without a verifier log: the
    program's fd, or ``-errno``."""
    attr = ffi.new("union bpf_attr *")
    pl = attr.prog_load
    insns, lic = ffi.from_buffer(code), ffi.new("char[]", license.encode())
    pl.prog_type, pl.insn_cnt, pl.insns = prog_type, len(code) // 8, _addr(insns)
    pl.license, pl.expected_attach_type = _addr(lic), expected_attach_type
    ffi.memmove(pl.prog_name, name[:15], min(len(name), 15))
    ret = _try(int(Cmd.PROG_LOAD), attr)
    return _fd(ret) if ret >= 0 else ret


def prog_test_run(fd: int) -> None:
    """BPF_PROG_TEST_RUN once, with no input (BEGIN and END programs)."""
    attr = ffi.new("union bpf_attr *")
    attr.test.prog_fd = fd
    ret = _try(int(Cmd.PROG_TEST_RUN), attr)
    if ret < 0:
        _raise(int(Cmd.PROG_TEST_RUN), -ret, f"program fd {fd}")


def uprobe_multi_link(prog_fd: int, path: str, offsets: Sequence[int],
                      cookies: Sequence[int] | None = None, pid: int = 0,
                      retprobe: bool = False) -> int:
    """BPF_LINK_CREATE of one uprobe_multi link (the program loaded with
    ``expected_attach_type`` BPF_TRACE_UPROBE_MULTI): the link's fd."""
    attr = ffi.new("union bpf_attr *")
    lc = attr.link_create
    lc.prog_fd, lc.attach_type = prog_fd, int(AttachType.TRACE_UPROBE_MULTI)
    um = lc.uprobe_multi
    where = ffi.new("char[]", os.fsencode(path))
    at = ffi.new("uint64_t[]", list(offsets))
    marks = ffi.new("uint64_t[]", list(cookies)) if cookies else ffi.NULL
    um.path, um.offsets, um.cookies = _addr(where), _addr(at), _addr(marks)
    um.cnt, um.pid = len(offsets), pid
    um.flags = _UPROBE_MULTI_RETURN if retprobe else 0
    ret = _try(int(Cmd.LINK_CREATE), attr)
    if ret < 0:
        _raise(int(Cmd.LINK_CREATE), -ret, f"uprobe_multi {path}")
    return _fd(ret)


#: a program that returns 0 (``r0 = 0; exit``): the primer's
_RETURN_0 = bytes.fromhex("b700000000000000" "9500000000000000")


def prime_uprobes() -> Any:
    """Start, in a thread, the kernel's slow first step of a uprobe
    registration, so that this process's own uprobes, attached a few
    milliseconds later, need not wait for it. The thread's lock when
    started (acquirable once it has ended), else None.

    The first uprobe registered after a quiet spell waits ~15 ms in the
    kernel (an RCU grace period: ``uprobe_register`` takes the writer's side
    of a per-CPU semaphore that every ``fork`` reads); one that comes soon
    after, a few microseconds. The primer registers (then removes) a
    ``uprobe_multi`` link on a private, empty, unnamed file (``memfd``,
    through ``/proc/self/fd``) that no process maps: the probe is never put
    into any process's code. Its program and file are made here (~0.1 ms);
    the thread only makes the link -- the system call, which waits with the
    GIL released, while the caller creates its maps and loads its programs
    -- and closes the three. (The caller waits, GIL released, until the
    thread is in that call: a thread waiting for the GIL behind a caller
    busy in Python code would start its wait up to milliseconds late.)

    Best effort: when the kernel refuses (no ``uprobe_multi``, no ``/proc``),
    nothing happens and the real attach waits as before. (Like any uprobe
    registration, the primer's holds other processes' ``fork`` back for the
    few microseconds its writer's side is held, not for the wait.)"""
    fds: list[int] = []
    try:
        prog = prog_load(int(ProgType.KPROBE), _RETURN_0, "GPL", b"pyebpf_primer",
                         int(AttachType.TRACE_UPROBE_MULTI))
        if prog < 0:
            return None
        fds.append(prog)
        fds.append(os.memfd_create("pyebpf-primer", os.MFD_CLOEXEC))
        attr = ffi.new("union bpf_attr *")
        lc = attr.link_create
        lc.prog_fd, lc.attach_type = prog, int(AttachType.TRACE_UPROBE_MULTI)
        where = ffi.new("char[]", b"/proc/self/fd/%d" % fds[1])
        at = ffi.new("uint64_t[]", [0])
        um = lc.uprobe_multi
        um.path, um.offsets, um.cnt = _addr(where), _addr(at), 1
        done, calling = _thread.allocate_lock(), _thread.allocate_lock()
        done.acquire()
        calling.acquire()
        _thread.start_new_thread(_prime, (attr, (where, at), fds, done, calling))
        calling.acquire(timeout=0.05)   # (the GIL given up until the thread is in its call)
        return done
    except Exception:   # (no memfd, no thread...: the attach waits, as without a primer)
        _close(fds)
        return None


def _prime(attr: Any, keep: Any, fds: list[int], done: Any, calling: Any) -> None:
    """The primer's thread: ``calling`` released, the link made (``keep``:
    the buffers its attr points to), everything closed, ``done`` released."""
    try:
        calling.release()
        link = _try(int(Cmd.LINK_CREATE), attr)
        if link >= 0:
            fds.append(link)
    finally:
        _close(fds)
        done.release()


def _close(fds: list[int]) -> None:
    """Close ``fds``, the last first (a link before its program and file)."""
    for fd in reversed(fds):
        try:
            os.close(fd)
        except OSError:
            pass


def elem(cmd: int, fd: int, key: bytes | None, value: bytes | bytearray | None) -> bool:
    """One element command (:data:`LOOKUP` into ``value``, :data:`UPDATE`,
    :data:`DELETE`, :data:`NEXT_KEY` into ``value``); False when the kernel
    says ENOENT (no such key, or no key after ``key``)."""
    attr = ffi.new("union bpf_attr *")
    el = attr.elem
    kb = ffi.from_buffer(key) if key is not None else ffi.NULL
    vb = ffi.from_buffer(value) if value is not None else ffi.NULL
    el.map_fd, el.key, el.value = fd, _addr(kb), _addr(vb)
    ret = _try(cmd, attr)
    if ret == -_ENOENT:
        return False
    if ret < 0:
        _raise(cmd, -ret, f"map fd {fd}")
    return True
