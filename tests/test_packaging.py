"""The packages a user installs: a source distribution and a wheel built from a
clean copy of this tree, the wheel installed into a fresh virtual environment
outside the checkout.

The build backend (setuptools >= 77) and pyebpf's three dependencies come
from the package index (or pip's cache), as for any user's install.
"""
from __future__ import annotations

import email.parser
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DIST = "pyebpf_toolkit"
_IGNORED = shutil.ignore_patterns(".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__",
                                  "*.pyc", ".pytest_cache", ".hypothesis")


def _run(argv: list[str], cwd: pathlib.Path, env: dict[str, str] | None = None,
         timeout: float = 300) -> str:
    proc = subprocess.run(argv, cwd=str(cwd), env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, (f"{' '.join(argv)} exited {proc.returncode}\n"
                                  f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc.stdout + proc.stderr


def _copy_tree(dest: pathlib.Path) -> None:
    """The files of a clean checkout (git's, with uncommitted edits), or the
    tree without build products when it is not a git checkout (an sdist)."""
    proc = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"],
                          capture_output=True) if (ROOT / ".git").exists() else None
    if proc is None or proc.returncode != 0:
        shutil.copytree(ROOT, dest, ignore=_IGNORED, dirs_exist_ok=True)
        return
    for name in proc.stdout.decode().split("\0"):
        src = ROOT / name
        if name and src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def _clean_env() -> dict[str, str]:
    """The environment without this checkout on the import path."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


class Built:
    """The sdist, the wheel, the build's output, and a venv with the wheel."""

    def __init__(self, base: pathlib.Path) -> None:
        self.src = base / "src"
        self.dist = base / "dist"
        self.venv = base / "venv"
        self.outside = base / "elsewhere"
        for d in (self.src, self.dist, self.outside):
            d.mkdir()
        _copy_tree(self.src)
        env = _clean_env()
        pip = [sys.executable, "-m", "pip", "--python", str(self.venv / "bin" / "python")]
        _run([sys.executable, "-m", "venv", "--without-pip", str(self.venv)], base, env)
        _run([*pip, "install", "-q", "setuptools>=77"], base, env)
        # as `python -m build` does: the sdist from the tree, the wheel from the sdist
        python = str(self.venv / "bin" / "python")
        hook = "import sys, setuptools.build_meta as b; print(b.build_{}(sys.argv[1]))"
        self.log = _run([python, "-W", "default", "-c", hook.format("sdist"), str(self.dist)],
                        self.src, env)
        self.sdist = next(self.dist.glob(f"{DIST}-*.tar.gz"))
        with tarfile.open(self.sdist) as tar:
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(base / "unpacked", **safe)
        unpacked = next((base / "unpacked").iterdir())
        self.log += _run([python, "-W", "default", "-c", hook.format("wheel"), str(self.dist)],
                         unpacked, env)
        self.wheel = next(self.dist.glob(f"{DIST}-*.whl"))
        _run([*pip, "install", "-q", str(self.wheel)], base, env)

    def command(self, *args: str) -> subprocess.CompletedProcess:
        """``pyebpf ARGS`` of the venv, from a directory outside the checkout."""
        return subprocess.run([str(self.venv / "bin" / "pyebpf"), *args], cwd=str(self.outside),
                              env=_clean_env(), capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    return Built(tmp_path_factory.mktemp("packaging"))


def _version() -> str:
    text = (ROOT / "pyebpf" / "__init__.py").read_text()
    return re.search(r'^__version__ = "([^"]+)"', text, flags=re.M).group(1)


def _programs() -> set[str]:
    return {p.name for p in (ROOT / "asm").glob("*.s")}


def test_the_build_warns_of_nothing_deprecated(built):
    assert not re.search(r"deprecat", built.log, flags=re.I), built.log


def test_wheel_contents(built):
    names = set(zipfile.ZipFile(built.wheel).namelist())
    info = f"{DIST}-{_version()}.dist-info"
    assert f"{info}/licenses/LICENSE" in names
    # every package of the tree (pyproject.toml lists them), and the ready programs
    for init in (ROOT / "pyebpf").rglob("__init__.py"):
        assert init.relative_to(ROOT).as_posix() in names, init
    assert {n.split("/")[-1] for n in names if n.startswith("pyebpf/programs/")} \
        == _programs() | {"README.md"}
    if (ROOT / "pyebpf" / "py.typed").exists():
        assert "pyebpf/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "asm/", "benchmarks/"))]


def test_wheel_metadata(built):
    wheel = zipfile.ZipFile(built.wheel)
    meta = email.parser.Parser().parsestr(
        wheel.read(f"{DIST}-{_version()}.dist-info/METADATA").decode())
    assert meta["Name"] == "pyebpf-toolkit"
    assert meta["Version"] == _version()
    assert meta["License-Expression"] == "MIT"
    assert meta["Requires-Python"] == ">=3.10"
    classifiers = meta.get_all("Classifier")
    assert "Operating System :: POSIX :: Linux" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]
    versions = {c.rsplit(" ", 1)[1] for c in classifiers
                if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    assert versions == {"3.10", "3.11", "3.12", "3.13"}
    entry_points = wheel.read(f"{DIST}-{_version()}.dist-info/entry_points.txt").decode()
    assert "pyebpf = pyebpf.cli:entry" in entry_points


def test_sdist_contents(built):
    with tarfile.open(built.sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for name in ("README.md", "LICENSE", "CHANGELOG.md", "Makefile", "pyproject.toml",
                 "MANIFEST.in", ".ci/run", ".ci/test-pythons", "tests/conftest.py",
                 "tests/test_packaging.py", "tests/trace/workload.c", "asm/README.md",
                 "benchmarks/targets/loop.c"):
        assert name in names, name
    assert {f"asm/{p}" for p in _programs()} <= names
    tracked = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("*")
               if p.is_file() and p.suffix in (".py", ".c", ".cpp")
               and "build" not in p.relative_to(ROOT).parts}
    assert tracked <= names, sorted(tracked - names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_installed_command_outside_the_checkout(built):
    proc = built.command("--version")
    assert proc.returncode == 0 and proc.stdout == f"pyebpf {_version()}\n", proc
    proc = built.command("run", "--list")
    assert proc.returncode == 0, proc.stderr
    listed = {line.split()[0] + ".s" for line in proc.stdout.splitlines()}
    assert listed == _programs(), proc.stdout
    assert "print each openat(2)" in proc.stdout
    proc = built.command("run", "opensnoop", "--info")
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith(str(built.venv)) and "pyebpf/programs/opensnoop.s: print each" \
        in first, proc.stdout
    assert "attach tracepoint:syscalls:sys_enter_openat" in proc.stdout
    proc = built.command("run", "opensnop")
    assert proc.returncode == 1 and "did you mean opensnoop?" in proc.stderr, proc.stderr


def test_installed_package_is_the_wheel(built):
    out = _run([str(built.venv / "bin" / "python"), "-c",
                "import pyebpf, importlib.metadata as m; "
                "print(pyebpf.__file__); print(m.version('pyebpf-toolkit'))"],
               built.outside, _clean_env())
    path, version = out.split()
    assert path.startswith(str(built.venv)) and version == _version()


@pytest.mark.kernel
def test_readme_examples_with_the_installed_wheel(built, tmp_path):
    from test_readme import PYTHON_BLOCKS, has_python_usdt, run_block

    python = str(built.venv / "bin" / "python")
    for _name, code in PYTHON_BLOCKS:      # the README's and the user guide's
        if "gc__start" in code and not has_python_usdt(python):
            continue
        run_block(code, python, tmp_path, _clean_env())
