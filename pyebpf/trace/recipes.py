"""Recipes: tracing programs generated from a few lines of Python.

A :class:`Trace` names one or more probes and what to do when they fire --
count, sum, min/max/avg/stats, log2 or linear histograms (computed in the
kernel, keyed or not), or events with several fields sent through the perf
buffer or the ring buffer.  It generates one eBPF program per probe with the
DSL (correct by construction for the verifier), shows them on request, and
runs them::

    from pyebpf.trace import Trace
    t = Trace("uprobe:/bin/bash:readline").count(by="comm")
    print(t.show())                    # the generated instructions, for learning
    with t.start() as session:         # load + attach
        time.sleep(5)
        print(session.format_text())   # @[bash]: 3  (bpftrace's format)

The shortcuts below cover the usual questions in one call each:
:func:`count`, :func:`histogram`, :func:`latency`, :func:`events`,
:func:`stacks`, :func:`stats`.

Expressions are those of :mod:`pyebpf.trace.expr` (``arg0``, ``retval``,
``latency``, ``comm``, ``str(arg0)``, ``ustack``, ``args.filename``,
``arg1 / 1000``...).  ``latency`` (and ``retval`` on a ``uprobe:``)
attaches the function's entry *and* return probes: the entry saves the time
and the arguments the actions need, keyed by thread, and the actions run at
the return.
"""
from __future__ import annotations

import dataclasses
import struct
import time
from typing import Any, Callable, Iterable, Sequence, cast

from ..errors import ProgramError
from ..program import R0, R1, R2, R6, R7, R8, R9, R10, Program
from . import aggregate as _agg
from .expr import (FUNC, INT, PROBE, STACK, STR, EmitEnv, Expr, ExprError, Filter,
                   emit_bytes, emit_filter, emit_int, parse_expr, parse_filter, signed)
from .probes import ProbeSpec, UprobeSource, parse_probe, probe_source
from .render import (format_count, format_hist, format_printf, hist_json, printf_specs,
                     unescape)
from .stacks import (Symbolizer, demangle, format_stack, make_stack_map, split_stack_key,
                     stack_error)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypedDict

    from typing_extensions import Unpack

    from ..attach import Link
    from ..events import PerfBuffer, RingBufferReader
    from ..loader import LoadedProgram
    from ..maps import Map, MapSpec, PerCpuArrayMap, PerfEventArray, RingBuf, StackTraceMap
    from .usdt_source import UsdtProbeSource
    from .probes import TracepointSource

    #: a resolved probe (what :func:`~pyebpf.trace.probes.probe_source` returns)
    _Source = UprobeSource | TracepointSource | UsdtProbeSource
    #: the aggregation object behind an :class:`Aggregate`
    _Impl = _agg.Count | _agg.Sum | _agg.Min | _agg.Max | _agg.Stats | _agg.Histogram
    #: what ``by=`` takes: one expression, several (a sequence, or a string
    #: with top-level commas), or None (not keyed)
    _By = str | Expr | Sequence[str | Expr] | None

    class _TraceOptions(TypedDict, total=False):
        """The keyword arguments of :class:`Trace` that the shortcuts pass on."""

        pid: int | None
        strlen: int
        ring: bool
        buffer_size: int
        filters: Iterable[str | Filter]
        unsafe: bool

__all__ = ["Trace", "TraceSession", "Event", "Aggregate", "count", "histogram", "latency",
           "events", "stacks", "stats", "AGG_KINDS", "KeyPart", "AggValue", "AggResult",
           "FieldValue"]

#: one part of an aggregation key as shown: a number, a string (``comm``,
#: ``str(...)``, ``probe``, ``func``), or a user stack (its frames, innermost first)
KeyPart = int | str | tuple[str, ...]
#: the value of one key of an aggregation: count/sum/min/max/avg an int (min,
#: max and avg None while nothing was recorded), stats ``(count, average,
#: total)`` (None likewise), hist/lhist ``{bucket: count}``
AggValue = int | tuple[int, int, int] | dict[int, int] | None
#: what :meth:`TraceSession.results` gives per aggregation: its value, or
#: when keyed ``{key: value}`` with one :data:`KeyPart` per key expression
AggResult = AggValue | dict[tuple[KeyPart, ...], AggValue]
#: the value of an event field: a number, a string, or a stack's frames
FieldValue = int | str | list[str]

#: aggregation kinds -> class of :mod:`pyebpf.trace.aggregate`
AGG_KINDS = {"count": _agg.Count, "sum": _agg.Sum, "min": _agg.Min, "max": _agg.Max,
             "avg": _agg.Avg, "stats": _agg.Stats, "hist": _agg.Histogram,
             "lhist": _agg.Histogram}
_MAX_KEYS = 10240


@dataclasses.dataclass
class Aggregate:
    """One aggregation of a :class:`Trace` (``@name[keys] = kind(value)``)."""

    kind: str
    value: Expr | None
    keys: tuple[Expr, ...]
    name: str | None = None
    linear: tuple[int, int, int] | None = None
    impl: _Impl | None = None          # the aggregate.* object, once built

    @property
    def display(self) -> str:
        """The name as printed: ``@`` then the name (``@`` alone when unnamed)."""
        return "@" + (self.name or "")

    @property
    def key_size(self) -> int:
        """Bytes of the map key: the key expressions' slots (8 when unkeyed)."""
        return sum(k.slot_size for k in self.keys) or 8

    def aggregation(self) -> _Impl:
        """The :mod:`~pyebpf.trace.aggregate` object (a :class:`ProgramError`
        before the trace is built)."""
        if self.impl is None:
            raise ProgramError(f"{self.display}: the trace is not built yet")
        return self.impl


@dataclasses.dataclass
class Event:
    """One event: the probe that fired and its fields by name."""

    probe: str
    fields: dict[str, FieldValue]
    line: str = ""

    def to_json(self) -> dict[str, Any]:
        """The event as a JSON object: ``{"type": "event", "probe": ..., "fields": {...}}``."""
        return {"type": "event", "probe": self.probe, "fields": self.fields}


@dataclasses.dataclass
class _Built:
    title: str
    source: _Source
    program: Program
    role: str              # "direct", "entry" or "return"
    attach_pid: bool = True


def _marker(p: Program, probe: str) -> Callable[[str | None], None]:
    """``mark(text)`` starts a section of ``p``'s code: its instructions get
    the origin ``<probe: text>`` (a verifier complaint names the action) and
    :meth:`Trace.show` comments the section's first instruction with
    ``text``.  ``mark(None)`` closes the last section."""
    state: dict[str, Any] = {"start": None, "text": None}
    comments: dict[int, str] = {}
    p.section_comments = comments            # type: ignore[attr-defined]

    def mark(text: str | None) -> None:
        start, prev = state["start"], state["text"]
        if start is not None and prev is not None:
            origin = f"<{probe}: {prev}>"
            for insn in p.insns[start:]:
                insn.origin = origin
            slot = sum(insn.slots for insn in p.insns[:start])
            if start < len(p.insns):
                comments[slot] = prev
        state["start"], state["text"] = len(p.insns), text
    return mark


def _as_expr(x: "Expr | str", strlen: int) -> Expr:
    return x if isinstance(x, Expr) else parse_expr(x, strlen)


def _as_keys(by: _By, strlen: int) -> tuple[Expr, ...]:
    if by is None:
        return ()
    many: Sequence[str | Expr]
    if isinstance(by, (str, Expr)):
        if isinstance(by, str) and "," in by and not by.strip().startswith("str("):
            many = [b for b in _split_top(by)]
        else:
            many = [by]
    else:
        many = by
    return tuple(_as_expr(b, strlen) for b in many)


def _split_top(text: str) -> list[str]:
    """Split ``a, str(b, 8), c`` at top-level commas."""
    out: list[str] = []
    depth, cur = 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


class Trace:
    """Probes and the actions to run when they fire (see the module docs).

    Args:
        probes: probe specs (``"uprobe:/bin/bash:readline"``...), all running
            the same actions.
        pid: trace only this process (uprobes are attached for it alone;
            other probes filter in the program).
        strlen: default size of ``str()`` buffers (bpftrace's is 64).
        ring: send events through a ring buffer instead of the perf buffer.
        buffer_size: bytes of each perf ring (per CPU) or of the ring buffer
            (1 byte to 2 GiB, rounded up to a power-of-two number of pages).
        filters: conditions every action needs (``"arg0 > 10"``...).
        unsafe: let uprobes go on addresses not proven to start an
            instruction (see :func:`pyebpf.attach.attach_uprobe`).

    Building methods return the trace, so calls chain.
    """

    def __init__(self, *probes: "str | ProbeSpec", pid: int | None = None, strlen: int = 64,
                 ring: bool = False, buffer_size: int = 1 << 20,
                 filters: Iterable["str | Filter"] = (), unsafe: bool = False) -> None:
        if not probes:
            raise ProgramError("a Trace needs at least one probe spec")
        from ..maps import perf_ring_size
        perf_ring_size(buffer_size)     # 1 byte .. 2 GiB, checked before anything is built
        self.specs = [parse_probe(p) if isinstance(p, str) else p for p in probes]
        self.pid = pid
        self.unsafe = unsafe
        self.strlen = strlen
        self.ring = ring
        self.buffer_size = buffer_size
        self.aggregates: list[Aggregate] = []
        self.filters: list[Filter] = []
        self.event_fields: list[tuple[str, Expr]] | None = None
        self.event_format: str | None = None
        self.sources: list[_Source] | None = None
        self.built: list[_Built] = []
        self._maps: list[Map | _agg.Aggregation] = []
        # described (MapSpec) when built, created (Map) by open_maps()
        self._stack_map: Map | MapSpec | None = None
        self._events_map: Map | MapSpec | None = None
        self._drops: Map | MapSpec | None = None
        self._start_maps: list[Map | MapSpec | None] = []
        self._opened: dict[str, Map] | None = None
        self._func_names: list[str] = []
        self._func_base: list[int] = []
        self.start_ns = 0
        for f in filters:
            self.filter(f)

    # ------------------------------------------------------------ building
    def filter(self, condition: "str | Filter") -> "Trace":
        """Run the actions only when ``condition`` holds (``"arg0 > 10"``,
        ``'comm == "bash"'``); several filters must all hold."""
        self._check_not_built()
        self.filters.append(parse_filter(condition, self.strlen) if isinstance(condition, str)
                            else condition)
        return self

    def _add(self, kind: str, value: Expr | str | None, by: _By, name: str | None,
             linear: tuple[int, int, int] | None = None) -> "Trace":
        self._check_not_built()
        if value is None and kind != "count":
            raise ExprError(f"{kind}() needs a value to aggregate (an expression such as arg0)")
        val = _as_expr(value, self.strlen) if value is not None else None
        if val is not None and val.kind != INT:
            raise ExprError(f"{kind}({val.text}): {val.text} is not a number")
        if name is not None:
            name = name.lstrip("@")
            if name and not name.replace("_", "a").isalnum():
                raise ExprError(f"an aggregation name is letters, digits and _, not {name!r}")
        self.aggregates.append(Aggregate(kind, val, _as_keys(by, self.strlen), name, linear))
        return self

    def count(self, by: _By = None, name: str | None = None) -> "Trace":
        """``@name[by] = count()``: how many times the probes fired (per key)."""
        return self._add("count", None, by, name)

    def sum(self, value: Expr | str, by: _By = None, name: str | None = None) -> "Trace":
        """``@name[by] = sum(value)``."""
        return self._add("sum", value, by, name)

    def min(self, value: Expr | str, by: _By = None, name: str | None = None) -> "Trace":
        """``@name[by] = min(value)`` (signed)."""
        return self._add("min", value, by, name)

    def max(self, value: Expr | str, by: _By = None, name: str | None = None) -> "Trace":
        """``@name[by] = max(value)`` (signed)."""
        return self._add("max", value, by, name)

    def avg(self, value: Expr | str, by: _By = None, name: str | None = None) -> "Trace":
        """``@name[by] = avg(value)`` (integer average)."""
        return self._add("avg", value, by, name)

    def stats(self, value: Expr | str, by: _By = None, name: str | None = None) -> "Trace":
        """``@name[by] = stats(value)``: count, average and total."""
        return self._add("stats", value, by, name)

    def hist(self, value: Expr | str, by: _By = None, name: str | None = None) -> "Trace":
        """``@name[by] = hist(value)``: a log2 histogram computed in the kernel."""
        return self._add("hist", value, by, name)

    def lhist(self, value: Expr | str, lo: int, hi: int, step: int, by: _By = None,
              name: str | None = None) -> "Trace":
        """``@name[by] = lhist(value, lo, hi, step)``: a linear histogram of
        at most 1000 buckets in ``[lo, hi)`` (bpftrace's cap; checked here,
        before anything is built) plus the two open-ended ones."""
        _agg.linear_buckets(lo, hi, step)       # the bucket cap, checked before anything is built
        return self._add("lhist", value, by, name, (lo, hi, step))

    def print(self, fmt: str | None, *fields: str | Expr) -> "Trace":
        """Send an event per hit with ``fields`` and print it with the C-style
        ``fmt`` (None: the fields separated by spaces).  A field is an
        expression, or ``name=expression`` to choose its name in JSON."""
        self._check_not_built()
        if self.event_fields is not None:
            raise ProgramError("a trace has one event format (one print())")
        named: list[tuple[str, Expr]] = []
        for f in fields:
            if isinstance(f, Expr):
                named.append((f.text, f))
                continue
            name, eq, text = str(f).partition("=")
            if eq and name.strip().isidentifier() and not text.startswith("="):
                named.append((name.strip(), parse_expr(text, self.strlen)))
            else:
                named.append((str(f).strip(), parse_expr(str(f), self.strlen)))
        if not named:
            raise ExprError("print() needs at least one field")
        if fmt is not None:
            fmt = unescape(fmt)
            n = len(printf_specs(fmt))
            if n != len(named):
                raise ExprError(f"the format {fmt!r} has {n} conversion(s) but {len(named)} "
                                 "field(s) were given")
            if not fmt.endswith("\n"):
                fmt += "\n"
        self.event_fields = named
        self.event_format = fmt
        return self

    events = print

    def _check_not_built(self) -> None:
        if self.built:
            raise ProgramError("this trace is already built; make a new Trace")

    # ------------------------------------------------------------ resolution
    def _exprs(self) -> list[Expr]:
        out: list[Expr] = []
        for a in self.aggregates:
            out += list(a.keys) + ([a.value] if a.value is not None else [])
        for f in self.filters:
            out += f.exprs()
        if self.event_fields:
            out += [e for _, e in self.event_fields]
        return out

    def uses(self, name: str) -> bool:
        """Whether an expression of the trace (aggregations, filters, event
        fields) reads ``name`` (``"latency"``, ``"retval"``, ``"ustack"``...)."""
        return any(e.uses(name) for e in self._exprs())

    def resolve(self) -> list[_Source]:
        """Resolve the probe specs into probe sources (reads ELF files and
        tracefs; raises on a bad probe before anything is loaded)."""
        if self.sources is None:
            self.sources = [probe_source(s, self.pid, unsafe=self.unsafe) for s in self.specs]
        return self.sources

    def _paired(self, src: _Source) -> bool:
        if not hasattr(src, "entry"):
            return False
        if self.uses("latency"):
            return True
        if getattr(src, "kind", None) == "uprobe":
            return self.uses("retval")
        return any(e.args_used() for e in self._exprs())

    def _names(self) -> None:
        used: dict[str, int] = {}
        if len(self.aggregates) == 1 and self.aggregates[0].name is None:
            self.aggregates[0].name = ""
            return
        for a in self.aggregates:
            if a.name is None:
                base = a.kind
                used[base] = used.get(base, 0) + 1
                a.name = base if used[base] == 1 else f"{base}{used[base]}"
        names = [a.name or "" for a in self.aggregates]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ExprError(f"two aggregations are named @{sorted(dup)[0]}")

    def build(self, pid: int | None = None) -> "Trace":
        """Describe the maps and generate the programs (nothing is created in
        the kernel: :meth:`show` needs no privilege; :meth:`start` creates the
        maps, loads and attaches).

        ``pid`` (default: the one given at construction) is compiled into the
        programs as a filter.
        """
        if self.built:
            return self
        if pid is not None:
            self.pid = pid
        if not self.aggregates and self.event_fields is None:
            self.count(by="probe")
        sources = self.resolve()
        self._names()
        self.start_ns = time.monotonic_ns()      # CLOCK_MONOTONIC, as bpf_ktime_get_ns
        try:
            self._make_maps()
            for i, src in enumerate(sources):
                self._func_base.append(len(self._func_names))
                self._func_names += list(getattr(src, "functions", [str(self.specs[i])]))
            for i, src in enumerate(sources):
                self._gen(i, src)
        except BaseException:
            self.close()
            self.built = []
            raise
        return self

    def _make_maps(self) -> None:
        for i, a in enumerate(self.aggregates):
            cls = AGG_KINDS[a.kind]
            mname = f"{a.kind}_{a.name or 'at'}"[:15]
            kw: dict[str, Any] = {"keyed": bool(a.keys), "max_keys": _MAX_KEYS}
            if a.keys:
                kw["key_size"] = a.key_size
            if a.kind == "lhist":
                kw["linear"] = a.linear
            impl: _Impl = cls(mname, create=False, **kw)
            a.impl = impl
            self._maps.append(impl)
        from ..maps import MapSpec, PerCpuArrayMap, PerfEventArray, RingBuf
        if self.uses("ustack"):
            self._stack_map = make_stack_map(create=False)
        if self.event_fields is not None:
            if self.ring:
                size = 1 << max(12, (self.buffer_size - 1).bit_length())
                self._events_map = MapSpec(RingBuf, size, name="events")
                self._drops = MapSpec(PerCpuArrayMap, "u64", 1, name="drops")
            else:
                self._events_map = MapSpec(PerfEventArray, name="events")

    def open_maps(self) -> dict[str, Map]:
        """Create in the kernel every map the built programs use (once);
        returns them by the name the programs use."""
        from ..maps import MapSpec
        if self._opened is not None:
            return self._opened
        out: dict[str, Map] = {}

        def real(m: Map | MapSpec | None) -> Map | None:
            if isinstance(m, MapSpec):
                m = m.create()
                self._maps.append(m)
            if m is not None:
                out[m.name] = m
            return m
        for a in self.aggregates:
            impl = a.aggregation()
            impl.open()
            created = impl._live()
            out[created.name] = created
        self._stack_map = real(self._stack_map)
        self._events_map = real(self._events_map)
        self._drops = real(self._drops)
        self._start_maps = [real(m) for m in self._start_maps]
        self._opened = out
        return out

    # ------------------------------------------------------------ generation
    def _pid_filter(self, p: Program, out: str) -> None:
        if self.pid:
            p.call("get_current_pid_tgid")
            p.rsh(R0, 32)
            p.jne(R0, self.pid, out)

    def _gen(self, i: int, src: _Source) -> None:
        spec = str(self.specs[i])
        if self._paired(src) and isinstance(src, UprobeSource):    # (only uprobes pair)
            entry, ret = src.entry(), src.ret()
            used: set[int] = set().union(*(e.args_used() for e in self._exprs()))
            saved = sorted(used)
            from ..maps import HashMap, MapSpec
            start = MapSpec(HashMap, "u64", f"<{1 + len(saved)}Q", max_entries=_MAX_KEYS,
                            name=f"start{i}")
            self._start_maps.append(start)
            self.built.append(_Built(f"{spec} (entry: saves the time"
                                     + (f" and arg{', arg'.join(map(str, saved))}" if saved else "")
                                     + ")", entry, self._gen_entry(i, entry, start, saved),
                                     "entry"))
            self.built.append(_Built(f"{spec} (return: runs the actions)", ret,
                                     self._gen_actions(i, ret, start, saved), "return"))
        else:
            self.built.append(_Built(spec, src, self._gen_actions(i, src, None, []), "direct"))

    def _gen_entry(self, i: int, src: UprobeSource, start: MapSpec,
                   saved: list[int]) -> Program:
        p = Program(f"entry{i}")
        mark = _marker(p, str(self.specs[i]) + " entry")
        mark("keep the context")
        p.mov(R6, R1)
        if self.pid:
            mark(f"only pid {self.pid}")
        self._pid_filter(p, "out")
        mark("start[thread] = (now" + "".join(f", arg{n}" for n in saved) + ")")
        val = p.stack.alloc(8 * (1 + len(saved)))
        for j, n in enumerate(saved):
            src.emit_arg(p, R7, n, R6)
            p.stxdw(R10, val + 8 + 8 * j, R7)
        p.call("ktime_get_ns")
        p.stxdw(R10, val, R0)
        p.call("get_current_pid_tgid")
        key = p.stack_store(R0, 8)
        p.map_update(start, key, val, flags=0)
        p.label("out")
        mark("return 0")
        p.ret(0)
        mark(None)
        return p

    def _gen_actions(self, i: int, src: _Source, start: MapSpec | None,
                     saved: list[int]) -> Program:
        p = Program(f"probe{i}")
        mark = _marker(p, str(self.specs[i]))
        mark("keep the context")
        p.mov(R6, R1)
        stack_map = cast("StackTraceMap | MapSpec | None", self._stack_map)   # (described)
        env = EmitEnv(ctx=R6, source=src, probe_index=i, func_base=self._func_base[i],
                      stack_map=stack_map, at_return=start is not None,
                      start_ns=self.start_ns)
        if self.pid:
            mark(f"only pid {self.pid}")
        self._pid_filter(p, "out")
        if start is not None:
            mark("take start[thread] (saved at the entry); latency = now - its time")
            p.call("get_current_pid_tgid")
            key = p.stack_store(R0, 8)
            n = 1 + len(saved)
            copy = p.stack.alloc(8 * n)
            p.map_lookup(start, key, "out", dst=R7)
            for j in range(n):
                p.ldxdw(R1, R7, 8 * j)
                p.stxdw(R10, copy + 8 * j, R1)
            p.ld_map(R1, start)
            p.stack_pointer(R2, key)
            p.call("map_delete_elem")
            p.call("ktime_get_ns")
            p.ldxdw(R1, R10, copy)
            p.sub(R0, R1)
            env.latency_slot = p.stack_store(R0, 8)
            env.saved_args = {n_: copy + 8 + 8 * j for j, n_ in enumerate(saved)}
        for f in self.filters:
            mark(f"filter: {f.text}")
            emit_filter(p, f, env, "out", R7, R8)
        keys_at: dict[tuple[str, ...], int] = {}
        for a in self.aggregates:
            key_off = None
            if a.keys:
                sig = tuple(k.text for k in a.keys)
                key_off = keys_at.get(sig)
                if key_off is None:
                    mark(f"key: {', '.join(sig)}")
                    key_off = keys_at[sig] = self._emit_struct(p, a.keys, env)
            keytext = f"[{', '.join(k.text for k in a.keys)}]" if a.keys else ""
            what = a.kind
            arg = a.value.text if a.value is not None else ""
            if a.linear:
                arg += ", " + ", ".join(map(str, a.linear))
            mark(f"{a.display}{keytext} = {what}({arg})")
            impl = a.aggregation()
            if isinstance(impl, _agg.Count):
                impl.emit(p, key=key_off)
            elif a.value is not None:
                emit_int(p, a.value, R7, env)
                impl.emit(p, R7, key=key_off)
            else:                                   # (_add refuses it)
                raise ExprError(f"{a.kind}() needs a value")
        if self.event_fields is not None:
            exprs = [e for _, e in self.event_fields]
            mark(f"event: probe, {', '.join(e.text for e in exprs)} -> "
                 f"{'ring buffer' if self.ring else 'perf buffer'}")
            rec = self._emit_struct(p, [parse_expr("probe")] + exprs, env)
            size = 8 + sum(e.slot_size for e in exprs)
            if self.ring:
                p.ringbuf_output(self._events_map, rec, size, drops=self._drops)
            else:
                p.perf_event_output(self._events_map, rec, size, ctx=R6)
        p.label("out")
        mark("return 0")
        p.ret(0)
        mark(None)
        return p

    @staticmethod
    def _emit_struct(p: Program, exprs: Sequence[Expr], env: EmitEnv) -> int:
        """Lay ``exprs`` out on the stack (8-byte slots, strings padded); return
        the offset."""
        size = sum(e.slot_size for e in exprs)
        if size > 448:
            raise ProgramError(f"the values {', '.join(e.text for e in exprs)} need {size} bytes "
                               "of stack; use shorter strings (--strlen / str(x, N))")
        base = p.stack.alloc(size)
        pos = base
        for e in exprs:
            if e.kind == STR:
                emit_bytes(p, e, pos, env, R9)
            else:
                emit_int(p, e, R9, env)
                p.stxdw(R10, pos, R9)
            pos += e.slot_size
        return base

    # ------------------------------------------------------------ introspection
    @property
    def programs(self) -> list[Program]:
        """The generated programs (built on first access)."""
        self.build()
        return [b.program for b in self.built]

    @property
    def program(self) -> Program:
        """The program that runs the actions of the first probe."""
        self.build()
        return next(b.program for b in self.built if b.role != "entry")

    def show(self, dialect: str = "llvm") -> str:
        """The generated programs as text, one titled section per program."""
        from ..text import disassemble
        self.build()
        parts = []
        for b in self.built:
            parts.append(f"; {b.title}\n; attached at {b.source.describe()}\n"
                         f"; {len(b.program)} instructions, {b.program.stack.used} bytes of stack\n"
                         + disassemble(b.program, dialect=dialect,
                                       comments=getattr(b.program, "section_comments", None)))
        return "\n\n".join(parts)

    # ------------------------------------------------------------ running
    def start(self, pid: int | None = None, *, log_level: int = 0) -> "TraceSession":
        """Build (if needed), load and attach every program; returns the
        running :class:`TraceSession` (a context manager that detaches)."""
        self.build(pid)
        try:
            self.open_maps()
        except BaseException:
            self.close()
            raise
        return TraceSession(self, log_level=log_level)

    def close(self) -> None:
        """Close the maps (sessions close their programs and links)."""
        for m in self._maps:
            try:
                m.close()
            except Exception:
                pass
        self._maps = []
        self._opened = None

    def __enter__(self) -> "Trace":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------ decoding helpers
    def _record_format(self) -> str:
        parts = ["<Q"]
        for _, e in self.event_fields or []:
            parts.append(f"{e.slot_size}s" if e.kind == STR else "Q")
        return "".join(parts)


class TraceSession:
    """A running :class:`Trace`: programs loaded and attached, maps readable.

    Attributes: ``links``, ``loaded`` (programs), ``reader`` (the event reader
    or None), ``attach_seconds`` (time to load and attach everything),
    ``symbolizer``.
    """

    def __init__(self, trace: Trace, log_level: int = 0) -> None:
        from ..attach import UPROBE_MULTI, uprobe_method
        from ..loader import load
        self.trace = trace
        self.loaded: list[LoadedProgram] = []
        self.links: list[Link] = []
        self.reader: PerfBuffer | RingBufferReader | None = None
        self.lost = 0
        self._closed = False
        t0 = time.perf_counter()
        files = [getattr(s, "path", None) for s in trace.sources or []]
        self.symbolizer = Symbolizer([f for f in files if f])
        self._stack_cache: dict[tuple[int, int], list[str]] = {}
        self._base: dict[str, Any] = {}     # display name -> raw read (see clear())
        try:
            if trace.event_fields is not None:
                from ..events import PerfBuffer, RingBufferReader
                fmt = trace._record_format()
                # (open_maps() created them: a RingBuf and its drops, or a PerfEventArray)
                if trace.ring:
                    self.reader = RingBufferReader(cast("RingBuf", trace._events_map),
                                                   drops=cast("PerCpuArrayMap", trace._drops),
                                                   decode=fmt, on_lost=self._on_lost)
                else:
                    self.reader = PerfBuffer(cast("PerfEventArray", trace._events_map),
                                             size=trace.buffer_size,
                                             decode=fmt, on_lost=self._on_lost)
            kernel_pid_ok: bool | None = None
            for b in trace.built:
                opts = dict(b.source.load_options)
                ptype = opts.pop("prog_type", b.source.prog_type)
                prog = load(b.program, ptype, log_level=log_level, maps=trace.open_maps(),
                            **opts)
                self.loaded.append(prog)
            # attach the return programs first: an entry then always finds its return
            order = sorted(range(len(trace.built)), key=lambda j: trace.built[j].role == "entry")
            for j in order:
                b = trace.built[j]
                pid = None
                if trace.pid and hasattr(b.source, "entry"):
                    if kernel_pid_ok is None:
                        kernel_pid_ok = uprobe_method() == UPROBE_MULTI
                    pid = trace.pid if kernel_pid_ok else None
                elif trace.pid and getattr(b.source, "kind", "") not in ("tracepoint",):
                    pid = trace.pid
                self.links.append(b.source.attach(self.loaded[j], pid=pid))
        except BaseException:
            self.close()
            raise
        self.attach_seconds = time.perf_counter() - t0
        if trace.pid:
            self.symbolizer.remember_pid(trace.pid)

    def _on_lost(self, cpu: int, n: int) -> None:
        self.lost += n

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

    def _value(self, e: Expr, raw: Any, src: _Source | None) -> FieldValue:
        """A raw key part / field (int or bytes, by ``e.kind``) as shown to the user."""
        t = self.trace
        if e.kind == STR:
            text: str = raw.split(b"\0", 1)[0].decode(errors="replace")
            return text
        if e.kind == STACK:
            return self.stack(raw)
        if e.kind == PROBE:
            return str(t.specs[raw]) if raw < len(t.specs) else f"probe {raw}"
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
        out = []
        for name, e in self.trace.event_fields or []:
            w = {STR: min(e.size, 16), INT: 7, PROBE: 24, FUNC: 16, STACK: 0}.get(e.kind, 8)
            out.append(max(len(name), w))
        return out

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
        if isinstance(raw, int):
            parts: list[Any] = [raw]
        else:
            parts, pos = [], 0
            for e in a.keys:
                chunk = raw[pos:pos + e.slot_size]
                parts.append(chunk if e.kind == STR else struct.unpack_from("<Q", chunk)[0])
                pos += e.slot_size
        src = self.trace.sources[0] if self.trace.sources else None
        return tuple(self._value(e, v, src) for e, v in zip(a.keys, parts))

    def results(self) -> dict[str, AggResult]:
        """Every aggregation by display name (``"@"``, ``"@hist"``...).

        Unkeyed: the value (hist: ``{bucket: count}``; stats: ``(count,
        average, total)``).  Keyed: ``{key: value}`` with the key a tuple
        (one item per key expression; stacks as tuples of frames).
        Identical keys (the same stack seen by several processes) are merged.
        """
        out: dict[str, AggResult] = {}
        for a in self.trace.aggregates:
            data = self._raw(a)
            base = self._base.get(a.display)
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
        max are reset in the kernel (a hit in between may be lost)."""
        for a in self.trace.aggregates:
            if a.kind in ("min", "max"):
                a.aggregation().clear()
            else:
                self._base[a.display] = self._raw(a)

    def format_text(self, results: dict[str, AggResult] | None = None) -> str:
        """The aggregations as bpftrace prints them at exit (sorted by name)."""
        res = self.results() if results is None else results
        chunks = []
        by_name = {a.display: a for a in self.trace.aggregates}
        for name in sorted(res):
            a = by_name[name]
            chunks.append(_format_agg(a, res[name]))
        return "".join(chunks)

    def format_table(self, results: dict[str, AggResult] | None = None) -> str:
        """The aggregations as tables: one column per key expression and the
        value(s), rows by decreasing value; histograms as bpftrace prints them."""
        res = self.results() if results is None else results
        by_name = {a.display: a for a in self.trace.aggregates}
        chunks = []
        for name in sorted(res):
            a = by_name[name]
            data: Any = res[name]          # {key: value} (keyed, shaped by a.kind)
            if a.kind in ("hist", "lhist") or not a.keys:
                chunks.append(_format_agg(a, data))
                continue
            cols = [k.text for k in a.keys]
            vcols = ["COUNT", "AVERAGE", "TOTAL"] if a.kind == "stats" else [
                f"{a.kind.upper()}({a.value.text})" if a.value is not None else "COUNT"]
            def sort_key(kv: tuple[tuple[KeyPart, ...], Any]) -> int:
                v = kv[1]
                order: int = -(v[2] if a.kind == "stats" else v)
                return order
            rows = []
            for k, v in sorted(data.items(), key=sort_key):
                keys = [" / ".join(x) if isinstance(x, tuple) else str(x) for x in k]
                vals = [str(x) for x in v] if a.kind == "stats" else [str(v)]
                rows.append(keys + vals)
            head = [c.upper() for c in cols] + vcols
            widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
            nkeys = len(cols)

            def line(r: list[str]) -> str:
                return "  ".join(c.ljust(widths[i]) if i < nkeys else c.rjust(widths[i])
                                 for i, c in enumerate(r)).rstrip()
            chunks.append(f"{name}\n" + "\n".join(line(r) for r in [head] + rows) + "\n\n")
        return "".join(chunks)

    def json_objects(self, results: dict[str, AggResult] | None = None) -> list[dict[str, Any]]:
        """The aggregations as JSON objects (bpftrace's ``-f json`` shapes):
        ``{"type": "map"|"hist"|"stats", "data": {"@name": ...}}``."""
        res = self.results() if results is None else results
        out: list[dict[str, Any]] = []
        by_name = {a.display: a for a in self.trace.aggregates}
        for name in sorted(res):
            a = by_name[name]
            out.append(_json_agg(a, res[name]))
        return out

    # ------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Detach, unload, close the reader and the trace's maps (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for link in self.links:
            try:
                link.detach()
            except Exception:
                pass
        for prog in self.loaded:
            try:
                prog.close()
            except Exception:
                pass
        if self.reader is not None:
            try:
                self.lost = max(self.lost, self.reader.lost)
            except Exception:
                pass
            self.reader.close()
        self.trace.close()

    def detach(self) -> None:
        """Detach the probes but keep the maps readable."""
        for link in self.links:
            link.detach()

    def __enter__(self) -> "TraceSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---------------------------------------------------------------- formatting
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


def _key_str(key: tuple[KeyPart, ...], for_json: bool = False) -> str:
    parts = []
    for k in key:
        if isinstance(k, tuple):          # a stack
            parts.append(";".join(reversed(k)) if for_json else format_stack(k))
        else:
            parts.append(str(k))
    return ", ".join(parts)


def _format_agg(a: Aggregate, data: Any) -> str:
    name = a.name or ""
    if a.kind in ("hist", "lhist"):
        if a.keys:
            data = {_key_str(k): v for k, v in data.items()}
        return format_hist(name, data or {}, linear=a.linear, keyed=bool(a.keys))
    if a.kind == "stats":
        def st(v: tuple[int, int, int]) -> str:
            return f"count {v[0]}, average {v[1]}, total {v[2]}"
        if a.keys:
            lines = [f"@{name}[{_key_str(k)}]: {st(v)}"
                     for k, v in sorted(data.items(), key=lambda kv: (kv[1][2], str(kv[0])))]
            return "\n".join(lines) + "\n\n" if lines else ""
        return f"@{name}: {st(data) if data else 'count 0, average 0, total 0'}\n\n"
    if a.keys:
        text = format_count(name, {_key_str(k): v for k, v in data.items()})
        text = text + "\n" if text else ""
    else:
        text = format_count(name, 0 if data is None else data) + "\n"
    return text + ("\n" if a.kind == "avg" else "")


def _json_agg(a: Aggregate, data: Any) -> dict[str, Any]:
    name = a.display
    if a.kind in ("hist", "lhist"):
        h = cast("_agg.Histogram", a.aggregation())

        def conv(b: dict[int, int]) -> list[dict[str, Any]]:
            return hist_json(b, h.bucket_range)
        hists = ({_key_str(k, True): conv(v) for k, v in data.items()} if a.keys
                 else conv(data or {}))
        return {"type": "hist", "data": {name: hists}}
    if a.kind == "stats":
        def st(v: tuple[int, int, int] | None) -> dict[str, int]:
            v = v or (0, 0, 0)
            return {"count": v[0], "average": v[1], "total": v[2]}
        stats_ = {_key_str(k, True): st(v) for k, v in data.items()} if a.keys else st(data)
        return {"type": "stats", "data": {name: stats_}}
    body = {_key_str(k, True): v for k, v in data.items()} if a.keys else data
    return {"type": "map", "data": {name: body}}


# ---------------------------------------------------------------- shortcuts
def count(probe: str, by: _By = None, **kw: Unpack[_TraceOptions]) -> Trace:
    """Count hits of ``probe`` (per ``by`` key: ``"arg0"``, ``"comm"``, ``"ustack"``...)."""
    return Trace(probe, **kw).count(by=by)


def histogram(probe: str, value: str, *, by: _By = None,
              linear: tuple[int, int, int] | None = None,
              **kw: Unpack[_TraceOptions]) -> Trace:
    """A log2 (or ``linear=(lo, hi, step)``) histogram of ``value`` at ``probe``."""
    t = Trace(probe, **kw)
    return t.lhist(value, *linear, by=by) if linear else t.hist(value, by=by)


def latency(function_probe: str, *, by: _By = None, unit: str = "ns",
            **kw: Unpack[_TraceOptions]) -> Trace:
    """A log2 histogram of a function's latency (``uprobe:PATH:func``; the
    entry and return probes are both attached).  ``unit``: ns, us or ms."""
    div = {"ns": 1, "us": 1000, "ms": 1_000_000}.get(unit)
    if div is None:
        raise ExprError(f"unit must be ns, us or ms, not {unit!r}")
    return Trace(function_probe, **kw).hist("latency" + (f" / {div}" if div > 1 else ""),
                                            by=by, name=f"latency_{unit}")


def events(probe: str, *fields: str, fmt: str | None = None,
           **kw: Unpack[_TraceOptions]) -> Trace:
    """An event per hit carrying ``fields`` (``"pid"``, ``"comm"``,
    ``"str(arg0)"``, ``"name=arg1"``...), printed with ``fmt``."""
    return Trace(probe, **kw).print(fmt, *fields)


def stacks(probe: str, **kw: Unpack[_TraceOptions]) -> Trace:
    """Count the user stacks that reach ``probe`` (symbolized when read)."""
    return Trace(probe, **kw).count(by="ustack")


def stats(probe: str, value: str, by: _By = None, **kw: Unpack[_TraceOptions]) -> Trace:
    """count/sum/min/max/avg of ``value`` at once (@count, @sum, @min, @max, @avg)."""
    t = Trace(probe, **kw)
    return t.count(by=by).sum(value, by=by).min(value, by=by).max(value, by=by).avg(value, by=by)
