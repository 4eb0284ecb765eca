"""Folded ("collapsed") stacks: one line per distinct stack, ``main;work;hot 123``.

The text the flame graph tools read: the frames from the outermost to the
innermost joined by ``;``, a space, the sample count.  A frame name cannot
hold ``;`` or a line break there: those become ``:`` and a space.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..errors import OptionError

#: a stack profile: frame names, outermost first -> samples
Stacks = Mapping[tuple[str, ...], int]

__all__ = ["Stacks", "folded_frame", "folded_text", "parse_folded", "merge"]


def folded_frame(name: str) -> str:
    """``name`` made safe for a folded line (no ``;``, no line break)."""
    if ";" in name or "\n" in name or "\r" in name:
        name = name.replace(";", ":").replace("\r", " ").replace("\n", " ")
    return name


def merge(stacks: Iterable[tuple[Iterable[str], int]]) -> dict[tuple[str, ...], int]:
    """``{stack: total}`` from ``(frames, count)`` pairs (repeated stacks
    added up; empty stacks and counts <= 0 dropped)."""
    out: dict[tuple[str, ...], int] = {}
    for frames, count in stacks:
        key = tuple(frames)
        if key and count > 0:
            out[key] = out.get(key, 0) + count
    return out


def folded_text(stacks: Stacks) -> str:
    """The folded text of ``stacks``, sorted by stack (each line ends with ``\\n``)."""
    lines = []
    for frames, count in stacks.items():
        if frames and count > 0:
            lines.append(";".join(map(folded_frame, frames)) + f" {count}\n")
    lines.sort()
    return "".join(lines)


def parse_folded(text: str) -> dict[tuple[str, ...], int]:
    """Read folded text back into ``{stack: samples}`` (blank lines skipped);
    raises :class:`~pyebpf.errors.OptionError` naming the first bad line."""
    out: dict[tuple[str, ...], int] = {}
    for n, line in enumerate(text.split("\n"), 1):     # (not splitlines: \f is a frame's)
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        stack, _, count = line.rstrip().rpartition(" ")
        try:
            value = int(count)
        except ValueError:
            value = -1
        if not stack or value < 0:
            raise OptionError(f"folded stacks, line {n}: expected 'frame;frame;... COUNT', "
                              f"not {line[:80]!r}")
        key = tuple(stack.split(";"))
        out[key] = out.get(key, 0) + value
    return out
