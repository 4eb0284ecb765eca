"""The base of every map (:class:`Map`: the fd, its lifetime, opening by fd,
pin or id, info, pinning, freezing), the kernel's limits on a map's shape,
and :class:`MapSpec` (a map described, not created).

Part of :mod:`pyebpf.maps`, which re-exports every public name.
"""
from __future__ import annotations

import errno as _errno
import fcntl
import itertools
import os
from _thread import allocate_lock as _allocate_lock

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar, Generic, TypeVar

    from typing_extensions import TypeVar as _TypeVarWithDefault

    M = TypeVar("M", bound="Map")
    #: the class a :class:`MapSpec` describes (``MapSpec``: a ``Map``)
    _MS = _TypeVarWithDefault("_MS", bound="Map", default="Map", covariant=True)
else:
    from ..codecs import Generic

    _MS = None

from ..codecs import Codec, codec, default_codec as _default_codec
from ..errors import MapError, NotSupportedError, OptionError, SizeError
from ..kernel import syscall as _sys
from ..kernel.constants import BPF_F_RDONLY, BPF_F_WRONLY, MapType, enum_name
from ..kernel.lifetime import FdOwner

__all__ = ["Map", "MapSpec", "check_map_shape", "ring_buffer_size", "perf_ring_size",
           "U32_MAX", "PERCPU_VALUE_MAX", "RINGBUF_MAX", "BTF_MAP_TYPES"]


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


class MapSpec(Generic[_MS]):
    """A map described but not created: the name, type and shape a program
    needs to refer to it (:meth:`Program.ld_map <pyebpf.program.dsl.InstructionBuilder.ld_map>`
    takes it), with every check a real map makes before its system call.
    ``create()`` makes the map in the kernel.  Showing a program built on
    specs needs no privilege and allocates nothing in the kernel.

    ``MapSpec(PerCpuArrayMap, "u64", 100, name="hist")`` takes the class and
    the arguments the class takes.  To a type checker it is generic in the
    map it describes: ``MapSpec(RingBuf, 4096).create()`` is a ``RingBuf``.
    """

    def __init__(self, cls: type[_MS], *args: Any, **kw: Any) -> None:
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

    def create(self) -> _MS:
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


# Maps: BTF for their keys and values

#: the map types created with BTF describing their keys and values (the
#: kernel refuses it for the others: ENOTSUPP for perf event arrays and stack
#: traces, EINVAL without a key type for queues and stacks; ring buffers have none)
BTF_MAP_TYPES = frozenset((MapType.HASH, MapType.ARRAY, MapType.PERCPU_HASH,
                           MapType.PERCPU_ARRAY, MapType.LRU_HASH, MapType.LRU_PERCPU_HASH))


def _create_typed(map_type: int, kc: Codec | None, vc: Codec, key_size: int, value_size: int,
                  max_entries: int, kw: dict[str, Any]) -> _sys.Fd:
    """BPF_MAP_CREATE with BTF describing the key and value codecs
    (:func:`pyebpf.btf.own.map_btf`); without it when BTF is off
    (``PYEBPF_BTF=0``) or the kernel refuses it (said once per map type)."""
    from ..kernel import btf as _kbtf
    if not _kbtf.own_btf_enabled() or _kbtf.refused(map_type):
        return _sys.map_create(map_type, key_size, value_size, max_entries, **kw)
    from ..btf.own import map_btf
    try:
        blob, key_id, value_id = map_btf(kc, vc)
    except Exception as exc:     # noqa: BLE001 - optional: a fault here must not cost the map
        _kbtf.btf_refused("maps", "pyebpf could not describe a map's types (a bug)", exc)
        return _sys.map_create(map_type, key_size, value_size, max_entries, **kw)
    btf = _kbtf.optional_btf(blob)
    if btf is None:
        return _sys.map_create(map_type, key_size, value_size, max_entries, **kw)
    try:
        try:
            return _sys.map_create(map_type, key_size, value_size, max_entries,
                                   btf_fd=btf.fileno(), btf_key_type_id=key_id,
                                   btf_value_type_id=value_id, **kw)
        except OSError as with_btf:
            # the map's own error (if any) is what a creation without BTF raises
            fd = _sys.map_create(map_type, key_size, value_size, max_entries, **kw)
            _kbtf.btf_refused(map_type, "the kernel refused the BTF of "
                              f"{enum_name(MapType, map_type)} maps", with_btf)
            return fd
    finally:
        btf.close()              # the map holds the BTF now


class _CreatedShape:
    """What :meth:`Map._adopt` reads of a :class:`~pyebpf.kernel.MapInfo`, for a
    map this process created: the kernel keeps the creation arguments, but
    names are cut and sanitised (:func:`~pyebpf.kernel.core.obj_name`) and the
    fd-only access flags (BPF_F_RDONLY/WRONLY) are not the map's."""

    __slots__ = ("type", "key_size", "value_size", "max_entries", "flags", "name")

    def __init__(self, map_type: int, key_size: int, value_size: int, max_entries: int,
                 flags: int, name: str) -> None:
        from ..kernel.core import obj_name
        self.type = map_type
        self.key_size = key_size
        self.value_size = value_size
        self.max_entries = max_entries
        self.flags = flags & ~(BPF_F_RDONLY | BPF_F_WRONLY)
        self.name = obj_name(name).decode()


_name_counter = itertools.count(1)


def _auto_name(prefix: str) -> str:
    return f"{prefix}_{next(_name_counter)}"


class Map(FdOwner):
    """Base of every map: owns the fd and knows the map's shape.

    Hash and array maps (and their per-CPU and LRU kinds) are created with
    BTF describing their keys and values (:func:`pyebpf.btf.own.map_btf`), so
    ``bpftool map dump`` shows them structured; ``btf=False`` (or
    ``PYEBPF_BTF=0``) creates them without, and so does a kernel that
    refuses it (a :class:`~pyebpf.errors.BtfWarning`, once).

    Its lifetime is an :class:`~pyebpf.kernel.lifetime.FdOwner`'s: ``close()``
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
                 inner_map_fd: int = 0, btf: bool = True) -> None:
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
        kw: dict[str, Any] = dict(flags=flags, name=name, numa_node=numa_node,
                                  map_extra=map_extra, inner_map_fd=inner_map_fd)
        if btf and vc is not None and self.map_type in BTF_MAP_TYPES:
            fd = _create_typed(self.map_type, kc, vc, self.key_size, self.value_size,
                               max_entries, kw)
        else:
            fd = _sys.map_create(self.map_type, self.key_size, self.value_size, max_entries, **kw)
        self._init_common(fd, name, max_entries, flags)

    # -- construction helpers ------------------------------------------------
    def _setup_codecs(self, kc: Codec | None, vc: Codec | None) -> None:
        self.key_codec = kc
        self.value_codec = vc
        self.key_size = kc.size if kc else 0
        self.value_size = vc.size if vc else 0

    def _init_common(self, fd: _sys.Fd, name: str, max_entries: int, flags: int) -> None:
        self._own_fd(fd)
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
    def from_fd(cls: type[M], fd: "int | _sys.Fd", key: Any = None, value: Any = None) -> M:
        """Wrap an existing map fd (duplicated: the caller keeps its own fd).

        Called on :class:`Map` itself, returns the subclass for the map's type
        (to a type checker, the class it is called on: ``HashMap.from_fd(fd)``
        is a ``HashMap``).
        ``key``/``value`` default to unsigned ints (sizes 1/2/4/8) or raw bytes.
        """
        num = fd if isinstance(fd, int) else fd.fileno()
        own = _sys.Fd(fcntl.fcntl(num, fcntl.F_DUPFD_CLOEXEC, 1))
        return cls._from_owned_fd(own, key, value)

    @classmethod
    def _from_owned_fd(cls: type[M], fd: _sys.Fd, key: Any, value: Any) -> M:
        try:
            info = _sys.map_info(fd)
        except BaseException:
            fd.close()
            raise
        from .kinds import map_class_for
        target = map_class_for(info.type) if cls is Map else cls
        if target.map_type and info.type != target.map_type:
            fd.close()
            raise NotSupportedError(_errno.EINVAL, "Map.from_fd",
                                    f"the map is {enum_name(MapType, info.type)}, not "
                                    f"{enum_name(MapType, target.map_type)}",
                                    "open it with Map.from_fd / Map.from_pin to get the "
                                    "right class")
        # (target is cls, or on Map itself the class of the map's type)
        return target._adopt(fd, info, key, value)  # type: ignore[return-value]

    @classmethod
    def _from_created_fd(cls, fd: _sys.Fd, map_type: int, key_size: int, value_size: int,
                         max_entries: int, flags: int, name: str) -> "Map":
        """Wrap the fd of a map this process has just created with these
        arguments (``flags`` as passed to BPF_MAP_CREATE, NUMA bit included):
        the shape the kernel would report, without asking it
        (BPF_OBJ_GET_INFO_BY_FD), of the class for the map type (as
        ``Map.from_fd`` gives).  A map type pyebpf has no class for raises
        :class:`~pyebpf.errors.NotSupportedError` and leaves ``fd`` open."""
        from .kinds import map_class_for
        target = map_class_for(map_type)
        shape = _CreatedShape(map_type, key_size, value_size, max_entries, flags, name)
        return target._adopt(fd, shape, None, None)  # type: ignore[arg-type]

    @classmethod
    def from_pin(cls: type[M], path: str, key: Any = None, value: Any = None, *,
                 flags: int = 0) -> M:
        """Open the map pinned at ``path`` (see :meth:`from_fd` for the codecs)."""
        m = cls._from_owned_fd(_sys.obj_get(path, flags=flags), key, value)
        m._pinned = path
        return m

    @classmethod
    def from_id(cls: type[M], map_id: int, key: Any = None, value: Any = None) -> M:
        """Open a map by its kernel id."""
        return cls._from_owned_fd(_sys.map_get_fd_by_id(map_id), key, value)

    # -- lifetime (fd, fileno(), close(), with: an FdOwner's) ------------------
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
