"""The documentation's pages are true: every code block runs and shows what it prints.

Each page of ``docs/`` (the lessons, the references) is read in order, its
fenced blocks (also those indented in an exercise's solution) being:

* a block with ``title="NAME"`` (``asm title="sum.s"``): a file the page
  writes, into the page's working directory, for the blocks after it;
* a ``python`` block: a program, run as the README's are
  (:func:`test_readme.run_block`), whose output is the ``text`` block that
  follows it;
* a ``console`` block: ``$ COMMAND`` lines, each run by ``sh`` in the page's
  directory (``pyebpf`` is this checkout's), followed by what it prints
  (standard output and error); a line ``...`` stands for any lines, a
  ``...`` within a line for any text (a time in microseconds).

An HTML comment just before a block qualifies it: ``<!-- test: kernel -->``
(it needs the kernel: run by the page's kernel test), ``<!-- test: fails -->``
(its commands exit non-zero, as shown), ``<!-- test: skip -->`` (not run:
a fragment), ``<!-- test: readme -->`` (a block of the user guide checked by
tests/test_readme.py as the README's are: a program with its expected output
there, a shell line whose flags must parse). Any other block is an error: a
page cannot show code that is not run.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from test_readme import run_block

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))

FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)(?P<attrs>[^\n]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   flags=re.M | re.S)
MARK = re.compile(r"<!-- test: ([\w ,-]+) -->\s*$")


@dataclasses.dataclass
class Block:
    """One fenced block of a page."""
    lang: str
    title: str | None
    body: str
    marks: set[str]
    line: int

    def where(self, page: str) -> str:
        return f"docs/{page}:{self.line}"


def page_blocks(text: str) -> list[Block]:
    """The fenced blocks of a page's Markdown, in order, dedented."""
    out = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        title = re.search(r'title="([^"]+)"', m.group("attrs"))
        indent = len(m.group("indent"))
        body = "".join(line[indent:] if line.strip() else "\n"
                       for line in m.group("body").splitlines(keepends=True))
        out.append(Block(m.group("lang"), title.group(1) if title else None, body,
                         set(mark.group(1).replace(",", " ").split()) if mark else set(),
                         text.count("\n", 0, m.start()) + 1))
    return out


@dataclasses.dataclass
class Step:
    """What the test does for a block: write a file, run a program, run commands."""
    kind: str                       # "file", "python", "console"
    block: Block
    expected: str = ""


def steps(page: str) -> list[Step]:
    """A page's blocks as steps; an unchecked block is an error."""
    blocks = page_blocks((DOCS / page).read_text())
    out: list[Step] = []
    i = 0
    while i < len(blocks):
        b = blocks[i]
        if "skip" in b.marks or "readme" in b.marks:
            pass
        elif b.title:
            out.append(Step("file", b))
        elif b.lang == "python":
            nxt = blocks[i + 1] if i + 1 < len(blocks) else None
            assert nxt is not None and nxt.lang == "text" and not nxt.title, \
                f"{b.where(page)}: a python block is followed by the text block of its output"
            out.append(Step("python", b, nxt.body))
            i += 1
        elif b.lang == "console":
            out.append(Step("console", b))
        else:
            pytest.fail(f"{b.where(page)}: a ```{b.lang} block that is not run "
                        "(give it a title= to make it a file, or mark it <!-- test: skip -->)")
        i += 1
    return out


def matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is the ``expected`` lines (trailing blanks aside),
    a line ``...`` matching any number of lines, ``...`` in a line any text."""
    want = [line.rstrip() for line in expected.rstrip("\n").splitlines()]
    got = [line.rstrip() for line in actual.rstrip("\n").splitlines()]
    pattern = "\n".join(".*?" if line == "..." else
                        "[^\n]*?".join(re.escape(part) for part in line.split("..."))
                        for line in want)
    pattern = pattern.replace("\n.*?\n", "(?:\n.*?)?\n")
    return re.fullmatch(pattern, "\n".join(got), flags=re.S) is not None


def sessions(body: str) -> list[tuple[str, str]]:
    """The (command, shown output) pairs of a console block."""
    out: list[tuple[str, str]] = []
    for line in body.splitlines(keepends=True):
        if line.startswith("$ "):
            out.append((line[2:].rstrip("\n"), ""))
        else:
            assert out, f"console block without a '$ ' line first: {body!r}"
            out[-1] = (out[-1][0], out[-1][1] + line)
    return out


def _environment(cwd: pathlib.Path) -> dict[str, str]:
    bindir = cwd / ".bin"
    bindir.mkdir(exist_ok=True)
    wrapper = bindir / "pyebpf"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pyebpf "$@"\n')
    wrapper.chmod(0o755)
    env = dict(os.environ)
    env.update(PYTHONPATH=str(ROOT), PATH=f"{bindir}:{env.get('PATH', '/usr/bin:/bin')}",
               COLUMNS="80", LC_ALL="C.UTF-8")
    env.pop("PYEBPF_DEBUG", None)
    return env


def run_steps(page: str, cwd: pathlib.Path, kernel: bool) -> int:
    """Run a page's steps (those marked ``kernel`` only when ``kernel``, the
    others only when not); the number run."""
    env = _environment(cwd)
    ran = 0
    for step in steps(page):
        b = step.block
        if step.kind == "file":
            (cwd / b.title).write_text(b.body)       # type: ignore[operator]
            continue
        if ("kernel" in b.marks) != kernel:
            continue
        ran += 1
        if step.kind == "python":
            def expect(out: str, pid: int, want: str = step.expected, b: Block = b) -> None:
                assert matches(want, out), f"{b.where(page)} prints:\n{out}\nnot:\n{want}"
            run_block(b.body, sys.executable, cwd, env, timeout=120, expect=expect)
            continue
        for command, shown in sessions(b.body):
            proc = subprocess.run(["sh", "-c", command], cwd=cwd, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, timeout=120)
            if "fails" not in b.marks:
                assert proc.returncode == 0, f"{b.where(page)}: $ {command}: exit " \
                    f"{proc.returncode}\n{proc.stdout}"
            assert matches(shown, proc.stdout), \
                f"{b.where(page)}: $ {command}\nprints:\n{proc.stdout}\nnot:\n{shown}"
    return ran


def _has_kernel_blocks(page: str) -> bool:
    return any("kernel" in s.block.marks for s in steps(page))


@pytest.mark.parametrize("page", PAGES)
def test_page_blocks_run_as_shown(page: str, tmp_path: pathlib.Path) -> None:
    run_steps(page, tmp_path, kernel=False)


@pytest.mark.kernel
@pytest.mark.parametrize("page", [p for p in PAGES if _has_kernel_blocks(p)])
def test_page_kernel_blocks_run_as_shown(page: str, tmp_path: pathlib.Path) -> None:
    assert run_steps(page, tmp_path, kernel=True)


LESSONS = [p for p in PAGES if p.startswith("lessons/") and not p.endswith("index.md")]


@pytest.mark.parametrize("page", LESSONS)
def test_a_lesson_has_a_goal_code_and_exercises_with_solutions(page: str) -> None:
    text = (DOCS / page).read_text()
    assert "**Goal:**" in text and "## Exercises" in text, page
    exercises = text.split("## Exercises", 1)[1]
    asked = re.findall(r"^(\d+)\. ", exercises, flags=re.M)
    solved = re.findall(r'^\?\?\? example "Solution (\d+)"', exercises, flags=re.M)
    assert asked and asked == solved, (page, asked, solved)
    # each solution shows code that runs (a block indented under it)
    for part in re.split(r'^\?\?\? example "Solution \d+"', exercises, flags=re.M)[1:]:
        assert re.search(r"^    ```", part, flags=re.M), page
    assert any(s.kind in ("python", "console") for s in steps(page)), page


def test_the_checker_sees_a_wrong_output() -> None:
    assert matches("r0 = 1\n...\nend\n", "r0 = 1\na\nb\nend\n")
    assert matches("r0 = 1\n...\nend\n", "r0 = 1\nend\n")
    assert not matches("r0 = 1\n", "r0 = 2\n")
    assert not matches("r0 = 1\n", "r0 = 1\nmore\n")
    assert matches("took ... us\n", "took 127 us\n")
    assert not matches("took ... us\n", "took 1\n2 us\n")
    text = textwrap.dedent('''\
        <!-- test: fails -->
        ```console
        $ false
        ```

        ??? example "Solution 1"

            ```asm title="x.s"
            exit
            ```
        ''')
    blocks = page_blocks(text)
    assert [(b.lang, b.title, b.marks) for b in blocks] == \
        [("console", None, {"fails"}), ("asm", "x.s", set())]
    assert blocks[1].body == "exit\n"
