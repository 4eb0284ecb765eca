"""Recipes: tracing programs built from a few lines of Python.

A :class:`Trace` names one or more probes and what to do when they fire --
count, sum, min/max/avg/stats, log2 or linear histograms (computed in the
kernel, keyed or not), or events with several fields.  It writes the
bpftrace program a user would write for it, compiles that program with
:mod:`pyebpf.lang` (the compiler ``pyebpf bt`` runs), shows it and its eBPF
on request, and runs it::

    from pyebpf.trace import Trace
    t = Trace("uprobe:/bin/bash:readline").count(by="comm")
    print(t.text())                    # uprobe:/bin/bash:readline { @[comm] = count(); }
    print(t.show())                    # that program and the eBPF generated for it
    with t.start() as session:         # load + attach
        time.sleep(5)
        print(session.format_text())   # @[bash]: 3  (bpftrace's format)
        print(session.counts())        # {("bash",): 3}

The shortcuts below cover the usual questions in one call each:
:func:`count`, :func:`histogram`, :func:`latency`, :func:`events`,
:func:`stacks`, :func:`stats`.

Expressions are the bpftrace language's (``arg0``, ``retval``, ``comm``,
``str(arg0)``, ``ustack``, ``args.filename``, ``arg1 / 1000``...), with its
semantics (signed arithmetic, C's precedence), plus ``latency``: the time
since the function's entry.  ``latency`` (and ``retval`` on a ``uprobe:``,
and the arguments on a ``uretprobe:``) makes the two-probe program a user
would write: the entry probe saves the time and the arguments the actions
read in maps keyed by thread (``@__start[tid]``, ``@__argN[tid]``), and the
return probe runs the actions.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from ..errors import OptionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypedDict

    from typing_extensions import Unpack

    from ..lang.flags import FlagAggregate, Question
    from ..lang.flagsession import FlagTrace
    from ..probes.sources import ProbeSpec
    from ..program import Program
    # ("X as X": an explicit re-export, as mypy --strict wants it)
    from ..draw.formatting import (AggResult as AggResult, AggValue as AggValue,
                                   KeyPart as KeyPart)
    from ..session.base import Event as Event, FieldValue as FieldValue
    from .trace_session import TraceSession as TraceSession

    #: what ``by=`` takes: one expression, several (a sequence, or a string
    #: with top-level commas), or None (not keyed)
    _By = str | Sequence[str] | None

    class _TraceOptions(TypedDict, total=False):
        """The keyword arguments of :class:`Trace` that the shortcuts pass on."""

        pid: int | None
        strlen: int
        ring: bool
        buffer_size: int
        filters: Iterable[str]
        unsafe: bool

__all__ = ["Trace", "Event", "count", "histogram", "latency", "events", "stacks", "stats",
           "KeyPart", "AggValue", "AggResult", "FieldValue"]

# (the session and the result types are imported on first use: `import
# pyebpf.trace.recipes` stays light)
_RESULT_TYPES = {"AggResult": "draw.formatting", "AggValue": "draw.formatting",
                 "KeyPart": "draw.formatting", "Event": "session.base",
                 "FieldValue": "session.base", "TraceSession": "trace.trace_session"}

if not TYPE_CHECKING:
    def __getattr__(name: str) -> object:
        where = _RESULT_TYPES.get(name)
        if where is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib
        return getattr(importlib.import_module(f"pyebpf.{where}"), name)


def _by_text(by: _By) -> str | None:
    """``by=`` as the key list of the program (``"comm, arg0"``)."""
    if by is None:
        return None
    if isinstance(by, str):
        return by
    if not by:
        return None
    return ", ".join(by)


class Trace:
    """Probes and the actions to run when they fire (see the module docs).

    Args:
        probes: probe specs (``"uprobe:/bin/bash:readline"``...), all running
            the same actions.
        pid: trace only this process (uprobes are attached for it alone;
            every probe's predicate also says ``pid == PID``).
        strlen: default size of ``str()`` buffers (bpftrace's is 64).
        ring: kept for compatibility: events go through the language's ring
            buffer either way.
        buffer_size: bytes of the ring buffer the events go through (1 byte
            to 2 GiB, rounded up to a power-of-two number of pages).
        filters: conditions every action needs (``"arg0 > 10"``...).
        unsafe: let uprobes go on addresses not proven to start an
            instruction (see :func:`pyebpf.attach.attach_uprobe`).

    Building methods return the trace, so calls chain.  The kernel objects
    belong to the session :meth:`start` returns (a trace holds none:
    ``close()`` and ``with`` do nothing, kept for the programs that call them).
    """

    def __init__(self, *probes: "str | ProbeSpec", pid: int | None = None, strlen: int = 64,
                 ring: bool = False, buffer_size: int = 1 << 20,
                 filters: Iterable[str] = (), unsafe: bool = False) -> None:
        from ..lang.flags import Question
        from ..maps import perf_ring_size
        if not probes:
            raise OptionError("a Trace needs at least one probe spec")
        perf_ring_size(buffer_size)     # 1 byte .. 2 GiB, checked before anything is built
        self.question: Question = Question([str(p) for p in probes], strlen=strlen)
        self.question.return_args = False        # (argN at a uretprobe: the language refuses)
        self.specs = self.question.specs
        self.pid = pid
        self.unsafe = unsafe
        self.strlen = strlen
        self.ring = ring
        self.buffer_size = buffer_size
        #: the compiled program (set by :meth:`build`)
        self.compiled: FlagTrace | None = None
        for f in filters:
            self.filter(f)

    # ------------------------------------------------------------ building
    @property
    def aggregates(self) -> list[FlagAggregate]:
        """The aggregations, in the order they were asked for."""
        return self.question.aggregates

    def filter(self, condition: str) -> "Trace":
        """Run the actions only when ``condition`` holds (``"arg0 > 10"``,
        ``'comm == "bash"'``, ``"arg0 > 10 && arg1 != 0"``); several filters
        must all hold."""
        from ..lang.flags import FlagField
        self._check_not_built()
        self.question.filters.append(FlagField(condition))
        return self

    def _add(self, kind: str, value: str | None, by: _By, name: str | None,
             linear: tuple[int, int, int] | None = None) -> "Trace":
        self._check_not_built()
        self.question.add(kind, value, _by_text(by), linear, name=name)
        return self

    # One method per aggregation kind, alike on purpose: each is what help()
    # and the reference show for its kind; _add does the work.
    # (duplicates: deliberate, one public method per kind, each a one-line call of _add)
    def count(self, by: _By = None, name: str | None = None) -> "Trace":
        """``@name[by] = count()``: how many times the probes fired (per key)."""
        return self._add("count", None, by, name)

    def sum(self, value: str, by: _By = None, name: str | None = None) -> "Trace":
        """``@name[by] = sum(value)``."""
        return self._add("sum", value, by, name)

    def min(self, value: str, by: _By = None, name: str | None = None) -> "Trace":
        """``@name[by] = min(value)``."""
        return self._add("min", value, by, name)

    def max(self, value: str, by: _By = None, name: str | None = None) -> "Trace":
        """``@name[by] = max(value)``."""
        return self._add("max", value, by, name)

    def avg(self, value: str, by: _By = None, name: str | None = None) -> "Trace":
        """``@name[by] = avg(value)`` (integer average)."""
        return self._add("avg", value, by, name)

    def stats(self, value: str, by: _By = None, name: str | None = None) -> "Trace":
        """``@name[by] = stats(value)``: count, average and total."""
        return self._add("stats", value, by, name)

    def hist(self, value: str, by: _By = None, name: str | None = None) -> "Trace":
        """``@name[by] = hist(value)``: a log2 histogram computed in the kernel."""
        return self._add("hist", value, by, name)

    def lhist(self, value: str, lo: int, hi: int, step: int, by: _By = None,
              name: str | None = None) -> "Trace":
        """``@name[by] = lhist(value, lo, hi, step)``: a linear histogram of
        at most 1000 buckets in ``[lo, hi)`` (bpftrace's cap; checked here,
        before anything is built) plus the two open-ended ones."""
        return self._add("lhist", value, by, name, (lo, hi, step))

    def print(self, fmt: str | None, *fields: str) -> "Trace":
        """Send an event per hit with ``fields`` and print it with the C-style
        ``fmt`` (None: the fields as a table's row).  A field is an
        expression, or ``name=expression`` to choose its name in JSON."""
        self._check_not_built()
        if self.question.event_fields is not None:
            raise OptionError("a trace has one event format (one print())")
        self.question.print(fmt, [str(f) for f in fields])
        return self

    events = print

    def _check_not_built(self) -> None:
        if self.compiled is not None:
            raise OptionError("this trace is already built; make a new Trace")

    def uses(self, name: str) -> bool:
        """Whether an expression of the trace (aggregations, filters, event
        fields) reads ``name`` (``"latency"``, ``"retval"``, ``"ustack"``...)."""
        return self.question.uses(name)

    # ------------------------------------------------------------ compiling
    def build(self, pid: int | None = None) -> "Trace":
        """Write the bpftrace program and compile it (parsed, analysed, its
        probes resolved: a bad expression or a missing probe fails here;
        nothing is created in the kernel, so :meth:`show` needs no
        privilege).  ``pid`` (default: the one given at construction) is
        the process traced (another one than the trace was built for: built
        again)."""
        if self.compiled is not None and (pid is None or pid == self.pid):
            return self
        from ..lang.flagsession import FlagTrace
        if pid is not None:
            self.pid = pid
        self.question.pid = self.pid
        compiled = FlagTrace(self.question, ring_size=self.buffer_size, unsafe=self.unsafe,
                             filename="trace")
        missing = [ap.missing for p in compiled.program.script.probes
                   for ap in p.attach_points if ap.missing]
        if missing:              # (a program skips them; a trace names its probes: all needed)
            from ..lang.probes import ProbeSpecError
            raise ProbeSpecError("; ".join(missing))
        self.compiled = compiled
        return self

    def text(self) -> str:
        """The bpftrace program of the trace (what ``pyebpf bt`` and
        bpftrace would run for it)."""
        self.build()
        assert self.compiled is not None
        return self.compiled.text

    @property
    def programs(self) -> list[Program]:
        """The generated eBPF programs, one per probe (built on first access)."""
        self.build()
        assert self.compiled is not None
        return [plan.program for plan in self.compiled.program.generate().probes]

    @property
    def program(self) -> Program:
        """The program of the first probe that runs the actions (at a
        function's return, for an entry/return pair)."""
        progs = self.programs
        return progs[1] if len(progs) > 1 and self.question.specs and \
            self.question._paired(self.question.specs[0]) else progs[0]

    def show(self) -> str:
        """The bpftrace program, then the eBPF generated for each probe
        (with the program lines it comes from) and the maps."""
        text = self.text()
        assert self.compiled is not None          # (built by text())
        return f"{text}\n{self.compiled.show()}"

    def close(self) -> None:
        """Nothing to release (the session holds the kernel objects)."""

    def __enter__(self) -> "Trace":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ running
    def start(self, pid: int | None = None, *, attach: bool = True) -> TraceSession:
        """Build (if needed), load and attach every program; returns the
        running :class:`TraceSession` (a context manager that detaches).
        ``attach=False``: loaded only, :meth:`TraceSession.attach` attaches."""
        from .trace_session import TraceSession
        self.build(pid)
        session = TraceSession(self)
        if attach:
            session.attach()
        return session


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
        raise OptionError(f"unit must be ns, us or ms, not {unit!r}")
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
