"""Profiles and pictures: CPU stack sampling, folded stacks, flame graphs, charts.

The drawing half is pure (no kernel, no I/O beyond the file written) and
takes plain data, so anything that collects stacks or histograms can use it:

- a *stack profile* is a mapping ``{(root, ..., leaf): samples}`` of frame
  names (strings), the outermost frame first;
- a *histogram* is a mapping ``{bucket: count}`` (log2 buckets as
  :mod:`pyebpf.trace.aggregate` numbers them, or linear ones with a label
  function).

:func:`folded_text` (``main;work;hot 123`` lines), :func:`flamegraph_svg`
(a self-contained interactive SVG), :func:`speedscope_json` (the speedscope
file format) and :func:`histogram_svg` (a bar chart) return text;
:func:`write_profile` writes a profile in the format a file name's extension
names (``.svg``, ``.folded``, ``.json``) without ever losing it to a drawing
error, and :func:`write_histogram` writes a chart.

The sampling half (:mod:`pyebpf.profile.sampler`, behind ``pyebpf profile``)
samples stacks from perf events, with CPython's Python frames walked in the
kernel (:mod:`pyebpf.profile.python`, :mod:`pyebpf.profile.pywalk`), and
symbolizes them.
"""
from __future__ import annotations

from .chart import histogram_svg
from .flamegraph import flamegraph_svg
from .folded import folded_text, parse_folded
from .output import FORMATS, write_histogram, write_profile
from .speedscope import speedscope_json

__all__ = ["folded_text", "parse_folded", "flamegraph_svg", "speedscope_json", "histogram_svg",
           "write_profile", "write_histogram", "FORMATS"]
