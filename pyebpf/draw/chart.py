"""Histograms as SVG bar charts (``hist`` / ``lhist`` aggregations).

One bar per bucket from the lowest to the highest non-empty one (empty
buckets in between drawn empty, as bpftrace prints them), labelled like
bpftrace's text histograms: ``[4, 8)``, ``[1K, 2K)`` for log2 buckets
(:func:`pyebpf.draw.render.log2_label`); a label function for others.
Each bar has a ``<title>`` with its count and share.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

from .flamegraph import escape_xml as _escape

__all__ = ["histogram_svg"]

_BAR = 22          # one bar's row
_LABEL_W = 150     # the labels' column
_COUNT_W = 90      # the counts' column
WIDTH = 900




def histogram_svg(buckets: Mapping[int, int], title: str = "Histogram", *,
                  label: Callable[[int], str] | None = None, unit: str = "") -> str:
    """A horizontal bar chart of ``{bucket: count}`` as SVG text.

    ``label(bucket)`` names a bucket (default: bpftrace's log2 labels);
    ``unit`` is shown after the title (``usecs``...)."""
    if label is None:
        from .render import log2_label
        label = log2_label
    nonzero = sorted(b for b, c in buckets.items() if c)
    rows = list(range(nonzero[0], nonzero[-1] + 1)) if nonzero else []
    counts = [max(0, int(buckets.get(b, 0))) for b in rows]
    top = max(counts, default=0)
    total = sum(counts)
    height = 50 + max(1, len(rows)) * _BAR + 16
    bar_room = WIDTH - _LABEL_W - _COUNT_W - 20
    heading = title + (f" ({unit})" if unit else "")
    parts = [
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n',
        f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" data-total="{total}">\n',
        "<style>text { font-family: Verdana, sans-serif; font-size: 12px; }"
        " .t { font-size: 16px; } .l { text-anchor: end; } rect.b { fill: rgb(70,120,200); }"
        " rect.b:hover { fill: rgb(230,120,40); }</style>\n",
        f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#fbfbf8"/>\n',
        f'<text class="t" x="10" y="24">{_escape(heading)}</text>\n',
    ]
    if not rows:
        parts.append('<text x="10" y="60">no data</text>\n')
    for i, (b, c) in enumerate(zip(rows, counts)):
        y = 40 + i * _BAR
        w = bar_room * c / top if top else 0.0
        pct = 100.0 * c / total if total else 0.0
        text = _escape(label(b))
        parts.append(
            f'<g class="bar" data-bucket="{b}" data-count="{c}">'
            f'<title>{text}: {c} ({pct:.2f}%)</title>'
            f'<text class="l" x="{_LABEL_W}" y="{y + 15}">{text}</text>'
            f'<rect class="b" x="{_LABEL_W + 8}" y="{y + 3}" width="{w:.2f}" '
            f'height="{_BAR - 6}"/>'
            f'<text x="{_LABEL_W + 14 + w:.2f}" y="{y + 15}">{c}</text></g>\n')
    parts.append("</svg>\n")
    return "".join(parts)
