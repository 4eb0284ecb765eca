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

Hash and array maps (per-CPU and LRU too) carry BTF describing their keys
and values -- integers, ``Bytes``/strings as ``char[n]``, struct formats as
``f0, f1, ...``, ctypes records with their field names -- so ``bpftool map
dump`` shows them structured (``btf=False`` or ``PYEBPF_BTF=0``: without).

Per-CPU maps hold one value per *possible* CPU: reading gives a list,
writing takes a list of that length (or a single value for every CPU).

To a type checker a map is generic in its key and value types, inferred
from specs whose type is known: ``HashMap("u32", "u64")`` is a
``HashMap[int, int]``, ``HashMap(Bytes(16), Conn)`` (a ctypes Structure) a
``HashMap[bytes, Conn]``, ``PerCpuArrayMap("u64", 1)`` a
``PerCpuArrayMap[list[int]]``, ``QueueMap("u32", 8)`` a ``QueueMap[int]``.
A struct format is a plain string: its map is ``HashMap[Any, Any]`` unless
annotated (``pairs: HashMap[int, tuple[int, int]] = HashMap("u32", "<QI")``).

Wrong key/value sizes, and shapes beyond the kernel's limits (sizes and
``max_entries`` are u32, a per-CPU value is at most 32 KiB, a ring buffer at
most 2 GiB), raise :class:`~pyebpf.errors.SizeError` before any system call
(:func:`check_map_shape`); :class:`MapSpec` describes a map without creating it; a missing key raises :class:`~pyebpf.errors.MapKeyError` (a
``KeyError``).
"""
from __future__ import annotations

from ..codecs import Bytes, BytesCodec, Codec, CtypesCodec, StructCodec, codec
from .base import (PERCPU_VALUE_MAX, RINGBUF_MAX, U32_MAX, Map, MapSpec, check_map_shape,
                   perf_ring_size, ring_buffer_size)
from .dictmap import _BATCH_SUPPORT  # (what batch commands each map type has: tests set it)
from .kinds import (ArrayMap, HashMap, LruHashMap, LruPerCpuHashMap, PerCpuArrayMap,
                    PerCpuCodec, PerCpuHashMap, PerfEventArray, QueueMap, RingBuf, StackMap,
                    StackTraceMap, map_class_for)

__all__ = [
    "Codec", "StructCodec", "BytesCodec", "CtypesCodec", "PerCpuCodec", "Bytes", "codec",
    "Map", "HashMap", "ArrayMap", "PerCpuHashMap", "PerCpuArrayMap", "LruHashMap",
    "LruPerCpuHashMap", "PerfEventArray", "RingBuf", "StackTraceMap", "QueueMap",
    "StackMap", "map_class_for", "MapSpec", "check_map_shape", "ring_buffer_size",
    "perf_ring_size", "U32_MAX", "PERCPU_VALUE_MAX", "RINGBUF_MAX",
]
