"""The errors of :mod:`pyebpf.elf` (all :class:`~pyebpf.errors.PyebpfError`)."""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Sequence

    from .symbols import Symbol

from ..errors import PyebpfError

__all__ = ["ElfError", "SymbolNotFoundError", "AmbiguousSymbolError",
           "InstructionBoundaryError", "LibraryNotFoundError", "NoteError"]


class ElfError(PyebpfError, ValueError):
    """A file is not a usable ELF file, or an address/offset is not in it."""


class NoteError(ElfError):
    """A malformed note: ``position`` is where it starts in its section;
    ``truncated_header`` tells a short header from a note running past the end."""

    def __init__(self, message: str, position: int, truncated_header: bool) -> None:
        super().__init__(message)
        self.position = position
        self.truncated_header = truncated_header


class SymbolNotFoundError(ElfError, LookupError):
    """No symbol has the name asked for.

    Attributes: ``name`` (as asked), ``path``, ``close_matches`` (the names
    most like it) and ``symbol_count`` (how many names the file has).
    """

    def __init__(self, message: str, name: str = "", path: str = "",
                 close_matches: Sequence[str] = (), symbol_count: int = 0):
        super().__init__(message)
        self.name = name
        self.path = path
        self.close_matches = list(close_matches)
        self.symbol_count = symbol_count


class AmbiguousSymbolError(ElfError):
    """Several symbols of the same name live at different addresses.

    ``candidates`` lists them; pick one by version (``name@@VER``) or by address.
    """

    def __init__(self, message: str, candidates: Sequence[Symbol] = ()):
        super().__init__(message)
        self.candidates = list(candidates)


class InstructionBoundaryError(ElfError):
    """A probe address is not (or cannot be proven to be) the first byte of an
    instruction; a uprobe there could corrupt the traced program.

    ``boundaries`` holds instruction starts near it: offsets from the function
    start when a symbol covers the address, else virtual addresses.
    """

    def __init__(self, message: str, boundaries: Sequence[int] = ()):
        super().__init__(message)
        self.boundaries = list(boundaries)


class LibraryNotFoundError(PyebpfError, FileNotFoundError):
    """A library or program name could not be resolved to a file."""

    def __init__(self, message: str, name: str = "", close_matches: Sequence[str] = ()):
        FileNotFoundError.__init__(self, 2, message)
        self.name = name
        self.close_matches = list(close_matches)

    def __str__(self) -> str:
        return self.strerror or ""
