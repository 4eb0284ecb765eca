"""Headless Chromium for the tests that open what pyebpf draws or builds
(the profiler's flame graphs, the documentation site)."""
from __future__ import annotations

import shutil
import subprocess

import pytest


def chromium() -> str:
    """The headless browser (skips when Debian's chromium is not installed)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return exe


def browse(url: str, *extra: str, timeout: float = 90) -> subprocess.CompletedProcess:
    """Run headless Chromium on ``url`` with ``extra`` options (--dump-dom,
    --screenshot=PNG...); stdout is the dumped DOM."""
    import tempfile
    exe = chromium()
    with tempfile.TemporaryDirectory(prefix="pyebpf-chromium-") as home:
        args = [exe, "--headless", f"--user-data-dir={home}", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--disable-extensions", "--enable-logging=stderr", "--v=0",
                *extra, url]
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout)
