"""The running kernel's version, from ``uname -r``: a module of its own so
that what needs only the version (a BPF object's ``LINUX_KERNEL_VERSION``
extern) imports neither the feature probes (:mod:`.features`, which
re-exports these) nor ``re``."""
from __future__ import annotations

import os

__all__ = ["kernel_version", "kernel_version_code"]

_VERSION: tuple[int, int, int] | None = None


def _numbers(text: str) -> list[int]:
    """The runs of ASCII digits in ``text``, as numbers (``"6.1.0+x2"`` -> 6, 1, 0, 2)."""
    out: list[int] = []
    run = ""
    for ch in text + ".":
        if "0" <= ch <= "9":
            run += ch
        elif run:
            out.append(int(run))
            run = ""
    return out


def kernel_version() -> tuple[int, int, int]:
    """The running kernel's ``(major, minor, patch)`` from ``uname -r``
    (the numbers before its first ``-``; missing ones are 0; cached)."""
    global _VERSION
    if _VERSION is None:
        nums = _numbers(os.uname().release.split("-")[0])[:3]
        nums += [0] * (3 - len(nums))
        _VERSION = (nums[0], nums[1], nums[2])
    return _VERSION


def kernel_version_code() -> int:
    """``KERNEL_VERSION(a, b, c)`` as the kernel encodes it (``kern_version`` of old kprobes)."""
    a, b, c = kernel_version()
    return (a << 16) + (b << 8) + min(c, 255)
