"""Shared test configuration.

Tests marked ``kernel`` talk to the real kernel through bpf().  They skip when
the kernel is not usable (not root, no bpf()), unless PYEBPF_REQUIRE_KERNEL=1,
in which case they fail: CI sets it so that nothing skips silently.
"""
from __future__ import annotations

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
CONFORMANCE_DIR = SHARED / "conformance"
REQUIRE_KERNEL = os.environ.get("PYEBPF_REQUIRE_KERNEL") == "1"


def _kernel_unusable_reason() -> str | None:
    if os.geteuid() != 0:
        return "not root"
    try:
        from pyebpf.kernel import bpf_available
    except ImportError as exc:  # pragma: no cover - the layer is missing
        return f"pyebpf.kernel cannot be imported: {exc}"
    return bpf_available()


def pytest_collection_modifyitems(config, items):
    kernel_items = [i for i in items if i.get_closest_marker("kernel")]
    if not kernel_items:
        return
    reason = _kernel_unusable_reason()
    if reason is None:
        return
    for item in kernel_items:
        if REQUIRE_KERNEL:
            item.add_marker(pytest.mark.usefixtures("_kernel_required_but_missing"))
        else:
            item.add_marker(pytest.mark.skip(reason=f"kernel not usable: {reason}"))


@pytest.fixture
def _kernel_required_but_missing():
    pytest.fail(f"PYEBPF_REQUIRE_KERNEL=1 but the kernel is not usable: {_kernel_unusable_reason()}")


def open_fds() -> set[int]:
    """The set of this process's open file descriptors."""
    return {int(n) for n in os.listdir("/proc/self/fd")}


@pytest.fixture
def no_fd_leak():
    """Fails the test if it leaves file descriptors open."""
    import gc
    gc.collect()
    before = open_fds()
    yield
    gc.collect()
    leaked = open_fds() - before
    # /proc/self/fd listing itself may be open transiently; re-check
    leaked = {fd for fd in leaked if os.path.exists(f"/proc/self/fd/{fd}")}
    assert not leaked, f"leaked fds: {sorted(leaked)} -> " + ", ".join(
        os.readlink(f"/proc/self/fd/{fd}") for fd in sorted(leaked))


@pytest.fixture(scope="session")
def conformance_dir() -> pathlib.Path:
    if not CONFORMANCE_DIR.is_dir():
        pytest.fail(f"bpf_conformance tests not found at {CONFORMANCE_DIR}")
    return CONFORMANCE_DIR


@pytest.fixture(scope="session", autouse=True)
def _btf_index_cache(tmp_path_factory):
    """The kernel BTF's index cache in a temporary directory, not the user's."""
    old = os.environ.get("PYEBPF_BTF_CACHE")
    os.environ["PYEBPF_BTF_CACHE"] = str(tmp_path_factory.mktemp("btf-index-cache"))
    yield
    if old is None:
        os.environ.pop("PYEBPF_BTF_CACHE", None)
    else:
        os.environ["PYEBPF_BTF_CACHE"] = old
