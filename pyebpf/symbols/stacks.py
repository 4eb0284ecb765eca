"""User stacks: capture with ``bpf_get_stackid`` and symbolize in user space.

Stacks are captured into a :class:`~pyebpf.maps.StackTraceMap` created with
``build_id=True``: for each frame the kernel stores the *build id* of the
file the address is in and the *file offset* of the address, so a stack can
be symbolized after the process is gone (``pyebpf trace -c CMD`` prints its
aggregations once ``CMD`` has exited).  Frames the kernel could not resolve
that way (no build id, the mmap lock was busy) come as plain addresses and
are symbolized through ``/proc/PID/maps`` while the process lives (snapshots
are kept per pid).

The files searched for a build id are the probed binaries, the libraries they
need (``DT_NEEDED``, transitively), the files mapped by the processes seen
so far, and whatever :meth:`Symbolizer.add_file` is given.

Frames print like bpftrace's: ``symbol+offset`` (decimal), or the address in
hex when no symbol covers it.  C++ names are demangled by libstdc++'s own
demangler (``__cxa_demangle``, through cffi) when libstdc++ is installed, else
by ``c++filt`` when it is on ``$PATH`` (one process for a whole batch of
names); without either they are shown mangled.
"""
from __future__ import annotations

import bisect
import functools
import os
import shutil
import subprocess
from typing import Callable, Iterable, Sequence

from .. import elf as _elf

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..maps import MapSpec, StackTraceMap

__all__ = ["Symbolizer", "demangle", "STACK_IP", "STACK_VALID", "make_stack_map", "read_perf_map"]

STACK_VALID = 1    # BPF_STACK_BUILD_ID_VALID: build id + file offset
STACK_IP = 2       # BPF_STACK_BUILD_ID_IP: a plain address

#: one captured frame: a plain address, or ``(status, build id, file offset
#: or address)`` from a build-id stack map (status :data:`STACK_VALID` or
#: :data:`STACK_IP`)
RawFrame = int | tuple[int, bytes, int]

_demangled: dict[str, str] = {}


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Demangle C++ names (``_Z...``) with libstdc++'s ``__cxa_demangle``, or
    ``c++filt`` when libstdc++ cannot be loaded (see the module docs).

    Returns ``{mangled: readable}`` for every name given (unchanged when no
    demangler is available or the name is not mangled).
    """
    names = list(dict.fromkeys(names))
    todo = [n for n in names if n.startswith("_Z") and n not in _demangled]
    cxa = _cxa_demangler() if todo else None
    if cxa is not None:
        _demangled.update((n, cxa(n) or n) for n in todo)
        todo = []
    if todo:
        tool = shutil.which("c++filt")
        out: list[str] = []
        if tool:
            try:
                out = subprocess.run([tool], input="\n".join(todo) + "\n", capture_output=True,
                                     text=True, timeout=10).stdout.splitlines()
            except (OSError, subprocess.SubprocessError):
                out = []
        if len(out) != len(todo):
            out = todo
        _demangled.update(zip(todo, out))
    return {n: _demangled.get(n, n) for n in names}


@functools.lru_cache(maxsize=1)
def _cxa_demangler() -> Callable[[str], str | None] | None:
    """``name -> readable name or None`` through libstdc++'s
    ``abi::__cxa_demangle`` (cffi ABI mode), or None without libstdc++."""
    try:
        import cffi
        ffi = cffi.FFI()
        ffi.cdef("char *__cxa_demangle(const char *, char *, size_t *, int *); void free(void *);")
        lib = ffi.dlopen("libstdc++.so.6")
        libc = ffi.dlopen(None)
    except Exception:
        return None

    def run(name: str) -> str | None:
        status = ffi.new("int *")
        out = lib.__cxa_demangle(name.encode(), ffi.NULL, ffi.NULL, status)
        if out == ffi.NULL:
            return None
        try:
            return ffi.string(out).decode("utf-8", "replace") if status[0] == 0 else None
        finally:
            libc.free(out)
    return run


def make_stack_map(max_entries: int = 1024, max_depth: int = 127, name: str = "ustacks",
                   create: bool = True) -> StackTraceMap | MapSpec:
    """A StackTraceMap of build ids + file offsets (see the module docs);
    ``create=False``: only its :class:`~pyebpf.maps.MapSpec`."""
    from ..maps import MapSpec, StackTraceMap
    if not create:
        return MapSpec(StackTraceMap, max_entries, max_depth, name=name, build_id=True)
    return StackTraceMap(max_entries, max_depth, name=name, build_id=True)


@functools.lru_cache(maxsize=256)
def _needed(path: str) -> tuple[str, ...]:
    """DT_NEEDED entries of an ELF file (empty when unreadable)."""
    try:
        from elftools.elf.dynamic import DynamicSection
        from elftools.elf.elffile import ELFFile
        with open(path, "rb") as f:
            ef = ELFFile(f)
            for sec in ef.iter_sections():
                if isinstance(sec, DynamicSection):
                    # (elftools sets each tag's ``needed`` attribute from its name)
                    tags = sec.iter_tags("DT_NEEDED")
                    return tuple(t.needed for t in tags)  # type: ignore[attr-defined, unused-ignore]
    except Exception:
        pass
    return ()


DEBUG_DIR = "/usr/lib/debug"


@functools.lru_cache(maxsize=256)
def _debug_file(path: str) -> str | None:
    """The separate debug file of ``path``, which has the full symbol table
    of a stripped library (e.g. libc's local functions): by build id
    (``/usr/lib/debug/.build-id/xx/yyyy.debug``), by the ``.gnu_debuglink``
    name (beside the file, in its ``.debug/`` directory, or under
    ``/usr/lib/debug`` + its directory), or ``/usr/lib/debug/PATH.debug``;
    None when none is installed."""
    try:
        ef = _elf.open_elf(path)
        bid = ef.build_id
    except Exception:
        return None
    cands = []
    if bid:
        h = bid.hex()
        cands.append(os.path.join(DEBUG_DIR, ".build-id", h[:2], h[2:] + ".debug"))
    real = os.path.realpath(path)
    link = _debuglink_name(ef)
    if link:
        where = os.path.dirname(real)
        cands += [os.path.join(where, link), os.path.join(where, ".debug", link),
                  DEBUG_DIR + os.path.join(where, link)]
    cands.append(DEBUG_DIR + real + ".debug")
    for c in cands:
        if os.path.isfile(c) and os.path.realpath(c) != real:
            return c
    return None


def _debuglink_name(ef: _elf.ElfFile) -> str | None:
    """The file name in ``.gnu_debuglink`` (None without one)."""
    try:
        sec = ef.section(".gnu_debuglink")
        if sec is None:
            return None
        name = ef.section_data(sec).split(b"\0", 1)[0].decode()
    except Exception:
        return None
    return os.path.basename(name) or None


def _minidebuginfo(path: str) -> _elf.ElfFile | None:
    """The symbol table a stripped file carries xz-compressed in
    ``.gnu_debugdata`` (MiniDebugInfo: an ELF file of its own, with the
    local functions' symbols), or None (cached per path, size and mtime)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _minidebuginfo_of(path, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _minidebuginfo_of(path: str, size: int, mtime: int) -> _elf.ElfFile | None:
    import lzma
    try:
        ef = _elf.open_elf(path)
        sec = ef.section(".gnu_debugdata")
        if sec is None:
            return None
        data = lzma.decompress(ef.section_data(sec))
        return _elf.ElfFile.from_bytes(data, f"{path} (.gnu_debugdata)")
    except Exception:
        return None


def read_perf_map(path: str) -> tuple[list[int], list[int], list[str]]:
    """A ``/tmp/perf-PID.map`` (JIT code: ``START SIZE NAME`` lines, in hex)
    as sorted ``(starts, sizes, names)``; an unreadable file gives none."""
    rows: list[tuple[int, int, str]] = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                parts = line.rstrip("\n").split(" ", 2)
                if len(parts) == 3:
                    try:
                        rows.append((int(parts[0], 16), int(parts[1], 16), parts[2]))
                    except ValueError:
                        continue
    except OSError:
        return [], [], []
    rows.sort()
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


class Symbolizer:
    """Turns captured stack frames into ``symbol+offset`` strings."""

    def __init__(self, files: Sequence[str] = (), demangle_names: bool = True) -> None:
        self.demangle_names = demangle_names
        self._files: list[str] = []
        self._expand: list[str] = []
        self._by_build_id: dict[bytes, str] = {}
        self._indexed: set[str] = set()
        self._pids: dict[int, list[_elf.Module]] = {}
        self._perf_maps: dict[int, tuple[list[int], list[int], list[str]]] = {}
        for f in files:
            self.add_file(f)

    # ------------------------------------------------------------ sources
    def add_file(self, path: str, with_needed: bool = True) -> None:
        """Search ``path`` (and, by default, the libraries it needs) for build
        ids.  Nothing is read until a build id is looked up."""
        if path in self._files:
            return
        self._files.append(path)
        if with_needed:
            self._expand.append(path)

    def _expand_needed(self) -> None:
        while self._expand:
            path = self._expand.pop()
            for lib in _needed(path):
                try:
                    self.add_file(_elf.resolve_library(lib), True)
                except Exception:
                    pass

    def remember_pid(self, pid: int) -> bool:
        """Snapshot the modules of ``pid`` (for frames without a build id);
        True when the process could be read."""
        try:
            mods = _elf.process_modules(pid)
        except (OSError, ProcessLookupError):
            return False
        self._pids[pid] = mods
        self._perf_maps.pop(pid, None)       # (read again: JIT code may have grown)
        for m in mods:
            if m.open_path not in self._files:
                self._files.append(m.open_path)
        return True

    def _build_index(self) -> None:
        self._expand_needed()
        for path in self._files:
            if path in self._indexed:
                continue
            self._indexed.add(path)
            try:
                bid = _elf.open_elf(path).build_id
            except Exception:
                continue
            if bid:
                self._by_build_id.setdefault(bytes(bid[:20]).ljust(20, b"\0"), path)

    def path_for_build_id(self, build_id: bytes) -> str | None:
        """The file searched (see the module docs) whose build id is
        ``build_id`` (the first 20 bytes count), or None."""
        key = bytes(build_id[:20]).ljust(20, b"\0")
        if key not in self._by_build_id:
            self._build_index()
        return self._by_build_id.get(key)

    # ------------------------------------------------------------ symbolizing
    @staticmethod
    def _in_file(path: str, offset: int, caller: bool) -> str | None:
        try:
            ef = _elf.open_elf(path)
            vaddr = ef.offset_to_address(offset, executable=True)
        except Exception:
            return None
        look = vaddr - 1 if caller and vaddr else vaddr
        hit = None
        dbg = _debug_file(path)
        if dbg is not None:
            try:
                hit = _elf.open_elf(dbg).symbolize(look)
            except Exception:
                hit = None
        if hit is None:
            hit = ef.symbolize(look)
        if hit is None:
            mini = _minidebuginfo(path)
            hit = mini.symbolize(look) if mini is not None else None
        if hit is None:
            return None
        sym, delta = hit
        return f"{sym.name}+{delta + (vaddr - look)}"

    def _by_address(self, pid: int | None, addr: int, caller: bool) -> str | None:
        if pid is None:
            return None
        mods = self._pids.get(pid)
        if mods is None:
            if not self.remember_pid(pid):
                return self._jitted(pid, addr)
            mods = self._pids[pid]
        for m in mods:
            if m.contains(addr):
                try:
                    return self._in_file(m.open_path, m.file_offset(addr), caller)
                except Exception:
                    return None
        return self._jitted(pid, addr)

    def _jitted(self, pid: int, addr: int) -> str | None:
        """``name+offset`` from ``/tmp/perf-PID.map`` (JIT code that no file
        maps: CPython 3.12+'s perf trampolines, Node, Java agents), read
        once per pid; None when no entry covers ``addr``."""
        table = self._perf_maps.get(pid)
        if table is None:
            table = self._perf_maps[pid] = read_perf_map(f"/tmp/perf-{pid}.map")
        starts, sizes, names = table
        i = bisect.bisect_right(starts, addr) - 1
        if i >= 0 and addr < starts[i] + max(sizes[i], 1):
            return f"{names[i]}+{addr - starts[i]}"
        return None

    def frame(self, raw: RawFrame, pid: int | None = None, index: int = 0) -> str:
        """One frame: ``(status, build_id, offset_or_ip)`` from a build-id stack
        map, or a plain address (int).  ``index`` 0 is the innermost frame;
        the others are return addresses, looked up one byte before."""
        caller = index > 0
        if isinstance(raw, int):
            return self._by_address(pid, raw, caller) or f"0x{raw:x}"
        status, bid, value = raw
        if status == STACK_VALID:
            path = self.path_for_build_id(bid)
            name = self._in_file(path, value, caller) if path else None
            if name:
                return name
            return f"0x{value:x} (offset in {path or 'build id ' + bid.rstrip(bytes(1)).hex()})"
        return self._by_address(pid, value, caller) or f"0x{value:x}"

    def locate(self, raw: RawFrame, pid: int | None = None) -> tuple[int, str | None]:
        """Where a frame is: ``(address in process pid, path of its module as
        /proc/PID/maps shows it)``. A build-id frame's address is known while
        the process's modules are (it lives, or :meth:`remember_pid` kept
        them); else its file offset stands in. The module is None when
        unknown."""
        status, bid, value = (STACK_IP, b"", raw) if isinstance(raw, int) else raw
        mods = self._pids.get(pid) if pid else None
        if mods is None and pid and self.remember_pid(pid):
            mods = self._pids[pid]
        mods = mods or []
        if status != STACK_VALID:
            hit = next((m for m in mods if m.contains(value)), None)
            return value, hit.path if hit is not None else None
        path = self.path_for_build_id(bid)
        if path is None:
            return value, None
        real = os.path.realpath(path)
        for m in mods:
            if real not in (m.open_path, m.path) and os.path.realpath(m.open_path) != real:
                continue
            for e in m.maps:
                if e.offset <= value < e.offset + (e.end - e.start):
                    return e.start + value - e.offset, m.path
        return value, path

    def frames(self, raw_frames: Sequence[RawFrame], pid: int | None = None) -> list[str]:
        """Every frame of a stack, innermost first, demangled."""
        out = [self.frame(r, pid, i) for i, r in enumerate(raw_frames)]
        if self.demangle_names and any(f.startswith("_Z") for f in out):
            names = demangle(f.rpartition("+")[0] for f in out if f.startswith("_Z"))
            out = [names.get(f.rpartition("+")[0], f.rpartition("+")[0]) + "+" +
                   f.rpartition("+")[2] if f.startswith("_Z") else f for f in out]
        return out


def format_stack(frames: Sequence[str], indent: str = "    ") -> str:
    """A stack as bpftrace prints it inside a key: one indented frame per line."""
    return "\n" + "".join(f"{indent}{f}\n" for f in frames)


def split_stack_key(value: int) -> tuple[int, int]:
    """``(pid, stack id)`` from the u64 the ``ustack`` expression produces
    (``pid << 32 | stack id``); the id is negative when the capture failed."""
    pid = value >> 32
    sid = value & 0xFFFFFFFF
    if sid >= 1 << 31:
        sid -= 1 << 32
    return pid, sid


def stack_error(sid: int) -> str:
    """Why ``bpf_get_stackid`` returned the negative ``sid``."""
    name = os.strerror(-sid) if sid < 0 else "?"
    return f"[stack not captured: {name}]"
