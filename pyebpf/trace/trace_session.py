"""A :class:`~pyebpf.trace.recipes.Trace` running: :class:`TraceSession`
loads and attaches its programs, decodes its events, reads its aggregations
(keys shown as the user wrote them: strings, stacks symbolized, signed
numbers) and prints them through :mod:`~pyebpf.trace.formatting`.
"""
from __future__ import annotations

import struct
import time
from typing import Any, Sequence, cast

from ..lang import aggregations as _agg
from ..draw import formatting
from .expr import FUNC, INT, PROBE, STACK, STR, Expr, signed
from .model import Aggregate, AggResult, Event, FieldValue, KeyPart
from ..draw.render import format_printf
from ..session.base import Session
from ..symbols.stacks import Symbolizer, demangle, format_stack, split_stack_key, stack_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..maps import PerCpuArrayMap, PerfEventArray, RingBuf, StackTraceMap
    from .model import Source
    from .recipes import Trace
    from ..session.base import AttachStep

__all__ = ["TraceSession"]


def field_widths(fields: Sequence[tuple[str, Expr]]) -> list[int]:
    """The column widths of events printed as a table (``--print`` without a
    format): per ``(name, expression)`` field."""
    out = []
    for name, e in fields:
        w = {STR: min(e.size, 16), INT: 7, PROBE: 24, FUNC: 16, STACK: 0}.get(e.kind, 8)
        out.append(max(len(name), w))
    return out


class TraceSession(Session):
    """A running :class:`Trace`: programs loaded and attached, maps readable.

    Attributes: ``trace``, ``links``, ``loaded`` (programs), ``reader`` (the
    event reader or None), ``attach_seconds`` (time to load and attach
    everything), ``symbolizer``.  ``attach=False`` loads without attaching
    (then :meth:`attach`).
    """

    def __init__(self, trace: Trace, log_level: int = 0, *, attach: bool = True) -> None:
        super().__init__()
        self.trace = trace
        t0 = time.perf_counter()
        files = [getattr(s, "path", None) for s in trace.sources or []]
        self.symbolizer = Symbolizer([f for f in files if f])
        self._stack_cache: dict[tuple[int, int], list[str]] = {}
        self._base: dict[str, Any] = {}     # display name -> raw read (see results(clear=))
        try:
            self._open_reader()
            from ..loader import load
            for b in trace.built:
                opts = dict(b.source.load_options)
                ptype = opts.pop("prog_type", b.source.prog_type)
                self.loaded.append(load(b.program, ptype, log_level=log_level,
                                        maps=trace.open_maps(), **opts))
        except BaseException:
            self.close()
            raise
        self.attach_seconds = time.perf_counter() - t0
        if trace.pid:
            self.symbolizer.remember_pid(trace.pid)
        if attach:
            self.attach()

    def _open_reader(self) -> None:
        t = self.trace
        if t.event_fields is None:
            return
        from ..events import PerfBuffer, RingBufferReader
        fmt = t._record_format()
        # (open_maps() created them: a RingBuf and its drops, or a PerfEventArray)
        if t.ring:
            self.reader = RingBufferReader(cast("RingBuf", t._events_map),
                                           drops=cast("PerCpuArrayMap", t._drops),
                                           decode=fmt, on_lost=self._on_lost)
        else:
            self.reader = PerfBuffer(cast("PerfEventArray", t._events_map),
                                     size=t.buffer_size, decode=fmt, on_lost=self._on_lost)

    def _attach_steps(self) -> list[AttachStep]:
        t = self.trace
        kernel_pid_ok: bool | None = None
        steps: list[AttachStep] = []
        # the return programs first: an entry then always finds its return
        for j in sorted(range(len(t.built)), key=lambda j: t.built[j].role == "entry"):
            b = t.built[j]
            pid = None
            if t.pid and hasattr(b.source, "entry"):
                if kernel_pid_ok is None:
                    from ..attach import UPROBE_MULTI, uprobe_method
                    kernel_pid_ok = uprobe_method() == UPROBE_MULTI
                pid = t.pid if kernel_pid_ok else None
            elif t.pid and getattr(b.source, "kind", "") != "tracepoint":
                pid = t.pid
            steps.append((b.source, self.loaded[j], pid))
        return steps

    # ------------------------------------------------------------ events
    def read_events(self, timeout: float | None = 0) -> list[Event]:
        """Wait up to ``timeout`` seconds (0: not at all; None: until some
        come) and return the decoded events."""
        if self.reader is None:
            return []
        return [self._event(rec) for rec in self.reader.read_batch(timeout)]

    def _event(self, rec: tuple[Any, ...]) -> Event:
        t = self.trace
        idx: int = rec[0]
        fields: dict[str, FieldValue] = {}
        shown: list[FieldValue] = []
        src = t.sources[idx] if t.sources and idx < len(t.sources) else None
        for (name, e), raw in zip(t.event_fields or [], rec[1:]):
            value = self._value(e, raw, src)
            if isinstance(value, list):             # a stack's frames
                shown.append(format_stack(value).rstrip("\n"))
            else:
                shown.append(value)
            fields[name] = value
        probe = str(t.specs[idx]) if idx < len(t.specs) else f"probe {idx}"
        if t.event_format is not None:
            line = format_printf(t.event_format, shown)
        else:
            line = self._row(shown)
        return Event(probe, fields, line)

    def _value(self, e: Expr, raw: Any, src: Source | None) -> FieldValue:
        """A raw key part / field (int or bytes, by ``e.kind``) as shown to the user."""
        t = self.trace
        if e.kind == STR:
            text: str = raw.split(b"\0", 1)[0].decode(errors="replace")
            return text
        if e.kind == STACK:
            return self.stack(raw)
        if e.kind == PROBE:
            return t._probe_names[raw] if raw < len(t._probe_names) else f"probe {raw}"
        if e.kind == FUNC:
            if raw >= len(t._func_names):
                return f"func {raw}"
            name = t._func_names[raw]
            return demangle([name])[name] if name.startswith("_Z") else name
        value: int = raw
        if signed(e, src) and value >= 1 << 63:
            return value - (1 << 64)
        return value

    def _widths(self) -> list[int]:
        return field_widths(self.trace.event_fields or [])

    def header(self) -> str | None:
        """The column names of events printed without a format (a table), else None."""
        t = self.trace
        if t.event_fields is None or t.event_format is not None:
            return None
        return self._row([n.upper() for n, _ in t.event_fields]).rstrip() + "\n"

    def _row(self, values: Sequence[object]) -> str:
        w = self._widths()
        cells = [f"{v!s:<{w[i]}}" if i < len(values) - 1 else str(v)
                 for i, v in enumerate(values)]
        return " ".join(cells) + "\n"

    def stack(self, value: int) -> list[str]:
        """The frames of a ``ustack`` value (innermost first)."""
        pid, sid = split_stack_key(value)
        if sid < 0:
            return [stack_error(sid)]
        got = self._stack_cache.get((pid, sid))
        if got is None:
            stack_map = cast("StackTraceMap", self.trace._stack_map)   # (opened)
            try:
                raw = stack_map[sid]
            except (KeyError, OSError):
                raw = []
            got = self.symbolizer.frames(raw, pid) if raw else ["[stack lost]"]
            self._stack_cache[(pid, sid)] = got
        return got

    # ------------------------------------------------------------ aggregations
    def _decode_key(self, a: Aggregate, raw: int | bytes) -> tuple[FieldValue, ...]:
        """Raw map key -> tuple of display values (one per key expression)."""
        if isinstance(raw, int):            # (8-byte keys come back as u64)
            raw = raw.to_bytes(8, "little")
        parts: list[Any] = []
        pos = 0
        for e in a.keys:
            chunk = raw[pos:pos + e.slot_size]
            parts.append(chunk if e.kind == STR else struct.unpack_from("<Q", chunk)[0])
            pos += e.slot_size
        src = self.trace.sources[0] if self.trace.sources else None
        return tuple(self._value(e, v, src) for e, v in zip(a.keys, parts))

    def aggregation_names(self) -> list[str]:
        """The display names of the aggregations (``"@"``, ``"@hist"``...)."""
        return [a.display for a in self.trace.aggregates]

    def results(self, *, clear: bool = False) -> dict[str, AggResult]:
        """Every aggregation by display name (``"@"``, ``"@hist"``...).

        Unkeyed: the value (hist: ``{bucket: count}``; stats: ``(count,
        average, total)``).  Keyed: ``{key: value}`` with the key a tuple
        (one item per key expression; stacks as tuples of frames).
        Identical keys (the same stack seen by several processes) are merged.

        ``clear=True`` (``--interval`` with ``--clear``): what this call read
        becomes the baseline later reads subtract, so every hit is in exactly
        one of the successive results (see :meth:`clear`).
        """
        aggregates = self.trace.aggregates
        reads = [self._raw(a) for a in aggregates]
        bases = [self._base.get(a.display) for a in aggregates]
        if clear:                          # (before decoding, which may fail)
            for a, read in zip(aggregates, reads):
                self._clear_one(a, read)
        out: dict[str, AggResult] = {}
        for a, data, base in zip(aggregates, reads, bases):
            if base is not None:
                data = _minus(a, data, base)
            if not a.keys:
                if a.kind == "avg":
                    data = None if data is None else data[1]
                out[a.display] = data
                continue
            merged: dict[tuple[KeyPart, ...], Any] = {}
            for raw, v in data.items():
                k = tuple(tuple(x) if isinstance(x, list) else x
                          for x in self._decode_key(a, raw))
                if k in merged:
                    v = _merge(a.kind, merged[k], v)
                merged[k] = v
            if a.kind == "avg":
                merged = {k: v[1] for k, v in merged.items()}
            out[a.display] = merged
        return out

    def raw_results(self) -> dict[str, Any]:
        """Each aggregation's map as read, undecoded (see :meth:`Session.raw_results`)."""
        out: dict[str, Any] = {}
        for a in self.trace.aggregates:
            try:
                out[a.display] = a.aggregation().read()
            except Exception as exc:       # nothing left to print for this one
                out[a.display] = f"<unreadable: {type(exc).__name__}: {exc}>"
        return out

    @staticmethod
    def _raw(a: Aggregate) -> Any:
        """What the aggregation reads (avg: as stats, ``(count, average, total)``,
        so that a baseline can be subtracted); shaped by ``a.kind``."""
        impl = a.aggregation()
        return _agg.Stats.read(impl) if isinstance(impl, _agg.Avg) else impl.read()

    def clear(self) -> None:
        """Reset every aggregation (for ``--interval`` with ``--clear``).

        Additive ones (count, sum, histograms, avg, stats) are not touched in
        the kernel: what they hold now becomes a baseline that later reads
        subtract, so no hit is lost between reading and resetting.  min and
        max are reset in the kernel (a hit in between may be lost).
        ``results(clear=True)`` reads and resets in one step."""
        for a in self.trace.aggregates:
            self._clear_one(a, None if a.kind in ("min", "max") else self._raw(a))

    def _clear_one(self, a: Aggregate, read: Any) -> None:
        """Reset ``a``: min/max in the kernel, the others by taking ``read``
        (a raw read of ``a``) as their baseline."""
        if a.kind in ("min", "max"):
            a.aggregation().clear()
        else:
            self._base[a.display] = read

    def format_text(self, results: dict[str, AggResult] | None = None) -> str:
        """The aggregations as bpftrace prints them at exit (sorted by name)."""
        res = self.results() if results is None else results
        return formatting.format_text(self.trace.aggregates, res)

    def format_table(self, results: dict[str, AggResult] | None = None) -> str:
        """The aggregations as tables: one column per key expression and the
        value(s), rows by decreasing value; histograms as bpftrace prints them."""
        res = self.results() if results is None else results
        return formatting.format_table(self.trace.aggregates, res)

    def json_objects(self, results: dict[str, AggResult] | None = None
                     ) -> list[dict[str, Any]]:
        """The aggregations as JSON objects (bpftrace's ``-f json`` shapes):
        ``{"type": "map"|"hist"|"stats", "data": {"@name": ...}}``."""
        res = self.results() if results is None else results
        return formatting.json_objects(self.trace.aggregates, res)

    # ------------------------------------------------------------ lifetime
    def _close_maps(self) -> None:
        self.trace.close()


def _minus(a: Aggregate, data: Any, base: Any) -> Any:
    """``data - base`` for an additive aggregation (keys that did not change dropped)."""
    def one(v: Any, b: Any) -> Any:
        if b is None:
            return v
        if v is None:
            return None
        if a.kind in ("hist", "lhist"):
            d = {k: c - b.get(k, 0) for k, c in v.items()}
            return {k: c for k, c in d.items() if c}
        if a.kind in ("avg", "stats"):
            count, total = v[0] - b[0], v[2] - b[2]
            if not count:
                return None
            return count, abs(total) // count * (1 if total >= 0 else -1), total
        return v - b
    if not a.keys:
        return one(data, base)
    out = {}
    for k, v in data.items():
        d = one(v, base.get(k))
        if d:
            out[k] = d
    return out


def _merge(kind: str, a: Any, b: Any) -> Any:
    """Two values of one key merged (the same stack seen by two processes)."""
    if kind in ("count", "sum"):
        return a + b
    if kind == "min":
        return min(a, b)
    if kind == "max":
        return max(a, b)
    if kind in ("hist", "lhist"):
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + v
        return out
    count, total = a[0] + b[0], a[2] + b[2]
    return count, abs(total) // count * (1 if total >= 0 else -1), total
