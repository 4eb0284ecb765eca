"""Errors of the bpftrace language, printed as bpftrace 0.17 prints them.

One error reads::

    stdin:1:9-12: ERROR: Unknown function: foo
    BEGIN { foo(1); }
            ~~~

``FILE:LINE:COL-END`` (``END`` the column just past the span), the source
line (tabs shown as four spaces) and a ``~`` under every column of the span.
A span over several lines prints ``FILE:LINE-ENDLINE: ERROR: message``
alone, as bpftrace does. Several errors found in one pass are raised as one
:class:`LangError` whose text is theirs, one after the other.
"""
from __future__ import annotations

from .._record import Record, record
from ..errors import PyebpfError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .ast import Pos

__all__ = ["LangError", "Diagnostic", "format_diagnostic"]


@record
class Diagnostic(Record):
    """One error: its ``message``, where (``pos``, and ``end_line`` when the
    span ends on a later line, else 0) and the script it is about;
    ``level`` is ``ERROR``, or ``WARNING`` for what does not stop the
    program."""

    message: str
    pos: Pos | None
    end_line: int = 0
    filename: str = "stdin"
    source: str = ""
    level: str = "ERROR"

    @property
    def source_line(self) -> str:
        """The script's line the error is on (``""`` when unknown)."""
        if self.pos is None:
            return ""
        return _line(self.source, self.pos.line)

    def __str__(self) -> str:
        return format_diagnostic(self)


def _line(source: str, n: int) -> str:
    """Line ``n`` (1-based) of ``source`` without its newline, ``""`` past the end."""
    lines = source.split("\n")
    return lines[n - 1] if 0 < n <= len(lines) else ""


def format_diagnostic(d: Diagnostic) -> str:
    """The text bpftrace prints for one error (no trailing newline)."""
    prefix = f"{d.filename}:" if d.filename else ""
    level = d.level
    if d.pos is None:
        return f"{prefix}{level}: {d.message}" if prefix else f"{level}: {d.message}"
    pos = d.pos
    end = pos.end if pos.end else pos.column + 1
    if d.end_line and d.end_line > pos.line:
        return f"{prefix}{pos.line}-{d.end_line}: {level}: {d.message}"
    head = f"{prefix}{pos.line}:{pos.column}-{end}: {level}: {d.message}"
    src = d.source_line
    if not src:
        return head
    shown = src.replace("\t", "    ")
    marks = []
    for i, ch in enumerate(src[:max(end - 1, 0)]):
        mark = " " if i < pos.column - 1 else "~"
        marks.append(mark * 4 if ch == "\t" else mark)
    return f"{head}\n{shown}\n{''.join(marks)}"


class LangError(PyebpfError, ValueError):
    """A bpftrace program is not valid: a lexical, syntax or semantic error.

    ``pos`` (:class:`~pyebpf.lang.ast.Pos`), ``filename``, ``source_line``
    and ``message`` describe the first error; ``diagnostics`` lists all of
    them. ``str()`` is bpftrace 0.17's text for each, one after the other.
    """

    def __init__(self, message: str, pos: Pos | None = None, *, filename: str = "stdin",
                 source: str = "", end_line: int = 0,
                 diagnostics: list[Diagnostic] | None = None) -> None:
        if diagnostics is None:
            diagnostics = [Diagnostic(message, pos, end_line=end_line, filename=filename,
                                      source=source)]
        first = diagnostics[0]
        self.diagnostics = diagnostics
        self.message = first.message
        self.pos = first.pos
        self.filename = first.filename
        self.source_line = first.source_line
        super().__init__("\n".join(format_diagnostic(d) for d in diagnostics))

    @classmethod
    def collected(cls, diagnostics: list[Diagnostic]) -> LangError:
        """One error standing for several (``diagnostics`` non-empty)."""
        return cls(diagnostics[0].message, diagnostics=list(diagnostics))
