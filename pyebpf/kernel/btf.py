"""BTF objects in the kernel: BPF_BTF_LOAD, and the policy for the optional
BTF of pyebpf's own maps and programs (:func:`optional_btf`,
:func:`btf_refused`: never fail a creation or a load because of it).

The conventions are those of :mod:`.core`.  The attr is the ``btf_load``
arm of ``union bpf_attr`` (not in the cffi ``cdef``), written with
:mod:`struct` into a zeroed attr-sized buffer.
"""
from __future__ import annotations

import errno as E
import os
import struct

from .constants import Cmd
from .core import Fd, addr, decode_cstr, kernel_error, try_bpf
from .ffi import ffi

__all__ = ["btf_load", "DEFAULT_LOG_SIZE", "own_btf_enabled", "optional_btf", "btf_refused",
           "refused"]

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




# ---------------------------------------------------------------------------
# optional BTF (pyebpf's own maps and programs)

#: why the kernel refused a BTF_LOAD of pyebpf's own BTF (then it is not tried again)
_LOAD_REFUSED: str | None = None
#: what was refused already (each said once): "load", "programs", a map type number
_REFUSED: set[object] = set()


def own_btf_enabled(requested: bool = True) -> bool:
    """Whether pyebpf adds BTF to its own maps and programs: ``requested``
    (the ``btf=`` argument), unless ``PYEBPF_BTF=0`` is in the environment or
    the kernel refused BTF before."""
    return requested and _LOAD_REFUSED is None and os.environ.get("PYEBPF_BTF") != "0"


def optional_btf(blob: bytes) -> Fd | None:
    """Load a blob of optional BTF: its :class:`~.core.Fd` (the caller
    closes it once the map or program holds it), or None when the kernel
    refuses it -- said once with a :class:`~pyebpf.errors.BtfWarning`, and
    not tried again in this process."""
    global _LOAD_REFUSED
    if _LOAD_REFUSED is not None:
        return None
    try:
        return btf_load(blob)
    except OSError as exc:           # KernelError, or a bare OSError from an odd kernel
        _LOAD_REFUSED = str(exc).splitlines()[0]
        btf_refused("load", "the kernel refused to load BTF", exc)
        return None


def btf_refused(key: object, what: str, exc: BaseException) -> bool:
    """Say once per ``key`` (a :class:`~pyebpf.errors.BtfWarning`) that the
    optional BTF could not be given (``what`` happened, ``exc`` says why) and
    pyebpf went on without it; True the first time.  :func:`refused` tells
    whether ``key`` was said."""
    if key in _REFUSED:
        return False
    _REFUSED.add(key)
    import warnings                  # (a refusal's path only)
    from ..errors import BtfWarning
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    warnings.warn(BtfWarning(f"{what} ({reason}); pyebpf goes on without BTF (no typed "
                             "keys/values or source lines in bpftool; PYEBPF_BTF=0 stops "
                             "trying)"), stacklevel=3)
    return True


def refused(key: object) -> bool:
    """True when the optional BTF of ``key`` was refused already (do not try again)."""
    return key in _REFUSED
