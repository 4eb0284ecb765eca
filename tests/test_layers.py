"""pyebpf's units depend downward only, in the order the README's layout table
states: every import of one unit by another (at module level, inside a
function or for type checking alike) goes to a unit listed before it."""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "pyebpf"

#: low to high; a unit may import its own and the earlier ones
LAYERS = [
    "__version__",     # pyebpf.__version__: a constant of the package
    "errors", "_record", "_lazy", "isa", "codecs",
    "uapi",            # pyebpf.kernel.constants: the UAPI numbers, pure Python
    "program", "ptregs", "text", "vm", "elf", "btf",
    "kernel", "maps", "loader", "explain", "conformance", "attach", "events", "usdt",
    "objects",         # (after usdt: an object's program attaches through libbpf's USDT protocol)
    "trace", "profile", "lang", "export", "demo", "cli",
    "__main__", "__init__",   # the package's own facade (lazy names, the Ctrl-C hook)
]
RANK = {name: i for i, name in enumerate(LAYERS)}


def unit(module: str) -> str:
    """The unit of ``pyebpf.X...`` (``pyebpf`` itself: its facade)."""
    parts = module.split(".")
    if parts[1:3] == ["kernel", "constants"]:
        return "uapi"
    return parts[1] if len(parts) > 1 else "__init__"


def imports() -> list[tuple[str, str, str, int]]:
    """(importer unit, imported unit, file, line) of every cross-unit import."""
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("").parts
        module = ".".join(p for p in rel if p != "__init__")
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                targets = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for t in targets:
                if t == "pyebpf" or t.startswith("pyebpf."):
                    src, dst = unit(module), unit(t)
                    if src != dst:
                        out.append((src, dst, str(path.relative_to(ROOT.parent)), node.lineno))
    return out


def test_every_unit_is_in_the_order():
    found = {f.name.removesuffix(".py") for f in ROOT.iterdir()
             if f.suffix == ".py" or (f / "__init__.py").is_file()}
    assert found <= set(RANK), f"place these units in LAYERS: {sorted(found - set(RANK))}"


def test_units_import_downward_only():
    upward = [f"{file}:{line}: {src} imports {dst}" for src, dst, file, line in imports()
              if RANK[dst] > RANK[src]]
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def test_the_checker_sees_imports():
    found = {(src, dst) for src, dst, _, _ in imports()}
    assert ("trace", "usdt") in found and ("loader", "kernel") in found
    assert unit("pyebpf.kernel.constants") == "uapi" and unit("pyebpf.kernel.core") == "kernel"
