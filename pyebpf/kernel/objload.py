"""BPF_PROG_LOAD with what objects carry and pyebpf's own programs do not:
the program's BTF fd, func_info and line_info records, and the BTF id of
the attach target (tp_btf, fentry, lsm, iter).

The conventions, and the log handling, are those of :func:`.prog.prog_load`.
"""
from __future__ import annotations

import errno as E

from ..errors import EncodingError
from .constants import Cmd
from .core import Fd, addr, attr_size, decode_cstr, kernel_error, new_attr, obj_name, try_bpf
from .ffi import ffi
from .prog import DEFAULT_LOG_SIZE, _LOG_MAX, _prog_load_error

__all__ = ["prog_load_btf"]

_SZ = attr_size("prog_load", "log_true_size")
FUNC_INFO_REC = 8
LINE_INFO_REC = 16


def prog_load_btf(prog_type: int, insns: bytes, license: str, *, name: str = "",
                  btf_fd: int = 0, func_info: bytes = b"", line_info: bytes = b"",
                  expected_attach_type: int = 0, attach_btf_id: int = 0,
                  kern_version: int = 0, prog_flags: int = 0, log_level: int = 0,
                  log_size: int = DEFAULT_LOG_SIZE) -> tuple[Fd, str]:
    """BPF_PROG_LOAD of an object's program.  ``func_info``/``line_info`` are
    packed ``bpf_func_info`` (8 bytes) / ``bpf_line_info`` (16 bytes) records
    whose ``insn_off`` counts instructions and whose ids and string offsets
    refer to the BTF of ``btf_fd``.  Returns ``(fd, log)``; raises as
    :func:`.prog.prog_load` does."""
    code = bytes(insns)
    if len(code) % 8 or not code:
        raise EncodingError(f"program must be a non-empty multiple of 8 bytes, got {len(code)}")
    keep = [ffi.from_buffer(code), ffi.from_buffer(license.encode() + b"\0")]
    attr = new_attr()
    pl = attr.prog_load
    pl.prog_type = prog_type
    pl.insn_cnt = len(code) // 8
    pl.insns = addr(keep[0])
    pl.license = addr(keep[1])
    pl.kern_version = kern_version
    pl.prog_flags = prog_flags
    nm = obj_name(name)
    ffi.memmove(pl.prog_name, nm, len(nm))
    pl.expected_attach_type = expected_attach_type
    pl.attach_btf_id = attach_btf_id
    if btf_fd:
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
    level = log_level
    size = max(int(log_size), 128) if level else 0
    while True:
        logbuf = bytearray(size) if level else None
        log_cd = ffi.from_buffer(logbuf) if logbuf is not None else None
        pl.log_level = level
        pl.log_size = size
        pl.log_buf = addr(log_cd) if log_cd is not None else 0
        pl.log_true_size = 0
        ret = try_bpf(Cmd.PROG_LOAD, attr, _SZ)
        if ret >= 0:
            return Fd(ret), (decode_cstr(logbuf) if log_level else "")
        err = -ret
        if err == E.ENOSPC and level and size < _LOG_MAX:
            size = min(max(pl.log_true_size, size * 8), _LOG_MAX)
            continue
        if err == E.ENOSPC and level:
            raise kernel_error("BPF_PROG_LOAD", err, size=size)
        if level == 0 and err in (E.EACCES, E.EINVAL, E.E2BIG, E.ENOSPC, E.EFAULT):
            level = 1
            size = max(int(log_size), 128)
            continue
        raise _prog_load_error(err, decode_cstr(logbuf), prog_type, expected_attach_type,
                               license)
