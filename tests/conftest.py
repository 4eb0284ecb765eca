"""Shared test configuration.

Tests marked ``kernel`` need the running kernel: bpf() as root (and tracefs,
perf events).  Where the kernel is not usable they skip, unless
``PYEBPF_REQUIRE_KERNEL=1`` (CI sets it, .ci/run): then each of them fails with
a message naming the switch and why the kernel is not usable.

Under the switch every skip is a failure too, unless its reason matches one
entry of :data:`ALLOWED_SKIPS` below: the one reviewed list of what may skip
in CI (what this kernel lacks).  A skip because a tool is missing, a set-up
step failed or pyebpf itself failed is a failure there.

Material from outside the repository (bpf_conformance, reference outputs,
bpftrace's runtime suite) is found through ``PYEBPF_SHARED``: see
tests/outside.py; ``PYEBPF_REQUIRE_SHARED=1`` makes its absence a failure.
"""
from __future__ import annotations

import os
import pathlib
import re

import pytest

from outside import ABSENT, REQUIRE_SHARED, SHARED, shared

ROOT = pathlib.Path(__file__).resolve().parent.parent
CONFORMANCE_DIR = SHARED / "conformance"
REQUIRE_KERNEL = os.environ.get("PYEBPF_REQUIRE_KERNEL") == "1"

#: The skip reasons allowed under PYEBPF_REQUIRE_KERNEL=1 (regular
#: expressions, searched in the reason): what the kernel or machine running
#: the suite lacks, as pyebpf's feature probes word it.  Keep it short and
#: reviewed: a new entry is a decision that a test may stay silent in CI.
ALLOWED_SKIPS: list[tuple[str, str]] = [
    # kprobes/kretprobes (this project's kernels are built without them)
    (r"^no kprobe PMU: ", "kprobes: the kernel has no CONFIG_KPROBES"),
    # kfunc/kretfunc (fentry/fexit) and LSM programs need BTF attach targets
    (r"^program type (TRACING|LSM) ", "kfunc/fentry/fexit, LSM programs"),
    (r"^this kernel refuses (lsm|fentry|fexit)\b", "LSM, fentry/fexit programs"),
    # hardware perf events (virtual machines have no CPU PMU; pyebpf.lang's words)
    (r"no PMU for hardware events|hardware events need the CPU's PMU", "hardware events"),
    # an interpreter an unprivileged user cannot run (pyenv's, under /root:
    # .ci/test-pythons' other versions); the tests that drop to uid 65534 run
    # in the same CI run under Debian's python3 (make test's first pass)
    (r"^an unprivileged user cannot run ", "an interpreter in root's home"),
    # outside material not present (only when PYEBPF_REQUIRE_SHARED is not 1;
    # when it is, tests/outside.py fails instead of skipping)
    (r"^" + re.escape(ABSENT), "outside material (PYEBPF_SHARED)"),
]
_ALLOWED = re.compile("|".join(f"(?:{p})" for p, _ in ALLOWED_SKIPS))

__all__ = ["ALLOWED_SKIPS", "CONFORMANCE_DIR", "REQUIRE_KERNEL", "REQUIRE_SHARED",
           "ROOT", "SHARED", "shared"]


def _tracefs() -> str | None:
    for path in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        if os.path.isdir(os.path.join(path, "events")):
            return path
    return None


def _kernel_unusable_reason() -> str | None:
    if os.geteuid() != 0:
        return "not root"
    try:
        from pyebpf.kernel import bpf_available
    except ImportError as exc:  # pragma: no cover - the layer is missing
        return f"pyebpf.kernel cannot be imported: {exc}"
    why = bpf_available()
    if why is not None:
        return f"bpf() refused: {why}"
    tracefs = _tracefs()
    if tracefs is None:
        return "tracefs is not mounted (/sys/kernel/tracing)"
    if not os.access(os.path.join(tracefs, "events"), os.R_OK | os.X_OK):
        return f"tracefs is not readable ({tracefs}/events)"
    return None


_KERNEL_REASON: list[str | None] = []


def kernel_unusable_reason() -> str | None:
    """Why the kernel cannot be used by the tests here (None: it can);
    asked once per run."""
    if not _KERNEL_REASON:
        _KERNEL_REASON.append(_kernel_unusable_reason())
    return _KERNEL_REASON[0]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    # Decided at set-up, not by adding marks after collection (pytest has
    # fixed each test's fixtures by then, so a usefixtures mark added in
    # pytest_collection_modifyitems never runs).
    if item.get_closest_marker("kernel") is None:
        return
    reason = kernel_unusable_reason()
    if reason is None:
        return
    if REQUIRE_KERNEL:
        pytest.fail(f"PYEBPF_REQUIRE_KERNEL=1 but the kernel is not usable: {reason}",
                    pytrace=False)
    pytest.skip(f"kernel not usable: {reason}")


def _skip_reason(longrepr) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _where(longrepr) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return f"{longrepr[0]}:{longrepr[1]}: "
    return ""


def _refuse_skip(report) -> None:
    """Turn a skip ``report`` into a failure unless its reason is allowed."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report.longrepr)
    if _ALLOWED.search(reason):
        return
    report.outcome = "failed"
    report.longrepr = (f"PYEBPF_REQUIRE_KERNEL=1: this test skipped, and its reason is not on "
                       f"the allow-list (ALLOWED_SKIPS, tests/conftest.py): "
                       f"{_where(report.longrepr)}{reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if REQUIRE_KERNEL:
        _refuse_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    if REQUIRE_KERNEL:
        _refuse_skip(outcome.get_result())


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
    """The bpf_conformance suite's data files ($PYEBPF_SHARED/conformance)."""
    return shared("conformance")


@pytest.fixture(scope="session", autouse=True)
def _caches(tmp_path_factory):
    """pyebpf's caches in temporary directories, not the user's: the kernel
    BTF's index (``PYEBPF_BTF_CACHE``) and ``pyebpf bt``'s compiled programs
    (``$XDG_CACHE_HOME/pyebpf/bt``; the suite's runs share it, so a program
    run twice starts from the cache the second time)."""
    names = ("PYEBPF_BTF_CACHE", "XDG_CACHE_HOME")
    old = {name: os.environ.get(name) for name in names}
    for name in names:
        os.environ[name] = str(tmp_path_factory.mktemp(name.lower()))
    yield
    for name, value in old.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
