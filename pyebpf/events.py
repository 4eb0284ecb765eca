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

The hot path
------------
A drain reads the producer position once per ring, walks the records with
``struct`` over a ``memoryview`` of the mapping, and stores the consumer
position once.  Runs of records of equal size (the usual case: one event
type) are checked and decoded at C speed (``memoryview.cast`` columns and
``Struct.iter_unpack``); other records (lost-event records, records that wrap
the end of a perf ring, discarded ring-buffer records) take a slower,
record-at-a-time path.  The cyclic garbage collector is paused while a
drain decodes (it allocates many objects but makes no cycles), so a large
batch does not trigger collection after collection.  Decoded events are copies, so the space is given back
to the kernel at the end of every drain.  Waiting is one ``epoll_wait`` per
batch; there is no system call per event.

Rings are mapped with the :mod:`mmap` module rather than a raw ``mmap(2)``
through cffi: both drain at the same speed (the walk dominates), and a
Python ``mmap`` refuses to unmap while a view is alive, so a reader closed
from another thread can never leave a dangling pointer behind.

Ordering: data_head/producer_pos are read with one aligned 8-byte load and
the tail is stored with one aligned 8-byte store.  That is enough on x86-64
(TSO; libbpf's barriers are compiler-only there).  Weakly ordered CPUs
(arm64) would need acquire/release barriers, which pure Python cannot issue;
the epoll_wait system call before each batch acts as one in practice, but a
drain that races a producer without a syscall in between is not guaranteed
correct there.
"""
from __future__ import annotations

import ctypes
import errno as _errno
import gc
import mmap
import os
import select
import struct
import sys
import threading
import time
import warnings
from operator import itemgetter
from typing import Any, Callable, Iterator

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import FrameType

    from .kernel.syscall import Fd

#: what a decoder reads records from: a memoryview of a ring, or bytes
_Buf = Any

from .errors import (ArgumentTypeError, LostEventsWarning, OptionError, PyebpfError, SizeError,
                     StateError)
from .kernel import syscall as _sys
from .kernel.constants import (BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP, BPF_RINGBUF_BUSY_BIT,
                               BPF_RINGBUF_DISCARD_BIT, BPF_RINGBUF_HDR_SZ, PERF_RECORD_LOST,
                               PERF_RECORD_SAMPLE, MapType)
from .kernel.cpus import online_cpus, possible_cpus
from .kernel.lifetime import Owner
from .kernel.perf import (MMAP_DATA_HEAD as _DATA_HEAD, MMAP_DATA_OFFSET as _DATA_OFFSET,
                          MMAP_DATA_SIZE as _DATA_SIZE, MMAP_DATA_TAIL as _DATA_TAIL,
                          bpf_output_attr)
from .codecs import BytesCodec, Codec, CtypesCodec, StructCodec, codec, format_fields
from .maps import Map, PerCpuArrayMap, PerfEventArray, RingBuf, perf_ring_size

__all__ = ["PerfBuffer", "RingBufferReader", "ReaderClosedError", "PAGE_SIZE",
           "PERF_RECORD_SAMPLE", "PERF_RECORD_LOST", "BPF_RINGBUF_BUSY_BIT",
           "BPF_RINGBUF_DISCARD_BIT", "BPF_RB_NO_WAKEUP", "BPF_RB_FORCE_WAKEUP"]

PAGE_SIZE = mmap.PAGESIZE
# PERF_RECORD_*, BPF_RINGBUF_* and the ``ringbuf_output``/``ringbuf_submit``
# flags BPF_RB_NO_WAKEUP (the reader polls on a timer, ``read_batch(timeout=...)``)
# and BPF_RB_FORCE_WAKEUP come from pyebpf.kernel.constants (re-exported here);
# without either flag the kernel wakes the reader when it had caught up.
_RINGBUF_LEN_MASK = BPF_RINGBUF_DISCARD_BIT - 1

_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_PERF_HDR = struct.Struct("<I2xH").unpack_from        # type, size (misc skipped)
_ULONG = struct.Struct("@L")                           # ringbuf positions: unsigned long


def _position_cell(view: memoryview, offset: int) -> memoryview:
    """An 8-byte view to publish a consumer position through.

    The kernel reads ``data_tail`` / ``consumer_pos`` while we write it, so
    the store must be one aligned 8-byte write: ``cell[0] = pos`` is one
    (memoryview item assignment copies a native integer in one go), whereas
    ``struct.pack_into`` first zeroes the bytes, and a kernel reading 0 there
    thinks the ring is full and drops the event (seen: 100-2,000 drops per
    million events in a ring never more than half full).
    """
    return view[offset:offset + 8].cast("Q")


_first = itemgetter(0)
_gc_isenabled, _gc_disable, _gc_enable = gc.isenabled, gc.disable, gc.enable

#: MAP_POPULATE: fault every ring page in at mmap time rather than during a drain
_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
_DEFAULT_SIZE = 256 * 1024
# records checked at once for a uniform run: start small, grow x4 while uniform
_WIN_START = 16
_WIN_MAX = 1 << 16
_DEFAULT_FLUSH = 0.05


class ReaderClosedError(PyebpfError, ValueError):
    """The reader was used after :meth:`close`."""


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy is optional
        raise ImportError("read_array needs numpy, which is optional for pyebpf: "
                          "`pip install numpy`, or use read_batch()") from None
    return numpy


# =========================================================================
# struct formats: explicit layouts and numpy dtypes

_NP_CODES = {"b": "i1", "B": "u1", "h": "i2", "H": "u2", "i": "i4", "I": "u4", "q": "i8",
             "Q": "u8", "e": "f2", "f": "f4", "d": "f8", "?": "b1"}


def _standard_code(code: str, isz: int) -> str:
    if code in "lLnNP":
        return {4: "i", 8: "q"}[isz].upper() if code in "LNP" else {4: "i", 8: "q"}[isz]
    return code


def _explicit_body(fmt: str) -> tuple[str, str]:
    """(order char, body) of a format with the same layout, explicit padding
    and standard sizes: safe to embed after other fields."""
    order, fields, size = format_fields(fmt)
    parts = []
    pos = 0
    for code, count, off, isz in fields:
        if off > pos:
            parts.append(f"{off - pos}x")
        parts.append(f"{count}s" if code == "s" else _standard_code(code, isz))
        pos = off + (count if code == "s" else isz)
    if size > pos:
        parts.append(f"{size - pos}x")
    return order, "".join(parts)


def _format_dtype(fmt: str) -> Any:
    """The numpy dtype with the layout of struct format ``fmt`` (fields f0, f1 ...)."""
    np = _numpy()
    order, fields, size = format_fields(fmt)
    names, formats, offsets = [], [], []
    for i, (code, count, off, isz) in enumerate(fields):
        if code == "s":
            t = f"S{count}"
        elif code == "c":
            t = "S1"
        else:
            c = _standard_code(code, isz)
            t = order + _NP_CODES[c]
        names.append(f"f{i}")
        formats.append(t)
        offsets.append(off)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": size})


# =========================================================================
# decoders: payloads -> events

class _Decoder:
    """Turns record payloads into events.

    ``hdr`` is the payload's offset inside a record; ``need`` the fewest
    payload bytes a record must carry.  ``run`` decodes ``n`` records of
    ``stride`` bytes starting at ``d[off]`` (payloads of ``plen`` bytes),
    ``one`` a single payload at ``buf[off:off + plen]``; both append to ``out``.
    """

    need = 0

    def __init__(self, hdr: int) -> None:
        self.hdr = hdr

    def run(self, d: _Buf, off: int, n: int, stride: int, plen: int, out: list[Any]) -> None:
        raise NotImplementedError

    def one(self, buf: _Buf, off: int, plen: int, out: list[Any]) -> None:
        raise NotImplementedError


class _RawDecoder(_Decoder):
    """Payloads as ``bytes`` (``size``: exactly that many, else the whole payload)."""

    def __init__(self, hdr: int, size: int | None = None) -> None:
        super().__init__(hdr)
        self.size = size
        self.need = size or 0
        self._structs: dict[tuple[int, int], Any] = {}

    def run(self, d: _Buf, off: int, n: int, stride: int, plen: int, out: list[Any]) -> None:
        take = self.size or plen
        st = self._structs.get((stride, take))
        if st is None:
            st = self._structs[(stride, take)] = struct.Struct(
                f"{self.hdr}x{take}s{stride - self.hdr - take}x")
        out.extend(map(_first, st.iter_unpack(d[off:off + n * stride])))

    def one(self, buf: _Buf, off: int, plen: int, out: list[Any]) -> None:
        out.append(bytes(buf[off:off + (self.size or plen)]))


class _StructDecoder(_Decoder):
    """A :mod:`struct` format: tuples (or scalars for one-field formats)."""

    def __init__(self, hdr: int, sc: StructCodec) -> None:
        super().__init__(hdr)
        self.codec = sc
        self.need = sc.size
        self.scalar = sc.scalar
        self._unpack = sc.struct.unpack_from
        self._body: str | None
        try:
            self._order, self._body = _explicit_body(sc.format)
        except SizeError:                     # decode record by record instead
            self._order, self._body = "", None
        self._structs: dict[int, Any] = {}

    def _struct_for(self, stride: int) -> Any:    # a struct.Struct, or False
        if self._body is None:
            self._structs[stride] = False
            return False
        st: Any = struct.Struct(
            f"{self._order}{self.hdr}x{self._body}{stride - self.hdr - self.need}x")
        # paranoia: the combined layout must decode like the user's format
        probe = bytes((i * 37 + 11) & 0xFF for i in range(stride))
        if repr(st.unpack_from(probe)) != repr(self._unpack(probe, self.hdr)):
            st = False
        self._structs[stride] = st
        return st

    def run(self, d: _Buf, off: int, n: int, stride: int, plen: int, out: list[Any]) -> None:
        st = self._structs.get(stride)
        if st is None:
            st = self._struct_for(stride)
        if st is False:                       # could not re-express: per record
            u = self._unpack
            if self.scalar:
                out.extend([u(d, a)[0] for a in range(off + self.hdr, off + n * stride, stride)])
            else:
                out.extend([u(d, a) for a in range(off + self.hdr, off + n * stride, stride)])
            return
        it = st.iter_unpack(d[off:off + n * stride])
        out.extend(map(_first, it) if self.scalar else it)

    def one(self, buf: _Buf, off: int, plen: int, out: list[Any]) -> None:
        t = self._unpack(buf, off)
        out.append(t[0] if self.scalar else t)


class _UnpackDecoder(_Decoder):
    """Any other codec: ``unpack_from(buffer, offset)`` per record."""

    def __init__(self, hdr: int, c: Codec) -> None:
        super().__init__(hdr)
        self.need = c.size
        self._unpack = c.unpack_from

    def run(self, d: _Buf, off: int, n: int, stride: int, plen: int, out: list[Any]) -> None:
        u = self._unpack
        out.extend([u(d, a) for a in range(off + self.hdr, off + n * stride, stride)])

    def one(self, buf: _Buf, off: int, plen: int, out: list[Any]) -> None:
        out.append(self._unpack(buf, off))


class _CtypesDecoder(_RawDecoder):
    """A ctypes type: instances made by ``from_buffer_copy`` (mapped in C over a run)."""

    def __init__(self, hdr: int, c: CtypesCodec) -> None:
        super().__init__(hdr, c.size)
        self._make: Callable[..., Any] = c.ctype.from_buffer_copy

    def run(self, d: _Buf, off: int, n: int, stride: int, plen: int, out: list[Any]) -> None:
        tmp: list[Any] = []
        super().run(d, off, n, stride, plen, tmp)
        out.extend(map(self._make, tmp))

    def one(self, buf: _Buf, off: int, plen: int, out: list[Any]) -> None:
        out.append(self._make(buf, off))


class _CallDecoder(_Decoder):
    """A user function applied to each payload's ``bytes``."""

    def __init__(self, hdr: int, fn: Callable[[bytes], Any]) -> None:
        super().__init__(hdr)
        self.fn = fn
        self._raw = _RawDecoder(hdr)

    def run(self, d: _Buf, off: int, n: int, stride: int, plen: int, out: list[Any]) -> None:
        tmp: list[Any] = []
        self._raw.run(d, off, n, stride, plen, tmp)
        out.extend(map(self.fn, tmp))

    def one(self, buf: _Buf, off: int, plen: int, out: list[Any]) -> None:
        out.append(self.fn(bytes(buf[off:off + plen])))


class _ArrayDecoder(_Decoder):
    """numpy: runs become array chunks (one strided copy), single records bytes."""

    def __init__(self, hdr: int, np: Any, dtype: Any) -> None:
        super().__init__(hdr)
        self.np = np
        self.dtype = dtype
        self.need = dtype.itemsize
        self._wraps: dict[int, Any] = {}

    def run(self, d: _Buf, off: int, n: int, stride: int, plen: int, out: list[Any]) -> None:
        w = self._wraps.get(stride)
        if w is None:
            w = self._wraps[stride] = self.np.dtype({"names": ["p"], "formats": [self.dtype],
                                                     "offsets": [self.hdr], "itemsize": stride})
        out.append(self.np.frombuffer(d, w, n, off)["p"].copy())

    def one(self, buf: _Buf, off: int, plen: int, out: list[Any]) -> None:
        out.append(bytes(buf[off:off + self.need]))

    def finish(self, chunks: list[Any]) -> Any:
        np = self.np
        parts: list[Any] = []
        raw: list[bytes] = []
        for c in chunks:
            if isinstance(c, bytes):
                raw.append(c)
                continue
            if raw:
                parts.append(np.frombuffer(b"".join(raw), self.dtype).copy())
                raw = []
            parts.append(c)
        if raw:
            parts.append(np.frombuffer(b"".join(raw), self.dtype).copy())
        if not parts:
            return np.empty(0, self.dtype)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


_CTYPES_BASES = (ctypes._SimpleCData, ctypes.Structure, ctypes.Union, ctypes.Array)


def _make_decoder(spec: Any, hdr: int) -> tuple[_Decoder, Codec | None]:
    if spec is None:
        return _RawDecoder(hdr), None
    if isinstance(spec, (Codec, str, int, struct.Struct)) or (
            isinstance(spec, type) and issubclass(spec, _CTYPES_BASES)):
        c = codec(spec, "event")
        if isinstance(c, StructCodec):
            return _StructDecoder(hdr, c), c
        if isinstance(c, BytesCodec):
            return _RawDecoder(hdr, c.size), c
        if isinstance(c, CtypesCodec):
            return _CtypesDecoder(hdr, c), c
        return _UnpackDecoder(hdr, c), c
    if callable(spec):
        return _CallDecoder(hdr, spec), None
    raise SizeError(f"decode={spec!r}: use a codec spec ('u64', '<QQ', a ctypes Structure, "
                    "Bytes(n)) or a function of the payload bytes")


def _stacklevel() -> int:
    """The ``stacklevel`` that makes a warning point at the caller of this module."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
        level += 1
    return level


def _uniform_prefix(a: list[int], av: int, b: list[int] | None = None, bv: int = 0) -> int:
    """How many leading items have ``a[i] == av`` (and ``b[i] == bv``)."""
    n = 0
    if b is None:
        for x in a:
            if x != av:
                break
            n += 1
        return n
    for x, y in zip(a, b):
        if x != av or y != bv:
            break
        n += 1
    return n


# =========================================================================
# lifetime: everything a reader owns, released by close() or the GC

class _Resources:
    """What a reader must release; no reference back to the reader (so the
    garbage collector can release it after the reader is collected)."""

    def __init__(self) -> None:
        self.epoll: select.epoll | None = None
        self.wake_fd = -1
        self.views: list[memoryview] = []
        self.mmaps: list[mmap.mmap] = []
        self.unset: list[tuple[Any, int]] = []     # (PerfEventArray, cpu) to empty
        self.fds: list[_sys.Fd] = []
        self.owned: list[Any] = []                 # maps this reader created

    def release_locked(self, lock: threading.Lock) -> None:
        """:meth:`release` once no drain uses the rings (``lock`` held)."""
        with lock:
            self.release()

    def release(self) -> None:
        """Unmap, close and empty everything (idempotent)."""
        if self.epoll is not None:
            self.epoll.close()
            self.epoll = None
        if self.wake_fd >= 0:
            try:
                os.close(self.wake_fd)
            except OSError:
                pass
            self.wake_fd = -1
        for v in self.views:
            try:
                v.release()
            except Exception:
                pass
        self.views.clear()
        left = []
        for m in self.mmaps:
            try:
                m.close()
            except BufferError:                   # a view escaped: try after a collection
                left.append(m)
        if left:
            gc.collect()
            for m in left:
                try:
                    m.close()
                except BufferError:
                    pass
        self.mmaps.clear()
        for arr, cpu in self.unset:
            try:
                if not arr.closed:
                    _sys.map_delete(arr._fd, struct.pack("<I", cpu))
            except Exception:
                pass
        self.unset.clear()
        for fd in self.fds:
            fd.close()
        self.fds.clear()
        for m in self.owned:
            try:
                m.close()
            except Exception:
                pass
        self.owned.clear()


# =========================================================================
# the common reader

class _Reader(Owner):
    """What both readers share: waiting, delivery, decoding, lost events, lifetime
    (an :class:`~pyebpf.kernel.lifetime.Owner` releasing its :class:`_Resources`)."""

    _hdr = 0                  # payload offset in a record (set by subclasses)
    _kind = "reader"

    def _setup(self, decode: Any, callback: Callable[[Any], Any] | None,
               on_lost: Callable[[int, int], Any] | None, flush_interval: float) -> None:
        if flush_interval <= 0:
            raise OptionError(f"flush_interval must be positive seconds, not {flush_interval!r}")
        self._dec, self._codec = _make_decoder(decode, self._hdr)
        self._decode_spec = decode
        self.callback = callback
        self.on_lost = on_lost
        self.flush_interval = float(flush_interval)
        self._pending: list[Any] = []
        self._lock = threading.Lock()
        self._stop = False
        self._closed = False
        self._thread: threading.Thread | None = None
        #: exception that ended the background thread of :meth:`start`, if any
        self.thread_error: BaseException | None = None
        #: events handed out (or waiting in the reader) so far
        self.received = 0
        #: records too short for the decoder (skipped)
        self.malformed = 0
        self._lost_per_cpu: dict[int, int] = {}
        self._lost_total = 0
        self._new_lost: dict[int, int] = {}
        self._unwarned = 0
        self._last_warn = float("-inf")
        self._res = _Resources()
        self._own(_Resources.release_locked, self._res, self._lock)
        self._res.epoll = select.epoll()
        self._res.wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._res.epoll.register(self._res.wake_fd, select.EPOLLIN)

    # --------------------------------------------------------------- subclass API
    def _drain_all(self, dec: _Decoder, out: list[Any]) -> int:
        """Drain every ring into ``out`` with ``dec``; return the number of
        records decoded.  Called with the lock held."""
        raise NotImplementedError

    def _refresh_lost(self, force: bool = False) -> None:
        """Hook for readers that learn about losses from elsewhere (drop counters)."""

    # --------------------------------------------------------------- lifetime
    def _check_open(self) -> None:
        if self._closed:
            raise ReaderClosedError(f"this {type(self).__name__} is closed")

    def close(self) -> None:
        """Stop any waiter and the background thread, unmap the rings, close
        every fd the reader opened and the maps it created.  Idempotent."""
        super().close()

    def _close_resources(self) -> None:
        self._stop = True
        self._wake()
        t = self._thread
        if t is not None and t is not threading.current_thread() and t.is_alive():
            t.join(5.0)
        self._closed = True      # a drain that holds the lock now ends before the release

    def fileno(self) -> int:
        """The epoll fd: readable when a ring may have data (for selectors/asyncio)."""
        self._check_open()
        return self._res.epoll.fileno()  # type: ignore[union-attr]

    # --------------------------------------------------------------- stop / wake
    def _wake(self) -> None:
        fd = self._res.wake_fd
        if fd >= 0:
            try:
                os.eventfd_write(fd, 1)
            except OSError:
                pass

    def _clear_stop(self) -> None:
        self._stop = False
        fd = self._res.wake_fd
        if fd >= 0:
            try:
                os.eventfd_read(fd)
            except OSError:
                pass

    def stop(self) -> None:
        """Make the current (or next) wait return at once: ends :meth:`run`,
        the thread of :meth:`start`, and iteration (after the events already
        drained were delivered).  Safe from any thread and signal handlers."""
        self._stop = True
        self._wake()

    # --------------------------------------------------------------- core
    def _drain(self, dec: _Decoder, out: list[Any]) -> int:
        with self._lock:
            if self._closed:
                return 0
            # A drain allocates many objects but no cycles: pause the cyclic GC,
            # or a big batch triggers collection after collection over it.
            gc_on = _gc_isenabled()
            if gc_on:
                _gc_disable()
            try:
                n = self._drain_all(dec, out)
            finally:
                if gc_on:
                    _gc_enable()
            self.received += n
            return n

    def _collect(self, dec: _Decoder, out: list[Any], timeout: float | None) -> bool:
        """Drain into ``out``; if nothing came and ``timeout`` allows, wait
        (re-draining every ``flush_interval``, so data below the wakeup
        watermark is delivered too).  Returns True if it stopped because of
        :meth:`stop`."""
        self._check_open()
        got = self._drain(dec, out)
        stopped = False
        if not got and not out and timeout != 0:
            deadline = None if timeout is None else time.monotonic() + timeout
            ep = self._res.epoll
            flush = self.flush_interval
            while True:
                if self._stop:
                    stopped = True
                    break
                if deadline is None:
                    wait = flush
                else:
                    wait = min(flush, deadline - time.monotonic())
                    if wait <= 0:
                        break
                try:
                    ep.poll(wait)  # type: ignore[union-attr]
                except (ValueError, OSError):
                    if self._closed:
                        break
                    raise
                if self._closed:
                    break
                if self._drain(dec, out):
                    break
        self._refresh_lost()
        self._report_lost()
        return stopped

    def _take(self, timeout: float | None, consume_stop: bool = True) -> list[Any]:
        """All pending events plus a fresh drain (waiting as ``_collect``)."""
        pending = self._pending
        stopped = self._collect(self._dec, pending, 0 if pending else timeout)
        if stopped and consume_stop:
            self._clear_stop()
        out, self._pending = self._pending, []
        return out

    def _deliver(self, batch: list[Any], cb: Callable[[Any], Any]) -> int:
        it = iter(batch)
        try:
            for ev in it:
                cb(ev)
        except BaseException:
            rest = list(it)            # not yet delivered: first in line next time
            if rest:
                self._pending[:0] = rest
            raise
        return len(batch)

    # --------------------------------------------------------------- public reading
    def poll(self, timeout: float | None = None) -> int:
        """Wait up to ``timeout`` seconds (None: until events arrive or
        :meth:`stop`; 0: not at all), drain every ring, and call the
        ``callback`` given at construction once per event, in order.

        Returns the number of events delivered.  If the callback raises
        (KeyboardInterrupt included), the exception propagates, the events
        after the failing one are kept and delivered first by the next call,
        and the reader stays usable and closable.
        """
        cb = self.callback
        if cb is None:
            raise OptionError(f"{type(self).__name__}.poll() needs a callback: pass callback= "
                              "at construction, or use read_batch() / iteration")
        return self._deliver(self._take(timeout), cb)

    def read_batch(self, timeout: float | None = None, max_events: int | None = None) -> list[Any]:
        """Wait up to ``timeout`` seconds (None: until events arrive or
        :meth:`stop`; 0: not at all), drain, and return the decoded events
        (``bytes`` without ``decode=``).  With ``max_events`` the rest stay
        queued for the next call."""
        out = self._take(timeout)
        if max_events is not None and len(out) > max_events:
            self._pending[:0] = out[max_events:]
            del out[max_events:]
        return out

    def drain(self) -> list[Any]:
        """The events available now, without waiting (``read_batch(0)``)."""
        return self.read_batch(0)

    def read_array(self, dtype: Any = None, timeout: float | None = None) -> Any:
        """Like :meth:`read_batch`, as a numpy structured array.

        ``dtype`` defaults to the layout of ``decode=`` (a struct format gives
        fields ``f0, f1 ...``; a ctypes Structure its own field names).
        Equal-sized records are copied out with one strided copy per run.
        Needs numpy (imported here, lazily).
        """
        np = _numpy()
        dt = self._numpy_dtype(np, dtype)
        dec = _ArrayDecoder(self._hdr, np, dt)
        chunks: list[Any] = []
        if self._pending:
            old, self._pending = self._pending, []
            chunks.append(self._pending_array(np, dt, old))
            timeout = 0
        stopped = self._collect(dec, chunks, timeout)
        if stopped:
            self._clear_stop()
        return dec.finish(chunks)

    def _numpy_dtype(self, np: Any, dtype: Any) -> Any:
        if dtype is not None:
            return np.dtype(dtype)
        c = self._codec
        if isinstance(c, StructCodec):
            return _format_dtype(c.format)
        if isinstance(c, CtypesCodec):
            return np.dtype(c.ctype)
        raise OptionError("read_array needs dtype= (or decode= with a struct format or a "
                          "ctypes Structure at construction)")

    def _pending_array(self, np: Any, dt: Any, events: list[Any]) -> Any:
        if events and isinstance(events[0], (bytes, bytearray)):
            return np.frombuffer(b"".join(bytes(e[:dt.itemsize]) for e in events), dt).copy()
        if events and isinstance(events[0], (ctypes.Structure, ctypes.Union, ctypes.Array)):
            return np.frombuffer(b"".join(bytes(e) for e in events), dt).copy()
        return np.array([e if isinstance(e, tuple) else (e,) for e in events], dt)

    # --------------------------------------------------------------- loops
    def __iter__(self) -> Iterator[Any]:
        return self.events()

    def events(self) -> Iterator[Any]:
        """Yield decoded events until :meth:`stop` or :meth:`close`.

        Events drained but not yet yielded when the loop is left (``break``,
        an exception) stay queued for the next read.
        """
        try:
            while not self._closed:
                batch = self._take(None, consume_stop=False)
                it = iter(batch)
                try:
                    for ev in it:
                        yield ev
                finally:
                    rest = list(it)
                    if rest:
                        self._pending[:0] = rest
                if self._stop:
                    break
        finally:
            if self._stop:
                self._clear_stop()

    def run(self, callback: Callable[[Any], Any] | None = None) -> int:
        """Poll and deliver events to ``callback`` (default: the one given at
        construction) until :meth:`stop` or :meth:`close`; return the count."""
        cb = callback or self.callback
        if cb is None:
            raise OptionError("run() needs a callback")
        total = 0
        try:
            while not self._closed and not self._stop:
                total += self._deliver(self._take(None, consume_stop=False), cb)
        finally:
            if self._stop:
                self._clear_stop()
        return total

    def start(self, callback: Callable[[Any], Any] | None = None, *,
              name: str | None = None) -> threading.Thread:
        """Run :meth:`run` in a daemon thread; :meth:`stop` or :meth:`close`
        end it.  An exception in the thread is kept in :attr:`thread_error`."""
        self._check_open()
        cb = callback or self.callback
        if cb is None:
            raise OptionError("start() needs a callback")
        if self._thread is not None and self._thread.is_alive():
            raise StateError("this reader already runs a background thread")
        self._stop = False
        self.thread_error = None

        def main() -> None:
            try:
                self.run(cb)
            except BaseException as exc:  # noqa: BLE001 - reported to the owner
                self.thread_error = exc

        t = threading.Thread(target=main, name=name or f"pyebpf-{self._kind}", daemon=True)
        self._thread = t
        t.start()
        return t

    # --------------------------------------------------------------- losses
    @property
    def lost(self) -> int:
        """Events lost so far (all CPUs)."""
        self._refresh_lost(force=True)
        return self._lost_total

    @property
    def lost_per_cpu(self) -> dict[int, int]:
        """Events lost so far, per CPU (only CPUs that lost some)."""
        self._refresh_lost(force=True)
        return {c: n for c, n in self._lost_per_cpu.items() if n}

    def _add_lost(self, cpu: int, n: int) -> None:
        if n <= 0:
            return
        self._lost_per_cpu[cpu] = self._lost_per_cpu.get(cpu, 0) + n
        self._lost_total += n
        self._new_lost[cpu] = self._new_lost.get(cpu, 0) + n

    def _report_lost(self) -> None:
        new = self._new_lost
        if not new:
            return
        self._new_lost = {}
        if self.on_lost is not None:
            for cpu, n in sorted(new.items()):
                self.on_lost(cpu, n)
            return
        self._unwarned += sum(new.values())
        now = time.monotonic()
        if now - self._last_warn >= 1.0:
            n, self._unwarned, self._last_warn = self._unwarned, 0, now
            warnings.warn(LostEventsWarning(
                f"{type(self).__name__}: {n} events lost ({self._lost_total} in total, "
                f"per CPU {dict(sorted(self._lost_per_cpu.items()))}): {self._loss_hint} "
                "Pass on_lost=callback(cpu, count) to handle losses yourself."),
                stacklevel=_stacklevel())

    _loss_hint = ""


# =========================================================================
# perf buffer

class _PerfRing:
    __slots__ = ("cpu", "fd", "mm", "meta", "data", "size", "tail", "tail_cell")
    cpu: int
    fd: Fd
    mm: mmap.mmap
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
            CPU's perf event fd, and emptied again on close.
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

    def __init__(self, array: PerfEventArray | None = None, *, size: int = _DEFAULT_SIZE,
                 watermark: int | None = None, wakeup_events: int | None = None,
                 cpus: list[int] | None = None, decode: Any = None,
                 callback: Callable[[Any], Any] | None = None,
                 on_lost: Callable[[int, int], Any] | None = None,
                 flush_interval: float = _DEFAULT_FLUSH) -> None:
        self._setup(decode, callback, on_lost, flush_interval)   # (GC releases on failure)
        try:
            self._open(array, size, watermark, wakeup_events, cpus)
        except BaseException:
            self.close()
            raise

    def _open(self, array: PerfEventArray | None, size: int, watermark: int | None,
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
        if array is None:
            array = PerfEventArray()
            self._res.owned.append(array)
        elif not isinstance(array, PerfEventArray):
            raise ArgumentTypeError(f"array must be a PerfEventArray, not {type(array).__name__}")
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

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._rings)} CPUs x {self.size} bytes"
        return f"<PerfBuffer {state}, received {self.received}, lost {self._lost_total}>"

    def pause(self, paused: bool = True) -> None:
        """Stop (or resume) the kernel writing to the rings
        (PERF_EVENT_IOC_PAUSE_OUTPUT): outputs meanwhile count as lost."""
        self._check_open()
        for r in self._rings:
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
                    plen = sz - 12
                    pos += n * sz                  # consumed even if decoding raises
                    if plen >= need:
                        dec.run(d, off, n, sz, plen, out)
                        count += n
                    else:
                        bad += n
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


# =========================================================================
# ring buffer

class RingBufferReader(_Reader):
    """Reads a ``BPF_MAP_TYPE_RINGBUF`` (one ring shared by all CPUs).

    Args:
        ringbuf: the :class:`~pyebpf.maps.RingBuf` programs output to;
            created with ``size`` bytes (and closed with the reader) when
            omitted -- pass :attr:`ringbuf` to the program.
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

    def __init__(self, ringbuf: RingBuf | None = None, *, size: int = _DEFAULT_SIZE,
                 drops: PerCpuArrayMap | bool | None = None, drop_slot: int = 0,
                 decode: Any = None, callback: Callable[[Any], Any] | None = None,
                 on_lost: Callable[[int, int], Any] | None = None,
                 flush_interval: float = _DEFAULT_FLUSH,
                 drop_check_interval: float = 0.1) -> None:
        self._setup(decode, callback, on_lost, flush_interval)   # (GC releases on failure)
        try:
            self._open(ringbuf, size, drops, drop_slot, drop_check_interval)
        except BaseException:
            self.close()
            raise

    def _open(self, ringbuf: RingBuf | None, size: int, drops: PerCpuArrayMap | bool | None,
              drop_slot: int, drop_check_interval: float) -> None:
        res = self._res
        if ringbuf is None:
            ringbuf = RingBuf(size)
            res.owned.append(ringbuf)
        elif not isinstance(ringbuf, Map) or ringbuf.map_type != MapType.RINGBUF:
            raise ArgumentTypeError(f"ringbuf must be a RingBuf map, not {ringbuf!r}")
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
        fd = ringbuf.fileno()
        try:
            cmm = mmap.mmap(fd, PAGE_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE,
                            offset=0)
            res.mmaps.append(cmm)
            pmm = mmap.mmap(fd, PAGE_SIZE + 2 * rsize, mmap.MAP_SHARED, mmap.PROT_READ,
                            offset=PAGE_SIZE)
            res.mmaps.append(pmm)
        except OSError as exc:
            raise _sys.error_for(exc.errno or _errno.EINVAL, "mmap",
                                 f"ring buffer {ringbuf.name!r} ({rsize} bytes)") from None
        cv = memoryview(cmm)
        pv = memoryview(pmm)
        self._prod_view = pv
        self._data = pv[PAGE_SIZE:PAGE_SIZE + 2 * rsize]
        res.views += [self._data, cv, pv]
        self._cons = _ULONG.unpack_from(cv, 0)[0]
        self._cons_cell = _position_cell(cv, 0)
        res.views.append(self._cons_cell)
        res.epoll.register(fd, select.EPOLLIN)  # type: ignore[union-attr]
        if drops is not None:
            self._drop_base = list(drops[drop_slot])

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
                self._add_lost(cpus[i], v - base[i])  # type: ignore[index]
                base[i] = v                    # type: ignore[index]

    def _drain_all(self, dec: _Decoder, out: list[Any]) -> int:
        prod = _ULONG.unpack_from(self._prod_view, 0)[0]   # load (x86: acquire)
        cons = self._cons
        if cons >= prod:
            return 0
        d = self._data
        mask = self.size - 1
        need = dec.need
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
                if plen >= need:
                    dec.run(d, off, n, stride, plen, out)
                    count += n
                else:
                    bad += n
        finally:
            # everything before cons is copied out: release it, once
            self._cons_cell[0] = cons
            self._cons = cons
            if bad:
                self.malformed += bad
        return count


if sys.byteorder != "little":  # pragma: no cover
    raise ImportError("pyebpf.events assumes a little-endian CPU")
