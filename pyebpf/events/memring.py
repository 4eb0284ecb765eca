"""Perf rings in memory, laid out as the kernel's: what the VM's
``bpf_perf_event_output`` writes when a :class:`~pyebpf.events.PerfBuffer`
reads the VM's perf event array.

pyebpf's VM (:mod:`pyebpf.vm`) has no kernel to write its events into, so
``PerfBuffer(vm.maps["events"])`` puts a :class:`MemoryPerfRing` in each CPU's
slot of the map, and the VM writes there byte for byte as the kernel does: a
control page (``data_head``, ``data_tail``, ``data_offset``, ``data_size`` at
the offsets of ``struct perf_event_mmap_page``) and the data pages.  A full
ring drops the sample and counts it; the count reaches the reader as a
``PERF_RECORD_LOST`` record written before the next sample that fits, as the
kernel does.  The reader drains it with the very code it runs over an ``mmap``
of a kernel ring (a ``memoryview`` of a ``bytearray`` instead), so its rules
(:mod:`.reader`) hold for both.  The ring buffer's counterpart, which the VM
keeps with the map itself, is :class:`pyebpf.vm.rings.MemoryRingBuf`.

Not imported by the kernel path: only a reader given an in-VM map imports this
module.
"""
from __future__ import annotations

from ..errors import SizeError
from ..kernel.constants import PERF_RECORD_LOST, PERF_RECORD_SAMPLE
from ..kernel.perf import MMAP_DATA_HEAD, MMAP_DATA_OFFSET, MMAP_DATA_SIZE, MMAP_DATA_TAIL
from ..vm.rings import Waker
from .reader import PAGE_SIZE, _U64, _position_cell

ENOSPC, E2BIG = 28, 7


class MemoryPerfRing(Waker):
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


