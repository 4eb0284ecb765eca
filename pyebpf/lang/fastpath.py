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
import struct

from .btcache import FORMAT, cache_key, load
from .runtime import BtRun, map_entries
from .types import Type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

__all__ = ["cached_program", "CachedProgram", "FastRun", "decode_type"]

_PAGE = mmap.PAGESIZE
_U64 = struct.Struct("<Q")
_BUSY, _DISCARD = 1 << 31, 1 << 30
#: map types whose values are per CPU (read as one value per possible CPU)
_PERCPU = (5, 6, 10)           # PERCPU_HASH, PERCPU_ARRAY, LRU_PERCPU_HASH
_ARRAYS = (2, 6)               # ARRAY, PERCPU_ARRAY
_UPROBE_MULTI_RETURN = 1


def decode_type(enc: Any) -> Type | None:
    """The :class:`Type` :func:`pyebpf.lang.btcache.encode_type` wrote."""
    if enc is None:
        return None
    kind, size, signed, elems, elem, fields, mode, limit, lhist, counted, fmt = enc
    return Type(kind, size, signed, tuple(decode_type(e) for e in elems), decode_type(elem),
                tuple((n, o, decode_type(f)) for n, o, f in fields), mode, limit,
                tuple(lhist) if lhist is not None else None, counted, None, fmt)


def cached_program(text: str, filename: str, params: Sequence[str],
                   unsafe: bool = False) -> tuple[CachedProgram | None, tuple[Any, ...]]:
    """``(program, key)``: the cached program (None on a miss) and the key
    to store a compiled one under."""
    key = cache_key(text, filename, params, unsafe)
    entry = load(key)
    if entry is None or entry.get("format") != FORMAT:
        return None, key
    try:
        return CachedProgram(entry), key
    except (KeyError, TypeError, ValueError, IndexError):      # (a foreign entry)
        return None, key


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

    def attach(self, loaded: _Loaded, pid: int | None = None) -> Any:
        """The link (the cookie of each function is its index, as the
        compiled program's source gives it)."""
        from ..kernel.links import uprobe_multi_link
        n = len(self.offsets)
        return uprobe_multi_link(loaded.fd, self.path, self.offsets, pid=pid or 0,
                                 cookies=list(range(n)) if n > 1 else None,
                                 retprobe=self.kind == "uretprobe")


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
        self.maps = {name: _MapPlan(name, kname, kind, decode_type(key), decode_type(value),
                                    ksize, vsize)
                     for name, (kname, kind, key, value, ksize, vsize) in entry["plans"].items()}
        self.stack_map = self.kstack_map = self.join_map = self.drops = self.script = None
        self.helper_check = 0
        self.skipped: list[str] = []


class CachedProgram:
    """A program from the cache: what :func:`pyebpf.lang.compile` gives,
    as far as ``pyebpf bt`` uses it (``warnings``, :meth:`start`)."""

    def __init__(self, entry: dict[str, Any]) -> None:
        self.unit = _Unit(entry)
        #: the warnings the compilation printed
        self.warnings: list[str] = list(entry["warnings"])
        self.pid = None

    def start(self, command: Sequence[str] | None = None, *, json: bool = False,
              child: Any = None, release: bool = True,
              begun: Callable[[BtRun], None] | None = None) -> FastRun:
        """Create, load, run BEGIN, attach: the running :class:`FastRun`
        (``command``/``child``: not for cached programs)."""
        if command is not None or child is not None:
            raise ValueError("a cached program runs no command")
        return FastRun(self.unit, json_mode=json).start(release=release,  # type: ignore[arg-type]
                                                         begun=begun)


class _Loaded:
    """A loaded program: its fd, BEGIN/END's test run."""

    def __init__(self, fd: Any) -> None:
        self.fd = fd

    def test_run(self) -> None:
        """Run the program once (BEGIN, END)."""
        from ..kernel.prog import prog_test_run
        prog_test_run(self.fd)

    def close(self) -> None:
        """Close the program's fd."""
        self.fd.close()


def _ncpus() -> int:
    from ..kernel.cpus import num_possible_cpus
    return num_possible_cpus()


class _Map:
    """A created map read and written by raw element commands; per-CPU
    values come as one ``bytes`` per possible CPU."""

    def __init__(self, fd: Any, map_type: int, key_size: int, value_size: int,
                 max_entries: int) -> None:
        self.fd, self.map_type, self.key_size = fd, map_type, key_size
        self.value_size, self.max_entries = value_size, max_entries
        self.percpu = map_type in _PERCPU
        self.stride = (value_size + 7) & ~7
        self.ncpus = _ncpus() if self.percpu else 1

    def fileno(self) -> int:
        """The map's fd number."""
        return int(self.fd.fileno())

    def keys(self) -> list[bytes]:
        """Every key (an array's indexes as 4-byte keys)."""
        if self.map_type in _ARRAYS:
            return [i.to_bytes(4, "little") for i in range(self.max_entries)]
        from ..kernel.mapops import map_get_next_key
        out: list[bytes] = []
        key = None
        while (key := map_get_next_key(self.fd, key, self.key_size)) is not None:
            out.append(key)
        return out

    def get(self, key: bytes) -> Any:
        """The value of ``key`` (per CPU: a list), None when absent."""
        from ..kernel.mapops import map_lookup
        raw = map_lookup(self.fd, key, self.stride * self.ncpus)
        if raw is None or not self.percpu:
            return raw
        s, n = self.stride, self.value_size
        return [raw[i * s:i * s + n] for i in range(self.ncpus)]

    def items(self) -> list[tuple[bytes, Any]]:
        """``(key, value)`` of every key present."""
        out = []
        for k in self.keys():
            v = self.get(k)
            if v is not None:
                out.append((k, v))
        return out

    def zero(self, key: bytes) -> None:
        """Set the value of ``key`` (every CPU's) to zeros."""
        from ..kernel.mapops import map_update
        map_update(self.fd, key, bytes(self.stride * self.ncpus))

    def delete(self, key: bytes) -> None:
        """Delete ``key`` (absent: nothing)."""
        from ..kernel.mapops import map_delete
        map_delete(self.fd, key)

    def close(self) -> None:
        """Close the map's fd."""
        self.fd.close()


class _Ring:
    """The events' ring buffer, drained in order (records as bytes)."""

    def __init__(self, m: _Map) -> None:
        import select
        fd = m.fileno()
        self.mask = m.max_entries - 1
        self.cons = mmap.mmap(fd, _PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.prod = mmap.mmap(fd, _PAGE + 2 * m.max_entries, mmap.MAP_SHARED, mmap.PROT_READ,
                              offset=_PAGE)
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
        prod, view = self.prod, self.cons
        end = _U64.unpack_from(prod, 0)[0]
        pos = start = _U64.unpack_from(view, 0)[0]
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
            _U64.pack_into(view, 0, pos)
        return out

    def close(self) -> None:
        """Unmap the ring and stop polling it."""
        self.poller.close()
        self.cons.close()
        self.prod.close()


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
        from ..kernel.mapops import map_create
        u: Any = self.unit
        for name, mtype, ksize, vsize, entries, flags in u.maps_created:
            fd = map_create(mtype, ksize, vsize, entries, flags=flags, name=name)
            self.live[name] = _Map(fd, mtype, ksize, vsize, entries)
        self.reader = _Ring(self.live[u.ringbuf_name])

    def _load(self) -> None:
        from ..kernel.prog import prog_load
        for plan in self.unit.probes:
            ptype, eat, pname, lic, code, relocs = plan.load  # type: ignore[attr-defined]
            code = bytearray(code)
            names = [m[0] for m in self.unit.maps_created]  # type: ignore[attr-defined]
            for at, index in relocs:
                code[at + 4:at + 8] = self.live[names[index]].fileno().to_bytes(4, "little")
            fd, _ = prog_load(ptype, bytes(code), lic, name=pname, expected_attach_type=eat)
            self.loaded.append(_Loaded(fd))

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
                got = [_signed(_U64.unpack_from(v, 0)[0]) for v in values
                       if _U64.unpack_from(v, 8)[0]]
                if got:
                    out[key_of(raw)] = min(got) if kind == "min" else max(got)
            else:                                # avg, stats: (count, total)
                count = sum(_U64.unpack_from(v, 8)[0] for v in values)
                if count:
                    out[key_of(raw)] = (count, _sum([v[:8] for v in values], True))
        return out

    def clear_map(self, name: str) -> None:
        """Delete every entry of map ``name`` (an array's: zeroed)."""
        self._zeroed.pop(name, None)
        _, live = self._live_map(name)
        for k in live.keys():
            if live.map_type in _ARRAYS:
                live.zero(k)
            else:
                live.delete(k)

    def zero_map(self, name: str) -> None:
        """Set every value of map ``name`` to zero, keeping the keys."""
        plan, live = self._live_map(name)
        if plan.kind in ("hist", "lhist"):
            keys = set(self.entries(name))
            self.clear_map(name)
            self._zeroed[name] = keys
            return
        for k in live.keys():
            try:
                live.zero(k)
            except OSError:        # (deleted meanwhile)
                pass
