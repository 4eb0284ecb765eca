"""The USDT probe source of the tracing layer: a USDT probe seen through
the :class:`~pyebpf.probes.sources.ProbeSource` contract that ``pyebpf trace``,
:class:`~pyebpf.trace.Trace` and the asm files use.

(It lived in ``pyebpf.usdt.source`` before; the tracing layer owns its probe
sources, and :mod:`pyebpf.usdt` knows notes, specs, argument reads and
attaching.  ``pyebpf.usdt.usdt_probe_source`` still names it.)

::

    from pyebpf.probes.usdt_source import usdt_probe_source

    src = usdt_probe_source("/usr/bin/python3.11", "python", "function__entry")
    p = Program("t")
    p.mov(R6, R1)
    src.emit_arg(p, R7, 0, R6)                  # r7 = arg0 (64-bit, extended)
    ...
    prog = loader.load(p, src.prog_type, **src.load_options)
    link = src.attach(prog)                     # or src.attach(prog, pid=1234)
    src.describe()   # 'usdt:/usr/bin/python3.11:python:function__entry (1 location, semaphore)'

``provider=None`` means the unique probe with that name (an error lists the
candidates when several providers have one).  ``target`` is a path, a
library or program name, or -- with ``pid`` -- ``""``/``"*"`` for every
module of that process.  Errors are :class:`~pyebpf.errors.UsdtError`
subclasses (a wrong probe name: :class:`~pyebpf.errors.UsdtProbeLookupError`,
listing the probes that exist; an unreadable argument:
:class:`~pyebpf.errors.UsdtSpecError`, raised by :meth:`emit_arg`).
"""
from __future__ import annotations

from typing import Any

from ..kernel.constants import ProgType
from ..program import Program, Reg
from ..usdt.attach import Usdt, find_usdt

__all__ = ["UsdtProbeSource", "usdt_probe_source"]


class UsdtProbeSource:
    """A resolved USDT probe, seen through the trace command's probe-source API.

    Attributes:
        prog_type: the program type to load (``BPF_PROG_TYPE_KPROBE``).
        load_options: keyword arguments for :func:`pyebpf.loader.load`
            (``expected_attach_type``, chosen for this kernel's uprobe attach
            mechanism).
        arg_count: the number of arguments (the largest over the locations).
        usdt: the underlying :class:`~pyebpf.usdt.attach.Usdt`.
    """

    def __init__(self, probe: Usdt, pid: int | None = None) -> None:
        self.usdt = probe
        self.pid = pid
        self.prog_type: int = int(ProgType.KPROBE)
        opts = probe.load_options()
        self.load_options: dict[str, Any] = {"expected_attach_type":
                                             opts["expected_attach_type"]}
        self.arg_count: int = probe.arg_count

    def emit_arg(self, p: Program, dst: Reg, n: int, ctx: Reg) -> None:
        """Emit ``dst = argument n`` (64-bit, sign- or zero-extended per its
        spec) into ``p``; ``ctx`` holds the saved context pointer (r6-r9).
        Clobbers r0-r5.  Raises :class:`~pyebpf.errors.UsdtSpecError` when
        the argument cannot be read (float, undecodable spec, absent...)."""
        self.usdt.read_arg(p, dst, n, ctx)

    def arg_signed(self, n: int) -> bool:
        """Extra (not in the contract): argument ``n``'s C type is signed (at
        some location), so its 64-bit value reads best as an s64."""
        return self.usdt.arg_signed(n)

    def arg_size(self, n: int) -> int:
        """Extra: argument ``n``'s size in bytes (the largest over the locations)."""
        return self.usdt.arg_size(n)

    def attach(self, loaded_program: Any, pid: int | None = None) -> Any:
        """Attach the loaded program to every location (semaphores enabled
        through ref_ctr); ``pid`` restricts it to one process (default: the
        pid given to :func:`usdt_probe_source`).  Returns a
        :class:`pyebpf.attach.Link`."""
        return self.usdt.attach(loaded_program, pid=pid if pid is not None else self.pid)

    def describe(self) -> str:
        """``usdt:/usr/bin/python3.11:python:function__entry (1 location, semaphore)``."""
        return self.usdt.describe()

    def __repr__(self) -> str:
        return f"<UsdtProbeSource {self.describe()}>"


def usdt_probe_source(target: str, provider: str | None, name: str,
                      pid: int | None = None) -> UsdtProbeSource:
    """Resolve USDT probe ``provider:name`` in ``target`` for the trace command."""
    return UsdtProbeSource(find_usdt(target or None, provider or None, name, pid=pid), pid)
