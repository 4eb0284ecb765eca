"""The perf buffer reader: one ``PERF_COUNT_SW_BPF_OUTPUT`` ring per CPU, and
its drain (the rules it keeps: :mod:`.reader`).
"""
from __future__ import annotations

import errno as _errno
import mmap
import os
import select
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from ..kernel.syscall import Fd
    from ..vm.maps import VmMap
    from .decode import _Buf, _Decoder
    from .memring import MemoryPerfRing

from ..errors import ArgumentTypeError, OptionError, SizeError
from ..kernel import syscall as _sys
from ..kernel.constants import PERF_RECORD_LOST, PERF_RECORD_SAMPLE
from ..kernel.cpus import online_cpus
from ..kernel.perf import (MMAP_DATA_HEAD as _DATA_HEAD, MMAP_DATA_OFFSET as _DATA_OFFSET,
                           MMAP_DATA_SIZE as _DATA_SIZE, MMAP_DATA_TAIL as _DATA_TAIL,
                           bpf_output_attr)
from ..maps import PerfEventArray, perf_ring_size
from .reader import (PAGE_SIZE, _DEFAULT_FLUSH, _DEFAULT_SIZE, _U32, _U64, _WIN_MAX, _WIN_START,
                     _position_cell, _Reader, _uniform_prefix)

_PERF_HDR = struct.Struct("<I2xH").unpack_from        # type, size (misc skipped)
#: MAP_POPULATE: fault every ring page in at mmap time rather than during a drain
_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)


def _detacher(rings: dict[int, Any], cpu: int, ring: Any) -> Callable[[], None]:
    """Empty slot ``cpu`` of an in-memory perf event array if ``ring`` still holds it."""
    def detach() -> None:
        if rings.get(cpu) is ring:
            del rings[cpu]
    return detach


# =========================================================================
# perf buffer

class _PerfRing:
    __slots__ = ("cpu", "fd", "mm", "meta", "data", "size", "tail", "tail_cell")
    cpu: int
    fd: Fd | None                  # None: a ring in memory (mm is its MemoryPerfRing)
    mm: Any
    meta: memoryview
    data: memoryview
    size: int
    tail: int
    tail_cell: memoryview


class PerfBuffer(_Reader):
    """Reads what ``bpf_perf_event_output`` writes, on every online CPU.

    Args:
        array: the :class:`~pyebpf.maps.PerfEventArray` programs output to;
            created (and closed with the reader) when omitted -- pass
            :attr:`array` to the program.  Each CPU's slot is set to that
            CPU's perf event fd, and emptied again on close.  The VM's map
            of a perf event array (``vm.maps[name]``, a
            :class:`~pyebpf.vm.VmMap`) works too: each CPU's slot then gets
            a ring in memory (:mod:`.memring`) that the VM writes as the
            kernel would, read by the same code.
        size: ring bytes per CPU, rounded up to a power-of-two number of
            pages (the mapping is one more page: the control page).
        watermark: wake the reader once this many bytes are waiting in a
            ring (default: a quarter of ``size``).  Waking per event costs
            the traced program several microseconds per event.
        wakeup_events: wake every N events instead of by bytes.
        cpus: CPUs to open rings on (default: the online CPUs).
        decode: codec spec or callable (see the module docs).
        callback: called with each event by :meth:`poll` / :meth:`run`.
        on_lost: ``on_lost(cpu, count)`` when the kernel reports lost events;
            without it a :class:`~pyebpf.errors.LostEventsWarning` is issued
            (at most once a second).
        flush_interval: while waiting, rings are drained at least this often
            (seconds), so a burst's tail below the watermark is delivered.

    Payload padding: the kernel pads every sample so that its ``u32
    raw_size`` plus the data is a multiple of 8, and ``raw_size`` *includes*
    that padding (0-7 bytes, not guaranteed to be zero).  Raw events are
    ``raw_size`` bytes long, so decoders must know their record size and
    layout (give ``decode=``, ``Bytes(n)``, or carry the length in the
    payload).

    Losses: when a ring is full, the kernel counts the samples it drops and
    writes a PERF_RECORD_LOST record *before the next sample that fits* on
    that CPU; those counts land in :attr:`lost` / :attr:`lost_per_cpu`.  So
    a loss becomes visible only once that CPU outputs again after the reader
    made room.
    """

    _hdr = 12          # perf_event_header (8) + u32 raw_size
    _kind = "perf"
    _loss_hint = ("the perf ring of a CPU was full (or paused): raise size=, drain more "
                  "often, or send less.")

    def __init__(self, array: PerfEventArray | VmMap | None = None, *, size: int = _DEFAULT_SIZE,
                 watermark: int | None = None, wakeup_events: int | None = None,
                 cpus: list[int] | None = None, decode: Any = None,
                 callback: Callable[[Any], Any] | None = None,
                 on_lost: Callable[[int, int], Any] | None = None,
                 flush_interval: float = _DEFAULT_FLUSH) -> None:
        self._construct(decode, callback, on_lost, flush_interval, array, size, watermark, wakeup_events, cpus)

    def _open(self, array: PerfEventArray | VmMap | None, size: int, watermark: int | None,
              wakeup_events: int | None, cpus: list[int] | None) -> None:
        ring = perf_ring_size(size)
        if wakeup_events is not None and watermark is not None:
            raise OptionError("give watermark= (bytes) or wakeup_events= (count), not both")
        if wakeup_events is None:
            if watermark is None:
                watermark = max(1, ring // 4)
            if not 0 < watermark < ring:
                raise SizeError(f"watermark must be 1..{ring - 1} bytes (under the ring size), "
                                f"not {watermark}")
        elif wakeup_events < 1:
            raise OptionError(f"wakeup_events must be >= 1, not {wakeup_events}")
        in_memory: dict[int, MemoryPerfRing] | None = None
        if array is None:
            array = PerfEventArray()
            self._res.owned.append(array)
        elif not isinstance(array, PerfEventArray):
            in_memory = getattr(array, "perf_rings", None)     # a pyebpf.vm.VmMap's slots
            if in_memory is None:
                raise ArgumentTypeError("array must be a PerfEventArray (or the VM's map of one), "
                                        f"not {type(array).__name__}")
        #: the PerfEventArray programs output to
        self.array = array
        self.size = ring
        self.watermark = watermark
        self.wakeup_events = wakeup_events
        if cpus is None:
            cpus = online_cpus()
        cpus = sorted(set(cpus))
        for cpu in cpus:
            if not 0 <= cpu < array.max_entries:
                raise SizeError(f"cpu {cpu} has no slot in {array.name!r} "
                                f"(max_entries {array.max_entries})")
        self.cpus = cpus
        if wakeup_events is None:
            attr = bpf_output_attr(wakeup_watermark=watermark)
        else:
            attr = bpf_output_attr(wakeup_events=wakeup_events)
        self._rings: list[_PerfRing] = []
        if in_memory is not None:
            self._open_memory(in_memory, cpus, ring, watermark, wakeup_events)
            return
        res = self._res
        for cpu in cpus:
            fd = attr.open(pid=-1, cpu=cpu)
            res.fds.append(fd)
            try:
                mm = mmap.mmap(fd.fileno(), PAGE_SIZE + ring, _MAP_FLAGS,
                               mmap.PROT_READ | mmap.PROT_WRITE)
            except OSError as exc:
                raise _sys.error_for(exc.errno or _errno.EINVAL, "mmap",
                                     f"perf ring of CPU {cpu} ({ring} bytes + 1 page)",
                                     "too much locked memory? lower size= or raise "
                                     "/proc/sys/kernel/perf_event_mlock_kb") from None
            res.mmaps.append(mm)
            mv = memoryview(mm)
            res.views.append(mv)
            meta = mv[:PAGE_SIZE]
            res.views.append(meta)
            doff = _U64(meta, _DATA_OFFSET)[0] or PAGE_SIZE
            dsize = _U64(meta, _DATA_SIZE)[0] or ring
            data = mv[doff:doff + dsize]
            res.views.append(data)
            r = _PerfRing()
            r.cpu, r.fd, r.mm, r.meta, r.data, r.size = cpu, fd, mm, meta, data, dsize
            r.tail = _U64(meta, _DATA_TAIL)[0]
            r.tail_cell = _position_cell(meta, _DATA_TAIL)
            res.views.append(r.tail_cell)
            self._rings.append(r)
            array[cpu] = fd
            res.unset.append((array, cpu))
            res.epoll.register(fd.fileno(), select.EPOLLIN)  # type: ignore[union-attr]

    def _open_memory(self, slots: dict[int, MemoryPerfRing], cpus: list[int], ring: int,
                     watermark: int | None, wakeup_events: int | None) -> None:
        """Rings in memory in the ``slots`` of the VM's perf event array
        (:mod:`.memring`): the VM writes each CPU's outputs there as the
        kernel would, and the same drain reads them.  They wake the reader
        through one eventfd."""
        from .memring import MemoryPerfRing
        res = self._res
        efd = _sys.Fd(os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC))
        res.owned.append(efd)            # closed after the attachments below (last first)
        res.epoll.register(efd.fileno(), select.EPOLLIN | select.EPOLLET)  # type: ignore[union-attr]
        for cpu in cpus:
            mem = MemoryPerfRing(ring, watermark, wakeup_events)
            # closing the reader takes the ring out of the map's slot again
            res.owned.append(mem.attach(efd.fileno(), _detacher(slots, cpu, mem)))
            slots[cpu] = mem
            r = _PerfRing()
            r.cpu, r.fd, r.mm, r.meta, r.data, r.size = cpu, None, mem, mem.meta, mem.data, ring
            r.tail = 0
            r.tail_cell = _position_cell(mem.meta, _DATA_TAIL)
            res.views.append(r.tail_cell)
            self._rings.append(r)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._rings)} CPUs x {self.size} bytes"
        return f"<PerfBuffer {state}, received {self.received}, lost {self._lost_total}>"

    def pause(self, paused: bool = True) -> None:
        """Stop (or resume) the kernel writing to the rings
        (PERF_EVENT_IOC_PAUSE_OUTPUT): outputs meanwhile count as lost."""
        self._check_open()
        for r in self._rings:
            if r.fd is None:                   # a ring in memory (the VM's)
                r.mm.paused = paused
            else:
                _sys.perf_event_pause_output(r.fd, paused)

    def resume(self) -> None:
        """Undo :meth:`pause`."""
        self.pause(False)

    # ------------------------------------------------------------ the walk
    def _drain_all(self, dec: _Decoder, out: list[Any]) -> int:
        total = 0
        for r in self._rings:
            if _U64(r.meta, _DATA_HEAD)[0] != r.tail:
                total += self._drain_ring(r, dec, out)
        return total

    def _drain_ring(self, r: _PerfRing, dec: _Decoder, out: list[Any]) -> int:
        meta = r.meta
        head = _U64(meta, _DATA_HEAD)[0]      # load (x86: acquire for free)
        pos = r.tail
        d = r.data
        size = r.size
        mask = size - 1
        need = dec.need
        count = lost = bad = 0
        region = None
        buf: _Buf = None
        win = _WIN_START
        try:
            while pos < head:
                off = pos & mask
                typ, sz = _PERF_HDR(d, off)
                if sz < 8 or sz & 7 or sz > head - pos:
                    bad += 1                       # corrupt: give the rest back
                    pos = head
                    break
                end = off + sz
                if typ == PERF_RECORD_SAMPLE and end <= size and sz >= 12:
                    # a run of equal-sized samples (up to the ring's end), checked
                    # in windows that grow while records stay uniform
                    n = min(min(head - pos, size - off) // sz, win)
                    if n > 1:
                        region = d[off:off + n * sz]
                        types = region.cast("I")[::sz >> 2].tolist()
                        sizes = region.cast("H")[3::sz >> 1].tolist()
                        region = None
                        if types.count(PERF_RECORD_SAMPLE) != n or sizes.count(sz) != n:
                            n = _uniform_prefix(types, PERF_RECORD_SAMPLE, sizes, sz)
                            win = max(4, 2 * n)
                        elif win < _WIN_MAX:
                            win *= 4
                    pos += n * sz                  # consumed even if decoding raises
                    ok = dec.take(d, off, n, sz, sz - 12, out)
                    count += ok
                    bad += n - ok
                    continue
                # one record: wrapped around the end (copy the two pieces) or not a sample
                if end <= size:
                    buf, b = d, off
                else:
                    first = size - off
                    buf, b = bytes(d[off:size]) + bytes(d[0:sz - first]), 0
                pos += sz
                if typ == PERF_RECORD_SAMPLE:
                    plen = min(_U32(buf, b + 8)[0], sz - 12)
                    if plen >= need:
                        dec.one(buf, b + 12, plen, out)
                        count += 1
                    else:
                        bad += 1
                elif typ == PERF_RECORD_LOST and sz >= 24:
                    lost += _U64(buf, b + 16)[0]
        finally:
            region = None
            buf = None
            # the records up to pos are copied out: give the space back, once
            r.tail_cell[0] = pos
            r.tail = pos
            if lost:
                self._add_lost(r.cpu, lost)
            if bad:
                self.malformed += bad
        return count
