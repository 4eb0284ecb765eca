"""Pictures of a bpftrace program's maps (``pyebpf bt --flamegraph`` and
``--plot``), drawn when the run ends, after the maps were printed as text.

- :func:`write_flamegraphs`: every map keyed by a stack (``ustack`` or
  ``kstack``, alone or with other keys) becomes a flame graph
  (:func:`pyebpf.draw.output.write_profile`): each entry's frames from the
  outermost, the other keys' values folded in as the root frames (in key
  order), its value the width (a count, sum or integer; an average's count; a
  histogram's total).
- :func:`write_plots`: every ``hist``/``lhist`` map becomes a bar chart
  (:func:`pyebpf.draw.output.write_histogram`), one per key of a keyed
  map, labelled with bpftrace's bucket labels.

One picture goes to ``FILE``; several to ``FILE-NAME.svg`` each (``NAME``
the map's name without ``@``, then the key for a keyed histogram). A drawing
error never loses the data: the profile writer saves it as text beside
``FILE`` and says where (:class:`~pyebpf.draw.output.ProfileWriteError`).
"""
from __future__ import annotations

from functools import partial

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from .types import Type

__all__ = ["write_flamegraphs", "write_plots", "stack_maps", "hist_maps", "flame_stacks",
           "picture_paths"]

_STACKS = ("ustack", "kstack", "pystack")


def _elems(key: Type | None) -> tuple[Type, ...]:
    if key is None:
        return ()
    return tuple(key.elems) if key.kind == "tuple" else (key,)


def stack_maps(run: Any) -> list[str]:
    """The names of ``run``'s maps keyed by a stack, sorted."""
    return sorted(n for n, plan in run.unit.maps.items()
                  if any(e.kind in _STACKS for e in _elems(plan.key)))


def hist_maps(run: Any) -> list[str]:
    """The names of ``run``'s hist/lhist maps, sorted."""
    return sorted(n for n, plan in run.unit.maps.items() if plan.value.kind in ("hist", "lhist"))


def _weight(value: Any) -> int:
    if isinstance(value, dict):                    # hist/lhist: its total
        return sum(int(c) for c in value.values())
    if isinstance(value, tuple):                   # avg/stats: (count, total)
        return int(value[0])
    return int(value) if isinstance(value, int) else 1


def flame_stacks(run: Any, name: str) -> dict[tuple[str, ...], int]:
    """``{frames from the root: weight}`` of the stack-keyed map ``name``."""
    from . import output
    plan = run.unit.maps[name]
    elems = _elems(plan.key)
    out: dict[tuple[str, ...], int] = {}
    for key, value in run.entries(name).items():
        values = key if plan.key is not None and plan.key.kind == "tuple" else (key,)
        roots: list[str] = []
        frames: list[str] = []
        for t, v in zip(elems, values):
            if t.kind in _STACKS:
                got = run.stacks.stack(v, t) if run.stacks is not None else []
                frames.extend(n or f"0x{a:x}" for a, n, _m in reversed(list(got)))
            else:
                roots.append(output.format_value(t, v, syms=run._sym_text, key=True))
        path = tuple(roots + frames) or ("[empty stack]",)
        weight = _weight(value)
        if weight > 0:
            out[path] = out.get(path, 0) + weight
    return out


def _slug(text: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in text).strip("_")
    return keep or "map"


def picture_paths(path: str, names: list[str]) -> dict[str, str]:
    """``{name: file}``: ``path`` itself for one picture, else
    ``BASE-NAME.EXT`` for each (``NAME`` made safe for a file name)."""
    import os
    if len(names) == 1:
        return {names[0]: path}
    base, ext = os.path.splitext(path)
    out: dict[str, str] = {}
    for n in names:
        f = f"{base}-{_slug(n.lstrip('@') or 'map')}{ext or '.svg'}"
        i = 2
        while f in out.values():
            f = f"{base}-{_slug(n.lstrip('@') or 'map')}-{i}{ext or '.svg'}"
            i += 1
        out[n] = f
    return out


def write_flamegraphs(run: Any, path: str) -> list[str]:
    """Draw every stack-keyed map of ``run`` (see the module docs); returns
    the files written. Raises ProfileWriteError (the data saved as text)
    after trying every map."""
    from ..draw.output import write_profile

    def draw(name: str, f: str) -> None:
        write_profile(flame_stacks(run, name), f, title=f"{name} (pyebpf bt)")
    return _write_each([(f, partial(draw, name, f))
                        for name, f in picture_paths(path, stack_maps(run)).items()])


def write_plots(run: Any, path: str) -> list[str]:
    """Draw every hist/lhist map of ``run``, one chart per key (see the
    module docs); returns the files written."""
    from ..draw.output import write_histogram
    from . import output_maps as output
    charts: list[tuple[str, str, dict[int, int], Type]] = []   # (file name, title, buckets, type)
    for name in hist_maps(run):
        plan = run.unit.maps[name]
        entries = run.entries(name)
        for key in sorted(entries, key=output._key_order):
            if plan.key is None:
                charts.append((name, name, entries[key], plan.value))
            else:
                text = output._key_text(plan.key, key, None, run._sym_text)
                charts.append((f"{name}-{text}", f"{name}[{text}]", entries[key], plan.value))
    paths = picture_paths(path, [c[0] for c in charts])
    return _write_each([(paths[fname], partial(write_histogram, buckets, paths[fname],
                                               f"{title} (pyebpf bt)",
                                               label=output._hist_labels(t)))
                        for fname, title, buckets, t in charts])


def _write_each(writes: list[tuple[str, Callable[[], object]]]) -> list[str]:
    """Run every ``(file, write)``; the files written. A
    :class:`~pyebpf.draw.output.ProfileWriteError` (all their messages)
    after trying every one when some failed."""
    from ..draw.output import ProfileWriteError
    written: list[str] = []
    errors: list[str] = []
    for f, write in writes:
        try:
            write()
            written.append(f)
        except ProfileWriteError as exc:
            errors.append(str(exc))
    if errors:
        raise ProfileWriteError("; ".join(errors))
    return written
