"""The flame graph opened in a real browser (Debian's headless Chromium):
the frames are in the page, its script ran without an error, searching and
zooming work, and it renders to a non-empty picture."""
from __future__ import annotations

import re
import struct

import pytest

from pyebpf.profile import write_profile

from browser import browse

SHAPE = {("main", "work", "hot"): 300, ("main", "work", "cold"): 100,
         ("main", "other", "leaf"): 100, ("main", "work", "hot", "std::vector<int>::at"): 5}


@pytest.fixture(scope="module")
def graph(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("svg") / "shape.svg"
    write_profile(SHAPE, str(path), "shape")
    return str(path)


def dom(path: str, fragment: str = "") -> str:
    proc = browse(f"file://{path}{fragment}", "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Uncaught" not in proc.stderr and "SyntaxError" not in proc.stderr, proc.stderr
    return proc.stdout


def frames(page: str) -> dict[str, str]:
    """``{frame name: its <g ...> start tag}`` from a dumped page."""
    out = {}
    for m in re.finditer(r'(<g class="f[^"]*"[^>]*>)<title>(.*?) \(\d+ samples', page):
        out[m.group(2)] = m.group(1)
    return out


def width(page: str, name: str) -> float:
    m = re.search(r'<title>' + re.escape(name) + r' \(\d+ samples[^<]*</title><rect[^>]*'
                  r'width="([\d.]+)"', page)
    assert m, name
    return float(m.group(1))


def test_the_page_loads_with_its_frames_and_no_script_error(graph):
    page = dom(graph)
    root = page[:page.index(">")]                        # the <svg> element's attributes
    assert 'data-ready="8"' in root, root                  # the script ran to its end
    assert "data-error" not in root
    got = frames(page)
    assert {"all", "main", "work", "hot", "cold", "other", "leaf"} <= set(got)
    assert "std::vector&lt;int&gt;::at" in got


def test_search_highlights_the_matching_frames(graph):
    page = dom(graph, "#search=^(hot|leaf)$")
    got = frames(page)
    hits = {name for name, tag in got.items() if " hit" in tag}
    assert hits == {"hot", "leaf"}
    assert 'data-matched="405"' in page                  # 305 + 100 samples
    assert "Matched: 80.20%" in page


def test_zoom_widens_a_frame_and_hides_its_siblings(graph):
    before = dom(graph)
    zoom_id = re.search(r'id="(f\d+)"[^>]*><title>work ', before).group(1)
    page = dom(graph, f"#zoom={zoom_id}")
    assert f'data-zoom="{zoom_id}"' in page
    full = width(before, "all")
    assert width(page, "work") == pytest.approx(full, abs=0.05)
    assert width(page, "hot") == pytest.approx(full * 305 / 405, abs=0.05)
    assert " hidden" in frames(page)["other"] and " hidden" not in frames(page)["hot"]
    assert width(before, "hot") == pytest.approx(full * 305 / 505, abs=0.05)


def test_the_page_renders_to_a_picture(graph, tmp_path):
    png = tmp_path / "shot.png"
    proc = browse(f"file://{graph}", f"--screenshot={png}", "--window-size=1200,200")
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    assert (w, h) == (1200, 200) and len(data) > 2000      # not a blank page


def test_zooming_names_frames_that_were_too_narrow(tmp_path):
    stacks = {("main", "big"): 10_000, ("main", "tiny", "tinier"): 4}
    path = tmp_path / "narrow.svg"
    write_profile(stacks, str(path))
    text = path.read_text()
    assert ">tinier</text>" not in text                    # 0.5 px wide: no name drawn
    zoom_id = re.search(r'id="(f\d+)"[^>]*><title>tiny ', text).group(1)
    page = dom(str(path), f"#zoom={zoom_id}")
    assert ">tinier</text>" in page and "data-error" not in page[:page.index(">")]
    assert width(page, "tinier") == pytest.approx(width(page, "all"), abs=0.05)
