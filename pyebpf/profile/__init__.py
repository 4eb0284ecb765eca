"""Profiles: CPU stack sampling (``pyebpf profile``), and the pictures it draws.

The drawing is :mod:`pyebpf.draw`'s (pure, on plain data: stack profiles
``{(root, ..., leaf): samples}`` and histograms ``{bucket: count}``); this
package re-exports it: :func:`folded_text` (``main;work;hot 123`` lines),
:func:`flamegraph_svg` (a self-contained interactive SVG),
:func:`speedscope_json`, :func:`histogram_svg` (a bar chart),
:func:`write_profile` (a profile in the format a file name's extension
names, never lost to a drawing error) and :func:`write_histogram`.

The sampling half (:mod:`pyebpf.profile.sampler`, behind ``pyebpf profile``)
samples stacks from perf events, with CPython's Python frames walked in the
kernel (:mod:`pyebpf.symbols.python`, :mod:`pyebpf.lang.pywalk`), and
symbolizes them.
"""
from __future__ import annotations

from ..draw.chart import histogram_svg
from ..draw.flamegraph import flamegraph_svg
from ..draw.folded import folded_text, parse_folded
from ..draw.output import FORMATS, write_histogram, write_profile
from ..draw.speedscope import speedscope_json

__all__ = ["folded_text", "parse_folded", "flamegraph_svg", "speedscope_json", "histogram_svg",
           "write_profile", "write_histogram", "FORMATS"]
