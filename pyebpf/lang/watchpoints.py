"""Watchpoints: ``watchpoint:ADDR:LEN:MODE`` and ``asyncwatchpoint:...``,
hardware breakpoints through perf's breakpoint PMU, as bpftrace 0.17 runs
them.

- ``watchpoint:0x10000000:8:w`` watches an address of the ``-c``/``-p``
  process (every process without one: a kernel address) -- attached with
  the other probes.
- ``watchpoint:FUNC+argN:LEN:MODE`` watches the address function ``FUNC``
  of that process's program gets as its argument N: a *setup* uprobe on
  ``FUNC`` stops the process (SIGSTOP; not for ``asyncwatchpoint``) and
  sends the address; user space then places the watchpoint and lets the
  process go on (SIGCONT). ``FUNC`` may be a wildcard: one watchpoint per
  function. A repeated address of the same probe is watched once.
- ``unwatch(ADDR)`` removes every watchpoint on ``ADDR`` (through user
  space, as bpftrace).
- The CPU has few debug registers (four on x86-64): a watchpoint beyond
  them prints bpftrace's ``Failed to attach watchpoint probe. You are out
  of watchpoint registers.`` and the tracing goes on.

``probe`` names them ``watchpoint:ADDR:LEN:MODE`` (the address in decimal)
and ``watchpoint:PROGRAM:FUNC:N:LEN:MODE`` (``:N`` left out for arg0, as
bpftrace 0.17 names them); bpftrace's ``Attaching N
probes`` counts the setup uprobes, not the watchpoints placed later.
"""
from __future__ import annotations

from ..probes.sources import FixedTypeSource, ProbeSpecError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

    from ..attach import Link
    from ..program import Program, Reg
    from .ast import AttachPoint
    from .probes import ResolvedProbe

__all__ = ["WatchpointSource", "resolve_watchpoint", "OUT_OF_REGISTERS"]

#: what bpftrace prints when a watchpoint finds no free debug register
OUT_OF_REGISTERS = "Failed to attach watchpoint probe. You are out of watchpoint registers."


class WatchpointSource(FixedTypeSource):
    """A watchpoint (see the module docs): ``address`` (0 until the setup
    probe sends it, for ``FUNC+argN``), ``length``, ``mode``; ``setup`` the
    :class:`~pyebpf.probes.sources.UprobeSource` on ``FUNC`` and ``arg`` N,
    or None for a fixed address."""

    arg_count = 0
    prog_type_name = "PERF_EVENT"

    def __init__(self, kind: str, address: int, length: int, mode: str, label: str, *,
                 setup: Any = None, arg: int = 0) -> None:
        self.kind = kind
        self.address = address
        self.length = length
        self.mode = mode
        self.label = label
        self.setup = setup
        self.arg = arg
        #: the last address placed for this probe (a repeat is skipped)
        self.placed = -1

    @property
    def asynchronous(self) -> bool:
        """``asyncwatchpoint``: the process is not stopped while it is placed."""
        return self.kind == "asyncwatchpoint"

    def emit_arg(self, p: Program, dst: Reg, n: int, ctx: Reg) -> None:
        """There are none: a :class:`ProbeSpecError`."""
        raise ProbeSpecError(f"{self.label}: watchpoints have no arguments (arg{n})")

    def attach(self, loaded_program: Any, pid: int | None = None) -> Link:
        """Watch :attr:`address` in process ``pid`` (None: on every CPU)."""
        return self.attach_at(loaded_program, self.address, pid)

    def attach_at(self, loaded_program: Any, address: int, pid: int | None) -> Link:
        """Watch ``address`` in process ``pid`` (None: on every CPU)."""
        from ..attach import attach_breakpoint
        return attach_breakpoint(loaded_program, address, self.length, self.mode,
                                 pid=-1 if pid is None else pid)

    def describe(self) -> str:
        """``watchpoint:0x10000000:8:w``."""
        return self.label


def _program(command: Sequence[str] | None, pid: int | None) -> tuple[str, str]:
    """(file, name shown) of the program a ``FUNC+argN`` watchpoint is in:
    the ``-c`` command's, else ``/proc/PID/exe``."""
    import os
    import shutil
    if command:
        first = command[0]
        found = first if "/" in first else shutil.which(first)
        if found is None or not os.path.exists(found):
            raise ProbeSpecError(f"{first}: no such program")
        return found, first
    if pid is not None:
        return f"/proc/{pid}/exe", f"/proc/{pid}/exe"
    raise ProbeSpecError("a watchpoint on a function's argument needs the process: "
                         "-c CMD or -p PID")


def resolve_watchpoint(ap: AttachPoint, pid: int | None,
                       command: Sequence[str] | None) -> list[ResolvedProbe]:
    """The watchpoints ``ap`` names (one per function a ``FUNC+argN``
    wildcard matches)."""
    from .probes import ResolvedProbe, _functions, _match, _number
    kind = ap.provider
    if len(ap.parts) != 3:
        raise ProbeSpecError(f"{ap.raw}: {kind} probe type requires 3 arguments: "
                             f"{kind}:ADDRESS:LENGTH:MODE or {kind}:FUNCTION+argN:LENGTH:MODE")
    where, length_text, mode = ap.parts
    length = _number(ap, length_text)
    if length not in (1, 2, 4, 8):
        raise ProbeSpecError(f"{ap.raw}: watchpoint length must be one of (1,2,4,8)")
    if not mode or len(set(mode)) != len(mode) or any(c not in "rwx" for c in mode) or \
            ("x" in mode and mode != "x"):
        raise ProbeSpecError(f"{ap.raw}: watchpoint mode must be combination of (r,w,x)")
    if "+" not in where:
        address = _number(ap, where)
        label = f"{kind}:{address}:{length}:{mode}"
        return [ResolvedProbe(label, WatchpointSource(kind, address, length, mode, label))]
    func, _, arg = where.partition("+")
    if not arg.startswith("arg") or not arg[3:].isdigit():
        raise ProbeSpecError(f"{ap.raw}: Invalid function argument (FUNCTION+argN)")
    n = int(arg[3:])
    if n > 5:
        raise ProbeSpecError(f"{ap.raw}: watchpoints read the function's argument from a "
                             "register: arg0 to arg5")
    path, shown = _program(command, pid)
    names = [f for f in _functions(path) if _match(func, f)]
    if not names:
        raise ProbeSpecError(f"{ap.raw}: no function of {shown} matches {func!r}")
    from ..probes.sources import UprobeSource
    out = []
    for f in names:
        # (bpftrace 0.17 names it with the argument's number where the address goes)
        label = f"{kind}:{shown}:{f}:{f'{n}:' if n else ''}{length}:{mode}"
        setup = UprobeSource(path, f, pid=pid)
        out.append(ResolvedProbe(label, WatchpointSource(kind, 0, length, mode, label,
                                                         setup=setup, arg=n)))
    return out
