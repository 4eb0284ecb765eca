"""BPF maps with a dict-like API.

A map is created in the kernel when the Python object is made, and freed when
it is closed (``close()``, a ``with`` block, or garbage collection) unless it
is pinned or a loaded program still uses it::

    from pyebpf.maps import HashMap, ArrayMap, PerCpuArrayMap

    with HashMap("u32", "u64", 1024, name="counts") as counts:
        counts[7] = 1
        counts.update({1: 10, 2: 20})          # one BPF_MAP_UPDATE_BATCH
        for pid, n in counts.items():          # BPF_MAP_LOOKUP_BATCH
            ...

Keys and values are described by a *codec spec* (an integer width ``4``, a
type name ``"u32"``, a :mod:`struct` format ``"<QI"``, a ctypes type,
``Bytes(16)`` or a :class:`Codec`), turned into a :class:`Codec` by
:func:`codec`; both live in :mod:`pyebpf.codecs` (see its docs) and are
importable from here too.

Per-CPU maps hold one value per *possible* CPU: reading gives a list,
writing takes a list of that length (or a single value for every CPU).

Wrong key/value sizes, and shapes beyond the kernel's limits (sizes and
``max_entries`` are u32, a per-CPU value is at most 32 KiB, a ring buffer at
most 2 GiB), raise :class:`~pyebpf.errors.SizeError` before any system call
(:func:`check_map_shape`); :class:`MapSpec` describes a map without creating it; a missing key raises :class:`~pyebpf.errors.MapKeyError` (a
``KeyError``).
"""
from __future__ import annotations

import collections
import errno as _errno
import fcntl
import itertools
import os
import struct
import sys
from _thread import allocate_lock as _allocate_lock
from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar, Iterable, Iterator, Sequence, TypeVar

    M = TypeVar("M", bound="Map")
    #: a buffer a codec reads from / writes into
    _RBuf = bytes | bytearray | memoryview
    _WBuf = bytearray | memoryview

# Keyed maps are generic in (key, value) to type checkers: ``HashMap[int, int]``;
# at run time the subscript gives the class back, and typing is not imported.
if TYPE_CHECKING:
    from typing import Generic

    from typing_extensions import TypeVar as _TypeVarWithDefault

    _K = _TypeVarWithDefault("_K", default=Any)
    _V = _TypeVarWithDefault("_V", default=Any)
    _D = TypeVar("_D")
else:
    class Generic:
        """Run-time stand-in for ``typing.Generic``: ``HashMap[int, int]`` is ``HashMap``."""

        __slots__ = ()

        def __class_getitem__(cls, params):
            return cls

    _K = _V = None

from .errors import (KernelError, MapError, MapKeyError, NotSupportedError, OptionError,
                     SizeError)
from .kernel import syscall as _sys
from .kernel.constants import (BPF_ANY, BPF_EXIST, BPF_F_STACK_BUILD_ID,
                               BPF_NOEXIST, PERF_MAX_STACK_DEPTH, MapType, enum_name)
from .kernel.cpus import num_possible_cpus, possible_cpus
from .kernel.lifetime import Owner
from .codecs import (Bytes, BytesCodec, Codec, CtypesCodec, StructCodec, codec,
                     default_codec as _default_codec)


class _Slot(_sys.MapOps):
    """MapOps plus typed views of its buffers for one-number keys/values."""

    __slots__ = ("kview", "vview")
    # views whose one item is the key / value (int or float, as the codec decodes)
    kview: memoryview[Any] | None
    vview: memoryview[Any] | None

#: map type -> whether BPF_MAP_*_BATCH works for it on this kernel (learned at run time)
_BATCH_SUPPORT: dict[int, bool] = {}

__all__ = [
    "Codec", "StructCodec", "BytesCodec", "CtypesCodec", "PerCpuCodec", "Bytes", "codec",
    "Map", "HashMap", "ArrayMap", "PerCpuHashMap", "PerCpuArrayMap", "LruHashMap",
    "LruPerCpuHashMap", "PerfEventArray", "RingBuf", "StackTraceMap", "QueueMap",
    "StackMap", "map_class_for",
]


# =========================================================================
# Codecs (the rest live in pyebpf.codecs, re-exported here)

class PerCpuCodec(Codec):
    """One value per possible CPU, each padded to 8 bytes (the kernel's layout).

    Decodes to a list; encodes a list of :attr:`ncpus` values, or one value
    that is written for every CPU.
    """

    def __init__(self, elem: Codec, ncpus: int | None = None) -> None:
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

    def unpack_from(self, buf: _RBuf, offset: int = 0) -> list[Any]:
        """The list of the :attr:`ncpus` values at ``offset``."""
        stride, unpack = self.stride, self.elem.unpack_from
        return [unpack(buf, offset + i * stride) for i in range(self.ncpus)]

    def unpack_many(self, buf: _RBuf, count: int) -> list[Any]:
        """``count`` per-CPU lists packed back to back."""
        if self.stride == self.elem.size:
            flat = self.elem.unpack_many(buf, count * self.ncpus)
            n = self.ncpus
            return [flat[i * n:(i + 1) * n] for i in range(count)]
        return super().unpack_many(buf, count)


# =========================================================================
# The kernel's limits on a map's shape

U32_MAX = 0xFFFFFFFF
#: PCPU_MIN_UNIT_SIZE: the largest value of a per-CPU map (larger gives E2BIG)
PERCPU_VALUE_MAX = 32768
#: the largest ring buffer: a power of two that max_entries (a u32) can hold
RINGBUF_MAX = 1 << 31
_PERCPU_TYPES = (MapType.PERCPU_HASH, MapType.PERCPU_ARRAY, MapType.LRU_PERCPU_HASH)


def check_map_shape(map_type: int, key_size: int, value_size: int, max_entries: int,
                    flags: int = 0) -> None:
    """Raise :class:`~pyebpf.errors.SizeError` unless a map of this shape fits
    the kernel's fields (u32 sizes and count) and limits: ``max_entries``
    1..4294967295, per-CPU values up to 32768 bytes.  Called before any
    system call (the kernel's own, type-specific checks come after)."""
    what = enum_name(MapType, map_type)
    for field, v in (("key_size", key_size), ("value_size", value_size), ("flags", flags),
                     ("max_entries", max_entries)):
        if not isinstance(v, int):
            raise SizeError(f"{what} map: {field} must be an integer, not {v!r}")
    for field, v in (("key_size", key_size), ("value_size", value_size), ("flags", flags)):
        if not 0 <= v <= U32_MAX:
            raise SizeError(f"{what} map: {field} {v} does not fit the kernel's u32 "
                            f"(0..{U32_MAX})")
    if not 1 <= max_entries <= U32_MAX:
        raise SizeError(f"{what} map: max_entries must be 1..{U32_MAX} (the kernel's u32), "
                        f"got {max_entries}")
    if map_type in _PERCPU_TYPES and value_size > PERCPU_VALUE_MAX:
        raise SizeError(f"{what} map: a per-CPU value is at most {PERCPU_VALUE_MAX} bytes "
                        f"(the kernel's PCPU_MIN_UNIT_SIZE), got {value_size}")


def ring_buffer_size(size: int) -> int:
    """``size`` checked as the data size of a BPF ring buffer: a power of two,
    a multiple of the page size, at most 2 GiB (:data:`RINGBUF_MAX`)."""
    page = os.sysconf("SC_PAGE_SIZE")
    if (not isinstance(size, int) or size < page or size & (size - 1) or size % page
            or size > RINGBUF_MAX):
        raise SizeError(f"ring buffer size must be a power of two, a multiple of the page size "
                        f"({page}) and at most {RINGBUF_MAX} bytes (2 GiB); got {size!r}")
    return size


def perf_ring_size(size: int) -> int:
    """The bytes of one perf ring for a requested ``size``: rounded up to a
    power-of-two number of pages, at most 2 GiB per CPU (:data:`RINGBUF_MAX`;
    the kernel's watermark and data offsets are 32-bit)."""
    page = os.sysconf("SC_PAGE_SIZE")
    if not isinstance(size, int) or isinstance(size, bool) or not 0 < size <= RINGBUF_MAX:
        raise SizeError(f"a perf ring size must be 1..{RINGBUF_MAX} bytes (2 GiB, rounded up to "
                        f"a power-of-two number of {page}-byte pages); got {size!r}")
    pages = 1
    while pages * page < size:
        pages *= 2
    return pages * page


class MapSpec:
    """A map described but not created: the name, type and shape a program
    needs to refer to it (:meth:`Program.ld_map <pyebpf.program.dsl.InstructionBuilder.ld_map>`
    takes it), with every check a real map makes before its system call.
    ``create()`` makes the map in the kernel.  Showing a program built on
    specs needs no privilege and allocates nothing in the kernel.

    ``MapSpec(PerCpuArrayMap, "u64", 100, name="hist")`` takes the class and
    the arguments the class takes.
    """

    def __init__(self, cls: "type[Map]", *args: "Any", **kw: "Any") -> None:
        shape = cls.__new__(cls)
        shape._described_only = True
        cls.__init__(shape, *args, **kw)
        self.cls = cls
        self.args = args
        self.kw = dict(kw, name=shape.name)
        self.name = shape.name
        self.map_type = cls.map_type
        self.key_size = shape.key_size
        self.value_size = shape.value_size
        self.max_entries = shape.max_entries
        self.flags = shape.flags
        self.key_codec = shape.key_codec
        self.value_codec = shape.value_codec

    def create(self) -> "Map":
        """The map, created in the kernel."""
        return self.cls(*self.args, **self.kw)

    @property
    def fd(self) -> int:
        """Always raises :class:`~pyebpf.errors.MapError`: a described map has no fd."""
        raise MapError(f"map {self.name!r} is only described (a MapSpec): create() it before "
                       "loading a program that uses it")

    def close(self) -> None:
        """Nothing to close (for symmetry with :class:`Map`)."""

    def __repr__(self) -> str:
        return (f"<MapSpec {self.cls.__name__} {self.name!r}: key {self.key_size}, "
                f"value {self.value_size}, max_entries {self.max_entries}>")


# Maps

_name_counter = itertools.count(1)


def _auto_name(prefix: str) -> str:
    return f"{prefix}_{next(_name_counter)}"


class Map(Owner):
    """Base of every map: owns the fd and knows the map's shape.

    Its lifetime is an :class:`~pyebpf.kernel.lifetime.Owner`'s: ``close()``
    (idempotent), ``with`` and garbage collection release the fd; the
    kernel frees the map once no fd, pin or program refers to it.

    Attributes:
        name: the name programs use to refer to this map (also the kernel
            name, cut to 15 characters of ``[A-Za-z0-9_.]``).
        map_type: the :class:`~pyebpf.kernel.MapType` number.
        key_size, value_size: sizes as the kernel knows them (for per-CPU
            maps ``value_size`` is the size of one CPU's value).
        max_entries, flags: as created.
        key_codec, value_codec: the :class:`Codec` objects in use.
    """

    map_type: ClassVar[int] = 0
    _prefix: ClassVar[str] = "map"
    #: set (on an object made by :class:`MapSpec`) to check the shape without creating the map
    _described_only: bool

    name: str
    key_size: int
    value_size: int
    max_entries: int
    flags: int
    key_codec: Codec | None
    value_codec: Codec | None

    def __init__(self, key: Any, value: Any, max_entries: int, *, name: str | None = None,
                 flags: int = 0, numa_node: int | None = None, map_extra: int = 0,
                 inner_map_fd: int = 0) -> None:
        if not self.map_type:
            raise OptionError("Map is the base class; create a HashMap, ArrayMap, PerCpuHashMap, "
                            "QueueMap, RingBuf ... (or open one with Map.from_pin/from_fd)")
        kc = codec(key, "key") if key is not None else None
        vc = codec(value, "value") if value is not None else None
        self._setup_codecs(kc, vc)
        name = name if name else _auto_name(self._prefix)
        check_map_shape(self.map_type, self.key_size, self.value_size, max_entries, flags)
        if getattr(self, "_described_only", False):     # a MapSpec: no system call
            self.name, self.max_entries, self.flags = name, max_entries, flags
            return
        fd = _sys.map_create(self.map_type, self.key_size, self.value_size, max_entries,
                             flags=flags, name=name, numa_node=numa_node,
                             map_extra=map_extra, inner_map_fd=inner_map_fd)
        self._init_common(fd, name, max_entries, flags)

    # -- construction helpers ------------------------------------------------
    def _setup_codecs(self, kc: Codec | None, vc: Codec | None) -> None:
        self.key_codec = kc
        self.value_codec = vc
        self.key_size = kc.size if kc else 0
        self.value_size = vc.size if vc else 0

    def _init_common(self, fd: _sys.Fd, name: str, max_entries: int, flags: int) -> None:
        self._fd = fd
        self._own(fd.close)
        self.name = name
        self.max_entries = max_entries
        self.flags = flags
        self._pinned: str | None = None
        self._frozen = False
        self._lock = _allocate_lock()

    @classmethod
    def _adopt(cls: type[M], fd: _sys.Fd, info: _sys.MapInfo, key: Any, value: Any) -> M:
        """Build an object of this class around an existing map fd."""
        self = cls.__new__(cls)
        kc = (codec(key, "key") if key is not None else
              (_default_codec(info.key_size) if info.key_size else None))
        vc = cls._value_codec_for(info, value)
        if kc is not None and kc.size != info.key_size:
            fd.close()
            raise SizeError(f"the map's key_size is {info.key_size} bytes but the key spec "
                            f"{kc.label} is {kc.size} bytes")
        self._setup_codecs(kc, vc)
        if self.key_size != info.key_size or self.value_size != info.value_size:
            fd.close()
            raise SizeError(f"the map's key/value sizes are {info.key_size}/{info.value_size} "
                            f"bytes but the specs give {self.key_size}/{self.value_size}")
        self._init_common(fd, info.name, info.max_entries, info.flags)
        return self

    @classmethod
    def _value_codec_for(cls, info: _sys.MapInfo, value: Any) -> Codec | None:
        if value is not None:
            return codec(value, "value")
        return _default_codec(info.value_size) if info.value_size else None

    @classmethod
    def from_fd(cls, fd: "int | _sys.Fd", key: Any = None, value: Any = None) -> "Map":
        """Wrap an existing map fd (duplicated: the caller keeps its own fd).

        Called on :class:`Map` itself, returns the subclass for the map's type.
        ``key``/``value`` default to unsigned ints (sizes 1/2/4/8) or raw bytes.
        """
        num = fd if isinstance(fd, int) else fd.fileno()
        own = _sys.Fd(fcntl.fcntl(num, fcntl.F_DUPFD_CLOEXEC, 1))
        return cls._from_owned_fd(own, key, value)

    @classmethod
    def _from_owned_fd(cls, fd: _sys.Fd, key: Any, value: Any) -> "Map":
        try:
            info = _sys.map_info(fd)
        except BaseException:
            fd.close()
            raise
        target = map_class_for(info.type) if cls is Map else cls
        if target.map_type and info.type != target.map_type:
            fd.close()
            raise NotSupportedError(_errno.EINVAL, "Map.from_fd",
                                    f"the map is {enum_name(MapType, info.type)}, not "
                                    f"{enum_name(MapType, target.map_type)}",
                                    "open it with Map.from_fd / Map.from_pin to get the "
                                    "right class")
        return target._adopt(fd, info, key, value)

    @classmethod
    def from_pin(cls, path: str, key: Any = None, value: Any = None, *, flags: int = 0) -> "Map":
        """Open the map pinned at ``path`` (see :meth:`from_fd` for the codecs)."""
        m = cls._from_owned_fd(_sys.obj_get(path, flags=flags), key, value)
        m._pinned = path
        return m

    @classmethod
    def from_id(cls, map_id: int, key: Any = None, value: Any = None) -> "Map":
        """Open a map by its kernel id."""
        return cls._from_owned_fd(_sys.map_get_fd_by_id(map_id), key, value)

    # -- fd and lifetime -----------------------------------------------------
    @property
    def fd(self) -> int:
        """The map's fd number (what a program's ``ld_imm64 map`` needs)."""
        return self._fd.fileno()

    def fileno(self) -> int:
        """Same as :attr:`fd`."""
        return self._fd.fileno()

    def _close_resources(self) -> None:
        """Before the fd closes: no buffer set may use its number again."""
        self._invalidate()

    def _invalidate(self) -> None:
        pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"fd {self._fd._fd}"
        return (f"<{type(self).__name__} {self.name!r} key={self.key_codec and self.key_codec.label}"
                f" value={self.value_codec and self.value_codec.label} "
                f"max_entries={self.max_entries} ({state})>")

    # -- kernel-side facts ---------------------------------------------------
    def info(self) -> _sys.MapInfo:
        """BPF_OBJ_GET_INFO_BY_FD: id, type, sizes, flags, name."""
        return _sys.map_info(self._fd)

    @property
    def id(self) -> int:
        """The kernel's id of this map."""
        return self.info().id

    def pin(self, path: str) -> None:
        """Pin the map at ``path`` on bpffs (mounting /sys/fs/bpf if needed and root)."""
        _sys.obj_pin(path, self._fd)
        self._pinned = path

    def unpin(self, path: str | None = None) -> None:
        """Remove the pin (``path`` defaults to where :meth:`pin` put it)."""
        path = path or self._pinned
        if path is None:
            raise OptionError("this map was not pinned; pass the path to unpin")
        try:
            os.unlink(path)
        except OSError as exc:
            raise _sys.error_for(exc.errno or _errno.EIO, "unpin", path) from None
        if path == self._pinned:
            self._pinned = None

    @property
    def pinned(self) -> str | None:
        """Where this map was pinned by :meth:`pin` / found by :meth:`from_pin`."""
        return self._pinned

    def freeze(self) -> None:
        """BPF_MAP_FREEZE: from now on user space can only read the map."""
        _sys.map_freeze(self._fd)
        self._frozen = True

    @property
    def frozen(self) -> bool:
        """True after :meth:`freeze` on this object."""
        return self._frozen


# -------------------------------------------------------------------------
# dict-like maps

class _DictMap(Map, Generic[_K, _V]):
    """Maps with keys: lookup/update/delete, iteration, batch operations.

    To a type checker a map is generic in its key and value types, which
    default to ``Any`` (they follow from the codecs, at run time):
    ``counts: HashMap[int, int] = HashMap("u32", "u64")`` makes ``counts[k]`` an ``int``.
    """

    _default_chunk_bytes = 1 << 20

    def _init_common(self, fd: _sys.Fd, name: str, max_entries: int, flags: int) -> None:
        super()._init_common(fd, name, max_entries, flags)
        kc, vc = self.key_codec, self.value_codec
        assert kc is not None and vc is not None
        self._kpack = kc.pack_into
        self._vpack = vc.pack_into
        self._vunpack = vc.unpack_from
        self._kcast = kc._cast if isinstance(kc, StructCodec) else None
        self._vcast = vc._cast if isinstance(vc, StructCodec) else None
        # A pool of pre-allocated attr+buffer sets: each call takes one (deque
        # pop/append are atomic under the GIL), so threads never share buffers
        # and the hot path needs no lock.
        self._slots: list[_Slot] = []
        self._pool: collections.deque[_Slot] = collections.deque()
        self._pool.append(self._new_slot())

    def _new_slot(self) -> "_Slot":
        """Another attr+buffer set (made when several threads use the map at once)."""
        slot = _Slot(self.fd, self.key_size, self.value_codec.size)  # type: ignore[union-attr]
        slot.kview = memoryview(slot.key).cast(self._kcast) if self._kcast else None
        slot.vview = memoryview(slot.value).cast(self._vcast) if self._vcast else None
        self._slots.append(slot)
        return slot

    def _invalidate(self) -> None:
        for slot in getattr(self, "_slots", ()):
            slot.invalidate()

    # -- packing with clear errors -------------------------------------------
    def _pack_key(self, slot: "_Slot", key: Any) -> None:
        kv = slot.kview
        try:
            if kv is not None:
                kv[0] = key
            else:
                self._kpack(slot.key, 0, key)
        except (struct.error, ValueError, TypeError) as exc:
            if isinstance(exc, SizeError):
                raise
            raise self._size_error("key", key, self.key_codec, exc) from None

    def _pack_value(self, buf: _WBuf, offset: int, value: Any) -> None:
        try:
            self._vpack(buf, offset, value)
        except (struct.error, ValueError, TypeError) as exc:
            if isinstance(exc, SizeError):
                raise
            raise self._size_error("value", value, self.value_codec, exc) from None

    def _pack_key_at(self, buf: _WBuf, offset: int, key: Any) -> None:
        try:
            self._kpack(buf, offset, key)
        except (struct.error, ValueError, TypeError) as exc:
            if isinstance(exc, SizeError):
                raise
            raise self._size_error("key", key, self.key_codec, exc) from None

    def _size_error(self, role: str, v: Any, c: Codec | None, exc: BaseException) -> SizeError:
        assert c is not None      # a keyed map has both codecs
        if isinstance(c, StructCodec):
            err = c.error(v, exc, role)
            return SizeError(f"map {self.name!r}: {err}")
        return SizeError(f"map {self.name!r}: {role} {v!r} does not fit {c.label} "
                         f"({c.size} bytes): {exc}")

    #: arrays: keys must be below this (checked before the syscall)
    _max_index: int | None = None

    def _check_key(self, key: Any) -> None:
        """Refuse impossible keys before the syscall (arrays: the index range)."""
        mi = self._max_index
        if mi is not None and type(key) is int and not 0 <= key < mi:
            raise MapKeyError(f"index {key} is out of range for array map {self.name!r} "
                              f"(max_entries {mi})")

    def _take(self) -> "_Slot":
        try:
            return self._pool.pop()
        except IndexError:
            return self._new_slot()

    # -- single elements -----------------------------------------------------
    def __getitem__(self, key: _K) -> _V:
        pool = self._pool
        try:
            s = pool.pop()
        except IndexError:
            s = self._new_slot()
        try:
            kv = s.kview
            if kv is not None:
                try:
                    kv[0] = key
                except (ValueError, TypeError) as exc:
                    raise self._size_error("key", key, self.key_codec, exc) from None
            else:
                self._pack_key(s, key)
            if s.raw_bpf(*s.lookup_args) < 0 and not s.lookup_failed():
                raise MapKeyError(key)
            vv = s.vview
            value: _V = vv[0] if vv is not None else self._vunpack(s.value, 0)
            return value
        finally:
            pool.append(s)

    def get(self, key: _K, default: _D = None) -> _V | _D:  # type: ignore[assignment]
        """The value for ``key``, or ``default`` when absent."""
        try:
            return self[key]
        except MapKeyError:
            return default

    def __contains__(self, key: Any) -> bool:
        s = self._take()
        try:
            self._pack_key(s, key)
            return s.lookup()
        finally:
            self._pool.append(s)

    def __setitem__(self, key: _K, value: _V) -> None:
        self.set(key, value)

    def set(self, key: Any, value: Any, flags: int = BPF_ANY) -> None:
        """Store ``value`` under ``key``.

        ``flags``: BPF_ANY (default), BPF_NOEXIST (only create), BPF_EXIST
        (only replace: a missing key raises MapKeyError).
        """
        mi = self._max_index
        if mi is not None and type(key) is int and not 0 <= key < mi:
            self._check_key(key)
        pool = self._pool
        try:
            s = pool.pop()
        except IndexError:
            s = self._new_slot()
        try:
            kv = s.kview
            if kv is not None:
                try:
                    kv[0] = key
                except (ValueError, TypeError) as exc:
                    raise self._size_error("key", key, self.key_codec, exc) from None
            else:
                self._pack_key(s, key)
            vv = s.vview
            if vv is not None:
                try:
                    vv[0] = value
                except (ValueError, TypeError) as exc:
                    raise self._size_error("value", value, self.value_codec, exc) from None
            else:
                self._pack_value(s.value, 0, value)
            if flags != s.update_flags:
                s.set_update_flags(flags)
            if s.raw_bpf(*s.update_args) < 0 and not s.update_failed():
                raise MapKeyError(key)
        finally:
            pool.append(s)

    def __delitem__(self, key: Any) -> None:
        s = self._take()
        try:
            self._pack_key(s, key)
            if not s.delete():
                raise MapKeyError(key)
        finally:
            self._pool.append(s)

    def pop(self, key: Any, *default: Any) -> Any:
        """Remove ``key`` and return its value (``default`` if given and absent)."""
        s = self._take()
        try:
            self._pack_key(s, key)
            try:
                found = s.lookup_and_delete()
            except NotSupportedError:      # kernels before 5.14 for hash maps
                found = s.lookup()
                if found:
                    value = self._vunpack(s.value, 0)
                    s.delete()
                    return value
            if found:
                return self._vunpack(s.value, 0)
        finally:
            self._pool.append(s)
        if default:
            return default[0]
        raise MapKeyError(key)

    def setdefault(self, key: Any, default: Any) -> Any:
        """Insert ``default`` under ``key`` unless present; return the value there."""
        try:
            self.set(key, default, BPF_NOEXIST)
        except KernelError as exc:
            if exc.errno != _errno.EEXIST:
                raise
        return self[key]

    # -- iteration -------------------------------------------------------------
    def _chunk(self) -> int:
        per = self.key_size + self.value_codec.size  # type: ignore[union-attr]
        return max(1, min(self.max_entries, max(64, self._default_chunk_bytes // per)))

    def _batches(self, delete: bool = False) -> Iterator[tuple[_sys.BatchOps, int]]:
        """Yield ``(ops, n)`` chunks from BPF_MAP_LOOKUP(_AND_DELETE)_BATCH.

        Raises NotSupportedError (before yielding anything) if the kernel or
        the map type has no batch operations.
        """
        ops = _sys.BatchOps(self.fd, self.key_size, self.value_codec.size,  # type: ignore[union-attr]
                            self._chunk())
        first = True
        done = False
        while not done:
            n, done = ops.lookup(first, delete=delete)
            first = False
            if n:
                yield ops, n

    def _use_batch(self) -> bool:
        return _BATCH_SUPPORT.get(self.map_type) is not False

    def _batch_result(self, ok: bool) -> None:
        _BATCH_SUPPORT[self.map_type] = ok

    def _iter_items_slow(self) -> Iterator[tuple[Any, Any]]:
        ops = _sys.MapOps(self.fd, self.key_size, self.value_codec.size)  # type: ignore[union-attr]
        kc, vc = self.key_codec, self.value_codec
        first = True
        while ops.next(first):
            first = False
            ops.key[:] = ops.next_key
            if ops.lookup():
                yield kc.unpack_from(ops.key, 0), vc.unpack_from(ops.value, 0)  # type: ignore[union-attr]

    def _iter_keys_slow(self) -> Iterator[Any]:
        ops = _sys.MapOps(self.fd, self.key_size, self.value_codec.size)  # type: ignore[union-attr]
        kc = self.key_codec
        first = True
        while ops.next(first):
            first = False
            ops.key[:] = ops.next_key
            yield kc.unpack_from(ops.key, 0)  # type: ignore[union-attr]

    def _iter_chunks(self) -> Iterator[tuple[list[Any], list[Any]]]:
        """Yield ``(keys, values)`` lists chunk by chunk (batch or fallback)."""
        kc, vc = self.key_codec, self.value_codec
        if self._use_batch():
            try:
                for ops, n in self._batches():
                    yield kc.unpack_many(ops.keys, n), vc.unpack_many(ops.values, n)  # type: ignore[union-attr]
                self._batch_result(True)
                return
            except NotSupportedError:
                if _BATCH_SUPPORT.get(self.map_type):
                    raise
                self._batch_result(False)
        keys: list[Any] = []
        values: list[Any] = []
        for k, v in self._iter_items_slow():
            keys.append(k)
            values.append(v)
            if len(keys) >= 4096:
                yield keys, values
                keys, values = [], []
        if keys:
            yield keys, values

    def items(self) -> list[tuple[_K, _V]]:
        """A snapshot list of ``(key, value)`` pairs (BPF_MAP_LOOKUP_BATCH when available)."""
        out: list[tuple[_K, _V]] = []
        for ks, vs in self._iter_chunks():
            out.extend(zip(ks, vs))
        return out

    def keys(self) -> list[_K]:
        """A snapshot list of the keys."""
        out: list[_K] = []
        for ks, _ in self._iter_chunks():
            out.extend(ks)
        return out

    def values(self) -> list[_V]:
        """A snapshot list of the values."""
        out: list[_V] = []
        for _, vs in self._iter_chunks():
            out.extend(vs)
        return out

    def __iter__(self) -> Iterator[_K]:
        for ks, _ in self._iter_chunks():
            yield from ks

    def __len__(self) -> int:
        """The number of entries (counted by iterating the map)."""
        return sum(len(ks) for ks, _ in self._iter_chunks())

    def __bool__(self) -> bool:
        return True

    def to_dict(self) -> dict[_K, _V]:
        """A snapshot ``dict`` of the map (keys must be hashable)."""
        return dict(self.items())

    # -- bulk writes -----------------------------------------------------------
    def update(self, other: "Mapping[Any, Any] | Iterable[tuple[Any, Any]]" = (),
               flags: int = BPF_ANY, **kw: Any) -> None:
        """Store many entries with BPF_MAP_UPDATE_BATCH (per-element when unavailable)."""
        if kw:
            raise OptionError("map keys are not strings; pass a mapping")
        items = list(other.items() if isinstance(other, Mapping) else other)
        if not items:
            return
        for k, _ in items:
            self._check_key(k)
        if self._use_batch():
            ks, vs = self.key_size, self.value_codec.size  # type: ignore[union-attr]
            chunk = self._chunk()
            ops = _sys.BatchOps(self.fd, ks, vs, min(chunk, len(items)))
            for start in range(0, len(items), ops.count):
                part = items[start:start + ops.count]
                for i, (k, v) in enumerate(part):
                    self._pack_key_at(ops.keys, i * ks, k)
                    self._pack_value(ops.values, i * vs, v)
                try:
                    ops.update(len(part), flags)
                except NotSupportedError:
                    if start or _BATCH_SUPPORT.get(self.map_type):
                        raise
                    self._batch_result(False)
                    break
            else:
                return
        for k, v in items:
            self.set(k, v, flags)

    def clear(self) -> None:
        """Delete every entry (BPF_MAP_LOOKUP_AND_DELETE_BATCH when available)."""
        if self._use_batch():
            try:
                for _ in self._batches(delete=True):
                    pass
                return
            except NotSupportedError:
                pass                     # e.g. LOOKUP_AND_DELETE_BATCH missing: go slow
        ops = _sys.MapOps(self.fd, self.key_size, self.value_codec.size)  # type: ignore[union-attr]
        while ops.next(True):
            ops.key[:] = ops.next_key
            ops.delete()


class HashMap(_DictMap[_K, _V]):
    """BPF_MAP_TYPE_HASH: ``HashMap(key, value, max_entries=1024, *, name=None, flags=0)``."""

    map_type = MapType.HASH
    _prefix = "hash"

    def __init__(self, key: Any, value: Any, max_entries: int = 1024, *,
                 name: str | None = None, flags: int = 0, numa_node: int | None = None) -> None:
        super().__init__(key, value, max_entries, name=name, flags=flags, numa_node=numa_node)


class LruHashMap(HashMap[_K, _V]):
    """BPF_MAP_TYPE_LRU_HASH: a hash that evicts the least recently used entry when full."""

    map_type = MapType.LRU_HASH
    _prefix = "lru_hash"


class _ArrayMixin(_DictMap):
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


class ArrayMap(_ArrayMixin):
    """BPF_MAP_TYPE_ARRAY: ``ArrayMap(value, max_entries, *, name=None, flags=0)``.

    Keys are indexes ``0 <= i < max_entries``; every element exists (zero at
    first) and cannot be deleted; ``len()`` is ``max_entries``.
    """

    map_type = MapType.ARRAY
    _prefix = "array"

    def __init__(self, value: Any, max_entries: int, *, name: str | None = None,
                 flags: int = 0, numa_node: int | None = None) -> None:
        super().__init__(self._KEY, value, max_entries, name=name, flags=flags,
                         numa_node=numa_node)


class _PerCpuMixin(_DictMap):
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

    def sum(self, key: Any) -> Any:
        """The sum of ``key``'s per-CPU values (numbers only)."""
        return sum(self[key])


class PerCpuHashMap(_PerCpuMixin, HashMap):
    """BPF_MAP_TYPE_PERCPU_HASH: values are lists, one per possible CPU."""

    map_type = MapType.PERCPU_HASH
    _prefix = "percpu_hash"


class LruPerCpuHashMap(_PerCpuMixin, HashMap):
    """BPF_MAP_TYPE_LRU_PERCPU_HASH."""

    map_type = MapType.LRU_PERCPU_HASH
    _prefix = "lru_percpu_hash"


class PerCpuArrayMap(_PerCpuMixin, ArrayMap):
    """BPF_MAP_TYPE_PERCPU_ARRAY: values are lists, one per possible CPU."""

    map_type = MapType.PERCPU_ARRAY
    _prefix = "percpu_array"


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

class _QueueLike(Map):
    """Maps without keys: push / pop / peek."""

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

    def push(self, value: Any, overwrite: bool = False) -> None:
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

    def pop(self, *default: Any) -> Any:
        """Remove and return the next element (``default`` if given and empty)."""
        with self._lock:
            if self._ops.lookup_and_delete():
                return self.value_codec.unpack_from(self._ops.value, 0)  # type: ignore[union-attr]
        if default:
            return default[0]
        raise MapKeyError(f"{self._what} {self.name!r} is empty")

    def peek(self, *default: Any) -> Any:
        """Return the next element without removing it."""
        with self._lock:
            if self._ops.lookup():
                return self.value_codec.unpack_from(self._ops.value, 0)  # type: ignore[union-attr]
        if default:
            return default[0]
        raise MapKeyError(f"{self._what} {self.name!r} is empty")

    def drain(self) -> list[Any]:
        """Pop everything, in pop order."""
        out = []
        sentinel = object()
        while (v := self.pop(sentinel)) is not sentinel:
            out.append(v)
        return out

    _what = "queue"


class QueueMap(_QueueLike):
    """BPF_MAP_TYPE_QUEUE (FIFO): ``QueueMap(value, max_entries)``."""

    map_type = MapType.QUEUE
    _prefix = "queue"
    _what = "queue"


class StackMap(_QueueLike):
    """BPF_MAP_TYPE_STACK (LIFO): ``StackMap(value, max_entries)``."""

    map_type = MapType.STACK
    _prefix = "stack"
    _what = "stack"


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
