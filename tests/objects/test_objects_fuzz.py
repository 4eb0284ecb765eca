"""Damaged objects: opening a truncated or corrupted object raises a
:class:`~pyebpf.errors.PyebpfError` (or succeeds), never another exception."""
from __future__ import annotations

import pytest
from budget import fuzz_settings
from hypothesis import given, strategies as st

from pyebpf.errors import PyebpfError
from pyebpf.objects import BpfObject

_DATA: dict[str, bytes] = {}


@pytest.fixture(scope="module", autouse=True)
def _samples(objects) -> None:
    """The objects' bytes in _DATA (not a test argument: hypothesis would
    print megabytes of it with a failing example)."""
    for name in ("execsnoop", "multi", "uprobe"):
        with open(objects[name], "rb") as fh:
            _DATA[name] = fh.read()


def _open(data: bytes) -> None:
    try:
        obj = BpfObject("<fuzz>", data)
    except PyebpfError:
        return
    obj.needs()
    for name in obj.globals:
        try:
            obj.globals[name]
        except PyebpfError:
            pass
    obj.close()


@fuzz_settings(150)
@given(which=st.sampled_from(["execsnoop", "multi", "uprobe"]), cut=st.floats(0, 1))
def test_truncated(which, cut):
    data = _DATA[which]
    _open(data[:int(len(data) * cut)])


@fuzz_settings(300)
@given(which=st.sampled_from(["execsnoop", "multi", "uprobe"]),
       flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_corrupted(which, flips):
    data = bytearray(_DATA[which])
    for where, value in flips:
        data[min(int(len(data) * where), len(data) - 1)] = value
    _open(bytes(data))
