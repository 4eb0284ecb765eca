"""Budgets of the property tests (hypothesis), kept in one place.

CI runs every property test with a bounded number of examples so the suite
stays fast.  A long campaign multiplies every budget::

    PYEBPF_FUZZ_SCALE=100 make test PYTEST_ARGS='-k "fuzz or prop"'

Each property test asserts that only documented errors come out; a hang is
caught by the per-test timeout (pytest-timeout, ``timeout`` in pyproject.toml,
which dumps every thread's stack when it fires).
"""
from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

SCALE = float(os.environ.get("PYEBPF_FUZZ_SCALE", "1"))


def fuzz_settings(examples: int, **kwargs) -> settings:
    """``settings`` for a property test: ``examples`` times the campaign's
    scale, no per-example deadline (a loaded CI machine is slow), and no health
    check that would fail a test for being slow or for using a fixture."""
    kwargs.setdefault("deadline", None)
    kwargs.setdefault("suppress_health_check", list(HealthCheck))
    return settings(max_examples=max(1, int(examples * SCALE)), **kwargs)
