"""Process controls Python's :mod:`os` lacks, from the kernel: prctl(2).

Import this module before forking when a child will call it between fork and
exec (importing after a fork, with other threads about, can deadlock).
"""
from __future__ import annotations

from .constants import PR_SET_PDEATHSIG
from .core import kernel_error
from .ffi import NR_PRCTL, ffi, lib

__all__ = ["set_death_signal"]


def set_death_signal(sig: int) -> None:
    """``prctl(PR_SET_PDEATHSIG, sig)``: the kernel sends ``sig`` to this process
    when its parent thread ends, however it ends (cleared by exec of a
    set-user-ID or set-group-ID program)."""
    if lib.syscall(NR_PRCTL, ffi.cast("long", PR_SET_PDEATHSIG), ffi.cast("long", sig)) != 0:
        raise kernel_error("prctl", ffi.errno, f"PR_SET_PDEATHSIG {sig}")
