"""Rings in memory, laid out as the kernel's: the producer side of the readers.

pyebpf's VM (:mod:`pyebpf.vm`) has no kernel to write its events into, so it
writes them here, byte for byte as the kernel does, and
:class:`~pyebpf.events.PerfBuffer` / :class:`~pyebpf.events.RingBufferReader`
drain these rings with the very drain code they run over an ``mmap`` of a
kernel ring (a ``memoryview`` of a ``bytearray`` instead of an ``mmap``):

* :class:`MemoryPerfRing` -- one CPU's perf ring: a control page
  (``data_head``, ``data_tail``, ``data_offset``, ``data_size`` at the
  offsets of ``struct perf_event_mmap_page``) and the data pages.  A full
  ring drops the sample and counts it; the count reaches the reader as a
  ``PERF_RECORD_LOST`` record written before the next sample that fits, as
  the kernel does.
* :class:`MemoryRingBuf` -- a BPF ring buffer: the consumer page, the
  producer page and the data pages, the data held twice in a row (the
  kernel maps it twice) so every record reads contiguously.  Reserve /
  commit / discard and the space rule (the producer never gets a full ring
  ahead of the consumer) follow ``kernel/bpf/ringbuf.c``.

So the readers' rules (:mod:`.reader`: one load of the producer position
and one store of the consumer position per drain, records copied out,
records consumed even if decoding raises) hold for both kinds of ring
without a second drain to keep in step.  Wakeups go through an eventfd the
reader gives (:meth:`attach`), edge-triggered in its epoll set.

Not imported by the kernel path: only the VM and a reader given an in-VM map
import this module.
"""
from __future__ import annotations

import os

from ..errors import SizeError
from ..kernel.constants import (BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP, BPF_RINGBUF_BUSY_BIT,
                                BPF_RINGBUF_DISCARD_BIT, BPF_RINGBUF_HDR_SZ, PERF_RECORD_LOST,
                                PERF_RECORD_SAMPLE)
from ..kernel.perf import MMAP_DATA_HEAD, MMAP_DATA_OFFSET, MMAP_DATA_SIZE, MMAP_DATA_TAIL
from .reader import PAGE_SIZE, _U32, _U64, _position_cell

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

ENOSPC, EAGAIN, EINVAL, E2BIG = 28, 11, 22, 7
_LEN_MASK = BPF_RINGBUF_DISCARD_BIT - 1
#: the largest record a ring buffer takes (the kernel's RINGBUF_MAX_RECORD_SZ)
RINGBUF_MAX_RECORD = 0xFFFFFFFF >> 2
_RINGBUF_FIRST_DATA_PAGE = 3   # pg_off of the data: struct bpf_ringbuf's header, consumer, producer pages


class _Waker:
    """A ring that wakes its reader through an eventfd (edge-triggered in the
    reader's epoll set), or nobody."""

    __slots__ = ("fd",)

    def __init__(self) -> None:
        self.fd = -1

    def wake(self) -> None:
        """Tell the reader data is waiting."""
        if self.fd >= 0:
            try:
                os.eventfd_write(self.fd, 1)
            except OSError:            # the reader closed it meanwhile
                pass

    def attach(self, fd: int, undo: Callable[[], None] | None = None) -> "Attachment":
        """Wake ``fd`` from now on; closing the result stops that (and calls ``undo``)."""
        self.fd = fd
        return Attachment(self, fd, undo)


class Attachment:
    """A reader's hold on a ring: :meth:`close` stops the wakeups (if no newer
    reader took the ring over) and runs ``undo`` (a perf ring leaves its slot)."""

    __slots__ = ("ring", "fd", "undo")

    def __init__(self, ring: _Waker, fd: int, undo: Callable[[], None] | None) -> None:
        self.ring = ring
        self.fd = fd
        self.undo = undo

    def close(self) -> None:
        """Detach (idempotent)."""
        if self.ring.fd == self.fd:
            self.ring.fd = -1
        undo, self.undo = self.undo, None
        if undo is not None:
            undo()


class MemoryPerfRing(_Waker):
    """One CPU's perf ring in memory: ``size`` data bytes (a power of two)
    after a control page.  :meth:`output` is ``bpf_perf_event_output``'s
    write; ``paused`` drops every output (``PERF_EVENT_IOC_PAUSE_OUTPUT``).

    The reader wakes once ``watermark`` bytes (or ``wakeup_events`` samples)
    arrived since the last wakeup.
    """

    __slots__ = ("size", "buf", "meta", "data", "head", "lost", "paused", "watermark",
                 "wakeup_events", "_head_cell", "_woken", "_events")

    def __init__(self, size: int, watermark: int | None = None,
                 wakeup_events: int | None = None) -> None:
        super().__init__()
        if size < 8 or size & (size - 1):
            raise SizeError(f"a perf ring's data is a power of two bytes, not {size}")
        self.size = size
        self.buf = bytearray(PAGE_SIZE + size)
        view = memoryview(self.buf)
        self.meta = view[:PAGE_SIZE]
        self.data = view[PAGE_SIZE:]
        self.meta[MMAP_DATA_OFFSET:MMAP_DATA_OFFSET + 8] = PAGE_SIZE.to_bytes(8, "little")
        self.meta[MMAP_DATA_SIZE:MMAP_DATA_SIZE + 8] = size.to_bytes(8, "little")
        self._head_cell = _position_cell(self.meta, MMAP_DATA_HEAD)
        self.head = 0
        self.lost = 0                  #: samples dropped and not yet reported in a LOST record
        self.paused = False
        self.watermark = watermark if watermark is not None else max(1, size // 4)
        self.wakeup_events = wakeup_events
        self._woken = 0
        self._events = 0

    def _put(self, off: int, record: bytes) -> None:
        """``record`` at data offset ``off``, wrapping around the end."""
        end = off + len(record)
        if end <= self.size:
            self.data[off:end] = record
        else:
            first = self.size - off
            self.data[off:self.size] = record[:first]
            self.data[0:end - self.size] = record[first:]

    def output(self, payload: bytes) -> int:
        """Write one ``PERF_RECORD_SAMPLE`` of ``payload``: 0, or -ENOSPC
        when the ring is full or paused (the sample is then counted lost);
        -E2BIG for a sample over the 65,535 bytes a record header can say."""
        raw = (len(payload) + 4 + 7) // 8 * 8 - 4        # u32 size + data: a multiple of 8
        sample = 8 + 4 + raw
        if sample > 0xFFFF:
            return -E2BIG
        if self.paused:
            self.lost += 1
            return -ENOSPC
        lost_record = 24 if self.lost else 0
        head = self.head
        tail = _U64(self.meta, MMAP_DATA_TAIL)[0]
        if (tail - head - 1) & (self.size - 1) < sample + lost_record:   # CIRC_SPACE
            self.lost += 1
            return -ENOSPC
        if lost_record:
            self._put(head & (self.size - 1),
                      PERF_RECORD_LOST.to_bytes(4, "little") + b"\0\0" + (24).to_bytes(2, "little")
                      + bytes(8) + self.lost.to_bytes(8, "little"))
            head += lost_record
            self.lost = 0
        self._put(head & (self.size - 1),
                  PERF_RECORD_SAMPLE.to_bytes(4, "little") + b"\0\0" + sample.to_bytes(2, "little")
                  + raw.to_bytes(4, "little") + payload + bytes(raw - len(payload)))
        head += sample
        self.head = head
        self._head_cell[0] = head                        # published after the record
        self._events += 1
        if self.wakeup_events is not None:
            if self._events >= self.wakeup_events:
                self._events = 0
                self.wake()
        elif head - self._woken >= self.watermark:
            self._woken = head
            self.wake()
        return 0


class MemoryRingBuf(_Waker):
    """A BPF ring buffer of ``size`` data bytes (a power of two, a multiple
    of the page size) in memory.

    ``consumer`` is the consumer page (``consumer_pos`` at 0) and
    ``producer`` the producer page (``producer_pos`` at 0) followed by the
    data twice.  :meth:`reserve` / :meth:`commit` are the helpers'
    ``bpf_ringbuf_reserve`` / ``submit`` / ``discard``; :meth:`output` is
    ``bpf_ringbuf_output``.
    """

    __slots__ = ("size", "consumer", "producer", "data", "prod", "pending", "_prod_cell")

    def __init__(self, size: int) -> None:
        super().__init__()
        if size < PAGE_SIZE or size & (size - 1) or size % PAGE_SIZE:
            raise SizeError(f"ring buffer size must be a power of two and a multiple of the "
                            f"page size ({PAGE_SIZE}); got {size}")
        self.size = size
        self.consumer = bytearray(PAGE_SIZE)
        self.producer = bytearray(PAGE_SIZE + 2 * size)
        self.data = memoryview(self.producer)[PAGE_SIZE:]
        self._prod_cell = _position_cell(memoryview(self.producer), 0)
        self.prod = 0
        self.pending = 0               # the oldest record that may still be busy

    @property
    def consumer_pos(self) -> int:
        """Where the reader is."""
        return int(_U64(self.consumer, 0)[0])

    def _put(self, off: int, chunk: bytes | bytearray) -> None:
        """``chunk`` at data offset ``off`` (< size), in both copies of the data."""
        size = self.size
        end = off + len(chunk)
        d = self.data
        d[off:end] = chunk
        if end <= size:
            d[off + size:end + size] = chunk
        else:
            first = size - off
            d[off + size:2 * size] = chunk[:first]
            d[0:end - size] = chunk[first:]

    def reserve(self, size: int) -> int | None:
        """Room for a ``size``-byte record (marked busy); its position, or None
        when the ring has no room (or the record could never fit)."""
        if size > RINGBUF_MAX_RECORD:
            return None
        length = (size + BPF_RINGBUF_HDR_SZ + 7) // 8 * 8
        if length > self.size:
            return None
        mask = self.size - 1
        cons = self.consumer_pos
        prod = self.prod
        pend = self.pending
        while pend < prod:                               # skip the records committed since
            hdr = _U32(self.data, pend & mask)[0]
            if hdr & BPF_RINGBUF_BUSY_BIT:
                break
            pend += ((hdr & _LEN_MASK) + BPF_RINGBUF_HDR_SZ + 7) // 8 * 8
        self.pending = pend
        new = prod + length
        if new - cons > mask or new - pend > mask:
            return None
        pg_off = _RINGBUF_FIRST_DATA_PAGE + (prod & mask) // PAGE_SIZE
        self._put(prod & mask, ((size | BPF_RINGBUF_BUSY_BIT).to_bytes(4, "little")
                                + pg_off.to_bytes(4, "little")))
        self.prod = new
        self._prod_cell[0] = new
        return prod

    def commit(self, pos: int, payload: bytes | bytearray, discard: bool = False,
               flags: int = 0) -> None:
        """Fill the record reserved at ``pos`` and clear its busy bit (with
        the discard bit for a discard); wake the reader as the kernel does:
        if it had caught up to this record, or with ``BPF_RB_FORCE_WAKEUP``."""
        mask = self.size - 1
        off = pos & mask
        size = _U32(self.data, off)[0] & _LEN_MASK
        if payload:
            self._put((off + BPF_RINGBUF_HDR_SZ) & mask, bytes(payload[:size]))
        self._put(off, (size | (BPF_RINGBUF_DISCARD_BIT if discard else 0)).to_bytes(4, "little"))
        if flags & BPF_RB_FORCE_WAKEUP or (
                not flags & BPF_RB_NO_WAKEUP and self.consumer_pos & mask == off):
            self.wake()

    def output(self, payload: bytes, flags: int = 0) -> int:
        """``bpf_ringbuf_output``: 0, -EAGAIN when full, -EINVAL for bad flags."""
        if flags & ~(BPF_RB_NO_WAKEUP | BPF_RB_FORCE_WAKEUP):
            return -EINVAL
        pos = self.reserve(len(payload))
        if pos is None:
            return -EAGAIN
        self.commit(pos, payload, False, flags)
        return 0

    def records(self) -> list[bytes]:
        """The committed records the reader has not consumed yet (a copy; the
        ring is unchanged); the walk stops at a busy record as the reader's."""
        mask = self.size - 1
        pos = self.consumer_pos
        out = []
        while pos < self.prod:
            hdr = _U32(self.data, pos & mask)[0]
            if hdr & BPF_RINGBUF_BUSY_BIT:
                break
            n = hdr & _LEN_MASK
            if not hdr & BPF_RINGBUF_DISCARD_BIT:
                start = (pos & mask) + BPF_RINGBUF_HDR_SZ
                out.append(bytes(self.data[start:start + n]))
            pos += (n + BPF_RINGBUF_HDR_SZ + 7) // 8 * 8
        return out

    def skip(self) -> None:
        """Consume everything committed (as if a reader had read it)."""
        self.consumer[0:8] = self.prod.to_bytes(8, "little")
