"""Fixtures of the BTF tests: the kernel's BTF (parsed once) and the C test
objects, compiled once per session."""
from __future__ import annotations

import os

import pytest
from btf_testlib import BPFTOOL, CLANG, HERE, VMLINUX, compile_bpf, make_vmlinux_h

from pyebpf.btf import Btf


@pytest.fixture(scope="session")
def vmlinux() -> Btf:
    if not os.path.exists(VMLINUX):
        pytest.skip("this kernel has no /sys/kernel/btf/vmlinux")
    return Btf.vmlinux()


@pytest.fixture(scope="session")
def bpf_objects(tmp_path_factory) -> dict[str, str]:
    """``{name: path}`` of the objects built from tests/btf/c/*.bpf.c."""
    if CLANG is None or BPFTOOL is None or not os.path.exists("/usr/include/bpf/bpf_core_read.h"):
        pytest.skip("clang, bpftool and libbpf-dev (make debs) build the C test objects")
    if not os.path.exists(VMLINUX):
        pytest.skip("this kernel has no /sys/kernel/btf/vmlinux")
    out = tmp_path_factory.mktemp("btfobj")
    make_vmlinux_h(out)
    return {src.name.removesuffix(".bpf.c"): str(compile_bpf(src, out))
            for src in sorted((HERE / "c").glob("*.bpf.c"))}
