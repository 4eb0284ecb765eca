"""The BPF ring buffer reader: one ``BPF_MAP_TYPE_RINGBUF`` shared by every
CPU, and its drain (the rules it keeps: :mod:`.reader`).
"""
from __future__ import annotations

import errno as _errno
import mmap
import os
import select
import struct
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from ..vm.rings import MemoryRingBuf
    from ..vm.maps import VmMap
    from .decode import _Decoder

from ..errors import ArgumentTypeError, SizeError
from ..kernel import syscall as _sys
from ..kernel.constants import (BPF_RINGBUF_BUSY_BIT, BPF_RINGBUF_DISCARD_BIT,
                                BPF_RINGBUF_HDR_SZ, MapType)
from ..kernel.cpus import possible_cpus
from ..maps import Map, PerCpuArrayMap, RingBuf
from .reader import (PAGE_SIZE, _DEFAULT_FLUSH, _DEFAULT_SIZE, _U32, _WIN_MAX, _WIN_START,
                     _position_cell, _Reader, _uniform_prefix)

_RINGBUF_LEN_MASK = BPF_RINGBUF_DISCARD_BIT - 1
_ULONG = struct.Struct("@L")                           # ringbuf positions: unsigned long


# =========================================================================
# ring buffer

class RingBufferReader(_Reader):
    """Reads a ``BPF_MAP_TYPE_RINGBUF`` (one ring shared by all CPUs).

    Args:
        ringbuf: the :class:`~pyebpf.maps.RingBuf` programs output to;
            created with ``size`` bytes (and closed with the reader) when
            omitted -- pass :attr:`ringbuf` to the program.  The VM's map
            of a ring buffer (``vm.maps[name]``, a :class:`~pyebpf.vm.VmMap`,
            whose ring is laid out as the kernel's) works too.
        size: data bytes of a created ring buffer (a power of two, a
            multiple of the page size).
        drops: the per-CPU drop counter, a
            :class:`~pyebpf.maps.PerCpuArrayMap` of ``u64`` that the
            program's :meth:`Program.ringbuf_output` ``(..., drops=...)``
            increments when an output fails; ``True`` creates one
            (:attr:`drops`, closed with the reader).  The kernel itself never
            tells user space about ring-buffer drops: without a counter,
            :attr:`lost` stays 0.
        drop_slot: which element of ``drops`` counts this ring's drops.
        decode, callback, on_lost, flush_interval: as for :class:`PerfBuffer`.
        drop_check_interval: while polling, the drop counter (one system
            call) is read at most this often (seconds); :attr:`lost` reads
            it every time.

    The producer page and the data pages are mapped read-only, the data
    twice in a row, so every record is contiguous; the consumer page is
    mapped read-write and the consumer position is stored once per drain.
    A record still being written (busy bit) ends the drain; discarded
    records are skipped.

    Wakeups: by default the kernel wakes a waiting reader when an output
    lands in a ring it had emptied.  For the least cost to the traced
    program, output with ``flags=BPF_RB_NO_WAKEUP`` and drain on a timer
    (``read_batch(timeout=0.01)``): the ring must then hold what arrives in
    one period.
    """

    _hdr = BPF_RINGBUF_HDR_SZ  # struct bpf_ringbuf_hdr
    _kind = "ringbuf"
    _loss_hint = ("the ring buffer was full when the program output: raise the ring "
                  "size, drain more often, or send less.")

    def __init__(self, ringbuf: RingBuf | VmMap | None = None, *, size: int = _DEFAULT_SIZE,
                 drops: PerCpuArrayMap | bool | None = None, drop_slot: int = 0,
                 decode: Any = None, callback: Callable[[Any], Any] | None = None,
                 on_lost: Callable[[int, int], Any] | None = None,
                 flush_interval: float = _DEFAULT_FLUSH,
                 drop_check_interval: float = 0.1) -> None:
        self._construct(decode, callback, on_lost, flush_interval, ringbuf, size, drops, drop_slot, drop_check_interval)

    def _open(self, ringbuf: RingBuf | VmMap | None, size: int, drops: PerCpuArrayMap | bool | None,
              drop_slot: int, drop_check_interval: float) -> None:
        res = self._res
        in_memory = None
        if ringbuf is None:
            ringbuf = RingBuf(size)
            res.owned.append(ringbuf)
        elif not isinstance(ringbuf, Map) or ringbuf.map_type != MapType.RINGBUF:
            in_memory = getattr(ringbuf, "ring", None)     # a pyebpf.vm.VmMap's MemoryRingBuf
            if in_memory is None:
                raise ArgumentTypeError("ringbuf must be a RingBuf map (or the VM's map of one), "
                                        f"not {ringbuf!r}")
        #: the RingBuf programs output to
        self.ringbuf = ringbuf
        self.size = rsize = ringbuf.max_entries
        if drops is True:
            drops = PerCpuArrayMap("u64", drop_slot + 1)
            res.owned.append(drops)
        elif drops is False:
            drops = None
        if drops is not None:
            if getattr(drops, "map_type", None) != MapType.PERCPU_ARRAY or drops.value_size != 8:
                raise ArgumentTypeError("drops must be a PerCpuArrayMap of u64 (what "
                                        "Program.ringbuf_output(..., drops=) increments)")
            if not 0 <= drop_slot < drops.max_entries:
                raise SizeError(f"drop_slot {drop_slot} is out of range for {drops.name!r} "
                                f"(max_entries {drops.max_entries})")
        #: the per-CPU drop counter map (or None)
        self.drops = drops
        self.drop_slot = drop_slot
        self.drop_check_interval = drop_check_interval
        self._drop_base: list[int] | None = None
        self._last_drop_check = float("-inf")
        if in_memory is not None:
            cv, pv = self._open_memory(in_memory)
        else:
            fd = ringbuf.fileno()                    # type: ignore[union-attr]
            try:
                cmm = mmap.mmap(fd, PAGE_SIZE, mmap.MAP_SHARED,
                                mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
                res.mmaps.append(cmm)
                pmm = mmap.mmap(fd, PAGE_SIZE + 2 * rsize, mmap.MAP_SHARED, mmap.PROT_READ,
                                offset=PAGE_SIZE)
                res.mmaps.append(pmm)
            except OSError as exc:
                raise _sys.error_for(exc.errno or _errno.EINVAL, "mmap",
                                     f"ring buffer {ringbuf.name!r} ({rsize} bytes)") from None
            cv = memoryview(cmm)
            pv = memoryview(pmm)
            res.epoll.register(fd, select.EPOLLIN)  # type: ignore[union-attr]
        self._prod_view = pv
        self._data = pv[PAGE_SIZE:PAGE_SIZE + 2 * rsize]
        res.views += [self._data, cv, pv]
        self._cons = _ULONG.unpack_from(cv, 0)[0]
        self._cons_cell = _position_cell(cv, 0)
        res.views.append(self._cons_cell)
        if drops is not None:
            self._drop_base = list(drops[drop_slot])

    def _open_memory(self, ring: MemoryRingBuf) -> tuple[memoryview, memoryview]:
        """The consumer and producer pages of the VM's ring buffer in memory
        (:mod:`.memring`, laid out as the kernel's, so the same drain reads
        it); it wakes the reader through an eventfd, edge-triggered."""
        res = self._res
        efd = _sys.Fd(os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC))
        res.owned.append(efd)            # closed after the attachments below (last first)
        res.epoll.register(efd.fileno(), select.EPOLLIN | select.EPOLLET)  # type: ignore[union-attr]
        # the newest reader is the one woken; closing it stops the wakeups
        res.owned.append(ring.attach(efd.fileno()))
        return memoryview(ring.consumer), memoryview(ring.producer)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self.size} bytes"
        return (f"<RingBufferReader {state}, received {self.received}, "
                f"dropped {self._lost_total}>")

    @property
    def dropped(self) -> int:
        """Same as :attr:`lost`: outputs the program counted as failed."""
        return self.lost

    def _refresh_lost(self, force: bool = False) -> None:
        if self.drops is None or self._closed:
            return
        now = time.monotonic()
        if not force and now - self._last_drop_check < self.drop_check_interval:
            return
        self._last_drop_check = now
        vals = self.drops[self.drop_slot]
        base = self._drop_base
        cpus = possible_cpus()
        for i, v in enumerate(vals):
            if v != base[i]:                   # type: ignore[index]
                # (the VM's per-CPU map may count more CPUs than this machine has)
                self._add_lost(cpus[i] if i < len(cpus) else i, v - base[i])  # type: ignore[index]
                base[i] = v                    # type: ignore[index]

    def _drain_all(self, dec: _Decoder, out: list[Any]) -> int:
        prod = _ULONG.unpack_from(self._prod_view, 0)[0]   # load (x86: acquire)
        cons = self._cons
        if cons >= prod:
            return 0
        d = self._data
        mask = self.size - 1
        count = bad = 0
        win = _WIN_START
        try:
            while cons < prod:
                off = cons & mask
                ln = _U32(d, off)[0]
                if ln & BPF_RINGBUF_BUSY_BIT:
                    break                          # not committed yet: next drain
                plen = ln & _RINGBUF_LEN_MASK
                stride = (plen + 15) & ~7          # round_up(len + 8, 8)
                if ln & BPF_RINGBUF_DISCARD_BIT:
                    cons += stride
                    continue
                n = (prod - cons) // stride
                if n > win:
                    n = win
                if n > 1:
                    lens = d[off:off + n * stride].cast("I")[::stride >> 2].tolist()
                    if lens.count(ln) != n:
                        n = _uniform_prefix(lens, ln)
                        win = max(4, 2 * n)
                    elif win < _WIN_MAX:
                        win *= 4
                elif n < 1:
                    break                          # cannot happen: a torn record
                cons += n * stride                 # consumed even if decoding raises
                ok = dec.take(d, off, n, stride, plen, out)
                count += ok
                bad += n - ok
        finally:
            # everything before cons is copied out: release it, once
            self._cons_cell[0] = cons
            self._cons = cons
            if bad:
                self.malformed += bad
        return count
