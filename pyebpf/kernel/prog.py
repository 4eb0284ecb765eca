"""Programs: BPF_PROG_LOAD with its verifier log (BPF_PROG_TEST_RUN: :mod:`.testrun`).

The conventions are those of :mod:`.core`; a rejection by the verifier becomes
a :class:`~pyebpf.errors.VerifierError` with a hint from :mod:`.hints`.
"""
from __future__ import annotations

import errno as E
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

from ..errors import EncodingError, KernelError, VerifierError
from .constants import AttachType, Cmd, ProgType, enum_name
from .core import (Fd, addr, as_fd, attr_size, decode_cstr, kernel_error, new_attr,
                   obj_name, try_bpf)
from .ffi import ffi

__all__ = ["prog_load", "DEFAULT_LOG_SIZE", "FUNC_INFO_REC", "LINE_INFO_REC"]

#: the verifier log buffer a load starts with (it grows as the kernel asks)
DEFAULT_LOG_SIZE = 64 * 1024
_LOG_MAX = (1 << 30) - 1           # the kernel's bound on log_size (UINT_MAX >> 2)
_SZ_PROG_LOAD = attr_size("prog_load", "log_true_size")
FUNC_INFO_REC = 8                  # sizeof(struct bpf_func_info)
LINE_INFO_REC = 16                 # sizeof(struct bpf_line_info)


def prog_load(prog_type: int, insns: bytes, license: str = "GPL", *, name: str = "",
              log_level: int = 0, log_size: int = DEFAULT_LOG_SIZE,
              expected_attach_type: int = 0, prog_flags: int = 0, kern_version: int = 0,
              fd_array: "Sequence[int | Fd] | None" = None, attach_btf_id: int = 0,
              attach_prog_fd: int = 0, prog_ifindex: int = 0, btf_fd: int = 0,
              func_info: bytes = b"", line_info: bytes = b"") -> tuple[Fd, str]:
    """BPF_PROG_LOAD.  Returns ``(fd, log)``.

    ``insns`` is the raw instruction bytes (8 per slot).  With ``log_level`` 0 the
    program is loaded without a log; if the kernel rejects it, it is loaded again
    with ``log_level=1`` to get the verifier's explanation.  With ``log_level`` 1
    (branches), 2 (every instruction) or 4 (stats; may be or-ed) the log of a
    successful load is returned too.  The log buffer starts at ``log_size`` and
    grows as the kernel asks (``log_true_size``, or x8 on kernels without it, up
    to 1 GiB), because a truncated log turns success into ENOSPC; but a log
    asked for only to learn why a program was refused is not grown on a
    kernel that keeps a log's end (6.4+): the reason is there.

    Raises :class:`VerifierError` (``.log``, ``.message``; ``index``/``origin``
    are left None for the loader to fill) when the verifier rejects the
    program, :class:`PermissionDeniedError`, :class:`NotSupportedError` or
    :class:`ResourceLimitError` otherwise.

    ``btf_fd`` with ``func_info``/``line_info`` (packed ``bpf_func_info``, 8
    bytes, / ``bpf_line_info``, 16 bytes, records whose ``insn_off`` counts
    instructions and whose ids and string offsets refer to that BTF) are what
    an object file's programs carry (:mod:`pyebpf.objects` loads them with this).
    """
    code = bytes(insns)
    if len(code) % 8 or not code:
        raise EncodingError(f"program must be a non-empty multiple of 8 bytes, got {len(code)}")
    insn_cd = ffi.from_buffer(code)
    lic = license.encode() + b"\0"
    lic_cd = ffi.from_buffer(lic)
    fda = None
    if fd_array:
        fda = ffi.new("int32_t[]", [as_fd(f) for f in fd_array])
    attr = new_attr()
    pl = attr.prog_load
    pl.prog_type = prog_type
    pl.insn_cnt = len(code) // 8
    pl.insns = addr(insn_cd)
    pl.license = addr(lic_cd)
    pl.kern_version = kern_version
    pl.prog_flags = prog_flags
    nm = obj_name(name)
    ffi.memmove(pl.prog_name, nm, len(nm))
    pl.prog_ifindex = prog_ifindex
    pl.expected_attach_type = expected_attach_type
    pl.attach_btf_id = attach_btf_id
    pl.attach_prog_fd = as_fd(attach_prog_fd)
    pl.fd_array = addr(fda) if fda is not None else 0
    keep = _fill_btf_info(pl, btf_fd, func_info, line_info)

    level = log_level
    size = max(int(log_size), 128) if level else 0
    asked_log = bool(log_level)
    first_err = 0
    while True:
        logbuf = bytearray(size) if level else None
        log_cd = ffi.from_buffer(logbuf) if level else None
        pl.log_level = level
        pl.log_size = size
        pl.log_buf = addr(log_cd) if level else 0
        pl.log_true_size = 0
        ret = try_bpf(Cmd.PROG_LOAD, attr, _SZ_PROG_LOAD)
        if ret >= 0:
            del keep                     # (the func/line info buffers lived until here)
            return Fd(ret), (decode_cstr(logbuf) if asked_log else "")
        err = -ret
        if err == E.ENOSPC and level and first_err and pl.log_true_size:
            # loaded again only to learn why it was refused, and the kernel
            # (6.4+: it says log_true_size) kept the log's end, where the
            # reason is: a third verification would say no more
            raise _prog_load_error(first_err, decode_cstr(logbuf), prog_type,
                                   expected_attach_type, license)
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
            raise kernel_error("BPF_PROG_LOAD", err, size=size)
        if level == 0 and err in (E.EACCES, E.EINVAL, E.E2BIG, E.ENOSPC, E.EFAULT):
            first_err = err
            level = 1                    # load again only to learn why
            size = max(int(log_size), 128)
            continue
        log = decode_cstr(logbuf)
        raise _prog_load_error(err, log, prog_type, expected_attach_type, license)


def _fill_btf_info(pl: Any, btf_fd: int, func_info: bytes,
                   line_info: bytes) -> list[Any]:
    """Point ``pl`` (a ``prog_load`` attr) at the BTF and its func/line info
    records; returns the cffi buffers, which must live until the load."""
    keep: list[Any] = []
    if not btf_fd:
        return keep
    pl.prog_btf_fd = btf_fd
    if func_info:
        keep.append(ffi.from_buffer(func_info))
        pl.func_info_rec_size = FUNC_INFO_REC
        pl.func_info = addr(keep[-1])
        pl.func_info_cnt = len(func_info) // FUNC_INFO_REC
    if line_info:
        keep.append(ffi.from_buffer(line_info))
        pl.line_info_rec_size = LINE_INFO_REC
        pl.line_info = addr(keep[-1])
        pl.line_info_cnt = len(line_info) // LINE_INFO_REC
    return keep


def _prog_load_error(err: int, log: str, prog_type: int, expected_attach_type: int,
                     license: str) -> KernelError:
    from .hints import VERIFIER_ERRNOS, verifier_hint, verifier_message  # the failure path
    if log.strip() and err in VERIFIER_ERRNOS:
        message = verifier_message(log)
        return VerifierError(err, log, message or os.strerror(err), hint=verifier_hint(message, log))
    tname = enum_name(ProgType, prog_type)
    return kernel_error("BPF_PROG_LOAD", err, f"program type {tname}", tname=tname,
                        prog_type=prog_type,
                        attach=enum_name(AttachType, expected_attach_type),
                        license_note="" if license else "; the license must not be empty")
