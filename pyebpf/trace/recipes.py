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
``arg1 / 1000``...), read by the bpftrace language's parser as the CLI reads
them (C's precedence: ``arg0 + 2 * 3`` is ``arg0 + 6``).  ``latency`` (and ``retval`` on a ``uprobe:``)
attaches the function's entry *and* return probes: the entry saves the time
and the arguments the actions need, keyed by thread, and the actions run at
the return.
"""
from __future__ import annotations

import time
from typing import Any, Iterable, Sequence

from ..errors import ProgramError
from ..kernel.lifetime import Owner, close_all
from ..lang import aggregations as _agg
from .expr import INT, STR, Expr, ExprError, Filter, parse_expr, parse_filters
from .model import (AGG_KINDS, MAX_KEYS, Aggregate, AggResult, AggValue, Built, Event,
                    FieldValue, KeyPart)
from ..probes.sources import ProbeSpec, parse_probe, probe_source
from ..draw.render import event_format, split_field
from ..symbols.stacks import make_stack_map

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypedDict

    from typing_extensions import Unpack

    from ..maps import Map, MapSpec
    from ..program import Program
    from .model import Impl, Source
    # ("X as X": an explicit re-export, as mypy --strict wants it)
    from .trace_session import TraceSession as TraceSession

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

__all__ = ["Trace", "Event", "Aggregate", "count", "histogram", "latency",
           "events", "stacks", "stats", "AGG_KINDS", "KeyPart", "AggValue", "AggResult",
           "FieldValue"]

# (the session is imported on first use: `import pyebpf.trace.recipes` stays light)
if not TYPE_CHECKING:
    def __getattr__(name: str) -> object:
        if name == "TraceSession":
            from .trace_session import TraceSession
            return TraceSession
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _as_expr(x: "Expr | str", strlen: int) -> Expr:
    return x if isinstance(x, Expr) else parse_expr(x, strlen)


def _as_keys(by: _By, strlen: int) -> tuple[Expr, ...]:
    if by is None:
        return ()
    many: Sequence[str | Expr]
    if isinstance(by, (str, Expr)):
        if isinstance(by, str) and "," in by:
            many = _split_top(by)
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


def _probe_names(spec: str, src: Any) -> list[str]:
    """What the ``probe`` expression shows for each function of ``src``: the
    probe with the function's name where ``spec`` names them by a glob (as
    bpftrace does), else ``spec``."""
    functions = getattr(src, "functions", None)
    if not functions:
        return [spec]
    head, _, symbol = spec.rpartition(":")
    if head and any(c in symbol for c in "*?["):
        return [f"{head}:{f}" for f in functions]
    return [spec] * len(functions)


class Trace(Owner):
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

    Building methods return the trace, so calls chain.  A trace owns the
    maps it creates: ``close()``, ``with`` and garbage collection release
    them (an :class:`~pyebpf.kernel.lifetime.Owner`).
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
        self.sources: list[Source] | None = None
        self.built: list[Built] = []
        self._maps: list[Map | _agg.Aggregation] = []      # owned: closed by close()
        self._own(close_all, self._maps)
        # described (MapSpec) when built, created (Map) by open_maps()
        self._stack_map: Map | MapSpec | None = None
        self._events_map: Map | MapSpec | None = None
        self._drops: Map | MapSpec | None = None
        self._start_maps: list[Map | MapSpec | None] = []
        self._opened: dict[str, Map] | None = None
        self._func_names: list[str] = []
        self._func_base: list[int] = []
        self._probe_names: list[str] = []     # (what ``probe`` shows; parallel to _func_names)
        self.start_ns = 0
        for f in filters:
            self.filter(f)

    # ------------------------------------------------------------ building
    def filter(self, condition: "str | Filter") -> "Trace":
        """Run the actions only when ``condition`` holds (``"arg0 > 10"``,
        ``'comm == "bash"'``, ``"arg0 > 10 && arg1 != 0"``); several filters
        must all hold."""
        self._check_not_built()
        self.filters.extend(parse_filters(condition, self.strlen) if isinstance(condition, str)
                            else [condition])
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

    # One method per aggregation kind, alike on purpose: each is what help()
    # and the reference show for its kind; _add does the work.
    # (duplicates: deliberate, one public method per kind, each a one-line call of _add)
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
            name, text = split_field(str(f))
            if name is None:
                named.append((text.strip(), parse_expr(text, self.strlen)))
            else:
                named.append((name, parse_expr(text, self.strlen)))
        self.event_format = event_format(fmt, len(named), "print()", ExprError)
        self.event_fields = named
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

    def resolve(self) -> list[Source]:
        """Resolve the probe specs into probe sources (reads ELF files and
        tracefs; raises on a bad probe before anything is loaded)."""
        if self.sources is None:
            self.sources = [probe_source(s, self.pid, unsafe=self.unsafe) for s in self.specs]
        return self.sources

    def _paired(self, src: Source) -> bool:
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
                self._probe_names += _probe_names(str(self.specs[i]), src)
            from .codegen import generate
            for i, src in enumerate(sources):
                self.built += generate(self, i, src)
        except BaseException:
            self.close()
            self.built = []
            raise
        return self

    def _make_maps(self) -> None:
        if self.closed:                   # built again after a failed build closed it
            self._own(close_all, self._maps)
        for i, a in enumerate(self.aggregates):
            cls = AGG_KINDS[a.kind]
            mname = f"{a.kind}_{a.name or 'at'}"[:15]
            kw: dict[str, Any] = {"keyed": bool(a.keys), "max_keys": MAX_KEYS}
            if a.keys:
                kw["key_size"] = a.key_size
            if a.kind == "lhist":
                kw["linear"] = a.linear
            impl: Impl = cls(mname, create=False, **kw)
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
                         + disassemble(b.program, dialect=dialect))
        return "\n\n".join(parts)

    # ------------------------------------------------------------ running
    def start(self, pid: int | None = None, *, log_level: int = 0,
              attach: bool = True) -> TraceSession:
        """Build (if needed), load and attach every program; returns the
        running :class:`TraceSession` (a context manager that detaches).
        ``attach=False``: loaded only, :meth:`TraceSession.attach` attaches."""
        from .trace_session import TraceSession
        self.build(pid)
        try:
            self.open_maps()
        except BaseException:
            self.close()
            raise
        return TraceSession(self, log_level=log_level, attach=attach)

    def close(self) -> None:
        """Close the maps (sessions close their programs and links)."""
        super().close()

    def _close_resources(self) -> None:
        self._opened = None

    # ------------------------------------------------------------ decoding helpers
    def _record_format(self) -> str:
        parts = ["<Q"]
        for _, e in self.event_fields or []:
            parts.append(f"{e.slot_size}s" if e.kind == STR else "Q")
        return "".join(parts)



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
