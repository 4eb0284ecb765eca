"""Library and program names -> files, the way bpftrace and the dynamic linker find them."""
from __future__ import annotations

import os
import struct

from ..errors import close_matches as _close_matches
from .errors import LibraryNotFoundError
from .symbols import cstr

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable

__all__ = ["resolve_library", "ld_so_cache", "library_search_dirs", "expand_path",
           "path_for_pid"]

_LD_CACHE_NEW = b"glibc-ld.so.cache1.1"
_LD_CACHE_OLD = b"ld.so-1.7.0"


#: parsed caches by (path, inode, mtime, size); a dict, not functools (not imported here)
_PARSED: dict[tuple[str, int, int, int], tuple[tuple[str, int, str], ...]] = {}


def _ld_so_cache_cached(path: str, key: tuple[int, int, int]) -> tuple[tuple[str, int, str], ...]:
    full = (path,) + key
    hit = _PARSED.get(full)
    if hit is None:
        if len(_PARSED) >= 4:
            _PARSED.clear()
        hit = _PARSED[full] = _parse_ld_so_cache(path)
    return hit


def _parse_ld_so_cache(path: str) -> tuple[tuple[str, int, str], ...]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return ()
    base = 0
    if data.startswith(_LD_CACHE_OLD):
        if len(data) < len(_LD_CACHE_OLD) + 5:
            return ()
        (nlibs,) = struct.unpack_from("<I", data, len(_LD_CACHE_OLD) + 1)
        base = (len(_LD_CACHE_OLD) + 1 + 4 + nlibs * 12 + 7) & ~7
        pos = data.find(_LD_CACHE_NEW, base)
        if pos < 0:
            return ()
        base = pos
    if data[base:base + len(_LD_CACHE_NEW)] != _LD_CACHE_NEW or len(data) < base + 28:
        return ()
    nlibs, _len_strings = struct.unpack_from("<II", data, base + 20)
    if base + 48 + nlibs * 24 > len(data):
        return ()                               # a damaged cache: the linker ignores it too
    out = []
    for i in range(nlibs):
        flags, key, value = struct.unpack_from("<iII", data, base + 48 + i * 24)
        out.append((cstr(data, base + key), flags, cstr(data, base + value)))
    return tuple(out)


def ld_so_cache(path: str = "/etc/ld.so.cache") -> list[tuple[str, int, str]]:
    """Entries of the dynamic linker's cache: ``(soname, flags, path)``, in cache order.

    Parses the ``glibc-ld.so.cache1.1`` format (also when it follows the old
    ``ld.so-1.7.0`` table).  Returns an empty list when the file is missing
    or damaged (its table does not fit in it).
    The ``flags`` say the ABI (``0x303`` = libc6 x86-64); callers filter on
    the ELF machine of the file instead, which works on every architecture.
    """
    try:
        st = os.stat(path)
    except OSError:
        return []
    return list(_ld_so_cache_cached(path, (st.st_ino, st.st_mtime_ns, st.st_size)))


_HOST: list[tuple[int, int] | None] = []


def _host_elf_ident() -> tuple[int, int] | None:
    """(EI_CLASS, e_machine) of this interpreter, to filter foreign-ABI libraries."""
    if not _HOST:
        _HOST.append(_elf_ident("/proc/self/exe"))
    return _HOST[0]


def _elf_ident(path: str) -> tuple[int, int] | None:
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    e = "<" if head[5] == 1 else ">"
    return head[4], struct.unpack_from(e + "H", head, 18)[0]


def _same_abi(path: str) -> bool:
    host = _host_elf_ident()
    return host is None or _elf_ident(path) == host


def library_search_dirs() -> list[str]:
    """Directories the dynamic linker searches: /etc/ld.so.conf (with includes),
    then the multiarch and default directories."""
    dirs: list[str] = []

    def conf(path: str, depth: int = 0) -> None:
        import glob
        if depth > 8:
            return
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except OSError:
            return
        for line in lines:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("include"):
                pattern = line.split(None, 1)[1] if " " in line or "\t" in line else ""
                if not os.path.isabs(pattern):
                    pattern = os.path.join(os.path.dirname(path), pattern)
                for inc in sorted(glob.glob(pattern)):
                    conf(inc, depth + 1)
            elif line.startswith("hwcap"):
                continue
            else:
                dirs.append(line)

    conf("/etc/ld.so.conf")
    machine = os.uname().machine
    triplet = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu",
               "riscv64": "riscv64-linux-gnu", "s390x": "s390x-linux-gnu",
               "ppc64le": "powerpc64le-linux-gnu", "i686": "i386-linux-gnu"}.get(machine)
    if triplet:
        dirs += [f"/lib/{triplet}", f"/usr/lib/{triplet}"]
    dirs += ["/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib"]
    out: list[str] = []
    for d in dirs:
        if d not in out and os.path.isdir(d):
            out.append(d)
    return out


def path_for_pid(path: str, pid: int) -> str:
    """``path`` as process ``pid`` sees it, usable from here: through
    ``/proc/PID/root`` when the process lives in another mount namespace
    (a relative path is taken from this process's directory, as bpftrace
    takes it), else ``path`` itself."""
    try:
        if os.stat(f"/proc/{pid}/ns/mnt").st_ino == os.stat("/proc/self/ns/mnt").st_ino:
            return path
    except OSError:
        return path
    return f"/proc/{pid}/root{os.path.abspath(path)}"


def expand_path(pattern: str, pid: int | None = None) -> list[str]:
    """The ELF files a path with ``*`` wildcards names (``./bin/app*``),
    sorted, as written (``./bin/app``); with ``pid``, as that process sees
    them (:func:`path_for_pid`).  A path without wildcards comes back as
    the one-element list, whether it exists or not."""
    import glob
    if "*" not in pattern:
        return [pattern]
    full = path_for_pid(pattern, pid) if pid is not None else pattern
    return sorted(p for p in glob.glob(full) if os.path.isfile(p) and _elf_ident(p) is not None)


def _soname_matches(soname: str, name: str) -> int | None:
    """Rank how well a file name matches a library name (lower is better)."""
    if soname == name:
        return 0
    if soname.startswith(name + ".so"):          # libc -> libc.so.6
        return 1
    if not name.startswith("lib") and soname.startswith("lib" + name + ".so"):   # c -> libc.so.6
        return 2
    return None


def _best(cands: Iterable[tuple[int, str]]) -> str | None:
    best = None
    for rank, path in cands:
        if best is None or rank < best[0]:
            best = (rank, path)
    return best[1] if best else None


def _which_elf(name: str) -> str | None:
    """The first ELF executable called ``name`` on $PATH (skipping script shims)."""
    first = None
    for d in os.environ.get("PATH", os.defpath).split(os.pathsep):
        cand = os.path.join(d or ".", name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            first = first or cand
            if _elf_ident(cand) is not None:
                return cand
    return first


def resolve_library(name: str, pid: int | None = None) -> str:
    """The file a library or program name refers to (bpftrace-like).

    * A name with a ``/`` is a path, returned as is (it must exist).
    * With ``pid``: a module that process maps, matched by file name
      (``libc`` → ``.../libc.so.6``), returned as a path usable from here
      (``/proc/PID/root/...`` for a process in another mount namespace).
    * Names that look like libraries (``lib...``, ``....so...``) are looked up
      in ``/etc/ld.so.cache``, then in the standard library directories;
      ``libc``, ``libc.so`` and ``c`` all find ``libc.so.6``.  Only files of
      this machine's ABI count (no 32-bit libc on x86-64).
    * Other names are looked up on ``$PATH`` first (``python3``; the first
      ELF file, so that shell-script shims are skipped), then as libraries.

    Raises :class:`LibraryNotFoundError` with close matches.
    """
    if not name:
        raise LibraryNotFoundError("empty library/program name")
    if "/" in name:
        if pid is not None:
            name = path_for_pid(name, pid)
        if not os.path.exists(name):
            raise LibraryNotFoundError(f"{name} does not exist", name)
        return name
    if pid is not None:
        from .procmaps import process_modules
        hit = _best(((r, m.open_path) for m in process_modules(pid)
                     for r in [_soname_matches(os.path.basename(m.path), name)]
                     if r is not None))
        if hit:
            return hit
    looks_like_lib = name.startswith("lib") or ".so" in name
    if not looks_like_lib:
        exe = _which_elf(name)
        if exe:
            return exe
    hit = _best(((r, path) for soname, _flags, path in ld_so_cache()
                 for r in [_soname_matches(soname, name)]
                 if r is not None and os.path.exists(path) and _same_abi(path)))
    if hit:
        return hit
    for d in library_search_dirs():
        try:
            entries = sorted(os.listdir(d))
        except OSError:
            continue
        hit = _best(((r, os.path.join(d, f)) for f in entries
                     for r in [_soname_matches(f, name)]
                     if r is not None and _same_abi(os.path.join(d, f))))
        if hit:
            return hit
    if looks_like_lib:
        exe = _which_elf(name)
        if exe:
            return exe
    known = sorted({soname for soname, _f, _p in ld_so_cache()})
    close = _close_matches(name, known, n=6, cutoff=0.5)
    close += [k for k in known if k.startswith(name) and k not in close][:3]
    where = f" mapped by pid {pid}," if pid is not None else ""
    raise LibraryNotFoundError(
        f"no library or program named {name!r}{where} in /etc/ld.so.cache, the standard "
        f"library directories or $PATH"
        + (f"; close matches: {', '.join(close)}" if close else "")
        + "; give the full path instead", name, close)
