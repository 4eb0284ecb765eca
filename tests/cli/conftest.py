"""Helpers for the command-line tests: run ``python -m pyebpf`` and build
the trace workload (shared with tests/trace)."""
from __future__ import annotations

import importlib.util
import pathlib

import pytest

_spec = importlib.util.spec_from_file_location(
    "_trace_helpers", pathlib.Path(__file__).resolve().parent.parent / "trace" / "conftest.py")
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)          # type: ignore[union-attr]
cli = helpers.cli
ROOT = helpers.ROOT


@pytest.fixture(scope="session")
def workload() -> str:
    return helpers.build_workload()
