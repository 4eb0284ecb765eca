"""Aggregations' results as text and JSON: bpftrace's layouts (``@name[key]:
value``, histograms with bars, ``-f json`` objects) and tables.

The functions take the aggregations (anything shaped like
:class:`AggregateLike`: a :class:`~pyebpf.lang.flags.FlagAggregate` of a
recipe or of ``pyebpf trace``'s flags, a program's) and their results (:data:`AggResult` by display name); the
sessions' ``format_text``, ``format_table`` and ``json_objects`` call them.
"""
from __future__ import annotations

from typing import Any, Protocol, cast

from ..symbols.stacks import format_stack
from .render import format_count, format_hist, hist_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

#: one part of an aggregation key as shown: a number, a string (``comm``,
#: ``str(...)``, ``probe``, ``func``), or a user stack (its frames, innermost first)
KeyPart = int | str | tuple[str, ...]
#: the value of one key of an aggregation: count/sum/min/max/avg an int (min,
#: max and avg None while nothing was recorded), stats ``(count, average,
#: total)`` (None likewise), hist/lhist ``{bucket: count}``
AggValue = int | tuple[int, int, int] | dict[int, int] | None
#: the results of one aggregation: its value, or when keyed ``{key: value}``
#: with one :data:`KeyPart` per key expression
AggResult = AggValue | dict[tuple[KeyPart, ...], AggValue]


class _Text(Protocol):
    @property
    def text(self) -> str: ...


class _Buckets(Protocol):
    def bucket_range(self, bucket: int) -> tuple[int | None, int | None]: ...


class AggregateLike(Protocol):
    """What the printers read of an aggregation: its kind (``count``,
    ``hist``...), names, key and value expressions (their ``text``), linear
    histogram parameters, and the aggregation numbering its buckets."""

    kind: str
    name: str | None
    linear: tuple[int, int, int] | None

    @property
    def display(self) -> str:
        """The name as printed (``@name``)."""
        ...

    @property
    def keys(self) -> Sequence[_Text]:
        """The key expressions (their ``text`` heads a table's columns)."""
        ...

    @property
    def value(self) -> _Text | None:
        """The value expression (None for a count)."""
        ...

    def aggregation(self) -> Any:
        """The aggregation numbering a histogram's buckets (``bucket_range``)."""
        ...


__all__ = ["format_text", "format_table", "json_objects", "key_text", "AggregateLike", "KeyPart",
           "AggValue", "AggResult"]


def format_text(aggregates: Iterable[AggregateLike], results: dict[str, AggResult]) -> str:
    """The aggregations as bpftrace prints them at exit (sorted by name)."""
    by_name = {a.display: a for a in aggregates}
    return "".join(_format_agg(by_name[name], results[name]) for name in sorted(results))


def format_table(aggregates: Iterable[AggregateLike], results: dict[str, AggResult]) -> str:
    """The aggregations as tables: one column per key expression and the
    value(s), rows by decreasing value; histograms (and unkeyed aggregations)
    as bpftrace prints them."""
    by_name = {a.display: a for a in aggregates}
    chunks = []
    for name in sorted(results):
        a = by_name[name]
        data: Any = results[name]          # {key: value} (keyed, shaped by a.kind)
        if a.kind in ("hist", "lhist") or not a.keys:
            chunks.append(_format_agg(a, data))
        else:
            chunks.append(f"{name}\n{_table(a, data)}\n\n")
    return "".join(chunks)


def _table(a: AggregateLike, data: dict[tuple[KeyPart, ...], Any]) -> str:
    """The rows of keyed aggregation ``a``, under a header, columns aligned."""
    stats = a.kind == "stats"
    vcols = ["COUNT", "AVERAGE", "TOTAL"] if stats else [
        f"{a.kind.upper()}({a.value.text})" if a.value is not None else "COUNT"]

    def order(kv: tuple[tuple[KeyPart, ...], Any]) -> int:
        value: int = kv[1][2] if stats else kv[1]
        return -value
    rows = []
    for k, v in sorted(data.items(), key=order):
        keys = [" / ".join(x) if isinstance(x, tuple) else str(x) for x in k]
        rows.append(keys + ([str(x) for x in v] if stats else [str(v)]))
    head = [k.text.upper() for k in a.keys] + vcols
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    nkeys = len(a.keys)

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(widths[i]) if i < nkeys else c.rjust(widths[i])
                         for i, c in enumerate(r)).rstrip()
    return "\n".join(line(r) for r in [head] + rows)


def json_objects(aggregates: Iterable[AggregateLike], results: dict[str, AggResult]
                 ) -> list[dict[str, Any]]:
    """The aggregations as JSON objects (bpftrace's ``-f json`` shapes):
    ``{"type": "map"|"hist"|"stats", "data": {"@name": ...}}``, by name."""
    by_name = {a.display: a for a in aggregates}
    return [_json_agg(by_name[name], results[name]) for name in sorted(results)]


def key_text(key: tuple[KeyPart, ...], for_json: bool = False) -> str:
    """A key as printed: its parts separated by ``, ``; a stack as its frames
    one per line (for JSON: outermost first, separated by ``;``, the folded
    form flame graphs read)."""
    parts = []
    for k in key:
        if isinstance(k, tuple):          # a stack
            parts.append(";".join(reversed(k)) if for_json else format_stack(k))
        else:
            parts.append(str(k))
    return ", ".join(parts)


def _format_agg(a: AggregateLike, data: Any) -> str:
    name = a.name or ""
    if a.kind in ("hist", "lhist"):
        if a.keys:
            data = {key_text(k): v for k, v in data.items()}
        return format_hist(name, data or {}, linear=a.linear, keyed=bool(a.keys))
    if a.kind == "stats":
        def st(v: tuple[int, int, int]) -> str:
            return f"count {v[0]}, average {v[1]}, total {v[2]}"
        if a.keys:
            lines = [f"@{name}[{key_text(k)}]: {st(v)}"
                     for k, v in sorted(data.items(), key=lambda kv: (kv[1][2], str(kv[0])))]
            return "\n".join(lines) + "\n\n" if lines else ""
        return f"@{name}: {st(data) if data else 'count 0, average 0, total 0'}\n\n"
    if a.keys:
        text = format_count(name, {key_text(k): v for k, v in data.items()})
        text = text + "\n" if text else ""
    else:
        text = format_count(name, 0 if data is None else data) + "\n"
    return text + ("\n" if a.kind == "avg" else "")


def _json_agg(a: AggregateLike, data: Any) -> dict[str, Any]:
    name = a.display
    if a.kind in ("hist", "lhist"):
        h = cast("_Buckets", a.aggregation())

        def conv(b: dict[int, int]) -> list[dict[str, Any]]:
            return hist_json(b, h.bucket_range)
        hists = ({key_text(k, True): conv(v) for k, v in data.items()} if a.keys
                 else conv(data or {}))
        return {"type": "hist", "data": {name: hists}}
    if a.kind == "stats":
        def st(v: tuple[int, int, int] | None) -> dict[str, int]:
            v = v or (0, 0, 0)
            return {"count": v[0], "average": v[1], "total": v[2]}
        stats_ = {key_text(k, True): st(v) for k, v in data.items()} if a.keys else st(data)
        return {"type": "stats", "data": {name: stats_}}
    body = {key_text(k, True): v for k, v in data.items()} if a.keys else data
    return {"type": "map", "data": {name: body}}
