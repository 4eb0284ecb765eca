"""A running trace: programs loaded and attached, maps readable, events read.

:class:`Session` is the base of both kinds: :class:`~pyebpf.trace.recipes.TraceSession`
(a :class:`~pyebpf.trace.Trace` running) and
:class:`~pyebpf.session.asmfile.AsmSession` (an asm file running).  It owns
the kernel objects and their teardown, and states the contract that the
loop and the printers of :mod:`pyebpf.session.live` and the command line's
runner (:func:`pyebpf.cli.runner.run_session`) use:

* :meth:`~Session.attach`, :meth:`~Session.detach`, :meth:`~Session.close`
  (and ``with``);
* :meth:`~Session.read_events` (objects with ``.line`` and ``.to_json()``),
  :meth:`~Session.header`, :attr:`~Session.reader`, :meth:`~Session.lost_events`;
* :meth:`~Session.results` and their printing: :meth:`~Session.format_text`,
  :meth:`~Session.format_table`, :meth:`~Session.json_objects`, and
  :meth:`~Session.raw_results` when those fail.

A session is made in two steps: the constructor creates the maps and the
event reader and loads the programs, :meth:`Session.attach` attaches them
(the constructors attach too unless told not to; the command line attaches
itself, with its stop signals held).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any

from ..kernel.lifetime import Owner, close_quietly

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Protocol

    from ..attach import Link
    from ..events import PerfBuffer, RingBufferReader
    from ..loader import LoadedProgram
    from ..probes.sources import ProbeSource

    class PrintedEvent(Protocol):
        """What :meth:`Session.read_events` returns: an event the loop prints."""

        @property
        def line(self) -> str:
            """The event as a line of text (ending with a newline)."""
            ...

        def to_json(self) -> dict[str, Any]:
            """The event as a JSON object."""
            ...

    #: one attachment to make: (probe source, loaded program, pid or None)
    AttachStep = tuple[ProbeSource, LoadedProgram, int | None]

__all__ = ["Session", "Event", "FieldValue"]

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


def _release(links: list[Link], loaded: list[LoadedProgram]) -> None:
    """Detach every link, then close every program (the lists stay as they are)."""
    for link in links:
        close_quietly(link)
    for prog in loaded:
        close_quietly(prog)


class Session(Owner):
    """Loaded programs, their links, the event reader; see the module docs.

    Attributes: ``loaded`` (the programs), ``links`` (one per attached
    program), ``reader`` (the event reader, or None), ``lost`` (events
    reported lost so far), ``attach_seconds`` (time to load and attach).

    Its lifetime is an :class:`~pyebpf.kernel.lifetime.Owner`'s; what the
    garbage collector finds of a session not closed is released too (the
    reader and the maps release themselves).
    """

    def __init__(self) -> None:
        self.loaded: list[LoadedProgram] = []
        self.links: list[Link] = []
        self.reader: PerfBuffer | RingBufferReader | None = None
        self.lost = 0
        self.attach_seconds = 0.0
        self._attached = False
        self._own(_release, self.links, self.loaded)

    # ------------------------------------------------------------ attaching
    def _attach_steps(self) -> list[AttachStep]:
        """What to attach, in order (subclasses: return probes before the
        entries that need them)."""
        raise NotImplementedError

    def attach(self) -> None:
        """Attach every loaded program (a function's return before its entry,
        so an entry always finds its return attached).  Does nothing the
        second time; when an attachment fails the session is closed and the
        error raised."""
        if self._attached:
            return
        self._attached = True
        t0 = time.perf_counter()
        try:
            for source, program, pid in self._attach_steps():
                self.links.append(source.attach(program, pid=pid))
        except BaseException:
            self.close()
            raise
        self.attach_seconds += time.perf_counter() - t0

    def child_started(self) -> None:
        """Called once the ``-c`` command has exec'd (the runner released
        it): a session that reads the command's process (its modules, its
        CPython) does it now.  Nothing by default."""

    def probe_count(self) -> int:
        """How many probes are attached (the "Attached N probes" line)."""
        return len(self.links)

    def _on_lost(self, cpu: int, n: int) -> None:
        """The reader's ``on_lost``: ``n`` events lost on ``cpu``."""
        self.lost += n

    # ------------------------------------------------------------ reading
    def read_events(self, timeout: float | None = 0) -> Sequence[PrintedEvent]:
        """Wait up to ``timeout`` seconds (0: not at all; None: until some
        come) and return the decoded events (none without a reader)."""
        return []

    def header(self) -> str | None:
        """The line printed before the events (column names), or None."""
        return None

    def lost_events(self) -> int:
        """Events lost so far: reported to ``on_lost``, or counted by the reader."""
        lost = self.lost
        if self.reader is not None:
            try:
                lost = max(lost, self.reader.lost)
            except Exception:          # (a closed reader: what was reported)
                pass
        return lost

    def aggregation_names(self) -> list[str]:
        """The names of what :meth:`results` returns (printed at the end)."""
        raise NotImplementedError

    def results(self, *, clear: bool = False) -> dict[str, Any]:
        """The aggregations, by name.  ``clear``: what was read becomes the
        starting point of the next reads (``--interval`` with ``--clear``);
        a session that cannot do that raises :class:`~pyebpf.errors.StateError`."""
        raise NotImplementedError

    def raw_results(self) -> dict[str, Any]:
        """Each aggregation's map as read, undecoded (what is printed when
        decoding or formatting fails); a map that cannot be read is a
        ``"<unreadable: ...>"`` text."""
        raise NotImplementedError

    def format_text(self, results: dict[str, Any] | None = None) -> str:
        """The aggregations (or those of ``results``) in bpftrace's text format."""
        raise NotImplementedError

    def format_table(self, results: dict[str, Any] | None = None) -> str:
        """The aggregations as tables (sessions without tables: :meth:`format_text`)."""
        return self.format_text(results)

    def json_objects(self, results: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """The aggregations (or those of ``results``) as bpftrace's JSON objects."""
        raise NotImplementedError

    # ------------------------------------------------------------ lifetime
    def detach(self) -> None:
        """Detach the programs but keep the maps readable."""
        for link in self.links:
            link.detach()

    def close(self) -> None:
        """Detach, unload, close the reader and the maps (idempotent; every
        step is tried even if one fails)."""
        super().close()

    def _close_resources(self) -> None:
        _release(self.links, self.loaded)
        if self.reader is not None:
            self.lost = self.lost_events()
            close_quietly(self.reader)
        self._close_maps()

    def _close_maps(self) -> None:
        """Close the maps (subclasses: theirs)."""

