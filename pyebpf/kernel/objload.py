"""BPF_PROG_LOAD with what objects carry and pyebpf's own programs do not:
the program's BTF fd, func_info and line_info records, and the BTF id of
the attach target (tp_btf, fentry, lsm, iter).

The attr filling, the conventions and the log handling are those of
:func:`.prog.prog_load`, which this calls.
"""
from __future__ import annotations

from .core import Fd
from .prog import DEFAULT_LOG_SIZE, FUNC_INFO_REC, LINE_INFO_REC, prog_load

__all__ = ["prog_load_btf", "FUNC_INFO_REC", "LINE_INFO_REC"]


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
    return prog_load(prog_type, insns, license, name=name, btf_fd=btf_fd,
                     func_info=func_info, line_info=line_info,
                     expected_attach_type=expected_attach_type,
                     attach_btf_id=attach_btf_id, kern_version=kern_version,
                     prog_flags=prog_flags, log_level=log_level, log_size=log_size)
