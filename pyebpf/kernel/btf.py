"""BTF objects in the kernel: BPF_BTF_LOAD.

The conventions are those of :mod:`.core`.  The attr is the ``btf_load``
arm of ``union bpf_attr`` (not in the cffi ``cdef``), written with
:mod:`struct` into a zeroed attr-sized buffer.
"""
from __future__ import annotations

import errno as E
import struct

from .constants import Cmd
from .core import Fd, addr, decode_cstr, kernel_error, try_bpf
from .ffi import ffi

__all__ = ["btf_load", "DEFAULT_LOG_SIZE"]

#: the log buffer a rejected load is retried with (it grows as the kernel asks)
DEFAULT_LOG_SIZE = 64 * 1024
_LOG_MAX = (1 << 30) - 1
#: btf, btf_log_buf (u64), btf_size, btf_log_size, btf_log_level, btf_log_true_size (u32)
_ATTR = struct.Struct("=QQIIII")
_ATTR_SIZE = _ATTR.size          # offsetofend(union bpf_attr, btf_log_true_size)
_TRUE_SIZE_AT = 28


def btf_load(data: bytes, *, log_level: int = 0, log_size: int = DEFAULT_LOG_SIZE) -> Fd:
    """BPF_BTF_LOAD: load a BTF blob; return its fd.

    With ``log_level`` 0 a rejected blob is loaded again with a log to learn
    why.  A rejection raises :class:`~pyebpf.errors.KernelError` (EINVAL mostly;
    the subclass :mod:`.hints` picks for the errno) whose message
    ends with the last line of the kernel's BTF log (``.log`` holds it whole).
    """
    blob = bytes(data)
    if not blob:
        raise kernel_error("BPF_BTF_LOAD", E.EINVAL, "an empty BTF blob")
    blob_cd = ffi.from_buffer(blob)
    level = log_level
    size = max(int(log_size), 128) if level else 0
    while True:
        logbuf = bytearray(size) if level else None
        log_cd = ffi.from_buffer(logbuf) if logbuf is not None else None
        raw = bytearray(_ATTR.pack(addr(blob_cd), addr(log_cd) if log_cd is not None else 0,
                                   len(blob), size, level, 0))
        attr = ffi.from_buffer(raw)
        ret = try_bpf(Cmd.BTF_LOAD, ffi.cast("union bpf_attr *", attr), _ATTR_SIZE)
        if ret >= 0:
            return Fd(ret)
        err = -ret
        true_size = struct.unpack_from("=I", raw, _TRUE_SIZE_AT)[0]
        if err == E.ENOSPC and level and size < _LOG_MAX:
            size = min(true_size if true_size > size else size * 8, _LOG_MAX)
            continue
        if level == 0 and err in (E.EINVAL, E.EACCES, E.E2BIG, E.EFAULT):
            level = 1
            size = max(int(log_size), 128)
            continue
        log = decode_cstr(logbuf)
        exc = kernel_error("BPF_BTF_LOAD", err,
                           "the kernel rejected the BTF" + (f": {_last_line(log)}" if log else ""))
        exc.log = log  # type: ignore[attr-defined]
        raise exc


def _last_line(log: str) -> str:
    lines = [ln for ln in log.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


