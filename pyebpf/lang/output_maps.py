"""Maps as bpftrace 0.17 prints them, at exit and with ``print(@m, top, div)``,
as text and as ``-f json`` lines (part of :mod:`pyebpf.lang.output`, whose
values and their printing it uses). Pure: no kernel, no I/O.

A map's entries are a mapping from its key (``None``/``()`` for a map
without keys; a tuple when it has several) to its value (see
:mod:`~pyebpf.lang.output` for the value of each type).

What bpftrace does, and this module with it:

- keyed maps of integers (count, sum, min, max, plain ints) are printed by
  value ascending; avg and stats by their average; hist/lhist by their total
  count; other maps by key. Ties come in bpftrace's hash order; here by key.
- ``print(@m, top, div)``: the last ``top`` entries of that order; values
  (and histogram counts, and averages, not stats) divided by ``div`` after
  sorting.
- an empty map prints as one blank line (two for avg and stats), nothing in
  JSON; avg/stats/hist maps end with a blank line.
- at exit bpftrace prints two newlines, then every map by name
  (:func:`format_exit`).
"""
from __future__ import annotations

from .output import OutputError, _avg, _cdiv, _dumps, _json_value, format_value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

    from .output import StackFormatter, SymFormatter
    from .types import Type

__all__ = ["format_map", "format_exit", "json_map", "hist_text", "lhist_bucket", "lhist_range"]


def lhist_bucket(value: int, lo: int, hi: int, step: int) -> int:
    """The bucket of ``value`` in bpftrace 0.17's ``lhist(value, lo, hi,
    step)``: 0 below ``lo``; then ``(hi - lo) // step`` buckets of ``step``;
    then one for the rest (``[hi, ...)``: a value in a last partial step,
    ``lhist(9, 0, 10, 3)``, goes there too, as bpftrace counts it)."""
    n = (hi - lo) // step
    if value < lo:
        return 0
    return min((value - lo) // step + 1, n + 1)


def lhist_range(bucket: int, lo: int, hi: int, step: int) -> tuple[int | None, int | None]:
    """``[min, max)`` of an lhist bucket as bpftrace 0.17 labels it (None:
    open-ended)."""
    n = (hi - lo) // step
    if bucket <= 0:
        return None, lo
    if bucket > n:
        return hi, None
    start = lo + (bucket - 1) * step
    return start, start + step


def _hist_labels(value: Type) -> Callable[[int], str]:
    from ..draw.render import linear_label, log2_label
    if value.kind == "lhist":
        if value.lhist is None:
            raise OutputError("an lhist type needs its (min, max, step)")
        lo, hi, step = value.lhist
        return lambda b: linear_label(*lhist_range(b, lo, hi, step))
    return log2_label


def _bucket_range(value: Type) -> Callable[[int], tuple[int | None, int | None]]:
    from ..draw.buckets import log2_bucket_range
    if value.kind == "lhist":
        lo, hi, step = value.lhist or (0, 1, 1)
        return lambda b: lhist_range(b, lo, hi, step)
    return log2_bucket_range


def hist_text(value: Type, buckets: Mapping[int, int], div: int = 1) -> str:
    """The bucket lines of a histogram (each ending with a newline), from the
    lowest to the highest non-empty bucket. As bpftrace, the counts shown
    are divided by ``div`` but the bars are drawn from the counts before."""
    from ..draw.render import hist_lines
    return "".join(line + "\n" for line in hist_lines(buckets, _hist_labels(value), div))


def _sort_key(value: Type) -> Callable[[Any], Any]:
    k = value.kind
    if k in ("int", "count", "sum", "min", "max"):
        return lambda v: int(v)
    if k in ("avg", "stats"):
        return lambda v: _avg(*v)
    if k in ("hist", "lhist"):
        return lambda v: sum(v.values())
    return lambda v: 0


def _key_order(key: Any) -> Any:
    """A total order over keys of one type (ints, strs, bytes, tuples)."""
    if isinstance(key, tuple):
        return tuple(_key_order(k) for k in key)
    if isinstance(key, (int, float)):
        return (0, key, "")
    return (1, 0, str(key))


def _ordered(key: Type | None, value: Type, entries: Mapping[Any, Any],
             top: int) -> list[tuple[Any, Any]]:
    items = list(entries.items())
    if key is not None:
        by_value = _sort_key(value)
        if value.kind in ("int", "count", "sum", "min", "max", "avg", "stats", "hist", "lhist"):
            items.sort(key=lambda kv: (by_value(kv[1]), _key_order(kv[0])))
        else:
            items.sort(key=lambda kv: _key_order(kv[0]))
    if top and len(items) > top:
        items = items[len(items) - top:]
    return items


def _key_text(key: Type | None, k: Any, stacks: Any, syms: Any, sep: str = ", ") -> str:
    if key is None:
        return ""
    if key.kind == "tuple":
        parts = k if isinstance(k, tuple) else (k,)
        return sep.join(format_value(e, v, stacks=stacks, syms=syms, key=True)
                        for e, v in zip(key.elems, parts))
    return format_value(key, k, stacks=stacks, syms=syms, key=True)


def _divided(value: Type, v: Any, div: int) -> Any:
    """A value divided by ``print()``'s ``div``: integers and averages (an
    avg becomes its divided average, an int); stats are not divided."""
    k = value.kind
    if k == "avg":
        return _cdiv(_avg(*v), div)
    if div != 1 and k in ("int", "count", "sum", "min", "max"):
        return _cdiv(int(v), div)
    return v


def format_map(name: str, key: Type | None, value: Type, entries: Mapping[Any, Any], *,
               top: int = 0, div: int = 1, stacks: StackFormatter | None = None,
               syms: SymFormatter | None = None) -> str:
    """Map ``name`` (``"@x"`` or ``"@"``) as bpftrace 0.17 prints it at exit
    and with ``print(@x, top, div)`` (see the module docs for the order and
    the blank lines). ``key`` is the key's type (None: no key; a tuple type
    for several keys, whose entries are keyed by tuples)."""
    entries = _count_default(key, value, entries)
    items = _ordered(key, value, entries, top)
    k = value.kind
    if not items:
        return "\n\n" if k in ("avg", "stats") else "\n"
    out = []
    for kv, v in items:
        head = name + (f"[{_key_text(key, kv, stacks, syms)}]" if key is not None else "") + ": "
        if k in ("hist", "lhist"):
            out.append(head + "\n" + hist_text(value, v, max(div, 1)) + "\n")
            continue
        v = _divided(value, v, div)
        text = str(v) if k == "avg" else format_value(value, v, stacks=stacks, syms=syms)
        out.append(head + text + "\n")
    if k in ("avg", "stats"):
        out.append("\n")
    return "".join(out)


def _count_default(key: Type | None, value: Type, entries: Mapping[Any, Any]) -> Mapping[Any, Any]:
    """A ``count()`` map without keys prints ``@: 0`` when empty (never
    counted, cleared or deleted), as in bpftrace 0.17; other empty maps
    print a blank line."""
    if key is None and value.kind == "count" and not entries:
        return {None: 0}
    return entries


def format_exit(maps: Iterable[tuple[str, Type | None, Type, Mapping[Any, Any]]], *,
                stacks: StackFormatter | None = None, syms: SymFormatter | None = None) -> str:
    """What bpftrace prints at exit: two newlines, then every map (``(name,
    key type, value type, entries)``) in name order."""
    return "\n\n" + "".join(format_map(n, kt, vt, e, stacks=stacks, syms=syms)
                            for n, kt, vt, e in sorted(maps, key=lambda m: m[0]))


def _json_hist(value: Type, buckets: Mapping[int, int], div: int) -> list[dict[str, int]]:
    """A histogram's ``-f json`` buckets: an open end has no ``min``/``max``."""
    from ..draw.render import hist_json
    return [{k: v for k, v in d.items() if v is not None}
            for d in hist_json(buckets, _bucket_range(value), div)]


def json_map(name: str, key: Type | None, value: Type, entries: Mapping[Any, Any], *,
             top: int = 0, div: int = 1, stacks: StackFormatter | None = None,
             syms: SymFormatter | None = None) -> str:
    """Map ``name`` as a ``-f json`` line (no newline), or ``""`` for an
    empty map (bpftrace prints nothing then): ``{"type": "map"|"hist"|
    "stats", "data": {"@name": ...}}``, several keys joined by ``,``."""
    entries = _count_default(key, value, entries)
    items = _ordered(key, value, entries, top)
    if not items:
        return ""
    k = value.kind
    kind = "hist" if k in ("hist", "lhist") else "stats" if k in ("avg", "stats") else "map"

    def one(v: Any) -> Any:
        if k in ("hist", "lhist"):
            return _json_hist(value, v, max(div, 1))
        if k == "stats":
            count, total = v
            return {"count": count, "average": _avg(count, total), "total": total}
        if k == "avg":
            return _divided(value, v, div)
        return _json_value(value, _divided(value, v, div), stacks=stacks, syms=syms)

    if key is None:
        data: Any = one(items[0][1])
    else:
        data = {_key_text(key, kv, stacks, syms, ","): one(v) for kv, v in items}
    return _dumps({"type": kind, "data": {name: data}})
