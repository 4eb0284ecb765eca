"""Fixtures for the event reader tests: both readers behind one interface."""
from __future__ import annotations

import pytest

from pyebpf.events import PerfBuffer, RingBufferReader

from .producers import Producer


class Kind:
    """How to make a reader of one kind, and a producer writing to it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def reader(self, *, size: int = 1 << 20, **kw):
        if self.name == "perf":
            return PerfBuffer(size=size, **kw)
        return RingBufferReader(size=size, drops=True, **kw)

    def producer(self, reader, payload: int = 16, **kw) -> Producer:
        if self.name == "perf":
            return Producer(reader.array, payload, **kw)
        return Producer(reader.ringbuf, payload, drops=reader.drops, **kw)

    def __repr__(self) -> str:
        return self.name


@pytest.fixture(params=["perf", "ringbuf"])
def kind(request) -> Kind:
    return Kind(request.param)
