"""``pyebpf bt``'s start from the compiled-program cache (:mod:`.btcache`):
the maps created, the programs loaded and the uprobes attached straight from
the stored entry -- no lexer, parser, semantic pass, code generation or ELF
reading, and none of their modules imported.

:func:`cached_program` gives a :class:`CachedProgram` for a program whose
entry is there and valid (else None: the caller compiles); its
:meth:`~CachedProgram.start` gives a :class:`FastRun`, a
:class:`~pyebpf.lang.runtime.BtRun` whose kernel objects are made by the
kernel layer's calls directly and whose events and maps are printed by the
same code as a compiled program's (:mod:`pyebpf.lang.output`). The programs
are loaded without pyebpf's own BTF (line records for ``bpftool``).
"""
from __future__ import annotations

import mmap
import os

from ..kernel import bare
from ..kernel.lifetime import Owner, close_fd
from .btcache import FORMAT, cache_key, load
from .runtime import BtRun, map_entries
from .types import Type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

__all__ = ["cached_program", "CachedProgram", "FastRun", "decode_type"]

_PAGE = mmap.PAGESIZE
_BUSY, _DISCARD = 1 << 31, 1 << 30
#: map types whose values are per CPU (read as one value per possible CPU)
_PERCPU = (5, 6, 10)           # PERCPU_HASH, PERCPU_ARRAY, LRU_PERCPU_HASH
_ARRAYS = (2, 6)               # ARRAY, PERCPU_ARRAY


def decode_type(enc: Any) -> Type:
    """The :class:`Type` :func:`pyebpf.lang.btcache.encode_type` wrote."""
    kind, size, signed, elems, elem, fields, mode, limit, lhist, counted, fmt = enc
    return Type(kind, size, signed, tuple(decode_type(e) for e in elems), _optional(elem),
                tuple((n, o, decode_type(f)) for n, o, f in fields), mode, limit,
                tuple(lhist) if lhist is not None else None, counted, None, fmt)


def _optional(enc: Any) -> Type | None:
    return None if enc is None else decode_type(enc)


def cached_program(text: str, filename: str, params: Sequence[str],
                   unsafe: bool = False) -> tuple[CachedProgram | None, tuple[Any, ...]]:
    """``(program, key)``: the cached program (None on a miss) and the key
    to store a compiled one under."""
    key = cache_key(text, filename, params, unsafe)
    entry = load(key)
    if entry is None or entry.get("format") != FORMAT:
        return None, key
    try:
        return CachedProgram(entry, (text, filename, list(params), unsafe)), key
    except (KeyError, TypeError, ValueError, IndexError):      # (a foreign entry)
        return None, key


class _Refused(Exception):
    """The kernel refused a map or program of an entry: the program is
    compiled again (its errors are then the compiler's and loader's)."""


class _Action:
    """An event's action, as :class:`~pyebpf.lang.codegen.Action` has it."""

    def __init__(self, ident: int, kind: str, fmt: str, args: list[Type], map_: str | None,
                 params: list[int], strftime: dict[int, str]) -> None:
        self.id, self.kind, self.fmt, self.args = ident, kind, fmt, args
        self.map, self.params, self.strftime, self.pos = map_, params, strftime, None
        self.record = Type("tuple", elems=tuple(args)) if args else None


class _MapPlan:
    """A map's plan, as :class:`~pyebpf.lang.codegen.MapPlan` has it."""

    def __init__(self, name: str, kname: str, kind: str, key: Type | None, value: Type,
                 key_size: int, value_size: int) -> None:
        self.name, self.kname, self.kind, self.key, self.value = name, kname, kind, key, value
        self.key_size, self.value_size, self.agg, self.spec = key_size, value_size, None, None


class _Uprobe:
    """A uprobe or uretprobe's target (file, offsets), attached by one
    ``uprobe_multi`` link."""

    def __init__(self, kind: str, path: str, offsets: list[int]) -> None:
        self.kind, self.path, self.offsets = kind, path, offsets

    def attach(self, loaded: _Fd, pid: int | None = None) -> _Fd:
        """The link (the cookie of each function is its index, as the
        compiled program's source gives it)."""
        n = len(self.offsets)
        return _Fd(bare.uprobe_multi_link(loaded.fd, self.path, self.offsets,
                                          list(range(n)) if n > 1 else None, pid or 0,
                                          self.kind == "uretprobe"))


class _Probe:
    def __init__(self, name: str, kind: str, source: _Uprobe | None, load: tuple[Any, ...]
                 ) -> None:
        self.name, self.kind, self.source, self.load = name, kind, source, load


class _Unit:
    """What :class:`BtRun` reads of a generated unit, from an entry."""

    def __init__(self, entry: dict[str, Any]) -> None:
        self.maps_created = entry["maps"]
        self.ringbuf_name = entry["ringbuf"]
        self.probe_names = list(entry["probe_names"])
        self.probes = [_Probe(name, kind, _Uprobe(*attach) if attach else None,
                              (ptype, eat, pname, lic, code, relocs))
                       for name, kind, ptype, eat, pname, lic, code, relocs, attach
                       in entry["probes"]]
        self.actions = [_Action(i, kind, fmt, [decode_type(t) for t in args], m, params,
                                {int(k): v for k, v in strftime.items()})
                        for i, (kind, fmt, args, m, params, strftime)
                        in enumerate(entry["actions"])]
        self.maps = {name: _MapPlan(name, kname, kind, _optional(key), decode_type(value),
                                    ksize, vsize)
                     for name, (kname, kind, key, value, ksize, vsize) in entry["plans"].items()}
        self.stack_map = self.kstack_map = self.join_map = self.drops = self.script = None
        self.helper_check = 0
        self.skipped: list[str] = []


class CachedProgram:
    """A program from the cache: what :func:`pyebpf.lang.compile` gives,
    as far as ``pyebpf bt`` uses it (``warnings``, :meth:`start`)."""

    def __init__(self, entry: dict[str, Any], source: tuple[Any, ...]) -> None:
        self.unit = _Unit(entry)
        #: the warnings the compilation printed
        self.warnings: list[str] = list(entry["warnings"])
        self._source = source

    def start(self, command: Sequence[str] | None = None, *, json: bool = False,
              child: Any = None, release: bool = True,
              begun: Callable[[BtRun], None] | None = None) -> BtRun:
        """Create, load, run BEGIN, attach: the running :class:`FastRun`
        (``command``/``child``: not for cached programs)."""
        if command is not None or child is not None:
            from ..errors import OptionError
            raise OptionError("a cached program runs no command (-c is never cached)")
        try:
            run = FastRun(self.unit, json_mode=json)  # type: ignore[arg-type]
            run.start(release=release, begun=begun)
            return run
        except _Refused:
            from .api import compile
            text, filename, params, unsafe = self._source
            prog = compile(text, filename=filename, params=params, unsafe=unsafe)
            return prog.start(json=json, release=release, begun=begun)


class _Fd(Owner):
    """An fd this run owns (a map, a program, a link): closed by
    :meth:`close` or when collected."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._own(close_fd, fd)

    def fileno(self) -> int:
        """The fd number."""
        return self.fd

    def test_run(self) -> None:
        """Run the program once (BEGIN, END)."""
        bare.prog_test_run(self.fd)


def _absent(key: bytes) -> Exception:
    from ..errors import MapKeyError
    return MapKeyError(f"key {key.hex()} is not in the map")


def _ncpus() -> int:
    from ..kernel.cpus import num_possible_cpus
    return num_possible_cpus()


class _Map(_Fd):
    """A created map read and written by raw element commands; per-CPU
    values come as one ``bytes`` per possible CPU."""

    def __init__(self, fd: int, map_type: int, key_size: int, value_size: int,
                 max_entries: int) -> None:
        super().__init__(fd)
        self.map_type, self.key_size = map_type, key_size
        self.value_size, self.max_entries = value_size, max_entries
        self.percpu = map_type in _PERCPU
        self.stride = (value_size + 7) & ~7
        self.ncpus = _ncpus() if self.percpu else 1

    def keys(self) -> list[bytes]:
        """Every key (an array's indexes as 4-byte keys)."""
        if self.map_type in _ARRAYS:
            return [i.to_bytes(4, "little") for i in range(self.max_entries)]
        out: list[bytes] = []
        key = None
        while True:
            nxt = bytearray(self.key_size)
            if not bare.elem(bare.NEXT_KEY, self.fd, key, nxt):
                return out
            key = bytes(nxt)
            out.append(key)

    def get(self, key: bytes) -> Any:
        """The value of ``key`` (per CPU: a list), None when absent."""
        raw = bytearray(self.stride * self.ncpus)
        if not bare.elem(bare.LOOKUP, self.fd, key, raw):
            return None
        if not self.percpu:
            return bytes(raw[:self.value_size])
        s, n = self.stride, self.value_size
        return [bytes(raw[i * s:i * s + n]) for i in range(self.ncpus)]

    def items(self) -> list[tuple[bytes, Any]]:
        """``(key, value)`` of every key present."""
        out = []
        for k in self.keys():
            v = self.get(k)
            if v is not None:
                out.append((k, v))
        return out

    # (what BtRun's clear_map and zero_map do to a map: a key absent is a KeyError)
    def __getitem__(self, key: bytes) -> Any:
        got = self.get(key)
        if got is None:
            raise _absent(key)
        return got

    def __setitem__(self, key: bytes, value: Any) -> None:
        """``value``: bytes of the value's size; anything else (zero_map's
        per-CPU zeros) writes zeros."""
        if not isinstance(value, (bytes, bytearray)) or len(value) < self.value_size:
            value = bytes(self.stride * self.ncpus)        # (zero_map's zeros)
        if not bare.elem(bare.UPDATE, self.fd, key, value):
            raise _absent(key)

    def __delitem__(self, key: bytes) -> None:
        """Delete ``key`` (an array's slot: zeroed)."""
        if self.map_type in _ARRAYS:
            self[key] = None                # (zeros)
        elif not bare.elem(bare.DELETE, self.fd, key, None):
            raise _absent(key)


class _Ring:
    """The events' ring buffer, drained in order (records as bytes)."""

    def __init__(self, m: _Map) -> None:
        import select
        fd = m.fd
        self.mask = m.max_entries - 1
        self.cons = mmap.mmap(fd, _PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.prod = mmap.mmap(fd, _PAGE + 2 * m.max_entries, mmap.MAP_SHARED, mmap.PROT_READ,
                              offset=_PAGE)
        self.cell = memoryview(self.cons).cast("Q")     # the consumer position
        self.poller = select.epoll()
        self.poller.register(fd, select.EPOLLIN)

    def read_batch(self, timeout: float | None = 0.0) -> list[bytes]:
        """The records there, waiting up to ``timeout`` seconds for one."""
        out = self._drain()
        if not out and timeout:
            self.poller.poll(timeout)
            out = self._drain()
        return out

    def _drain(self) -> list[bytes]:
        prod = self.prod
        end = _u64(prod[0:8])
        pos = start = self.cell[0]
        out = []
        while pos < end:
            at = _PAGE + (pos & self.mask)
            head = int.from_bytes(prod[at:at + 4], "little")
            if head & _BUSY:
                break
            size = head & (_DISCARD - 1)
            if not head & _DISCARD:
                out.append(prod[at + 8:at + 8 + size])
            pos += (size + 15) & ~7
        if pos != start:
            self.cell[0] = pos            # (one 8-byte store, as the kernel reads it)
        return out

    def close(self) -> None:
        """Unmap the ring and stop polling it."""
        self.poller.close()
        self.cell.release()
        self.cons.close()
        self.prod.close()


def _u64(raw: bytes) -> int:
    return int.from_bytes(raw, "little")


def _sum(values: list[bytes], signed: bool = False) -> int:
    total = sum(int.from_bytes(v[:8], "little") for v in values) & 0xFFFFFFFFFFFFFFFF
    return total - (1 << 64) if signed and total >> 63 else total


def _signed(v: int) -> int:
    return v - (1 << 64) if v >> 63 else v


class FastRun(BtRun):
    """A :class:`BtRun` of a cached program: the maps and programs are made
    from the entry; everything else (events, END, the maps printed) is the
    compiled program's code."""

    def _create(self) -> None:
        u: Any = self.unit
        for name, mtype, ksize, vsize, entries, flags in u.maps_created:
            fd = bare.map_create(mtype, ksize, vsize, entries, flags, name.encode())
            if fd < 0:
                raise _Refused(f"map {name}: errno {-fd}")
            self.live[name] = _Map(fd, mtype, ksize, vsize, entries)
        self.reader = _Ring(self.live[u.ringbuf_name])

    def _load(self) -> None:
        names = [m[0] for m in self.unit.maps_created]  # type: ignore[attr-defined]
        for plan in self.unit.probes:
            ptype, eat, pname, lic, code, relocs = plan.load  # type: ignore[attr-defined]
            code = bytearray(code)
            for at, index in relocs:
                code[at + 4:at + 8] = self.live[names[index]].fd.to_bytes(4, "little")
            fd = bare.prog_load(ptype, code, lic, pname, eat)
            if fd < 0:
                raise _Refused(f"program {plan.name}: errno {-fd}")
            self.loaded.append(_Fd(fd))
        # (the events' printing code, imported now rather than for the first
        # event: before the attach, the kernel's first-uprobe wait is often
        # still running -- see pyebpf.kernel.bare.prime_uprobes)
        from . import output  # noqa: F401

    def entries(self, name: str) -> dict[Any, Any]:
        """The entries of map ``name`` (as :meth:`BtRun.entries` gives them)."""
        plan, live = self._live_map(name)
        if plan.kind == "plain":
            got = map_entries(plan, live, self.unit.probe_names)
        else:
            got = self._aggregation(plan, live)
        for key in self._zeroed.get(name, ()):
            got.setdefault(key, {})
        return got

    def _aggregation(self, plan: Any, live: _Map) -> dict[Any, Any]:
        """An aggregation's entries: key -> its value, the CPUs' combined."""
        key_type, kind, names = plan.key, plan.kind, self.unit.probe_names
        out: dict[Any, Any] = {}
        if live.map_type in _ARRAYS:            # (hist/lhist without a key: buckets)
            buckets = {}
            for raw, values in live.items():
                total = _sum(values)
                if total:
                    buckets[int.from_bytes(raw, "little")] = total
            return {None: buckets} if buckets else {}
        from . import layout
        from .runtime import _value

        def key_of(raw: bytes) -> Any:
            if key_type is None:
                return None
            return _value(key_type, layout.decode(key_type, raw, whole=True), names)
        signed = plan.value.signed
        for raw, values in live.items():
            if kind in ("hist", "lhist"):
                total = _sum(values)
                if total:
                    bucket = int.from_bytes(raw[plan.key_size:plan.key_size + 8], "little")
                    out.setdefault(key_of(raw[:plan.key_size]), {})[bucket] = total
            elif kind in ("count", "sum"):
                # (a sum of unsigned values prints unsigned, as in map_entries)
                out[key_of(raw)] = _sum(values, kind == "sum" and signed)
            elif kind in ("min", "max"):
                got = [_signed(_u64(v[:8])) for v in values if _u64(v[8:16])]
                if got:
                    out[key_of(raw)] = min(got) if kind == "min" else max(got)
            else:                                # avg, stats: (count, total)
                count = sum(_u64(v[8:16]) for v in values)
                if count:
                    out[key_of(raw)] = (count, _sum([v[:8] for v in values], True))
        return out
