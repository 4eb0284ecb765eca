"""The data of a recipe (:class:`~pyebpf.trace.recipes.Trace`): its
aggregations and events, the shapes of what a running trace returns, and the
programs it generates.

The other modules of a recipe work on these: :mod:`~pyebpf.trace.codegen`
generates the programs, :mod:`~pyebpf.trace.trace_session` runs and reads
them, :mod:`~pyebpf.trace.formatting` prints the results.
"""
from __future__ import annotations

import dataclasses

from ..draw.formatting import AggResult, AggValue, KeyPart
from ..errors import ProgramError
from ..session.base import Event, FieldValue
from ..lang import aggregations as _agg

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..program import Program
    from .expr import Expr
    from ..probes.sources import TracepointSource, UprobeSource
    from ..probes.usdt_source import UsdtProbeSource

    #: a resolved probe (what :func:`~pyebpf.trace.probes.probe_source` returns)
    Source = UprobeSource | TracepointSource | UsdtProbeSource
    #: the aggregation object behind an :class:`Aggregate`
    Impl = _agg.Count | _agg.Sum | _agg.Min | _agg.Max | _agg.Stats | _agg.Histogram

__all__ = ["Aggregate", "Event", "Built", "AGG_KINDS", "MAX_KEYS", "KeyPart", "AggValue",
           "AggResult", "FieldValue"]

#: aggregation kinds -> class of :mod:`pyebpf.trace.aggregate`
AGG_KINDS = {"count": _agg.Count, "sum": _agg.Sum, "min": _agg.Min, "max": _agg.Max,
             "avg": _agg.Avg, "stats": _agg.Stats, "hist": _agg.Histogram,
             "lhist": _agg.Histogram}
#: the most keys a keyed aggregation (and the entry probe's start map) holds
MAX_KEYS = 10240


@dataclasses.dataclass
class Aggregate:
    """One aggregation of a :class:`Trace` (``@name[keys] = kind(value)``)."""

    kind: str
    value: Expr | None
    keys: tuple[Expr, ...]
    name: str | None = None
    linear: tuple[int, int, int] | None = None
    impl: Impl | None = None          # the aggregate.* object, once built

    @property
    def display(self) -> str:
        """The name as printed: ``@`` then the name (``@`` alone when unnamed)."""
        return "@" + (self.name or "")

    @property
    def key_size(self) -> int:
        """Bytes of the map key: the key expressions' slots (8 when unkeyed)."""
        return sum(k.slot_size for k in self.keys) or 8

    def aggregation(self) -> Impl:
        """The :mod:`~pyebpf.trace.aggregate` object (a :class:`ProgramError`
        before the trace is built)."""
        if self.impl is None:
            raise ProgramError(f"{self.display}: the trace is not built yet")
        return self.impl


@dataclasses.dataclass
class Built:
    """One generated program and where it goes: ``role`` is ``"direct"`` (a
    probe's actions), ``"entry"`` (a function entry that saves the time and
    arguments for its return) or ``"return"`` (the actions, at the return)."""

    title: str
    source: Source
    program: Program
    role: str
    attach_pid: bool = True
