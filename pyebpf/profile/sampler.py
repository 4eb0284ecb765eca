"""Sampling on-CPU stacks in the kernel: the engine of ``pyebpf profile``.

A PERF_EVENT program runs on the software ``cpu-clock`` event at the
requested frequency: on every online CPU, or, for one process, on each of
its threads wherever it runs (and the threads it starts later), so that no
other process is interrupted.  Each sample is one record in a
ring buffer: the process and thread, ``comm``, the user stack
(``bpf_get_stack`` with build ids, so frames resolve after the process is
gone), with ``kernel=True`` the kernel stack, and for a CPython process the
Python frames the program walked (:mod:`pyebpf.lang.pywalk`, layouts from
:mod:`pyebpf.symbols.python`).  The stack bytes travel in the record: no
stack map, so no stack-id collisions (``File exists``).  User space drains
the ring (:meth:`Profiler.drain`, the CLI does it on a timer) and counts
identical records.  A sample whose record found the ring full is counted
(:attr:`Profiler.lost`); a stack the kernel could not read is kept, as one
frame saying why (``[stack not captured: ...]``), so that samples taken =
samples drawn + :attr:`Profiler.lost`.  With a ``pid`` only that process's
threads count (the program checks it too: the processes it starts inherit
the events).

:meth:`Profiler.stacks` turns the counts into ``{(outermost, ...,
innermost): samples}`` of function names: user frames symbolized by
:class:`pyebpf.symbols.stacks.Symbolizer` (C++ names demangled) without
offsets, so that every sample in a function adds up; Python frames as
``qualname (file:line)`` in place of the interpreter's eval-loop frames;
kernel frames named from ``/proc/kallsyms`` with a ``_[k]`` suffix (the
flame graph convention); a frame no symbol covers as ``[unknown]`` with its
module (``[unknown] (libfoo.so)``).  Without a pid the process name is the
outermost frame.
"""
from __future__ import annotations

import os
import struct

from ..kernel.lifetime import Owner
from ..symbols.kallsyms import KernelSymbols, read_kallsyms

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..attach.link import Link
    from ..elf import Module
    from ..maps import HashMap, PerCpuArrayMap, RingBuf
    from ..events import RingBufferReader
    from ..program import Program
    from ..symbols.stacks import RawFrame, Symbolizer
    from ..symbols.python import PythonProcess

__all__ = ["Profiler", "KernelSymbols", "profile_frame", "read_kallsyms"]

BPF_F_USER_STACK = 1 << 8
BPF_F_USER_BUILD_ID = 1 << 11
BPF_RB_NO_WAKEUP = 1
# the record: tgid, tid, user stack bytes (or -errno), kernel stack bytes (or
# -errno), Python frames, Python status, comm, 2 scratch words; then the user
# stack (32-byte build-id entries), the kernel stack (8-byte addresses) and
# the Python frames (code object, instruction | marker << 56)
_HDR = struct.Struct("<IIiiII16s")
_HDR_SIZE = _HDR.size + 16
_BUILD_ID_ENTRY = struct.Struct("<i20sQ")
NO_STACK = -1 << 31                       # "not asked" (no --kernel)


def profile_frame(text: str) -> str:
    """A :class:`~pyebpf.symbols.stacks.Symbolizer` frame as a profile names it:
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



def _unexeced_child(pid: int) -> bool:
    """Is ``pid`` a child of this process that has not run ``exec`` yet (a
    ``-c`` command waiting to start: a copy of this interpreter)?"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            ppid = int(f.read().rpartition(b")")[2].split()[1])
        if ppid != os.getpid():
            return False
        with open(f"/proc/{pid}/cmdline", "rb") as a, open("/proc/self/cmdline", "rb") as b:
            return a.read() == b.read()
    except (OSError, ValueError, IndexError):
        return False


class Profiler(Owner):
    """Counts on-CPU stacks from perf events (see the module docs).

    ``with Profiler(99, pid=1234) as p: ...; p.detach(); stacks = p.stacks()``;
    call :meth:`drain` while sampling, often enough that the ring
    (``ring_size`` bytes, :attr:`record_size` per sample) never fills.
    ``python=False`` leaves Python frames out (native frames only);
    ``max_python_frames`` bounds the walk (deeper stacks keep their innermost
    frames); ``max_stacks`` sizes the table of CPython processes
    (``max_stacks // 16``, at least 16).
    """

    def __init__(self, frequency: int = 99, *, pid: int | None = None, kernel: bool = False,
                 max_stacks: int = 4096, max_depth: int = 127,
                 symbolizer: Symbolizer | None = None, python: bool = True,
                 max_python_frames: int = 64, ring_size: int = 16 << 20) -> None:
        from ..events import RingBufferReader
        from ..maps import Bytes, HashMap, PerCpuArrayMap, RingBuf
        from ..symbols.stacks import Symbolizer
        from ..symbols.python import CONFIG_FIELDS
        self._own()               # the maps, the reader and the link close themselves
        self.frequency = frequency
        self.pid = pid
        self.kernel = kernel
        self.python = python
        self.max_depth = max_depth
        self.max_python_frames = max_python_frames if python else 0
        self.link: Link | None = None
        self.symbolizer = symbolizer or Symbolizer()
        self._modules: dict[int, list[Module]] = {}
        self._ksyms: KernelSymbols | None = None
        self._ustack_size = 32 * max_depth
        self._kstack_size = 8 * max_depth if kernel else 0
        self.record_size = (_HDR_SIZE + self._ustack_size + self._kstack_size
                            + 16 * self.max_python_frames)
        #: ``{record bytes without the scratch words: samples}``
        self.records: dict[bytes, int] = {}
        #: samples that found the ring buffer full (per-CPU counter, summed by :attr:`lost`)
        self.drops: PerCpuArrayMap = PerCpuArrayMap("u64", 1, name="profile_lost")
        self.ring: RingBuf = RingBuf(ring_size, name="profile_ring")
        self.reader: RingBufferReader = RingBufferReader(self.ring)
        self.pyconf: HashMap[bytes, bytes] = HashMap(Bytes(4), Bytes(8 * len(CONFIG_FIELDS)),
                                                    max(16, max_stacks // 16), name="profile_pyconf")
        #: pid -> the CPython found in it (or why none)
        self.pythons: dict[int, PythonProcess | str | None] = {}
        self.pycode: HashMap[bytes, bytes] | None = None
        self.pyscratch: PerCpuArrayMap | None = None
        if self.max_python_frames:
            from ..lang.pywalk import code_cache_specs
            cache, scratch = code_cache_specs(max(1024, max_stacks), "profile")
            self.pycode = cache.create()
            self.pyscratch = scratch.create()

    # ------------------------------------------------------------ the kernel side
    def program(self) -> Program:
        """The PERF_EVENT program (a :class:`~pyebpf.program.Program`)."""
        from ..program import R0, R1, R2, R3, R4, R6, R7, R8, R9, R10, Program
        from ..lang.pywalk import emit_code_cache, emit_python_walk
        p = Program("profile")
        key = p.stack.alloc(8)
        p.mov(R6, R1)
        p.call("get_current_pid_tgid")
        p.mov(R7, R0)
        p.mov(R1, R0)
        p.rsh(R1, 32)
        if self.pid is not None:
            p.jne(R1, self.pid, ".out")
        elif not self.kernel:
            p.jeq(R1, 0, ".out")            # the idle task has no user stack
        p.store(R10, key, R1, 4)
        p.ld_map(R1, self.ring)
        p.mov(R2, self.record_size)
        p.mov(R3, 0)
        p.call("ringbuf_reserve")
        p.jne(R0, 0, ".reserved")
        p.count_drop(self.drops, 0)
        p.ja(".out")
        p.label(".reserved")
        p.mov(R8, R0)
        p.load(R1, R10, key, 4)
        p.store(R8, 0, R1, 4)
        p.store(R8, 4, R7, 4)               # (the low half: the thread id)
        p.store(R8, 12, 0, 4)
        p.store(R8, 16, 0, 4)
        p.store(R8, 20, 0, 4)
        p.mov(R1, R8)
        p.add(R1, 24)
        p.mov(R2, 16)
        p.call("get_current_comm")
        p.mov(R1, R6)
        p.mov(R2, R8)
        p.add(R2, _HDR_SIZE)
        p.mov(R3, self._ustack_size)
        p.mov(R4, BPF_F_USER_STACK | BPF_F_USER_BUILD_ID)
        p.call("get_stack")
        p.store(R8, 8, R0, 4)
        if self.kernel:
            p.mov(R1, R6)
            p.mov(R2, R8)
            p.add(R2, _HDR_SIZE + self._ustack_size)
            p.mov(R3, self._kstack_size)
            p.mov(R4, 0)
            p.call("get_stack")
            p.store(R8, 12, R0, 4)
        else:
            p.store(R8, 12, NO_STACK, 4)
        if self.max_python_frames:
            p.ld_map(R1, self.pyconf)
            p.stack_pointer(R2, key)
            p.call("map_lookup_elem")
            p.jeq(R0, 0, ".submit")
            p.mov(R9, R0)
            emit_python_walk(p, rec=R8, conf=R9, off_tid=4, off_npy=16, off_status=20,
                             off_scratch=_HDR.size, off_frames=_HDR_SIZE + self._ustack_size
                             + self._kstack_size, max_frames=self.max_python_frames,
                             done=".pycode")
            p.label(".pycode")
            emit_code_cache(p, rec=R8, conf=R9, off_pid=0, off_npy=16,
                            off_frames=_HDR_SIZE + self._ustack_size + self._kstack_size,
                            max_frames=self.max_python_frames, cache=self.pycode,
                            scratch=self.pyscratch, done=".submit")
        p.label(".submit")
        p.mov(R1, R8)
        p.mov(R2, BPF_RB_NO_WAKEUP)
        p.call("ringbuf_submit")
        p.label(".out")
        p.ret(0)
        return p

    def attach(self) -> None:
        """Load the program and start sampling: the process's threads (on
        whichever CPU they run) with a pid, else every online CPU."""
        from ..attach import attach_perf_event
        if self.pid is not None:
            self.remember(self.pid)
        self.link = attach_perf_event(self.program(), self.frequency,
                                      pid=-1 if self.pid is None else self.pid)

    def detach(self) -> None:
        """Stop sampling (idempotent); what was sampled stays readable."""
        link, self.link = self.link, None
        if link is not None:
            link.close()
            self.drain()

    def _close_resources(self) -> None:
        """Stop sampling and free the maps."""
        self.detach()
        self.reader.close()
        for m in (self.ring, self.drops, self.pyconf, self.pycode, self.pyscratch):
            if m is not None:
                m.close()

    def drain(self) -> int:
        """Count the records in the ring buffer now (call often enough that
        the ring never fills: the CLI does every 50 ms); their number."""
        n = 0
        recs = self.records
        hs = _HDR.size
        while True:
            batch = self.reader.drain()
            if not batch:
                return n
            n += len(batch)
            for rec in batch:
                tgid, tid, ulen, klen, npy, status, comm = _HDR.unpack_from(rec, 0)
                u = _HDR_SIZE
                k = u + self._ustack_size
                py = k + self._kstack_size
                key = (bytes(rec[:hs]) + bytes(rec[u:u + max(ulen, 0)])
                       + bytes(rec[k:k + max(klen, 0)]) + bytes(rec[py:py + 16 * npy]))
                seen = recs.get(key)
                recs[key] = (seen or 0) + 1
                if seen is None and npy:
                    self._read_code(tgid, rec, py, npy)

    def _read_code(self, pid: int, rec: bytes, at: int, n: int) -> None:
        """Name the code objects of a new record's Python frames now: from
        the program's code-object cache, else from the process's memory
        while it runs (kept by the :class:`PythonProcess`)."""
        from ..symbols.python import CODE_KEY, PythonProcess
        proc = self.pythons.get(pid)
        if isinstance(proc, PythonProcess) and proc.layout is not None:
            for i in range(n):
                addr = struct.unpack_from("<Q", rec, at + 16 * i)[0]
                if proc.has_code(addr):
                    continue
                cached = None
                if self.pycode is not None:
                    try:
                        cached = bytes(self.pycode[CODE_KEY.pack(pid, 0, addr)])
                    except (KeyError, OSError):
                        pass
                proc.code(addr, cached)

    @property
    def lost(self) -> int:
        """Samples taken whose record found the ring buffer full."""
        return sum(sum(v) for v in self.drops.values())

    @property
    def taken(self) -> int:
        """Samples taken so far (drawn + lost)."""
        return sum(self.records.values()) + self.lost

    def remember(self, pid: int) -> None:
        """Snapshot ``pid``'s mapped files (call while it runs: frames without
        a build id are symbolized through them) and, when it runs a CPython
        the profiler knows (:func:`pyebpf.symbols.python.find_python`),
        tell the program its layout."""
        from .. import elf
        self.symbolizer.remember_pid(pid)
        try:
            self._modules[pid] = elf.process_modules(pid)
        except (OSError, ProcessLookupError):
            pass
        if self.max_python_frames:
            self._find_python(pid)

    def _find_python(self, pid: int) -> None:
        """(Re)detect ``pid``'s CPython: after an ``exec`` it is another program."""
        from ..symbols.python import PythonProcess, config_values, find_python
        if _unexeced_child(pid):
            return                            # (what it runs is not known yet)
        got = find_python(pid)
        old = self.pythons.get(pid)
        if isinstance(old, PythonProcess) and isinstance(got, PythonProcess) and \
                (old.path, old.runtime) == (got.path, got.runtime):
            return                            # (the same: keep its code objects)
        self.pythons[pid] = got
        key = struct.pack("<I", pid)
        if not isinstance(got, PythonProcess) or got.layout is None:
            try:
                del self.pyconf[key]
            except KeyError:
                pass
            return
        vals = config_values(got.layout, got.runtime)
        self.pyconf[key] = struct.pack(f"<{len(vals)}Q", *vals)

    def remember_seen(self) -> None:
        """:meth:`remember` every process sampled so far that was not yet
        (call now and then during a system-wide profile: a process that
        exits before the end still has its files known)."""
        self.drain()
        for pid in {pid for pid, _, _, _ in self.raw_counts()} - set(self._modules):
            self.remember(pid)
            self._modules.setdefault(pid, [])

    # ------------------------------------------------------------ reading
    def raw_counts(self) -> dict[tuple[int, int, int, str], int]:
        """``{(pid, user stack bytes or -errno, kernel stack bytes or -errno,
        comm): samples}``."""
        out: dict[tuple[int, int, int, str], int] = {}
        for rec, count in self.records.items():
            pid, _, ulen, klen, _, _, comm = _HDR.unpack_from(rec, 0)
            name = comm.split(b"\0", 1)[0].decode("utf-8", "replace")
            k = (pid, ulen, klen, name)
            out[k] = out.get(k, 0) + count
        return out

    def python_notes(self) -> list[str]:
        """Why a CPython seen has no Python frames (an unsupported version or
        build), one sentence per process."""
        return [f"pid {pid}: no Python frames: {why}" for pid, why in sorted(self.pythons.items())
                if isinstance(why, str)]

    def python_status(self) -> dict[str, int]:
        """Samples of CPython processes by how their Python walk ended
        (:data:`pyebpf.lang.pywalk.PY_STATUS`)."""
        from ..symbols.python import PythonProcess
        from ..lang.pywalk import PY_STATUS
        out: dict[str, int] = {}
        for rec, count in self.records.items():
            pid, _, _, _, _, status, _ = _HDR.unpack_from(rec, 0)
            if not isinstance(self.pythons.get(pid), PythonProcess):
                continue
            name = PY_STATUS.get(status, str(status))
            out[name] = out.get(name, 0) + count
        return out

    def _decode(self, rec: bytes) -> tuple[int, int, str, list[RawFrame], list[int] | int,
                                           list[tuple[int, int]]]:
        pid, _, ulen, klen, npy, _, comm = _HDR.unpack_from(rec, 0)
        at = _HDR.size
        user: list[RawFrame] = []
        for i in range(max(ulen, 0) // 32):
            status, bid, value = _BUILD_ID_ENTRY.unpack_from(rec, at + 32 * i)
            user.append((status, bid, value) if status == 1 else value)
        at += max(ulen, 0)
        kern: list[int] | int = klen
        if klen >= 0:
            kern = list(struct.unpack_from(f"<{klen // 8}Q", rec, at))
            at += klen
        py = [struct.unpack_from("<QQ", rec, at + 16 * i) for i in range(npy)]
        name = comm.split(b"\0", 1)[0].decode("utf-8", "replace")
        return pid, ulen, name, user, kern, py

    def stacks(self) -> dict[tuple[str, ...], int]:
        """The samples as ``{(outermost, ..., innermost): count}`` (see the module docs)."""
        from ..symbols.stacks import demangle, stack_error
        from ..symbols.python import PythonProcess, interleave, python_runs
        self.drain()
        cache: dict[tuple[object, int | None, bool], str] = {}
        out: dict[tuple[str, ...], int] = {}
        for pid in {_HDR.unpack_from(r, 0)[0] for r in self.records} - set(self._modules):
            self.remember(pid)            # (the ones still running)
        for rec, count in self.records.items():
            pid, ulen, comm, user, kern, py = self._decode(rec)
            frames: list[str] = []        # innermost first
            if isinstance(kern, list):
                frames += [self._kernel_frame(a) for a in kern]
            native = [self._user_frame(r, pid, i, cache) for i, r in enumerate(user)]
            proc = self.pythons.get(pid)
            if py and isinstance(proc, PythonProcess) and proc.layout is not None:
                runs = [[proc.frame_name(c, ins) for c, ins in run]
                        for run in python_runs(py, proc.layout.version)]
                native = interleave(native, runs)
            frames += native
            if not frames:
                if ulen < 0:
                    frames = [stack_error(ulen)]
                elif isinstance(kern, int) and kern != NO_STACK and kern < 0:
                    frames = [stack_error(kern)]
                else:
                    frames = ["[stack not captured: empty]"]
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
