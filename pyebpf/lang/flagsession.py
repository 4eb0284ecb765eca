"""``pyebpf trace``'s flags run through the language.

:class:`FlagTrace` compiles a :class:`~pyebpf.lang.flags.Question` (its
bpftrace program) with :func:`pyebpf.lang.api.compile`; :meth:`FlagTrace.start`
loads it as a :class:`FlagSession`, the :class:`~pyebpf.session.base.Session`
that the command line's runner (:func:`pyebpf.cli.runner.run_session`) and
the loop and printers of :mod:`pyebpf.session.live` drive.  The session keeps
the flag CLI's output: events printed with the C-style format (or as a
table), ``{"type": "event", "probe": ..., "fields": {...}}`` JSON lines,
and the aggregations in bpftrace's layout, as tables, or as JSON objects
(:mod:`pyebpf.draw.formatting`), with ``--interval --clear`` baselines.
"""
from __future__ import annotations

import time
from typing import Any

from ..session.base import Session

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .api import BtProgram
    from .codegen import Action, Unit
    from .flags import FlagAggregate, Question
    from .runtime import BtRun
    from .types import Type

__all__ = ["FlagTrace", "FlagSession"]

_U64 = 1 << 64


class FlagTrace:
    """A question compiled: :meth:`show` its eBPF, :meth:`start` it.

    ``ring_size``: bytes of the ring buffer the events go through;
    ``unsafe``: uprobes may go where no instruction start is proven;
    ``filename``: what errors in the program name it; ``command``: the
    ``-c`` command's argv (``pystack`` needs it to be a CPython)."""

    def __init__(self, question: Question, *, ring_size: int | None = None,
                 unsafe: bool = False, filename: str = "flags",
                 command: list[str] | None = None) -> None:
        from .api import compile
        if ring_size is not None:
            from ..maps import perf_ring_size
            perf_ring_size(ring_size)        # 1 byte .. 2 GiB, checked before anything
        self.question = question.finish()
        self.text = question.program_text(header=False)
        self.ring_size = ring_size
        self.program: BtProgram = compile(self.text, filename=filename, pid=question.pid,
                                          unsafe=unsafe, command=command)
        self.program.check_pystack(command)    # (the process is named by now, or never)

    def shown_text(self) -> str:
        """The program as ``--show-program`` prints it (with a table's
        header, which the run prints itself)."""
        q = self.question
        blocks = q.blocks                  # (the run's: events name their probe by them)
        try:
            return q.program_text(header=True)
        finally:
            q.blocks = blocks

    def show(self) -> str:
        """The generated eBPF, per probe, with the program lines (no privilege needed)."""
        return self.program.show()

    def start(self, pid: int | None, *, attach: bool = True) -> FlagSession:
        """Load the programs (``pid``: the ``-c`` command's, its ``cpid``)
        and attach them unless ``attach`` is False."""
        session = FlagSession(self, pid)
        if attach:
            session.attach()
        return session


class FlagSession(Session):
    """A running :class:`FlagTrace` (see the module docs)."""

    def __init__(self, trace: FlagTrace, cpid: int | None) -> None:
        super().__init__()
        from .runtime import BtRun
        self.trace = trace
        self.question = q = trace.question
        t0 = time.perf_counter()
        unit = trace.program.generate(cpid if q.cpid else None,
                                      count_drops=q.event_fields is not None)
        # (without events nothing goes through the ring: one page, not 1 MiB)
        size = trace.ring_size if q.event_fields is not None else 1
        if size is not None:
            from ..maps import MapSpec, RingBuf, perf_ring_size
            unit.ringbuf = MapSpec(RingBuf, perf_ring_size(size), name=unit.ringbuf.name)
        self.unit: Unit = unit
        self.run: BtRun = BtRun(unit, pid=q.pid)
        self._base: dict[str, dict[Any, Any]] = {}
        try:
            self.run._create()
            self.run._load()
        except BaseException:
            self.close()
            raise
        # (the loop waits on the reader when there is one: only with events)
        self.reader = self.run.reader if q.event_fields is not None else None
        if self.reader is not None:
            self.reader.on_lost = self._on_lost      # (counted in self.lost, reported)
        for a in q.aggregates:
            a.impl = unit.maps[a.display].agg
        self.cpid = cpid if q.cpid else None
        self.attach_seconds = time.perf_counter() - t0

    def child_started(self) -> None:
        """The ``-c`` command has exec'd: its modules are snapshotted (for
        frames without a build id) and, with ``pystack``, its CPython's
        layout given to the program (before, the process was a copy of
        this one)."""
        stacks = self.run.stacks
        if stacks is None or not self.cpid:
            return
        if stacks.python is not None:           # (first: it waits for the loader)
            stacks.python.configure(self.cpid, wait=1.0)
        stacks.remember_pid(self.cpid)

    # ------------------------------------------------------------ attaching
    def attach(self) -> None:
        """Attach every probe (once); on failure the session is closed."""
        if self._attached:
            return
        self._attached = True
        t0 = time.perf_counter()
        try:
            self.run._attach()
        except BaseException:
            self.close()
            raise
        self.attach_seconds += time.perf_counter() - t0

    def probe_count(self) -> int:
        """How many probes are attached."""
        return len(self.run.links)

    def detach(self) -> None:
        """Detach the probes; the maps stay readable."""
        self.run._detach()

    def _close_resources(self) -> None:
        super()._close_resources()
        self.run.close()

    # ------------------------------------------------------------ events
    def read_events(self, timeout: float | None = 0) -> list[Any]:
        """Wait up to ``timeout`` seconds (0: not at all; None: until some
        come) and return the events (:class:`pyebpf.session.base.Event`)."""
        reader = self.run.reader
        if reader is None or self.question.event_fields is None:
            return []
        out = []
        for raw in reader.read_batch(timeout=timeout):
            data = bytes(raw)
            ident = int.from_bytes(data[:8], "little")
            if ident >= len(self.unit.actions):
                continue
            action = self.unit.actions[ident]
            ev = self.run._event(data)
            if ev is not None and action.kind == "printf":
                out.append(self._flag_event(action, ev.values))
        return out

    def _flag_event(self, action: Action, values: tuple[Any, ...]) -> Any:
        from ..draw.render import format_printf
        from ..session.base import Event
        from ..symbols.stacks import format_stack
        q = self.question
        fields: dict[str, Any] = {}
        shown: list[Any] = []
        for f, t, v in zip(q.event_fields or [], action.args, values):
            value = self._shown(t, v, f.is_func)
            if isinstance(value, tuple):            # a stack's frames
                value = list(value)
                shown.append(format_stack(value).rstrip("\n"))
            else:
                shown.append(value)
            fields[f.name] = value
        probe = q.probe_at(action.pos.line)
        if q.event_format is not None:
            line = format_printf(q.event_format, shown)
        else:
            widths = q.table_widths()
            line = " ".join(f"{v!s:<{widths[i]}}" if i < len(shown) - 1 else str(v)
                            for i, v in enumerate(shown)) + "\n"
        return Event(probe, fields, line)

    def header(self) -> str | None:
        """The column names of events printed as a table, else None."""
        return self.question.table_header()

    # ------------------------------------------------------------ values
    def _shown(self, t: Type, v: Any, func: bool = False) -> Any:
        """A key part or field as the flag CLI shows it: stacks as a tuple
        of frames, user symbols by name, 64-bit integers in keys signed;
        ``func`` (run as ``probe``): the function's name, demangled."""
        kind = t.kind
        if func and isinstance(v, str):
            name = v.rpartition(":")[2]
            if name.startswith("_Z"):
                from ..symbols.stacks import demangle
                return demangle([name])[name]
            return name
        if kind in ("ustack", "kstack", "pystack"):
            stacks = self.run.stacks
            frames = stacks.frames(t, int(v)) if stacks is not None else []
            if kind == "pystack":            # (0: the thread ran no Python code then)
                return tuple(n for _, n in frames) or ("[no Python frames]",)
            return tuple(n for _, n in frames) or ("[stack lost]",)
        if kind in ("usym", "ksym"):
            return self.run._sym_text(v, t, event=True)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 1 << 63:
            return v - _U64
        if isinstance(v, bytes):
            return v.split(b"\0", 1)[0].decode(errors="replace")
        return v

    def _key(self, a: FlagAggregate, plan: Any, raw: Any) -> tuple[Any, ...]:
        t = plan.key
        if t.kind == "tuple":
            return tuple(self._shown(e, x, f.is_func) for e, x, f in zip(t.elems, raw, a.keys))
        return (self._shown(t, raw, a.keys[0].is_func),)

    # ------------------------------------------------------------ aggregations
    def aggregation_names(self) -> list[str]:
        """The names of the aggregations (``"@"``, ``"@hist"``...)."""
        return [a.display for a in self.question.aggregates]

    def results(self, *, clear: bool = False) -> dict[str, Any]:
        """Every aggregation by name, as the flag CLI's printers take them:
        unkeyed, its value (hist: ``{bucket: count}``; stats ``(count,
        average, total)``); keyed, ``{key tuple: value}``.  ``clear``: what
        was read becomes the baseline of the next reads (min and max are
        reset in the kernel)."""
        reads = {a.display: self._entries(a.display) for a in self.question.aggregates}
        out: dict[str, Any] = {}
        for a in self.question.aggregates:
            name = a.display
            data = reads[name]
            base = self._base.get(name)
            if base is not None:
                data = _minus(a.kind, data, base)
            if clear:
                if a.kind in ("min", "max"):
                    self.run.clear_map(name)
                else:
                    self._base[name] = reads[name]
            out[name] = self._shape(a, data)
        return out

    def _entries(self, name: str) -> dict[Any, Any]:
        """Aggregation ``name``'s entries; ``pystack`` keys that print alike
        (ids that differ only in an instruction within a line) merged."""
        entries = self.run.entries(name)
        python = getattr(self.run.stacks, "python", None)
        if python is None:
            return entries
        from .pystack import merge_printed
        return merge_printed(self.unit.maps[name], entries, python)

    def _shape(self, a: FlagAggregate, data: dict[Any, Any]) -> Any:
        plan = self.unit.maps[a.display]
        if not a.keys:
            if None not in data:
                return {} if a.kind in ("hist", "lhist") else 0 if a.kind in ("count",
                                                                               "sum") else None
            return _value(a.kind, data[None])
        return {self._key(a, plan, k): _value(a.kind, v) for k, v in data.items()}

    def raw_results(self) -> dict[str, Any]:
        """Each aggregation's map as read, undecoded (printed when decoding
        or formatting fails)."""
        from .runtime import _bound_agg
        out: dict[str, Any] = {}
        for a in self.question.aggregates:
            try:          # (as the aggregation reads it: per-CPU values summed)
                plan = self.unit.maps[a.display]
                live = self.run.live[plan.kname]
                out[a.display] = (_bound_agg(plan, live).read() if plan.agg is not None
                                  else dict(live.items()))
            except Exception as exc:       # nothing left to print for this one
                out[a.display] = f"<unreadable: {type(exc).__name__}: {exc}>"
        return out

    def format_text(self, results: dict[str, Any] | None = None) -> str:
        """The aggregations as bpftrace prints them at exit (sorted by name)."""
        from ..draw import formatting
        res = self.results() if results is None else results
        return formatting.format_text(self.question.aggregates, res)

    def format_table(self, results: dict[str, Any] | None = None) -> str:
        """The aggregations as tables (a column per key, rows by decreasing value)."""
        from ..draw import formatting
        res = self.results() if results is None else results
        return formatting.format_table(self.question.aggregates, res)

    def json_objects(self, results: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """The aggregations as bpftrace's ``-f json`` objects."""
        from ..draw import formatting
        res = self.results() if results is None else results
        return formatting.json_objects(self.question.aggregates, res)


def _value(kind: str, v: Any) -> Any:
    """A map value (the language's shapes) as the flag CLI's printers take it."""
    if kind in ("avg", "stats"):
        count, total = v
        avg = abs(total) // count * (1 if total >= 0 else -1) if count else 0
        return avg if kind == "avg" else (count, avg, total)
    return v


def _minus(kind: str, data: dict[Any, Any], base: dict[Any, Any]) -> dict[Any, Any]:
    """``data - base`` entry by entry for an additive aggregation (entries
    that did not change dropped)."""
    out: dict[Any, Any] = {}
    for k, v in data.items():
        b = base.get(k)
        if b is None:
            out[k] = v
            continue
        d: Any
        if kind in ("hist", "lhist"):
            d = {x: c - b.get(x, 0) for x, c in v.items() if c != b.get(x, 0)}
        elif kind in ("avg", "stats"):
            d = (v[0] - b[0], v[1] - b[1]) if v[0] != b[0] else None
        else:
            d = v - b
        if d:
            out[k] = d
    return out
