"""The tracing toolkit: recipes (:class:`Trace`), in-kernel aggregations and
their printing, probe specs and sources, user-stack symbolization.

    from pyebpf.trace import Trace
    with Trace("uprobe:/bin/bash:readline").count(by="comm").start() as s:
        ...
        print(s.format_text())

Modules: :mod:`~pyebpf.trace.recipes` (Trace, the shortcuts: the bpftrace
program a user would write, compiled by :mod:`pyebpf.lang`), with
:mod:`~pyebpf.trace.model` (its events and result types),
:mod:`~pyebpf.trace.trace_session` (TraceSession: the language's run of it,
with typed readers) and :mod:`~pyebpf.trace.formatting` (its results
printed); :mod:`~pyebpf.trace.session` (the Session base of TraceSession and
AsmSession), :mod:`~pyebpf.trace.aggregate`, :mod:`~pyebpf.trace.render`,
:mod:`~pyebpf.trace.probes` (probe specs and the uprobe and tracepoint
sources), :mod:`~pyebpf.trace.usdt_source` (the USDT source),
:mod:`~pyebpf.trace.stacks`, :mod:`~pyebpf.trace.live` (the loop the CLI
runs), :mod:`~pyebpf.trace.asmfile` (asm/ files with a header).

The tracing layer sits above :mod:`pyebpf.usdt` (notes, specs, argument
reads, attaching) and imports it.
"""
from .aggregate import Avg, Count, Histogram, Max, Min, Stats, Sum, log2_bucket
from .render import format_count, format_hist, format_value

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
