"""Event readers: the perf buffer and the BPF ring buffer, drained in pure Python.

Two readers with one API:

* :class:`PerfBuffer` -- one ``PERF_COUNT_SW_BPF_OUTPUT`` perf event per
  online CPU, each with its own mmap'ed ring, put into a
  :class:`~pyebpf.maps.PerfEventArray` at its CPU; programs write to it with
  ``bpf_perf_event_output`` (DSL: :meth:`Program.perf_event_output`).
* :class:`RingBufferReader` -- a ``BPF_MAP_TYPE_RINGBUF`` shared by all
  CPUs; programs write with ``bpf_ringbuf_output`` (DSL:
  :meth:`Program.ringbuf_output`).

Both offer:

* ``poll(timeout=None) -> int`` -- wait, drain, call ``callback(event)`` for
  every event; ``read_batch(timeout=None) -> list`` -- wait, drain, return the
  events; ``drain()`` -- the same without waiting;
* ``read_array(dtype=None, timeout=None)`` -- the events as a numpy structured
  array (numpy is imported only then; pyebpf does not depend on it);
* iteration (``for ev in reader``) until :meth:`stop`; :meth:`run` /
  :meth:`start` to poll in the calling / a background thread;
* lost-event accounting (``lost``, ``lost_per_cpu``, ``on_lost=``, and a
  :class:`~pyebpf.errors.LostEventsWarning` when nobody handles losses);
* ``close()`` (idempotent), ``with`` blocks, and closing on garbage collection.

Decoding
--------
``decode=`` takes the codec specs of :mod:`pyebpf.codecs` (``"u64"``, a
:mod:`struct` format such as ``"<QQ"`` -> tuples, a ``ctypes`` Structure ->
instances, ``Bytes(n)`` -> exactly *n* bytes), or any callable applied to the
raw payload ``bytes``.  Without it events are ``bytes``.  A record shorter
than the decoder needs is skipped and counted in ``malformed``.

Both read the VM's maps too (:mod:`pyebpf.vm`): ``PerfBuffer(vm.maps["ev"])``,
``RingBufferReader(vm.maps["rb"])``; the VM writes into rings in memory laid
out as the kernel's, so the same drain reads them.

The package's modules: :mod:`.decode` (payloads to events), :mod:`.reader`
(what both readers share, the hot path's rules), :mod:`.perf`
(:class:`PerfBuffer`), :mod:`.ringbuf` (:class:`RingBufferReader`) and
:mod:`.memring` (the perf rings in memory the VM writes to; the VM keeps a
ring buffer's ring itself, :mod:`pyebpf.vm.rings`).
"""
from __future__ import annotations

import sys

from ..codecs import StructCodec
from ..kernel.constants import (BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP, BPF_RINGBUF_BUSY_BIT,
                                BPF_RINGBUF_DISCARD_BIT, PERF_RECORD_LOST, PERF_RECORD_SAMPLE)
from ..kernel.perf import MMAP_DATA_HEAD as _DATA_HEAD, MMAP_DATA_TAIL as _DATA_TAIL
from .reader import PAGE_SIZE, ReaderClosedError, _position_cell
from .ringbuf import RingBufferReader

TYPE_CHECKING = False
if TYPE_CHECKING:       # (imported on first use: a ring buffer's reader needs none of it)
    from .perf import PerfBuffer as PerfBuffer, _PerfRing as _PerfRing
else:
    from .._lazy import lazy_dir, lazy_getattr
    _LAZY = {"PerfBuffer": "perf", "_PerfRing": "perf"}
    __getattr__ = lazy_getattr(globals(), _LAZY)
    __dir__ = lazy_dir(globals(), _LAZY)

__all__ = ["PerfBuffer", "RingBufferReader", "ReaderClosedError", "PAGE_SIZE",
           "PERF_RECORD_SAMPLE", "PERF_RECORD_LOST", "BPF_RINGBUF_BUSY_BIT",
           "BPF_RINGBUF_DISCARD_BIT", "BPF_RB_NO_WAKEUP", "BPF_RB_FORCE_WAKEUP"]

# PERF_RECORD_*, BPF_RINGBUF_* and the ``ringbuf_output``/``ringbuf_submit``
# flags BPF_RB_NO_WAKEUP (the reader polls on a timer, ``read_batch(timeout=...)``)
# and BPF_RB_FORCE_WAKEUP come from pyebpf.kernel.constants (re-exported here);
# without either flag the kernel wakes the reader when it had caught up.
# (StructCodec, _DATA_HEAD/_DATA_TAIL, _PerfRing and _position_cell are imported
# here for the tests and benchmarks that check or fake a ring.)

if sys.byteorder != "little":  # pragma: no cover
    raise ImportError("pyebpf.events assumes a little-endian CPU")
