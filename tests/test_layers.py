"""pyebpf's units depend downward only, in the order the README's layout table
states: every import of one unit by another (at module level, inside a
function or for type checking alike) goes to a unit listed before it.

What the language and the profiler share sits below both, then the language,
the Python recipe API on it, the programs built on them, the command line:
... usdt, objects, probes, symbols, draw, session, lang, trace, profile,
export, demo, cli (issue 26)."""
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
    "probes",          # probe specs and sources (uprobe, tracepoint, USDT resolution)
    "symbols",         # stack and kernel symbolization
    "draw",            # buckets, bpftrace's text layouts, flame graphs, charts: pure
    "session",         # loaded programs + links + reader, the CLI's loop, asm/ files
    "lang",            # the bpftrace language: the one compiler
    "trace",           # the Python recipe API, on the language
    "profile", "export", "demo",   # programs built on them
    "cli",
    "__main__", "__init__",   # the package's own facade (lazy names, the Ctrl-C hook)
]
RANK = {name: i for i, name in enumerate(LAYERS)}


def unit(module: str) -> str:
    """The unit of ``pyebpf.X...`` (``pyebpf`` itself: its facade)."""
    parts = module.split(".")
    if parts[1:3] == ["kernel", "constants"]:
        return "uapi"
    return parts[1] if len(parts) > 1 else "__init__"


def _is_module(name: str) -> bool:
    """Whether ``pyebpf.X.Y`` names a module (``from .lang import ast``
    imports the module pyebpf.lang.ast, not only the package)."""
    path = ROOT.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


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
                targets = [f"{target}.{a.name}" if not node.module or _is_module(
                    f"{target}.{a.name}") else target for a in node.names]
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


def upward(found: list[tuple[str, str, str, int]]) -> list[str]:
    """The imports of ``found`` that go against the layer order."""
    return [f"{file}:{line}: {src} imports {dst}" for src, dst, file, line in found
            if RANK[dst] > RANK[src]]


def test_units_import_downward_only():
    bad = upward(imports())
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


def test_the_checker_sees_imports():
    found = {(src, dst) for src, dst, _, _ in imports()}
    assert ("probes", "usdt") in found and ("loader", "kernel") in found
    assert ("trace", "lang") in found and ("lang", "probes") in found
    assert unit("pyebpf.kernel.constants") == "uapi" and unit("pyebpf.kernel.core") == "kernel"


def test_the_language_sits_below_the_recipes():
    """The units the language and the profiler share sit below the language,
    the recipe API above it: lang importing trace or profile, or a shared
    unit importing lang, is refused."""
    assert unit("pyebpf.lang.parser") == unit("pyebpf.lang.codegen") == "lang"
    assert (RANK["usdt"] < RANK["probes"] < RANK["symbols"] < RANK["draw"] < RANK["session"]
            < RANK["lang"] < RANK["trace"] < RANK["profile"] < RANK["cli"])
    refused = [("lang", "trace", "pyebpf/lang/codegen.py", 1),
               ("lang", "profile", "pyebpf/lang/pictures.py", 1),
               ("draw", "lang", "pyebpf/draw/render.py", 1),
               ("session", "lang", "pyebpf/session/live.py", 1)]
    assert len(upward(refused)) == 4
    assert not upward([("trace", "lang", "pyebpf/trace/recipes.py", 1),
                       ("lang", "draw", "pyebpf/lang/output.py", 1),
                       ("profile", "symbols", "pyebpf/profile/sampler.py", 1)])
