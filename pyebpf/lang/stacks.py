"""``ustack`` and ``kstack`` as bpftrace prints them.

The programs store a stack as one 8-byte value: ``pid << 32 | stack id``
for a user stack (captured into a build-id stack map, so that it can be
symbolized after the process is gone: see :mod:`pyebpf.symbols.stacks`), the
stack id alone for a kernel stack (a plain stack map; frames named from
``/proc/kallsyms``).

:meth:`StackPrinter.stack` gives the frames; :mod:`pyebpf.lang.output`
prints them as bpftrace 0.17 does. Unlike bpftrace 0.17, a user stack printed after its process exited is
still symbolized (bpftrace prints bare addresses then).
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

    from ..symbols.kallsyms import KernelSymbols
    from .types import Type

__all__ = ["StackPrinter", "UserSymbols", "kernel_symbol", "kernel_symbol_name"]

_KSYMS: KernelSymbols | None = None


def _kallsyms() -> KernelSymbols:
    global _KSYMS
    if _KSYMS is None:
        from ..symbols.kallsyms import KernelSymbols
        _KSYMS = KernelSymbols(types="tTwWdDbBrR")     # (data symbols too: ksym())
    return _KSYMS


def kernel_address(name: str) -> int | None:
    """The address of kernel symbol ``name`` (``kaddr()``), None when unknown."""
    return _kallsyms().address(name)


def kernel_symbol(addr: int) -> str:
    """``symbol+offset`` of a kernel address (its hex when unknown)."""
    return _kallsyms().symbol(addr)


def kernel_symbol_name(addr: int) -> str | None:
    """The kernel symbol ``addr`` is in, without an offset (``ksym()`` as
    bpftrace prints it); None below the first symbol."""
    return _kallsyms().name(addr)


class UserSymbols:
    """``usym()`` and ``func`` as bpftrace 0.17 prints them: the symbol an
    address is in, without an offset, looked up in the process stored with
    the value (else the traced one, ``-p`` or ``-c``). A map printed after the process is gone shows the
    address (``0x...``), as bpftrace does; an event (``printf``, ``print``)
    is named from the process as it was (:meth:`snapshot`), since it was
    sent while the process ran."""

    def __init__(self, pids: Sequence[int]) -> None:
        from ..symbols.stacks import Symbolizer
        self.pids = [p for p in pids if p]
        self.symbolizer = Symbolizer()
        self._seen: set[int] = set()

    def snapshot(self, wait: float = 0.05) -> None:
        """Read the traced processes' modules now (just after exec: waiting
        up to ``wait`` seconds for the kernel to map the executable)."""
        import os
        import time
        deadline = time.monotonic() + wait
        for pid in self.pids:
            while self.symbolizer.remember_pid(pid):
                self._seen.add(pid)
                try:
                    exe = os.readlink(f"/proc/{pid}/exe")
                except OSError:
                    break
                mods = self.symbolizer._pids.get(pid, [])
                if any(m.path == exe for m in mods) or time.monotonic() > deadline:
                    break
                time.sleep(0.001)

    def name(self, addr: int, event: bool = False, owner: int = 0) -> str | None:
        """``addr``'s symbol in process ``owner`` when given (the pid stored
        with the value), else in a traced process -- alive, or remembered
        when ``event``; None when none names it."""
        import os
        for pid in [owner] if owner else self.pids:
            try:
                os.readlink(f"/proc/{pid}/exe")       # fails for a zombie as well
                alive = True
            except OSError:
                alive = False
            if not alive and not (event and pid in self._seen):
                continue
            for fresh in (alive and pid not in self._seen, alive):
                if fresh:                                  # (it may have loaded libraries)
                    self._seen.add(pid)
                    self.symbolizer.remember_pid(pid)
                hit = self.symbolizer.frame(addr, pid)
                if not hit.startswith("0x"):
                    return hit.rpartition("+")[0] or hit
        return None


class StackPrinter:
    """Names the stacks of one run: ``ustacks``/``kstacks`` are the live
    stack maps (or None), ``files`` the probed binaries (searched for build
    ids)."""

    def __init__(self, ustacks: Any, kstacks: Any, files: Sequence[str] = ()) -> None:
        from ..symbols.stacks import Symbolizer
        self.ustacks = ustacks
        self.kstacks = kstacks
        self.symbolizer = Symbolizer([f for f in files if f])
        self._cache: dict[tuple[str, int, int], list[tuple[int, str, str | None]]] = {}
        #: names ``pystack`` values (a :class:`pyebpf.lang.pystack.PyStackNames`)
        self.python: Any = None

    def remember_pid(self, pid: int) -> None:
        """Snapshot ``pid``'s modules now (for frames without a build id)."""
        self.symbolizer.remember_pid(pid)

    def frames(self, t: Type, value: int) -> list[tuple[int, str]]:
        """``(address, name)`` of every frame of the stack ``value`` of type ``t``."""
        return [(a, n) for a, n, _ in self._frames(t, value)]

    def _frames(self, t: Type, value: int) -> list[tuple[int, str, str | None]]:
        """``(address, name, module path or None)`` of every frame."""
        if t.kind == "pystack":
            return self.python.frames(value) if self.python is not None else []
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

    def _read(self, kind: str, pid: int, sid: int) -> list[tuple[int, str, str | None]]:
        smap = self.ustacks if kind == "ustack" else self.kstacks
        if smap is None:
            return []
        try:
            raw = smap[sid]
        except (KeyError, OSError):
            return []
        if kind == "kstack":
            return [(a, kernel_symbol(a), None) for a in raw if a]
        names = self.symbolizer.frames(raw, pid)
        # (the address in the process and its module, as bpftrace's perf mode prints them)
        out = []
        for r, n in zip(raw, names):
            addr, module = self.symbolizer.locate(r, pid)
            out.append((addr, n, module))
        return out

    def stack(self, value: Any, t: Type) -> list[tuple[int, str | None, str | None]]:
        """The frames :func:`pyebpf.lang.output.format_stack` prints:
        ``(address, symbol+offset or None, module or None)``, innermost
        first, cut to the type's ``stack_limit``."""
        if isinstance(value, list):
            return value
        frames = self._frames(t, int(value))[:max(t.stack_limit, 0) or None]
        return [(a, None if n.startswith("0x") else n, m) for a, n, m in frames]

    def formatter(self, indent: int = 0) -> Callable[[Any, Type], Any]:
        """The ``stacks`` callable of :mod:`pyebpf.lang.output`."""
        return self.stack
