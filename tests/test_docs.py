"""The API reference (``make docs``) builds from the docstrings without a warning.

The same pdoc run as the Makefile's ``docs`` target (every public module, the
reStructuredText docstring format), into a temporary directory; pdoc warns
about what it cannot resolve (an annotation naming a type it cannot import,
an ``__all__`` entry that does not exist), which the reference would show
broken."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("pdoc", reason="pdoc is in the test extra: pip install '.[test]'")

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _public_modules() -> list[str]:
    """What the Makefile hands pdoc: pyebpf and each module whose path has no
    part named ``_*`` (packages come in through their modules)."""
    out = ["pyebpf"]
    for path in sorted((ROOT / "pyebpf").rglob("*.py")):
        rel = path.relative_to(ROOT)
        if not any(part.startswith("_") for part in rel.parts):
            out.append(".".join(rel.with_suffix("").parts))
    return out


def test_api_reference_builds_without_warnings(tmp_path: pathlib.Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pdoc", "-d", "restructuredtext",
                           "-o", str(tmp_path), *_public_modules()],
                          cwd=ROOT, capture_output=True, text=True, timeout=240,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    warnings = [line for line in (proc.stdout + proc.stderr).splitlines() if "Warn" in line]
    assert not warnings, "\n".join(warnings)
    assert (tmp_path / "pyebpf" / "trace" / "recipes.html").is_file()
