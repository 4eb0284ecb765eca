"""The tracing toolkit: recipes (:class:`Trace`), in-kernel aggregations and
their printing, probe specs and sources, user-stack symbolization.

    from pyebpf.trace import Trace
    with Trace("uprobe:/bin/bash:readline").count(by="comm").start() as s:
        ...
        print(s.format_text())

Modules: :mod:`~pyebpf.trace.recipes` (Trace, the shortcuts), with
:mod:`~pyebpf.trace.model` (its aggregations, events and result types),
:mod:`~pyebpf.trace.codegen` (its programs), :mod:`~pyebpf.trace.trace_session`
(TraceSession: it running) and :mod:`~pyebpf.draw.formatting` (its results
printed); :mod:`~pyebpf.session.base` (the Session base of TraceSession and
AsmSession), :mod:`~pyebpf.lang.aggregations`, :mod:`~pyebpf.draw.render`,
:mod:`~pyebpf.trace.expr`, :mod:`~pyebpf.probes.sources` (probe specs and the
uprobe and tracepoint sources), :mod:`~pyebpf.probes.usdt_source` (the USDT
source), :mod:`~pyebpf.symbols.stacks`, :mod:`~pyebpf.session.live` (the loop the
CLI runs), :mod:`~pyebpf.session.asmfile` (asm/ files with a header).

The tracing layer sits above :mod:`pyebpf.usdt` (notes, specs, argument
reads, attaching) and imports it.
"""
from ..draw.buckets import log2_bucket
from ..lang.aggregations import Avg, Count, Histogram, Max, Min, Stats, Sum
from ..draw.render import format_count, format_hist, format_value

TYPE_CHECKING = False
if TYPE_CHECKING:       # what __getattr__ imports on first use, as type checkers see it
    # ("X as X": an explicit re-export, as mypy --strict wants it)
    from .recipes import (Trace as Trace, TraceSession as TraceSession, count as count,
                          events as events, histogram as histogram, latency as latency,
                          stacks as stacks, stats as stats)

__all__ = ["Avg", "Count", "Histogram", "Max", "Min", "Stats", "Sum", "log2_bucket",
           "format_count", "format_hist", "format_value", "Trace", "TraceSession",
           "count", "histogram", "latency", "events", "stacks", "stats"]

_LAZY = {"Trace", "TraceSession", "count", "histogram", "latency", "events", "stacks", "stats"}

if not TYPE_CHECKING:   # (type checkers see the imports above, and no other name)
    def __getattr__(name: str) -> object:
        if name in _LAZY:
            from . import recipes
            return getattr(recipes, name)
        raise AttributeError(f"module 'pyebpf.trace' has no attribute {name!r}")
