"""The little of C's preprocessor a bpftrace script uses, without running
one: ``#define NAME value`` and ``#include <header>`` lines before the
probes.

- ``#define NAME BODY`` (no parameters): every later ``NAME`` in the
  script is replaced by ``BODY``'s tokens, as cpp replaces it (bpftrace runs
  the script through clang's preprocessor);
- ``#include <h>`` / ``#include "h"``: the header must exist in the system's
  include directories (else bpftrace's ``'h' file not found``); its
  object-like ``#define`` s whose value is a number (``EPERM``), and those of
  the headers it includes, become macros of the script. Its types are not
  read: a ``struct`` it defines is found in the kernel's BTF, as bpftrace
  finds kernel types there.
"""
from __future__ import annotations

import os
import re

from ..errors import PyebpfError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Sequence

__all__ = ["directive", "header_macros", "HeaderNotFound"]
_DEFINE = re.compile(r"#\s*define\s+([A-Za-z_]\w*)(?![\w(])\s*(.*)")
_INCLUDE = re.compile(r"#\s*include\s*[<\"]([^>\"]+)[>\"]")
_NUMBER = re.compile(r"\(?\s*-?\s*(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\s*\)?")
#: at most this many headers read for one ``#include`` (a guard, not a limit met)
_MAX_HEADERS = 200


class HeaderNotFound(PyebpfError, LookupError):
    """An ``#include`` names a header no system include directory has
    (:func:`pyebpf.lang.includes.system_include_dirs`)."""


def directive(text: str) -> tuple[str, str, str]:
    """``("define", NAME, BODY)``, ``("include", HEADER, "")`` or
    ``("other", text, "")`` for one ``#...`` line."""
    m = _DEFINE.match(text.strip())
    if m:
        return "define", m.group(1), _strip_comment(m.group(2)).strip()
    m = _INCLUDE.match(text.strip())
    if m:
        return "include", m.group(1), ""
    return "other", text, ""


def _strip_comment(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text)
    return text.split("//", 1)[0]


def _find(name: str, here: str | None = None, first: Sequence[str] = ()) -> str | None:
    from .includes import system_include_dirs
    dirs = ([here] if here else []) + [*first, *system_include_dirs()]
    for d in dirs:
        path = os.path.join(d, name)
        if os.path.isfile(path):
            return path
    return None


def header_macros(name: str, include_dirs: Sequence[str] = ()) -> dict[str, str]:
    """The numeric object-like macros of header ``name`` and of the headers
    it includes (every ``#if`` branch read; the first definition of a name
    kept): NAME -> its text. ``include_dirs`` (``-I``) are searched before
    the system's. Raises :class:`HeaderNotFound`."""
    path = _find(name, None, include_dirs)
    if path is None:
        raise HeaderNotFound(name)
    macros: dict[str, str] = {}
    aliases: dict[str, str] = {}
    seen: set[str] = set()
    todo = [path]
    while todo and len(seen) < _MAX_HEADERS:
        p = todo.pop(0)
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(p, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            if not line.lstrip().startswith("#"):
                continue
            m = _INCLUDE.match(line.strip())
            if m:
                found = _find(m.group(1), os.path.dirname(p), include_dirs)
                if found is not None:
                    todo.append(found)
                continue
            m = _DEFINE.match(line.strip())
            if not m or m.group(1) in macros or m.group(1) in aliases:
                continue
            body = _strip_comment(m.group(2)).strip()
            if _NUMBER.fullmatch(body):
                macros[m.group(1)] = body
            elif re.fullmatch(r"[A-Za-z_]\w*", body):
                aliases[m.group(1)] = body
    for alias, target in aliases.items():        # EWOULDBLOCK -> EAGAIN
        for _ in range(8):
            if target in macros or target not in aliases:
                break
            target = aliases[target]
        if target in macros:
            macros[alias] = macros[target]
    return macros
