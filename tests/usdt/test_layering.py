"""The USDT layer sits below the tracing layer (issue 13 §3): no module of
pyebpf/usdt imports pyebpf.trace (read with ``ast``, lazy imports inside
functions included), and the ELF side of the notes is pyebpf.elf's."""
from __future__ import annotations

import ast
import pathlib

import pyebpf

USDT = pathlib.Path(pyebpf.__file__).resolve().parent / "usdt"


def _imports(path: pathlib.Path) -> list[str]:
    """Absolute names of every module ``path`` imports, anywhere in it."""
    package = ["pyebpf", "usdt"]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.append(mod)
            out += [f"{mod}.{a.name}" for a in node.names]      # from .. import trace
    return out


def test_scanner_sees_relative_and_lazy_imports(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from ..lang.aggregations import Count\n"
                   "    from .. import trace\n")
    assert "pyebpf.lang.aggregations" in _imports(src) and "pyebpf.trace" in _imports(src)


def test_usdt_never_imports_trace():
    bad = {p.name: m for p in sorted(USDT.glob("**/*.py")) for m in _imports(p)
           if m == "pyebpf.trace" or m.startswith("pyebpf.trace.")}
    assert not bad, f"pyebpf.usdt imports the tracing layer: {bad}"


def test_notes_read_elf_through_pyebpf_elf():
    mods = _imports(USDT / "notes.py")
    assert not [m for m in mods if m.startswith("elftools")]
    assert "pyebpf.elf.headers" in mods
