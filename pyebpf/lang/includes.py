"""The C headers a bpftrace program includes: its ``#include`` lines and
the command line's ``--include FILE`` (bpftrace adds those before the
program), found as a C compiler finds them -- ``-I`` directories, then the
system's (``/usr/local/include``, the multiarch and plain ``/usr/include``,
GCC's own) -- or refused as bpftrace refuses a missing one (``'lol/no.h'
file not found``, pointed at the line).

:func:`find_headers` gives their paths, in order, ``--include`` ones first:
what the C-definitions reader takes (the types and constants they define).
"""
from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, Sequence

__all__ = ["Header", "find_headers", "system_include_dirs"]


class Header:
    """One included header: the ``name`` as written, ``path`` where it was
    found, and how it came: ``line`` of its ``#include`` (0 for
    ``--include``)."""

    __slots__ = ("name", "path", "line")

    def __init__(self, name: str, path: str, line: int) -> None:
        self.name = name
        self.path = path
        self.line = line

    def __repr__(self) -> str:
        return f"Header({self.name!r}, {self.path!r}, line={self.line})"


_SYSTEM_DIRS: list[str] = []


def system_include_dirs() -> list[str]:
    """The directories searched after ``-I`` ones, as GCC and clang search
    them on this machine (those that exist; looked up once)."""
    if not _SYSTEM_DIRS:
        _SYSTEM_DIRS.extend(_system_include_dirs())
    return list(_SYSTEM_DIRS)


def _system_include_dirs() -> list[str]:
    machine = os.uname().machine
    dirs = ["/usr/local/include", f"/usr/include/{machine}-linux-gnu", "/usr/include"]
    gcc = f"/usr/lib/gcc/{machine}-linux-gnu"
    try:
        versions = sorted(os.listdir(gcc), key=_version_key, reverse=True)
    except OSError:
        versions = []
    dirs += [os.path.join(gcc, v, "include") for v in versions[:1]]
    return [d for d in dirs if os.path.isdir(d)]


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in name.split("."))


def _directives(text: str) -> Iterable[tuple[int, int, str, str]]:
    """``(line, column of the opening quote, quote, name)`` of each
    ``#include`` line of ``text``."""
    for n, line in enumerate(text.split("\n"), 1):
        stripped = line.lstrip()
        if not stripped.startswith("#"):
            continue
        rest = stripped[1:].lstrip()
        if not rest.startswith("include"):
            continue
        after = rest[len("include"):].lstrip()
        if not after or after[0] not in '<"':
            continue
        close = ">" if after[0] == "<" else '"'
        end = after.find(close, 1)
        if end < 0:
            continue
        column = len(line) - len(after) + 1
        yield n, column, after[0], after[1:end]


def _find(name: str, dirs: Sequence[str]) -> str | None:
    for d in dirs:
        path = os.path.join(d, name)
        if os.path.isfile(path):
            return path
    return None


def find_headers(text: str, filename: str = "stdin", includes: Sequence[str] = (),
                 include_dirs: Sequence[str] = ()) -> list[Header]:
    """The headers the program ``text`` includes (``--include`` ones first),
    found; a missing one raises :class:`~pyebpf.lang.errors.LangError`
    (bpftrace's words, at the ``#include``'s name)."""
    from .errors import LangError
    found: list[Header] = []
    if not includes and "#" not in text:
        return found
    system = [*include_dirs, *system_include_dirs()]
    for name in includes:
        path = _find(name, system)
        if path is None:
            raise LangError(f"'{name}' file not found (--include)", None, filename="")
        found.append(Header(name, path, 0))
    here = os.path.dirname(os.path.abspath(filename)) if filename != "stdin" else os.getcwd()
    for line, column, quote, name in _directives(text):
        dirs = [here, *system] if quote == '"' else system
        path = _find(name, dirs)
        if path is None:
            from .ast import Pos
            raise LangError(f"'{name}' file not found", Pos(line, column, column + len(name) + 2),
                            filename=filename, source=text)
        found.append(Header(name, path, line))
    return found
