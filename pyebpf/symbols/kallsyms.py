"""Kernel addresses to symbol names, from ``/proc/kallsyms``: shared by the
profiler (kernel frames) and the language (``kstack``, ``ksym()``, ``kaddr()``)."""
from __future__ import annotations

import bisect

__all__ = ["KernelSymbols", "read_kallsyms"]


def read_kallsyms(path: str = "/proc/kallsyms",
                  types: str = "tTwW") -> tuple[list[int], list[str]]:
    """The symbols of ``path`` whose type letter is in ``types`` (default:
    functions), sorted by address: ``(addresses, names)``; symbols at address
    0 (addresses hidden) are left out, an unreadable file gives none."""
    pairs: list[tuple[int, str]] = []
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[1] in types:
                    addr = int(parts[0], 16)
                    if addr:
                        pairs.append((addr, parts[2]))
    except OSError:
        pass
    pairs.sort()
    return [a for a, _ in pairs], [n for _, n in pairs]


class KernelSymbols:
    """Kernel addresses to names, from ``/proc/kallsyms`` (the symbols whose
    type letter is in ``types``: functions by default)."""

    def __init__(self, path: str = "/proc/kallsyms", types: str = "tTwW") -> None:
        self._addrs, self._names = read_kallsyms(path, types)

    def _index(self, addr: int) -> int:
        return bisect.bisect_right(self._addrs, addr) - 1

    def name(self, addr: int) -> str | None:
        """The symbol containing ``addr`` (None when unknown / not readable)."""
        i = self._index(addr)
        return self._names[i] if i >= 0 else None

    def symbol(self, addr: int) -> str:
        """``name+offset`` of ``addr`` (its hex when below every symbol)."""
        i = self._index(addr)
        if i < 0:
            return f"0x{addr:x}"
        return f"{self._names[i]}+{addr - self._addrs[i]}"

    def address(self, name: str) -> int | None:
        """The address of symbol ``name``, None when unknown."""
        try:
            return self._addrs[self._names.index(name)]
        except ValueError:
            return None
