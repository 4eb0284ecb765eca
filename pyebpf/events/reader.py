"""What both readers share: waiting, delivery, decoding, lost events and
their lifetime; and the rules the drains (:mod:`.perf`, :mod:`.ringbuf`) keep.

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
batch does not trigger collection after collection.  Decoded events are
copies, so the space is given back to the kernel at the end of every drain.  Waiting is one ``epoll_wait`` per
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

import _thread
import gc
import mmap
import os
import select
import struct
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from types import FrameType
    from typing import Any, Callable, Iterator

from ..codecs import CtypesCodec, StructCodec
from ..errors import LostEventsWarning, OptionError, PyebpfError, StateError
from ..kernel import syscall as _sys
from ..kernel.lifetime import Owner, close_all, close_fd
from .decode import _ArrayDecoder, _Decoder, _format_dtype, _numpy, make_decoder

PAGE_SIZE = mmap.PAGESIZE

_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from


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


_gc_isenabled, _gc_disable, _gc_enable = gc.isenabled, gc.disable, gc.enable

_DEFAULT_SIZE = 256 * 1024
# records checked at once for a uniform run: start small, grow x4 while uniform
_WIN_START = 16
_WIN_MAX = 1 << 16
_DEFAULT_FLUSH = 0.05


class ReaderClosedError(PyebpfError, ValueError):
    """The reader was used after :meth:`close`."""


_PACKAGE_DIR = os.path.dirname(__file__)


def _stacklevel() -> int:
    """The ``stacklevel`` that makes a warning point at the caller of this package."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == _PACKAGE_DIR:
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
            close_fd(self.wake_fd)
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
        close_all(self.fds)
        close_all(self.owned)


# =========================================================================
# the common reader

class _Reader(Owner):
    """What both readers share: waiting, delivery, decoding, lost events, lifetime
    (an :class:`~pyebpf.kernel.lifetime.Owner` releasing its :class:`_Resources`)."""

    _hdr = 0                  # payload offset in a record (set by subclasses)
    _kind = "reader"

    def _construct(self, decode: Any, callback: Callable[[Any], Any] | None,
                   on_lost: Callable[[int, int], Any] | None, flush_interval: float,
                   *open_args: Any) -> None:
        """The constructor of both readers: :meth:`_setup`, then the subclass's
        ``_open(*open_args)``; what a failure leaves open is closed at once."""
        self._setup(decode, callback, on_lost, flush_interval)
        try:
            self._open(*open_args)
        except BaseException:
            self.close()
            raise

    def _open(self, *args: Any, **kw: Any) -> None:
        """Open the rings (subclasses; the arguments are theirs)."""
        raise NotImplementedError

    def _setup(self, decode: Any, callback: Callable[[Any], Any] | None,
               on_lost: Callable[[int, int], Any] | None, flush_interval: float) -> None:
        if flush_interval <= 0:
            raise OptionError(f"flush_interval must be positive seconds, not {flush_interval!r}")
        self._dec, self._codec = make_decoder(decode, self._hdr)
        self._decode_spec = decode
        self.callback = callback
        self.on_lost = on_lost
        self.flush_interval = float(flush_interval)
        self._pending: list[Any] = []
        # (_thread's lock is threading.Lock; threading itself, ~1 ms of a
        # start, is imported by the background thread's start only)
        self._lock = _thread.allocate_lock()
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
        if t is not None and t.ident != _thread.get_ident() and t.is_alive():
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
        import ctypes
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

        import threading
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
            import warnings
            warnings.warn(LostEventsWarning(
                f"{type(self).__name__}: {n} events lost ({self._lost_total} in total, "
                f"per CPU {dict(sorted(self._lost_per_cpu.items()))}): {self._loss_hint} "
                "Pass on_lost=callback(cpu, count) to handle losses yourself."),
                stacklevel=_stacklevel())

    _loss_hint = ""
