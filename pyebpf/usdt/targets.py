"""Where USDT probes live: a path, a library name, or the modules of a process.

* :func:`resolve_target` turns ``/usr/bin/python3.11``, ``libc``,
  ``libpython3.11``, ``python3.11`` (on $PATH) into a file path.
* :func:`process_modules` lists the files a process maps, as paths this
  process can open (``/proc/PID/root/...`` for a process in another mount
  namespace such as a container).

Both delegate to :mod:`pyebpf.elf` (:func:`~pyebpf.elf.resolve_library`,
:func:`~pyebpf.elf.process_modules`, one source of truth for library names
and /proc/PID/maps) and turn its errors into
:class:`~pyebpf.errors.UsdtTargetError`.
"""
from __future__ import annotations

from typing import NamedTuple

from ..errors import UsdtTargetError

__all__ = ["ProcessModule", "library_dirs", "resolve_target", "process_modules"]


def library_dirs() -> list[str]:
    """The directories searched for a library name (after /etc/ld.so.cache)."""
    from ..elf import library_search_dirs
    return library_search_dirs()


def resolve_target(target: str, pid: int | None = None) -> str:
    """A file path for ``target``: a path (with a ``/``) as is; else a library
    name (``libc``, ``c``, ``libpython3.11``, ``libstdc++.so.6``) or a program
    name on $PATH, as :func:`pyebpf.elf.resolve_library` finds it (with
    ``pid``: among that process's modules first).  Raises
    :class:`~pyebpf.errors.UsdtTargetError` when nothing matches."""
    from ..elf import LibraryNotFoundError, resolve_library
    if not target:
        raise UsdtTargetError("empty target: give a path, a library name or a program name")
    try:
        return resolve_library(target, pid)
    except LibraryNotFoundError as exc:
        raise UsdtTargetError(f"cannot find {target!r}: {exc}") from None
    except ProcessLookupError:
        raise UsdtTargetError(f"no process {pid}") from None


class ProcessModule(NamedTuple):
    """A file mapped by a process: ``path`` as the process sees it,
    ``host_path`` a path this process can open that is the same file (the
    path itself, ``/proc/PID/root/<path>`` for a process in another mount
    namespace, ``/proc/PID/map_files/...`` for a deleted file)."""

    pid: int
    path: str
    host_path: str
    deleted: bool


def process_modules(pid: int) -> list[ProcessModule]:
    """The distinct files process ``pid`` maps (its executable first).

    Raises :class:`~pyebpf.errors.UsdtTargetError` if the process does not
    exist or its maps cannot be read."""
    from ..elf import process_modules as elf_modules
    try:
        mods = elf_modules(int(pid))
    except ProcessLookupError:
        raise UsdtTargetError(f"no process {pid}") from None
    except OSError as exc:
        raise UsdtTargetError(f"cannot read /proc/{pid}/maps: {exc.strerror or exc}") from None
    return [ProcessModule(m.pid, m.path, m.open_path, any(e.deleted for e in m.maps))
            for m in mods]
