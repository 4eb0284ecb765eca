"""Errors found after the front end (code generation, the verifier, the
kernel at attach time) pointed at the script, as bpftrace points:
``FILE:LINE:COL-END: ERROR: message``, the line, a ``~`` caret line.

Generated instructions carry ``FILE:LINE:COLUMN`` as their origin
(:mod:`pyebpf.lang.codegen`); :func:`script_error` turns such an origin, or
a :class:`~pyebpf.lang.ast.Pos`, back into the error the front end raises
(:class:`pyebpf.lang.errors.LangError`).
"""
from __future__ import annotations

from .ast import Pos

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .ast import Script

__all__ = ["script_error", "pos_of_origin", "too_deep"]


def pos_of_origin(origin: str | None) -> Pos | None:
    """The position ``FILE:LINE:COLUMN`` names (None when it is no such origin)."""
    if not origin:
        return None
    parts = origin.rsplit(":", 2)
    if len(parts) != 3 or not (parts[1].isdigit() and parts[2].isdigit()):
        return None
    return Pos(int(parts[1]), int(parts[2]))


def script_error(script: Script, where: Pos | str | None, message: str,
                 cause: BaseException | None = None) -> Exception:
    """A :class:`~pyebpf.lang.errors.LangError` at ``where`` (a position or an
    instruction origin); ``cause`` is kept as ``__cause__``."""
    from .errors import LangError
    pos = where if isinstance(where, Pos) or where is None else pos_of_origin(where)
    if pos is not None and not pos.end:
        pos = Pos(pos.line, pos.column, _token_end(script.line(pos.line), pos.column))
    err = LangError(message, pos, filename=script.filename, source=script.source)
    err.__cause__ = cause
    return err


def _token_end(line: str, column: int) -> int:
    """The column just past the statement starting at ``column`` (up to a
    ``;`` or ``}`` outside parentheses and quotes), for the caret."""
    depth = 0
    quoted = False
    i = column - 1
    while i < len(line):
        ch = line[i]
        if quoted:
            if ch == "\\":
                i += 1
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                break
            depth -= 1
        elif ch in ";}" and depth == 0:
            break
        i += 1
    return max(i + 1, column + 1)


def too_deep(script: Script, cause: RecursionError) -> Exception:
    """The :class:`~pyebpf.lang.errors.LangError` for a tree deeper than a
    pass could recurse (``cause``), at its deepest node (walked without
    recursion)."""
    from .ast import Node
    from .parser import TOO_DEEP
    best: tuple[int, Pos | None] = (0, None)
    todo: list[tuple[object, int]] = [(script, 0)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, Node):
            if depth > best[0]:
                best = (depth, node.pos)
            todo.extend((v, depth + 1) for v in vars(node).values())
        elif isinstance(node, (list, tuple)):
            todo.extend((v, depth) for v in node)
    return script_error(script, best[1], TOO_DEEP, cause)
