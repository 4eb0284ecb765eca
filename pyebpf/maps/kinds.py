"""The map kinds: hashes, arrays, their per-CPU and LRU variants, stack
traces, queues and stacks, the perf event array and the ring buffer; and
:func:`map_class_for`, the class of a map type number.

Part of :mod:`pyebpf.maps`, which re-exports every public name.
"""
from __future__ import annotations

import errno as _errno
import itertools
import struct
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Generic, Iterable, Iterator, TypedDict, overload

    from typing_extensions import TypeVar as _TypeVarWithDefault
    from typing_extensions import Unpack

    from ..codecs import TypedSpec
    from .dictmap import _D

    #: a buffer a codec reads from / writes into
    _RBuf = bytes | bytearray | memoryview
    _WBuf = bytearray | memoryview
    #: what a per-CPU codec's element decodes to
    _E = _TypeVarWithDefault("_E", default=Any)
    #: the key and value types a constructor infers from typed codec specs
    #: (:data:`~pyebpf.codecs.TypedSpec`; an integer spec says nothing more: ``int``)
    _KS = _TypeVarWithDefault("_KS", default=int)
    _VS = _TypeVarWithDefault("_VS", default=int)

    class _Options(TypedDict, total=False):
        """The keywords of the hash and array constructors."""

        name: str | None
        flags: int
        numa_node: int | None
        btf: bool

    #: an array's key to the checker (an int index; Any: keyed and array maps
    #: are read alike, ``for k, v in m.items()``)
    _Index = Any
else:
    from ..codecs import Generic

    _E = _Index = None

from ..codecs import Bytes, BytesCodec, Codec, codec, default_codec as _default_codec
from ..errors import MapKeyError, NotSupportedError, SizeError
from ..kernel import syscall as _sys
from ..kernel.constants import (BPF_ANY, BPF_EXIST, BPF_F_STACK_BUILD_ID,
                                PERF_MAX_STACK_DEPTH, MapType, enum_name)
from ..kernel.cpus import num_possible_cpus, possible_cpus
from .base import Map, ring_buffer_size
from .dictmap import _K, _V, _DictMap

__all__ = ["PerCpuCodec", "HashMap", "LruHashMap", "ArrayMap", "PerCpuHashMap",
           "LruPerCpuHashMap", "PerCpuArrayMap", "StackTraceMap", "QueueMap", "StackMap",
           "PerfEventArray", "RingBuf", "map_class_for"]


# =========================================================================
# per-CPU values: their layout as a codec (the other codecs: pyebpf.codecs)

class PerCpuCodec(Codec[list[_E]], Generic[_E]):
    """One value per possible CPU, each padded to 8 bytes (the kernel's layout).

    Decodes to a list; encodes a list of :attr:`ncpus` values, or one value
    that is written for every CPU.
    """

    def __init__(self, elem: Codec[_E], ncpus: int | None = None) -> None:
        self.elem = elem
        self.ncpus = ncpus if ncpus is not None else num_possible_cpus()
        self.stride = (elem.size + 7) & ~7
        self.size = self.stride * self.ncpus
        self.label = f"per-CPU {elem.label} x {self.ncpus}"

    def pack_into(self, buf: _WBuf, offset: int, value: Any) -> None:
        """Write a list of :attr:`ncpus` values, or one value for every CPU."""
        stride, pack = self.stride, self.elem.pack_into
        pad = stride - self.elem.size
        if isinstance(value, list):
            if len(value) != self.ncpus:
                raise SizeError(f"a per-CPU value needs {self.ncpus} items (one per possible "
                                f"CPU), got {len(value)}")
            values: Iterable[Any] = value
        else:
            values = itertools.repeat(value, self.ncpus)
        for i, v in enumerate(values):
            off = offset + i * stride
            try:
                pack(buf, off, v)
            except struct.error as exc:
                raise SizeError(f"per-CPU item {v!r} does not fit {self.elem.label}: {exc}") from None
            if pad:
                buf[off + self.elem.size:off + stride] = bytes(pad)

    def unpack_from(self, buf: _RBuf, offset: int = 0) -> list[_E]:
        """The list of the :attr:`ncpus` values at ``offset``."""
        stride, unpack = self.stride, self.elem.unpack_from
        return [unpack(buf, offset + i * stride) for i in range(self.ncpus)]

    def unpack_many(self, buf: _RBuf, count: int) -> list[list[_E]]:
        """``count`` per-CPU lists packed back to back."""
        if self.stride == self.elem.size:
            flat = self.elem.unpack_many(buf, count * self.ncpus)
            n = self.ncpus
            return [flat[i * n:(i + 1) * n] for i in range(count)]
        return super().unpack_many(buf, count)


class HashMap(_DictMap[_K, _V]):
    """BPF_MAP_TYPE_HASH: ``HashMap(key, value, max_entries=1024, *, name=None, flags=0,
    btf=True)`` (``btf``: describe the key and value types to the kernel)."""

    map_type = MapType.HASH
    _prefix = "hash"

    if TYPE_CHECKING:   # typed specs give a typed map (HashMap("u32", "u64"): HashMap[int, int])
        @overload
        def __init__(self: HashMap[_KS, _VS], key: TypedSpec[_KS], value: TypedSpec[_VS],
                     max_entries: int = ..., **kw: Unpack[_Options]) -> None: ...
        @overload
        def __init__(self, key: Any, value: Any, max_entries: int = ...,
                     **kw: Unpack[_Options]) -> None: ...

    def __init__(self, key: Any, value: Any, max_entries: int = 1024, *,
                 name: str | None = None, flags: int = 0, numa_node: int | None = None,
                 btf: bool = True) -> None:
        super().__init__(key, value, max_entries, name=name, flags=flags, numa_node=numa_node,
                         btf=btf)


class LruHashMap(HashMap[_K, _V]):
    """BPF_MAP_TYPE_LRU_HASH: a hash that evicts the least recently used entry when full."""

    map_type = MapType.LRU_HASH
    _prefix = "lru_hash"

    if TYPE_CHECKING:   # (HashMap's constructor, typed as this class)
        @overload
        def __init__(self: LruHashMap[_KS, _VS], key: TypedSpec[_KS], value: TypedSpec[_VS],
                     max_entries: int = ..., **kw: Unpack[_Options]) -> None: ...
        @overload
        def __init__(self, key: Any, value: Any, max_entries: int = ...,
                     **kw: Unpack[_Options]) -> None: ...

        def __init__(self, key: Any, value: Any, max_entries: int = 1024,
                     **kw: Unpack[_Options]) -> None: ...


class _ArrayMixin(_DictMap[_Index, _V]):
    _KEY = "u32"

    def _init_common(self, fd: _sys.Fd, name: str, max_entries: int, flags: int) -> None:
        super()._init_common(fd, name, max_entries, flags)
        self._max_index = max_entries

    def __len__(self) -> int:
        return self.max_entries

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.max_entries))

    def keys(self) -> list[int]:
        return list(range(self.max_entries))

    def __contains__(self, key: Any) -> bool:
        return type(key) is int and 0 <= key < self.max_entries

    def clear(self) -> None:
        """Set every element to zero (array elements cannot be deleted)."""
        zero = bytes(self.value_codec.size)  # type: ignore[union-attr]
        ks, vs = self.key_size, self.value_codec.size  # type: ignore[union-attr]
        n = self.max_entries
        if self._use_batch():
            ops = _sys.BatchOps(self.fd, ks, vs, min(n, self._chunk()))
            try:
                for start in range(0, n, ops.count):
                    m = min(ops.count, n - start)
                    struct.pack_into(f"<{m}I", ops.keys, 0, *range(start, start + m))
                    ops.values[:m * vs] = bytes(m * vs)
                    ops.update(m)
                return
            except NotSupportedError:
                self._batch_result(False)
        s = self._take()
        try:
            for i in range(n):
                struct.pack_into("<I", s.key, 0, i)
                s.value[:] = zero
                s.update(BPF_ANY)
        finally:
            self._pool.append(s)


class ArrayMap(_ArrayMixin[_V]):
    """BPF_MAP_TYPE_ARRAY: ``ArrayMap(value, max_entries, *, name=None, flags=0, btf=True)``.

    Keys are indexes ``0 <= i < max_entries``; every element exists (zero at
    first) and cannot be deleted; ``len()`` is ``max_entries``.
    """

    map_type = MapType.ARRAY
    _prefix = "array"

    if TYPE_CHECKING:   # a typed spec gives a typed map (ArrayMap("u64", 8): ArrayMap[int])
        @overload
        def __init__(self: ArrayMap[_VS], value: TypedSpec[_VS], max_entries: int,
                     **kw: Unpack[_Options]) -> None: ...
        @overload
        def __init__(self, value: Any, max_entries: int, **kw: Unpack[_Options]) -> None: ...

    def __init__(self, value: Any, max_entries: int, *, name: str | None = None,
                 flags: int = 0, numa_node: int | None = None, btf: bool = True) -> None:
        super().__init__(self._KEY, value, max_entries, name=name, flags=flags,
                         numa_node=numa_node, btf=btf)


class _PerCpuMixin(_DictMap[_K, _V]):
    """Values are lists with one entry per possible CPU."""

    def _setup_codecs(self, kc: Codec | None, vc: Codec | None) -> None:
        if vc is not None and not isinstance(vc, PerCpuCodec):
            vc = PerCpuCodec(vc)
        self.key_codec = kc
        self.value_codec = vc
        self.key_size = kc.size if kc else 0
        self.value_size = vc.elem.size if vc else 0

    @classmethod
    def _value_codec_for(cls, info: _sys.MapInfo, value: Any) -> PerCpuCodec:
        elem = codec(value, "value") if value is not None else _default_codec(info.value_size)
        return PerCpuCodec(elem)

    def sum(self, key: _K) -> Any:
        """The sum of ``key``'s per-CPU values (numbers only)."""
        values: Any = self[key]             # (a per-CPU map's _V is a list)
        return sum(values)


class PerCpuHashMap(_PerCpuMixin[_K, _V], HashMap[_K, _V]):
    """BPF_MAP_TYPE_PERCPU_HASH: values are lists, one per possible CPU."""

    map_type = MapType.PERCPU_HASH
    _prefix = "percpu_hash"

    if TYPE_CHECKING:   # (HashMap's constructor: the value a list of the spec's type)
        @overload
        def __init__(self: PerCpuHashMap[_KS, list[_VS]], key: TypedSpec[_KS],
                     value: TypedSpec[_VS], max_entries: int = ...,
                     **kw: Unpack[_Options]) -> None: ...
        @overload
        def __init__(self, key: Any, value: Any, max_entries: int = ...,
                     **kw: Unpack[_Options]) -> None: ...

        def __init__(self, key: Any, value: Any, max_entries: int = 1024,
                     **kw: Unpack[_Options]) -> None: ...


class LruPerCpuHashMap(_PerCpuMixin[_K, _V], HashMap[_K, _V]):
    """BPF_MAP_TYPE_LRU_PERCPU_HASH."""

    map_type = MapType.LRU_PERCPU_HASH
    _prefix = "lru_percpu_hash"


class PerCpuArrayMap(_PerCpuMixin[_Index, _V], ArrayMap[_V]):
    """BPF_MAP_TYPE_PERCPU_ARRAY: values are lists, one per possible CPU."""

    map_type = MapType.PERCPU_ARRAY
    _prefix = "percpu_array"

    if TYPE_CHECKING:   # (ArrayMap's constructor: the value a list of the spec's type)
        @overload
        def __init__(self: PerCpuArrayMap[list[_VS]], value: TypedSpec[_VS], max_entries: int,
                     **kw: Unpack[_Options]) -> None: ...
        @overload
        def __init__(self, value: Any, max_entries: int, **kw: Unpack[_Options]) -> None: ...

        def __init__(self, value: Any, max_entries: int, **kw: Unpack[_Options]) -> None: ...


# -------------------------------------------------------------------------
# stack traces

class StackTraceMap(_DictMap):
    """BPF_MAP_TYPE_STACK_TRACE, filled by ``bpf_get_stackid``.

    ``m[stack_id]`` is the list of instruction addresses (innermost first,
    zeros dropped).  With ``build_id=True`` (BPF_F_STACK_BUILD_ID) each entry
    is ``(status, build_id: bytes, offset_or_ip)`` instead.
    """

    map_type = MapType.STACK_TRACE
    _prefix = "stacks"

    def __init__(self, max_entries: int = 1024, max_depth: int = PERF_MAX_STACK_DEPTH, *,
                 name: str | None = None, flags: int = 0, build_id: bool = False) -> None:
        if build_id:
            flags |= BPF_F_STACK_BUILD_ID
        entry = 32 if flags & BPF_F_STACK_BUILD_ID else 8
        super().__init__("u32", Bytes(entry * max_depth), max_entries, name=name, flags=flags)

    @classmethod
    def _value_codec_for(cls, info: _sys.MapInfo, value: Any) -> BytesCodec:
        return BytesCodec(info.value_size)

    @property
    def max_depth(self) -> int:
        """The most frames one stack holds (from the value size)."""
        return self.value_size // (32 if self.flags & BPF_F_STACK_BUILD_ID else 8)

    def _decode(self, raw: bytes) -> list[Any]:
        if self.flags & BPF_F_STACK_BUILD_ID:
            out = []
            for status, bid, off in struct.iter_unpack("<i20sQ", raw):
                if status == 0:
                    break
                out.append((status, bid, off))
            return out
        addrs = memoryview(raw).cast("Q").tolist() if sys.byteorder == "little" else \
            [a for (a,) in struct.iter_unpack("<Q", raw)]
        try:
            return addrs[:addrs.index(0)]
        except ValueError:
            return addrs

    def __getitem__(self, stack_id: int) -> list[Any]:
        return self._decode(super().__getitem__(stack_id))

    def items(self) -> list[tuple[Any, Any]]:
        """A snapshot list of ``(stack_id, frames)`` pairs."""
        return [(k, self._decode(v)) for k, v in super().items()]

    def values(self) -> list[Any]:
        """A snapshot list of the stacks (lists of frames)."""
        return [self._decode(v) for v in super().values()]

    def __setitem__(self, key: Any, value: Any) -> None:
        raise NotSupportedError(_errno.EINVAL, "BPF_MAP_UPDATE_ELEM",
                                f"stack trace map {self.name!r}",
                                "stack trace maps are written by bpf_get_stackid only")


# -------------------------------------------------------------------------
# queue and stack

class _Absent:
    """The type of :data:`_ABSENT`: no default given to ``pop``/``peek``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<no default>"


_ABSENT = _Absent()


class _QueueLike(Map, Generic[_V]):
    """Maps without keys: push / pop / peek (generic, to a type checker, in
    the value type)."""

    def __init__(self, value: Any, max_entries: int, *, name: str | None = None,
                 flags: int = 0) -> None:
        super().__init__(None, value, max_entries, name=name, flags=flags)

    def _init_common(self, fd: _sys.Fd, name: str, max_entries: int, flags: int) -> None:
        super()._init_common(fd, name, max_entries, flags)
        self._ops = _sys.MapOps(fd.fileno(), 0, self.value_codec.size)  # type: ignore[union-attr]

    def _invalidate(self) -> None:
        ops = getattr(self, "_ops", None)
        if ops is not None:
            ops.invalidate()

    def push(self, value: _V, overwrite: bool = False) -> None:
        """Add ``value``.  When full: MapFullError, or with ``overwrite`` the
        oldest element is dropped (BPF_EXIST)."""
        vc = self.value_codec
        with self._lock:
            try:
                vc.pack_into(self._ops.value, 0, value)  # type: ignore[union-attr]
            except struct.error as exc:
                raise SizeError(f"map {self.name!r}: value {value!r} does not fit "
                                f"{vc.label} ({vc.size} bytes): {exc}") from None  # type: ignore[union-attr]
            self._ops.update(BPF_EXIST if overwrite else BPF_ANY)

    def pop(self, default: _D | _Absent = _ABSENT) -> _V | _D:
        """Remove and return the next element (``default`` if given and empty)."""
        return self._next(True, default)

    def peek(self, default: _D | _Absent = _ABSENT) -> _V | _D:
        """Return the next element without removing it (``default`` if given and empty)."""
        return self._next(False, default)

    def _next(self, remove: bool, default: _D | _Absent) -> _V | _D:
        ops = self._ops
        with self._lock:
            if ops.lookup_and_delete() if remove else ops.lookup():
                value: _V = self.value_codec.unpack_from(ops.value, 0)  # type: ignore[union-attr]
                return value
        if not isinstance(default, _Absent):
            return default
        raise MapKeyError(f"{self._what} {self.name!r} is empty")

    def drain(self) -> list[_V]:
        """Pop everything, in pop order."""
        out: list[Any] = []
        sentinel = object()
        while (v := self.pop(sentinel)) is not sentinel:
            out.append(v)
        return out

    _what = "queue"


class QueueMap(_QueueLike[_V]):
    """BPF_MAP_TYPE_QUEUE (FIFO): ``QueueMap(value, max_entries)``."""

    map_type = MapType.QUEUE
    _prefix = "queue"
    _what = "queue"

    if TYPE_CHECKING:   # a typed spec gives a typed queue (QueueMap("u32", 8): QueueMap[int])
        @overload
        def __init__(self: QueueMap[_VS], value: TypedSpec[_VS], max_entries: int, *,
                     name: str | None = ..., flags: int = ...) -> None: ...
        @overload
        def __init__(self, value: Any, max_entries: int, *, name: str | None = ...,
                     flags: int = ...) -> None: ...

        def __init__(self, value: Any, max_entries: int, *, name: str | None = ...,
                     flags: int = ...) -> None: ...


class StackMap(_QueueLike[_V]):
    """BPF_MAP_TYPE_STACK (LIFO): ``StackMap(value, max_entries)``."""

    map_type = MapType.STACK
    _prefix = "stack"
    _what = "stack"

    # (duplicates: deliberate, QueueMap's typed constructor again: a self-typed
    # overload of a base types no subclass, so each class states its own)
    if TYPE_CHECKING:
        @overload
        def __init__(self: StackMap[_VS], value: TypedSpec[_VS], max_entries: int, *,
                     name: str | None = ..., flags: int = ...) -> None: ...
        @overload
        def __init__(self, value: Any, max_entries: int, *, name: str | None = ...,
                     flags: int = ...) -> None: ...

        def __init__(self, value: Any, max_entries: int, *, name: str | None = ...,
                     flags: int = ...) -> None: ...


# -------------------------------------------------------------------------
# perf event array and ring buffer

class PerfEventArray(Map):
    """BPF_MAP_TYPE_PERF_EVENT_ARRAY: slot ``cpu`` holds a perf event fd.

    ``PerfEventArray()`` has one slot per possible CPU.  ``m[cpu] = perf_fd``
    stores the fd (an int or anything with ``fileno()``); ``del m[cpu]``
    empties the slot.  The reader of the rings is a later layer.
    """

    map_type = MapType.PERF_EVENT_ARRAY
    _prefix = "events"

    def __init__(self, max_entries: int | None = None, *, name: str | None = None) -> None:
        if max_entries is None:
            max_entries = max(possible_cpus()) + 1
        super().__init__("u32", "u32", max_entries, name=name)

    def _slot(self, cpu: int) -> bytes:
        if not 0 <= cpu < self.max_entries:
            raise MapKeyError(f"cpu {cpu} is out of range for {self.name!r} "
                              f"(max_entries {self.max_entries})")
        return struct.pack("<I", cpu)

    def __setitem__(self, cpu: int, perf_fd: Any) -> None:
        fd = perf_fd if isinstance(perf_fd, int) else perf_fd.fileno()
        _sys.map_update(self._fd, self._slot(cpu), struct.pack("<I", fd))

    def set(self, cpu: int, perf_fd: Any) -> None:
        """Same as ``m[cpu] = perf_fd``."""
        self[cpu] = perf_fd

    def __delitem__(self, cpu: int) -> None:
        if not _sys.map_delete(self._fd, self._slot(cpu)):
            raise MapKeyError(cpu)

    def __len__(self) -> int:
        return self.max_entries


class RingBuf(Map):
    """BPF_MAP_TYPE_RINGBUF of ``size`` bytes (a power of 2, multiple of the page size).

    Only creation and the fd live here; the reader is a later layer.
    """

    map_type = MapType.RINGBUF
    _prefix = "ringbuf"

    def __init__(self, size: int = 256 * 1024, *, name: str | None = None) -> None:
        super().__init__(None, None, ring_buffer_size(size), name=name)

    @property
    def size(self) -> int:
        """Data area size in bytes (``max_entries``)."""
        return self.max_entries


_CLASSES: dict[int, type[Map]] = {}
for _cls in (HashMap, ArrayMap, PerCpuHashMap, PerCpuArrayMap, LruHashMap, LruPerCpuHashMap,
             PerfEventArray, RingBuf, StackTraceMap, QueueMap, StackMap):
    _CLASSES[_cls.map_type] = _cls


def map_class_for(map_type: int) -> type[Map]:
    """The :class:`Map` subclass for a map type number."""
    try:
        return _CLASSES[map_type]
    except KeyError:
        raise NotSupportedError(_errno.EINVAL, "map_class_for",
                                f"pyebpf has no class for map type "
                                f"{enum_name(MapType, map_type)}",
                                "use the kernel.syscall map_* functions with raw bytes") from None
