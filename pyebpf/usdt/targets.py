"""Where USDT probes live: a path, a library name, or the modules of a process.

* :func:`resolve_target` turns ``/usr/bin/python3.11``, ``libc``,
  ``libpython3.11``, ``python3.11`` (on $PATH) into a file path.
* :func:`process_modules` lists the files a process maps, as paths this
  process can open (``/proc/PID/root/...``, which also works for processes in
  other mount namespaces such as containers).

Kept minimal on purpose: ``pyebpf.elf`` is meant to own library resolution
and /proc/PID/maps parsing; this module is the USDT package's stand-in until
the two are merged.
"""
from __future__ import annotations

import glob
import os
import platform
import shutil
from typing import NamedTuple

from ..errors import UsdtTargetError

__all__ = ["ProcessModule", "library_dirs", "resolve_target", "process_modules"]


def _multiarch() -> str:
    m = platform.machine()
    return {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu",
            "armv7l": "arm-linux-gnueabihf", "s390x": "s390x-linux-gnu",
            "ppc64le": "powerpc64le-linux-gnu", "riscv64": "riscv64-linux-gnu",
            "i686": "i386-linux-gnu"}.get(m, f"{m}-linux-gnu")


def _ld_so_conf_dirs(path: str = "/etc/ld.so.conf", depth: int = 0) -> list[str]:
    out: list[str] = []
    if depth > 4:
        return out
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include"):
            pattern = line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
            if pattern and not os.path.isabs(pattern):
                pattern = os.path.join(os.path.dirname(path), pattern)
            for inc in sorted(glob.glob(pattern)):
                out += _ld_so_conf_dirs(inc, depth + 1)
        elif os.path.isabs(line):
            out.append(line)
    return out


def library_dirs() -> list[str]:
    """The directories searched for a library name, in order:
    $LD_LIBRARY_PATH, /etc/ld.so.conf(.d), then the standard ones."""
    ma = _multiarch()
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs += _ld_so_conf_dirs()
    dirs += [f"/lib/{ma}", f"/usr/lib/{ma}", "/lib64", "/usr/lib64", "/lib", "/usr/lib",
             f"/usr/local/lib/{ma}", "/usr/local/lib"]
    seen: set[str] = set()
    return [d for d in dirs if not (d in seen or seen.add(d))]


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def resolve_target(target: str) -> str:
    """A file path for ``target``: an existing path as is; else a library
    name (``libc``, ``c``, ``libpython3.11``, ``libstdc++.so.6``) searched in
    :func:`library_dirs`; else a program name on $PATH.  Raises
    :class:`~pyebpf.errors.UsdtTargetError` when nothing matches."""
    if not target:
        raise UsdtTargetError("empty target")
    if "/" in target or os.path.exists(target):
        if not os.path.exists(target):
            raise UsdtTargetError(f"{target}: no such file")
        return target
    base = target if target.startswith("lib") else f"lib{target}"
    names = [base] if ".so" in base else [f"{base}.so", f"{base}.so.*", f"{base}-*.so*"]
    dirs = library_dirs()
    for d in dirs:
        for pattern in names:
            for cand in sorted(glob.glob(os.path.join(glob.escape(d), pattern)),
                               key=lambda p: (len(p), p)):
                if os.path.isfile(cand) and _is_elf(cand):   # skips linker scripts
                    return cand
    exe = shutil.which(target)
    if exe:
        return exe
    raise UsdtTargetError(f"cannot find {target!r}: not a path, no library {base}.so* in "
                          f"{', '.join(dirs)}, and no program of that name on $PATH")


class ProcessModule(NamedTuple):
    """A file mapped by a process: ``path`` as the process sees it,
    ``host_path`` as this process can open it (``/proc/PID/root/...``)."""

    pid: int
    path: str
    host_path: str
    deleted: bool


def process_modules(pid: int) -> list[ProcessModule]:
    """The distinct files process ``pid`` maps, in address order.

    Raises :class:`~pyebpf.errors.UsdtTargetError` if the process does not
    exist or its maps cannot be read."""
    try:
        with open(f"/proc/{int(pid)}/maps", encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
    except FileNotFoundError:
        raise UsdtTargetError(f"no process {pid}") from None
    except OSError as exc:
        raise UsdtTargetError(f"cannot read /proc/{pid}/maps: {exc.strerror}") from None
    seen: set[str] = set()
    out: list[ProcessModule] = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6:
            continue
        path = parts[5]
        deleted = path.endswith(" (deleted)")
        if deleted:
            path = path[: -len(" (deleted)")]
        if not path.startswith("/") or path in seen:
            continue
        seen.add(path)
        out.append(ProcessModule(int(pid), path, f"/proc/{int(pid)}/root{path}", deleted))
    return out
