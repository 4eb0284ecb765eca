"""The documentation site (``make docs``) builds strictly, and works in a browser.

The same MkDocs build as the Makefile's ``docs`` target (``--strict``: a
broken link between pages, an API docstring that does not parse, a page
left out fails it), once per session into a temporary directory; then the
built site is served over HTTP on the loopback and opened in headless
Chromium: the home page, a lesson and an API page render (screenshots are
taken and kept under ``tests/build/docs-screenshots``), search finds a
lesson, and every internal link of every page (``href``/``src``, with its
``#anchor``) leads to a file and an element that exist.
"""
from __future__ import annotations

import functools
import html.parser
import http.server
import os
import pathlib
import posixpath
import re
import subprocess
import sys
import threading
import urllib.parse

import pytest

from browser import browse

#: the site is built once, under the suite's own Python (.ci/test-pythons leaves
#: these out: the generator's packages are not the subject under test there)
pytestmark = pytest.mark.docs

pytest.importorskip("mkdocs", reason="mkdocs is in the test extra: pip install '.[test]'")
pytest.importorskip("material", reason="mkdocs-material is in the test extra")
pytest.importorskip("mkdocstrings", reason="mkdocstrings is in the test extra")

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHOTS = ROOT / "tests" / "build" / "docs-screenshots"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The site, built as ``make docs`` builds it (a warning fails the build)."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "-d", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=240, env=env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return out


@pytest.fixture(scope="module")
def served(site: pathlib.Path):  # type: ignore[no-untyped-def]
    """The site's base URL, served from a thread of this process."""
    handler = functools.partial(_Handler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.results = []                 # type: ignore[attr-defined]
    server.got_result = threading.Event()   # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


#: added to a page served as ``/probe/PAGE``: once the search shows results,
#: their list goes back to the test server (POST /result); the page's load
#: event waits for /hold, which the server answers when the result is in, so
#: that Chromium's --dump-dom does not end the run before the search has run
_PROBE = b"""<script>
(function () {
  var t0 = Date.now();
  var poll = setInterval(function () {
    var list = document.querySelector(".md-search-result__list");
    var done = list && list.children.length;
    if (done || Date.now() - t0 > 30000) {
      clearInterval(poll);
      fetch("/result", {method: "POST", body: done ? list.innerHTML : "no results"});
    }
  }, 100);
})();
</script><img src="/hold" alt="" style="display:none"></body>"""


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/hold":
            self.server.got_result.wait(timeout=45)    # type: ignore[attr-defined]
            self._send(b"", "image/gif")
        elif self.path.startswith("/probe/"):
            page = urllib.parse.urlsplit(self.path).path[len("/probe/"):]
            html = (pathlib.Path(self.directory) / page).read_bytes()
            # the page's own links are relative to the site's root: <base> keeps them so
            html = html.replace(b"<head>", b'<head><base href="/">', 1)
            self._send(html.replace(b"</body>", _PROBE, 1), "text/html")
        else:
            super().do_GET()

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.results.append(body.decode())      # type: ignore[attr-defined]
        self.server.got_result.set()                   # type: ignore[attr-defined]
        self._send(b"", "text/plain")

    def _send(self, body: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_the_site_has_its_parts(site: pathlib.Path) -> None:
    for page in ("index.html", "lessons/01-instructions-and-the-vm.html",
                 "reference/glossary.html", "reference/errors.html", "reference/isa.html",
                 "reference/cli/index.html", "reference/cli/vm-step.html",
                 "api/index.html", "api/pyebpf.vm.html", "api/pyebpf.trace.recipes.html"):
        assert (site / page).is_file(), page
    # the API page is the docstrings, rendered
    api = (site / "api" / "pyebpf.vm.html").read_text()
    assert "Vm" in api and "doc-heading" in api
    # the generated references: every error class, every opcode row and its legend
    errors = (site / "reference" / "errors.html").read_text()
    assert "SizeError" in errors and "VerifierError" in errors
    assert "legend:" in (site / "reference" / "isa.html").read_text()


def test_the_man_page(site: pathlib.Path) -> None:
    page = (site / "pyebpf.1").read_text()
    assert page.startswith(".TH PYEBPF 1 ")
    for command in ("vm step", "explain", "bt", "object"):
        assert f".SS pyebpf {command}\n" in page, command
    # man renders it (groff is what `man -l` uses), without a warning
    proc = subprocess.run(["man", "-l", "-Tutf8", str(site / "pyebpf.1")], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "MANWIDTH": "100"})
    if proc.returncode == 0:
        assert "pyebpf vm step" in proc.stdout and not proc.stderr.strip(), proc.stderr


@pytest.mark.parametrize("page, name", [("index.html", "home"),
                                        ("lessons/01-instructions-and-the-vm.html", "lesson"),
                                        ("api/pyebpf.vm.html", "api")])
def test_pages_render_in_chromium(served, page: str, name: str) -> None:  # type: ignore[no-untyped-def]
    base, _ = served
    SHOTS.mkdir(parents=True, exist_ok=True)
    png = SHOTS / f"{name}.png"
    png.unlink(missing_ok=True)
    proc = browse(base + page, f"--screenshot={png}", "--window-size=1280,900",
                  "--virtual-time-budget=3000")
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, len(data)
    # rendered, not an error page: the DOM has the page's title and the theme's header
    dom = browse(base + page, "--dump-dom", "--virtual-time-budget=3000").stdout
    assert 'class="md-header' in dom and "pyebpf" in dom


def test_search_finds_a_lesson(served) -> None:  # type: ignore[no-untyped-def]
    # the theme's own search (a web worker over search/search_index.json),
    # opened by ?q= with the query typed in, as a reader's link would
    base, server = served
    proc = browse(base + "probe/index.html?q=subprogram", "--dump-dom")
    assert server.got_result.is_set(), proc.stderr[-2000:]
    results = server.results[-1]
    links = re.findall(r'href="([^"]+)"', results)
    assert any("lessons/02-the-assembler.html" in link for link in links), results[:3000]


class _Links(html.parser.HTMLParser):
    """The href/src values and the ids of one page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in ("href", "src") and value:
                self.links.append(value)
            if key in ("id", "name") and value:
                self.ids.add(value)


def test_no_broken_internal_link(site: pathlib.Path) -> None:
    pages: dict[str, _Links] = {}
    for path in site.rglob("*.html"):
        parsed = _Links()
        parsed.feed(path.read_text())
        pages[path.relative_to(site).as_posix()] = parsed
    broken = []
    checked = 0
    for page, parsed in pages.items():
        for link in parsed.links:
            url = urllib.parse.urlsplit(link)
            if url.scheme or url.netloc or link.startswith(("mailto:", "javascript:")):
                continue
            path = urllib.parse.unquote(url.path)
            if path.startswith("/"):              # (404.html: from the site's root)
                target = posixpath.normpath(path.lstrip("/"))
            else:
                target = page if not path else posixpath.normpath(
                    posixpath.join(posixpath.dirname(page), path))
            if url.path.endswith("/") or (site / target).is_dir():
                target = posixpath.join(target, "index.html")
            checked += 1
            if not (site / target).exists():
                broken.append(f"{page}: {link}")
            elif url.fragment and target in pages and url.fragment not in pages[target].ids:
                broken.append(f"{page}: {link} (no #{url.fragment})")
    assert checked > 1000
    assert not broken, "\n".join(broken[:40])
