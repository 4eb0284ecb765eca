"""The shapes of what a running :class:`~pyebpf.trace.recipes.Trace`
returns: its events and its aggregations' results, as
:class:`~pyebpf.trace.trace_session.TraceSession` gives them and
:mod:`~pyebpf.trace.formatting` prints them.
"""
from __future__ import annotations

import dataclasses
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..lang.flags import FlagAggregate
    from .probes import TracepointSource, UprobeSource
    from .usdt_source import UsdtProbeSource

    #: an aggregation of a trace, as :mod:`~pyebpf.trace.formatting` prints it
    Aggregate = FlagAggregate
    #: a resolved probe (what :func:`~pyebpf.trace.probes.probe_source` returns)
    Source = UprobeSource | TracepointSource | UsdtProbeSource

__all__ = ["Event", "KeyPart", "AggValue", "AggResult", "FieldValue"]

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


@dataclasses.dataclass
class Event:
    """One event: the probe that fired and its fields by name."""

    probe: str
    fields: dict[str, FieldValue]
    line: str = ""

    def to_json(self) -> dict[str, Any]:
        """The event as a JSON object: ``{"type": "event", "probe": ..., "fields": {...}}``."""
        return {"type": "event", "probe": self.probe, "fields": self.fields}
