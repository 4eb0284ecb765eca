"""The bpf() calls of a start that cannot wait: ``pyebpf bt``'s programs
from its compiled-program cache (:mod:`pyebpf.lang.fastpath`) are created,
loaded, run and attached through these, which need the cffi declaration
alone -- none of the kernel layer's records, error tables or BTF (a few
milliseconds of imports on every start).

Fds are plain ints, the caller's to close. The creating calls return
``-errno`` on failure (the caller decides: the cache's user compiles the
program again); the others raise the kernel layer's error
(:func:`pyebpf.kernel.core.kernel_error`, imported with the failure).
"""
from __future__ import annotations

import os

from .constants import AttachType, Cmd
from .ffi import NR_BPF, ffi, sys_bpf

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

__all__ = ["map_create", "prog_load", "prog_test_run", "uprobe_multi_link", "elem",
           "LOOKUP", "UPDATE", "DELETE", "NEXT_KEY"]

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
