"""How a bpftrace-language map becomes Prometheus metrics (pure: no kernel).

The mapping (``PREFIX`` is ``--prefix``, ``pyebpf_`` by default; ``NAME`` the
map's name without its ``@``, ``map`` for the unnamed ``@``):

=================  ==========================================================
``count()``        counter ``PREFIX NAME _total``; a gauge ``PREFIX NAME``
                   when the program ``clear()``/``zero()``/``delete()``\\ s
                   the map (a counter must never go down)
``sum/min/max``    gauge ``PREFIX NAME``
``avg``            gauge ``PREFIX NAME`` (the integer average, as bpftrace's)
``stats``          ``PREFIX NAME _count`` and ``_sum`` (a summary without
                   quantiles) and the gauge ``PREFIX NAME _avg``
``hist/lhist``     histogram ``PREFIX NAME``: cumulative ``_bucket{le=...}``
                   and ``_count`` (no ``_sum``: the map does not keep it)
plain integers     gauge ``PREFIX NAME`` (``@x[k] = v``); other plain values
                   (strings, tuples...) are not exported (said at start)
=================  ==========================================================

Keys become labels: one key is ``key``, several ``key0``, ``key1``...;
integers in decimal (64-bit ones signed, as bpftrace prints them), strings
as they are, stacks folded root first (``main;work;leaf``, offsets dropped),
other values as bpftrace prints them in a map key.

Histogram bounds: a bucket holds integers ``[lo, hi)``, so its ``le`` is
``hi - 1`` (exact for integer values): log2 buckets give ``le`` = ``-1``
(the negatives), ``0``, ``1``, ``3``, ``7``, ``15``...; ``lhist(min, max,
step)`` gives ``min - 1``, ``min + step - 1``... and ``+Inf`` for ``>= max``.
A map's buckets run from its lowest to its highest non-empty bucket (log2:
from ``le="0"`` at least), the same for all its keys, then ``+Inf``.

The series cap (``--max-series``) bounds the keys a scrape exports, all
maps together (a map without keys is one series and always exported): the
maps are taken by name, each exports as many keys as the budget has left --
its largest (counts, sums, histogram totals, stats counts; the first ones
for other kinds) -- and folds the others into one series whose key labels
are all ``__other__`` (counts and sums added, min/max kept, histograms
merged; plain values are dropped, not folded). ``PREFIX
dropped_series_total`` counts the folded keys, added at every scrape.
"""
from __future__ import annotations

from .._record import Record, record
from ..lang.types import Type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Iterator

    #: a stack's frames ``(address, symbol or None, module or None)`` from
    #: (value, type): what :meth:`pyebpf.lang.stacks.StackPrinter.stack` gives
    Stacks = Callable[[Any, Type], Any]

__all__ = ["MapExport", "OTHER", "describe", "families", "metric_name", "le_bounds",
           "label_names", "label_values", "valid_prefix"]

#: the key label of the series the cap folds the extra keys into
OTHER = "__other__"
_RESETTING = ("clear", "zero", "delete")


def valid_prefix(prefix: str) -> bool:
    """True if ``prefix`` can start a metric name (``[a-zA-Z_:][a-zA-Z0-9_:]*``
    or empty)."""
    if not prefix:
        return True
    ok = all(c == "_" or c == ":" or (c.isascii() and c.isalnum()) for c in prefix)
    return ok and not prefix[0].isdigit()


def metric_name(prefix: str, map_name: str) -> str:
    """``PREFIX NAME``: the map's name without ``@`` (``map`` for ``@``),
    characters a metric name cannot have replaced by ``_``."""
    name = map_name.lstrip("@") or "map"
    return prefix + "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_"
                            for c in name)


@record
class MapExport(Record):
    """One map as exported: its bpftrace ``name`` (``@x``), aggregation
    ``kind`` (or ``plain``), ``key`` type (None without keys), ``value``
    type, the ``metric`` name, and ``resets``: the program clears, zeroes or
    deletes from it (a count is then a gauge)."""

    name: str
    kind: str
    key: Type | None
    value: Type
    metric: str
    resets: bool = False

    @property
    def exported(self) -> bool:
        """False for plain maps of values that are not integers."""
        return self.kind != "plain" or self.value.kind == "int"

    def notice(self) -> str | None:
        """What to say at start about this map (None: nothing unusual)."""
        if not self.exported:
            return f"{self.name} holds {self.value} values, not numbers: not exported"
        if self.kind == "count" and self.resets:
            return (f"{self.name} is cleared or deleted from by the program: exported as "
                    f"the gauge {self.metric}, not as a counter (counters never go down)")
        return None


def describe(maps: Iterable[tuple[str, str, Type | None, Type]], resetting: set[str],
             prefix: str) -> list[MapExport]:
    """The exports of ``maps`` (``(name, kind, key type, value type)``);
    ``resetting`` names the maps the program clears/zeroes/deletes from."""
    return [MapExport(name, kind, key, value, metric_name(prefix, name), name in resetting)
            for name, kind, key, value in sorted(maps)]


def resetting_maps(script: Any) -> set[str]:
    """The maps (``@x``) a parsed script calls ``clear``, ``zero`` or
    ``delete`` on (walking the tree of :mod:`pyebpf.lang.ast`)."""
    from ..lang import ast as A
    found: set[str] = set()
    seen: set[int] = set()

    def walk(node: Any) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, A.Call) and node.name in _RESETTING:
            for arg in node.args:
                if isinstance(arg, A.Map):
                    found.add("@" + arg.name)
        if isinstance(node, (list, tuple)):
            for x in node:
                walk(x)
        elif hasattr(node, "_fields"):          # a tree node (pyebpf._record.dataclass)
            for field in node._fields:
                walk(getattr(node, field))
    walk(script)
    return found


# ---------------------------------------------------------------- labels
def label_names(key: Type | None) -> list[str]:
    """``[]``, ``["key"]`` or ``["key0", "key1", ...]``."""
    if key is None:
        return []
    if key.kind == "tuple":
        return [f"key{i}" for i in range(len(key.elems))]
    return ["key"]


def _fold_stack(frames: Any) -> str:
    names = []
    for addr, sym, _module in reversed(list(frames)):
        names.append(sym.split("+", 1)[0] if sym else f"0x{addr:x}")
    return ";".join(names)


def _one_label(t: Type, v: Any, stacks: Stacks | None) -> str:
    if t.kind in ("ustack", "kstack"):
        if stacks is None:
            return str(v)
        return _fold_stack(stacks(v, t))
    if isinstance(v, str):
        return v
    if t.kind == "int" and isinstance(v, int):     # (64-bit keys print signed, as bpftrace's)
        return str(v - (1 << 64) if t.size >= 8 and v >= 1 << 63 else v)
    from ..lang import output
    return output.format_value(t, v, stacks=stacks, key=True).strip()


def label_values(key: Type | None, k: Any, stacks: Stacks | None = None) -> list[str]:
    """The label values of the map key ``k`` (of type ``key``)."""
    if key is None:
        return []
    if key.kind == "tuple":
        return [_one_label(t, v, stacks) for t, v in zip(key.elems, k)]
    return [_one_label(key, k, stacks)]


# ---------------------------------------------------------------- buckets
def _bucket_hi(value: Type, bucket: int) -> int | None:
    """The exclusive upper end of ``bucket`` (None: unbounded)."""
    if value.lhist is None:
        from ..draw.buckets import log2_bucket_range
        return log2_bucket_range(bucket)[1]
    from ..lang.output_maps import lhist_range
    return lhist_range(bucket, *value.lhist)[1]


def le_bounds(value: Type, lowest: int, highest: int) -> list[tuple[int, str]]:
    """``(bucket, le)`` of the buckets ``lowest..highest`` (log2: from bucket 1,
    ``le="0"``, at least), ``+Inf`` last (once)."""
    first = min(lowest, 1) if value.lhist is None else lowest
    out: list[tuple[int, str]] = []
    for b in range(first, highest + 1):
        hi = _bucket_hi(value, b)
        if hi is None:
            break
        out.append((b, str(hi - 1)))
    return out


# ---------------------------------------------------------------- the cap
def _weight(kind: str, v: Any) -> int:
    if kind in ("count", "sum"):
        return abs(int(v))
    if kind in ("hist", "lhist"):
        return int(sum(v.values()))
    if kind in ("avg", "stats"):
        return int(v[0])
    return 0


def _fold(kind: str, values: list[Any]) -> Any:
    """One value of ``kind`` for several (None: plain values do not fold)."""
    if kind in ("count", "sum"):
        return sum(values)
    if kind == "min":
        return min(values)
    if kind == "max":
        return max(values)
    if kind in ("avg", "stats"):
        return (sum(c for c, _ in values), sum(t for _, t in values))
    if kind in ("hist", "lhist"):
        merged: dict[int, int] = {}
        for buckets in values:
            for b, c in buckets.items():
                merged[b] = merged.get(b, 0) + c
        return merged
    return None


def capped(kind: str, entries: dict[Any, Any], max_series: int
           ) -> tuple[list[tuple[Any, Any]], Any, int]:
    """``(kept (key, value) pairs, folded value or None, number folded)``."""
    items = list(entries.items())
    if len(items) <= max_series:
        return items, None, 0
    if kind in ("count", "sum", "hist", "lhist", "avg", "stats"):
        items.sort(key=lambda kv: _weight(kind, kv[1]), reverse=True)
    kept, rest = items[:max_series], items[max_series:]
    return kept, _fold(kind, [v for _, v in rest]), len(rest)


# ---------------------------------------------------------------- families
def _avg(count: int, total: int) -> int:
    """bpftrace's integer average (C division)."""
    return abs(total) // count * (1 if total >= 0 else -1) if count else 0


def families(exp: MapExport, entries: dict[Any, Any], *, max_series: int,
             stacks: Stacks | None = None) -> tuple[list[Any], int]:
    """``(metric families, keys folded)`` of map ``exp`` whose entries are
    ``entries`` (as :func:`pyebpf.lang.runtime.map_entries` gives them),
    exporting ``max_series`` keys at most (a map without keys: its one)."""
    if not exp.exported:
        return [], 0
    names = label_names(exp.key)
    if exp.key is None:
        max_series = len(entries)
    kept, other, folded = capped(exp.kind, entries, max_series)
    rows = [(label_values(exp.key, k, stacks), v) for k, v in kept]
    if other is not None:
        rows.append(([OTHER] * len(names), other))
    return list(_render(exp, names, rows)), folded


def _render(exp: MapExport, names: list[str], rows: list[tuple[list[str], Any]]
            ) -> Iterator[Any]:
    from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                        HistogramMetricFamily, SummaryMetricFamily)
    doc = f"bpftrace map {exp.name}: {exp.kind}()" if exp.kind != "plain" else \
        f"bpftrace map {exp.name}"
    kind, m = exp.kind, exp.metric
    if kind == "count" and not exp.resets:
        fam: Any = CounterMetricFamily(m, doc, labels=names)
        for labels, v in rows:
            fam.add_metric(labels, v)
        yield fam
    elif kind in ("count", "sum", "min", "max", "plain"):
        fam = GaugeMetricFamily(m, doc, labels=names)
        for labels, v in rows:
            fam.add_metric(labels, v)
        yield fam
    elif kind == "avg":
        fam = GaugeMetricFamily(m, doc, labels=names)
        for labels, (count, total) in rows:
            fam.add_metric(labels, _avg(count, total))
        yield fam
    elif kind == "stats":
        summary = SummaryMetricFamily(m, doc, labels=names)
        avg = GaugeMetricFamily(m + "_avg", doc + ", the average", labels=names)
        for labels, (count, total) in rows:
            summary.add_metric(labels, count, total)
            avg.add_metric(labels, _avg(count, total))
        yield summary
        yield avg
    else:
        yield _histogram(exp, names, rows, doc, HistogramMetricFamily)


def _histogram(exp: MapExport, names: list[str], rows: list[tuple[list[str], Any]], doc: str,
               cls: Any) -> Any:
    from prometheus_client.samples import Sample
    fam = cls(exp.metric, doc, labels=names)
    present = [b for _, buckets in rows for b, c in buckets.items() if c]
    bounds = le_bounds(exp.value, min(present), max(present)) if present else \
        le_bounds(exp.value, 1, 1)
    for labels, buckets in rows:
        total = sum(buckets.values())
        cum, out = 0, []
        for b, le in bounds:
            cum += buckets.get(b, 0)
            out.append((le, cum))
        out.append(("+Inf", total))
        fam.add_metric(labels, out, None)
        fam.samples.append(Sample(exp.metric + "_count", dict(zip(names, labels)), total,
                                  None, None))
    return fam
