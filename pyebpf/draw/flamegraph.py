"""An interactive flame graph as one self-contained SVG file.

Each distinct call path is a box whose width is its share of the samples;
callers below, callees above (the root, ``all``, at the bottom).  The file
carries its own small script and style (nothing is fetched): hovering a
frame shows its name, samples and percentage; clicking a frame zooms to it
(the frames below it stay, at full width), clicking ``all`` or "Reset zoom"
zooms out; "Search" highlights the frames matching a regular expression and
shows the share of samples they cover.  The URL's fragment does the same
without a mouse: ``graph.svg#search=REGEX`` or ``graph.svg#zoom=f12`` (a
frame's ``id``).  Without scripts (an image viewer) the picture still shows
every frame with its name fitted in its box and a ``<title>`` tooltip.

Frames narrower than :data:`MIN_WIDTH` pixels are not drawn (the folded
output keeps every stack).
"""
from __future__ import annotations

from .folded import Stacks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["flamegraph_svg", "layout", "Frame", "WIDTH", "FRAME_HEIGHT", "MIN_WIDTH"]

WIDTH = 1200          #: the picture's width (pixels)
FRAME_HEIGHT = 16     #: one frame's row
FONT_SIZE = 12
CHAR_WIDTH = 0.59     #: an average character's width, in font sizes
MIN_WIDTH = 0.1       #: frames narrower than this (pixels) are left out
PAD = 10              #: the margin left and right
TOP = 56              #: room for the title, the buttons and the details line
BOTTOM = 12

#: one laid-out frame: (id, parent id or -1, depth, first sample, samples, name)
Frame = tuple[int, int, int, int, int, str]


def layout(stacks: Stacks) -> tuple[list[Frame], int]:
    """The frames of the flame graph of ``stacks`` and the total samples.

    Frame 0 is the root (``all``, depth 0); siblings are sorted by name, as
    the folded text is, and each frame's first sample is where its parent's
    previous children end."""
    root: dict[str, list[Any]] = {}       # name -> [samples, children]
    total = 0
    for frames, count in stacks.items():
        if count <= 0 or not frames:
            continue
        total += count
        level = root
        for name in frames:
            node = level.get(name)
            if node is None:
                node = level[name] = [0, {}]
            node[0] += count
            level = node[1]
    out: list[Frame] = [(0, -1, 0, 0, total, "all")]
    todo: list[tuple[dict[str, list[Any]], int, int, int]] = [(root, 0, 1, 0)]
    while todo:
        children, parent, depth, x = todo.pop()
        for name in sorted(children):
            value, sub = children[name]
            fid = len(out)
            out.append((fid, parent, depth, x, value, name))
            if sub:
                todo.append((sub, fid, depth + 1, x))
            x += value
    return out, total


#: characters XML 1.0 does not allow (control characters but tab and line breaks)
_NOT_XML = {c: "\ufffd" for c in [*range(0x20), 0xFFFE, 0xFFFF] if c not in (9, 10, 13)}


def escape_xml(text: str) -> str:
    """``text`` for an XML attribute or element: markup characters escaped,
    characters XML cannot hold (control characters, lone surrogates) as U+FFFD."""
    if not text.isprintable():
        text = text.translate(_NOT_XML)
        if not text.isascii():
            text = text.encode("utf-8", "replace").decode("utf-8")
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


_escape = escape_xml


def _color(name: str) -> str:
    """A warm colour chosen by the name (the same name, the same colour);
    kernel frames (``_[k]``) in orange-brown, unknown ones grey."""
    h = 0
    for ch in name[:40]:
        h = (h * 31 + ord(ch)) & 0xFFFFFF
    if name.startswith("[unknown]"):
        return f"rgb({180 + h % 30},{180 + h % 30},{180 + h % 30})"
    if name.endswith("_[k]"):
        return f"rgb({200 + h % 40},{110 + (h >> 8) % 50},{40 + (h >> 16) % 30})"
    return f"rgb({225 + h % 30},{(h >> 8) % 180 + 40},{(h >> 16) % 60})"


def _fit(name: str, width: float) -> str:
    """``name`` cut to fit ``width`` pixels (``..`` marks a cut; empty when not even 3 fit)."""
    room = int((width - 6) / (FONT_SIZE * CHAR_WIDTH))
    if room < 3:
        return ""
    return name if len(name) <= room else name[:room - 2] + ".."


def flamegraph_svg(stacks: Stacks, title: str = "Flame graph", *, subtitle: str = "",
                   unit: str = "samples") -> str:
    """The flame graph of ``stacks`` (``{(outermost, ..., innermost): samples}``)
    as SVG text (see the module docs).  ``unit`` names what the counts are."""
    frames, total = layout(stacks)
    depth = max((f[2] for f in frames), default=0) + 1
    height = TOP + depth * FRAME_HEIGHT + BOTTOM
    scale = (WIDTH - 2 * PAD) / total if total else 0.0
    parts = [
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n',
        f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" data-total="{total}" '
        f'data-unit="{_escape(unit)}" data-fh="{FRAME_HEIGHT}" data-pad="{PAD}">\n',
        f"<style>{_STYLE}</style>\n",
        f'<rect class="bg" x="0" y="0" width="{WIDTH}" height="{height}"/>\n',
        f'<text id="title" x="{WIDTH // 2}" y="20">{_escape(title)}</text>\n',
        f'<text id="subtitle" x="{WIDTH // 2}" y="36">{_escape(subtitle)}</text>\n',
        f'<text id="reset" class="btn hidden" x="{PAD}" y="20">Reset zoom</text>\n',
        f'<text id="search" class="btn" x="{WIDTH - PAD}" y="20">Search</text>\n',
        f'<text id="matched" x="{WIDTH - PAD}" y="{height - 2}"></text>\n',
        f'<text id="details" x="{PAD}" y="{height - 2}"> </text>\n',
        '<g id="frames">\n',
    ]
    if not total:
        parts.append(f'<text x="{WIDTH // 2}" y="{TOP + FRAME_HEIGHT}">no samples</text>\n')
    looks: dict[str, tuple[str, str]] = {}          # name -> (escaped, colour)
    unit_text = _escape(unit)
    fh = FRAME_HEIGHT - 1
    for fid, parent, d, x, value, name in frames:
        w = value * scale
        if w < MIN_WIDTH:
            continue
        look = looks.get(name)
        if look is None:
            look = looks[name] = (_escape(name), _color(name))
        px = PAD + x * scale
        y = height - BOTTOM - (d + 1) * FRAME_HEIGHT
        fitted = _fit(name, w) if w >= 24 else ""
        # (no <text> where no name fits: the viewer adds one when zooming makes room)
        text = (f'<text x="{px + 3:.2f}" y="{y + FRAME_HEIGHT - 4}">{_escape(fitted)}</text>'
                if fitted else "")
        parts.append(
            f'<g class="f" id="f{fid}" data-p="{parent}" data-d="{d}" data-x="{x}" '
            f'data-v="{value}"><title>{look[0]} ({value} {unit_text}, '
            f'{100.0 * value / total:.2f}%)</title><rect x="{px:.2f}" y="{y}" '
            f'width="{w:.2f}" height="{fh}" rx="2" fill="{look[1]}"/>{text}</g>\n')
    parts.append("</g>\n")
    parts.append(f"<script><![CDATA[{_SCRIPT}]]></script>\n</svg>\n")
    return "".join(parts)


_STYLE = """
.bg { fill: #f8f8f0; }
text { font-family: Verdana, sans-serif; font-size: 12px; fill: #000; }
#title { font-size: 17px; text-anchor: middle; }
#subtitle { fill: #555; text-anchor: middle; }
#search, #matched { text-anchor: end; }
.btn { cursor: pointer; fill: #225; text-decoration: underline; }
.hidden { display: none; }
.f { cursor: pointer; }
.f text { pointer-events: none; }
.f:hover rect { stroke: #333; stroke-width: 0.7; }
.f.hit rect { fill: rgb(220,60,220) !important; }
.f.anc rect { opacity: 0.6; }
"""

# The viewer: plain ES5, no library.  Frames carry their place in samples
# (data-x, data-v) and depth (data-d); zooming recomputes x and width.
_SCRIPT = r"""
(function () {
  "use strict";
  var doc = document, root = doc.documentElement;
  window.addEventListener("error", function (e) {
    root.setAttribute("data-error", String(e.message || e));
  });
  var total = +root.getAttribute("data-total"), unit = root.getAttribute("data-unit");
  var pad = +root.getAttribute("data-pad"), width = +root.getAttribute("width") - 2 * pad;
  var frames = [].slice.call(doc.querySelectorAll("g.f"));
  var details = doc.getElementById("details"), matched = doc.getElementById("matched");
  var reset = doc.getElementById("reset"), search = doc.getElementById("search");
  var info = frames.map(function (g) {
    var t = g.querySelector("title").textContent, rect = g.querySelector("rect");
    return {g: g, rect: rect, text: g.querySelector("text"),
            name: t.slice(0, t.lastIndexOf(" (")), title: t,
            x: +g.getAttribute("data-x"), v: +g.getAttribute("data-v"),
            d: +g.getAttribute("data-d")};
  });
  var byId = {};
  info.forEach(function (f) { byId[f.g.id] = f; });
  var charWidth = 12 * 0.59;

  function fit(f, w) {
    var room = Math.floor((w - 6) / charWidth);
    if (!f.text) {                      // drawn without one: too narrow for its name
      if (room < 3) return;
      f.text = doc.createElementNS(root.namespaceURI, "text");
      f.text.setAttribute("y", String(+f.rect.getAttribute("y") + 12));
      f.g.appendChild(f.text);
    }
    f.text.textContent = room < 3 ? "" :
      (f.name.length <= room ? f.name : f.name.slice(0, room - 2) + "..");
  }

  function zoom(z) {
    var x0 = z ? z.x : 0, span = z ? z.v : total, d0 = z ? z.d : 0;
    info.forEach(function (f) {
      var inside = f.d >= d0 && f.x >= x0 && f.x + f.v <= x0 + span;
      var under = f.d < d0 && f.x <= x0 && f.x + f.v >= x0 + span;
      f.g.classList.toggle("hidden", !(inside || under));
      f.g.classList.toggle("anc", under && d0 > 0);
      if (!(inside || under)) return;
      var x = under ? 0 : (f.x - x0) / span * width, w = under ? width : f.v / span * width;
      f.rect.setAttribute("x", (pad + x).toFixed(2));
      f.rect.setAttribute("width", w.toFixed(2));
      fit(f, w);
      if (f.text) f.text.setAttribute("x", (pad + x + 3).toFixed(2));
    });
    reset.classList.toggle("hidden", !z || d0 === 0);
    root.setAttribute("data-zoom", z ? z.g.id : "");
  }

  function find(pattern) {
    var re;
    try { re = new RegExp(pattern); } catch (err) { matched.textContent = "bad pattern"; return; }
    var spans = [];
    info.forEach(function (f) {
      var hit = pattern !== "" && re.test(f.name);
      f.g.classList.toggle("hit", hit);
      if (hit) spans.push([f.x, f.x + f.v]);
    });
    spans.sort(function (a, b) { return a[0] - b[0]; });
    var covered = 0, end = -1;
    spans.forEach(function (s) {        // nested matches count once
      if (s[1] <= end) return;
      covered += s[1] - Math.max(s[0], end);
      end = s[1];
    });
    matched.textContent = pattern === "" ? "" :
      "Matched: " + (total ? (100 * covered / total).toFixed(2) : "0") + "%";
    root.setAttribute("data-search", pattern);
    root.setAttribute("data-matched", String(covered));
  }

  doc.getElementById("frames").addEventListener("mouseover", function (e) {
    var g = e.target.closest && e.target.closest("g.f");
    if (g) details.textContent = byId[g.id].title;
  });
  doc.getElementById("frames").addEventListener("mouseout", function () {
    details.textContent = " ";
  });
  doc.getElementById("frames").addEventListener("click", function (e) {
    var g = e.target.closest && e.target.closest("g.f");
    if (g) zoom(byId[g.id].d === 0 ? null : byId[g.id]);
  });
  reset.addEventListener("click", function () { zoom(null); });
  search.addEventListener("click", function () {
    var p = window.prompt("Search frames (regular expression):", "");
    if (p !== null) find(p);
  });

  var hash = decodeURIComponent(location.hash.slice(1));
  hash.split("&").forEach(function (kv) {
    var i = kv.indexOf("="), k = kv.slice(0, i), v = kv.slice(i + 1);
    if (k === "search") find(v);
    if (k === "zoom" && byId[v]) zoom(byId[v]);
  });
  root.setAttribute("data-ready", String(info.length));
})();
"""
