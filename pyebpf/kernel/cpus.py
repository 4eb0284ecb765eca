"""CPU sets as the kernel sees them (for per-CPU maps and per-CPU perf rings)."""
from __future__ import annotations

__all__ = ["parse_cpu_list", "possible_cpus", "online_cpus", "num_possible_cpus"]


def parse_cpu_list(text: str) -> list[int]:
    """Parse the kernel's CPU list syntax: ``"0-3,8,10-11"`` -> ``[0, 1, 2, 3, 8, 10, 11]``."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(part))
    return cpus


def _read_list(name: str) -> list[int]:
    with open(f"/sys/devices/system/cpu/{name}") as f:
        return parse_cpu_list(f.read())


_POSSIBLE: tuple[int, ...] | None = None


def _possible() -> tuple[int, ...]:
    # (a module global, not functools.lru_cache: functools is not imported on
    # the start-up path of per-CPU maps and objects)
    global _POSSIBLE
    if _POSSIBLE is None:
        _POSSIBLE = tuple(_read_list("possible"))
    return _POSSIBLE


def possible_cpus() -> list[int]:
    """CPUs that could ever be online (``/sys/devices/system/cpu/possible``; cached).

    Per-CPU map values have one slot per *possible* CPU, in this order.
    """
    return list(_possible())


def num_possible_cpus() -> int:
    """``len(possible_cpus())``, cached."""
    return len(_possible())


def online_cpus() -> list[int]:
    """CPUs online right now (``/sys/devices/system/cpu/online``; not cached)."""
    return _read_list("online")
