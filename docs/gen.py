"""The site's generated pages (an MkDocs hook; ``mkdocs.yml`` names it).

Generated at each build from the code, so that they cannot fall behind it:

* ``api/``: one page per public module (each module whose path has no part
  named ``_*``), rendered from the docstrings by mkdocstrings;
* ``reference/cli/``: one page per ``pyebpf`` command, from the argument
  parsers (``pyebpf COMMAND --help`` as the reader would see it);
* ``reference/errors.md``'s tree of the error classes, from :mod:`pyebpf.errors`;
* ``reference/isa.md``'s table, from :mod:`pyebpf.vm.semantics`;
* ``pyebpf.1``: the man page, from the same parsers (``man -l site/pyebpf.1``).

Run as a program (``python docs/gen.py man OUT``) it writes the man page alone.
"""
from __future__ import annotations

import argparse
import datetime
import inspect
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# ---------------------------------------------------------------- API pages

def public_modules() -> list[str]:
    """``pyebpf`` and each module whose path has no part named ``_*``, sorted."""
    out = ["pyebpf"]
    for path in sorted((ROOT / "pyebpf").rglob("*.py")):
        rel = path.relative_to(ROOT)
        if any(part.startswith("_") for part in rel.parts[:-1]) or \
                (rel.name.startswith("_") and rel.name != "__init__.py"):
            continue
        parts = rel.with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        if name not in out:
            out.append(name)
    return out


def api_page(module: str) -> str:
    """The Markdown of one module's API page."""
    return f"# {module}\n\n::: {module}\n    options:\n      show_root_heading: false\n"


def api_index(modules: list[str]) -> str:
    """The API reference's front page: every module with its docstring's first line."""
    import ast
    lines = ["# API reference", "",
             "Generated from the docstrings, one page per public module. The layers run",
             "from the instruction set (`pyebpf.isa`) up to the command line (`pyebpf.cli`);",
             "each imports only from the layers below it.", "",
             "| module | what it is |", "| --- | --- |"]
    for name in modules:
        path = ROOT / (name.replace(".", "/") + ".py")
        if not path.exists():
            path = path.with_suffix("") / "__init__.py"
        doc = (ast.get_docstring(ast.parse(path.read_text())) or "").split("\n\n")[0]
        doc = " ".join(doc.split()).replace("|", "\\|")
        lines.append(f"| [`{name}`]({name}.md) | {doc} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the command line

def commands() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every (command, parser) pair, with sub-actions as ``vm run``, in order."""
    from pyebpf.cli import build_parser
    root = build_parser()
    out: list[tuple[str, argparse.ArgumentParser]] = []
    for name, parser in root.commands.items():
        out.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                out.extend((f"{name} {sub}", p) for sub, p in action.choices.items())
    return out


def _help(parser: argparse.ArgumentParser) -> str:
    import os
    os.environ["COLUMNS"] = "88"          # the same width on every terminal
    return parser.format_help()


def cli_page(name: str, parser: argparse.ArgumentParser,
             subs: list[str]) -> str:
    """One command's page: its help text as the command prints it."""
    text = [f"# pyebpf {name}", "", f"`pyebpf {name} --help` prints:", "",
            "```text", _help(parser).rstrip(), "```", ""]
    if subs:
        text += ["Its actions:", ""]
        text += [f"- [`pyebpf {name} {s}`]({name}-{s}.md)" for s in subs]
    return "\n".join(text) + "\n"


def cli_pages() -> dict[str, str]:
    """``reference/cli/*.md`` by path."""
    from pyebpf.cli import build_parser
    root = build_parser()
    pages = {}
    listed = commands()
    tops = [n for n, _ in listed if " " not in n]
    index = ["# The command line", "",
             "One page per command, generated from its argument parser. The same text",
             "makes the man page, `man -l pyebpf.1` (built with the site).", "",
             "```text", _help(root).rstrip(), "```", "",
             "| command | what it does |", "| --- | --- |"]
    helps = {a.dest: a.help for a in root._subparsers._group_actions[0]._choices_actions} \
        if root._subparsers else {}
    for name in tops:
        index.append(f"| [`pyebpf {name}`]({name}.md) | {helps.get(name, '')} |")
    pages["reference/cli/index.md"] = "\n".join(index) + "\n"
    for name, parser in listed:
        subs = [n.split(" ", 1)[1] for n, _ in listed if n.startswith(name + " ")]
        pages[f"reference/cli/{name.replace(' ', '-')}.md"] = cli_page(name, parser, subs)
    return pages


def _roff(text: str) -> str:
    out = []
    for line in text.splitlines():
        line = line.replace("\\", "\\e").replace("-", "\\-")
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return "\n".join(out)


def man_page() -> str:
    """``pyebpf(1)`` in roff: the name, the synopsis, then each command's help."""
    from pyebpf import __version__
    from pyebpf.cli import build_parser
    root = build_parser()
    date = datetime.date.today().isoformat()
    parts = [f'.TH PYEBPF 1 "{date}" "pyebpf {__version__}" "User Commands"',
             ".SH NAME", "pyebpf \\- a pure\\-Python eBPF toolkit",
             ".SH SYNOPSIS", ".B pyebpf", "COMMAND [OPTIONS] ...",
             ".SH DESCRIPTION", ".nf", _roff(_help(root)), ".fi", ".SH COMMANDS"]
    for name, parser in commands():
        parts += [f".SS pyebpf {name}", ".nf", _roff(_help(parser).rstrip()), ".fi"]
    parts += [".SH SEE ALSO", "bpftrace(8), bpftool(8), bpf(2)"]
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------- errors, ISA

def error_tree() -> str:
    """The error classes as a nested list, each with its docstring's first sentence."""
    from pyebpf import errors
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
               if issubclass(c, errors.PyebpfError) and c.__module__ == errors.__name__]

    def line(cls: type, depth: int) -> list[str]:
        doc = " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
        builtins = [b.__name__ for b in cls.__bases__ if b.__module__ == "builtins"]
        also = f" (also a `{'`, `'.join(builtins)}`)" if builtins else ""
        out = [f"{'    ' * depth}- **`{cls.__name__}`**{also}: {doc}"]
        for sub in sorted((c for c in classes if cls in c.__bases__), key=lambda c: c.__name__):
            out += line(sub, depth + 1)
        return out
    return "\n".join(line(errors.PyebpfError, 0))


def isa_table() -> str:
    """``pyebpf vm table``'s text."""
    from pyebpf.vm import semantics
    return semantics.table()


# ---------------------------------------------------------------- the MkDocs hook

def _generated() -> dict[str, str]:
    pages = cli_pages()
    modules = public_modules()
    pages["api/index.md"] = api_index(modules)
    for name in modules:
        pages[f"api/{name}.md"] = api_page(name)
    return pages


def on_files(files, config):  # type: ignore[no-untyped-def]
    """Add the generated pages to the site's files."""
    from mkdocs.structure.files import File
    for path, text in _generated().items():
        files.append(File.generated(config, path, content=text))
    files.append(File.generated(config, "pyebpf.1", content=man_page()))
    return files


def on_page_markdown(markdown, page, config, files):  # type: ignore[no-untyped-def]
    """Fill the ``<!-- generated: NAME -->`` markers of hand-written pages."""
    fills = {"<!-- generated: error-tree -->": error_tree,
             "<!-- generated: isa-table -->": lambda: "```text\n" + isa_table() + "\n```"}
    for marker, make in fills.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown


if __name__ == "__main__":
    if sys.argv[1:2] == ["man"] and len(sys.argv) == 3:
        pathlib.Path(sys.argv[2]).write_text(man_page())
    else:
        sys.exit("usage: python docs/gen.py man OUT")


# ---------------------------------------------------------------- docstring roles

_ROLE = None


def plain_roles(text: str) -> str:
    """The docstrings' reStructuredText roles (``:class:`~a.b.C```,
    ``:func:`f```, ``:data:`X```...) as Markdown code: ```C```, ```f```."""
    global _ROLE
    import re
    if _ROLE is None:
        _ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const|term):"
                           r"`(~?)([^`<]*?)(?:\s*<([^>`]+)>)?`")

    def code(m: "re.Match[str]") -> str:
        name = (m.group(2) or m.group(3) or "").strip()
        if m.group(1) == "~":
            name = name.rsplit(".", 1)[-1]
        return f"`{name}`"
    return _ROLE.sub(code, text)


try:
    import griffe as _griffe
except ImportError:          # (python docs/gen.py man OUT needs no griffe)
    _griffe = None

if _griffe is not None:
    class PlainRoles(_griffe.Extension):
        """A griffe extension (``mkdocs.yml`` loads it): each docstring's
        roles as Markdown code, so that the pages do not show ``:class:``."""

        def on_object(self, *, obj, **kwargs):  # type: ignore[no-untyped-def]
            """Rewrite ``obj``'s docstring."""
            if obj.docstring is not None:
                obj.docstring.value = plain_roles(obj.docstring.value)
