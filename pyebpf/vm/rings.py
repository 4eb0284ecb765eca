"""The BPF ring buffer as the VM keeps it: in memory, laid out as the kernel's.

A ring-buffer map of the VM (:class:`~pyebpf.vm.maps.VmMap`) holds a
:class:`MemoryRingBuf`: the consumer page, the producer page and the data
pages, the data held twice in a row (the kernel maps it twice) so that every
record reads contiguously.  The helpers write it as ``kernel/bpf/ringbuf.c``
does (reserve / commit / discard, the busy and discard bits, the space rule:
the producer never gets a full ring ahead of the consumer, nor of the oldest
record still busy), so :class:`pyebpf.events.RingBufferReader` drains it with
the very code it runs over an ``mmap`` of a kernel ring -- a ``memoryview`` of
these ``bytearray`` objects instead.  The reader's rules (:mod:`pyebpf.events.reader`:
one load of the producer position and one store of the consumer position per
drain, records copied out and consumed even if decoding raises) hold without
a second drain to keep in step.

Wakeups go through an eventfd the reader gives (:meth:`Waker.attach`),
edge-triggered in its epoll set.  (A perf event array has no ring until a
:class:`~pyebpf.events.PerfBuffer` puts one in each CPU's slot:
:mod:`pyebpf.events.memring`.)
"""
from __future__ import annotations

import mmap
import os
import struct

from ..errors import SizeError
from ..kernel.constants import (BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP, BPF_RINGBUF_BUSY_BIT,
                                BPF_RINGBUF_DISCARD_BIT, BPF_RINGBUF_HDR_SZ)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

PAGE_SIZE = mmap.PAGESIZE
EAGAIN, EINVAL = 11, 22
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_LEN_MASK = BPF_RINGBUF_DISCARD_BIT - 1
#: the largest record a ring buffer takes (the kernel's RINGBUF_MAX_RECORD_SZ)
RINGBUF_MAX_RECORD = 0xFFFFFFFF >> 2
_RINGBUF_FIRST_DATA_PAGE = 3   # pg_off of the data: struct bpf_ringbuf's header, consumer, producer pages


class Waker:
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

    def __init__(self, ring: Waker, fd: int, undo: Callable[[], None] | None) -> None:
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


class MemoryRingBuf(Waker):
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
        self._prod_cell = memoryview(self.producer)[0:8].cast("Q")   # one 8-byte store
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
