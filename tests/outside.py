"""Material from outside the repository, found through one place.

Some tests read suites that are not part of pyebpf: the bpf_conformance
suite (``conformance/``), reference outputs of other tools
(``reference/examples/``) and bpftrace 0.17's runtime suite
(``bpftrace-runtime-0.17/``).  They live in one directory, named by the
environment variable ``PYEBPF_SHARED`` (default: ``shared`` beside the
checkout, ``ROOT/../shared``).  :func:`shared` gives a path inside it; when
the path is absent the test skips with a one-line reason naming the
variable, or fails when ``PYEBPF_REQUIRE_SHARED=1`` (CI sets it: .ci/run).
``from outside import shared`` works from any test: tests/ is on sys.path.
"""
from __future__ import annotations

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: the directory of outside material (``$PYEBPF_SHARED``, default ../shared)
SHARED = pathlib.Path(os.environ.get("PYEBPF_SHARED") or ROOT.parent / "shared")
#: set to 1 (CI does) to fail, not skip, the tests whose material is absent
REQUIRE_SHARED = os.environ.get("PYEBPF_REQUIRE_SHARED") == "1"
#: the start of every skip reason :func:`shared` gives (on the allow-list
#: of tests/conftest.py unless PYEBPF_REQUIRE_SHARED=1)
ABSENT = "outside material absent:"


def shared(sub: str) -> pathlib.Path:
    """``SHARED/sub``; skips the test when it does not exist (fails when
    PYEBPF_REQUIRE_SHARED=1), with a reason naming PYEBPF_SHARED."""
    path = SHARED / sub
    if not path.exists():
        why = f"{ABSENT} no {path} (PYEBPF_SHARED names its directory; docs/guide/setup.md)"
        if REQUIRE_SHARED:
            pytest.fail(f"PYEBPF_REQUIRE_SHARED=1 but {why}", pytrace=False)
        pytest.skip(why)
    return path
