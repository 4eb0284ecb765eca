"""Maps with keys (:class:`_DictMap`): one element at a time through a pool
of pre-allocated attr+buffer sets, and many at once through the batch
commands (falling back to element by element where a kernel or map type
has none).

Part of :mod:`pyebpf.maps`, which re-exports every public name.
"""
from __future__ import annotations

import collections
import errno as _errno
import struct
from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Iterator, TypeVar, overload

    #: a buffer a codec writes into
    _WBuf = bytearray | memoryview

# Keyed maps are generic in (key, value) to type checkers: ``HashMap[int, int]``;
# at run time the subscript gives the class back (codecs.Generic), and typing
# is not imported.
if TYPE_CHECKING:
    from typing import Generic

    from typing_extensions import TypeVar as _TypeVarWithDefault

    _K = _TypeVarWithDefault("_K", default=Any)
    _V = _TypeVarWithDefault("_V", default=Any)
    _D = TypeVar("_D")
else:
    from ..codecs import Generic

    _K = _V = None

from ..codecs import Codec, StructCodec
from ..errors import KernelError, MapKeyError, NotSupportedError, OptionError, SizeError
from ..kernel import syscall as _sys
from ..kernel.constants import BPF_ANY, BPF_NOEXIST
from .base import Map

#: (nothing public: the map classes of :mod:`.kinds` derive from ``_DictMap``)
__all__: list[str] = []


class _Slot(_sys.MapOps):
    """MapOps plus typed views of its buffers for one-number keys/values."""

    __slots__ = ("kview", "vview")
    # views whose one item is the key / value (int or float, as the codec decodes)
    kview: memoryview[Any] | None
    vview: memoryview[Any] | None


#: map type -> whether BPF_MAP_*_BATCH works for it on this kernel (learned at run time)
_BATCH_SUPPORT: dict[int, bool] = {}


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
    def _keyed(self, key: Any) -> "_Slot":
        """A slot taken from the pool with ``key`` packed in it; the caller
        puts it back (``self._pool.append(slot)``).  A key that does not fit
        raises a SizeError naming the map (the slot back in the pool).

        The hot path: the pool's pop and the key's packing written out (a
        method call each is a measurable share of a lookup)."""
        pool = self._pool
        try:
            s = pool.pop()
        except IndexError:
            s = self._new_slot()
        kv = s.kview
        try:
            if kv is not None:
                kv[0] = key
            else:
                self._kpack(s.key, 0, key)
        except (struct.error, ValueError, TypeError) as exc:
            pool.append(s)
            if isinstance(exc, SizeError):
                raise
            raise self._size_error("key", key, self.key_codec, exc) from None
        return s

    def _pack_at(self, role: str, buf: _WBuf, offset: int, v: Any) -> None:
        """Pack ``v``, a key or a value (``role``), into ``buf`` at ``offset``
        (a SizeError naming the map when it does not fit)."""
        key = role == "key"
        try:
            (self._kpack if key else self._vpack)(buf, offset, v)
        except (struct.error, ValueError, TypeError) as exc:
            if isinstance(exc, SizeError):
                raise
            raise self._size_error(role, v, self.key_codec if key else self.value_codec,
                                   exc) from None

    def _size_error(self, role: str, v: Any, c: Codec | None, exc: BaseException) -> SizeError:
        assert c is not None      # a keyed map has both codecs
        if role == "key":
            self._check_key(v)    # an array's negative index: out of range, as writes say
        if isinstance(c, StructCodec):
            err = c.error(v, exc, role)
            return type(err)(f"map {self.name!r}: {err}")
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
        s = self._keyed(key)
        try:
            if s.raw_bpf(*s.lookup_args) < 0 and not s.lookup_failed():
                self._check_key(key)         # an array's index out of range says so
                raise MapKeyError(key)
            vv = s.vview
            value: _V = vv[0] if vv is not None else self._vunpack(s.value, 0)
            return value
        finally:
            self._pool.append(s)

    if TYPE_CHECKING:
        @overload
        def get(self, key: _K) -> _V | None: ...
        @overload
        def get(self, key: _K, default: _D) -> _V | _D: ...

    def get(self, key: _K, default: Any = None) -> Any:
        """The value for ``key``, or ``default`` when absent."""
        try:
            return self[key]
        except MapKeyError:
            return default

    def __contains__(self, key: Any) -> bool:
        s = self._keyed(key)
        try:
            return s.lookup()
        finally:
            self._pool.append(s)

    def set(self, key: Any, value: Any, flags: int = BPF_ANY) -> None:
        """Store ``value`` under ``key``.

        ``flags``: BPF_ANY (default), BPF_NOEXIST (only create), BPF_EXIST
        (only replace: a missing key raises MapKeyError).
        """
        mi = self._max_index
        if mi is not None and type(key) is int and not 0 <= key < mi:
            self._check_key(key)
        s = self._keyed(key)
        try:
            vv = s.vview
            if vv is not None:
                try:
                    vv[0] = value
                except (ValueError, TypeError) as exc:
                    raise self._size_error("value", value, self.value_codec, exc) from None
            else:
                self._pack_at("value", s.value, 0, value)
            if flags != s.update_flags:
                s.set_update_flags(flags)
            if s.raw_bpf(*s.update_args) < 0 and not s.update_failed():
                raise MapKeyError(key)
        finally:
            self._pool.append(s)

    # m[k] = v is set() itself (one call less on the hot path); typed as the
    # map's key and value types for a checker
    if TYPE_CHECKING:
        def __setitem__(self, key: _K, value: _V) -> None: ...
    else:
        __setitem__ = set

    def __delitem__(self, key: Any) -> None:
        s = self._keyed(key)
        try:
            if not s.delete():
                raise MapKeyError(key)
        finally:
            self._pool.append(s)

    if TYPE_CHECKING:
        @overload
        def pop(self, key: _K, /) -> _V: ...
        @overload
        def pop(self, key: _K, default: _D, /) -> _V | _D: ...

    def pop(self, key: Any, *default: Any) -> Any:
        """Remove ``key`` and return its value (``default`` if given and absent)."""
        s = self._keyed(key)
        try:
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

    def setdefault(self, key: _K, default: _V) -> _V:
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
                    self._pack_at("key", ops.keys, i * ks, k)
                    self._pack_at("value", ops.values, i * vs, v)
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
