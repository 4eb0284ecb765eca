"""A :class:`~pyebpf.trace.recipes.Trace` running: :class:`TraceSession` is
the language's run of the trace's program (a
:class:`~pyebpf.lang.flagsession.FlagSession`, which ``pyebpf trace`` runs
too): it decodes the events, reads the aggregations (keys shown as the user
wrote them: strings, stacks symbolized, signed numbers) and prints them
through :mod:`~pyebpf.draw.formatting`.

:meth:`TraceSession.results` gives every aggregation at once (a union of
shapes); the typed readers give one aggregation in the shape its kind has,
for a type checker: :meth:`~TraceSession.counts` (keyed count, sum, min,
max, avg), :meth:`~TraceSession.value` (unkeyed),
:meth:`~TraceSession.histogram`, :meth:`~TraceSession.histograms` (keyed),
:meth:`~TraceSession.stats` and :meth:`~TraceSession.keyed_stats`.
"""
from __future__ import annotations

from typing import Any

from ..draw.formatting import AggResult, KeyPart
from ..errors import ProgramError
from ..lang.flagsession import FlagSession
from ..session.base import Event

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..lang.flags import FlagAggregate
    from .recipes import Trace

__all__ = ["TraceSession"]

#: the kinds whose value is one integer per key
_INT_KINDS = ("count", "sum", "min", "max", "avg")


class TraceSession(FlagSession):
    """A running :class:`Trace`: its program loaded (and attached unless
    :meth:`Trace.start` was told not to), maps readable.

    Attributes: ``recipe`` (the :class:`Trace`), ``run`` (the language's
    :class:`~pyebpf.lang.runtime.BtRun`), ``reader`` (the event reader or
    None), ``attach_seconds`` (time to load and attach everything), ``lost``.
    """

    def __init__(self, trace: Trace) -> None:
        assert trace.compiled is not None
        self.recipe = trace
        super().__init__(trace.compiled, None)

    # ------------------------------------------------------------ events
    def read_events(self, timeout: float | None = 0) -> list[Event]:
        """Wait up to ``timeout`` seconds (0: not at all; None: until some
        come) and return the decoded events."""
        got: list[Event] = super().read_events(timeout)
        return got

    def stack(self, value: int) -> list[str]:
        """The frames of a ``ustack`` value (innermost first)."""
        from ..lang.types import Type
        stacks = self.run.stacks
        if stacks is None:
            return []
        return [name for _, name in stacks.frames(Type("ustack"), value)]

    # ------------------------------------------------------------ aggregations
    def results(self, *, clear: bool = False) -> dict[str, AggResult]:
        """Every aggregation by display name (``"@"``, ``"@hist"``...).

        Unkeyed: the value (hist: ``{bucket: count}``; stats: ``(count,
        average, total)``).  Keyed: ``{key: value}`` with the key a tuple
        (one item per key expression; stacks as tuples of frames).  The
        typed readers (:meth:`counts`...) give one aggregation each.

        ``clear=True`` (``--interval`` with ``--clear``): what this call read
        becomes the baseline later reads subtract, so every hit is in exactly
        one of the successive results (see :meth:`clear`).
        """
        got: dict[str, AggResult] = super().results(clear=clear)
        return got

    def clear(self) -> None:
        """Reset every aggregation: additive ones (count, sum, histograms,
        avg, stats) by taking what they hold now as the baseline later reads
        subtract (no hit is lost); min and max in the kernel."""
        self.results(clear=True)

    def _one(self, name: str, kinds: tuple[str, ...], keyed: bool) -> Any:
        """The result of aggregation ``name``, checked to be of ``kinds``
        and keyed (or not)."""
        name = name if name.startswith("@") else "@" + name
        by_name: dict[str, FlagAggregate] = {a.display: a for a in self.question.aggregates}
        a = by_name.get(name)
        if a is None:
            raise ProgramError(f"no aggregation {name}; the trace has "
                               f"{', '.join(sorted(by_name))}")
        if a.kind not in kinds or bool(a.keys) != keyed:
            what = f"{'a keyed' if a.keys else 'an unkeyed'} {a.kind}()"
            raise ProgramError(f"{name} is {what}: read it with "
                               f"{_reader(a.kind, bool(a.keys))}")
        return self.results()[name]

    def counts(self, name: str = "@") -> dict[tuple[KeyPart, ...], int]:
        """A keyed count, sum, min, max or avg: ``{key: value}``, one key
        part per ``by=`` expression."""
        got: dict[tuple[KeyPart, ...], int] = self._one(name, _INT_KINDS, True)
        return got

    def value(self, name: str = "@") -> int | None:
        """An unkeyed count, sum, min, max or avg (min, max and avg: None
        while nothing was recorded)."""
        got: int | None = self._one(name, _INT_KINDS, False)
        return got

    def histogram(self, name: str = "@") -> dict[int, int]:
        """An unkeyed hist or lhist: ``{bucket: count}``."""
        got: dict[int, int] = self._one(name, ("hist", "lhist"), False)
        return got

    def histograms(self, name: str = "@") -> dict[tuple[KeyPart, ...], dict[int, int]]:
        """A keyed hist or lhist: ``{key: {bucket: count}}``."""
        got: dict[tuple[KeyPart, ...], dict[int, int]] = self._one(name, ("hist", "lhist"),
                                                                   True)
        return got

    def stats(self, name: str = "@") -> tuple[int, int, int] | None:
        """An unkeyed stats: ``(count, average, total)`` (None while nothing
        was recorded)."""
        got: tuple[int, int, int] | None = self._one(name, ("stats",), False)
        return got

    def keyed_stats(self, name: str = "@") -> dict[tuple[KeyPart, ...], tuple[int, int, int]]:
        """A keyed stats: ``{key: (count, average, total)}``."""
        got: dict[tuple[KeyPart, ...], tuple[int, int, int]] = self._one(name, ("stats",), True)
        return got


def _reader(kind: str, keyed: bool) -> str:
    """The typed reader of an aggregation of ``kind``."""
    if kind in _INT_KINDS:
        return "counts()" if keyed else "value()"
    if kind == "stats":
        return "keyed_stats()" if keyed else "stats()"
    return "histograms()" if keyed else "histogram()"
