"""Fixtures for the profile tests: the C workload with a known shape
(shapes.c, built with gcc at test time), the command line as a subprocess,
and headless Chromium."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BUILD = HERE.parent / "build" / "profile"
SVG = "{http://www.w3.org/2000/svg}"
#: frame pointers everywhere (see shapes.c for why spin() is not a leaf)
CFLAGS = ["-O1", "-g", "-fno-omit-frame-pointer", "-fno-shrink-wrap",
          "-fno-optimize-sibling-calls"]


def build(source: str, compiler: str = "gcc") -> str:
    """tests/profile/SOURCE built with frame pointers (cached by mtime)."""
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    BUILD.mkdir(parents=True, exist_ok=True)
    src = HERE / source
    out = BUILD / src.stem
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        subprocess.run([compiler, *CFLAGS, "-o", str(tmp), str(src)], check=True,
                       capture_output=True)
        os.replace(tmp, out)
    return str(out)


@pytest.fixture(scope="session")
def shapes() -> str:
    return build("shapes.c")


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``python -m pyebpf ARGS`` (this checkout) and capture its output."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "pyebpf", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=str(ROOT))


def svg_frames(text: str) -> dict[tuple[str, ...], float]:
    """``{path from the root: drawn width}`` of every frame of a flame graph SVG
    (parsed as XML: the path follows the frames' data-p parent ids). Frames
    that show the same path (names that differ only in characters XML cannot
    hold, drawn as U+FFFD) add up."""
    root = ET.fromstring(text.encode())
    by_id = {}
    for g in root.iter(f"{SVG}g"):
        if g.get("class", "").split()[:1] == ["f"]:
            title = g.find(f"{SVG}title").text
            name = title[:title.rindex(" (")]
            width = float(g.find(f"{SVG}rect").get("width"))
            by_id[int(g.get("id")[1:])] = (int(g.get("data-p")), name, width)
    out = {}
    for fid, (parent, name, width) in by_id.items():
        path = [name]
        while parent >= 0:
            parent, pname, _ = by_id[parent]
            path.append(pname)
        key = tuple(reversed(path))
        out[key] = out.get(key, 0.0) + width
    return out


