"""``ustack`` and ``kstack`` as bpftrace prints them.

The programs store a stack as one 8-byte value: ``pid << 32 | stack id``
for a user stack (captured into a build-id stack map, so that it can be
symbolized after the process is gone: see :mod:`pyebpf.trace.stacks`), the
stack id alone for a kernel stack (a plain stack map; frames named from
``/proc/kallsyms``).

:meth:`StackPrinter.stack` gives the frames; :mod:`pyebpf.lang.output`
prints them as bpftrace 0.17 does. Unlike bpftrace 0.17, a user stack printed after its process exited is
still symbolized (bpftrace prints bare addresses then).
"""
from __future__ import annotations

import bisect

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

    from .types import Type

__all__ = ["StackPrinter", "kernel_symbol"]

_KSYMS: tuple[list[int], list[str]] | None = None


def _kallsyms() -> tuple[list[int], list[str]]:
    global _KSYMS
    if _KSYMS is None:
        pairs: list[tuple[int, str]] = []
        try:
            with open("/proc/kallsyms") as f:
                for line in f:
                    parts = line.split()
                    if len(parts) >= 3 and parts[1] in "tTwWdDbBrR":
                        addr = int(parts[0], 16)
                        if addr:
                            pairs.append((addr, parts[2]))
        except OSError:
            pass
        pairs.sort()
        _KSYMS = ([a for a, _ in pairs], [n for _, n in pairs])
    return _KSYMS


def kernel_address(name: str) -> int | None:
    """The address of kernel symbol ``name`` (``kaddr()``), None when unknown."""
    addrs, names = _kallsyms()
    try:
        return addrs[names.index(name)]
    except ValueError:
        return None


def kernel_symbol(addr: int) -> str:
    """``symbol+offset`` of a kernel address (its hex when unknown)."""
    addrs, names = _kallsyms()
    i = bisect.bisect_right(addrs, addr) - 1
    if i < 0:
        return f"0x{addr:x}"
    return f"{names[i]}+{addr - addrs[i]}"


class StackPrinter:
    """Names the stacks of one run: ``ustacks``/``kstacks`` are the live
    stack maps (or None), ``files`` the probed binaries (searched for build
    ids)."""

    def __init__(self, ustacks: Any, kstacks: Any, files: Sequence[str] = ()) -> None:
        from ..trace.stacks import Symbolizer
        self.ustacks = ustacks
        self.kstacks = kstacks
        self.symbolizer = Symbolizer([f for f in files if f])
        self._cache: dict[tuple[str, int, int], list[tuple[int, str]]] = {}

    def remember_pid(self, pid: int) -> None:
        """Snapshot ``pid``'s modules now (for frames without a build id)."""
        self.symbolizer.remember_pid(pid)

    def frames(self, t: Type, value: int) -> list[tuple[int, str]]:
        """``(address, name)`` of every frame of the stack ``value`` of type ``t``."""
        if t.kind == "ustack":
            pid, sid = value >> 32, value & 0xFFFFFFFF
        else:
            pid, sid = 0, value & 0xFFFFFFFF
        if sid >= 1 << 31:
            return []
        key = (t.kind, pid, sid)
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = self._read(t.kind, pid, sid)
        return got

    def _read(self, kind: str, pid: int, sid: int) -> list[tuple[int, str]]:
        smap = self.ustacks if kind == "ustack" else self.kstacks
        if smap is None:
            return []
        try:
            raw = smap[sid]
        except (KeyError, OSError):
            return []
        if kind == "kstack":
            return [(a, kernel_symbol(a)) for a in raw if a]
        names = self.symbolizer.frames(raw, pid)
        return [(r if isinstance(r, int) else r[2], n) for r, n in zip(raw, names)]

    def stack(self, value: Any, t: Type) -> list[tuple[int, str | None, str | None]]:
        """The frames :func:`pyebpf.lang.output.format_stack` prints:
        ``(address, symbol+offset or None, module or None)``, innermost
        first, cut to the type's ``stack_limit``."""
        if isinstance(value, list):
            return value
        frames = self.frames(t, int(value))[:max(t.stack_limit, 0) or None]
        return [(a, None if n.startswith("0x") else n, None) for a, n in frames]

    def formatter(self, indent: int = 0) -> Callable[[Any, Type], Any]:
        """The ``stacks`` callable of :mod:`pyebpf.lang.output`."""
        return self.stack
