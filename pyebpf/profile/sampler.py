"""Sampling on-CPU stacks in the kernel: the engine of ``pyebpf profile``.

A PERF_EVENT program runs on the software ``cpu-clock`` event at the
requested frequency on every online CPU.  Each sample captures the user
stack (``bpf_get_stackid`` into a build-id stack map, so frames resolve
after the process is gone) and, with ``kernel=True``, the kernel stack (a
plain stack map of addresses), and counts the sample in a hash keyed by
``(process, user stack id, kernel stack id, comm)``: nothing leaves the
kernel per sample.  With a ``pid`` only that process's threads count.

:meth:`Profiler.stacks` reads the counts once sampling has stopped and turns
them into ``{(outermost, ..., innermost): samples}`` of function names: user
frames symbolized by :class:`pyebpf.trace.stacks.Symbolizer` (C++ names
demangled) without offsets, so that every sample in a function adds up;
kernel frames named from ``/proc/kallsyms`` with a ``_[k]`` suffix (the
flame graph convention); a frame no symbol covers as ``[unknown]`` with its
module (``[unknown] (libfoo.so)``).  Without a pid the process name is the
outermost frame.  Samples whose stack could not be captured are kept, as
one frame saying why (``[stack not captured: ...]``).
"""
from __future__ import annotations

import bisect
import os
import struct

from ..kernel.lifetime import Owner

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..attach.link import Link
    from ..elf import Module
    from ..maps import HashMap, StackTraceMap
    from ..trace.stacks import RawFrame, Symbolizer

__all__ = ["Profiler", "KernelSymbols", "profile_frame", "read_kallsyms"]

BPF_F_USER_STACK = 1 << 8
_KEY = struct.Struct("<Iii4x16s")        # tgid, user stack id, kernel stack id, comm
NO_STACK = -1 << 31                       # "not asked" (no --kernel)


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
    """Kernel addresses to function names, from ``/proc/kallsyms``."""

    def __init__(self, path: str = "/proc/kallsyms") -> None:
        self._addrs, self._names = read_kallsyms(path)

    def name(self, addr: int) -> str | None:
        """The function containing ``addr`` (None when unknown / not readable)."""
        i = bisect.bisect_right(self._addrs, addr) - 1
        return self._names[i] if i >= 0 else None


def profile_frame(text: str) -> str:
    """A :class:`~pyebpf.trace.stacks.Symbolizer` frame as a profile names it:
    ``func+12`` -> ``func``; ``0x1f (offset in /lib/libx.so)`` -> ``[unknown]
    (libx.so)``; a bare address -> ``[unknown]``."""
    if text.startswith("0x"):
        _, sep, rest = text.partition(" (offset in ")
        if sep:
            where = rest[:-1]
            if where.startswith("build id "):
                return f"[unknown] ({where})"
            return f"[unknown] ({os.path.basename(where)})"
        return "[unknown]"
    name, sep, off = text.rpartition("+")
    return name if sep and off.isdigit() else text


class Profiler(Owner):
    """Counts on-CPU stacks from perf events (see the module docs).

    ``with Profiler(99, pid=1234) as p: ...; p.detach(); stacks = p.stacks()``.
    """

    def __init__(self, frequency: int = 99, *, pid: int | None = None, kernel: bool = False,
                 max_stacks: int = 4096, max_depth: int = 127,
                 symbolizer: Symbolizer | None = None) -> None:
        from ..maps import Bytes, HashMap, StackTraceMap
        from ..trace.stacks import Symbolizer, make_stack_map
        self._own()               # the maps and the link close themselves
        self.frequency = frequency
        self.pid = pid
        self.kernel = kernel
        self.link: Link | None = None
        self.symbolizer = symbolizer or Symbolizer()
        self._modules: dict[int, list[Module]] = {}
        self._ksyms: KernelSymbols | None = None
        self.counts: HashMap[bytes, int] = HashMap(Bytes(_KEY.size), "u64", max_stacks * 4,
                                                   name="profile_counts")
        self.ustacks: StackTraceMap = make_stack_map(max_stacks, max_depth,  # type: ignore[assignment]
                                                     name="profile_ustack")
        self.kstacks: StackTraceMap | None = None
        if kernel:
            self.kstacks = StackTraceMap(max_stacks, max_depth, name="profile_kstack")

    # ------------------------------------------------------------ the kernel side
    def program(self) -> object:
        """The PERF_EVENT program (a :class:`~pyebpf.program.Program`)."""
        from ..program import R0, R1, R2, R3, R6, R7, R10, Program
        p = Program("profile")
        key = p.stack.alloc(_KEY.size)
        p.mov(R6, R1)
        p.call("get_current_pid_tgid")
        p.mov(R7, R0)
        p.rsh(R7, 32)
        if self.pid is not None:
            p.jne(R7, self.pid, ".out")
        elif not self.kernel:
            p.jeq(R7, 0, ".out")            # the idle task has no user stack
        p.stack_zero(_KEY.size, key)
        p.store(R10, key, R7, 4)
        p.mov(R1, R6)
        p.ld_map(R2, self.ustacks)
        p.mov(R3, BPF_F_USER_STACK)
        p.call("get_stackid")
        p.store(R10, key + 4, R0, 4)
        if self.kstacks is not None:
            p.mov(R1, R6)
            p.ld_map(R2, self.kstacks)
            p.mov(R3, 0)
            p.call("get_stackid")
            p.store(R10, key + 8, R0, 4)
        else:
            p.store(R10, key + 8, NO_STACK, 4)
        if self.pid is None:
            p.stack_pointer(R1, key + 16)
            p.mov(R2, 16)
            p.call("get_current_comm")
        p.map_increment(self.counts, key)
        p.label(".out")
        p.ret(0)
        return p

    def attach(self) -> None:
        """Load the program and start sampling on every online CPU."""
        from ..attach import attach_perf_event
        if self.pid is not None:
            self.remember(self.pid)
        self.link = attach_perf_event(self.program(), self.frequency)

    def detach(self) -> None:
        """Stop sampling (idempotent); the counts stay readable."""
        link, self.link = self.link, None
        if link is not None:
            link.close()

    def _close_resources(self) -> None:
        """Stop sampling and free the maps."""
        self.detach()
        for m in (self.counts, self.ustacks, self.kstacks):
            if m is not None:
                m.close()

    def remember(self, pid: int) -> None:
        """Snapshot ``pid``'s mapped files (call while it runs: frames without
        a build id are symbolized through them)."""
        from .. import elf
        self.symbolizer.remember_pid(pid)
        try:
            self._modules[pid] = elf.process_modules(pid)
        except (OSError, ProcessLookupError):
            pass

    def remember_seen(self) -> None:
        """:meth:`remember` every process sampled so far that was not yet
        (call now and then during a system-wide profile: a process that
        exits before the end still has its files known)."""
        for pid in {pid for pid, _, _, _ in self.raw_counts()} - set(self._modules):
            self.remember(pid)
            self._modules.setdefault(pid, [])

    # ------------------------------------------------------------ reading
    def raw_counts(self) -> dict[tuple[int, int, int, str], int]:
        """``{(pid, user stack id, kernel stack id, comm): samples}``."""
        out: dict[tuple[int, int, int, str], int] = {}
        for raw, count in self.counts.items():
            pid, uid, kid, comm = _KEY.unpack(bytes(raw))
            name = comm.split(b"\0", 1)[0].decode("utf-8", "replace")
            k = (pid, uid, kid, name)
            out[k] = out.get(k, 0) + int(count)
        return out

    def stacks(self) -> dict[tuple[str, ...], int]:
        """The samples as ``{(outermost, ..., innermost): count}`` (see the module docs)."""
        from ..trace.stacks import demangle, stack_error
        ustacks = dict(self.ustacks.items())
        kstacks = dict(self.kstacks.items()) if self.kstacks is not None else {}
        cache: dict[tuple[object, int | None, bool], str] = {}
        out: dict[tuple[str, ...], int] = {}
        counts = self.raw_counts()
        for pid in {k[0] for k in counts} - set(self._modules):
            self.remember(pid)            # (the ones still running)
        for (pid, uid, kid, comm), count in counts.items():
            frames: list[str] = []        # innermost first
            if kid != NO_STACK and kid >= 0:
                frames += [self._kernel_frame(a) for a in kstacks.get(kid, [])]
            if uid >= 0:
                frames += [self._user_frame(r, pid, i, cache)
                           for i, r in enumerate(ustacks.get(uid, []))]
            if not frames:
                frames = [stack_error(uid if uid < 0 else kid if kid < 0 else -2)]
            if self.pid is None:
                frames.append(comm or f"pid {pid}")
            key = tuple(reversed(frames))
            out[key] = out.get(key, 0) + count
        names = {f for stack in out for f in stack if f.startswith("_Z")}
        if names and self.symbolizer.demangle_names:
            readable = demangle(names)
            merged: dict[tuple[str, ...], int] = {}
            for stack, count in out.items():
                k = tuple(readable.get(f, f) for f in stack)
                merged[k] = merged.get(k, 0) + count
            out = merged
        return out

    def _kernel_frame(self, addr: int) -> str:
        if self._ksyms is None:
            self._ksyms = KernelSymbols()
        name = self._ksyms.name(addr)
        return f"{name}_[k]" if name else "[unknown] (kernel)"

    def _user_frame(self, raw: RawFrame, pid: int, index: int,
                    cache: dict[tuple[object, int | None, bool], str]) -> str:
        key = (raw, pid if isinstance(raw, int) or raw[0] != 1 else None, index > 0)
        hit = cache.get(key)
        if hit is None:
            hit = profile_frame(self.symbolizer.frame(raw, pid, index))
            if hit == "[unknown]":
                hit = self._module_of(pid, raw if isinstance(raw, int) else raw[2])
            cache[key] = hit
        return hit

    def _module_of(self, pid: int, addr: int) -> str:
        """``[unknown] (module)`` for an address of ``pid`` (``[unknown]`` alone
        when no module of the process covers it)."""
        for m in self._modules.get(pid, ()):
            if m.contains(addr):
                return f"[unknown] ({os.path.basename(m.path)})"
        return "[unknown]"
