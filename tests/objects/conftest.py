"""Fixtures of the object-loader tests: the C test programs of c/ built once
per session with Debian's clang (-O2 -g -target bpf) against libbpf-dev's
headers and a vmlinux.h bpftool writes from the running kernel's BTF, and
the uprobe target built with gcc; plus what libbpf (bpftool) says of each."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

HERE = pathlib.Path(__file__).resolve().parent
CLANG = shutil.which("clang") or shutil.which("clang-14")
BPFTOOL = shutil.which("bpftool")
GCC = shutil.which("gcc") or shutil.which("cc")
VMLINUX = "/sys/kernel/btf/vmlinux"
#: kinds.bpf.c holds this many programs, each built alone with -DONLY=N too
KINDS = 8


def compile_bpf(src: pathlib.Path, out: pathlib.Path, name: str, *defines: str) -> str:
    """``clang -O2 -g -target bpf -c`` of a test program (vmlinux.h in ``out``)."""
    obj = out / name
    subprocess.run([CLANG, "-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86", *defines,
                    "-I", str(out), "-c", str(src), "-o", str(obj)], check=True,
                   capture_output=True)
    return str(obj)


@pytest.fixture(scope="session")
def objects(tmp_path_factory) -> dict[str, str]:
    """``{name: path}``: every c/*.bpf.c, and ``kinds1``..``kinds8`` (one
    program of kinds.bpf.c each)."""
    if CLANG is None or BPFTOOL is None or not os.path.exists("/usr/include/bpf/bpf_helpers.h"):
        pytest.skip("clang, bpftool and libbpf-dev build the C test objects")
    if not os.path.exists(VMLINUX):
        pytest.skip("this kernel has no /sys/kernel/btf/vmlinux")
    out = tmp_path_factory.mktemp("objects")
    with open(out / "vmlinux.h", "w") as fh:
        subprocess.run([BPFTOOL, "btf", "dump", "file", VMLINUX, "format", "c"], stdout=fh,
                       check=True)
    built = {src.name.removesuffix(".bpf.c"): compile_bpf(src, out, src.name[:-2] + ".o",
                                                          f"-DPINNED={PINNED}")
             for src in sorted((HERE / "c").glob("*.bpf.c"))}
    for i in range(1, KINDS + 1):
        built[f"kinds{i}"] = compile_bpf(HERE / "c" / "kinds.bpf.c", out, f"kinds{i}.o",
                                         f"-DONLY={i}")
    return built


@pytest.fixture(scope="session")
def adder(tmp_path_factory) -> str:
    """The gcc-built uprobe target (``adder N`` calls add(i, 100) for i = 1..N)."""
    if GCC is None:
        pytest.skip("gcc builds the uprobe target")
    out = tmp_path_factory.mktemp("adder") / "adder"
    subprocess.run([GCC, "-O1", "-g", "-o", str(out), str(HERE / "c" / "adder.c")], check=True)
    return str(out)


def libbpf_loads(path: str) -> tuple[bool, str]:
    """Does ``bpftool prog loadall`` (libbpf) load the whole object?  (and its output)"""
    pin = f"/sys/fs/bpf/pyebpf_objtest_{os.getpid()}"
    try:
        res = subprocess.run([BPFTOOL, "prog", "loadall", path, pin], capture_output=True,
                             text=True)
        return res.returncode == 0, res.stderr
    finally:
        shutil.rmtree(pin, ignore_errors=True)
        unpin_by_name()


#: the name of multi.bpf.c's map pinned by name: /sys/fs/bpf/PINNED, one per
#: test run (two runs at once must not share it; under 16 characters)
PINNED = f"pc_{os.getpid()}"


def unpin_by_name() -> None:
    """Remove what the test objects pin by name (LIBBPF_PIN_BY_NAME)."""
    try:
        os.unlink(f"/sys/fs/bpf/{PINNED}")
    except OSError:
        pass
