"""In-VM maps: the same shapes as the kernel's, kept in Python.

:class:`VmMap` is built from anything that describes a map the way
:class:`pyebpf.maps.MapSpec` and the map classes do (``map_type``,
``key_size``, ``value_size``, ``max_entries``, ``name``, and optionally
``key_codec``/``value_codec``), so the spec a program was built with runs it
in the VM too: ``Vm(prog, maps={"counts": spec})``.

Kinds emulated: hash, array, their per-CPU and LRU variants, ring buffers and
perf event arrays, and program arrays (for tail calls).

Events reach the same reader classes as the kernel's: a ring buffer map holds
a ring laid out as the kernel's (:mod:`pyebpf.vm.rings`), which
``RingBufferReader(vm.maps["rb"])`` drains; ``PerfBuffer(vm.maps["events"])``
puts a perf ring in memory in each CPU's slot, and ``bpf_perf_event_output``
writes there -- with the kernel's record layout, errnos and lost counts.
:attr:`VmMap.records` shows what is waiting (for perf event arrays: what was
output while no reader held the slot).
"""
from __future__ import annotations

from ..errors import MapKeyError, OptionError, SizeError
from ..kernel.constants import MapType, enum_name
from .rings import MemoryRingBuf

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator

EEXIST, ENOENT, E2BIG, EINVAL, EOPNOTSUPP = 17, 2, 7, 22, 95
BPF_F_INDEX_MASK = 0xFFFFFFFF
BPF_ANY, BPF_NOEXIST, BPF_EXIST = 0, 1, 2

_HASHES = {MapType.HASH, MapType.PERCPU_HASH, MapType.LRU_HASH, MapType.LRU_PERCPU_HASH}
_ARRAYS = {MapType.ARRAY, MapType.PERCPU_ARRAY}
_PERCPU = {MapType.PERCPU_HASH, MapType.PERCPU_ARRAY, MapType.LRU_PERCPU_HASH}
_LRU = {MapType.LRU_HASH, MapType.LRU_PERCPU_HASH}
_EVENTS = {MapType.RINGBUF, MapType.PERF_EVENT_ARRAY}
SUPPORTED = _HASHES | _ARRAYS | _EVENTS | {MapType.PROG_ARRAY}


class VmMap:
    """A map held by the VM.

    Values live as ``bytearray`` objects (one per CPU for per-CPU kinds), so
    a pointer a lookup returned keeps reading and writing the live value, as
    in the kernel.  From Python: ``m[key]`` / ``m[key] = value`` / ``del
    m[key]`` / ``m.items()`` with the map's codecs (raw bytes without them);
    per-CPU kinds give and take one value per CPU.
    """

    def __init__(self, map_type: int, key_size: int = 4, value_size: int = 8,
                 max_entries: int = 1, name: str = "", *, key_codec: Any = None,
                 value_codec: Any = None, ncpus: int = 1) -> None:
        if map_type not in SUPPORTED:
            raise OptionError(f"map {name!r}: the VM does not emulate map type {map_type} "
                              f"({enum_name(MapType, map_type)}); "
                              "it has hash, array, their per-CPU and LRU kinds, ring buffers, "
                              "perf event arrays and program arrays")
        self.map_type = map_type
        self.key_size = key_size
        self.value_size = value_size
        self.max_entries = max_entries
        self.name = name
        self.key_codec = key_codec
        self.value_codec = value_codec
        self.ncpus = ncpus if map_type in _PERCPU else 1
        self._data: dict[bytes, list[bytearray]] = {}
        self._records: list[tuple[int, bytes]] = []
        #: a ring buffer's ring, laid out as the kernel's (what ``RingBufferReader(this)`` reads)
        self.ring: MemoryRingBuf | None = None
        #: a perf event array's rings by CPU, put there by ``PerfBuffer(this)`` (else None):
        #: :class:`pyebpf.events.memring.MemoryPerfRing` objects (``output(data) -> 0/-errno``)
        self.perf_rings: dict[int, Any] | None = None
        if map_type == MapType.RINGBUF:
            try:
                self.ring = MemoryRingBuf(max_entries)
            except SizeError as exc:
                raise OptionError(f"map {name!r}: {exc}") from None
        elif map_type == MapType.PERF_EVENT_ARRAY:
            self.perf_rings = {}
        #: program array: index -> program (a Program, instructions or bytes)
        self.programs: dict[int, Any] = {}

    @classmethod
    def of(cls, spec: Any, ncpus: int = 1) -> "VmMap":
        """``spec`` itself if it is a VmMap, else a new VmMap of its shape
        (a :class:`~pyebpf.maps.MapSpec`, a map object or a map class instance)."""
        if isinstance(spec, VmMap):
            return spec
        try:
            value_codec = getattr(spec, "value_codec", None)
            if int(spec.map_type) in _PERCPU:            # the codec of one CPU's value
                value_codec = getattr(value_codec, "elem", value_codec)
            return cls(int(spec.map_type), spec.key_size, spec.value_size, spec.max_entries,
                       getattr(spec, "name", "") or "", key_codec=getattr(spec, "key_codec", None),
                       value_codec=value_codec, ncpus=ncpus)
        except AttributeError as exc:
            raise OptionError(f"{spec!r} does not describe a map (it needs map_type, key_size, "
                              f"value_size and max_entries): {exc}") from None

    @property
    def records(self) -> list[Any]:
        """What programs output and no reader consumed yet: a ring buffer's
        records (bytes); a perf event array's ``(cpu, bytes)`` outputs made
        while no :class:`~pyebpf.events.PerfBuffer` held the CPU's slot."""
        if self.ring is not None:
            return self.ring.records()
        return self._records

    def perf_output(self, flags: int, data: bytes, cpu: int) -> int:
        """``bpf_perf_event_output``'s write from ``cpu``: 0 or a negative errno
        as the kernel's.  With a reader's rings in place, the slot
        ``flags & 0xffffffff`` (``BPF_F_CURRENT_CPU``: ``cpu``) must hold the
        ring of ``cpu``; without any, the output joins :attr:`records`."""
        index = flags & BPF_F_INDEX_MASK
        if flags >> 32:
            return -EINVAL
        if index == BPF_F_INDEX_MASK:
            index = cpu
        if not self.perf_rings:
            self._records.append((index, data))
            return 0
        if index >= self.max_entries:
            return -E2BIG
        ring = self.perf_rings.get(index)
        if ring is None:
            return -ENOENT
        if index != cpu:
            return -EOPNOTSUPP              # the event in that slot is another CPU's
        return int(ring.output(data))

    # ------------------------------------------------------------ what helpers call
    @property
    def is_array(self) -> bool:
        """True for array kinds (keys are u32 indexes, every entry exists)."""
        return self.map_type in _ARRAYS

    def _index(self, key: bytes) -> int | None:
        idx = int.from_bytes(key[:4], "little")
        return idx if idx < self.max_entries else None

    def lookup(self, key: bytes, cpu: int = 0) -> bytearray | None:
        """The live value of ``key`` (this CPU's for per-CPU kinds), or None."""
        vals = self._data.get(key)
        if vals is None:
            if not self.is_array or self._index(key) is None:
                return None
            vals = self._data[key] = [bytearray(self.value_size) for _ in range(self.ncpus)]
        elif self.map_type in _LRU:
            self._data[key] = self._data.pop(key)     # most recently used goes last
        return vals[cpu % self.ncpus]

    def update(self, key: bytes, value: bytes, flags: int = BPF_ANY, cpu: int | None = None) -> int:
        """Store ``value`` under ``key``; 0 or a negative errno as the kernel's helper."""
        if flags & 3 == 3:
            return -EINVAL
        exists = key in self._data
        if self.is_array:
            if self._index(key) is None:
                return -E2BIG
            if flags & 3 == BPF_NOEXIST:
                return -EEXIST
        elif flags & 3 == BPF_NOEXIST and exists:
            return -EEXIST
        elif flags & 3 == BPF_EXIST and not exists:
            return -ENOENT
        if not exists and not self.is_array and len(self._data) >= self.max_entries:
            if self.map_type not in _LRU:
                return -E2BIG
            del self._data[next(iter(self._data))]      # evict the least recently used
        vals = self._data.get(key)
        if vals is None:
            vals = self._data[key] = [bytearray(self.value_size) for _ in range(self.ncpus)]
        elif self.map_type in _LRU:
            self._data[key] = self._data.pop(key)
        targets = vals if cpu is None else [vals[cpu % self.ncpus]]
        for buf in targets:
            buf[:] = value
        return 0

    def delete(self, key: bytes) -> int:
        """Remove ``key``; 0 or a negative errno."""
        if self.is_array:
            return -EINVAL
        if self._data.pop(key, None) is None:
            return -ENOENT
        return 0

    # ------------------------------------------------------------ Python's view
    def _key(self, key: Any) -> bytes:
        if isinstance(key, (bytes, bytearray)):
            return bytes(key)
        if self.key_codec is not None:
            return bytes(self.key_codec.encode(key))
        if isinstance(key, int):
            return key.to_bytes(self.key_size, "little")
        raise OptionError(f"map {self.name!r}: key {key!r} is neither bytes nor an int")

    def _value(self, value: Any) -> bytes:
        if isinstance(value, (bytes, bytearray)):
            data = bytes(value)
        elif self.value_codec is not None:
            data = bytes(self.value_codec.encode(value))
        elif isinstance(value, int):
            data = (value & ((1 << (8 * self.value_size)) - 1)).to_bytes(self.value_size, "little")
        else:
            raise OptionError(f"map {self.name!r}: value {value!r} is neither bytes nor an int")
        if len(data) != self.value_size:
            raise OptionError(f"map {self.name!r}: a value is {self.value_size} bytes, not {len(data)}")
        return data

    def _show(self, buf: bytearray) -> Any:
        if self.value_codec is not None:
            return self.value_codec.decode(bytes(buf))
        return bytes(buf)

    def __getitem__(self, key: Any) -> Any:
        k = self._key(key)
        if k not in self._data and not (self.is_array and self._index(k) is not None):
            raise MapKeyError(key)
        self.lookup(k)
        vals = self._data[k]
        if self.ncpus > 1 or self.map_type in _PERCPU:
            return [self._show(v) for v in vals]
        return self._show(vals[0])

    def __setitem__(self, key: Any, value: Any) -> None:
        k = self._key(key)
        if self.map_type in _PERCPU and isinstance(value, (list, tuple)):
            for cpu, v in enumerate(value):
                err = self.update(k, self._value(v), cpu=cpu)
        else:
            err = self.update(k, self._value(value))
        if err:
            raise OptionError(f"map {self.name!r}: cannot store key {key!r} (errno {-err})")

    def __delitem__(self, key: Any) -> None:
        if self.delete(self._key(key)):
            raise MapKeyError(key)

    def __contains__(self, key: Any) -> bool:
        return self._key(key) in self._data

    def __len__(self) -> int:
        return len(self._data)

    def items(self) -> Iterator[tuple[Any, Any]]:
        """(key, value) pairs of the entries that exist (arrays: those touched)."""
        for k in list(self._data):
            key = self.key_codec.decode(k) if self.key_codec is not None else k
            yield key, self[k]

    def clear(self) -> None:
        """Remove every entry and record (a ring buffer's are consumed)."""
        self._data.clear()
        self._records.clear()
        if self.ring is not None:
            self.ring.skip()

    def __repr__(self) -> str:
        return (f"<VmMap {enum_name(MapType, self.map_type)} {self.name!r}: key {self.key_size}, "
                f"value {self.value_size}, max_entries {self.max_entries}, {len(self._data)} entries>")
