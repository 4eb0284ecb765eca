"""The README's examples, and the user guide's (``docs/guide/*.md``, where the
README's sections went), are true.

Every ```python block is a whole program that runs as written (as root, from
any directory) and prints what the block says it prints; every shell line of
a ```sh block that starts a ``pyebpf`` command parses with the command line's
parser (its flags exist) and names a ready program that exists; every
``make TARGET`` is a target of the Makefile.  On the guide's pages these
blocks are marked ``<!-- test: readme -->``: they are checked here, not by
tests/test_lessons.py (whose python blocks show their output in a text block).
"""
from __future__ import annotations

import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: the README and the user guide's pages, whose blocks this module checks
SOURCES = [README] + sorted((ROOT / "docs" / "guide").glob("*.md"))
_MARKED = re.compile(r"^<!-- test: readme -->\n```(\w+)\n(.*?)^```", flags=re.M | re.S)


def blocks(language: str, text: str | None = None) -> list[str]:
    """The fenced code blocks of ``language`` in the README (or ``text``), in order."""
    text = README.read_text() if text is None else text
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.M | re.S)


def source_blocks(language: str) -> list[tuple[str, str]]:
    """(file, code) of the blocks of ``language`` this module checks: all of
    the README's, and those of the guide's pages marked ``<!-- test: readme -->``."""
    out = []
    for path in SOURCES:
        text = path.read_text()
        name = path.relative_to(ROOT).as_posix()
        if path == README:
            out += [(name, code) for code in blocks(language, text)]
        else:
            out += [(name, code) for lang, code in _MARKED.findall(text) if lang == language]
    return out


def _malloc_histogram(out: str, pid: int) -> None:
    assert re.search(r"^@bytes:\s*\n(\[.*\|\n)+", out, flags=re.M), out
    # bytearray(n) for n up to 200,000: some of them in [64K, 128K)
    assert re.search(r"^\[64K, 128K\)\s+[1-9]", out, flags=re.M), out


def _requests(out: str, pid: int) -> None:
    assert re.search(r"^100 requests$", out, flags=re.M), out


def _collections(out: str, pid: int) -> None:
    m = re.search(r"^(\d+) collections$", out, flags=re.M)
    assert m and int(m.group(1)) >= 10, out


def _map_count(out: str, pid: int) -> None:
    assert out.splitlines()[0] == "1000", out


def _kill_calls(out: str, pid: int) -> None:
    assert re.findall(r"^kill\((\d+), 0\)$", out, flags=re.M) == [str(pid)] * 3, out
    assert out.splitlines()[-1] == "0 lost", out


def _bt_getpid(out: str, pid: int) -> None:
    lines = out.splitlines()
    assert re.fullmatch(r"pid \d+", lines[0]), out
    assert re.fullmatch(r"\{'@calls': \{'python3': [1-9]\d*\}\}", lines[-1]), out


def _vm_sum(out: str, pid: int) -> None:
    assert out.splitlines() == ["55"], out


# What each python block prints, keyed by a piece of its code (one each).
EXPECTED = {
    'Trace("uprobe:libc:malloc"': _malloc_histogram,
    'Provider("myapp")': _requests,
    '"python:gc__start"': _collections,
    "HashMap(": _map_count,
    "RingBufferReader(": _kill_calls,
    "uprobe:libc:getpid": _bt_getpid,
    "Vm(program)": _vm_sum,
}


def expectation(code: str):
    """The check of a python block (exactly one key of EXPECTED is in it)."""
    keys = [k for k in EXPECTED if k in code]
    assert len(keys) == 1, f"give this README block one expected output in EXPECTED:\n{code}"
    return EXPECTED[keys[0]]


def run_block(code: str, python: str, cwd: pathlib.Path, env: dict[str, str],
              timeout: float = 60, expect=None) -> None:
    """Run one python block as a program of its own and check what it prints
    with ``expect(stdout, pid)`` (default: the block's entry in EXPECTED;
    the documentation's pages, tests/test_lessons.py, pass the output they show)."""
    script = cwd / "example.py"
    script.write_text(code)
    proc = subprocess.Popen([python, str(script)], cwd=str(cwd), env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the example did not finish in {timeout} s:\n{code}\n{out}\n{err}")
    assert proc.returncode == 0, f"{code}\nexit {proc.returncode}\nstdout:\n{out}\nstderr:\n{err}"
    (expect or expectation(code))(out, proc.pid)


def has_python_usdt(python: str) -> bool:
    """Whether ``python``'s binary has the ``python:gc__start`` USDT probe."""
    from pyebpf.errors import UsdtError
    from pyebpf.usdt import usdt
    try:
        usdt(os.path.realpath(python), "python:gc__start")
    except UsdtError:
        return False
    return True


PYTHON_BLOCKS = source_blocks("python")


def test_the_readme_has_python_examples():
    assert len([f for f, _ in PYTHON_BLOCKS if f == "README.md"]) >= 3   # one per kind of user
    assert len(PYTHON_BLOCKS) >= 7
    for name, code in PYTHON_BLOCKS:
        compile(code, name, "exec")
        expectation(code)
    # every key of EXPECTED is some block's: a block that moved is still run
    for key in EXPECTED:
        assert any(key in code for _, code in PYTHON_BLOCKS), key


def test_guide_blocks_are_marked_for_this_module():
    """A python or sh block of a guide page without the mark would be run by
    neither this module nor tests/test_lessons.py's format."""
    for path in SOURCES[1:]:
        text = path.read_text()
        for m in re.finditer(r"^```(python|sh)\n", text, flags=re.M):
            before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            if m.group(1) == "sh" or "test:" in before:
                assert before == "<!-- test: readme -->", (path.name, text.count("\n", 0, m.start()) + 1)


@pytest.mark.kernel
@pytest.mark.parametrize("index", range(len(PYTHON_BLOCKS)),
                         ids=[f"{f}-{i}" for i, (f, _) in enumerate(PYTHON_BLOCKS)])
def test_python_example_runs_as_written(index, tmp_path):
    code = PYTHON_BLOCKS[index][1]
    python = sys.executable
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)           # this checkout's pyebpf
    if "gc__start" in code and not has_python_usdt(python):
        # this interpreter (a pyenv or self-built one) has no probes: run the
        # example under Debian's python3 (make test installs it), with this
        # environment's packages when it is the same version
        import sysconfig

        from systools import PYTHON, PYVER
        if PYVER != "%d.%d" % sys.version_info[:2] or not has_python_usdt(PYTHON):
            pytest.skip(f"{sys.executable} has no USDT probes, and {PYTHON} (Debian's "
                        f"python3, which has them) is not a usable {sys.version_info[:2]}")
        python = PYTHON
        env["PYTHONPATH"] += os.pathsep + sysconfig.get_paths()["purelib"]
    run_block(code, python, tmp_path, env)


def _commands(line: str) -> list[str] | None:
    """The argument list of the ``pyebpf`` command of a shell line, if any."""
    words = shlex.split(line, comments=True)
    for sep in ("|", "&&", ";"):
        if sep in words:
            words = words[len(words) - 1 - words[::-1].index(sep) + 1:]
    if words[:1] == ["pyebpf"]:
        return words[1:]
    return None


def test_shell_lines_use_flags_that_exist(capsys):
    from pyebpf.cli import build_parser
    from pyebpf.cli.run import resolve_program

    makefile = (ROOT / "Makefile").read_text()
    seen = 0
    for _name, block in source_blocks("sh"):
        for line in block.splitlines():
            if line.startswith("make "):
                target = line.split()[1]
                assert re.search(rf"^{re.escape(target)}:", makefile, flags=re.M), line
                continue
            if "pyebpf" not in line or line.count("'") % 2:
                continue                     # (a line inside a multi-line quote)
            argv = _commands(line)
            if argv is None:
                continue
            seen += 1
            try:
                args = build_parser().parse_args(argv)
            except SystemExit as exc:         # --version, --help: 0
                if exc.code != 0:
                    pytest.fail(f"README: {line!r} does not parse: {capsys.readouterr().err}")
                continue
            if args.command == "run" and args.file:
                resolve_program(args.file)
    assert seen >= 10


def test_shell_line_check_fails_on_a_wrong_flag():
    from pyebpf.cli import build_parser
    with pytest.raises(SystemExit):
        build_parser().parse_args(_commands("pyebpf run opensnoop --bogus"))
    assert _commands("echo x | pyebpf asm - -o p.bin  # c") == ["asm", "-", "-o", "p.bin"]
    assert _commands("make demo") is None
