"""In-kernel aggregations: counts, sum/min/max/avg, log2 and linear histograms.

Each aggregation owns its map and knows how to emit the instructions that
update it (``emit(program, ...)``, correct by construction for the verifier)
and how to read it back (``read()``).  Values live in per-CPU maps, so the hot
path needs no atomic instruction; reading adds the CPUs up.  An aggregation is
keyed (by a 64-bit integer such as a pid or an argument) or not.

The histogram buckets follow bpftrace's, so both outputs can be compared:

* log2: bucket 0 holds negative values, bucket 1 holds 0, and bucket
  ``k >= 2`` holds ``[2**(k-2), 2**(k-1))``.
* linear ``(lo, hi, step)``: bucket 0 holds values below ``lo``, bucket
  ``1 + (v - lo) // step`` the values in ``[lo, hi)``, the last one ``>= hi``;
  at most :data:`LHIST_MAX_BUCKETS` (1000) buckets in ``[lo, hi)``.

``create=False`` describes the map (a :class:`~pyebpf.maps.MapSpec`) instead
of creating it: the emitters work the same (programs refer to maps by name),
and :meth:`Aggregation.open` creates it before the program is loaded.

Keys: a keyed aggregation takes its key either as a register (a u64, the
default ``key_size=8``) or as the stack offset (an ``int``) of ``key_size``
bytes already built on the stack -- a string, or several values laid out as
a struct (``key_size`` a multiple of 8).  ``read()`` returns the keys as ints
(``key_size=8``) or as ``bytes``.

Emitters clobber r0-r5 (they call helpers); pass values in r6-r9.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..maps import BytesCodec

from ..errors import ProgramError
from ..kernel.lifetime import Owner
from ..maps import MapSpec, PerCpuArrayMap, PerCpuHashMap
from ..draw.buckets import (LHIST_MAX_BUCKETS, LOG2_BUCKETS, linear_bucket_range,
                            linear_buckets, log2_bucket, log2_bucket_range)
from ..program import R0, R1, R2, R3, R4, R5, R10, Program, Reg

__all__ = ["Aggregation", "Count", "Sum", "Min", "Max", "Avg", "Stats", "Histogram", "AggKey",
           "emit_log2_bucket", "emit_linear_bucket", "emit_percpu_add", "BPF_NOEXIST",
           # (the bucket numbers, from pyebpf.draw.buckets)
           "LOG2_BUCKETS", "LHIST_MAX_BUCKETS", "log2_bucket", "log2_bucket_range",
           "linear_buckets", "linear_bucket_range"]

#: a key as ``read()`` gives it back: an int (``key_size=8``) or the key's bytes
AggKey = int | bytes

BPF_NOEXIST = 1
BPF_F_NO_PREALLOC = 1

#: the flags of the language's hash maps (see :func:`hash_map_flags`)
_hash_flags: int | None = None


def hash_map_flags() -> int:
    """The map flags of the language's hash maps: ``BPF_F_NO_PREALLOC`` on
    kernels 6.1 and later, which allocate elements in every program type
    (NMI included) as they are inserted.  A preallocated per-CPU hash map of
    4096 entries costs 1.5-2.5 ms of the kernel's time at every start (its
    per-CPU values allocated one by one) for keys most programs never
    make; older kernels refuse run-time allocation in perf_event programs,
    and get preallocated maps."""
    global _hash_flags
    if _hash_flags is None:
        from ..kernel.version import kernel_version
        _hash_flags = BPF_F_NO_PREALLOC if kernel_version() >= (6, 1, 0) else 0
    return _hash_flags


def emit_log2_bucket(p: Program, dst: Reg, value: Reg, tmp: Reg, tmp2: Reg) -> None:
    """``dst = log2 bucket of value`` (signed 64-bit) without loops or helpers.

    ``value`` is left unchanged; ``tmp`` and ``tmp2`` are clobbered.
    """
    if len({dst.index, value.index, tmp.index, tmp2.index}) != 4:
        raise ProgramError("emit_log2_bucket needs four different registers")
    done = p.fresh_label("log2_done")
    p.mov(dst, 0)                          # negative: bucket 0
    p.jslt(value, 0, done)
    p.mov(dst, 1)                          # zero: bucket 1
    p.jeq(value, 0, done)
    p.mov(tmp, value)
    p.mov(dst, 2)
    # binary search for the highest set bit; the first step tests the high
    # half by a shift (no 32-bit immediate reaches 0xffffffff), the others
    # compare with 2**shift - 1; the last needs no shift
    skip = p.fresh_label("log2_skip")
    p.mov(tmp2, tmp)
    p.rsh(tmp2, 32)
    p.jeq(tmp2, 0, skip)
    p.mov(tmp, tmp2)
    p.add(dst, 32)
    p.label(skip)
    for shift in (16, 8, 4, 2, 1):
        skip = p.fresh_label("log2_skip")
        p.jle(tmp, (1 << shift) - 1, skip)
        if shift > 1:
            p.rsh(tmp, shift)
        p.add(dst, shift)
        p.label(skip)
    p.label(done)


def emit_linear_bucket(p: Program, dst: Reg, value: Reg, lo: int, hi: int, step: int,
                       tmp: Reg | None = None) -> None:
    """``dst = linear bucket of value`` for ``(lo, hi, step)`` (signed compare).

    Constants beyond 32 bits are loaded into ``tmp`` (needed only then)."""
    nb = linear_buckets(lo, hi, step) - 2

    def const(v: int) -> Reg | int:
        if -(1 << 31) <= v < (1 << 31):
            return v
        if tmp is None:
            raise ProgramError(f"linear histogram constant {v} needs a scratch register (tmp=)")
        p.lddw(tmp, v & ((1 << 64) - 1))
        return tmp
    below, above, done = (p.fresh_label(n) for n in ("lin_below", "lin_above", "lin_done"))
    p.jslt(value, const(lo), below)
    p.jsge(value, const(hi), above)
    p.mov(dst, value)
    p.sub(dst, const(lo))
    p.div(dst, const(step))
    p.add(dst, 1)
    p.ja(done)
    p.label(below)
    p.mov(dst, 0)
    p.ja(done)
    p.label(above)
    p.mov(dst, nb + 1)
    p.label(done)


def emit_percpu_add(p: Program, map_: PerCpuHashMap | PerCpuArrayMap | MapSpec, key_off: int,
                    amount: Reg | int) -> None:
    """Add ``amount`` to this CPU's value under the key at ``r10 + key_off``
    of a per-CPU map, inserting it when the key is absent.  Clobbers r0-r5."""
    val_off = p.stack.alloc(8)
    p.store(R10, val_off, amount, 8)
    missing, done = p.fresh_label("agg_missing"), p.fresh_label("agg_done")
    p.map_lookup(map_, key_off, missing)
    p.ldxdw(R1, R0, 0)
    p.ldxdw(R2, R10, val_off)
    p.add(R1, R2)
    p.stxdw(R0, 0, R1)
    p.ja(done)
    p.label(missing)
    p.map_update(map_, key_off, val_off, flags=BPF_NOEXIST)
    p.label(done)


def _signed64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def _copy_words(p: Program, dst_off: int, src_off: int, size: int) -> None:
    """Copy ``size`` bytes (a multiple of 8) of stack from ``src_off`` to ``dst_off``."""
    for i in range(0, size, 8):
        p.ldxdw(R1, R10, src_off + i)
        p.stxdw(R10, dst_off + i, R1)


class Aggregation(Owner):
    """Base: a named in-kernel aggregation backed by one per-CPU map.

    ``name`` defaults to the kind (``"count"``, ``"min"``...).  ``key_size``
    (keyed only): 8 for a u64 key (a register, or 8 bytes on the stack), or
    the size of a key built on the stack (a multiple of 8).  Closing (an :class:`~pyebpf.kernel.lifetime.Owner`) closes the map.
    """

    kind = "aggregation"

    def __init__(self, name: str | None = None, keyed: bool = False, max_keys: int = 10240,
                 key_size: int = 8, create: bool = True) -> None:
        name = name or self.kind
        if key_size <= 0 or key_size % 8:
            raise ProgramError(f"{name}: key_size must be a positive multiple of 8, not {key_size}")
        self.name = name
        self.keyed = keyed
        self.max_keys = max_keys
        self.key_size = key_size
        self.create = create
        #: the per-CPU map (a :class:`~pyebpf.maps.MapSpec` until :meth:`open`
        #: when made with ``create=False``)
        self.map: PerCpuHashMap | PerCpuArrayMap | MapSpec | None = None
        self._own()               # (the map releases itself when collected)

    def _key_spec(self) -> str | BytesCodec:
        from ..maps import Bytes
        return "u64" if self.key_size == 8 else Bytes(self.key_size)

    def _make(self, cls: type[PerCpuHashMap] | type[PerCpuArrayMap], *args: Any,
              **kw: Any) -> PerCpuHashMap | PerCpuArrayMap | MapSpec:
        """A map of class ``cls``: created now, or (``create=False``) only
        described by a :class:`~pyebpf.maps.MapSpec` until :meth:`open`."""
        if cls is PerCpuHashMap:
            kw.setdefault("flags", hash_map_flags())
        if self.create:
            return cls(*args, **kw)
        return MapSpec(cls, *args, **kw)

    def _new_map(self, value: str = "u64",
                 entries: int = 1) -> PerCpuHashMap | PerCpuArrayMap | MapSpec:
        if self.keyed:
            return self._make(PerCpuHashMap, key=self._key_spec(), value=value,
                              max_entries=self.max_keys, name=self.name)
        return self._make(PerCpuArrayMap, value, entries, name=self.name)

    def open(self) -> None:
        """Create the map in the kernel if it is only described (``create=False``)."""
        if isinstance(self.map, MapSpec):
            # (create() makes an instance of the class given to _make)
            self.map = self.map.create()  # type: ignore[assignment]

    def _spec(self) -> PerCpuHashMap | PerCpuArrayMap | MapSpec:
        """The map, or its description, that emitted instructions refer to (by name)."""
        if self.map is None:
            raise ProgramError(f"{self.name}: {type(self).__name__} has no map")
        return self.map

    def _live(self) -> PerCpuHashMap | PerCpuArrayMap:
        """The map, created (a :class:`ProgramError` before :meth:`open`)."""
        m = self.map
        if m is None or isinstance(m, MapSpec):
            raise ProgramError(f"{self.name}: the map is not created yet (call open())")
        return m

    def clear(self) -> None:
        """Forget every value (keyed: delete the keys; otherwise zero the slots)."""
        m = self._live()
        if self.keyed:
            for k in list(m.keys()):
                try:
                    del m[k]
                except KeyError:
                    pass
        else:
            from ..kernel.cpus import possible_cpus
            n = len(possible_cpus())
            zero = m[0][0]
            zero = tuple(0 for _ in zero) if isinstance(zero, tuple) else 0
            for i in range(m.max_entries):
                m[i] = [zero] * n

    def close(self) -> None:
        """Close the map (a described one has nothing to close); idempotent."""
        super().close()

    def _close_resources(self) -> None:
        if self.map is not None:
            self.map.close()

    def _key_slot(self, p: Program, key: "Reg | int | None", extra: Reg | None = None) -> int:
        """Store the key (and a second part) on the stack; return its offset."""
        if self.keyed and key is None:
            raise ProgramError(f"{self.name}: a keyed {self.kind} needs a key")
        if self.keyed and isinstance(key, int) and not isinstance(key, bool):
            if extra is None:
                return key
            off = p.stack.alloc(self.key_size + 8)
            _copy_words(p, off, key, self.key_size)
            p.stxdw(R10, off + self.key_size, extra)
            return off
        if self.keyed and self.key_size != 8:
            raise ProgramError(f"{self.name}: a {self.key_size}-byte key is passed as the stack "
                               "offset where it was built, not as a register")
        if self.keyed and not isinstance(key, Reg):
            raise ProgramError(f"{self.name}: the key is a register or a stack offset, "
                               f"not {key!r}")
        parts = ([key] if isinstance(key, Reg) and self.keyed else []) + (
            [extra] if extra is not None else [])
        if not parts:
            off = p.stack.alloc(4, 4)
            p.stw(R10, off, 0)
            return off
        off = p.stack.alloc(8 * len(parts))
        for i, reg in enumerate(parts):
            p.stxdw(R10, off + 8 * i, reg)
        return off


class _Total(Aggregation):
    """An aggregation of one u64 per key (or in all): the CPUs' values added."""

    def __init__(self, name: str | None = None, keyed: bool = False, max_keys: int = 10240,
                 key_size: int = 8, create: bool = True) -> None:
        super().__init__(name, keyed, max_keys, key_size, create)
        self.map = self._new_map()

    def _fold(self, total: int) -> int:
        """The value shown for ``total``, the CPUs' values added."""
        return total

    def read(self) -> dict[AggKey, int] | int:
        """The total, all CPUs added (keyed: per key)."""
        m, fold = self._live(), self._fold
        if self.keyed:
            return {k: fold(sum(v)) for k, v in m.items()}
        return fold(sum(m[0]))


class Count(_Total):
    """``count()``, keyed or not; :meth:`read` gives the count, all CPUs added
    (keyed: per key)."""

    kind = "count"

    def emit(self, p: Program, key: "Reg | int | None" = None) -> None:
        """Count one hit (under ``key`` when keyed: a register, or the stack
        offset of a key built there).  Clobbers r0-r5."""
        if self.keyed and key is None:
            raise ProgramError(f"{self.name}: a keyed count needs a key register")
        emit_percpu_add(p, self._spec(), self._key_slot(p, key), 1)


class Sum(_Total):
    """``sum(value)``, keyed or not; :meth:`read` gives the sum as a signed
    64-bit integer, all CPUs added (keyed: per key)."""

    kind = "sum"

    def emit(self, p: Program, value: Reg, key: "Reg | int | None" = None) -> None:
        """Add ``value`` (under ``key`` when keyed).  Clobbers r0-r5."""
        # emit_percpu_add stores the amount on the stack before any helper call
        emit_percpu_add(p, self._spec(), self._key_slot(p, key), value)

    def _fold(self, total: int) -> int:
        return _signed64(total)


class Histogram(Aggregation):
    """A log2 (``hist``) or linear (``lhist``) histogram, keyed or not."""

    kind = "hist"

    def __init__(self, name: str = "hist", keyed: bool = False, linear: tuple[int, int, int] | None = None,
                 max_keys: int = 10240, key_size: int = 8,
                 create: bool = True) -> None:
        super().__init__(name, keyed, max_keys, key_size, create)
        self.linear = linear
        if linear is not None:
            self.buckets = linear_buckets(*linear)
        else:
            self.buckets = LOG2_BUCKETS
        if keyed:
            kspec = "<QQ" if key_size == 8 else f"<{key_size}sQ"
            self.map = self._make(PerCpuHashMap, key=kspec, value="u64", max_entries=max_keys,
                                  name=name)
        else:
            self.map = self._make(PerCpuArrayMap, "u64", self.buckets, name=name)

    def emit(self, p: Program, value: Reg, key: "Reg | int | None" = None) -> None:
        """Record ``value`` (keep it and ``key`` out of r3-r5: the bucket is
        computed in r3 with r4, r5 as scratch, before any helper call)."""
        if self.keyed and key is None:
            raise ProgramError(f"{self.name}: a keyed histogram needs a key register")
        if value.index in (3, 4, 5) or (isinstance(key, Reg) and key.index in (3, 4, 5)):
            raise ProgramError(f"{self.name}: pass the value and key in r0-r2 or r6-r9, not r3-r5")
        bucket = R3
        if self.linear is None:
            emit_log2_bucket(p, bucket, value, R4, R5)
        else:
            emit_linear_bucket(p, bucket, value, *self.linear, tmp=R4)
        if self.keyed:
            off = self._key_slot(p, key, bucket)
        else:
            off = p.stack.alloc(4, 4)
            p.stxw(R10, off, bucket)
        emit_percpu_add(p, self._spec(), off, 1)

    def read(self) -> dict[AggKey, dict[int, int]] | dict[int, int]:
        """Bucket index -> count (per key when keyed); empty buckets omitted."""
        m = self._live()
        if self.keyed:
            out: dict[AggKey, dict[int, int]] = {}
            for (k, b), v in m.items():
                total = sum(v)
                if total:
                    out.setdefault(k, {})[b] = total
            return out
        return {i: sum(v) for i, v in m.items() if sum(v)}

    def bucket_range(self, bucket: int) -> tuple[int | None, int | None]:
        """``[lo, hi)`` of ``bucket`` (None for an open end): see
        :func:`log2_bucket_range` and :func:`linear_bucket_range`."""
        if self.linear is None:
            return log2_bucket_range(bucket)
        return linear_bucket_range(bucket, *self.linear)


class _Pair(Aggregation):
    """Base of the aggregations whose per-CPU value is two u64s."""

    def __init__(self, name: str | None = None, keyed: bool = False, max_keys: int = 10240,
                 key_size: int = 8, create: bool = True) -> None:
        super().__init__(name, keyed, max_keys, key_size, create)
        self.map = self._new_map("<QQ")

    def _per_key(self) -> dict[AggKey, list[tuple[int, int]]] | list[tuple[int, int]]:
        m = self._live()
        if self.keyed:
            return {k: list(v) for k, v in m.items()}
        return list(m[0])

    def _stage(self, p: Program, value: Reg, key: "Reg | int | None") -> tuple[int, int]:
        """Store the pair ``(value, 1)`` and the key on the stack; their offsets."""
        val = p.stack.alloc(16)
        p.stxdw(R10, val, value)
        p.stdw(R10, val + 8, 1)
        return val, self._key_slot(p, key)

    def _combine(self, values: list[tuple[int, int]]) -> Any:
        """One key's per-CPU pairs as :meth:`read` gives them; None: nothing recorded."""
        raise NotImplementedError

    def _read_combined(self) -> Any:
        """:meth:`_combine` per key (keys that recorded nothing left out), or of
        the one value."""
        data = self._per_key()
        if isinstance(data, dict):
            out = {k: self._combine(v) for k, v in data.items()}
            return {k: v for k, v in out.items() if v is not None}
        return self._combine(data)


class _Extreme(_Pair):
    """``min(value)`` / ``max(value)``: per CPU ``(value, set)``."""

    _jump = "jsle"   # max: keep the current value when value <= current

    def emit(self, p: Program, value: Reg, key: "Reg | int | None" = None) -> None:
        """Record ``value`` (signed 64-bit).  Clobbers r0-r5."""
        val, off = self._stage(p, value, key)
        missing, done = p.fresh_label("ext_missing"), p.fresh_label("ext_done")
        store = p.fresh_label("ext_store")
        p.map_lookup(self._spec(), off, missing)
        p.ldxdw(R2, R10, val)
        p.ldxdw(R1, R0, 8)
        p.jeq(R1, 0, store)
        p.ldxdw(R1, R0, 0)
        p.jump_if(self._jump, R2, R1, done)
        p.label(store)
        p.stxdw(R0, 0, R2)
        p.stdw(R0, 8, 1)
        p.ja(done)
        p.label(missing)
        p.map_update(self._spec(), off, val, flags=BPF_NOEXIST)
        p.label(done)

    def _combine(self, values: list[tuple[int, int]]) -> int | None:
        got = [_signed64(v) for v, is_set in values if is_set]
        if not got:
            return None
        return min(got) if self.kind == "min" else max(got)

    def read(self) -> dict[AggKey, int] | int | None:
        """The extreme value (per key); None when nothing was recorded."""
        value: dict[AggKey, int] | int | None = self._read_combined()
        return value


class Min(_Extreme):
    """``min(value)``, keyed or not (signed)."""

    kind = "min"
    _jump = "jsge"


class Max(_Extreme):
    """``max(value)``, keyed or not (signed)."""

    kind = "max"
    _jump = "jsle"


class Stats(_Pair):
    """``stats(value)``: count, sum and average (integer, like bpftrace's), keyed or not.

    ``read()`` gives ``(count, average, total)`` per key.
    """

    kind = "stats"

    def emit(self, p: Program, value: Reg, key: "Reg | int | None" = None) -> None:
        """Record ``value``.  Clobbers r0-r5."""
        val, off = self._stage(p, value, key)
        missing, done = p.fresh_label("st_missing"), p.fresh_label("st_done")
        p.map_lookup(self._spec(), off, missing)
        p.ldxdw(R1, R0, 0)
        p.ldxdw(R2, R10, val)
        p.add(R1, R2)
        p.stxdw(R0, 0, R1)
        p.ldxdw(R1, R0, 8)
        p.add(R1, 1)
        p.stxdw(R0, 8, R1)
        p.ja(done)
        p.label(missing)
        p.map_update(self._spec(), off, val, flags=BPF_NOEXIST)
        p.label(done)

    @staticmethod
    def _combine(values: list[tuple[int, int]]) -> tuple[int, int, int] | None:
        count = sum(c for _, c in values)
        if not count:
            return None
        total = _signed64(sum(v for v, _ in values))
        avg = abs(total) // count * (1 if total >= 0 else -1)   # C division
        return count, avg, total

    def read(self) -> dict[AggKey, tuple[int, int, int]] | tuple[int, int, int] | None:
        """``(count, average, total)`` (per key); None (unkeyed) when nothing
        was recorded, and keys that recorded nothing are left out."""
        value: dict[AggKey, tuple[int, int, int]] | tuple[int, int, int] | None = \
            self._read_combined()
        return value


class Avg(Stats):
    """``avg(value)``: the integer average, keyed or not."""

    kind = "avg"

    # (an int where Stats gives a tuple: Stats.read(avg) still gives the tuple)
    def read(self) -> dict[AggKey, int] | int | None:  # type: ignore[override]
        """The integer average (per key); None (unkeyed) when nothing was recorded."""
        data = super().read()
        if isinstance(data, dict):
            return {k: v[1] for k, v in data.items()}
        return None if data is None else data[1]
