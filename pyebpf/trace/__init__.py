"""The Python recipe API: :class:`Trace` and its shortcuts, on the language.

    from pyebpf.trace import Trace
    with Trace("uprobe:/bin/bash:readline").count(by="comm").start() as s:
        ...
        print(s.format_text())

Modules: :mod:`~pyebpf.trace.recipes` (Trace, the shortcuts: the bpftrace
program a user would write, compiled by :mod:`pyebpf.lang`) and
:mod:`~pyebpf.trace.trace_session` (TraceSession: the language's run of it,
with typed readers).  What it shares with the language and the profiler
lives below both: probe specs and sources (:mod:`pyebpf.probes`), symbolization
(:mod:`pyebpf.symbols`), buckets and printing (:mod:`pyebpf.draw`), sessions
and the command line's loop (:mod:`pyebpf.session`); the aggregations are the
language's (:mod:`pyebpf.lang.aggregations`).  This package re-exports the
aggregation classes, :func:`log2_bucket` and the printers
(:func:`format_count`, :func:`format_hist`, :func:`format_value`).
"""
from ..draw.buckets import log2_bucket
from ..draw.render import format_count, format_hist, format_value
from ..lang.aggregations import Avg, Count, Histogram, Max, Min, Stats, Sum

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
